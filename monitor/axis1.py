"""Axis 1: the Verdict Flip Rate of every cell, by exact stratified bootstrap on counts.

For one (model, attribute) window, a stratified resample of size N keeps the
(label x group) composition: stratum s gets n_s draws (proportional to its
window count, largest-remainder rounding so they sum to N). Within a stratum,
every metric except calibration depends only on how many drawn records have
decision 1, which is Binomial(n_s, p_s) with p_s the stratum's share of
decision 1. Calibration depends on how many draws land in each score bin, a
Multinomial(n_s, q_s) draw. So the whole bootstrap costs O(K x strata x bins),
independent of N (SPEC section 3).

The one step that is not exact is the score *sum* of the draws in a
(group, bin) cell: the table keeps count, sum and sum of squares, so the sum of
c draws is taken as Normal(c mu, c var) clipped to the bin's range
(moment-matched; it enters calibration only). The record-level oracle in
:mod:`monitor.axis1_reference` resamples records and checks this.

Decision draws and score-bin draws are independent of each other: each metric
sees a correct bootstrap distribution of its own (the verdicts of different
metrics are summarised per cell, never jointly).

Every (model, attribute) table has its own random stream derived from
(seed, model_id, attribute), so a cell's result does not depend on which other
models happen to be in the grid or on thread scheduling.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields

import numpy as np

from monitor.config import MetricRule
from monitor.counts import CountTable
from monitor.metrics import METRICS, NEEDS_BINS, Tallies, passes, tallies_from_table


@dataclass(frozen=True)
class CellResult:
    """Everything Axis 1 says about one (model, metric, attribute) cell."""

    model_id: str
    metric: str
    attribute: str
    threshold: float
    direction: str
    value: float  # point estimate on the whole window (NaN: undefined)
    point_verdict: str  # "pass" / "fail"
    n_pass: int
    K: int
    vfr: float
    dominant_verdict: str  # "pass" / "fail"; a tie is "fail"
    sigma: float  # |mean(M) - tau| / sd(M); inf when sd is 0
    mean: float
    sd: float
    ci_low: float
    ci_high: float
    n_undefined: int  # resamples whose value was undefined (counted as Fail)
    window_n: int
    resample_n: int
    groups_left_out: tuple[str, ...]  # too few records in the resample
    groups_left_out_point: tuple[str, ...]  # too few records in the window

    def stable(self, tau_vfr: float) -> bool:
        return self.vfr <= tau_vfr

    def to_dict(self) -> dict:
        # what asdict() gives (every field is a scalar or a tuple of str), without its
        # recursive deep copy, which cost more than the rest of writing a result
        d = {f: getattr(self, f) for f in _CELL_FIELDS}
        d["groups_left_out"] = list(self.groups_left_out)
        d["groups_left_out_point"] = list(self.groups_left_out_point)
        return d


_CELL_FIELDS = tuple(f.name for f in fields(CellResult))


# ----------------------------------------------------------------------------- allocation
def allocate_resample(stratum_counts: np.ndarray, size: int) -> np.ndarray:
    """Per-stratum resample sizes proportional to the counts, summing exactly to ``size``.

    Largest-remainder rounding; ties go to the earlier stratum (deterministic).

    >>> allocate_resample(np.array([1, 1, 1]), 2).tolist()
    [1, 1, 0]
    >>> allocate_resample(np.array([[30, 10], [0, 60]]), 10).tolist()
    [[3, 1], [0, 6]]
    """
    c = np.asarray(stratum_counts, dtype=np.int64)
    total = int(c.sum())
    if total == 0 or size <= 0:
        return np.zeros_like(c)
    flat = c.ravel()
    exact = flat * size / total
    base = np.floor(exact).astype(np.int64)
    short = size - int(base.sum())
    if short > 0:
        order = np.lexsort((np.arange(flat.size), -(exact - base)))
        base[order[:short]] += 1
    return base.reshape(c.shape)


def resample_size(window_n: int, n_max: int) -> int:
    """SPEC: N = min(window size, configured N)."""
    return min(int(window_n), int(n_max))


def table_rng(seed: int, model_id: str, attribute: str) -> np.random.Generator:
    """The random stream of one (model, attribute) table: stable across runs and grids."""
    key = (zlib.crc32(model_id.encode()), zlib.crc32(attribute.encode()))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


# ----------------------------------------------------------------------------- draws
def _multinomial_rows(
    n: np.ndarray, probs: np.ndarray, K: int, rng: np.random.Generator
) -> np.ndarray:
    """K multinomial draws per row: n (S,), probs (S, C) -> counts (S, C, K).

    Sequential conditional binomials, vectorised over rows and replicates.
    """
    S, C = probs.shape
    # Visit categories from the least to the most likely: empty categories cost
    # nothing, and the most likely one takes the remainder without a draw.
    order = np.argsort(probs, axis=1, kind="stable")
    p_sorted = np.take_along_axis(probs, order, axis=1)
    tail = p_sorted[:, ::-1].cumsum(axis=1)[:, ::-1]  # P(category >= c) in visiting order
    out_sorted = np.empty((S, C, K), dtype=np.int64)
    remaining = np.broadcast_to(n[:, None], (S, K)).astype(np.int64)
    for c in range(C - 1):
        cond = np.divide(p_sorted[:, c], tail[:, c], out=np.zeros(S), where=tail[:, c] > 0)
        cond = np.clip(cond, 0.0, 1.0)
        active = (cond > 0) & (n > 0)
        x = np.zeros((S, K), dtype=np.int64)
        if active.any():
            x[active] = rng.binomial(remaining[active], cond[active, None])
        out_sorted[:, c, :] = x
        remaining = remaining - x
    out_sorted[:, C - 1, :] = remaining
    out = np.empty_like(out_sorted)
    np.put_along_axis(out, order[:, :, None], out_sorted, axis=1)
    return out


def draw_tallies(
    table: CountTable, sizes: np.ndarray, K: int, rng: np.random.Generator, with_bins: bool
) -> Tallies:
    """K stratified bootstrap tallies of a table: ``sizes`` (G, 2) draws per stratum.

    Returns arrays with a leading replicate axis of length K.
    """
    counts = table.counts
    G, _, _, B = counts.shape
    strata = counts.sum(axis=(2, 3))  # (G, 2)
    ones = counts[:, :, 1, :].sum(axis=-1)
    p1 = np.divide(ones, strata, out=np.zeros(strata.shape), where=strata > 0)
    size_gy = np.asarray(sizes, dtype=np.int64)
    d1 = rng.binomial(np.broadcast_to(size_gy[..., None], (G, 2, K)), p1[..., None])  # (G, 2, K)
    d1 = d1.astype(np.float64)
    fp, tp = d1[:, 0, :].T.copy(), d1[:, 1, :].T.copy()  # (K, G)
    cells = {"tn": size_gy[:, 0] - fp, "fp": fp, "fn": size_gy[:, 1] - tp, "tp": tp}
    if not with_bins:
        return Tallies(**cells)

    per_bin = counts.sum(axis=2)  # (G, 2, B)
    q = np.divide(
        per_bin, strata[..., None], out=np.zeros(per_bin.shape), where=strata[..., None] > 0
    )
    bin_draws = _multinomial_rows(size_gy.reshape(-1), q.reshape(-1, B), K, rng).reshape(G, 2, B, K)

    s_sum = table.score_sum.sum(axis=2)  # (G, 2, B)
    s_sq = table.score_sq.sum(axis=2)
    mu = np.divide(s_sum, per_bin, out=np.zeros(s_sum.shape), where=per_bin > 0)
    var = np.maximum(
        np.divide(s_sq, per_bin, out=np.zeros(s_sq.shape), where=per_bin > 0) - mu * mu, 0.0
    )
    c = bin_draws.astype(np.float64)  # (G, 2, B, K)
    mean_sum = (c * mu[..., None]).sum(axis=1)  # (G, B, K)
    var_sum = (c * var[..., None]).sum(axis=1)
    drawn = mean_sum + np.sqrt(var_sum) * rng.standard_normal(mean_sum.shape)
    total = c.sum(axis=1)
    edges = np.arange(B + 1, dtype=np.float64) / B
    drawn = np.clip(drawn, total * edges[:-1, None], total * edges[1:, None])
    return Tallies(
        **cells,
        bin_n=np.ascontiguousarray(np.moveaxis(c, -1, 0)),  # (K, G, 2, B)
        bin_score=np.ascontiguousarray(np.moveaxis(drawn, -1, 0)),  # (K, G, B)
    )


# ----------------------------------------------------------------------------- summaries
def defined_moments(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, sd with ddof 1, count) of the defined (non-NaN) draws along the last axis.

    NaN where there are too few defined draws (none for the mean, fewer than two for sd).

    >>> [x.tolist() for x in defined_moments(np.array([1.0, np.nan, 3.0]))]
    [2.0, 1.4142135623730951, 2]
    """
    v = np.asarray(values, dtype=np.float64)
    defined = ~np.isnan(v)
    n_def = defined.sum(axis=-1)
    filled = np.where(defined, v, 0.0)
    mean = np.divide(filled.sum(axis=-1), n_def, out=np.full(n_def.shape, np.nan), where=n_def > 0)
    dev = np.where(defined, v - mean[..., None], 0.0)
    var = np.divide(
        (dev * dev).sum(axis=-1), n_def - 1, out=np.full(n_def.shape, np.nan), where=n_def > 1
    )
    return mean, np.sqrt(var), n_def


def summarise_draws(values: np.ndarray, threshold: float, direction: str) -> dict[str, float]:
    """VFR, dominant verdict, sigma, mean, sd and 95% CI of K metric draws (last axis).

    Works on (..., K) arrays. Undefined draws (NaN) count as Fail and are left out
    of mean, sd and the CI.
    """
    v = np.asarray(values, dtype=np.float64)
    K = v.shape[-1]
    n_pass = passes(v, threshold, direction).sum(axis=-1)
    mean, sd, n_def = defined_moments(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.abs(mean - threshold)
        sigma = np.where(sd > 0, gap / sd, np.where(gap > 0, np.inf, 0.0))
    sigma = np.where(np.isnan(sd), np.nan, sigma)
    ordered = np.sort(v, axis=-1)  # NaN (undefined) sorts last
    ci_low = percentile_of_sorted(ordered, n_def, 2.5)
    ci_high = percentile_of_sorted(ordered, n_def, 97.5)
    return {
        "n_pass": n_pass,
        "vfr": np.minimum(n_pass, K - n_pass) / K,
        "dominant_pass": n_pass > K / 2,
        "mean": mean,
        "sd": sd,
        "sigma": sigma,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "n_undefined": K - n_def,
    }


def percentile_of_sorted(ordered: np.ndarray, count: np.ndarray, q: float) -> np.ndarray:
    """The q-th percentile of the first ``count`` values of each sorted row.

    numpy's default ("linear") definition, vectorised over rows with different
    counts; NaN where count is 0. Why not np.percentile: it is ~20x slower on the
    small (cells x K) arrays of the bootstrap, and cannot skip undefined draws per row.

    >>> percentile_of_sorted(np.array([[1.0, 2.0, 3.0, np.nan]]), np.array([3]), 50.0).tolist()
    [2.0]
    """
    count = np.asarray(count)
    pos = (q / 100.0) * np.maximum(count - 1, 0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(count - 1, 0))
    frac = pos - lo
    v_lo = np.take_along_axis(ordered, lo[..., None], axis=-1)[..., 0]
    v_hi = np.take_along_axis(ordered, hi[..., None], axis=-1)[..., 0]
    out = v_lo + (v_hi - v_lo) * frac
    return np.where(count > 0, out, np.nan)


# ----------------------------------------------------------------------------- grid
@dataclass(frozen=True)
class _Prepared:
    model_id: str
    attribute: str
    table: CountTable
    sizes: np.ndarray  # (G, 2)
    support: np.ndarray  # (G,) in the resample
    support_point: np.ndarray  # (G,) in the window


def _prepare(
    model_id: str, attribute: str, table: CountTable, n_max: int, min_support: int
) -> _Prepared:
    strata = table.stratum_counts()
    sizes = allocate_resample(strata, resample_size(table.n, n_max))
    return _Prepared(
        model_id,
        attribute,
        table,
        sizes,
        sizes.sum(axis=1) >= min_support,
        table.group_counts() >= min_support,
    )


def verdict_word(flag: bool) -> str:
    return "pass" if flag else "fail"


def evaluate_axis1(
    tables: Mapping[tuple[str, str], CountTable],
    rules: Sequence[MetricRule],
    *,
    K: int = 500,
    N: int = 10_000,
    min_group_support: int = 20,
    seed: int = 0,
    threads: int = 1,
    seeds: Mapping[str, int] | None = None,
) -> list[CellResult]:
    """Axis 1 for every (model, attribute) table and every metric rule.

    ``tables`` maps (model_id, attribute) to that window's count table. Returns
    one CellResult per (model, metric, attribute), ordered by model, metric
    (in rule order), attribute (in table order). ``seeds`` (model_id -> seed)
    gives each model its own seed: several models' evaluations at different
    stream positions in one call, each cell exactly as if its model were alone
    (every table has its own stream, and the stacked metric arithmetic is
    row by row).
    """
    prepared = [_prepare(m, a, t, N, min_group_support) for (m, a), t in tables.items()]

    def seed_of(model_id: str) -> int:
        return seed if seeds is None else seeds[model_id]

    with_bins = any(r.name in NEEDS_BINS for r in rules)

    def draw(p: _Prepared) -> Tallies:
        return draw_tallies(
            p.table, p.sizes, K, table_rng(seed_of(p.model_id), p.model_id, p.attribute), with_bins
        )

    if threads > 1 and len(prepared) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            draws = list(pool.map(draw, prepared))
    else:
        draws = [draw(p) for p in prepared]

    # Stack tables of the same attribute shape across models: one metric call per stack.
    stacks: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    for i, p in enumerate(prepared):
        stacks[(p.attribute, *p.table.counts.shape[::3])].append(i)

    results: dict[tuple[int, str], CellResult] = {}
    for members in stacks.values():
        boot = _stack([draws[i] for i in members], with_bins)
        point = _stack([tallies_from_table(prepared[i].table) for i in members], True)
        support = np.stack([prepared[i].support for i in members])  # (M, G)
        support_pt = np.stack([prepared[i].support_point for i in members])
        for rule in rules:
            fn = METRICS[rule.name]
            values = fn(boot, support[:, None, :])  # (M, K)
            point_values = fn(point, support_pt)  # (M,)
            summary = summarise_draws(values, rule.threshold, rule.direction)
            point_pass = passes(point_values, rule.threshold, rule.direction)
            for row, i in enumerate(members):
                p = prepared[i]
                results[(i, rule.name)] = CellResult(
                    model_id=p.model_id,
                    metric=rule.name,
                    attribute=p.attribute,
                    threshold=rule.threshold,
                    direction=rule.direction,
                    value=float(point_values[row]),
                    point_verdict=verdict_word(bool(point_pass[row])),
                    n_pass=int(summary["n_pass"][row]),
                    K=K,
                    vfr=float(summary["vfr"][row]),
                    dominant_verdict=verdict_word(bool(summary["dominant_pass"][row])),
                    sigma=float(summary["sigma"][row]),
                    mean=float(summary["mean"][row]),
                    sd=float(summary["sd"][row]),
                    ci_low=float(summary["ci_low"][row]),
                    ci_high=float(summary["ci_high"][row]),
                    n_undefined=int(summary["n_undefined"][row]),
                    window_n=p.table.n,
                    resample_n=int(p.sizes.sum()),
                    groups_left_out=left_out_groups(p.table.groups, p.support),
                    groups_left_out_point=left_out_groups(p.table.groups, p.support_point),
                )
    order = sorted(
        results, key=lambda k: (prepared[k[0]].model_id, [r.name for r in rules].index(k[1]), k[0])
    )
    return [results[k] for k in order]


def left_out_groups(groups: Sequence[str], support: np.ndarray) -> tuple[str, ...]:
    return tuple(g for g, ok in zip(groups, support, strict=True) if not ok)


def _stack(items: Iterable[Tallies], with_bins: bool) -> Tallies:
    items = list(items)
    fields = ["tn", "fp", "fn", "tp"] + (["bin_n", "bin_score"] if with_bins else [])
    return Tallies(**{f: np.stack([getattr(t, f) for t in items]) for f in fields})


def vfr_monte_carlo_sd(p: float, K: int) -> float:
    """Standard deviation of an estimated pass share from K independent resamples."""
    return math.sqrt(max(p * (1 - p), 0.0) / K)
