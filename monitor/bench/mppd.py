"""``vfr-monitor bench mppd``: the neighbour-index matcher against the all-pairs oracle;
with ``--bound``, EquiLense per model exact against bounded (a stratified sample)."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd

from batch_axes.equilense import EquiLenseResult
from batch_axes.mppd import DEFAULT_THRESHOLD, matched_pairs, scale_features
from batch_axes.mppd_sample import Z95
from batch_axes.runner import run_equilense
from monitor.bench.synthetic import GROUP_NAMES, synthetic_similarity_cohort
from monitor.config import MonitorConfig
from monitor.core.tables import tables_from_frame
from monitor.reference.mppd import matched_pairs_all_pairs


def run_mppd_bench(
    n: int = 20_000, n_large: int = 50_000, seed: int = 0, features: int = 8
) -> dict[str, Any]:
    """Time the fast matcher against the all-pairs oracle, then the fast one alone at scale.

    Returns ``n``, ``fast_s`` (median of 3 runs), ``oracle_s`` (one run),
    ``speedup``, ``same_pairs`` (identical pair arrays), ``pairs`` (matched
    pairs at ``n``) and ``fast_s_50k`` (median of 3 runs at ``n_large``). The
    threshold is the default 0.01, features are min-max scaled, and the fast
    matcher runs with its defaults (k-d tree slabs on every available CPU);
    the oracle is single-threaded NumPy. Wall-clock seconds: run it on an idle
    machine.
    """
    X, _, _ = synthetic_similarity_cohort(n, seed, features)
    Xs = scale_features(X)
    fast_times = []
    for _ in range(3):
        started = time.perf_counter()
        fast = matched_pairs(Xs, DEFAULT_THRESHOLD)
        fast_times.append(time.perf_counter() - started)
    started = time.perf_counter()
    oracle = matched_pairs_all_pairs(Xs, DEFAULT_THRESHOLD)
    oracle_s = time.perf_counter() - started
    same = bool(np.array_equal(fast[0], oracle[0]) and np.array_equal(fast[1], oracle[1]))

    X_large, _, _ = synthetic_similarity_cohort(n_large, seed, features)
    Xs_large = scale_features(X_large)
    large_times = []
    for _ in range(3):
        started = time.perf_counter()
        matched_pairs(Xs_large, DEFAULT_THRESHOLD)
        large_times.append(time.perf_counter() - started)

    fast_s = statistics.median(fast_times)
    return {
        "n": n,
        "fast_s": fast_s,
        "oracle_s": oracle_s,
        "speedup": oracle_s / fast_s if fast_s > 0 else math.inf,
        "same_pairs": same,
        "fast_s_50k": statistics.median(large_times),
        "pairs": int(fast[0].size),
    }


# --------------------------------------------------------------------------- bounded MPPD

#: The bench cohort's protected attributes (the similarity cohort's five groups, and sex).
BOUND_ATTRIBUTES = (
    {"name": "group", "groups": {g: g for g in GROUP_NAMES}},
    {"name": "sex", "groups": {"F": "female", "M": "male"}},
)


def bound_bench_cohort(n: int, seed: int = 0, features: int = 8) -> tuple[pd.DataFrame, np.ndarray]:
    """The similarity cohort as scored records of one model (labels drawn from the
    scores, a sex attribute beside the five groups) and its raw features."""
    X, scores, groups = synthetic_similarity_cohort(n, seed, features)
    rng = np.random.default_rng(seed + 1)
    frame = pd.DataFrame(
        {
            "record_id": np.char.add("r", np.arange(n).astype(str)),
            "model_id": "model-00",
            "group": groups,
            "sex": rng.choice(["F", "M"], n, p=[0.45, 0.55]),
            "label": (rng.uniform(size=n) < scores).astype(np.int64),
            "score": scores,
            "decision": (scores >= 0.5).astype(np.int64),
        }
    )
    return frame, X


def _figures(result: EquiLenseResult) -> dict[str, Any]:
    """The headline figures of the bench model: value and error, and how computed."""
    m = result.models["model-00"]
    ref = m.mppd["group"].reference
    gap = m.individual_fairness_gap
    return {
        "method": None if m.sampling is None else m.sampling.method,
        "records": m.sampling.records if m.sampling else m.records,
        "pairs": None if gap is None else gap.pairs,
        "mppd_disparity_group": ref.disparity,
        "mppd_disparity_group_se": ref.disparity_se,
        "if_gap": None if gap is None else gap.mean,
        "if_gap_se": None if gap is None else gap.se,
    }


def run_mppd_bound_bench(
    sizes: tuple[int, ...] = (175_000, 1_800_000),
    repeats: int = 3,
    full_limit: int = 200_000,
    seed: int = 0,
) -> dict[str, Any]:
    """EquiLense per model, exact against bounded (the default ``[equilense]`` sample
    bounds), at each cohort size.

    Per size: ``full_s`` and ``bounded_s`` (wall-clock; ``*_cpu_s`` the CPU seconds of
    all threads; medians of ``repeats`` runs of
    :func:`~batch_axes.runner.run_equilense`: group metrics, IF gap and MPPD of two
    attributes), their ``ratio``, and both runs' figures (MPPD disparity over the five
    groups and IF gap, each with its standard error when sampled). Exact runs above
    ``full_limit`` records are not made (matched pairs grow as n^2: at 1.8M about 100
    times the pairs at 175k, beyond this machine's memory): ``full_s_estimated`` scales
    the largest measured exact run by the pairs a pilot predicts. ``within_95`` says
    whether the exact value lies within the bounded value +- 1.96 SE.
    """
    bounded_cfg = MonitorConfig.model_validate(
        {"attributes": list(BOUND_ATTRIBUTES), "equilense": {"features": ["f"]}}
    )
    full_cfg = MonitorConfig.model_validate(
        {
            "attributes": list(BOUND_ATTRIBUTES),
            "equilense": {"features": ["f"], "sample_records": 0},
        }
    )
    eq = bounded_cfg.equilense
    out: dict[str, Any] = {
        "repeats": repeats,
        "sample_records": eq.sample_records,
        "sample_pairs": eq.sample_pairs,
        "sizes": {},
    }
    measured: tuple[int, float, int] | None = None  # (n, full_s, pairs) of the largest exact
    for n in sizes:
        frame, X = bound_bench_cohort(n, seed)
        names = tuple(f"f{k}" for k in range(X.shape[1]))
        row: dict[str, Any] = {"records": n}
        b_times, b_cpu, bounded = _timed(frame, X, names, bounded_cfg, repeats)
        row["bounded_s"] = statistics.median(b_times)
        row["bounded_cpu_s"] = statistics.median(b_cpu)
        row["bounded"] = _figures(bounded)
        if n <= full_limit:
            f_times, f_cpu, full = _timed(frame, X, names, full_cfg, repeats)
            row["full_s"] = statistics.median(f_times)
            row["full_cpu_s"] = statistics.median(f_cpu)
            row["full"] = _figures(full)
            measured = (n, row["full_s"], int(row["full"]["pairs"]))
        else:
            row["full_s"] = None
            if measured is not None:
                m_n, m_s, m_pairs = measured
                est_pairs = m_pairs * (n * (n - 1)) / (m_n * (m_n - 1))
                row["full_pairs_estimated"] = int(est_pairs)
                row["full_s_estimated"] = m_s * est_pairs / m_pairs
        full_s = row.get("full_s") or row.get("full_s_estimated")
        row["ratio"] = full_s / row["bounded_s"] if full_s else None
        if "full" in row:
            b, f = row["bounded"], row["full"]
            se = b["mppd_disparity_group_se"]
            row["within_95"] = (
                True if se is None and b["mppd_disparity_group"] == f["mppd_disparity_group"]
                else bool(se is not None and abs(
                    b["mppd_disparity_group"] - f["mppd_disparity_group"]) <= Z95 * se)
            )  # fmt: skip
        out["sizes"][str(n)] = row
    return out


def _timed(
    frame: pd.DataFrame, X: np.ndarray, names: tuple[str, ...], cfg: MonitorConfig, repeats: int
) -> tuple[list[float], list[float], EquiLenseResult]:
    """Wall-clock and CPU seconds (all threads) of ``repeats`` EquiLense runs (count
    tables included), and the last result. CPU seconds say more than wall-clock on a
    shared machine, where other processes stretch the wall clock."""
    times, cpu = [], []
    result: EquiLenseResult | None = None
    for _ in range(max(1, repeats)):
        started, cpu0 = time.perf_counter(), time.process_time()
        result = run_equilense(frame, X, names, tables_from_frame(frame, cfg), cfg)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu0)
    assert result is not None
    return times, cpu, result
