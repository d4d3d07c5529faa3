"""``vfr-monitor bench mppd``: the neighbour-index matcher against the all-pairs oracle."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import numpy as np

from batch_axes.mppd import DEFAULT_THRESHOLD, matched_pairs, scale_features
from monitor.bench.synthetic import synthetic_similarity_cohort
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

