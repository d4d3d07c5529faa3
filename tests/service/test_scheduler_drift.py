"""Scheduler rules (no overlap, coalesce, failures contained, rate limit, clean shutdown)
and drift/health numbers (ADWIN on step vs stationary series, rolling AUROC vs sklearn).

Scheduler tests synchronise on outcomes (conditions with timeouts), not on sleeps, so
that they are deterministic on a slow machine; the few sleeps only give a wrongly
configured scheduler the chance to misbehave.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from monitor.core.drift import CellDrift, DriftBook, ModelHealth, measure_cost, rank_auroc
from monitor.service.scheduler import AxisScheduler, JobOutcome, JobSpec

TIMEOUT = 10.0


class Recorder:
    """Collects outcomes from any thread and lets a test wait for a condition on them."""

    def __init__(self) -> None:
        self.outcomes: list[JobOutcome] = []
        self._cond = threading.Condition()

    def __call__(self, outcome: JobOutcome) -> None:
        with self._cond:
            self.outcomes.append(outcome)
            self._cond.notify_all()

    def of(self, job: str, state: str | None = None, reason: str | None = None):
        with self._cond:
            return [
                o
                for o in self.outcomes
                if o.job == job
                and (state is None or o.state == state)
                and (reason is None or o.reason == reason)
            ]

    def wait_for(self, pred: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred():
                left = deadline - time.monotonic()
                assert left > 0, f"timed out; outcomes so far: {self.outcomes}"
                self._cond.wait(left)


@pytest.fixture
def schedulers():
    """Shut down every scheduler a test made, even when the test fails."""
    made: list[AxisScheduler] = []
    yield made
    for s in made:
        s.shutdown(wait=False)


# -- scheduler ------------------------------------------------------------------------


def test_slow_job_never_overlaps_itself_and_refusals_are_skipped(schedulers):
    rec = Recorder()
    lock = threading.Lock()
    active = [0, 0]  # current, maximum
    started, release = threading.Event(), threading.Event()

    def slow() -> None:
        with lock:
            active[0] += 1
            active[1] = max(active)
        started.set()
        release.wait(TIMEOUT)
        with lock:
            active[0] -= 1

    s = AxisScheduler([JobSpec("axis2", slow, interval_s=0.05)], on_outcome=rec)
    schedulers.append(s)
    s.start()
    assert started.wait(TIMEOUT)
    # APScheduler refuses the ticks that come while the first run blocks.
    rec.wait_for(lambda: len(rec.of("axis2", "skipped", "max_instances")) >= 3)
    assert s.status()["axis2"]["running"] is True
    # Blocking and early runs honour the same rule.
    blocked = s.run_now_blocking("axis2")
    assert (blocked.state, blocked.reason) == ("skipped", "running")
    assert s.run_early("axis2") is False
    assert len(rec.of("axis2", "skipped", "running")) == 2
    release.set()
    rec.wait_for(lambda: len(rec.of("axis2", "success")) >= 3)
    s.shutdown()
    assert active[1] == 1
    skipped = rec.of("axis2", "skipped")
    assert all(o.duration_s == 0.0 and o.error_kind is None for o in skipped)


def test_missed_runs_are_coalesced_into_one(schedulers):
    rec = Recorder()
    s = AxisScheduler(
        [JobSpec("axis3", lambda: None, interval_s=2.0, first_run_delay_s=100.0)],
        on_outcome=rec,
    )
    schedulers.append(s)
    s.start()
    job = s._scheduler.get_job("axis3")
    assert (job.coalesce, job.max_instances, job.misfire_grace_time) == (True, 1, 2)
    # Pretend the scheduler slept through four ticks (-7, -5, -3, -1 s): one catch-up run.
    s._scheduler.modify_job("axis3", next_run_time=datetime.now(UTC) - timedelta(seconds=7))
    rec.wait_for(lambda: len(rec.of("axis3")) >= 1)
    time.sleep(0.3)  # without coalescing, the other three would run back to back here
    assert [o.state for o in rec.of("axis3")] == ["success"]
    # The catch-up run does not pull the cadence forward: next tick is ~1 s away.
    nxt = s.status()["axis3"]["next_run_time"]
    assert 0 < nxt - time.time() <= 2.0


def test_run_late_beyond_grace_is_reported_missed(schedulers):
    """One worker, held by a blocker: the queued run of another job starts after its
    grace time (1 s) and is reported as skipped/missed; the job then runs normally."""
    rec = Recorder()
    release = threading.Event()
    jobs = [
        JobSpec("blocker", lambda: release.wait(TIMEOUT), interval_s=100.0),
        JobSpec("quick", lambda: None, interval_s=0.3, first_run_delay_s=0.2),
    ]
    s = AxisScheduler(jobs, on_outcome=rec, max_workers=1)
    schedulers.append(s)
    s.start()
    # Five refused ticks are >= 1.5 s after the queued run's scheduled time.
    rec.wait_for(lambda: len(rec.of("quick", "skipped", "max_instances")) >= 5)
    release.set()
    rec.wait_for(lambda: len(rec.of("quick", "skipped", "missed")) >= 1)
    rec.wait_for(lambda: len(rec.of("quick", "success")) >= 1)
    assert rec.of("blocker", "success")


def test_failure_is_contained_and_its_message_never_logged(schedulers, caplog):
    caplog.set_level(logging.DEBUG)
    rec = Recorder()

    def bad() -> None:
        raise ValueError("patient 4711 length_of_stay=93")

    jobs = [JobSpec("bad", bad, interval_s=0.05), JobSpec("good", lambda: None, interval_s=0.05)]
    s = AxisScheduler(jobs, on_outcome=rec)
    schedulers.append(s)
    s.start()
    rec.wait_for(lambda: len(rec.of("bad", "failure")) >= 3 and len(rec.of("good", "success")) >= 3)
    st = s.status()
    s.shutdown()
    assert {o.error_kind for o in rec.of("bad", "failure")} == {"ValueError"}
    assert st["bad"]["consecutive_failures"] >= 3
    assert st["bad"]["last_outcome"]["error_kind"] == "ValueError"
    assert s.last_success("bad") is None
    assert s.last_success("good") is not None
    assert "4711" not in caplog.text and "length_of_stay" not in caplog.text
    assert all(r.exc_info is None for r in caplog.records)
    assert any("ValueError" in r.getMessage() and "bad" in r.getMessage() for r in caplog.records)


def test_failing_on_outcome_does_not_break_a_run(caplog):
    caplog.set_level(logging.DEBUG)

    def on_outcome(outcome: JobOutcome) -> None:
        raise RuntimeError("secret 555")

    s = AxisScheduler([JobSpec("axis2", lambda: None, 60.0)], on_outcome=on_outcome)
    assert s.run_now_blocking("axis2").state == "success"
    assert s.status()["axis2"]["running"] is False
    assert "555" not in caplog.text and "RuntimeError" in caplog.text


def test_run_early_is_rate_limited_per_job(schedulers):
    rec = Recorder()
    now = [1000.0]
    jobs = [
        JobSpec("axis2", lambda: None, interval_s=3600.0, first_run_delay_s=3600.0),
        JobSpec("axis3", lambda: None, interval_s=3600.0, first_run_delay_s=3600.0),
    ]
    s = AxisScheduler(jobs, on_outcome=rec, early_min_interval_s=60.0, clock=lambda: now[0])
    schedulers.append(s)
    assert s.run_early("axis2") is False  # not started
    s.start()
    assert s.run_early("axis2") is True
    rec.wait_for(lambda: len(rec.of("axis2", "success")) == 1)
    assert rec.of("axis2")[0].started_at == 1000.0
    assert s.run_early("axis2") is False  # same instant
    assert s.run_early("axis3") is True  # the limit is per job
    now[0] += 59.0
    assert s.run_early("axis2") is False
    now[0] += 2.0
    assert s.run_early("axis2") is True
    rec.wait_for(lambda: len(rec.of("axis2", "success")) == 2)
    rec.wait_for(lambda: len(rec.of("axis3", "success")) == 1)
    assert s.last_success("axis2") == 1061.0
    # Early runs leave the regular cadence alone.
    assert s.status()["axis2"]["next_run_time"] - time.time() > 3500
    with pytest.raises(KeyError):
        s.run_early("axis9")
    s.shutdown()
    assert s.run_early("axis2") is False  # after shutdown: refused, not raised


def test_shutdown_waits_for_running_job_and_leaves_no_threads():
    before = set(threading.enumerate())
    rec = Recorder()
    started = threading.Event()

    def slowish() -> None:
        started.set()
        time.sleep(0.3)

    jobs = [JobSpec("a", slowish, interval_s=60.0), JobSpec("b", lambda: None, 0.05)]
    s = AxisScheduler(jobs, on_outcome=rec, max_workers=2)
    s.start()
    assert started.wait(TIMEOUT)
    assert len(set(threading.enumerate()) - before) >= 2  # scheduler thread and workers
    s.shutdown(wait=True)
    assert [o.state for o in rec.of("a")] == ["success"]  # the running job finished
    assert [t for t in set(threading.enumerate()) - before if t.is_alive()] == []
    s.shutdown()  # idempotent


def test_status_contents():
    now = [50.0]
    s = AxisScheduler(
        [JobSpec("axis2", lambda: None, 60.0), JobSpec("equilense", lambda: 1 / 0, 120.0)],
        on_outcome=lambda o: None,
        clock=lambda: now[0],
    )
    assert s.status()["axis2"] == {
        "last_outcome": None,
        "last_success": None,
        "consecutive_failures": 0,
        "running": False,
        "next_run_time": None,
        "interval_s": 60.0,
    }
    assert s.run_now_blocking("axis2").state == "success"
    now[0] = 70.0
    for _ in range(2):
        out = s.run_now_blocking("equilense")
    assert (out.state, out.error_kind, out.started_at) == ("failure", "ZeroDivisionError", 70.0)
    st = s.status()
    assert st["axis2"]["last_success"] == 50.0
    assert st["axis2"]["last_outcome"]["state"] == "success"
    assert st["equilense"]["consecutive_failures"] == 2
    assert st["equilense"]["last_outcome"]["error_kind"] == "ZeroDivisionError"
    assert s.run_now_blocking("equilense").state == "failure"
    assert s.status()["equilense"]["consecutive_failures"] == 3
    with pytest.raises(KeyError):
        s.run_now_blocking("nope")


def test_status_next_run_time_after_start(schedulers):
    s = AxisScheduler(
        [JobSpec("axis2", lambda: None, 600.0, first_run_delay_s=300.0)],
        on_outcome=lambda o: None,
    )
    schedulers.append(s)
    s.start()
    assert abs(s.status()["axis2"]["next_run_time"] - (time.time() + 300.0)) < 5.0
    with pytest.raises(RuntimeError):
        s.start()


@pytest.mark.parametrize(
    "jobs",
    [
        [JobSpec("a", lambda: None, 1.0), JobSpec("a", lambda: None, 2.0)],
        [JobSpec("a", lambda: None, 0.0)],
        [JobSpec("a", lambda: None, 1.0, first_run_delay_s=-1.0)],
        [JobSpec("", lambda: None, 1.0)],
    ],
)
def test_bad_job_specs_are_rejected(jobs):
    with pytest.raises(ValueError):
        AxisScheduler(jobs, on_outcome=lambda o: None)


# -- drift ----------------------------------------------------------------------------


def _detections(series: np.ndarray, cell: CellDrift | None = None) -> list[int]:
    cell = cell or CellDrift()
    return [i for i, v in enumerate(series) if cell.update(v)]


@pytest.mark.parametrize("seed", range(10))
def test_adwin_detects_a_step_and_stays_quiet_when_stationary(seed):
    """DI-like series: 200 evaluations at 0.85, then 0.65 (sd 0.02). Measured over 100
    seeds the first detection comes 53-55 evaluations after the step (ADWIN's range term
    dominates, see CellDrift); 60 leaves a margin without hiding a regression."""
    rng = np.random.default_rng(seed)
    step = np.r_[rng.normal(0.85, 0.02, 200), rng.normal(0.65, 0.02, 200)]
    det = _detections(step)
    assert det, "no detection"
    assert 200 <= det[0] < 260
    stationary = rng.normal(0.85, 0.02, 400)
    assert _detections(stationary) == []


def test_nan_values_are_skipped():
    rng = np.random.default_rng(3)
    series = np.r_[rng.normal(0.85, 0.02, 200), rng.normal(0.65, 0.02, 200)]
    with_nans = series.copy().tolist()
    for pos in sorted(rng.choice(400, 40, replace=False), reverse=True):
        with_nans.insert(int(pos), float("nan"))
    cell_a, cell_b = CellDrift(), CellDrift()
    plain = _detections(series, cell_a)
    det_b = _detections(np.array(with_nans), cell_b)
    # Same detections, counted on the non-NaN values.
    finite_index = np.cumsum(np.isfinite(with_nans)) - 1
    assert [int(finite_index[i]) for i in det_b] == plain
    assert cell_b.n_updates == 400 and cell_b.n_detections == cell_a.n_detections >= 1
    assert CellDrift().update(float("nan")) is False
    assert CellDrift().update(float("inf")) is False


def test_drift_book_keeps_cells_apart():
    rng = np.random.default_rng(7)
    book = DriftBook()
    a, b = ("xgb", "DI", "race"), ("xgb", "SPD", "sex")
    hits = {a: 0, b: 0}
    for i in range(400):
        va = rng.normal(0.85 if i < 200 else 0.6, 0.02)
        hits[a] += book.update(a, va)
        hits[b] += book.update(b, rng.normal(0.05, 0.02))
    assert hits[a] >= 1 and hits[b] == 0
    assert book.n_detections() == hits
    assert len(book) == 2 and book.get(("x", "y", "z")) is None


# -- model health ---------------------------------------------------------------------


def _feed(health: ModelHealth, y, s, d, rng) -> None:
    """Feed in random chunk sizes, including empty chunks and chunks beyond the window."""
    i = 0
    while i < len(y):
        k = int(rng.choice([0, 1, 7, 100, health.window, 3 * health.window]))
        health.update_many(y[i : i + k], s[i : i + k], d[i : i + k])
        i += k


def _stream(rng, n: int, ties: bool):
    y = (rng.uniform(size=n) < rng.uniform(0.05, 0.6)).astype(np.int64)
    s = np.clip(0.25 * y + 0.75 * rng.uniform(size=n), 0, 1)
    if ties:
        s = np.round(s, 1)
    d = (s > 0.5).astype(np.int64)
    return y, s, d


@pytest.mark.parametrize("engine", ["river", "exact"])
@pytest.mark.parametrize("seed", range(8))
def test_health_matches_sklearn_without_ties(engine, seed):
    rng = np.random.default_rng(seed)
    window = int(rng.choice([1, 5, 50, 1000]))
    y, s, d = _stream(rng, int(rng.integers(1, 4000)), ties=False)
    h = ModelHealth(window, auroc_engine=engine)
    _feed(h, y, s, d, rng)
    yw, sw, dw = y[-window:], s[-window:], d[-window:]
    assert h.n == len(yw) and h.n_seen == len(y)
    assert h.accuracy == pytest.approx(np.mean(yw == dw), abs=1e-9)
    if 0 < yw.sum() < len(yw):
        assert h.auroc == pytest.approx(roc_auc_score(yw, sw), abs=1e-9)
    else:
        assert h.auroc is None


@pytest.mark.parametrize("seed", range(8))
def test_health_with_tied_scores(seed):
    """'exact' equals sklearn with ties; river's RollingROCAUC rounds the tie half-credit
    down, so it is below sklearn by at most 0.5 x (negatives tied with a positive)/(P N)."""
    rng = np.random.default_rng(100 + seed)
    y, s, d = _stream(rng, 3000, ties=True)
    h_river, h_exact = ModelHealth(1000), ModelHealth(1000, auroc_engine="exact")
    _feed(h_river, y, s, d, rng)
    h_exact.update_many(y, s, d)
    yw, sw = y[-1000:], s[-1000:]
    ref = roc_auc_score(yw, sw)
    assert h_exact.auroc == pytest.approx(ref, abs=1e-9)
    P, N = int(yw.sum()), int(len(yw) - yw.sum())
    tied_neg = int(np.isin(sw[yw == 0], sw[yw == 1]).sum())
    assert -1e-12 <= ref - h_river.auroc <= 0.5 * tied_neg / (P * N) + 1e-12
    assert h_river.accuracy == pytest.approx(h_exact.accuracy, abs=1e-9)


def test_river_tie_rounding_is_still_there():
    """Pins the river behaviour the docs describe: one tied pair gives 0.0, not 0.5. If
    this fails after a river upgrade, river fixed it: revisit ModelHealth's docs."""
    h = ModelHealth(10)
    h.update_many(np.array([0, 1]), np.array([0.5, 0.5]), np.array([0, 0]))
    assert h.auroc == 0.0
    assert rank_auroc(np.array([0, 1]), np.array([0.5, 0.5])) == 0.5


@pytest.mark.parametrize("engine", ["river", "exact"])
def test_health_undefined_values_are_none(engine):
    h = ModelHealth(3, auroc_engine=engine)
    assert (h.auroc, h.accuracy) == (None, None)
    h.update_many(np.array([1, 1]), np.array([0.2, 0.9]), np.array([1, 0]))
    assert h.auroc is None and h.accuracy == 0.5
    h.update_many(np.array([0]), np.array([0.1]), np.array([0]))
    assert h.auroc == 1.0
    h.update_many(np.array([1, 1, 1]), np.array([0.3, 0.4, 0.5]), np.array([1, 1, 1]))
    assert h.auroc is None and h.accuracy == 1.0  # the negative fell out


def test_health_rejects_bad_input_without_echoing_values():
    h = ModelHealth(10)
    cases = [
        ([0, 1], [0.1], [0, 1], "same length"),
        ([0, 2], [0.1, 0.2], [0, 1], "labels"),
        ([0, 1], [0.1, 0.2], [0, 7], "decisions"),
        ([0, 1], [0.1, float("nan")], [0, 1], "scores"),
    ]
    for y, s, d, word in cases:
        with pytest.raises(ValueError, match=word) as info:
            h.update_many(np.array(y), np.array(s), np.array(d))
        assert "7" not in str(info.value) and "nan" not in str(info.value)
    assert h.n == 0


def test_measure_cost_runs():
    assert measure_cost(n_records=5000, auroc_engine="river") > 0
    assert measure_cost(n_records=5000, auroc_engine="exact") > 0
