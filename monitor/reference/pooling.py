"""Pooled estimates record by record: the oracle for :mod:`monitor.core.pooling`.

Every quantity is recomputed from the records with boolean masks and plain Python
arithmetic: each combined group's successes and trials, each parent margin from the
records whose parent attribute has that group (not by summing combined groups), the
logit-additive prior mean, the method-of-moments strength, the shrunk rates, the
metric; and the bootstrap resamples records inside every (label x combined group)
stratum, as :mod:`monitor.reference.axis1` does. O(K x N): for tests only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from monitor.core.axis1 import allocate_resample, resample_size, summarise_draws

_EPS = 1e-9


def _logit(p: float) -> float:
    q = min(max(p, _EPS), 1.0 - _EPS)
    return math.log(q / (1.0 - q))


def _in_denominator(rate: str, label: np.ndarray, decision: np.ndarray) -> np.ndarray:
    if rate == "SR":
        return np.ones(label.shape, bool)
    if rate == "TPR":
        return label == 1
    if rate == "FPR":
        return label == 0
    return decision == 1  # PPV


def _success(rate: str, label: np.ndarray, decision: np.ndarray) -> np.ndarray:
    return (label == 1) if rate == "PPV" else (decision == 1)


def pooled_rates_from_records(
    rate: str,
    parents: Sequence[np.ndarray],
    parent_of: np.ndarray,
    combined: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    entered: Sequence[int],
    strength: float | None,
) -> tuple[dict[int, float], float]:
    """Pooled rate of every combined group with trials, and the strength used.

    ``parents[a]`` holds each record's group index in parent attribute a; ``parent_of``
    (A, G) the parent indices of each combined group; ``combined`` each record's
    combined group. ``entered``: the groups the moment estimate sums over.
    """
    den = _in_denominator(rate, label, decision)
    hit = _success(rate, label, decision) & den
    total_n = int(den.sum())
    overall = float(hit.sum()) / total_n if total_n else math.nan
    G = parent_of.shape[1]
    prior, n, x = {}, {}, {}
    for g in range(G):
        in_g = den & (combined == g)
        n[g], x[g] = int(in_g.sum()), int((hit & in_g).sum())
        if math.isnan(overall):
            prior[g] = math.nan
            continue
        z = -(len(parents) - 1) * _logit(overall)
        for a, codes in enumerate(parents):
            in_margin = den & (codes == parent_of[a, g])
            m_n = int(in_margin.sum())
            r = float((hit & in_margin).sum()) / m_n if m_n else overall
            z += _logit(r)
        prior[g] = 1.0 / (1.0 + math.exp(-z))
    if strength is None:
        num = den_ = 0.0
        for g in entered:
            if n[g] == 0 or math.isnan(prior[g]):
                continue
            v = prior[g] * (1 - prior[g])
            num += n[g] * (x[g] / n[g] - prior[g]) ** 2 - v
            den_ += v * (n[g] - 1)
        rho = min(max(num / den_, 0.0), 1.0) if den_ > 0 else 0.0
        s = 1.0 / rho - 1.0 if rho > 0 else math.inf
    else:
        s = float(strength)
    out = {}
    for g in range(G):
        if math.isnan(prior[g]):
            if n[g]:
                out[g] = x[g] / n[g]
        elif math.isinf(s):
            out[g] = prior[g]
        elif n[g] + s > 0:
            out[g] = (x[g] + s * prior[g]) / (n[g] + s)
    return out, s


def _entered(
    name: str,
    combined: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    G: int,
    ms: int,
    included: Sequence[int],
) -> list[int]:
    """Groups (of ``included``) whose every rate denominator reaches ``ms``."""
    rates = {"DI": ["SR"], "SPD": ["SR"], "EOPP": ["TPR"], "EOD": ["TPR", "FPR"], "PP": ["PPV"]}
    out = []
    for g in included:
        in_g = combined == g
        if all(
            int((_in_denominator(r, label, decision) & in_g).sum()) >= max(ms, 1)
            for r in rates[name]
        ):
            out.append(g)
    return out


def pooled_metric_from_records(
    name: str,
    parents: Sequence[np.ndarray],
    parent_of: np.ndarray,
    combined: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    included: Sequence[int],
    min_support: int,
    strength: float | None = None,
) -> float:
    """The pooled metric on the records (NaN: fewer than two groups enter)."""
    G = parent_of.shape[1]
    entered = _entered(name, combined, label, decision, G, min_support, included)
    if len(entered) < 2:
        return math.nan

    def spread(rate: str) -> tuple[float, float]:
        r, _ = pooled_rates_from_records(
            rate, parents, parent_of, combined, label, decision, entered, strength
        )
        vals = [r[g] for g in entered]
        return min(vals), max(vals)

    if name in ("DI", "SPD"):
        lo, hi = spread("SR")
        if name == "SPD":
            return hi - lo
        return lo / hi if hi > 0 else 1.0
    if name == "EOPP":
        lo, hi = spread("TPR")
        return hi - lo
    if name == "PP":
        lo, hi = spread("PPV")
        return hi - lo
    t_lo, t_hi = spread("TPR")
    f_lo, f_hi = spread("FPR")
    return max(t_hi - t_lo, f_hi - f_lo)


def reference_pooled_axis1(
    name: str,
    threshold: float,
    direction: str,
    parents: Sequence[np.ndarray],
    parent_of: np.ndarray,
    combined: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    *,
    K: int,
    N: int,
    min_group_support: int,
    rng: np.random.Generator,
    strength: float | None = None,
) -> dict[str, float]:
    """Pooled point value and the bootstrap summary (n_pass, vfr, ...) by records."""
    G = parent_of.shape[1]
    strata = [[np.flatnonzero((combined == g) & (label == y)) for y in (0, 1)] for g in range(G)]
    counts = np.array([[len(ix) for ix in row] for row in strata], dtype=np.int64)
    sizes = allocate_resample(counts, resample_size(int(counts.sum()), N))
    included = [g for g in range(G) if sizes[g].sum() >= min_group_support]
    included_pt = [g for g in range(G) if counts[g].sum() >= min_group_support]
    draws = np.full(K, np.nan)
    for k in range(K):
        parts = [
            ix[rng.integers(0, len(ix), size=sizes[g, y])]
            for g, row in enumerate(strata)
            for y, ix in enumerate(row)
            if sizes[g, y] > 0
        ]
        pick = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        draws[k] = pooled_metric_from_records(
            name, [p[pick] for p in parents], parent_of, combined[pick], label[pick],
            decision[pick], included, min_group_support, strength,
        )  # fmt: skip
    point = pooled_metric_from_records(
        name, parents, parent_of, combined, label, decision, included_pt, min_group_support,
        strength,
    )  # fmt: skip
    s = summarise_draws(draws, threshold, direction)
    return {"value": point, **{k: float(v) for k, v in s.items()}}
