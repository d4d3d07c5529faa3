"""The model-health panel's AUROC: one value per block of consecutive records.

The statistic is the service's own, :func:`monitor.core.drift.rank_auroc` (the
Mann-Whitney statistic with midranks: sklearn's ``roc_auc_score``, ties counted half).
The page needs it for every block of the latest records at once (174 blocks of 1,000 in
the demo's file), so :func:`block_aurocs` ranks all the blocks in one pass of numpy
instead of one ``scipy.stats.rankdata`` call each.

Why not call ``rank_auroc`` per block: importing :mod:`monitor.core.drift` loads river,
which loads scikit-learn and ``scipy.stats`` (about 0.7 s, a fifth of the report's time
on the demo's file), and the 174 calls cost some 60 ms more. The result is the same
float: a midrank is a half-integer and so is every partial sum of them (exact in float64
far beyond a block's size), so the sum of the positives' ranks does not depend on the
order it is added in, and the last two operations are ``rank_auroc``'s own
(tests/report/test_auroc.py compares the two bit for bit under hypothesis). A block with
a score that is not a number gets ``rank_auroc``'s value, computed by it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from monitor.publish.counts import rounded_count
from monitor.publish.rule import SMALL_CELL


@dataclass(frozen=True)
class AurocPoint:
    records: int  # stream position at the block's end, rounded
    auroc: float


def block_midranks(scores: np.ndarray) -> np.ndarray:
    """Midranks (1-based; tied values share the mean of their ranks) within each row.

    >>> block_midranks(np.array([[0.3, 0.1, 0.3, 0.2], [1.0, 1.0, 1.0, 0.0]])).tolist()
    [[3.5, 1.0, 3.5, 2.0], [3.0, 3.0, 3.0, 1.0]]
    """
    rows, width = scores.shape
    if scores.size == 0:
        return np.zeros(scores.shape, np.float64)
    order = np.argsort(scores, axis=1, kind="stable")
    ranked = np.take_along_axis(scores, order, axis=1).ravel()
    # a run of equal values starts at each row's start and wherever the value changes
    starts = np.ones(ranked.size, bool)
    starts[1:] = ranked[1:] != ranked[:-1]
    starts[::width] = True
    run = np.cumsum(starts) - 1
    position = np.tile(np.arange(width, dtype=np.int64), rows)
    ends = np.append(starts[1:], True)  # a run ends where the next one starts
    mid = ((position[starts] + position[ends]) / 2.0 + 1.0)[run]
    out = np.empty((rows, width), np.float64)
    np.put_along_axis(out, order, mid.reshape(rows, width), axis=1)
    return out


def block_aurocs(labels: np.ndarray, scores: np.ndarray) -> list[float]:
    """``rank_auroc`` of each row of ``labels`` (0/1) and ``scores``; every row must hold
    both classes (as ``rank_auroc`` requires).

    >>> block_aurocs(np.array([[0, 1, 1], [1, 0, 0]]), np.array([[0.2, 0.9, 0.2], [0.5, 0.5, 0.1]]))
    [0.75, 0.75]
    """
    y = labels.astype(bool)
    n_pos = y.sum(axis=1)
    finite = ~np.isnan(scores).any(axis=1)
    ranks = block_midranks(np.where(finite[:, None], scores, 0.0))
    rank_sums = np.where(y, ranks, 0.0).sum(axis=1)
    out = []
    for k in range(len(y)):
        pos = int(n_pos[k])
        neg = y.shape[1] - pos
        if not finite[k]:  # NaN: rank_auroc's own answer (scipy's rankdata propagates it)
            from monitor.core.drift import rank_auroc

            out.append(rank_auroc(labels[k], scores[k]))
            continue
        # rank_auroc's arithmetic on the same (exact) rank sum
        out.append(float((rank_sums[k] - pos * (pos + 1) / 2) / (pos * neg)))
    return out


def rolling_auroc(label: np.ndarray, score: np.ndarray, block: int, end: int) -> list[AurocPoint]:
    """AUROC of consecutive blocks of ``block`` records (ending at stream position ``end``).

    A block is left out when either class has fewer than SMALL_CELL records: an
    AUROC over three positives describes three patients. The AUROC is the service's own
    midrank Mann-Whitney statistic (:func:`monitor.core.drift.rank_auroc`, sklearn's value
    with ties counted half), all blocks at once (:func:`block_aurocs`):
    ``roc_auc_score``'s input validation took 60 % of reading the demo's file (174 blocks;
    docs/decisions.md, "The page in under a second").
    """
    n = len(label)
    start0 = n % block
    starts = []
    for s in range(start0, n - block + 1, block):
        pos = int(label[s : s + block].sum())
        if pos < SMALL_CELL or block - pos < SMALL_CELL:
            continue
        starts.append(s)
    if not starts:
        return []
    take = np.asarray(starts)[:, None] + np.arange(block)
    aurocs = block_aurocs(label[take], score[take])
    # the block's end is a stream position, i.e. a record count: published rounded
    return [
        AurocPoint(rounded_count(end - n + s + block), a)
        for s, a in zip(starts, aurocs, strict=True)
    ]
