"""`vfr-monitor bench axes` and `bench mppd`: the scheduled axes on large cohorts.

`axes`: Axis 2 and Axis 3 for one model on a synthetic cohort (default
1,000,000 records, 400 hospitals with Zipf-like volumes), 7 metrics x 4
attributes. Axis 2 starts from the cohort's count tables (the service keeps
them); Axis 3 starts from the records (fold assignment included). Median of
repeats, after one warm-up run each.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from batch_axes.runner import run_axis2, run_axis3
from monitor.bench.synthetic import skewed_hospital_ids, synthetic_cohort
from monitor.config import MonitorConfig
from monitor.core.counts import CountTable


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: first-call allocations and imports are not what is measured
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_axes_bench(
    records: int = 1_000_000,
    hospitals: int = 400,
    repeats: int = 5,
    seed: int = 0,
    config: MonitorConfig | None = None,
) -> dict:
    cfg = config or MonitorConfig()
    cohort = synthetic_cohort(records, 1, seed, cfg)
    ids = skewed_hospital_ids(records, hospitals, seed)
    score = cohort.scores[0]
    decision = (score >= cfg.decision.threshold).astype(np.int64)
    tables = {
        ("model-00", a.name): CountTable.from_records(
            a.codes, cohort.attributes[a.name], cohort.label, decision, score, cfg.axis1.score_bins
        )
        for a in cfg.attributes
    }

    # The service's own entry points: Axis 2 from the count tables, Axis 3 from the records
    # (hospital fold assignment included), so the figure is what a scheduled job costs.
    frame = pd.DataFrame(
        {
            "hospital_id": ids.astype(str),
            "label": cohort.label,
            "decision": decision,
            "score": score,
            **{a.name: np.asarray(a.codes)[cohort.attributes[a.name]] for a in cfg.attributes},
        }
    )
    cfg = cfg.model_copy(update={"axis1": cfg.axis1.model_copy(update={"seed": seed})})

    axis2_s = _median_time(lambda: run_axis2(tables, cfg), repeats)
    axis3_s = _median_time(lambda: run_axis3("model-00", frame, cfg), repeats)
    return {
        "records": records,
        "hospitals": len(np.unique(ids)),
        "cells": len(cfg.metrics) * len(cfg.attributes),
        "repeats": repeats,
        "axis2_s": round(axis2_s, 4),
        "axis3_s": round(axis3_s, 4),
        "total_s": round(axis2_s + axis3_s, 4),
    }
