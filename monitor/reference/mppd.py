"""All-pairs MPPD oracles: the dense matcher and record loops, word for word as
docs/method.md section 7.

Slow on purpose (O(n^2 x features) matching, Python loops over records): they check
:mod:`batch_axes.mppd`'s neighbour-index matcher and vectorised MPPD. The pair predicate
and the result finishing are shared with the fast path, so the comparison is about the
search and the aggregation, not about two ways of rounding.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from batch_axes.mppd import (
    _BLOCK_ELEMENTS,
    DEFAULT_MIN_PAIRS,
    DEFAULT_THRESHOLD,
    MPPDPairwise,
    MPPDReference,
    Pairs,
    _as_groups,
    _as_scores,
    _check_threshold,
    _empty_pairs,
    _empty_reference_result,
    _neighbour_lists,
    _pairwise_result,
    _reference_result,
    _sorted_pairs,
    unit_rows,
)


def matched_pairs_all_pairs(X: Any, threshold: float = DEFAULT_THRESHOLD) -> Pairs:
    """The same pairs from the dense cosine-distance matrix: the test oracle.

    Computes every entry ``d[i, j] = 1 - sum_k u_ik u_jk`` of the n x n matrix,
    one block of rows at a time (blocks only bound memory), feature by feature
    (the same arithmetic as the fast path's exact predicate), and keeps
    ``i < j`` with ``d < threshold`` between two records with a defined
    direction. Deliberately the plainest possible computation: O(n^2 x
    features) work, no index, no symmetry shortcut.
    """
    t = _check_threshold(threshold)
    U, valid = unit_rows(X)
    n, f = U.shape
    if f == 0 or n < 2:
        return _empty_pairs()
    Ut = np.ascontiguousarray(U.T)
    block = max(1, _BLOCK_ELEMENTS // n)
    found_i: list[np.ndarray] = []
    found_j: list[np.ndarray] = []
    for start in range(0, n, block):
        stop = min(n, start + block)
        # acc[a, j] = sum_k u[start + a, k] * u[j, k], summed in feature order.
        acc = Ut[0, start:stop, None] * Ut[0, None, :]
        for k in range(1, f):
            acc += Ut[k, start:stop, None] * Ut[k, None, :]
        d = 1.0 - acc
        a, j = np.nonzero(d < t)
        i = a + start
        keep = (i < j) & valid[i] & valid[j]
        found_i.append(i[keep])
        found_j.append(j[keep])
    return _sorted_pairs(np.concatenate(found_i), np.concatenate(found_j), n)


def mppd_reference_loop(
    p: Any,
    groups: Any,
    pairs: Pairs,
    reference: str | None = None,
    min_pairs: int = DEFAULT_MIN_PAIRS,
) -> MPPDReference:
    """Reference-based MPPD as a plain loop over records (docs/method.md section 7).

    Slow on purpose: it checks the vectorised :func:`mppd_reference`.
    """
    scores = [float(x) for x in _as_scores(p)]
    labels = [str(x) for x in _as_groups(groups, len(scores))]
    neighbours = _neighbour_lists(pairs, len(scores))
    names = sorted(set(labels))
    if not names:
        return _empty_reference_result(reference, min_pairs)
    sizes = {g: labels.count(g) for g in names}
    if reference is None:
        largest = max(sizes.values())
        ref = next(g for g in names if sizes[g] == largest)  # names are sorted
    else:
        ref = str(reference)
        if ref not in sizes:
            raise ValueError(f"reference group {ref!r} has no record in this cohort")
    sums = dict.fromkeys(names, 0.0)
    counts = dict.fromkeys(names, 0)
    for r in range(len(scores)):
        if labels[r] != ref:
            continue
        for j in neighbours[r]:
            sums[labels[j]] += abs(scores[r] - scores[j])
            counts[labels[j]] += 1
    return _reference_result(ref, names, sums, counts, min_pairs)


def mppd_pairwise_loop(
    p: Any, groups: Any, pairs: Pairs, min_pairs: int = DEFAULT_MIN_PAIRS
) -> MPPDPairwise:
    """Pairwise MPPD as a plain loop over every record and its matches (checks the fast one)."""
    scores = [float(x) for x in _as_scores(p)]
    labels = [str(x) for x in _as_groups(groups, len(scores))]
    neighbours = _neighbour_lists(pairs, len(scores))
    names = sorted(set(labels))
    sums: dict[tuple[str, str], float] = defaultdict(float)
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for a in range(len(scores)):
        for b in neighbours[a]:
            sums[(labels[a], labels[b])] += abs(scores[a] - scores[b])
            counts[(labels[a], labels[b])] += 1
    return _pairwise_result(names, sums, counts, min_pairs)


def mppd_reference_all_pairs(
    X: Any,
    p: Any,
    groups: Any,
    threshold: float = DEFAULT_THRESHOLD,
    reference: str | None = None,
    min_pairs: int = DEFAULT_MIN_PAIRS,
) -> MPPDReference:
    """Oracle reference-based MPPD: all-pairs matching, then the record loop."""
    return mppd_reference_loop(
        p, groups, matched_pairs_all_pairs(X, threshold), reference, min_pairs
    )


def mppd_pairwise_all_pairs(
    X: Any,
    p: Any,
    groups: Any,
    threshold: float = DEFAULT_THRESHOLD,
    min_pairs: int = DEFAULT_MIN_PAIRS,
) -> MPPDPairwise:
    """Oracle pairwise MPPD: all-pairs matching, then the record loop."""
    return mppd_pairwise_loop(p, groups, matched_pairs_all_pairs(X, threshold), min_pairs)

