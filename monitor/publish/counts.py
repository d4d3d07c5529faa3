"""One count, and one family of group sizes, as they leave the service.

A count below the small-cell rule shows :data:`~monitor.core.privacy.SMALL_CELL_LABEL`;
the others are rounded to :data:`~monitor.core.privacy.ROUNDING_BASE`
(:func:`~monitor.core.privacy.rounded_count`, re-exported here for the outputs that
round a count that is never small: a stream position, a pair count already checked).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from monitor.core.privacy import (
    SMALL_CELL,
    SMALL_CELL_LABEL,
    family_withheld,
    reportable,
    rounded_count,
    rounded_rate,
)

K = TypeVar("K")

__all__ = ["published_count", "published_family", "published_left_out", "published_size",
           "rounded_count", "rounded_rate"]  # fmt: skip


def published_count(n: int | float | None) -> int | str:
    """A count as it leaves the service: withheld below the small-cell rule, else rounded.

    >>> published_count(4), published_count(87)
    ('<11', 85)
    """
    return rounded_count(n) if reportable(n) else SMALL_CELL_LABEL


def published_size(n: int) -> int | str:
    """:func:`published_count`, except that an empty count stays 0: it discloses no
    patient, and ``<11`` would say some were there.

    >>> published_size(0), published_size(2), published_size(59)
    (0, '<11', 60)
    """
    return 0 if n == 0 else published_count(n)


def published_family(
    sizes: Mapping[K, int | str], hidden: frozenset[K] | None = None
) -> dict[K, int | str]:
    """The sizes of one family of groups (an attribute's groups, a cohort's folds) as
    they leave the service: the groups of :func:`~monitor.core.privacy.family_withheld`
    show SMALL_CELL_LABEL, the others their size rounded (:func:`rounded_count`), an empty
    group 0. The family's total must be published rounded too (``published_count``):
    an exact total minus rounded parts is still fuzzy, but an exact total minus exact
    parts is the withheld group. ``hidden``: the family's withheld groups when decided
    with its linked families (:func:`~monitor.core.privacy.model_withheld`), else
    :func:`~monitor.core.privacy.family_withheld`.

    >>> published_family({"a": 4, "b": 86, "c": 646, "d": 3458})
    {'a': '<11', 'b': '<11', 'c': 645, 'd': 3460}
    >>> published_family({"x": 0, "y": 40, "z": 52})
    {'x': 0, 'y': 40, 'z': 50}
    """
    if hidden is None:
        hidden = family_withheld(sizes)
    return {
        g: SMALL_CELL_LABEL if g in hidden else rounded_count(n)  # type: ignore[arg-type]  # not hidden: a count
        for g, n in sizes.items()
    }


def published_left_out(counts: Mapping[str, int]) -> dict[str, int | str]:
    """Counts of invalid records left out of an audit, by reason, as its files show them:
    1-10 withheld (``<11``, as every figure of the files: they travel further than the
    terminal the audit ran in), 0 and the larger ones as they are.

    >>> published_left_out({"no score": 4, "bad age": 0, "no label": 120})
    {'no score': '<11', 'bad age': 0, 'no label': 120}
    """
    return {k: SMALL_CELL_LABEL if 0 < v < SMALL_CELL else v for k, v in counts.items()}
