"""The small-cell rule, in one place.

No figure computed from fewer than :data:`SMALL_CELL` records of a group or a model
leaves the service (metrics, API, reports, audit files); where such a figure would
stand, :data:`SMALL_CELL_LABEL` does. 11 is the usual disclosure threshold for
health statistics (counts of 1-10 are suppressed).
"""

from __future__ import annotations

from monitor.config import SMALL_CELL_RECORDS

#: Fewer records than this and a figure is withheld.
SMALL_CELL = SMALL_CELL_RECORDS

#: What stands in place of a withheld figure.
SMALL_CELL_LABEL = f"<{SMALL_CELL}"


def reportable(n: int | float | None) -> bool:
    """True when a figure computed from ``n`` records may leave the service.

    >>> reportable(10), reportable(11), reportable(None)
    (False, True, False)
    """
    return n is not None and n >= SMALL_CELL


#: Fields of a cell row that are identity or configuration, not figures computed from
#: records: they stay when the figures are withheld, so a reader sees which cell it is
#: and why it shows no figures.
CELL_IDENTITY = frozenset(
    {
        "model_id", "metric", "attribute", "threshold", "direction", "K", "evaluation",
        "evaluated_at", "groups_left_out", "groups_left_out_point",
    }
)  # fmt: skip

#: Fields of an event row that are identity: the rest (old and new verdict or tier, its
#: direction and the axes) was computed from the window's records.
EVENT_IDENTITY = frozenset(
    {"id", "created_at", "kind", "model_id", "metric", "attribute", "confirmed", "evaluation",
     "decision_config"}
)  # fmt: skip


def withhold(row: dict, n: int | float | None, keep: frozenset[str] = CELL_IDENTITY) -> dict:
    """``row`` unchanged when computed from ``n`` >= SMALL_CELL records; else every field
    not in ``keep`` replaced by SMALL_CELL_LABEL (the row stays: its absence would say
    as much, and a reader needs to know the cell exists but is too small to show).

    >>> withhold({"metric": "DI", "value": 0.5, "window_n": 4}, 4)
    {'metric': 'DI', 'value': '<11', 'window_n': '<11'}
    """
    if reportable(n):
        return row
    return {k: (v if k in keep else SMALL_CELL_LABEL) for k, v in row.items()}
