"""Axis 1: the Verdict Flip Rate of every cell, by exact stratified bootstrap on counts.

For one (model, attribute) window, a stratified resample of size N keeps the
(label x group) composition: stratum s gets n_s draws (proportional to its
window count, largest-remainder rounding so they sum to N). Within a stratum,
every metric except calibration depends only on how many drawn records have
decision 1, which is Binomial(n_s, p_s) with p_s the stratum's share of
decision 1. Calibration depends on how many draws land in each score bin, a
Multinomial(n_s, q_s) draw. So the whole bootstrap costs O(K x strata x bins),
independent of N (docs/method.md section 3).

The one step that is not exact is the score *sum* of the draws in a
(group, bin) cell: the table keeps count, sum and sum of squares, so the sum of
c draws is taken as Normal(c mu, c var) clipped to the bin's range
(moment-matched; it enters calibration only). The record-level oracle in
:mod:`monitor.reference.axis1` resamples records and checks this.

Decision draws and score-bin draws are independent of each other: each metric
sees a correct bootstrap distribution of its own (the verdicts of different
metrics are summarised per cell, never jointly).

Every (model, attribute) table has its own random stream derived from
(seed, model_id, attribute), so a cell's result does not depend on which other
models happen to be in the grid or on thread scheduling. The variates are drawn
by the exact compiled samplers of :mod:`monitor.core.sampling` (decisions first,
then bins, then normals), one compiled call per table.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numba
import numpy as np

from monitor.core import sampling
from monitor.core.cell_result import (
    EVALUABLE,
    CellResult,
    Estimate,
    Evaluability,
    verdict_word,
)
from monitor.core.counts import HI_SCALE, LO_SCALE, CountTable
from monitor.core.drivers import (
    MAX_ONLY,
    Drivers,
    needs_drivers,
    size_withheld,
    stack_drivers,
    subgroup_extremes,
)
from monitor.core.engine_options import EngineOptions
from monitor.core.intersections import Intersection
from monitor.core.method import INTERSECTION_CODE_SEP, MIN_GROUP_SUPPORT, MetricRule
from monitor.core.metrics import (
    METRICS,
    NEEDS_BINS,
    Tallies,
    denominator_shortfall,
    denominator_words,
    passes,
    smallest_denominator,
    supported_groups,
    tallies_from_table,
)
from monitor.core.pooling import POOLABLE, PoolingSpec, pooled_metric
from monitor.core.privacy import intersection_parts, linked_withheld

_NAN = math.nan

#: A cell whose value is defined on the window but undefined in more than this share of
#: its K resamples is not evaluable: its flip rate would rest on the few resamples that
#: happen to be defined (docs/decisions.md, "Undefined is not a verdict").
MAX_UNDEFINED_SHARE = 0.5

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
    """docs/method.md section 3: N = min(window size, configured N)."""
    return min(int(window_n), int(n_max))


def table_rng(seed: int, model_id: str, attribute: str) -> np.random.Generator:
    """The random stream of one (model, attribute) table: stable across runs and grids."""
    key = (zlib.crc32(model_id.encode()), zlib.crc32(attribute.encode()))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


# ----------------------------------------------------------------------------- draws
@dataclass(frozen=True)
class DrawParams:
    """What one table's bootstrap draws depend on: the per-stratum sizes and shares.

    Strata are the (group, label) pairs, flattened in (g, y) order (S = 2G).
    """

    sizes: np.ndarray  # (S,) int64: resampled records per stratum
    p1: np.ndarray  # (S,) share of decision 1 in the stratum
    q: np.ndarray  # (S, B) share of each score bin in the stratum
    mu: np.ndarray  # (G, 2, B) mean score in each (group, label, bin) cell
    var: np.ndarray  # (G, 2, B) population variance of those scores


@dataclass(frozen=True)
class Variates:
    """The random variates of one table's K replicates, before any arithmetic."""

    decisions: np.ndarray  # (S, K) int64: Binomial(size_s, p1_s)
    bins: np.ndarray | None  # (S, K, B) int64: Multinomial(size_s, q_s)
    normals: np.ndarray | None  # (K, G, B) float64: standard normal


def draw_params(table: CountTable, sizes: np.ndarray) -> DrawParams:
    """The sampling parameters of a table for the per-stratum ``sizes`` (G, 2)."""
    p1, q, mu, var = _params_kernel(table.counts, *table.words(), HI_SCALE, LO_SCALE)
    return DrawParams(
        sizes=np.ascontiguousarray(sizes, dtype=np.int64).reshape(-1), p1=p1, q=q, mu=mu, var=var
    )


@numba.njit(cache=True, nogil=True)
def _params_kernel(
    counts: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
    sq_hi: np.ndarray,
    sq_lo: np.ndarray,
    hi_scale: float,
    lo_scale: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """p1 (S,), q (S, B), mu and var (G, 2, B) of a table in one pass over its counts.

    Per stratum (g, y): p1 its share of decision 1, q its share in each score bin; per
    (g, y, bin) cell of n records: mu = score sum / n, var = max(score squares / n - mu^2,
    0) (0 where the stratum or the cell is empty). The sums over the decision axis are
    taken in the order numpy took them before this kernel (decision 0 + decision 1), so
    the figures are the same to the bit. Why compiled: a dozen numpy calls on arrays of a
    few dozen numbers cost ~100 us a table, ~5 % of the grid's random draws.
    """
    G, _, _, B = counts.shape
    p1 = np.zeros(2 * G)
    q = np.zeros((2 * G, B))
    mu = np.zeros((G, 2, B))
    var = np.zeros((G, 2, B))
    for g in range(G):
        for y in range(2):
            s = 2 * g + y
            total = 0
            ones = 0
            for b in range(B):
                total += counts[g, y, 0, b] + counts[g, y, 1, b]
                ones += counts[g, y, 1, b]
            if total > 0:
                p1[s] = ones / total
            for b in range(B):
                n = counts[g, y, 0, b] + counts[g, y, 1, b]
                if total > 0:
                    q[s, b] = n / total
                if n > 0:
                    s_sum = (hi[g, y, 0, b] * hi_scale + lo[g, y, 0, b] * lo_scale) + (
                        hi[g, y, 1, b] * hi_scale + lo[g, y, 1, b] * lo_scale
                    )
                    s_sq = (sq_hi[g, y, 0, b] * hi_scale + sq_lo[g, y, 0, b] * lo_scale) + (
                        sq_hi[g, y, 1, b] * hi_scale + sq_lo[g, y, 1, b] * lo_scale
                    )
                    m = s_sum / n
                    v = s_sq / n - m * m
                    mu[g, y, b] = m
                    var[g, y, b] = v if (v >= 0.0 or np.isnan(v)) else 0.0  # np.maximum
    return p1, q, mu, var


def draw_variates(
    params: DrawParams, K: int, rng: np.random.Generator, with_bins: bool
) -> Variates:
    """Every random variate of K replicates of one table, and nothing else.

    Exact samplers (:mod:`monitor.core.sampling`), in a fixed order from the table's
    own stream. ``bench axis1`` times this alone as the engine's floor.
    """
    G = params.mu.shape[0]
    decisions, bins, normals = _variates_kernel(
        rng, params.sizes, params.p1, params.q, G, K, with_bins
    )
    return Variates(decisions, bins, normals) if with_bins else Variates(decisions, None, None)


@numba.njit(cache=True, nogil=True)
def _variates_kernel(
    rng: np.random.Generator,
    sizes: np.ndarray,
    p1: np.ndarray,
    q: np.ndarray,
    G: int,
    K: int,
    with_bins: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One compiled call per table. Why one: passing a Generator into compiled code costs
    ~17 us a call (numba rebuilds its ctypes view of the bit generator), as much as a
    small table's draws."""
    decisions = sampling.binomial_rows(rng, sizes, p1, K)
    B = q.shape[1]
    if not with_bins:
        return decisions, np.zeros((0, K, B), np.int64), np.zeros((K, G, 0))
    bins = sampling.multinomial_rows(rng, sizes, q, K)
    normals = np.empty((K, G, B))
    sampling.standard_normal_fill(rng, normals)
    return decisions, bins, normals


@numba.njit(cache=True, nogil=True)
def _tallies_kernel(
    sizes: np.ndarray,
    decisions: np.ndarray,
    bins: np.ndarray,
    normals: np.ndarray,
    mu: np.ndarray,
    var: np.ndarray,
    tn: np.ndarray,
    fp: np.ndarray,
    fn: np.ndarray,
    tp: np.ndarray,
    bin_n: np.ndarray,
    bin_score: np.ndarray,
) -> None:
    """Write one table's K replicate tallies from its variates into the output views.

    Decision cells: fp, tp are the drawn decision-1 counts of the label-0 and label-1
    strata; tn, fn the rest. Bins: counts per (group, label, bin), and the score sum
    of the c draws of a (group, label, bin) cell with mean mu and variance var taken
    as Normal(c mu, c var) summed over labels, clipped to the bin's range [c lo, c hi].
    ``bins`` has no rows when calibration is not needed.
    """
    K, G = fp.shape
    for k in range(K):
        for g in range(G):
            fp[k, g] = decisions[2 * g, k]
            tn[k, g] = sizes[2 * g] - decisions[2 * g, k]
            tp[k, g] = decisions[2 * g + 1, k]
            fn[k, g] = sizes[2 * g + 1] - decisions[2 * g + 1, k]
    if bins.shape[0] == 0:
        return
    B = mu.shape[2]
    edges = np.arange(B + 1) / B
    # one (group, replicate) row of bins at a time through 1-d views: the innermost loop
    # then indexes flat rows (~20 % faster than four-index subscripts); same arithmetic
    for g in range(G):
        mu0, mu1, var0, var1 = mu[g, 0], mu[g, 1], var[g, 0], var[g, 1]
        for k in range(K):
            n0, n1, z = bins[2 * g, k], bins[2 * g + 1, k], normals[k, g]
            out_n, out_score = bin_n[k, g], bin_score[k, g]
            for b in range(B):
                c0 = float(n0[b])
                c1 = float(n1[b])
                out_n[0, b] = c0
                out_n[1, b] = c1
                mean = c0 * mu0[b] + c1 * mu1[b]
                sd = math.sqrt(c0 * var0[b] + c1 * var1[b])
                total = c0 + c1
                drawn = mean + sd * z[b]
                out_score[b] = min(max(drawn, total * edges[b]), total * edges[b + 1])


def empty_tallies(M: int, K: int, G: int, B: int, with_bins: bool) -> Tallies:
    """Uninitialised (M, K, ...) tallies for M tables' replicates, filled by fill_tallies.

    Without calibration the bin arrays have a zero-length bin axis.
    """
    nb = B if with_bins else 0
    return Tallies(
        tn=np.empty((M, K, G)),
        fp=np.empty((M, K, G)),
        fn=np.empty((M, K, G)),
        tp=np.empty((M, K, G)),
        bin_n=np.empty((M, K, G, 2, nb)),
        bin_score=np.empty((M, K, G, nb)),
    )


def fill_tallies(
    table: CountTable,
    sizes: np.ndarray,
    K: int,
    rng: np.random.Generator,
    with_bins: bool,
    out: Tallies,
    row: int,
) -> None:
    """Draw K stratified bootstrap replicates of a table into row ``row`` of ``out``.

    ``sizes`` (G, 2) are the draws per stratum. Writing into a stack's arrays (rather
    than stacking per-table results afterwards) saves a copy of every replicate.
    """
    params = draw_params(table, sizes)
    v = draw_variates(params, K, rng, with_bins)
    B = params.q.shape[1]
    bins = v.bins if v.bins is not None else np.zeros((0, K, B), np.int64)
    normals = v.normals if v.normals is not None else np.zeros((K, 0, B))
    # a stack's output always has its bin arrays (of no bins without calibration)
    assert out.bin_n is not None and out.bin_score is not None
    _tallies_kernel(
        params.sizes, v.decisions, bins, normals, params.mu, params.var,
        out.tn[row], out.fp[row], out.fn[row], out.tp[row], out.bin_n[row], out.bin_score[row],
    )  # fmt: skip


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
    # every draw defined (the common case) in C order: the masked copies would be v and
    # v - mean themselves, in the same layout, so the sums below are the same to the bit
    whole = v.flags.c_contiguous and bool(defined.all())
    filled = v if whole else np.where(defined, v, 0.0)
    mean = np.divide(filled.sum(axis=-1), n_def, out=np.full(n_def.shape, np.nan), where=n_def > 0)
    dev = v - mean[..., None] if whole else np.where(defined, v - mean[..., None], 0.0)
    var = np.divide(
        (dev * dev).sum(axis=-1), n_def - 1, out=np.full(n_def.shape, np.nan), where=n_def > 1
    )
    return mean, np.sqrt(var), n_def


def summarise_draws(values: np.ndarray, threshold: float, direction: str) -> dict[str, Any]:
    """VFR, dominant verdict, sigma, mean, sd and 95% CI of K metric draws (last axis).

    Works on (..., K) arrays. Undefined draws (NaN) carry no verdict: VFR and the
    dominant verdict are taken over the defined draws (VFR = min(n_pass, n_def - n_pass) /
    n_def, NaN when none is defined), they are left out of mean, sd and the CI, and
    counted (``n_undefined``). ``evaluable`` is False where more than
    MAX_UNDEFINED_SHARE of the K draws are undefined.
    """
    v = np.asarray(values, dtype=np.float64)
    K = v.shape[-1]
    n_pass = passes(v, threshold, direction).sum(axis=-1)
    mean, sd, n_def = defined_moments(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        vfr = np.where(n_def > 0, np.minimum(n_pass, n_def - n_pass) / n_def, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.abs(mean - threshold)
        sigma = np.where(sd > 0, gap / sd, np.where(gap > 0, np.inf, 0.0))
    sigma = np.where(np.isnan(sd), np.nan, sigma)
    ordered = np.sort(v, axis=-1)  # NaN (undefined) sorts last
    ci_low, ci_high = percentiles_of_sorted(ordered, n_def, (2.5, 97.5))
    return {
        "n_pass": n_pass,
        "vfr": vfr,
        "dominant_pass": n_pass > n_def / 2,
        "mean": mean,
        "sd": sd,
        "sigma": sigma,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "n_undefined": K - n_def,
        "evaluable": (n_def > 0) & (K - n_def <= MAX_UNDEFINED_SHARE * K),
    }


def percentile_of_sorted(ordered: np.ndarray, count: np.ndarray, q: float) -> np.ndarray:
    """The q-th percentile of the first ``count`` values of each sorted row.

    numpy's default ("linear") definition, vectorised over rows with different
    counts; NaN where count is 0. Why not np.percentile: it is ~20x slower on the
    small (cells x K) arrays of the bootstrap, and cannot skip undefined draws per row.

    >>> percentile_of_sorted(np.array([[1.0, 2.0, 3.0, np.nan]]), np.array([3]), 50.0).tolist()
    [2.0]
    """
    return percentiles_of_sorted(ordered, count, (q,))[0]


def percentiles_of_sorted(
    ordered: np.ndarray, count: np.ndarray, qs: Sequence[float]
) -> list[np.ndarray]:
    """:func:`percentile_of_sorted` for each of ``qs``, the values picked in one gather
    (the arithmetic of each percentile is the same, element by element)."""
    count = np.asarray(count)
    top = np.maximum(count - 1, 0)
    pos = [(q / 100.0) * top for q in qs]
    lo = [np.floor(p).astype(np.int64) for p in pos]
    idx = [i for low in lo for i in (low, np.minimum(low + 1, top))]
    picked = np.take_along_axis(ordered, np.stack(idx, axis=-1), axis=-1)
    out = []
    for n, (p, low) in enumerate(zip(pos, lo, strict=True)):
        v_lo, v_hi = picked[..., 2 * n], picked[..., 2 * n + 1]
        out.append(np.where(count > 0, v_lo + (v_hi - v_lo) * (p - low), np.nan))
    return out


# ----------------------------------------------------------------------------- evaluable
def evaluability(
    metric: str,
    attribute: str,
    groups: Sequence[str],
    point: Tallies,
    point_value: float,
    n_undefined: int,
    K: int,
    min_support: int,
    scale: float = 1.0,
) -> Evaluability:
    """Is a cell evaluable: its value defined on the window (``point``: the window's
    (G,) tallies) and in at least (1 - MAX_UNDEFINED_SHARE) of its K resamples? If not, the
    reason and the records it would need (:func:`~monitor.core.metrics.denominator_shortfall`;
    ``scale`` = resample size / window size for the resamples' shortfall)."""
    point_defined = not math.isnan(point_value)
    if point_defined and n_undefined < K and n_undefined <= MAX_UNDEFINED_SHARE * K:
        return EVALUABLE
    words = denominator_words(metric, min_support)
    short = denominator_shortfall(metric, point, min_support, 1.0 if not point_defined else scale)
    if short.groups < 2:
        reason = f"{attribute} has fewer than two groups"
    elif not point_defined and short.reaching < 2:
        reason = (
            f"fewer than two {attribute} groups have {words} "
            f"({short.reaching} of {short.groups} do)"
        )
    elif not point_defined:
        reason = (
            "the mean benefit is 0 (every record a missed positive)"
            if metric == "TI"
            else "the value is undefined on the window"
        )
    else:
        reason = (
            f"the value is undefined in {n_undefined} of {K} resamples (more than "
            f"{MAX_UNDEFINED_SHARE:.0%}): fewer than two {attribute} groups have {words} there"
        )
    named = tuple(groups[g] for g in short.needed_groups)
    return Evaluability(False, reason, short.needed, named)


# ----------------------------------------------------------------------------- grid
@dataclass(frozen=True)
class _Prepared:
    model_id: str
    attribute: str
    table: CountTable
    sizes: np.ndarray  # (G, 2)
    support: np.ndarray  # (G,) in the resample
    support_point: np.ndarray  # (G,) in the window
    min_support: int
    #: groups withheld across families (an intersection's, within its margins)
    linked: frozenset[str] = frozenset()


def linked_table_withheld(
    tables: Mapping[tuple[str, str], CountTable],
) -> dict[tuple[str, str], frozenset[str]]:
    """Per (model, attribute) table, the groups :func:`monitor.core.privacy.linked_withheld`
    withholds over all the model's tables: what the published group figures withhold
    (monitor.stream.publication, :func:`monitor.core.privacy.model_withheld`: the
    intersections read from the attribute names, their groups' codes joined by
    INTERSECTION_CODE_SEP), so no driver names a rate of a group they withhold."""
    by_model: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    for (m, a), t in tables.items():
        by_model[m][a] = dict(zip(t.groups, t.group_counts().tolist(), strict=True))
    out: dict[tuple[str, str], frozenset[str]] = {}
    for m, sizes in by_model.items():
        parts = intersection_parts(sizes)
        if not parts:
            continue
        for a, hidden in linked_withheld(sizes, parts, INTERSECTION_CODE_SEP).items():
            out[(m, a)] = hidden
    return out


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
        min_support,
    )


def evaluate_axis1(
    tables: Mapping[tuple[str, str], CountTable],
    rules: Sequence[MetricRule],
    *,
    K: int = 500,
    N: int = 10_000,
    min_group_support: int = MIN_GROUP_SUPPORT,
    seed: int = 0,
    threads: int = 1,
    seeds: Mapping[str, int] | None = None,
    pooling: Mapping[str, PoolingSpec] | None = None,
    pooled_verdict: bool = False,
    intersections: Mapping[str, Intersection] | None = None,
) -> list[CellResult]:
    """Axis 1 for every (model, attribute) table and every metric rule.

    ``tables`` maps (model_id, attribute) to that window's count table. Returns
    one CellResult per (model, metric, attribute), ordered by model, metric
    (in rule order), attribute (in table order). ``seeds`` (model_id -> seed)
    gives each model its own seed: several models' evaluations at different
    stream positions in one call, each cell exactly as if its model were alone
    (every table has its own stream, and the stacked metric arithmetic is
    row by row). ``pooling`` (attribute -> spec) adds pooled estimates to the cells of
    those attributes' poolable metrics; ``pooled_verdict`` makes them the verdict.
    ``intersections`` (name -> parts, from the configuration) gives a cell whose lowest
    group is shown the combined groups within it (:func:`with_subgroups`).
    """
    linked = linked_table_withheld(tables)
    prepared = [
        replace(_prepare(m, a, t, N, min_group_support), linked=linked.get((m, a), frozenset()))
        for (m, a), t in tables.items()
    ]

    def seed_of(model_id: str) -> int:
        return seed if seeds is None else seeds[model_id]

    with_bins = any(r.name in NEEDS_BINS for r in rules)

    # Stack tables of the same attribute shape across models: one metric call per stack.
    stacks: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    for i, p in enumerate(prepared):
        stacks[(p.attribute, *p.table.counts.shape[::3])].append(i)
    # The largest stacks (tables x groups x bins) first: their draws start first, and the
    # stack whose metrics run after the last draw has ended (the tail of a threaded
    # evaluation) is the cheapest. The results do not depend on the order (ordered below).
    stacks = dict(sorted(stacks.items(), key=lambda kv: -len(kv[1]) * kv[0][1] * kv[0][2]))
    boots = {
        key: empty_tallies(len(members), K, key[1], key[2], with_bins)
        for key, members in stacks.items()
    }

    def draw(key: tuple[str, int, int], row: int) -> None:
        p = prepared[stacks[key][row]]
        rng = table_rng(seed_of(p.model_id), p.model_id, p.attribute)
        fill_tallies(p.table, p.sizes, K, rng, with_bins, boots[key], row)

    with ExitStack() as scope:
        if threads > 1 and len(prepared) > 1:
            # The compiled draws release the GIL. Tables are submitted stack by stack and
            # each stack's metrics run here as soon as its tables are drawn, beside the
            # draws of the next stacks. Every table has its own stream and its own rows
            # of the output, so the results do not depend on this schedule.
            pool = scope.enter_context(ThreadPoolExecutor(max_workers=threads))
            pending = {
                key: [pool.submit(draw, key, row) for row in range(len(members))]
                for key, members in stacks.items()
            }

            def drawn(key: tuple[str, int, int]) -> Tallies:
                for future in pending.pop(key):
                    future.result()
                return boots[key]
        else:

            def drawn(key: tuple[str, int, int]) -> Tallies:
                for row in range(len(stacks[key])):
                    draw(key, row)
                return boots[key]

        results = _evaluate_stacks(
            stacks, prepared, drawn, rules, K, with_bins, pooling or {}, pooled_verdict
        )
    rank: dict[str, int] = {}
    for n, r in enumerate(rules):
        rank.setdefault(r.name, n)  # the first rule of a name, as list.index
    order = sorted(results, key=lambda k: (prepared[k[0]].model_id, rank[k[1]], k[0]))
    cells = [results[k] for k in order]
    return with_subgroups(cells, tables, min_group_support, intersections or {})


def with_subgroups(
    cells: list[CellResult],
    tables: Mapping[tuple[str, str], CountTable],
    min_group_support: int,
    intersections: Mapping[str, Intersection],
) -> list[CellResult]:
    """Cells whose lowest group is shown, with the combined groups within it (their
    driver rates, monitor.core.drivers.subgroup_extremes) from every table of the same
    model of an intersection that has the cell's attribute as a part (``race_x_sex`` for
    a cell by race). Only cells with drivers are looked at; without intersections, none."""
    combos: dict[tuple[str, str], Intersection] = {}
    for (model, attr), t in tables.items():
        if (inter := intersections.get(attr)) is not None:
            inter.check_table(t.groups)
            combos[(model, attr)] = inter
    if not combos:
        return cells
    linked = linked_table_withheld(tables)
    out = []
    for c in cells:
        subs: list[tuple[str, float]] = []
        if c.low_group is not None and c.driver_rate is not None and c.metric not in MAX_ONLY:
            for (model, attr), inter in combos.items():
                if model != c.model_id or c.attribute not in inter.parents:
                    continue
                subs.extend(_subgroups_of(c, tables[(model, attr)], inter, min_group_support,
                                          linked.get((model, attr), frozenset())))  # fmt: skip
        out.append(c.with_low_subgroups(tuple(subs)) if subs else c)
    return out


def _subgroups_of(
    c: CellResult,
    table: CountTable,
    inter: Intersection,
    ms: int,
    linked: frozenset[str] = frozenset(),
) -> list[tuple[str, float]]:
    """The shown combined groups of ``inter`` within ``c``'s lowest group, with their rates."""
    within = inter.parent_groups_of(c.attribute)
    if c.low_group not in within:
        return []
    parent_of = [0 if g == c.low_group else 1 for g in within]
    subs, _, _ = subgroup_extremes(
        str(c.driver_rate), table.groups, tallies_from_table(table), parent_of, 0, ms, linked
    )
    return [(s.group, s.rate) for s in subs if not math.isnan(s.rate)]


def _evaluate_stacks(
    stacks: Mapping[tuple[str, int, int], list[int]],
    prepared: Sequence[_Prepared],
    drawn: Callable[[tuple[str, int, int]], Tallies],
    rules: Sequence[MetricRule],
    K: int,
    with_bins: bool,
    pooling: Mapping[str, PoolingSpec],
    pooled_verdict: bool,
) -> dict[tuple[int, str], CellResult]:
    """Metrics, summaries and results of every stack; ``drawn(key)`` gives its replicates.

    Why the per-cell part is written as it is: it runs once per cell (hundreds per
    evaluation) in Python, so what depends on the table only (its facts, the groups its
    drivers withhold) is computed once per table, the stack's arrays are turned into lists
    once per metric, and each cell's parts (its estimate, evaluability, drivers) are built
    once and passed to the cell as they are (``bench axis1``)."""
    results: dict[tuple[int, str], CellResult] = {}
    for key, members in stacks.items():
        boot = drawn(key)
        if not with_bins:
            boot = Tallies(tn=boot.tn, fp=boot.fp, fn=boot.fn, tp=boot.tp)
        tables = [prepared[i] for i in members]
        point = _point_tallies(tables)
        support = np.stack([p.support for p in tables])  # (M, G)
        support_pt = np.stack([p.support_point for p in tables])
        ms = tables[0].min_support
        facts = [_table_facts(p) for p in tables]

        def withheld_of(tables: list[_Prepared] = tables) -> list[frozenset[str]]:
            return [_size_withheld(p) for p in tables]

        withheld = _once(withheld_of)
        for rule in rules:
            fn = METRICS[rule.name]
            # per-resample support: each draw's denominators are judged on their own
            values = fn(boot, support[:, None, :], ms)  # (M, K)
            point_values = fn(point, support_pt, ms)  # (M,)
            min_den = smallest_denominator(rule.name, point, support_pt, ms).tolist()  # (M,)
            entered = supported_groups(rule.name, point, support_pt, ms)  # (M, G)
            n_eval = entered.sum(axis=-1).tolist()  # (M,)
            summary = summarise_draws(values, rule.threshold, rule.direction)
            col = {k: v.tolist() for k, v in summary.items()}
            pv = point_values.tolist()
            pp = passes(point_values, rule.threshold, rule.direction).tolist()
            drivers = _stack_drivers(
                rule.name, tables, point, entered, boot, support, ms, pv, pp, col, K, withheld
            )
            spec = pooling.get(key[0]) if rule.name in POOLABLE else None
            pooled = (
                _pooled(rule, spec, point, support_pt, boot, support, ms)
                if spec is not None
                else None
            )
            name, threshold, direction = rule.name, rule.threshold, rule.direction
            evaluable, n_undefined = col["evaluable"], col["n_undefined"]
            n_pass, vfr, dominant_pass = col["n_pass"], col["vfr"], col["dominant_pass"]
            sigma, mean, sd = col["sigma"], col["mean"], col["sd"]
            ci_low, ci_high = col["ci_low"], col["ci_high"]
            for row, i in enumerate(members):
                value = pv[row]
                if evaluable[row] and not math.isnan(value):
                    ev = EVALUABLE  # the common case: no tallies to build
                else:
                    ev = _evaluability(name, tables[row], value, n_undefined[row], K)
                ok = ev.evaluable
                raw = Estimate(
                    value, verdict_word(pp[row], ok), n_pass[row], vfr[row] if ok else _NAN,
                    verdict_word(dominant_pass[row], ok), sigma[row] if ok else _NAN, mean[row],
                    sd[row], ci_low[row], ci_high[row], n_undefined[row],
                )  # fmt: skip
                # a cell that is not evaluable has no disparity to explain or pool
                pooled_estimate, basis = None, "raw"
                if pooled is not None and ok:
                    pooled_estimate = _pooled_estimate(pooled, row, pooled_verdict)
                    if pooled_verdict:
                        raw, basis = raw.beside_verdict(), "pooled"
                t = tables[row]
                window_n, resample_n, left_out, left_out_point, groups_total = facts[row]
                results[(i, name)] = CellResult(
                    t.model_id, name, t.attribute, threshold, direction, K, window_n,
                    resample_n, left_out, left_out_point, raw, ev, float(min_den[row]),
                    int(n_eval[row]), groups_total, drivers.get(row) if ok else None,
                    pooled_estimate, basis,
                )  # fmt: skip
    return results


def _point_tallies(tables: Sequence[_Prepared]) -> Tallies:
    """The window tallies (M, G, ...) of a stack's tables: :func:`tallies_from_table` of
    each, stacked. Why not that: the counts are summed for the whole stack at once (sums of
    integers, exact in any order, so the same to the bit), which saves a dozen numpy calls
    a table; the score sums, floats, are summed per table as tallies_from_table sums them."""
    counts = np.stack([p.table.counts for p in tables]).astype(np.float64)  # (M, G, 2, 2, B)
    return Tallies.from_confusion(
        counts.sum(axis=-1),
        bin_n=counts.sum(axis=3),
        bin_score=np.stack([p.table.score_sum.sum(axis=(1, 2)) for p in tables]),
    )


def _table_facts(p: _Prepared) -> tuple[int, int, tuple[str, ...], tuple[str, ...], int]:
    """A table's facts its cells share whatever the metric: (window records, resampled
    records, groups left out of the resample and of the window, configured groups)."""
    return (
        p.table.n, int(p.sizes.sum()), left_out_groups(p.table.groups, p.support),
        left_out_groups(p.table.groups, p.support_point), len(p.table.groups),
    )  # fmt: skip


def _size_withheld(p: _Prepared) -> frozenset[str]:
    """The groups of a table no driver may show whatever the metric (drivers.size_withheld)."""
    return size_withheld(p.table.groups, p.table.group_counts().tolist(), p.linked)


_T = TypeVar("_T")


def _once(make: Callable[[], list[_T]]) -> Callable[[], list[_T]]:
    """``make()`` on the first call, the same list after: a stack whose metrics all pass
    never computes its drivers' withheld groups."""
    memo: list[list[_T]] = []

    def get() -> list[_T]:
        if not memo:
            memo.append(make())
        return memo[0]

    return get


def _evaluability(metric: str, p: _Prepared, point_value: float, n_undefined: int, K: int
                  ) -> Evaluability:  # fmt: skip
    scale = float(p.sizes.sum()) / p.table.n if p.table.n else 1.0
    return evaluability(
        metric, p.attribute, p.table.groups, tallies_from_table(p.table), point_value,
        n_undefined, K, p.min_support, scale,
    )  # fmt: skip


def _pooled(
    rule: MetricRule,
    spec: PoolingSpec,
    point: Tallies,
    support_pt: np.ndarray,
    boot: Tallies,
    support: np.ndarray,
    ms: int,
) -> dict[str, list[Any]]:
    """The pooled point values, strengths and bootstrap summary of a stack (per row, as
    lists): the shrinkage is recomputed inside every resample."""
    values, _ = pooled_metric(rule.name, boot, spec, support[:, None, :], ms)
    point_values, strength = pooled_metric(rule.name, point, spec, support_pt, ms)
    summary = summarise_draws(values, rule.threshold, rule.direction)
    summary["value"] = point_values
    summary["point_pass"] = passes(point_values, rule.threshold, rule.direction)
    summary["strength"] = strength
    return {k: np.asarray(v).tolist() for k, v in summary.items()}


def _pooled_estimate(pooled: Mapping[str, list[Any]], row: int, verdict: bool) -> Estimate:
    """Row ``row``'s pooled estimate; with its spread only when it carries the verdict
    (beside a raw verdict, the stored form keeps its value, verdicts, VFR, interval and
    strength)."""
    p = {k: v[row] for k, v in pooled.items()}
    if not verdict:
        return Estimate(
            p["value"], verdict_word(p["point_pass"]), p["n_pass"], p["vfr"],
            verdict_word(p["dominant_pass"]), ci_low=p["ci_low"], ci_high=p["ci_high"],
            strength=p["strength"],
        )  # fmt: skip
    return Estimate(
        p["value"], verdict_word(p["point_pass"]), p["n_pass"], p["vfr"],
        verdict_word(p["dominant_pass"]), p["sigma"], p["mean"], p["sd"], p["ci_low"],
        p["ci_high"], p["n_undefined"], p["strength"],
    )  # fmt: skip


def _stack_drivers(
    name: str,
    tables: Sequence[_Prepared],
    point: Tallies,
    entered: np.ndarray,
    boot: Tallies,
    support: np.ndarray,
    ms: int,
    point_values: Sequence[float],
    point_pass: Sequence[bool],
    col: Mapping[str, list[Any]],
    K: int,
    withheld: Callable[[], list[frozenset[str]]],
) -> dict[int, Drivers | None]:
    """The drivers of the stack's rows that fail or flip and are defined (others: none).

    Only those rows are looked at again, so a grid that passes everywhere pays nothing.
    ``entered`` (M, G): the groups that entered each point value; ``col``: the stack's
    summary as lists; ``withheld()``: each table's groups withheld whatever the rate.
    """
    dominant_pass, n_pass = col["dominant_pass"], col["n_pass"]
    rows = [
        row
        for row, v in enumerate(point_values)
        if not math.isnan(v) and needs_drivers(point_pass[row], dominant_pass[row], n_pass[row], K)
    ]
    if not rows:
        return {}
    return stack_drivers(
        name, tables[0].table.groups, point, entered, boot, support, ms, rows, withheld()
    )


def left_out_groups(groups: Sequence[str], support: np.ndarray) -> tuple[str, ...]:
    return tuple(g for g, ok in zip(groups, support, strict=True) if not ok)


def run_axis1(
    tables: Mapping[tuple[str, str], CountTable],
    options: EngineOptions,
    seed: int,
    seeds: Mapping[str, int] | None = None,
    rules: Sequence[MetricRule] | None = None,
) -> list[CellResult]:
    """Axis 1 as ``options`` say (:func:`monitor.core.engine_options.engine_options` of a
    configuration): K, N, support, threads, intersections and pooling. ``rules``
    (default ``options.rules``) evaluates some of the metrics only."""
    return evaluate_axis1(
        tables, options.rules if rules is None else rules, K=options.K, N=options.N,
        min_group_support=options.min_group_support, seed=seed, threads=options.threads,
        seeds=seeds, pooling=pooling_specs(tables, options),
        pooled_verdict=options.pooled_verdict, intersections=options.intersections,
    )  # fmt: skip


def pooling_specs(
    tables: Mapping[tuple[str, str], CountTable], options: EngineOptions
) -> dict[str, PoolingSpec]:
    """attribute -> how its groups pool, for the intersections ``options`` pools: each
    combined group's parents by position, from the configuration (never from a name).
    Empty when pooling is off."""
    out: dict[str, PoolingSpec] = {}
    for (_, attribute), table in tables.items():
        if attribute in out or attribute not in options.pooled_attributes:
            continue
        inter = options.intersections[attribute]
        inter.check_table(table.groups)
        out[attribute] = PoolingSpec(inter.parent_index(), options.prior_strength)
    return out


def compile_kernels() -> None:
    """Compile every compiled kernel of the engine, or load it from numba's disk cache.

    Why: the first evaluation in a process otherwise pays it (seconds when nothing is
    cached, under a second from the cache). The cache (``cache=True``) lives beside
    the sources in ``__pycache__``, or in ``NUMBA_CACHE_DIR``; the service image fills
    it at build time by calling this (see the Dockerfile).
    """
    table = CountTable(("a", "b"))
    table.add(
        np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1]), np.array([0, 1, 1, 0]),
        np.array([0.2, 0.6, 0.7, 0.4]),
    )  # fmt: skip
    rules = [MetricRule(name=name, threshold=0.1, direction="<=") for name in sorted(NEEDS_BINS)]
    evaluate_axis1({("m", "a"): table}, rules, K=2, N=4, min_group_support=1, threads=1)
