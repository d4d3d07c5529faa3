"""API answers read from a results file, shared by the service and the fleet view.

Both serve the same routes from a DuckDB file with the same tables (the service's own
file; the view's file filled from the results topic), under the same small-cell rule:
an answer computed from fewer than 11 records shows ``<11`` in place of its figures.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from monitor.config import MonitorConfig
from monitor.core.events import CellEvent
from monitor.core.explain import Cutoffs, explain_event
from monitor.publish.axes import axis_row_value
from monitor.publish.cells import event_value, window_value
from monitor.publish.encode import JsonObject, axis_row_json, event_json, window_json
from monitor.store import Store, queries


def event_explainer(config: MonitorConfig) -> Callable[[CellEvent], str]:
    """The event in one sentence, with the cutoffs of this configuration (the API's events
    and the alerts' annotations)."""

    def explain(event: CellEvent) -> str:
        rule = next((r for r in config.metrics if r.name == event.metric), None)
        return explain_event(
            event,
            Cutoffs(
                threshold=None if rule is None else rule.threshold,
                direction=None if rule is None else rule.direction,
                tau_vfr=config.axis1.tau_vfr,
                n_field=config.axis2.n_field,
                kappa_cutoff=config.axis3.kappa_cutoff,
            ),
        )

    return explain


def stored_events(store: Store, limit: int, since_id: int | None) -> list[dict]:
    """Latest events, each with its sentence; one from an evaluation of fewer than 11
    window records shows ``<11`` in place of its verdicts, tiers, axes and sentence
    (:func:`monitor.publish.cells.event_value`)."""
    cursor = store.cursor()
    try:
        events = queries.events_since(cursor, limit, since_id)
        sizes = queries.evaluation_window_sizes(
            cursor, ((s.event.model_id, s.event.evaluation) for s in events)
        )
    finally:
        cursor.close()
    explain = event_explainer(store.config)
    return [
        event_json(event_value(
            s.event, id=s.id, created_at=s.created_at, decision_config=s.decision_config,
            window_n=sizes.get((s.event.model_id, s.event.evaluation)), explain=explain,
        ))
        for s in events
    ]  # fmt: skip


def stored_windows(
    store: Store, model: str, metric: str, attribute: str, limit: int, before: int | None
) -> list[dict]:
    """A cell's released evaluations, newest first; small windows withheld, counts
    rounded (monitor.publish.cells.window_value)."""
    cursor = store.cursor()
    try:
        rows = queries.window_history(cursor, model, metric, attribute, limit, before)
    finally:
        cursor.close()
    return [window_row(r) for r in rows]


def window_row(row: queries.WindowRow) -> JsonObject:
    """A stored window row as the API's windows route serves it: the row's columns, then
    its result's stored form (whose ``evaluation`` and ``evaluated_at`` are the ones
    shown), under the small-cell rule (monitor.publish.cells.window_value)."""
    return window_json(
        window_value(row.evaluation, row.evaluated_at, row.window_end_count, row.seed, row.result)
    )


def stored_axes(
    store: Store, axis: str, model: str | None, limit: int, offset: int
) -> list[dict] | None:
    """Stored results of one scheduled axis, newest first; None for an unknown model.

    A result computed on a cohort of fewer than 11 records shows "<11" for its size and
    no payload; a larger cohort's size is rounded to 5. A payload is read back from the
    store's JSON as its typed result and served as
    :func:`~monitor.publish.axes.published_axis` makes it
    (group and fold sizes under secondary suppression, rounded counts, no exact small
    count in a note).
    """
    cursor = store.cursor()
    try:
        rows = queries.axis_history(cursor, axis, model, limit, offset)
        if model is not None and not rows and model not in queries.models_with_results(cursor):
            return None
    finally:
        cursor.close()
    return [axis_row(row) for row in rows]


def axis_row(row: queries.AxisRow) -> JsonObject:
    """A stored scheduled result as the API's axes routes serve it: its identity, its
    cohort size and payload under the small-cell rule (axis_row_value)."""
    cohort_n, payload = axis_row_json(axis_row_value(row.cohort_n, lambda: row.result))
    return {
        "axis": row.axis,
        "model_id": row.model_id,
        "computed_at": row.computed_at,
        "cohort_n": cohort_n,
        "payload": payload,
    }


def stored_report(
    store: Store,
    config: MonitorConfig,
    empty_page: str,
    clock: Callable[[], float] | None = None,
) -> str:
    """The governance report of the file (``empty_page`` while it has no evaluated cell),
    read through a cursor of the owner's connection. ``clock`` (unix seconds; None: now)
    dates the header: the service's own clock, so an injected one reaches the page."""
    from monitor.report.data import ReportInputError
    from monitor.report.render import render_report

    at = None if clock is None else datetime.fromtimestamp(clock(), UTC)
    cursor = store.cursor()
    try:
        return render_report(cursor, config=config, generated_at=at)
    except ReportInputError:
        return empty_page
    finally:
        cursor.close()
