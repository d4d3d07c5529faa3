"""MPPD pair counts as the report shows them, the small-cell rule re-applied.

The service already withholds means over fewer than 11 pairs (``<11``,
:func:`~batch_axes.equilense.suppress_small_cells`); an older file or another writer may
not have, so the report applies the rule again: primary suppression of an entry below
:data:`~monitor.core.privacy.SMALL_CELL` pairs (or withheld by the writer), secondary
suppression over the groups of an attribute (the reference bars, and the pairs of groups
of the matrix), and the shown pair counts rounded.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from monitor.core.privacy import SMALL_CELL, rounded_count, suppressed_groups
from monitor.publish.shown import SMALL, Withheld

K = TypeVar("K", bound=Hashable)

#: A pair count as stored (withheld by the writer: ``<11``, its stored form) or as this
#: module withholds it.
Pairs = int | str | Withheld


def _pairs_shown(pairs: Pairs) -> int | None:
    """A pair count the page may show: None when withheld or below SMALL_CELL."""
    return pairs if isinstance(pairs, int) and pairs >= SMALL_CELL else None


def _pair_size(pairs: Pairs) -> int:
    """A pair count for secondary suppression: a withheld one counts as 1, the fewest it
    can hold, so the withheld entries are never assumed to hold more than they may."""
    return pairs if isinstance(pairs, int) else 1


def family_hidden(sizes: Mapping[K, Pairs]) -> frozenset[K]:
    """The entries of one per-group family to withhold: primary (below SMALL_CELL, or
    withheld by the writer) and secondary (:func:`~monitor.core.privacy.suppressed_groups`).

    >>> sorted(family_hidden({"a": "<11", "b": 40, "c": 300}))
    ['a', 'b']
    >>> sorted(family_hidden({"a": 12, "b": 40, "c": 300}))
    []
    """
    primary = {k for k, n in sizes.items() if _pairs_shown(n) is None}
    return frozenset(primary | suppressed_groups({k: _pair_size(n) for k, n in sizes.items()}))


def _either(a: int | str, b: int | str) -> int | Withheld:
    """One count for a pair of groups whichever is the anchor: the smaller, withheld when
    either is."""
    return min(a, b) if isinstance(a, int) and isinstance(b, int) else SMALL


def published_pair_matrix(
    pairs: Sequence[Sequence[int | str]],
) -> tuple[tuple[int | None, ...], ...]:
    """A pairwise matrix's pair counts as the page shows them: each pair of groups (i, j)
    counted once, whichever is the anchor (the smaller count, withheld when either is),
    withheld as one family (:func:`family_hidden`: None), the others rounded.

    >>> published_pair_matrix([[400, 12], [13, 300]])
    ((400, 10), (15, 300))
    >>> published_pair_matrix([[400, "<11"], [4, 300]])  # 300: secondary suppression
    ((400, None), (None, None))
    """
    k = len(pairs)
    cells = family_hidden(
        {(i, j): _either(pairs[i][j], pairs[j][i]) for i in range(k) for j in range(i, k)}
    )
    return tuple(
        tuple(
            None if (min(i, j), max(i, j)) in cells else rounded_count(pairs[i][j])  # type: ignore[arg-type]  # not withheld: a count
            for j in range(k)
        )
        for i in range(k)
    )
