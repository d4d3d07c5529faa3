"""`vfr-monitor bench axis1`: the count-level engine against the record-level oracle.

Both run in the same process on the same seeded synthetic window, so the ratio
is meaningful on a shared, noisy machine. The oracle is O(K x N) per
(model, attribute), so it runs on a subset of models and its time is scaled per
cell; the output says so.

It also times the engine's *floor*: drawing just the random variates the grid
needs (the same binomial, multinomial and normal draws, from the same per-table
generators, on the same threads) and nothing else. ``floor_ratio`` =
fast_s / floor_s is how much the engine spends beyond its random numbers.
``numpy_floor_s`` draws the same variates with numpy's samplers (the engine's
sampler before ``monitor.core.sampling``), for comparison. Compiled kernels are
warmed up (and their first-call time reported) before anything is timed.
"""

from __future__ import annotations

import math
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from statistics import NormalDist
from typing import Any

import numba
import numpy as np

from monitor.bench.synthetic import model_name, synthetic_cohort, synthetic_tables
from monitor.config import DEFAULT_INTERSECTIONS, IntersectionConfig, MonitorConfig
from monitor.config.engine import engine_options
from monitor.core import axis1, sampling
from monitor.core.axis1 import (
    DrawParams,
    _prepare,
    compile_kernels,
    draw_params,
    draw_variates,
    run_axis1,
    table_rng,
)
from monitor.core.metrics import NEEDS_BINS
from monitor.core.tables import grid_groups
from monitor.reference.axis1 import reference_axis1

SWEEP_WINDOWS = (1_000, 10_000, 100_000, 1_000_000)


def vfr_tolerance(K: int, cells: int, alpha: float = 0.001) -> float:
    """Largest |VFR_fast - VFR_oracle| expected from Monte Carlo error alone.

    Each VFR is built from a pass share estimated on K independent resamples,
    whose sd is at most sqrt(0.25 / K); the difference of two independent ones
    has sd at most sqrt(0.5 / K). With a Bonferroni z over ``cells`` comparisons
    at family-wise level alpha: z * sqrt(0.5 / K).
    """
    z = NormalDist().inv_cdf(1 - alpha / (2 * max(cells, 1)))
    return z * math.sqrt(0.5 / K)


def _run_grid(tables, cfg: MonitorConfig, K: int, N: int, seed: int) -> tuple[float, float, list]:
    """One evaluation of the grid: (wall s, process CPU s, results)."""
    t0, c0 = time.perf_counter(), time.process_time()
    results = run_axis1(tables, replace(engine_options(cfg), K=K, N=N), seed)
    return time.perf_counter() - t0, time.process_time() - c0, results


def _time_grid(
    tables, cfg: MonitorConfig, K: int, N: int, repeats: int, seed: int
) -> tuple[float, list]:
    times: list[float] = []
    results: list[Any] = []
    for r in range(repeats):
        wall, _, results = _run_grid(tables, cfg, K, N, seed + r)
        times.append(wall)
    return statistics.median(times), results


def jit_warmup() -> dict:
    """Compile (or load from numba's disk cache) the engine's kernels; time and whether
    anything was compiled rather than loaded. Nothing later in the bench pays it."""
    t0 = time.perf_counter()
    compile_kernels()
    elapsed = time.perf_counter() - t0
    kernels = [
        v
        for module in (sampling, axis1)
        for v in vars(module).values()
        if isinstance(v, numba.core.dispatcher.Dispatcher)
    ]
    misses = sum(sum(k.stats.cache_misses.values()) for k in kernels)
    return {"jit_first_call_s": round(elapsed, 3), "jit_compiled": misses > 0}


def _numpy_variates(p: DrawParams, K: int, rng: np.random.Generator, with_bins: bool) -> None:
    """The same variates with numpy's samplers, as the engine drew them before
    monitor.core.sampling: one binomial array call, the multinomial as conditional
    binomials one category at a time (vectorised over strata and replicates), normals."""
    S, C = p.q.shape
    rng.binomial(np.broadcast_to(p.sizes[:, None], (S, K)), p.p1[:, None])
    if not with_bins:
        return
    order = np.argsort(p.q, axis=1, kind="stable")
    q_sorted = np.take_along_axis(p.q, order, axis=1)
    tail = q_sorted[:, ::-1].cumsum(axis=1)[:, ::-1]
    remaining = np.broadcast_to(p.sizes[:, None], (S, K)).astype(np.int64)
    for c in range(C - 1):
        cond = np.divide(q_sorted[:, c], tail[:, c], out=np.zeros(S), where=tail[:, c] > 0)
        active = (np.clip(cond, 0.0, 1.0) > 0) & (p.sizes > 0)
        if active.any():
            x = rng.binomial(remaining[active], np.clip(cond, 0.0, 1.0)[active, None])
            remaining[active] -= x
    G, _, B = p.mu.shape
    rng.standard_normal((G, B, K))


def _floor_params(tables, cfg: MonitorConfig, N: int) -> list[tuple[str, str, DrawParams]]:
    out = []
    for (m, a), t in tables.items():
        p = _prepare(m, a, t, N, cfg.axis1.min_group_support)
        out.append((m, a, draw_params(t, p.sizes)))
    return out


def _run_floor(params, cfg: MonitorConfig, K: int, seed: int, draw) -> tuple[float, float]:
    """Draw the grid's variates once with ``draw`` (params, K, rng, with_bins): (wall, CPU).

    Parameters and generators are made before the clock starts: only the draws are timed,
    on a thread pool of the engine's size, one task per table as in the engine.
    """
    with_bins = any(r.name in NEEDS_BINS for r in cfg.metrics)
    threads = cfg.axis1.threads
    jobs = [(p, table_rng(seed, m, a)) for m, a, p in params]
    t0, c0 = time.perf_counter(), time.process_time()
    if threads > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(lambda j: draw(j[0], K, j[1], with_bins), jobs))
    else:
        for p, rng in jobs:
            draw(p, K, rng, with_bins)
    return time.perf_counter() - t0, time.process_time() - c0


def run_axis1_bench(
    models: int = 12,
    window: int = 10_000,
    K: int = 500,
    N: int = 10_000,
    repeats: int = 7,
    oracle_models: int = 1,
    seed: int = 7,
    config: MonitorConfig | None = None,
) -> dict:
    """Time the full grid with the fast engine and a subset with the oracle."""
    cfg = config or MonitorConfig()
    jit = jit_warmup()
    tables = synthetic_tables(window, models, seed, cfg)
    params = _floor_params(tables, cfg, N)
    # Engine, floor and numpy floor take turns in every repeat, so that load from other
    # processes on a shared machine falls on all three alike.
    timed: dict[str, list[tuple[float, float]]] = {"fast": [], "floor": [], "numpy": []}
    for r in range(repeats):
        wall, cpu, fast_results = _run_grid(tables, cfg, K, N, seed + r)
        timed["fast"].append((wall, cpu))
        timed["floor"].append(_run_floor(params, cfg, K, seed + r, draw_variates))
        timed["numpy"].append(_run_floor(params, cfg, K, seed + r, _numpy_variates))
    wall_s = {k: statistics.median(w for w, _ in v) for k, v in timed.items()}
    cpu_s = {k: statistics.median(c for _, c in v) for k, v in timed.items()}
    fast_s, floor_s = wall_s["fast"], wall_s["floor"]
    cells = len(fast_results)

    cohort = synthetic_cohort(window, models, seed, cfg)
    oracle_cells, diffs, oracle_time = 0, [], 0.0
    fast_by_cell = {(r.model_id, r.metric, r.attribute): r for r in fast_results}
    rng = np.random.default_rng(seed + 1000)
    for m in range(min(oracle_models, models)):
        s = cohort.scores[m]
        d = (s >= cfg.decision.threshold).astype(np.int64)
        for a in cfg.attributes:
            t0 = time.perf_counter()
            ref = reference_axis1(
                model_name(m),
                a.name,
                a.codes,
                cohort.attributes[a.name],
                cohort.label,
                d,
                s,
                cfg.metrics,
                K=K,
                N=N,
                min_group_support=cfg.axis1.min_group_support,
                bins=cfg.axis1.score_bins,
                rng=rng,
            )
            oracle_time += time.perf_counter() - t0
            for ref_cell in ref:
                oracle_cells += 1
                fast_cell = fast_by_cell[(ref_cell.model_id, ref_cell.metric, ref_cell.attribute)]
                diffs.append(abs(ref_cell.vfr - fast_cell.vfr))
    oracle_s = oracle_time / oracle_cells * cells
    return {
        "cells": cells,
        "K": K,
        "N": min(window, N),
        "window": window,
        "models": models,
        "repeats": repeats,
        "threads": cfg.axis1.threads,
        "fast_s": round(fast_s, 6),
        "floor_s": round(floor_s, 6),
        "floor_ratio": round(fast_s / floor_s, 3),
        "numpy_floor_s": round(wall_s["numpy"], 6),
        "fast_cpu_s": round(cpu_s["fast"], 6),
        "floor_cpu_s": round(cpu_s["floor"], 6),
        "floor_cpu_ratio": round(cpu_s["fast"] / cpu_s["floor"], 3),
        **jit,
        "oracle_s": round(oracle_s, 3),
        "oracle_cells_run": oracle_cells,
        "oracle_note": f"oracle ran {oracle_cells} of {cells} cells; oracle_s is scaled per cell",
        "speedup": round(oracle_s / fast_s, 1),
        "max_vfr_diff": round(max(diffs), 4) if diffs else None,
        "vfr_tolerance": round(vfr_tolerance(K, oracle_cells), 4),
        "intersections": intersections_bench(cfg, window, models, K, N, repeats, seed),
    }


def with_and_without_intersections(cfg: MonitorConfig) -> tuple[MonitorConfig, MonitorConfig]:
    """(attribute-only grid, grid with intersections): the config's own
    ``[[intersections]]``, or the default ones (DEFAULT_INTERSECTIONS) when it has none and
    names their attributes."""
    base = cfg.with_intersections([])
    inters = cfg.intersections
    if not inters:
        names = {a.name for a in cfg.attributes}
        inters = [
            IntersectionConfig(attributes=i) for i in DEFAULT_INTERSECTIONS if names.issuperset(i)
        ]
    return base, cfg.with_intersections(list(inters))


def intersections_bench(
    cfg: MonitorConfig, window: int, models: int, K: int, N: int, repeats: int, seed: int
) -> dict:
    """The grid with intersections against the attribute-only grid on the same window:
    cells, median time and their ratios (the two take turns in every repeat). The cost
    follows the strata (label x group): race x sex adds 10 groups to the 13 of the
    four default attributes."""
    base, inter = with_and_without_intersections(cfg)
    t_base = synthetic_tables(window, models, seed, base)
    t_inter = synthetic_tables(window, models, seed, inter)
    times: dict[str, list[float]] = {"base": [], "inter": []}
    for r in range(repeats):
        wall, _, base_results = _run_grid(t_base, base, K, N, seed + r)
        times["base"].append(wall)
        wall, _, inter_results = _run_grid(t_inter, inter, K, N, seed + r)
        times["inter"].append(wall)
    base_s, inter_s = (statistics.median(times[k]) for k in ("base", "inter"))
    groups = {a.name: len(a.codes) for a in inter.grid_attributes}
    named = {a.name for a in base.grid_attributes}
    diffs = _intersection_oracle(inter, named, inter_results, window, models, K, N, seed)
    return {
        "configured": [i.name for i in inter.intersections],
        "groups": {k: v for k, v in groups.items() if k not in named},
        "attribute_only_cells": len(base_results),
        "cells": len(inter_results),
        "attribute_only_strata": 2 * sum(len(a.codes) for a in base.grid_attributes),
        "strata": 2 * sum(groups.values()),
        "attribute_only_fast_s": round(base_s, 6),
        "fast_s": round(inter_s, 6),
        "cells_ratio": round(len(inter_results) / len(base_results), 3),
        "time_ratio": round(inter_s / base_s, 3),
        "oracle_cells_run": len(diffs),
        "max_vfr_diff": round(max(diffs), 4) if diffs else None,
        "vfr_tolerance": round(vfr_tolerance(K, len(diffs)), 4),
    }


def _intersection_oracle(
    cfg: MonitorConfig,
    named: set[str],
    results: list,
    window: int,
    models: int,
    K: int,
    N: int,
    seed: int,
) -> list[float]:
    """|VFR engine - VFR oracle| of the first model's intersection cells: the oracle
    resamples records grouped by the intersection codes of each record."""
    cohort = synthetic_cohort(window, models, seed, cfg)
    groups = grid_groups(cohort.attributes, cfg)
    s = cohort.scores[0]
    d = (s >= cfg.decision.threshold).astype(np.int64)
    fast = {(r.model_id, r.metric, r.attribute): r for r in results}
    rng = np.random.default_rng(seed + 2000)
    diffs = []
    for a in cfg.grid_attributes:
        if a.name in named:
            continue
        ref = reference_axis1(
            model_name(0), a.name, a.codes, groups[a.name], cohort.label, d, s, cfg.metrics,
            K=K, N=N, min_group_support=cfg.axis1.min_group_support,
            bins=cfg.axis1.score_bins, rng=rng,
        )  # fmt: skip
        diffs += [abs(r.vfr - fast[(r.model_id, r.metric, r.attribute)].vfr) for r in ref]
    return diffs


def run_axis1_sweep(
    models: int = 12,
    K: int = 500,
    N: int = 10_000,
    repeats: int = 5,
    seed: int = 7,
    config: MonitorConfig | None = None,
    windows: tuple[int, ...] = SWEEP_WINDOWS,
) -> dict:
    """fast_s for windows of 1e3 .. 1e6 records (or ``windows``): the cost must not grow with
    the window. ``ratio_largest_to_smallest`` is fast_s at the largest window over fast_s at
    the smallest (on the default windows, 1e6 over 1e3)."""
    cfg = config or MonitorConfig()
    jit = jit_warmup()  # compiled before the first timing, as in run_axis1_bench
    out = {}
    sizes = sorted(set(windows))
    for w in sizes:
        tables = synthetic_tables(w, models, seed, cfg)
        fast_s, results = _time_grid(tables, cfg, K, N, repeats, seed)
        out[str(w)] = round(fast_s, 6)
    ratio = out[str(sizes[-1])] / out[str(sizes[0])]
    return {
        "cells": len(results), "K": K, "models": models, "repeats": repeats, "fast_s": out,
        "ratio_largest_to_smallest": round(ratio, 3), **jit,
    }  # fmt: skip
