"""The same metrics computed directly from record arrays: the slow, obvious oracle.

Written independently of :mod:`monitor.metrics` (no count tables, one group at a
time with boolean masks) so that the two can check each other.
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
) -> float:
    """Value of metric ``name`` over the included groups of one attribute."""
    masks = {g: group == g for g in included}
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
            if (m & (label == 1)).any()
        ]
        return _rates(tpr)
    if name == "EOD":
        tprs, fprs = [], []
        for m in masks.values():
            pos, neg = m & (label == 1), m & (label == 0)
            if pos.any() and neg.any():
                tprs.append(float(decision[pos].mean()))
                fprs.append(float(decision[neg].mean()))
        if len(tprs) < 2:
            return math.nan
        return max(_rates(tprs), _rates(fprs))
    if name == "PP":
        ppv = [
            float(label[m & (decision == 1)].mean())
            for m in masks.values()
            if (m & (decision == 1)).any()
        ]
        return _rates(ppv)
    if name == "TI":
        keep = np.isin(group, list(included))
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
