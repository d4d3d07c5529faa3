"""The same metrics computed directly from record arrays: the slow, obvious oracle.

Written independently of :mod:`monitor.core.metrics` (no count tables, one group at a
time with boolean masks) so that the two can check each other.

Support rule (docs/decisions.md): a group's rate is used only when the records it is
computed from (its positives for TPR, negatives for FPR, flagged records for PPV, all its
records otherwise) number at least ``min_support`` (and at least one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _rates(values: list[float]) -> float:
    if len(values) < 2:
        return math.nan
    return max(values) - min(values)


def metric_from_records(
    name: str,
    group: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    score: np.ndarray,
    included: Sequence[int],
    bins: int = 10,
    min_support: int = 1,
) -> float:
    """Value of metric ``name`` over the included groups of one attribute."""
    need = max(int(min_support), 1)

    def enough(mask: np.ndarray) -> bool:
        return int(np.count_nonzero(mask)) >= need

    masks = {g: group == g for g in included}
    if name not in ("EOPP", "EOD", "PP"):  # rates over all the group's records
        masks = {g: m for g, m in masks.items() if enough(m)}
    if len(masks) < 2:
        return math.nan
    if name in ("DI", "SPD"):
        sr = [float(decision[m].mean()) for m in masks.values()]
        if name == "SPD":
            return max(sr) - min(sr)
        return 1.0 if max(sr) == 0 else min(sr) / max(sr)
    if name == "EOPP":
        tpr = [
            float(decision[m & (label == 1)].mean())
            for m in masks.values()
            if enough(m & (label == 1))
        ]
        return _rates(tpr)
    if name == "EOD":
        tprs, fprs = [], []
        for m in masks.values():
            pos, neg = m & (label == 1), m & (label == 0)
            if enough(pos) and enough(neg):
                tprs.append(float(decision[pos].mean()))
                fprs.append(float(decision[neg].mean()))
        if len(tprs) < 2:
            return math.nan
        return max(_rates(tprs), _rates(fprs))
    if name == "PP":
        ppv = [
            float(label[m & (decision == 1)].mean())
            for m in masks.values()
            if enough(m & (decision == 1))
        ]
        return _rates(ppv)
    if name == "TI":
        keep = np.isin(group, list(masks))
        benefit = (decision - label + 1).astype(np.float64)
        mu = float(benefit[keep].mean())
        if mu == 0:
            return math.nan
        n = int(keep.sum())
        total = 0.0
        for m in masks.values():
            mu_g = float(benefit[m].mean())
            if mu_g > 0:
                total += (m.sum() / n) * (mu_g / mu) * math.log(mu_g / mu)
        return total
    if name in ("CAL", "CAL_GAP"):
        out = []
        for m in masks.values():
            s, y = score[m], label[m]
            if name == "CAL_GAP":
                out.append(abs(float(s.mean()) - float(y.mean())))
                continue
            b = np.clip(np.floor(s * bins).astype(int), 0, bins - 1)
            ece = 0.0
            for k in range(bins):
                in_bin = b == k
                if in_bin.any():
                    ece += (
                        in_bin.sum()
                        / len(s)
                        * abs(float(y[in_bin].mean()) - float(s[in_bin].mean()))
                    )
            out.append(ece)
        return max(out)
    raise ValueError(f"unknown metric {name!r}")


def _denominator_from_records(
    name: str, m: np.ndarray, label: np.ndarray, decision: np.ndarray
) -> int:
    """The records one group's rate of metric ``name`` rests on (its mask ``m``): positives
    for EOPP, the fewer of positives and negatives for EOD, flagged for PP, all otherwise."""
    if name == "EOPP":
        return int((m & (label == 1)).sum())
    if name == "EOD":
        return min(int((m & (label == 1)).sum()), int((m & (label == 0)).sum()))
    if name == "PP":
        return int((m & (decision == 1)).sum())
    return int(m.sum())


def evaluated_groups_from_records(
    name: str,
    group: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    included: Sequence[int],
    min_support: int = 1,
) -> int:
    """How many groups' rates entered metric ``name`` (record by record: the oracle of
    ``CellResult.groups_evaluated``)."""
    need = max(int(min_support), 1)
    out = 0
    for g in included:
        n = _denominator_from_records(name, group == g, label, decision)
        out += n >= need
    return out


def smallest_denominator_from_records(
    name: str,
    group: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    included: Sequence[int],
    min_support: int = 1,
) -> float:
    """The fewest records any rate that entered metric ``name`` rests on (NaN when the
    metric is undefined: fewer than two groups' rates)."""
    need = max(int(min_support), 1)
    counts = []
    for g in included:
        n = _denominator_from_records(name, group == g, label, decision)
        if n >= need:
            counts.append(n)
    return float(min(counts)) if len(counts) >= 2 else math.nan
