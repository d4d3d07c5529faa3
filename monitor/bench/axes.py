"""`vfr-monitor bench axes` and `bench mppd`: the scheduled axes on large cohorts.

`axes`: Axis 2 and Axis 3 for one model on a synthetic cohort (default
1,000,000 records, 400 hospitals with Zipf-like volumes), 7 metrics x 4
attributes. Axis 2 starts from the cohort's count tables (the service keeps
them); Axis 3 starts from the records (fold assignment included). Median of
repeats, after one warm-up run each.

`axes --from-store`: the scheduled jobs as the service runs them, on a real DuckDB file
(:func:`run_axes_store_bench`): re-reading each cohort against the count tables kept up
to date (monitor.service.cohort_book), timed in the same run.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from batch_axes.runner import run_axis2, run_axis3, run_axis3_counts
from monitor.bench.synthetic import skewed_hospital_ids, synthetic_cohort
from monitor.config import MonitorConfig
from monitor.core.counts import CountTable
from monitor.core.tables import tables_from_frame
from monitor.service.cohort_book import CohortBook, CohortView
from monitor.store import Store, queries


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


# ----------------------------------------------------------------------------- --from-store
#: The bench's first event time (any fixed date: the cohort is relative to the latest one).
_T0 = pd.Timestamp("2026-01-01", tz="UTC")
#: Records per stored transaction while the file is filled.
_CHUNK = 250_000


def cohort_frame(
    model_id: str,
    n: int,
    start_day: float,
    days: float,
    seed: int,
    cfg: MonitorConfig,
    hospitals: int = 400,
    first_id: int = 0,
) -> pd.DataFrame:
    """``n`` valid records of one model with event times spread evenly over ``days`` from
    ``start_day``, in event-time order (as a stream delivers them), Zipf-like hospitals and
    a few records without a hospital id: what :meth:`Store.rows_table_from_frame` takes."""
    cohort = synthetic_cohort(n, 1, seed, cfg)
    score = cohort.scores[0]
    rng = np.random.default_rng(seed + 7)
    offset_us = np.sort(rng.uniform(0.0, days * 86_400e6, n)).astype(np.int64)
    hosp = skewed_hospital_ids(n, hospitals, seed)
    hosp[rng.uniform(size=n) < 0.002] = None
    return pd.DataFrame(
        {
            "model_id": model_id,
            "record_id": [f"{model_id}-{first_id + i}" for i in range(n)],
            "event_time": _T0 + pd.Timedelta(days=start_day) + pd.to_timedelta(offset_us, "us"),
            "hospital_id": hosp,
            "score": score,
            "label": cohort.label,
            "decision": (score >= cfg.decision.threshold).astype(np.int64),
            **{a.name: np.asarray(a.codes)[cohort.attributes[a.name]] for a in cfg.attributes},
            "features": None,
        }
    )


def store_frame(store: Store, frame: pd.DataFrame) -> None:
    """Store valid records through the writer's own ingest path, in transactions."""
    for start in range(0, len(frame), _CHUNK):
        rows = store.rows_table_from_frame(frame.iloc[start : start + _CHUNK])
        with store.transaction():
            store.ingest_table(rows, [], pd.Timestamp.now(tz="UTC"))


def _reread_run(store: Store, models: list[str], cfg: MonitorConfig) -> tuple[float, float]:
    """The job before the count tables: read each cohort, then Axis 2 and 3 on it.
    Returns (read s, compute s) over all models."""
    read = compute = 0.0
    c = store.cursor()
    try:
        for m in models:
            t0 = time.perf_counter()
            frame = queries.window_records(
                c, store.attributes, m, days=cfg.service.axes.cohort_days, with_details=True
            ).assign(model_id=m)
            t1 = time.perf_counter()
            run_axis2(tables_from_frame(frame, cfg), cfg)
            run_axis3(m, frame, cfg)
            read, compute = read + t1 - t0, compute + time.perf_counter() - t1
    finally:
        c.close()
    return read, compute


def _incremental_run(
    store: Store, book: CohortBook, models: list[str], cfg: MonitorConfig
) -> tuple[float, float, dict[str, CohortView]]:
    """The job now: update each cohort's counts, then Axis 2 and 3 from them.
    Returns (update s, compute s, the views)."""
    update = compute = 0.0
    views = {}
    c = store.cursor()
    try:
        for m in models:
            t0 = time.perf_counter()
            v = views[m] = book.update(c, m)
            t1 = time.perf_counter()
            run_axis2({(m, k): t for k, t in v.counts.tables.items()}, cfg)
            run_axis3_counts(m, v.counts, cfg)
            update, compute = update + t1 - t0, compute + time.perf_counter() - t1
    finally:
        c.close()
    return update, compute, views


def _same_results(store: Store, views: dict[str, CohortView], cfg: MonitorConfig) -> bool:
    """Both paths on the current file: Axis 3 identical, Axis 2's tables identical (so its
    draws are too), cohort sizes equal."""
    c = store.cursor()
    try:
        for m, v in views.items():
            frame = queries.window_records(
                c, store.attributes, m, days=cfg.service.axes.cohort_days, with_details=True
            ).assign(model_id=m)
            tables = tables_from_frame(frame, cfg)
            if len(frame) != v.n or any(tables[(m, k)] != t for k, t in v.counts.tables.items()):
                return False
            if run_axis3(m, frame, cfg).to_dict() != run_axis3_counts(m, v.counts, cfg).to_dict():
                return False
    finally:
        c.close()
    return True


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def run_axes_store_bench(
    records_per_model: int = 1_000_000,
    models: int = 4,
    hospitals: int = 400,
    repeats: int = 3,
    seed: int = 0,
    config: MonitorConfig | None = None,
    db_dir: str | None = None,
) -> dict:
    """Axis 2 + Axis 3 runs on a real DuckDB file, re-read against incremental counts.

    The file holds ``models`` models of ``records_per_model`` records over ``cohort_days``
    and one small model of an eighth of that (the no-new-records cost at two cohort sizes),
    written through the store's own ingest path. Timed, all models per run: the re-read job
    (cohort query + axes), the incremental job's first build, a run after a day of new
    records (a day enters, a day leaves) and a run with no new records; medians of
    ``repeats``. Both paths are checked to give the same Axis 3 and the same Axis 2 tables.
    """
    cfg = config or MonitorConfig()
    days = float(cfg.service.axes.cohort_days)
    per_day = max(1, round(records_per_model / days))
    names = [f"model-{m:02d}" for m in range(models)]
    small, small_n = "model-small", max(1, records_per_model // 8)
    with tempfile.TemporaryDirectory(prefix="vfr-bench-axes-", dir=db_dir) as tmp:
        store = Store(f"{tmp}/axes.duckdb", cfg)
        try:
            t0 = time.perf_counter()
            for i, m in enumerate(names):
                store_frame(store, cohort_frame(m, records_per_model, 0.0, days, seed + i, cfg,
                                                hospitals))  # fmt: skip
            store_frame(store, cohort_frame(small, small_n, 0.0, days, seed + 99, cfg, hospitals))
            fill_s = time.perf_counter() - t0

            book = CohortBook(cfg)
            build = _incremental_run(store, book, names, cfg)  # the first run: builds
            _incremental_run(store, book, [small], cfg)
            noop = [_incremental_run(store, book, names, cfg)[:2] for _ in range(repeats)]
            # interleaved, so that a busy machine slows both sizes alike
            noop_big, noop_small = [], []
            for _ in range(7 * repeats):
                noop_big.append(_timed_update(store, book, names[0]))
                noop_small.append(_timed_update(store, book, small))
            day, moved = [], []
            for r in range(repeats):
                new = [cohort_frame(m, per_day, days + r, 1.0, seed + 1000 * (r + 1) + i, cfg,
                                    hospitals, first_id=records_per_model + r * per_day)
                       for i, m in enumerate(names)]  # fmt: skip
                for frame in new:
                    store_frame(store, frame)
                u, c, views = _incremental_run(store, book, names, cfg)
                day.append((u, c))
                moved.append(sum(v.entered + v.left for v in views.values()))
            same = _same_results(store, views, cfg)
            reread = [_reread_run(store, names, cfg) for _ in range(repeats)]
            cohort_n = {m: v.n for m, v in views.items()}
            memory = {m: book.nbytes(m) for m in [*names, small]}
        finally:
            store.close()
    reread_s = _median([a + b for a, b in reread])
    day_s = _median([a + b for a, b in day])
    noop_s = _median([a + b for a, b in noop])
    return {
        "records_per_model": records_per_model,
        "models": models,
        "hospitals": hospitals,
        "cohort_days": days,
        "repeats": repeats,
        "fill_s": round(fill_s, 2),
        "cohort_n": cohort_n,
        "same_results": same,
        "reread_s": reread_s,
        "reread_read_s": _median([a for a, _ in reread]),
        "reread_compute_s": _median([b for _, b in reread]),
        "incremental_build_s": round(sum(build[:2]), 4),
        "incremental_build_update_s": round(build[0], 4),
        "incremental_day_s": day_s,
        "incremental_day_update_s": _median([a for a, _ in day]),
        "incremental_day_compute_s": _median([b for _, b in day]),
        "records_moved_per_day_run": int(statistics.median(moved)),
        "incremental_noop_s": noop_s,
        "incremental_noop_update_s": _median([a for a, _ in noop]),
        "ratio_reread_over_day": round(reread_s / day_s, 1),
        "ratio_reread_over_noop": round(reread_s / noop_s, 1),
        "noop_update_one_model_s": {
            str(records_per_model): _median(noop_big),
            str(small_n): _median(noop_small),
        },
        "memory_bytes_per_model": memory,
    }


def _timed_update(store: Store, book: CohortBook, model_id: str) -> float:
    c = store.cursor()
    try:
        t0 = time.perf_counter()
        book.update(c, model_id)
        return time.perf_counter() - t0
    finally:
        c.close()
