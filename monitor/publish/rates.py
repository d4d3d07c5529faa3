"""The intervention audit's per-group figures as they leave the service (``intervene``'s
files): selection rates and group sizes of each part of the split.

A part's groups are families under the small-cell rule, an intersection's linked to its
margins (:func:`~monitor.core.privacy.model_withheld`): "Black" minus a shown "Black x
Male" must not leave a withheld "Black x Female".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from monitor.core.privacy import model_withheld, rounded_rate
from monitor.publish.counts import family_values
from monitor.publish.encode import encoded_values
from monitor.publish.shown import Published, Shown


def rate_values(
    codes: Sequence[str],
    rates: np.ndarray,
    counts: np.ndarray,
    hidden: frozenset[str] | None = None,
) -> dict[str, Published[float | None]]:
    """A part's selection rate per group as published: withheld for the groups the split
    summary withholds (:func:`~monitor.publish.counts.family_values` of the same sizes),
    the others to :data:`~monitor.core.privacy.RATE_DECIMALS` (an exact rate s/n beside
    a size rounded to 5 gives the exact size back). ``hidden``: the withheld groups as
    decided with the linked families (:func:`linked_hidden`).

    >>> out = rate_values(["a", "b", "c"], np.array([0.5, 0.41, 0.3]), np.array([4, 86, 646]))
    >>> out["a"].why.name, out["b"].why.name, out["c"]
    ('SMALL_CELL', 'SECONDARY', Shown(value=0.3))
    """
    sizes = family_values({c: int(n) for c, n in zip(codes, counts, strict=True)}, hidden)
    return {
        c: Shown(rounded_rate(float(r))) if isinstance(sizes[c], Shown) else sizes[c]  # type: ignore[misc]  # withheld: its size's reason
        for c, r in zip(codes, rates, strict=True)
    }


def published_rates(
    codes: Sequence[str],
    rates: np.ndarray,
    counts: np.ndarray,
    hidden: frozenset[str] | None = None,
) -> dict[str, float | str | None]:
    """:func:`rate_values` as the intervention audit's files write them.

    >>> published_rates(["a", "b", "c"], np.array([0.5, 0.4123, 0.3]), np.array([4, 86, 646]))
    {'a': '<11', 'b': '<11', 'c': 0.3}
    """
    return encoded_values(rate_values(codes, rates, counts, hidden))


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
