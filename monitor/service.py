"""`vfr-monitor run`: the service process, wiring the parts in the order data flows.

source (Kafka or embedded) -> :class:`~monitor.pipeline.Pipeline` (validation,
DuckDB, windows, Axis 1, tiers, events) -> :class:`~monitor.exporter.Exporter`
and the read-only HTTP API. APScheduler runs Axis 2, Axis 3 and EquiLense on
each model's audit cohort; their latest results feed the tiers of the next
evaluation. river tracks each model's rolling AUROC/accuracy, and ADWIN on each
cell's point value asks for an early (rate-limited) run of the slow axes.

The DuckDB file is owned by this process; the API and the jobs read it through
cursors of the same connection.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from monitor import __version__
from monitor.api import ApiServer, serve
from monitor.axes_runner import run_axis2, run_axis3, run_equilense
from monitor.config import MonitorConfig
from monitor.drift import DriftBook, ModelHealth
from monitor.exporter import Exporter
from monitor.pipeline import BatchReport, Pipeline
from monitor.scheduler import AxisScheduler, JobOutcome, JobSpec
from monitor.store import Store
from monitor.tables import tables_from_frame

log = logging.getLogger(__name__)

SLOW_AXES = ("axis2", "axis3", "equilense")


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
    ):
        self.config = config
        self.source_name = source_name
        self.clock = clock
        self.store = Store(db_path or config.service.db_path, config)
        self.exporter = Exporter(
            __version__, group_codes=[c for a in config.attributes for c in a.codes]
        )
        self.drift = DriftBook(config.service.drift_delta)
        self.health: dict[str, ModelHealth] = {}
        self.pipeline = Pipeline(
            config, self.store, on_batch=self._after_batch, drift=self.drift, clock=clock
        )
        self.scheduler = AxisScheduler(
            [
                JobSpec("axis2", self.job_axis2, config.service.axis2_interval_s),
                JobSpec("axis3", self.job_axis3, config.service.axis3_interval_s),
                JobSpec("equilense", self.job_equilense, config.service.equilense_interval_s),
                JobSpec("retention", self.job_retention, config.service.retention_interval_s),
            ],
            on_outcome=self._job_outcome,
            early_min_interval_s=config.service.early_run_min_interval_s,
            clock=clock,
        )
        self._start_scheduler = start_scheduler
        self.api: ApiServer | None = None
        self.http_port = config.service.http_port if http_port is None else http_port
        self.ready_reason = "starting"
        self._source_ok = False
        self.last_ingest = clock()
        self._publish_restored_state()

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        self.api = serve(
            self.exporter, self, host=self.config.service.http_host, port=self.http_port
        )
        if self._start_scheduler:
            self.scheduler.start()
        self.ready_reason = "ok"
        log.info("vfr-monitor serving on %s", self.api.url)

    def source_connected(self, ok: bool) -> None:
        self._source_ok = ok

    def close(self) -> None:
        """Graceful stop: the caller has already let the source finish its batch."""
        self.ready_reason = "stopping"
        try:
            self.scheduler.shutdown(wait=True)
        except Exception:
            log.warning("scheduler shutdown failed")
        if self.api is not None:
            self.api.close()
        try:
            self.pipeline.close()  # the worker's last evaluations
        except Exception as exc:
            # recomputed from the stored records at the next start
            log.warning("pipeline close failed: %s", type(exc).__name__)
        self.store.close()

    # ------------------------------------------------------------------ metrics
    def _publish_restored_state(self) -> None:
        for (model, metric, attribute), cell in self.pipeline.latest.items():
            self._publish_cell(model, metric, attribute, cell)
        for model, w in self.pipeline.windows.items():
            self.exporter.window(model, w.n)

    def _publish_cell(self, model: str, metric: str, attribute: str, c: dict[str, Any]) -> None:
        def num(x: Any) -> float | None:
            if x is None:
                return None
            if x == "inf":
                return math.inf
            return float(x)

        self.exporter.update_cell(
            model, metric, attribute,
            value=num(c.get("value")), vfr=num(c.get("vfr")),
            dominant_pass=c.get("dominant_verdict") == "pass",
            point_pass=c.get("point_verdict") == "pass",
            sigma=num(c.get("sigma")), ci_low=num(c.get("ci_low")), ci_high=num(c.get("ci_high")),
            n_star=num(c.get("n_star")), kappa=num(c.get("kappa")),
            tier=c["tier"], tier_level=int(c["tier_level"]), partial=bool(c.get("partial")),
            confirmed_tier=c.get("confirmed_tier"), window_n=int(c.get("window_n", 0)),
            confirmed_pass=(
                None if c.get("confirmed_verdict") is None else c["confirmed_verdict"] == "pass"
            ),
        )  # fmt: skip

    def _after_batch(self, report: BatchReport) -> None:
        """After a committed batch: counters, cells, events, groups, model health."""
        ex = self.exporter
        now = self.clock()
        if report.received:
            self.last_ingest = now
            ex.ingest(self.source_name, report.accepted, report.duplicates, report.rejected)
        for cell in report.cells:
            self._publish_cell(cell["model_id"], cell["metric"], cell["attribute"], cell)
        for e in report.events:
            ex.record_event(
                e["kind"], e["model_id"], e["metric"], e["attribute"], e["old"], e["new"],
                e["confirmed"], e["direction"],
            )  # fmt: skip
        with self.pipeline.lock:
            for model, seconds in report.evaluations:
                ex.evaluation(model, seconds, now)
                w = self.pipeline.windows[model]
                ex.window(model, w.n)
                ex.old_events(model, w.old_events)
                for attr, table in w.tables.items():
                    sizes = table.group_counts()
                    selected = table.counts[:, :, 1, :].sum(axis=(1, 2))
                    ex.update_groups(
                        model, attr,
                        {g: (int(n), float(s) / n if n else 0.0)
                         for g, n, s in zip(table.groups, sizes, selected, strict=True)},
                    )  # fmt: skip
        for model, (label, score, decision) in report.new_records.items():
            h = self.health.get(model)
            if h is None:
                h = ModelHealth(window=self.config.window.hop_records, auroc_engine="exact")
                self.health[model] = h
            h.update_many(label, score, decision)
            ex.model_health(model, h.auroc, h.accuracy)
        for key in report.drift:
            ex.drift(*key)
        if report.drift:
            for job in SLOW_AXES:
                self.scheduler.run_early(job)

    def set_lag(self, lag: dict[tuple[str, int], int]) -> None:
        self.exporter.set_lag(self.source_name, {p: n for (_, p), n in lag.items()})

    # ------------------------------------------------------------------ scheduled axes
    def _cohort(self, cursor: Any, model_id: str) -> pd.DataFrame:
        """A model's audit cohort: its records of the last cohort_days of event time."""
        latest = self.store.records(model_id, last_n=1, cursor=cursor)
        if not len(latest):
            return latest
        t = pd.to_datetime(latest["event_time"].iloc[0], utc=True)
        since = t - pd.Timedelta(days=self.config.service.cohort_days)
        frame = self.store.records(model_id, since=since, cursor=cursor, with_details=True)
        return frame.assign(model_id=model_id)

    def _for_each_model(self, axis: str, compute: Callable[[str, pd.DataFrame], Any]) -> None:
        cursor = self.store.cursor()
        try:
            for model_id in self.store.models(cursor):
                frame = self._cohort(cursor, model_id)
                if not len(frame):
                    continue
                payload = compute(model_id, frame)
                at = pd.Timestamp(self.clock(), unit="s", tz="UTC")
                self.store.write_axis_results(
                    axis, model_id, len(frame), payload, at, cursor=cursor
                )
                with self.pipeline.lock:
                    if axis == "axis2":
                        self.pipeline.axes.set_axis2(model_id, payload)
                    elif axis == "axis3":
                        self.pipeline.axes.set_axis3(model_id, payload)
        finally:
            cursor.close()

    def job_axis2(self) -> None:
        self._for_each_model(
            "axis2",
            lambda m, f: [
                c.to_dict() for c in run_axis2(tables_from_frame(f, self.config), self.config)
            ],
        )

    def job_axis3(self) -> None:
        self._for_each_model("axis3", lambda m, f: run_axis3(m, f, self.config).to_dict())

    def job_equilense(self) -> None:
        names = tuple(self.config.equilense.features)

        def compute(model_id: str, frame: pd.DataFrame) -> dict[str, Any]:
            features = None
            if names:
                rows = [
                    [float((f or {}).get(k, np.nan)) for k in names]
                    for f in (_loads(x) for x in frame["features"])
                ]
                features = np.asarray(rows, dtype=np.float64).reshape(len(frame), len(names))
                keep = np.isfinite(features).all(axis=1)
                frame, features = frame[keep], features[keep]
            tables = tables_from_frame(frame, self.config)
            return run_equilense(frame, features, names, tables, self.config)

        self._for_each_model("equilense", compute)

    def job_retention(self) -> dict[str, int]:
        """Delete discharges and results past their retention (by wall-clock time)."""
        svc = self.config.service
        now = pd.Timestamp(self.clock(), unit="s", tz="UTC")
        return self.store.apply_retention(
            now, svc.retention_discharge_days, svc.retention_result_days
        )

    def _job_outcome(self, o: JobOutcome) -> None:
        self.exporter.job(o.job, o.state, o.duration_s, o.started_at)
        cursor = self.store.cursor()
        try:
            self.store.write_job_run(
                o.job, pd.Timestamp(o.started_at, unit="s", tz="UTC"), o.duration_s, o.state,
                o.error_kind, cursor=cursor,
            )  # fmt: skip
        finally:
            cursor.close()

    # ------------------------------------------------------------------ StateView for the API
    def ready(self) -> tuple[bool, str]:
        return self.ready_reason == "ok", self.ready_reason

    def cells(self) -> list[dict]:
        with self.pipeline.lock:
            return [dict(c) for c in self.pipeline.latest.values()]

    def events(self, limit: int, since_id: int | None) -> list[dict]:
        cursor = self.store.cursor()
        try:
            return self.store.events_since(limit, since_id, cursor=cursor)
        finally:
            cursor.close()

    def windows(self, model: str, metric: str, attribute: str, limit: int) -> list[dict] | None:
        with self.pipeline.lock:
            if (model, metric, attribute) not in self.pipeline.latest:
                return None
        cursor = self.store.cursor()
        try:
            return self.store.window_history(model, metric, attribute, limit, cursor=cursor)
        finally:
            cursor.close()


def _loads(x: Any) -> dict | None:
    import json

    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return json.loads(x) if isinstance(x, str) else x


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

    def ticker() -> None:
        while not stop.wait(tick_s):
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

    t = threading.Thread(target=ticker, name="vfr-tick", daemon=True)
    t.start()
    try:
        return source.run(stop, max_messages=max_messages)
    finally:
        stop.set()
        t.join(timeout=5)
