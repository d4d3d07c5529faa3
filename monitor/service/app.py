"""`vfr-monitor run`: the service process, wiring the parts in the order data flows.

source (Kafka or embedded) -> :class:`~monitor.stream.pipeline.Pipeline` (validation,
DuckDB, windows, Axis 1, tiers, events) -> :class:`~monitor.service.exporter.Exporter`
and the read-only HTTP API. APScheduler runs Axis 2, Axis 3 and EquiLense on
each model's audit cohort; their latest results feed the tiers of the next
evaluation. river tracks each model's rolling AUROC/accuracy, and ADWIN on each
cell's point value asks for an early (rate-limited) run of the slow axes.

The DuckDB file is owned by this process; the API and the jobs read it through
cursors of the same connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from batch_axes.axis3 import Axis3Result
from batch_axes.equilense import EquiLenseResult
from batch_axes.runner import run_axis2_counts, run_axis3_counts, run_equilense
from monitor import __version__
from monitor.config import MonitorConfig
from monitor.core.drift import DriftBook, ModelHealth
from monitor.core.privacy import ReleaseBook
from monitor.core.results import CellEvaluation
from monitor.core.tables import attribute_groups, tables_from_frame
from monitor.publish.cells import published_evaluation
from monitor.publish.encode import WITHHELD_TEXT
from monitor.publish.health import PublishedHealth, published_health
from monitor.service.cohort_book import CohortBook, CohortView
from monitor.service.exporter import Exporter, GroupStat, ModelStatus, StateSnapshot
from monitor.service.http_server import ApiServer, serve_configured
from monitor.service.liveness import Liveness
from monitor.service.outbox_relay import OutboxRelay
from monitor.service.page_renderer import PageRenderer
from monitor.service.scheduler import AxisScheduler, JobOutcome, JobSpec
from monitor.service.stored_views import (
    event_explainer,
    stored_axes,
    stored_events,
    stored_report,
    stored_windows,
)
from monitor.store import Store, queries
from monitor.store.codec import AxisResult, CohortRelease, axis_payload
from monitor.stream.dead_letter_watch import DeadLetterWatch, IngestTally
from monitor.stream.pipeline import BatchReport, Pipeline
from monitor.stream.publication import cohort_release

log = logging.getLogger(__name__)

SLOW_AXES = ("axis2", "axis3", "equilense")

#: Scheduled axes whose results publish figures of groups, held by the release rule
GROUP_FIGURE_AXES = frozenset({"equilense"})

#: The live report at ``/`` is redrawn (in the background, when asked for) after a new
#: evaluation, or once it is this old.
STATUS_PAGE_MAX_AGE_S = 60.0

_NO_REPORT_YET = (
    "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>vfr-monitor</title>"
    "</head><body><h1>vfr-monitor</h1><p>No model has an evaluated cell yet: the report "
    "appears after the first window evaluation.</p></body></html>"
)


def _release_records(point: CohortRelease | None) -> int:
    """How many records a stored release point rests on; 0 when there is none."""
    return 0 if point is None else point.records


class MonitorService:
    """Store, pipeline, exporter, API and scheduler of one monitor process."""

    def __init__(
        self,
        config: MonitorConfig,
        *,
        source_name: str = "embedded",
        db_path: str | None = None,
        http_port: int | None = None,
        start_scheduler: bool = True,
        clock: Callable[[], float] = time.time,
        results_outbox: bool = False,
    ):
        self.config = config
        self.source_name = source_name
        self.clock = clock
        self.store = Store(db_path or config.service.store.db_path, config)
        # a fleet member: results also go to the outbox for the results topic (set before
        # the pipeline restores, so evaluations recovered at start-up are published too)
        self.store.outbox = results_outbox
        #: publishes the outbox to the results topic (set by `vfr-monitor run` in a fleet)
        self.outbox_relay: OutboxRelay | None = None
        self.exporter = Exporter(
            __version__,
            group_codes=[c for a in config.grid_attributes for c in a.codes],
            state=self.snapshot,
            explain=event_explainer(config),  # the event sentences of alert annotations
        )
        self._lag: dict[int, int] = {}
        self._last_evaluation: dict[str, float] = {}
        self._old_events_seen: dict[str, int] = {}
        self.drift = DriftBook(config.service.axes.drift_delta)
        self.health: dict[str, ModelHealth] = {}
        #: each model's released (AUROC, accuracy): what the exporter and API show
        self.health_release: ReleaseBook[str, PublishedHealth] = (
            ReleaseBook()
        )
        #: most of the input dead-lettered for one reason: logged once, and a gauge
        self.dead_letter_watch = DeadLetterWatch()
        #: this process's stored records and dead letters, for the line `run` ends with
        self.tally = IngestTally()
        #: what the status page is drawn from changed: evaluations and scheduled-axis runs
        #: seen; read without a lock on the request thread (see the page below)
        self.page_version = 0
        self.pipeline = Pipeline(
            config, self.store, on_batch=self._after_batch, drift=self.drift, clock=clock
        )
        axes = config.service.axes
        self.scheduler = AxisScheduler(
            [
                JobSpec("axis2", self.job_axis2, axes.axis2_interval_s),
                JobSpec("axis3", self.job_axis3, axes.axis3_interval_s),
                JobSpec("equilense", self.job_equilense, axes.equilense_interval_s),
                JobSpec("retention", self.job_retention, config.service.retention.interval_s),
            ],
            on_outcome=self._job_outcome,
            early_min_interval_s=axes.early_run_min_interval_s,
            clock=clock,
        )
        self._start_scheduler = start_scheduler
        #: each owned model's audit cohort as count tables, for Axis 2 and Axis 3
        self.cohorts = CohortBook(config)
        #: the report at ``/``: drawn on a thread of its own, one drawing at a time
        #: its version is a counter, not ``pipeline.evaluation_total``: that takes the
        #: pipeline's lock, which an ingest batch holds for its whole write, and ``GET /``
        #: waited behind it (seconds under load; target 3 s)
        self.page = PageRenderer(
            lambda: stored_report(self.store, self.config, _NO_REPORT_YET, self.clock),
            lambda: self.page_version, max_age_s=STATUS_PAGE_MAX_AGE_S,
        )  # fmt: skip
        self.api: ApiServer | None = None
        self.http_port = config.service.http.port if http_port is None else http_port
        self.ready_reason = "starting"
        #: the source's health check (KafkaSource.health), read by /readyz
        self.source_health: Callable[[], tuple[bool, str]] | None = None
        #: whether the source reaches its broker (KafkaSource.broker_reachable), read by
        #: /healthz: records waiting behind an outage are readiness's business, not a stall
        self.source_reachable: Callable[[], bool] | None = None
        #: the ingest loop's and the ticker's turns, for /healthz (monitor.service.liveness)
        self.liveness = Liveness(config.service.liveness.stall_after_s)
        self.last_ingest = clock()
        # a restart must not count the restored windows' old events again
        self._old_events_seen = {v.model_id: v.old_events for v in self.pipeline.model_views()}
        # and keeps each model's last evaluation time (VFRMonitorStale reads it): a model
        # restored from the file with no new records must still look stale when it is
        self._last_evaluation = self.store.read(queries.last_evaluation_times)
        #: (axis, model) -> the cohort its latest published result rests on
        self._axis_releases = self.store.read(queries.axis_releases)
        #: models whose first run of the slow axes was asked for (_first_axes_runs)
        self._first_runs_asked: set[str] = set()

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        # a bad web-config file stops the start-up here, naming service.http.web_config.<key>
        self.api = serve_configured(self.exporter, self, self.config.service.http, self.http_port)
        if self._start_scheduler:
            self.scheduler.start()
        self.ready_reason = "ok"
        log.info("vfr-monitor serving on %s", self.api.url)

    def begin_stop(self) -> None:
        """A signal came (any thread; never blocks): not ready, no longer expected to
        turn, and every route but the probes answers 503 while the rest stops."""
        self.ready_reason = "stopping"
        self.liveness.stop()
        if self.api is not None:
            self.api.stop_data_routes()

    def close(self) -> None:
        """Graceful stop: the caller has already let the source finish its batch."""
        self.ready_reason = "stopping"
        self.liveness.stop()
        if self.api is not None:
            self.api.stop_data_routes()
        try:
            # a running axis job finishes (bounded by the process's shutdown grace); the
            # jobs not started yet are dropped and run at the next start
            self.scheduler.shutdown(wait=True)
        except Exception:
            log.warning("scheduler shutdown failed")
        if self.api is not None:
            self.api.close()
        self.page.close()  # a drawing reads the file closed below
        try:
            self.pipeline.close()  # the worker's last evaluations
        except Exception as exc:
            # recomputed from the stored records at the next start
            log.warning("pipeline close failed: %s", type(exc).__name__)
        if self.outbox_relay is not None:  # what the last evaluations put in the outbox
            self.outbox_relay.close()
        self.store.close()

    # ------------------------------------------------------------------ metrics
    def snapshot(self) -> StateSnapshot:
        """What a scrape shows: every cell's and model's figures as last released
        (monitor.stream.publication: window size and groups rounded, withheld groups
        absent), each model's released health and last evaluation time, the consumer lag."""
        cells = self.released_cells()
        models = []
        for view in self.pipeline.model_views():
            pub = view.published
            groups = {
                attr: {g: GroupStat(s.records, s.selection_rate) for g, s in by_group.items()}
                for attr, by_group in pub.groups.items()
            }
            auroc, accuracy = self.health_release.released(view.model_id) or (None, None)
            models.append(
                ModelStatus(
                    view.model_id, pub.window_records, groups,
                    auroc=auroc, accuracy=accuracy,
                    last_evaluation_at=self._last_evaluation.get(view.model_id),
                )
            )  # fmt: skip
        return StateSnapshot(cells, models, {self.source_name: dict(self._lag)})

    def _release_health(self, model: str) -> None:
        """At a model's evaluation: its rolling AUROC and accuracy are released when
        computed from 11 or more records the health window has itself seen, and 0 or 11+
        new records since the last release (monitor.core.privacy.ReleaseBook); what is
        offered: monitor.publish.health.published_health."""
        h = self.health.get(model)
        if h is None:
            return
        self.health_release.offer(model, [h.n_seen], published_health(h))

    def _after_batch(self, report: BatchReport) -> None:
        """After a committed batch: counters, model health, early runs of the slow axes.

        State series (cells, groups, windows) are read at scrape time from
        :meth:`snapshot`; here only what counts. Each item is its own try: one that fails
        (say a label the exporter refuses) is logged by type and counted, and the others
        are still published.
        """
        ex = self.exporter
        now = self.clock()
        if report.received:
            self.last_ingest = now
            self.liveness.progressed()
        if report.evaluations:
            self.page_version += len(report.evaluations)
        window_n = {c.key: c.result.window_n for c in report.cells}
        items: list[Callable[[], None]] = []
        if report.received:
            items.append(
                lambda: ex.count_batch(
                    self.source_name, report.accepted, report.duplicates, report.rejected
                )
            )
            items.append(lambda: self._watch_dead_letters(report))
        for e in report.events:
            key = (e.model_id, e.metric, e.attribute)
            items.append(partial(ex.count_event, e, window_n.get(key, 0)))
        for model, seconds in report.evaluations:
            items.append(partial(self._count_evaluation, model, seconds, now))
        for model, (label, score, decision) in report.new_records.items():
            items.append(partial(self._health, model, label, score, decision))
        for key in report.drift:
            items.append(partial(ex.count_drift, *key, window_n.get(key, 0)))
        failures = 0
        for item in items:
            try:
                item()
            except Exception as exc:
                failures += 1
                log.error("metrics update failed: %s", type(exc).__name__)
        for model, _ in report.evaluations:  # after the health updates above
            try:
                self._release_health(model)
            except Exception as exc:
                failures += 1
                log.error("health release failed: %s", type(exc).__name__)
        if failures:
            ex.count_observer_failure(failures)
        if report.drift:
            for job in SLOW_AXES:
                self.scheduler.run_early(job)
        self._first_axes_runs(report)

    def _first_axes_runs(self, report: BatchReport) -> None:
        """Hook of the slow axes' first run per model (monitor.service.scheduler.run_first):
        a model with ``[service.axes] first_run_records`` records and no result of theirs
        gets one at once, so its tiers do not read Pending for a whole interval."""
        need = self.config.service.axes.first_run_records
        for model in report.new_records:
            if model in self._first_runs_asked:
                continue
            view = self.pipeline.model_view(model)
            if view is None or view.arrivals < need:
                continue
            self._first_runs_asked.add(model)
            for job in SLOW_AXES:
                # a result already resting on enough records (a restart) needs no first
                # run; one from the run at start-up, on the few records then in, does
                if _release_records(self._axis_releases.get((job, model))) < need:
                    self.scheduler.run_first(job, model)

    def _watch_dead_letters(self, report: BatchReport) -> None:
        """Tally the batch; when one reason holds most of the recent messages, say so once
        (reason, count, the setting that would admit them) and set its gauge.

        A metric and a log line rather than /readyz: the service is working as configured
        and an orchestrator restarts or unroutes a pod that is not ready, which would hide
        the gauge and fix nothing (docs/decisions.md, "A user's mistakes and silent dead
        letters")."""
        self.tally.add(report.accepted, report.duplicates, report.rejected)
        watch = self.dead_letter_watch
        for d in watch.observe(report.received, report.rejected):
            log.warning("dead letters: %s", d.message())
        self.exporter.set_dominant_rejections(self.source_name, watch.dominant)

    def _count_evaluation(self, model: str, seconds: float, now: float) -> None:
        self.exporter.count_evaluation(model, seconds)
        self._last_evaluation[model] = now
        view = self.pipeline.model_view(model)
        if view is None:  # revoked since the evaluation was reported
            return
        old = view.old_events
        # the window keeps a running total; the counter takes what is new since last time
        self.exporter.count_old_events(model, old - self._old_events_seen.get(model, 0))
        self._old_events_seen[model] = old

    def _health(self, model: str, label: Any, score: Any, decision: Any) -> None:
        h = self.health.get(model)
        if h is None:
            h = ModelHealth(window=self.config.window.hop_records, auroc_engine="exact")
            self.health[model] = h
        h.update_many(label, score, decision)

    def set_lag(self, lag: dict[tuple[str, int], int]) -> None:
        """The source's latest lag report (partitions it no longer owns are not in it)."""
        self._lag = {p: n for (_, p), n in lag.items() if n is not None}

    def lag(self) -> dict[int, int]:
        """The latest lag per partition (empty: none reported; the progress line reads it)."""
        return self._lag

    # ------------------------------------------------------------------ scheduled axes
    def _cohort(self, cursor: Any, model_id: str) -> pd.DataFrame:
        """A model's audit cohort: its records of the last cohort_days of event time."""
        frame = queries.window_records(
            cursor, self.store.attributes, model_id, days=self.config.service.axes.cohort_days,
            with_details=True,
        )  # fmt: skip
        return frame.assign(model_id=model_id)

    def _for_each_model(
        self, axis: str, compute: Callable[[str, pd.DataFrame], AxisResult]
    ) -> None:
        cursor = self.store.cursor()
        try:
            # the models this instance owns: in a consumer group, those of its partitions
            for model_id in self.pipeline.owned_models():
                view = self.pipeline.model_view(model_id)
                if view is None:  # revoked meanwhile
                    continue
                position = view.arrivals
                frame = self._cohort(cursor, model_id)
                if not len(frame):
                    continue
                result = compute(model_id, frame)
                if isinstance(result, tuple | Axis3Result):  # the tiers use it either way
                    self.pipeline.set_axis_result(model_id, result)
                # a job is a release. EquiLense publishes figures of groups (rates, sizes):
                # a new result only when no group of the cohort moved by 1-10 records since
                # the last one published (monitor.stream.publication). Axis 2 and 3 publish
                # N*, VFR, kappa and verdict counts, exact by the rule, and fold sizes,
                # rounded and suppressed: they are published at every run.
                indices = attribute_groups(frame, self.config)
                groups = {
                    a.name: (len(a.codes), indices[a.name]) for a in self.config.grid_attributes
                }
                ok, cohort = cohort_release(
                    self._axis_releases.get((axis, model_id)), frame["seq"].to_numpy(), groups
                )
                if axis in GROUP_FIGURE_AXES and not ok:
                    log.info("%s of a model held: its cohort moved by 1-10 records", axis)
                    continue
                at = pd.Timestamp(self.clock(), unit="s", tz="UTC")
                # the store holds JSON: converted here, right at the write
                self.store.write_axis_results(
                    axis, model_id, len(frame), axis_payload(result), at, cursor=cursor,
                    position=position,
                )  # fmt: skip
                self.store.write_axis_release(axis, model_id, cohort, cursor)
                self._axis_releases[(axis, model_id)] = cohort
        finally:
            cursor.close()

    def _for_each_cohort(
        self, axis: str, compute: Callable[[str, CohortView], AxisResult]
    ) -> None:
        """Axis 2 and 3: each owned model's cohort from the count tables the book keeps up
        to date (:mod:`monitor.service.cohort_book`), not read again from the file. Both
        publish at every run (N*, kappa, verdict counts; fold sizes rounded), so only the
        cohort's release point is recorded."""
        owned = self.pipeline.owned_models()
        self.cohorts.keep_only(owned)  # a rebalance moved the others away: free them
        cursor = self.store.cursor()
        try:
            for model_id in owned:
                view = self.pipeline.model_view(model_id)
                if view is None:  # revoked meanwhile
                    continue
                position = view.arrivals
                cohort = self.cohorts.update(cursor, model_id)
                if not cohort.n:
                    continue
                result = compute(model_id, cohort)
                self.pipeline.set_axis_result(model_id, result)  # type: ignore[arg-type]  # axis2/axis3 jobs only
                at = pd.Timestamp(self.clock(), unit="s", tz="UTC")
                self.store.write_axis_results(
                    axis, model_id, cohort.n, axis_payload(result), at, cursor=cursor,
                    position=position,
                )  # fmt: skip
                point = cohort.release_point()
                self.store.write_axis_release(axis, model_id, point, cursor)
                self._axis_releases[(axis, model_id)] = point
        finally:
            cursor.close()

    def job_axis2(self) -> None:
        # predictions now, outcomes later: label-based metrics on the cohort's records with an
        # outcome only
        self._for_each_cohort(
            "axis2",
            lambda m, c: tuple(run_axis2_counts(m, c.counts, self.config, c.free, c.span_days)),
        )

    def job_axis3(self) -> None:
        self._for_each_cohort(
            "axis3", lambda m, c: run_axis3_counts(m, c.counts, self.config, c.free)
        )

    def job_equilense(self) -> None:
        names = tuple(self.config.equilense.features)

        def compute(model_id: str, frame: pd.DataFrame) -> EquiLenseResult:
            features = None
            if names:
                features = queries.feature_matrix(frame["features"], names)
                keep = np.isfinite(features).all(axis=1)
                frame, features = frame[keep], features[keep]
            # predictions now, outcomes later: its group metrics need the label: the records with an
            # outcome
            known = frame["label"].to_numpy(np.int64) >= 0
            if not known.all():
                frame, features = frame[known], None if features is None else features[known]
            tables = tables_from_frame(frame, self.config)
            return run_equilense(frame, features, names, tables, self.config)

        self._for_each_model("equilense", compute)

    def job_retention(self) -> dict[str, int]:
        """Delete discharges and results past their retention (by wall-clock time)."""
        kept = self.config.service.retention
        now = pd.Timestamp(self.clock(), unit="s", tz="UTC")
        deleted_before = now - pd.Timedelta(days=kept.discharge_days)
        with self.cohorts.retention(deleted_before.value // 1000):  # microseconds
            return self.store.apply_retention(now, kept.discharge_days, kept.result_days)

    def _job_outcome(self, o: JobOutcome) -> None:
        self.exporter.record_job(o.job, o.state, o.duration_s, o.started_at)
        self.page_version += 1  # a new axis result, or a failed run the page lists
        cursor = self.store.cursor()
        try:
            self.store.write_job_run(
                o.job, pd.Timestamp(o.started_at, unit="s", tz="UTC"), o.duration_s, o.state,
                o.error_kind, cursor=cursor,
            )  # fmt: skip
        finally:
            cursor.close()

    # ------------------------------------------------------------------ StateView for the API
    def alive(self) -> tuple[bool, str]:
        """For /healthz (the event loop: reads a few floats, never waits): False when the
        ingest loop or the ticker is stuck, or nothing is stored while records wait at a
        reachable source (monitor.service.liveness)."""
        reachable = self.source_reachable() if self.source_reachable is not None else True
        return self.liveness.check(sum(self._lag.values()), reachable)

    def ready(self) -> tuple[bool, str]:
        """Ready when started and the source can consume (broker reachable, sink storing)."""
        if self.ready_reason != "ok":
            return False, self.ready_reason
        if self.source_health is not None:
            return self.source_health()
        return True, "ok"

    def latest_cells(self) -> list[CellEvaluation]:
        """The latest (computed) evaluation of every cell, in (model, metric, attribute)
        order: for the service's own use; what leaves it is :meth:`released_cells`."""
        return self.pipeline.latest_cells()

    def released_cells(self) -> list[CellEvaluation]:
        """Every cell's last released evaluation (monitor.stream.publication)."""
        return self.pipeline.released_cells()

    def cells(self) -> list[dict]:
        """Released cells; a cell whose window has fewer than 11 records shows ``<11`` in
        place of every figure, counts rounded (monitor.publish.cells.published_evaluation)."""
        return [published_evaluation(c) for c in self.released_cells()]

    def status_page(self) -> str:
        """The governance report, served live at ``/``: the last drawing, from memory.

        Drawn from the service's own DuckDB file (it holds the only connection) on the
        renderer's thread, never on the API's workers (a page takes seconds to draw);
        see :mod:`monitor.service.page_renderer`.
        """
        return self.page.page()

    def events(self, limit: int, since_id: int | None) -> list[dict]:
        return stored_events(self.store, limit, since_id)

    def windows(
        self, model: str, metric: str, attribute: str, limit: int, before: int | None = None
    ) -> list[dict] | None:
        if not self.pipeline.has_cell(model, metric, attribute):
            return None
        return stored_windows(self.store, model, metric, attribute, limit, before)

    def models(self) -> list[dict]:
        """Each model's released window size (rounded; "<11" below the small-cell rule),
        rolling AUROC / accuracy (released) and last evaluation time."""
        out = []
        for m in sorted(self.snapshot().models, key=lambda m: m.model_id):
            at = m.last_evaluation_at
            out.append({
                "model_id": m.model_id,
                "window_records": (
                    WITHHELD_TEXT if m.window_records is None else m.window_records
                ),
                "rolling_auroc": m.auroc,
                "rolling_accuracy": m.accuracy,
                "last_evaluation_at": None if at is None else str(
                    pd.Timestamp(at, unit="s", tz="UTC")),
            })  # fmt: skip
        return out

    def axes(self, axis: str, model: str | None, limit: int, offset: int) -> list[dict] | None:
        return stored_axes(self.store, axis, model, limit, offset)


def run_until_stopped(
    service: MonitorService,
    source: Any,
    stop: threading.Event,
    *,
    max_messages: int | None = None,
    tick_s: float = 1.0,
    until_idle_s: float | None = None,
) -> int:
    """Run the source in this thread, with wall-clock hops and lag reporting beside it.

    ``until_idle_s``: stop once nothing new has arrived for that long and the source
    reports no lag (or, for a replay, is exhausted): for batch-like runs and tests.
    """

    live = service.liveness

    def ticker() -> None:
        while not stop.wait(tick_s):
            live.ticked()
            try:
                service.pipeline.tick()
                lag = source.lag() if hasattr(source, "lag") else {}
                service.set_lag(lag)
                if until_idle_s is not None:
                    idle = service.clock() - service.last_ingest >= until_idle_s
                    drained = getattr(source, "exhausted", False) or (
                        bool(lag) and not any(lag.values())
                    )
                    if idle and drained:
                        stop.set()
            except Exception as exc:
                log.warning("tick failed: %s", type(exc).__name__)

    if hasattr(source, "on_turn"):
        source.on_turn = live.turned
    live.start()
    t = threading.Thread(target=ticker, name="vfr-tick", daemon=True)
    t.start()
    try:
        return source.run(stop, max_messages=max_messages)
    finally:
        live.stop()
        stop.set()
        t.join(timeout=5)
