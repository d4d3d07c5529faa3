"""Run the slow axes (Axis 2, Axis 3, EquiLense) on a cadence beside the streaming path.

The slow axes take seconds to minutes on a 90-day cohort, so they cannot run on every
window hop: they run on an interval in a small thread pool (APScheduler 3.x), and the
streaming path can ask for an extra run when drift is detected (:meth:`AxisScheduler.run_early`).

Rules this module guarantees, and why:

* A job never overlaps itself. Two Axis 2 runs on the same cohort would race on the
  same result slot and double the load for nothing. APScheduler's ``max_instances=1``
  guards scheduled runs; a per-job lock also covers early and blocking runs, which
  APScheduler does not count together with the interval job.
* Missed runs collapse into one (``coalesce=True``): after a stall the axis needs to be
  fresh once, not re-run for every tick it slept through. The misfire grace time is one
  interval (rounded up to whole seconds), so the single catch-up run after a stall always
  happens (its scheduled time is less than one interval old), while a run that waited
  longer than that in a saturated pool is dropped because the next regular run is due.
* A failing job never stops the scheduler or the service: every exception is caught in
  the wrapper and reported as a ``failure`` outcome. Only the exception *class name* is
  reported and logged, never its message or traceback, because messages of data errors
  can carry record values (patient data must not reach logs).
* A first run for a new key (a model that has just got enough records,
  :meth:`AxisScheduler.run_first`) happens once per key, at once, whatever the early-run
  rate limit; if an instance is running (it may have started before the model had
  records), one more run follows it. So a new model's tiers do not wait a whole interval.
* Runs that did not happen are reported too, as ``skipped`` outcomes (still running,
  APScheduler's maximum-instances refusal, or a missed run time), so that a board sees
  why an axis is stale rather than silence.

Example (blocking run, as the demo and tests use it):

    >>> seen = []
    >>> s = AxisScheduler([JobSpec("axis2", lambda: 1 / 0, 3600.0)], on_outcome=seen.append)
    >>> s.run_now_blocking("axis2").error_kind
    'ZeroDivisionError'
    >>> s.status()["axis2"]["consecutive_failures"]
    1
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.events import (
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobExecutionEvent,
    JobSubmissionEvent,
    SchedulerEvent,
)
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from monitor.core.locks import named_lock

logger = logging.getLogger(__name__)

#: Outcome states.
SUCCESS, FAILURE, SKIPPED = "success", "failure", "skipped"

#: Suffix of the one-off job id of an early run (the interval job's id is the job name).
_EARLY_SUFFIX = ":early"
#: Suffix of the one-off job id of a first run for a new key (:meth:`AxisScheduler.run_first`).
_FIRST_SUFFIX = ":first"


@dataclass(frozen=True)
class JobSpec:
    """One scheduled axis: what to run and how often.

    ``first_run_delay_s`` is the delay of the first run after :meth:`AxisScheduler.start`
    (0 runs it at once, so an axis has a result soon after start-up rather than one
    interval later).
    """

    name: str
    func: Callable[[], object]
    interval_s: float
    first_run_delay_s: float = 0.0


@dataclass(frozen=True)
class JobOutcome:
    """What happened to one run of one job.

    ``error_kind`` is the exception class name of a failure and nothing else: the message
    may carry record values. ``reason`` says why a run was skipped: ``"running"`` (an
    instance was running: early and blocking runs), ``"max_instances"`` (APScheduler
    refused a scheduled run for the same reason) or ``"missed"`` (it started later than
    the misfire grace time).
    """

    job: str
    state: str
    started_at: float
    duration_s: float
    error_kind: str | None = None
    reason: str | None = None


class _JobState:
    """Mutable book-keeping of one job, guarded by the scheduler's state lock."""

    __slots__ = (
        "consecutive_failures",
        "first_keys",
        "follow_up",
        "last_early",
        "last_outcome",
        "last_success",
        "run_lock",
        "spec",
    )

    def __init__(self, spec: JobSpec):
        self.spec = spec
        #: Held while an instance runs: the no-overlap rule for every kind of run.
        self.run_lock = named_lock("job")
        self.last_outcome: JobOutcome | None = None
        self.last_success: float | None = None
        self.consecutive_failures = 0
        self.last_early: float | None = None
        #: keys whose first run was asked for (run_first: once per key)
        self.first_keys: set[str] = set()
        #: a first run was asked for while an instance ran: one more run follows it
        self.follow_up = False


class AxisScheduler:
    """Slow axes on an interval in a background thread pool, with rate-limited early runs.

    ``on_outcome`` is called once per run attempt (from a worker thread, the scheduler
    thread, or the caller's thread for :meth:`run_now_blocking`); if it raises, the
    error is logged by class name and swallowed so that reporting cannot stop a job.
    ``clock`` (unix seconds) stamps outcomes and drives the early-run rate limit; it is
    injectable so tests can move time without sleeping.
    """

    def __init__(
        self,
        jobs: Sequence[JobSpec],
        *,
        on_outcome: Callable[[JobOutcome], None],
        max_workers: int = 2,
        early_min_interval_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ):
        names = [j.name for j in jobs]
        if len(set(names)) != len(names):
            raise ValueError("job names must be unique")
        for j in jobs:
            if not j.name or j.name.endswith((_EARLY_SUFFIX, _FIRST_SUFFIX)):
                raise ValueError(
                    f"job name {j.name!r} is empty or ends with {_EARLY_SUFFIX!r} or "
                    f"{_FIRST_SUFFIX!r}"
                )
            if not j.interval_s > 0:
                raise ValueError(f"job {j.name!r}: interval_s must be > 0")
            if not j.first_run_delay_s >= 0:
                raise ValueError(f"job {j.name!r}: first_run_delay_s must be >= 0")
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        if not early_min_interval_s >= 0:
            raise ValueError("early_min_interval_s must be >= 0")
        self._jobs = {j.name: _JobState(j) for j in jobs}
        self._on_outcome = on_outcome
        self._max_workers = max_workers
        self._early_min_interval_s = float(early_min_interval_s)
        self._clock = clock
        self._state_lock = named_lock("scheduler_state")
        self._scheduler: BackgroundScheduler | None = None

    # -- life cycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start the background scheduler and register every job on its interval."""
        if self._scheduler is not None:
            raise RuntimeError("scheduler already started")
        scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(max_workers=self._max_workers)},
        )
        scheduler.add_listener(self._on_scheduler_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
        now = datetime.now(UTC)
        for name, st in self._jobs.items():
            spec = st.spec
            scheduler.add_job(
                self._run,
                trigger=IntervalTrigger(seconds=spec.interval_s, timezone=UTC),
                args=(name,),
                id=name,
                name=name,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=_grace_s(spec.interval_s),
                next_run_time=now + timedelta(seconds=spec.first_run_delay_s),
            )
        scheduler.start()
        self._scheduler = scheduler

    def shutdown(self, wait: bool = True) -> None:
        """Stop the scheduler; with ``wait`` the running jobs finish and every thread it
        started (scheduler thread, pool workers) is joined. Safe to call twice."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None and scheduler.running:
            scheduler.shutdown(wait=wait)

    # -- runs -------------------------------------------------------------------------

    def run_early(self, name: str) -> bool:
        """Ask for one extra run of ``name`` now (e.g. drift was detected).

        Returns whether a run was scheduled. Refused (False) when the scheduler is not
        running, when the last early run of this job was requested less than
        ``early_min_interval_s`` ago (drift on many cells must not turn into a run storm),
        or when an instance is running: that case is also reported as a ``skipped``
        outcome, since the running instance will produce a fresh result anyway. The
        early run does not shift the job's regular cadence.
        """
        st = self._state(name)
        scheduler = self._scheduler
        if scheduler is None or not scheduler.running:
            logger.info("early run of job %s refused: scheduler not running", name)
            return False
        now = self._clock()
        with self._state_lock:
            if st.last_early is not None and now - st.last_early < self._early_min_interval_s:
                logger.debug("early run of job %s refused: rate limit", name)
                return False
            running = st.run_lock.locked()
            previous_early = st.last_early
            if not running:
                st.last_early = now
        if running:
            self._report(JobOutcome(name, SKIPPED, now, 0.0, reason="running"))
            return False
        try:
            scheduler.add_job(
                self._run,
                trigger="date",
                run_date=datetime.now(UTC),
                args=(name,),
                id=name + _EARLY_SUFFIX,
                name=name + _EARLY_SUFFIX,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=_grace_s(st.spec.interval_s),
                replace_existing=True,
            )
        except Exception as exc:  # e.g. a concurrent shutdown: refuse, never raise
            logger.error("early run of job %s not scheduled: %s", name, type(exc).__name__)
            with self._state_lock:
                st.last_early = previous_early
            return False
        return True

    def run_first(self, name: str, key: str) -> bool:
        """The first run of ``name`` for ``key`` (a model that has just got enough records),
        at once; then the job goes on at its cadence.

        Once per key: False when the key was seen already or the scheduler is not running.
        Not rate-limited as :meth:`run_early` is (a fleet's models arrive together; each
        needs its first result, and a run covers every model at once, so a run already
        queued or running absorbs the others). If an instance is running, it may have
        read the cohort before this key's records arrived: one more run follows it.
        """
        st = self._state(name)
        scheduler = self._scheduler
        if scheduler is None or not scheduler.running:
            return False
        with self._state_lock:
            if key in st.first_keys:
                return False
            st.first_keys.add(key)
            if st.run_lock.locked():
                st.follow_up = True
                return True
        self._submit_first(name)
        return True

    def _submit_first(self, name: str) -> None:
        """A one-off run now (a pending one with the same id is replaced: one run covers
        every key asked for meanwhile)."""
        scheduler = self._scheduler
        if scheduler is None or not scheduler.running:
            return
        try:
            scheduler.add_job(
                self._run, trigger="date", run_date=datetime.now(UTC), args=(name, True),
                id=name + _FIRST_SUFFIX, name=name + _FIRST_SUFFIX, max_instances=1,
                coalesce=True, misfire_grace_time=_grace_s(self._jobs[name].spec.interval_s),
                replace_existing=True,
            )  # fmt: skip
        except Exception as exc:  # e.g. a concurrent shutdown: never raise
            logger.error("first run of job %s not scheduled: %s", name, type(exc).__name__)

    def run_now_blocking(self, name: str) -> JobOutcome:
        """Run ``name`` in the caller's thread and return its outcome (tests, demo).

        Honours the no-overlap rule: if an instance is running, nothing runs and a
        ``skipped`` outcome is returned (and reported).
        """
        self._state(name)
        return self._run(name)

    def _run(self, name: str, first: bool = False) -> JobOutcome:
        """The wrapper every run goes through: no overlap, no exception escapes.

        ``first``: a first run (:meth:`run_first`): when an instance is running it is not
        skipped but follows that instance."""
        st = self._jobs[name]
        started_at = self._clock()
        with self._state_lock:  # with the follow-up flag: see the release below
            acquired = st.run_lock.acquire(blocking=False)
            if not acquired and first:
                st.follow_up = True
        if not acquired:
            outcome = JobOutcome(
                name, SKIPPED, started_at, 0.0, reason="follows" if first else "running"
            )
            if not first:  # a first run is not lost: it follows the running instance
                self._report(outcome)
            return outcome
        try:
            t0 = time.perf_counter()
            logger.info("job %s started", name)
            try:
                st.spec.func()
            except Exception as exc:  # a failing axis must never stop the service
                outcome = JobOutcome(
                    name, FAILURE, started_at, time.perf_counter() - t0, type(exc).__name__
                )
            else:
                outcome = JobOutcome(name, SUCCESS, started_at, time.perf_counter() - t0)
            self._record(outcome)
        finally:
            # the flag is read and the lock released together, so a first run asked for
            # while this one ran is never lost between the two
            with self._state_lock:
                follow_up, st.follow_up = st.follow_up, False
                st.run_lock.release()
        self._report(outcome)
        if follow_up:
            self._submit_first(name)
        return outcome

    # -- events and book-keeping ------------------------------------------------------

    def _on_scheduler_event(self, event: SchedulerEvent) -> None:
        """APScheduler listener: a refused or missed scheduled run becomes ``skipped``."""
        try:
            job_id = getattr(event, "job_id", "")
            name = job_id.removesuffix(_EARLY_SUFFIX).removesuffix(_FIRST_SUFFIX)
            if name not in self._jobs:
                return
            if isinstance(event, JobSubmissionEvent):
                run_time, reason = max(event.scheduled_run_times), "max_instances"
            elif isinstance(event, JobExecutionEvent):
                run_time, reason = event.scheduled_run_time, "missed"
            else:  # pragma: no cover - only the two codes above are subscribed
                return
            self._report(JobOutcome(name, SKIPPED, run_time.timestamp(), 0.0, reason=reason))
        except Exception as exc:  # a listener error would be logged with its message
            logger.error("scheduler event handling failed: %s", type(exc).__name__)

    def _record(self, outcome: JobOutcome) -> None:
        st = self._jobs[outcome.job]
        with self._state_lock:
            st.last_outcome = outcome
            if outcome.state == SUCCESS:
                st.last_success = outcome.started_at
                st.consecutive_failures = 0
            elif outcome.state == FAILURE:
                st.consecutive_failures += 1

    def _report(self, outcome: JobOutcome) -> None:
        """Log (no exception messages) and hand the outcome to ``on_outcome``."""
        if outcome.state == SKIPPED:
            self._record(outcome)
            logger.warning("job %s skipped (%s)", outcome.job, outcome.reason)
        elif outcome.state == FAILURE:
            logger.error("job %s failed: %s", outcome.job, outcome.error_kind)
        else:
            logger.info("job %s succeeded in %.3f s", outcome.job, outcome.duration_s)
        try:
            self._on_outcome(outcome)
        except Exception as exc:
            logger.error("on_outcome failed for job %s: %s", outcome.job, type(exc).__name__)

    def _state(self, name: str) -> _JobState:
        try:
            return self._jobs[name]
        except KeyError:
            raise KeyError(f"unknown job {name!r}") from None

    # -- queries ----------------------------------------------------------------------

    def last_success(self, name: str) -> float | None:
        """Start time (unix s, from ``clock``) of the last successful run, or None."""
        st = self._state(name)
        with self._state_lock:
            return st.last_success

    def status(self) -> dict[str, dict[str, Any]]:
        """Per job: last outcome (as a dict), last success time, consecutive failures,
        whether an instance is running, and the next regular run time (unix s; None
        when the scheduler is not running)."""
        scheduler = self._scheduler
        out: dict[str, dict[str, Any]] = {}
        for name, st in self._jobs.items():
            next_run: float | None = None
            if scheduler is not None and scheduler.running:
                job = scheduler.get_job(name)
                if job is not None and job.next_run_time is not None:
                    next_run = job.next_run_time.timestamp()
            with self._state_lock:
                out[name] = {
                    "last_outcome": asdict(st.last_outcome) if st.last_outcome else None,
                    "last_success": st.last_success,
                    "consecutive_failures": st.consecutive_failures,
                    "running": st.run_lock.locked(),
                    "next_run_time": next_run,
                    "interval_s": st.spec.interval_s,
                }
        return out


def _grace_s(interval_s: float) -> int:
    """Misfire grace of one interval (see the module docstring for why), in whole seconds
    and at least 1 because APScheduler 3 only accepts a positive integer."""
    return max(1, math.ceil(interval_s))
