"""`vfr-monitor view`: one view of every model of a fleet of service instances.

Instances of one consumer group each own some partitions, so each serves only its own
models. Each publishes what it stores to the compacted results topic
(:mod:`monitor.store.results_messages`); the view reads that topic into a DuckDB file of
its own, with the service's tables, and serves the same API, status page and report
from it, for all models. Keys make a recomputed result replace its twin, so a model that
moved between instances appears once.

What the view does not have: the records themselves (no ``discharges``: the report's time
axis falls back to evaluation times, and rolling AUROC is not shown) and the live
counters of /metrics, which stay with the instances (Prometheus scrapes those).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from monitor import __version__
from monitor.config import MonitorConfig
from monitor.core.locks import named_lock
from monitor.core.results import CellEvaluation
from monitor.publish.cells import published_evaluation
from monitor.publish.counts import published_count
from monitor.service.exporter import Exporter
from monitor.service.http_server import ApiServer, serve_configured
from monitor.service.page_renderer import PageRenderer
from monitor.service.stored_views import (
    stored_axes,
    stored_events,
    stored_report,
    stored_windows,
)
from monitor.store import Store, queries
from monitor.store.results_messages import ResultMessage, parse_message

log = logging.getLogger(__name__)

_NO_RESULTS_YET = (
    "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>vfr-monitor view"
    "</title></head><body><h1>vfr-monitor view</h1><p>No results have arrived from the "
    "fleet yet.</p></body></html>"
)


class FleetView:
    """The view's file and its :class:`~monitor.service.http_routes.StateView` answers."""

    def __init__(
        self, config: MonitorConfig, db_path: str, clock: Callable[[], float] = time.time
    ):
        self.config = config
        #: dates the status page's report (injected by the golden run, tests/golden)
        self.clock = clock
        self.store = Store(db_path, config)
        self.exporter = Exporter(
            __version__, group_codes=[c for a in config.grid_attributes for c in a.codes]
        )
        self.lock = named_lock("fleet_view")
        #: messages applied (the status page is redrawn when it changes)
        self.applied = 0
        #: messages that were not results (counted, skipped; their content is not logged)
        self.skipped = 0
        self.caught_up = False
        #: the report at ``/``, drawn in the background when results came
        self.page = PageRenderer(
            lambda: stored_report(self.store, self.config, _NO_RESULTS_YET, self.clock),
            lambda: self.applied, title="vfr-monitor view", max_age_s=float("inf"),
        )  # fmt: skip
        self.api: ApiServer | None = None

    # ------------------------------------------------------------------ input
    def apply(self, batch: Sequence[tuple[bytes | None, bytes | None]]) -> None:
        messages: list[ResultMessage] = []
        for key, value in batch:
            if key is None or value is None:
                self.skipped += 1
                continue
            try:
                messages.append(parse_message(key, value))
            except (ValueError, KeyError, UnicodeDecodeError):
                self.skipped += 1
        if messages:
            with self.lock:
                self.store.apply_results(messages)
                self.applied += len(messages)

    def set_caught_up(self, caught_up: bool) -> None:
        self.caught_up = caught_up

    # ------------------------------------------------------------------ StateView
    def ready(self) -> tuple[bool, str]:
        return (True, "ok") if self.caught_up else (False, "reading the results topic")

    def _latest(self) -> list[tuple[str, CellEvaluation]]:
        cursor = self.store.cursor()
        try:
            return queries.latest_window_results(cursor)
        finally:
            cursor.close()

    def cells(self) -> list[dict]:
        return [published_evaluation(c) for _, c in self._latest()]

    def events(self, limit: int, since_id: int | None) -> list[dict]:
        return stored_events(self.store, limit, since_id)

    def windows(
        self, model: str, metric: str, attribute: str, limit: int, before: int | None = None
    ) -> list[dict] | None:
        rows = stored_windows(self.store, model, metric, attribute, limit, before)
        return rows or None

    def models(self) -> list[dict]:
        """Each model's latest window size and evaluation time (no rolling AUROC: the view
        has no records)."""
        latest: dict[str, CellEvaluation] = {}
        for m, c in self._latest():
            if m not in latest or c.evaluation > latest[m].evaluation:
                latest[m] = c
        out = []
        for m, c in sorted(latest.items()):
            n = c.result.window_n
            out.append({
                "model_id": m,
                "window_records": published_count(n),
                "rolling_auroc": None, "rolling_accuracy": None,
                "last_evaluation_at": c.evaluated_at,
            })  # fmt: skip
        return out

    def axes(self, axis: str, model: str | None, limit: int, offset: int) -> list[dict] | None:
        return stored_axes(self.store, axis, model, limit, offset)

    def status_page(self) -> str:
        """The governance report of every model in the view: the last drawing, from memory
        (redrawn in the background when results came; :mod:`monitor.service.page_renderer`)."""
        return self.page.page()

    # ------------------------------------------------------------------ life cycle
    def start(self, port: int) -> None:
        """Serve through ``[service.http]``'s web config (TLS, basic auth) and limits, as
        ``vfr-monitor run`` does: the view holds every model's results."""
        self.api = serve_configured(self.exporter, self, self.config.service.http, port)

    def close(self) -> None:
        if self.api is not None:
            self.api.close()
        self.page.close()  # a drawing reads the file closed below
        self.store.close()


def idle_stopper(
    view: FleetView, until_idle_s: float | None
) -> tuple[threading.Event, Callable[[bool], None]]:
    """A stop event, and the ``on_idle`` callback that sets it once the view has caught up
    and nothing new came for ``until_idle_s`` (None: never)."""
    stop = threading.Event()
    state: dict[str, Any] = {"since": None, "applied": -1}

    def on_idle(caught_up: bool) -> None:
        view.set_caught_up(caught_up)
        if until_idle_s is None or not caught_up:
            state["since"] = None
            return
        now = time.monotonic()
        if state["since"] is None or state["applied"] != view.applied:
            state["since"], state["applied"] = now, view.applied
        elif now - state["since"] >= until_idle_s:
            stop.set()

    return stop, on_idle
