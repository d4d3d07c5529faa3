"""The cohort book on a real DuckDB file: after every update its counts are those of the
cohort the re-read path reads (window_records(days=)), it reads only what changed, and a
restart, a rebalance or retention rebuild it once."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batch_axes.runner import cohort_days, run_axis2, run_axis3, run_axis3_counts
from monitor.bench.axes import store_frame
from monitor.config import config_from_mapping
from monitor.core.tables import group_index, tables_from_frame
from monitor.service.app import MonitorService
from monitor.service.cohort_book import CohortBook
from monitor.store import Store, queries
from monitor.stream.publication import cohort_release
from tests.support.pipeline_runs import feed_service

CFG = config_from_mapping(
    {
        "service": {"axes": {"cohort_days": 10.0}},
        "axis3": {"folds": 6},
        "axis2": {"sizes": [200, 500], "R": 5},
        "models": [{"id": "m1"}, {"id": "model-00"}],
        "window": {"size": 2000, "hop_records": 1000, "hop_seconds": 0},
        "axis1": {"K": 50},
        "equilense": {"features": []},
    }
)
T0 = pd.Timestamp("2026-03-01", tz="UTC")


def batch(n: int, start_day: float, days: float, seed: int, first: int, model: str = "m1"):
    """``n`` valid records with event times uniform over ``[start_day, start_day + days)``."""
    rng = np.random.default_rng(seed)
    us = rng.uniform(0, days * 86_400e6, n).astype(np.int64)
    hosp = np.array([f"h{i}" for i in rng.integers(0, 9, n)], dtype=object)
    hosp[rng.uniform(size=n) < 0.03] = None
    score = rng.uniform(size=n)
    return pd.DataFrame(
        {
            "model_id": model,
            "record_id": [f"r{first + i}" for i in range(n)],
            "event_time": T0 + pd.Timedelta(days=start_day) + pd.to_timedelta(us, "us"),
            "hospital_id": hosp,
            "score": score,
            "label": rng.integers(0, 2, n),
            "decision": (score > 0.5).astype(np.int64),
            **{
                a.name: np.asarray(a.codes, dtype=object)[rng.integers(0, len(a.codes), n)]
                for a in CFG.attributes
            },
            "features": None,
        }
    )


def reread(store: Store, model: str = "m1") -> pd.DataFrame:
    c = store.cursor()
    try:
        return queries.window_records(
            c, store.attributes, model, days=CFG.service.axes.cohort_days, with_details=True
        ).assign(model_id=model)
    finally:
        c.close()


def update(store: Store, book: CohortBook, model: str = "m1"):
    c = store.cursor()
    try:
        return book.update(c, model)
    finally:
        c.close()


def assert_same_as_reread(store: Store, view, model: str = "m1") -> pd.DataFrame:
    frame = reread(store, model)
    assert view.n == len(frame)
    tables = tables_from_frame(frame, CFG) if len(frame) else {}
    for name, t in view.counts.tables.items():
        if len(frame):
            assert t == tables[(model, name)], name
    if len(frame):
        got = run_axis3_counts(model, view.counts, CFG).to_dict()
        assert got == run_axis3(model, frame, CFG).to_dict()
        groups = {
            a.name: (len(a.codes), group_index(frame[a.name].to_numpy(), a)) for a in CFG.attributes
        }
        assert view.release_point() == cohort_release(None, frame["seq"].to_numpy(), groups)[1]
        times = pd.to_datetime(frame["event_time"], utc=True)
        span = (times.max() - times.min()).total_seconds() / 86_400
        assert view.span_days == pytest.approx(span, rel=1e-12, abs=1e-12)
    return frame


steps = st.lists(
    st.tuples(st.integers(1, 400), st.floats(-15.0, 25.0), st.floats(0.01, 6.0)),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=st.tuples(st.integers(0, 2_000), st.floats(0.0, 12.0)), moves=steps,
       seed=st.integers(0, 2**20))  # fmt: skip
def test_every_update_holds_the_reread_cohort_and_reads_only_what_changed(
    tmp_path_factory, first, moves, seed
):
    """Batches of new records (some of them late: event times before the cohort's bound)
    move the cohort; after each update the counts give the re-read Axis 3 and Axis 2 tables,
    the release point is cohort_release's, and entered + left is the number of records in
    one of the two cohorts and not the other."""
    store = Store(tmp_path_factory.mktemp("book") / "b.duckdb", CFG)
    try:
        book = CohortBook(CFG)
        n0, span = first
        if n0:
            store_frame(store, batch(n0, 0.0, span, seed, 0))
        view = update(store, book)
        assert view.built and view.left == 0
        before = set(assert_same_as_reread(store, view)["seq"])
        assert view.entered == len(before)
        next_id = n0
        for i, (n, start, days) in enumerate(moves):
            store_frame(store, batch(n, start, days, seed + i + 1, next_id))
            next_id += n
            view = update(store, book)
            assert not view.built
            now = set(assert_same_as_reread(store, view)["seq"])
            assert (view.entered, view.left) == (len(now - before), len(before - now))
            before = now
        again = update(store, book)  # nothing new: nothing read, nothing moved
        assert (again.entered, again.left, again.n) == (0, 0, view.n)
    finally:
        store.close()


def test_retention_that_reaches_into_a_cohort_rebuilds_it_once(tmp_path):
    store = Store(tmp_path / "r.duckdb", CFG)
    try:
        book = CohortBook(CFG)
        store_frame(store, batch(3_000, 0.0, 12.0, 1, 0))
        update(store, book)
        bound = T0 + pd.Timedelta(days=5)  # inside the cohort [2, 12) days
        now = bound + pd.Timedelta(days=CFG.service.retention.discharge_days)
        with book.retention(bound.value // 1000):
            assert store.apply_retention(now, CFG.service.retention.discharge_days, 10_000)[
                "discharges"
            ]
        assert book.models() == []  # forgotten: its cohort lost records
        view = update(store, book)
        assert view.built
        assert_same_as_reread(store, view)
        with book.retention((T0 - pd.Timedelta(days=1)).value // 1000):  # below the cohort
            pass
        assert book.models() == ["m1"]
    finally:
        store.close()


def test_the_service_jobs_keep_the_cohorts_and_rebuild_them_on_restart(tmp_path):
    """The axis jobs update the book instead of re-reading: the second run of a job reads
    the new records only, its stored results are the re-read path's, and a restarted service
    builds each cohort once at its first run. A model no longer owned is dropped."""
    path = str(tmp_path / "s.duckdb")
    s = MonitorService(CFG, db_path=path, http_port=0, start_scheduler=False)
    try:
        feed_service(s, 2_000, seed=1, model="model-00")
        for job in ("axis2", "axis3"):
            assert s.scheduler.run_now_blocking(job).state == "success"
        feed_service(s, 1_000, seed=2, start=2_000, model="model-00")
        c = s.store.cursor()
        try:
            view = s.cohorts.update(c, "model-00")  # what the next run would be given
        finally:
            c.close()
        assert (view.built, view.entered, view.left) == (False, 1_000, 0)
        assert s.scheduler.run_now_blocking("axis3").state == "success"
        assert s.scheduler.run_now_blocking("axis2").state == "success"
        frame = reread(s.store, "model-00")
        assert len(frame) == 3_000
        stored = s.store.read(queries.latest_axis_results, "axis3")["model-00"]
        assert json.loads(json.dumps(stored.to_dict())) == json.loads(
            json.dumps(run_axis3("model-00", frame, CFG).to_dict())
        )
        cells = s.store.read(queries.latest_axis_results, "axis2")["model-00"]
        want = [
            c.to_dict() for c in run_axis2(tables_from_frame(frame, CFG), CFG, cohort_days(frame))
        ]
        # the same tables, so the same draws
        assert json.loads(json.dumps([c.to_dict() for c in cells])) == json.loads(json.dumps(want))
        s.cohorts.keep_only([])  # as after a rebalance took the model away
        assert s.cohorts.models() == []
    finally:
        s.close()
    again = MonitorService(CFG, db_path=path, http_port=0, start_scheduler=False)
    try:
        assert again.cohorts.models() == []  # nothing kept across a restart: rebuilt once
        assert again.scheduler.run_now_blocking("axis3").state == "success"
        assert again.cohorts.models() == ["model-00"]
        c = again.store.cursor()
        try:
            view = again.cohorts.update(c, "model-00")
        finally:
            c.close()
        assert (view.built, view.entered, view.n) == (False, 0, 3_000)
    finally:
        again.close()


def test_the_retention_job_forgets_the_cohorts_it_reaches(tmp_path):
    """The service's retention job holds the book: a deletion inside a model's cohort makes
    the next run rebuild it; one that stays below every cohort forgets nothing."""
    now = [time.time()]
    s = MonitorService(CFG, db_path=str(tmp_path / "t.duckdb"), http_port=0,
                       start_scheduler=False, clock=lambda: now[0])  # fmt: skip
    try:
        feed_service(s, 1_000, seed=3, model="model-00")  # event time 2026-11-01
        assert s.scheduler.run_now_blocking("axis3").state == "success"
        assert s.job_retention()["discharges"] == 0
        assert s.cohorts.models() == ["model-00"]
        days = CFG.service.retention.discharge_days
        now[0] = (pd.Timestamp("2026-11-02", tz="UTC") + pd.Timedelta(days=days)).timestamp()
        assert s.job_retention()["discharges"] == 1_000
        assert s.cohorts.models() == []
    finally:
        s.close()


# ----------------------------------------------------------------------------- issue 23
def test_with_outcomes_later_the_book_gives_the_split_axes_of_the_reread_cohort(tmp_path):
    """Predictions now, outcomes later: the book counts waiting predictions for the
    label-free metrics only, moves each into the label-based counts when its outcome
    joins, and lets records leave from where they are counted. After every chunk of the
    stream, its Axis 2 and Axis 3 equal the re-read path's split (run_axis2_split,
    run_axis3_split), including while records leave the cohort (half a day of a stream
    of one prediction a minute) and the outcomes of every 11th record never come."""
    from batch_axes.runner import run_axis2_counts, run_axis2_split, run_axis3_split
    from monitor.stream.pipeline import Pipeline
    from tests.support.outcome_streams import two_kind_payloads
    from tests.support.pipeline_runs import feed

    cfg = config_from_mapping(
        {
            "service": {"axes": {"cohort_days": 0.5}},
            "axis3": {"folds": 4},
            "axis2": {"sizes": [200, 400], "R": 5},
            "models": [{"id": "model-00"}, {"id": "model-01"}],
            "window": {"size": 600, "hop_records": 300, "hop_seconds": 0},
            "axis1": {"K": 30},
            "equilense": {"features": []},
        }
    )
    store = Store(tmp_path / "o.duckdb", cfg)
    book = CohortBook(cfg)
    pipeline = Pipeline(cfg, store)
    payloads = two_kind_payloads(n=1600, lag=200, skip=11)
    joined = left = 0
    try:
        for start in range(0, len(payloads), 450):
            feed(pipeline, payloads[: start + 450], start=start)
            c = store.cursor()
            try:
                view = book.update(c, "model-00")
                frame = queries.window_records(
                    c, store.attributes, "model-00", days=cfg.service.axes.cohort_days,
                    with_details=True,
                ).assign(model_id="model-00")  # fmt: skip
            finally:
                c.close()
            joined, left = joined + view.joined, left + view.left
            waiting = int((frame["label"] < 0).sum())
            assert (view.free is not None) == (waiting > 0)
            assert view.n == len(frame) and view.counts.n == len(frame) - waiting
            got2 = run_axis2_counts("model-00", view.counts, cfg, view.free, view.span_days)
            want2 = run_axis2_split(frame, cfg, cohort_days(frame))
            assert [c.to_dict() for c in got2] == [c.to_dict() for c in want2]
            got3 = run_axis3_counts("model-00", view.counts, cfg, view.free)
            assert got3.to_dict() == run_axis3_split("model-00", frame, cfg).to_dict()
        assert joined > 0 and left > 0  # both moves happened
        assert view.free is not None  # the never-joined outcomes still wait at the end
    finally:
        store.close()
