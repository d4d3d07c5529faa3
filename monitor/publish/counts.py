"""One count, and one family of group sizes, as they leave the service.

A count below the small-cell rule is :class:`~monitor.publish.shown.Withheld`; the others
are rounded to :data:`~monitor.core.privacy.ROUNDING_BASE`
(:func:`~monitor.core.privacy.rounded_count`, re-exported here for the outputs that
round a count that is never small: a stream position, a pair count already checked).
The ``*_value`` functions return the typed values; the ``published_*`` ones their JSON
form (:mod:`monitor.publish.encode`: ``<11`` for a withheld one), what the files and the
API write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from monitor.core.privacy import (
    SMALL_CELL,
    family_withheld,
    reportable,
    rounded_count,
    rounded_rate,
)
from monitor.publish.encode import encoded, encoded_values
from monitor.publish.shown import SECONDARY, SMALL, Published, Shown

K = TypeVar("K")

__all__ = ["count_value", "family_values", "left_out_values", "published_count",
           "published_family", "published_left_out", "published_size", "rounded_count",
           "rounded_rate", "size_value"]  # fmt: skip


def count_value(n: int | float | None) -> Published[int]:
    """A count as it leaves the service: withheld below the small-cell rule, else rounded.

    >>> count_value(4).why.name, count_value(87)
    ('SMALL_CELL', Shown(value=85))
    """
    return Shown(rounded_count(n)) if reportable(n) else SMALL


def published_count(n: int | float | None) -> int | str:
    """:func:`count_value` as the JSON and CSV writers show it.

    >>> published_count(4), published_count(87)
    ('<11', 85)
    """
    return encoded(count_value(n))


def size_value(n: int) -> Published[int]:
    """:func:`count_value`, except that an empty count stays 0: it discloses no patient,
    and a withheld one would say some were there.

    >>> size_value(0), size_value(59)
    (Shown(value=0), Shown(value=60))
    """
    return Shown(0) if n == 0 else count_value(n)


def published_size(n: int) -> int | str:
    """:func:`size_value` as the JSON and CSV writers show it.

    >>> published_size(0), published_size(2), published_size(59)
    (0, '<11', 60)
    """
    return encoded(size_value(n))


def _small(n: int | str) -> bool:
    """Whether a size is itself below the rule (1-10 records, or read back withheld)."""
    return isinstance(n, str) or 0 < n < SMALL_CELL


def family_values(
    sizes: Mapping[K, int | str], hidden: frozenset[K] | None = None
) -> dict[K, Published[int]]:
    """The sizes of one family of groups (an attribute's groups, a cohort's folds) as
    they leave the service: the groups of :func:`~monitor.core.privacy.family_withheld`
    withheld (a small one for its size, the others by secondary suppression), the others
    their size rounded (:func:`rounded_count`), an empty group 0. The family's total must
    be published rounded too (``count_value``): an exact total minus rounded parts is
    still fuzzy, but an exact total minus exact parts is the withheld group. ``hidden``:
    the family's withheld groups when decided with its linked families
    (:func:`~monitor.core.privacy.model_withheld`), else
    :func:`~monitor.core.privacy.family_withheld`. A size may be given withheld already
    (``<11``, as a stored result holds it).

    >>> out = family_values({"a": 4, "b": 86, "c": 0, "d": 646})
    >>> [out["a"].why.name, out["b"].why.name], out["c"], out["d"]
    (['SMALL_CELL', 'SECONDARY'], Shown(value=0), Shown(value=645))
    """
    if hidden is None:
        hidden = family_withheld(sizes)
    return {
        g: (SMALL if _small(n) else SECONDARY) if g in hidden else Shown(rounded_count(n))  # type: ignore[arg-type]  # not hidden: a count
        for g, n in sizes.items()
    }


def published_family(
    sizes: Mapping[K, int | str], hidden: frozenset[K] | None = None
) -> dict[K, int | str]:
    """:func:`family_values` as the JSON and CSV writers show them.

    >>> published_family({"a": 4, "b": 86, "c": 646, "d": 3458})
    {'a': '<11', 'b': '<11', 'c': 645, 'd': 3460}
    >>> published_family({"x": 0, "y": 40, "z": 52})
    {'x': 0, 'y': 40, 'z': 50}
    """
    return encoded_values(family_values(sizes, hidden))


def left_out_values(counts: Mapping[str, int]) -> dict[str, Published[int]]:
    """Counts of invalid records left out of an audit, by reason, as its files show them:
    1-10 withheld (as every figure of the files: they travel further than the terminal
    the audit ran in), 0 and the larger ones as they are.

    >>> left_out_values({"no score": 4, "no label": 120})["no label"]
    Shown(value=120)
    """
    return {k: SMALL if 0 < v < SMALL_CELL else Shown(v) for k, v in counts.items()}


def published_left_out(counts: Mapping[str, int]) -> dict[str, int | str]:
    """:func:`left_out_values` as the files show them.

    >>> published_left_out({"no score": 4, "bad age": 0, "no label": 120})
    {'no score': '<11', 'bad age': 0, 'no label': 120}
    """
    return encoded_values(left_out_values(counts))
