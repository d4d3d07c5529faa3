"""`vfr-monitor bench axis1`: the count-level engine against the record-level oracle.

Both run in the same process on the same seeded synthetic window, so the ratio
is meaningful on a shared, noisy machine. The oracle is O(K x N) per
(model, attribute), so it runs on a subset of models and its time is scaled per
cell; the output says so.
"""

from __future__ import annotations

import math
import statistics
import time
from statistics import NormalDist

import numpy as np

from monitor.axis1 import evaluate_axis1
from monitor.axis1_reference import reference_axis1
from monitor.config import MonitorConfig
from monitor.synthetic import model_name, synthetic_cohort, synthetic_tables

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


def _time_grid(
    tables, cfg: MonitorConfig, K: int, N: int, repeats: int, seed: int
) -> tuple[float, list]:
    times, results = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        results = evaluate_axis1(
            tables,
            cfg.metrics,
            K=K,
            N=N,
            min_group_support=cfg.axis1.min_group_support,
            seed=seed + r,
            threads=cfg.axis1.threads,
        )
        times.append(time.perf_counter() - t0)
    return statistics.median(times), results


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
    tables = synthetic_tables(window, models, seed, cfg)
    fast_s, fast_results = _time_grid(tables, cfg, K, N, repeats, seed)
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
            for r in ref:
                oracle_cells += 1
                diffs.append(abs(r.vfr - fast_by_cell[(r.model_id, r.metric, r.attribute)].vfr))
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
        "oracle_s": round(oracle_s, 3),
        "oracle_cells_run": oracle_cells,
        "oracle_note": f"oracle ran {oracle_cells} of {cells} cells; oracle_s is scaled per cell",
        "speedup": round(oracle_s / fast_s, 1),
        "max_vfr_diff": round(max(diffs), 4) if diffs else None,
        "vfr_tolerance": round(vfr_tolerance(K, oracle_cells), 4),
    }


def run_axis1_sweep(
    models: int = 12,
    K: int = 500,
    N: int = 10_000,
    repeats: int = 5,
    seed: int = 7,
    config: MonitorConfig | None = None,
) -> dict:
    """fast_s for windows of 1e3 .. 1e6 records: the cost must not grow with the window."""
    cfg = config or MonitorConfig()
    out = {}
    for w in SWEEP_WINDOWS:
        tables = synthetic_tables(w, models, seed, cfg)
        fast_s, results = _time_grid(tables, cfg, K, N, repeats, seed)
        out[str(w)] = round(fast_s, 6)
    ratio = out[str(SWEEP_WINDOWS[-1])] / out[str(SWEEP_WINDOWS[0])]
    return {"cells": len(results), "K": K, "fast_s": out, "ratio_1e6_to_1e3": round(ratio, 3)}
