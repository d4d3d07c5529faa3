"""The first run of a slow axis for a new model (AxisScheduler.run_first): at once, once per
model, never lost behind a running instance, then the regular cadence.

Real APScheduler threads; the tests synchronise on outcomes, not on sleeps. The service
end to end (a real process and DuckDB file, tiers within a minute) is in
tests/scenarios/test_engineer_path.py.
"""

from __future__ import annotations

import threading
import time

import pytest

from monitor.service.scheduler import SUCCESS, AxisScheduler, JobSpec
from tests.service.test_scheduler_drift import Recorder

HOUR = 3600.0


@pytest.fixture
def made():
    out: list[AxisScheduler] = []
    yield out
    for s in out:
        s.shutdown(wait=False)


def test_first_run_is_at_once_and_once_per_key(made):
    rec = Recorder()
    # the regular run is an hour away: only run_first can make one now
    s = AxisScheduler([JobSpec("axis2", lambda: None, HOUR, first_run_delay_s=HOUR)],
                      on_outcome=rec, early_min_interval_s=HOUR)  # fmt: skip
    made.append(s)
    s.start()
    assert s.run_first("axis2", "model-a")
    rec.wait_for(lambda: len(rec.of("axis2", SUCCESS)) == 1)
    assert not s.run_first("axis2", "model-a")  # once per key
    assert s.run_first("axis2", "model-b")  # another model: not rate-limited
    rec.wait_for(lambda: len(rec.of("axis2", SUCCESS)) == 2)
    time.sleep(0.3)
    assert len(rec.of("axis2")) == 2
    nxt = s.status()["axis2"]["next_run_time"]
    assert nxt is not None and nxt - time.time() > HOUR - 60  # the cadence is unchanged


def test_first_run_asked_while_running_follows_the_running_instance(made):
    rec = Recorder()
    started, release = threading.Event(), threading.Event()
    calls = []

    def job() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:  # the run at start, on a cohort without the new model
            started.set()
            assert release.wait(30)

    s = AxisScheduler([JobSpec("axis2", job, HOUR)], on_outcome=rec)
    made.append(s)
    s.start()
    assert started.wait(30)
    assert s.run_first("axis2", "model-a")  # while the start-up run holds the lock
    release.set()
    rec.wait_for(lambda: len(rec.of("axis2", SUCCESS)) == 2)
    assert len(calls) == 2 and not rec.of("axis2", "skipped")


def test_first_run_needs_a_running_scheduler():
    s = AxisScheduler([JobSpec("axis2", lambda: None, HOUR)], on_outcome=lambda o: None)
    assert not s.run_first("axis2", "model-a")  # `run --no-scheduler`: nothing runs
    with pytest.raises(KeyError):
        s.run_first("nope", "model-a")
