"""API answers read from a results file, shared by the service and the fleet view.

Both serve the same routes from a DuckDB file with the same tables (the service's own
file; the view's file filled from the results topic), under the same small-cell rule:
an answer computed from fewer than 11 records shows ``<11`` in place of its figures.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

from monitor.config import MonitorConfig
from monitor.core.events import CellEvent
from monitor.core.explain import Cutoffs, explain_event
from monitor.publish.axes import published_axis_row
from monitor.publish.cells import published_event_rows, published_windows
from monitor.store import Store, queries
from monitor.store.codec import axis_result


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
    window records shows ``<11`` in place of its verdicts, tiers, axes and sentence."""
    cursor = store.cursor()
    try:
        events = queries.events_since(cursor, limit, since_id)
        sizes = queries.evaluation_window_sizes(
            cursor, ((s.event.model_id, s.event.evaluation) for s in events)
        )
    finally:
        cursor.close()
    explain = event_explainer(store.config)
    rows = [{**s.to_dict(), "explanation": explain(s.event)} for s in events]
    return published_event_rows(rows, sizes)


def stored_windows(
    store: Store, model: str, metric: str, attribute: str, limit: int, before: int | None
) -> list[dict]:
    """A cell's released evaluations, newest first; small windows withheld, counts
    rounded (monitor.publish.cells.published_windows)."""
    cursor = store.cursor()
    try:
        rows = queries.window_history(cursor, model, metric, attribute, limit, before)
    finally:
        cursor.close()
    return published_windows(rows)


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
    for row in rows:
        row["cohort_n"], row["payload"] = published_axis_row(
            row["cohort_n"], partial(axis_result, axis, row["payload"])
        )
    return rows


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
