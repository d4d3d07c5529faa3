"""Events as they are stored and published.

An event is not delayed to a release (a confirmed flip is an alert, raised when it
happens), so the figures of its window could differ from the cell's last release by fewer
than 11 records: it carries verdicts, tiers, VFR, N* and kappa, never the window's figures
(:data:`EVENT_FIGURES`); a reader takes the value from the cell's released evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from monitor.core.events import CellEvent, EventAxes

#: The columns of a stored event's row, in the events table's order.
EVENT_COLUMNS = (
    "id", "created_at", "kind", "model_id", "metric", "attribute", "old", "new", "confirmed",
    "direction", "evaluation", "axes", "decision_config", "axes_before",
)  # fmt: skip

#: Axes of an event that are figures of the window (the rest: verdicts, tiers, VFR, N*
#: and kappa, are published exact and current, as docs/privacy.md says).
EVENT_FIGURES = frozenset({"value", "sigma"})


def published_events(events: Sequence[CellEvent]) -> list[CellEvent]:
    """Events as they are stored and published: verdicts, tiers, VFR, N* and kappa, but not
    the window's figures (value, sigma). An event is not delayed to a release (a confirmed
    flip is an alert), so its figures could differ from the cell's last release by fewer
    than 11 records; the value is read from the cell's released evaluation instead."""

    def strip(axes: EventAxes) -> EventAxes:
        out = EventAxes(**axes)
        out.pop("value", None)  # EVENT_FIGURES
        out.pop("sigma", None)
        return out

    return [replace(e, axes=strip(e.axes), axes_before=strip(e.axes_before)) for e in events]


def event_row(
    event: CellEvent, *, id: int, created_at: str, decision_config: str | None
) -> dict[str, Any]:
    """A stored event's row (:data:`EVENT_COLUMNS`), as the API's events route serves an
    event of a window of 11 records or more (:func:`monitor.publish.cells.event_value`):
    its row id, when it was written and under which decision rule, and the event's
    fields, in the events table's column order."""
    e = event
    return {
        "id": id, "created_at": created_at, "kind": e.kind, "model_id": e.model_id,
        "metric": e.metric, "attribute": e.attribute, "old": e.old, "new": e.new,
        "confirmed": e.confirmed, "direction": e.direction, "evaluation": e.evaluation,
        "axes": e.axes, "decision_config": decision_config, "axes_before": e.axes_before,
    }  # fmt: skip
