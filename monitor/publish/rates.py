"""The intervention audit's per-group figures as they leave the service (``intervene``'s
files): selection rates and group sizes of each part of the split.

A part's groups are families under the small-cell rule, an intersection's linked to its
margins (:func:`~monitor.core.privacy.model_withheld`): "Black" minus a shown "Black x
Male" must not leave a withheld "Black x Female".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from monitor.core.privacy import SMALL_CELL_LABEL, family_withheld, model_withheld, rounded_rate


def published_rates(
    codes: Sequence[str],
    rates: np.ndarray,
    counts: np.ndarray,
    hidden: frozenset[str] | None = None,
) -> dict[str, float | str | None]:
    """A part's selection rate per group as published: ``<11`` for the groups the split
    summary withholds (:func:`~monitor.core.privacy.family_withheld` of the same sizes),
    the others to :data:`~monitor.core.privacy.RATE_DECIMALS` (an exact rate s/n beside
    a size rounded to 5 gives the exact size back). ``hidden``: the withheld groups as
    decided with the linked families (:func:`linked_hidden`).

    >>> published_rates(["a", "b", "c"], np.array([0.5, 0.4123, 0.3]), np.array([4, 86, 646]))
    {'a': '<11', 'b': '<11', 'c': 0.3}
    """
    if hidden is None:
        hidden = family_withheld({c: int(n) for c, n in zip(codes, counts, strict=True)})
    return {
        c: SMALL_CELL_LABEL if c in hidden else rounded_rate(float(r))
        for c, r in zip(codes, rates, strict=True)
    }


def linked_hidden(
    groups: Iterable[tuple[str, Sequence[str], Sequence[int] | np.ndarray]],
) -> dict[str, frozenset[str]]:
    """The withheld groups of a part's attributes, each given as (name, codes, counts),
    an intersection's linked to its margins (:func:`~monitor.core.privacy.model_withheld`).

    >>> out = linked_hidden([("race", ["B", "W"], [30, 70]), ("sex", ["F", "M"], [47, 53]),
    ...     ("race_x_sex", ["B:F", "B:M", "W:F", "W:M"], [7, 23, 40, 30])])
    >>> sorted(out["race_x_sex"])
    ['B:F', 'B:M', 'W:F', 'W:M']
    """
    sizes: dict[str, Mapping[str, int]] = {
        name: {c: int(n) for c, n in zip(codes, counts, strict=True)}
        for name, codes, counts in groups
    }
    return model_withheld(sizes)
