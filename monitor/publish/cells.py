"""Cell and event rows as they leave the service: the API's cells, windows and events, the
fleet view's cells, the audit's ``cells.csv`` / ``cells.json``.

A row computed from fewer than :data:`~monitor.core.privacy.SMALL_CELL` records keeps its
identity only (:data:`CELL_IDENTITY`, :data:`EVENT_IDENTITY`, the audit's
:data:`~batch_axes.audit_cell.AUDIT_IDENTITY`) and shows ``<11`` for every other field
(the row stays: its absence would say as much, and a reader needs to know the cell exists
but is too small to show); a larger one has its record counts rounded
(:data:`CELL_COUNTS`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from batch_axes.audit_cell import AUDIT_IDENTITY, audit_row
from monitor.core.privacy import SMALL_CELL_LABEL, reportable, rounded_count
from monitor.core.results import CellEvaluation

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

#: A stored window row's identity: a cell's, with the evaluation's seed.
WINDOW_IDENTITY = frozenset({"evaluation", "evaluated_at", "seed"}) | CELL_IDENTITY

#: Record counts among a cell's fields: published rounded (the rest are computed figures);
#: ``predictions`` and ``with_outcome``: a window of predictions and those with an outcome.
CELL_COUNTS = ("window_n", "resample_n", "min_denominator", "predictions", "with_outcome")


def withhold(
    row: dict[str, Any], n: int | float | None, keep: frozenset[str] = CELL_IDENTITY
) -> dict[str, Any]:
    """``row`` unchanged when computed from ``n`` >= SMALL_CELL records; else every field
    not in ``keep`` replaced by SMALL_CELL_LABEL.

    >>> withhold({"metric": "DI", "value": 0.5, "window_n": 4}, 4)
    {'metric': 'DI', 'value': '<11', 'window_n': '<11'}
    """
    if reportable(n):
        return row
    return {k: (v if k in keep else SMALL_CELL_LABEL) for k, v in row.items()}


def published_cell(
    row: dict[str, Any], n: int | float | None, keep: frozenset[str] = CELL_IDENTITY
) -> dict[str, Any]:
    """A cell row as it leaves the service: withheld below the small-cell rule
    (:func:`withhold`), else with its record counts rounded
    (:func:`~monitor.core.privacy.rounded_count`).

    >>> published_cell({"metric": "DI", "value": 0.9, "window_n": 87}, 87)
    {'metric': 'DI', 'value': 0.9, 'window_n': 85}
    """
    out = withhold(row, n, keep)
    if reportable(n):
        for k in CELL_COUNTS:
            v = out.get(k)
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                out[k] = rounded_count(v)
        if isinstance(out.get("certified"), dict):
            out["certified"] = published_certified(out["certified"])
    return out


#: Record counts of a cell's certified verdict (CertifiedVerdict.to_dict): published as
#: every count is (rounded, ``<11`` below the rule)
CERTIFIED_COUNTS = ("records", "last_change_records")


def published_certified(row: dict[str, Any]) -> dict[str, Any]:
    """A cell's certified verdict as it leaves the service: its record counts rounded
    (``<11`` below the small-cell rule; 0, right after a change, stays 0) and its evidence (log10 of detector / threshold)
    to one decimal: how far from a certification, not a figure a count can be read from.

    >>> published_certified({"verdict": "pass", "records": 4012, "last_change_records": 7,
    ...                      "evidence_fail": -3.14159, "evidence_pass": None})
    {'verdict': 'pass', 'records': 4010, 'last_change_records': '<11', 'evidence_fail': -3.1, 'evidence_pass': None}
    """  # noqa: E501
    out = dict(row)
    for k in CERTIFIED_COUNTS:
        v = out.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            out[k] = v if v == 0 else rounded_count(v) if reportable(v) else SMALL_CELL_LABEL
    for k in ("evidence_fail", "evidence_pass"):
        v = out.get(k)
        if isinstance(v, float) and math.isfinite(v):
            out[k] = round(v, 1)
    return out


def published_evaluation(cell: CellEvaluation) -> dict[str, Any]:
    """A released cell evaluation as the API and the fleet view serve it: its stored form
    (:meth:`CellEvaluation.to_dict`) under :func:`published_cell` of its window size."""
    return published_cell(cell.to_dict(), cell.result.window_n)


def published_windows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A cell's stored window rows (its released evaluations) as the API serves them:
    each under :func:`published_cell` of its own window size, the seed kept."""
    return [published_cell(r, r.get("window_n"), WINDOW_IDENTITY) for r in rows]


def published_event_rows(
    rows: Iterable[dict[str, Any]], sizes: Mapping[tuple[str, int], int | None]
) -> list[dict[str, Any]]:
    """Event rows as the API serves them: an event of an evaluation whose window held
    fewer than 11 records (``sizes``: (model, evaluation) -> window records) shows
    ``<11`` in place of its verdicts, tiers, axes and sentence."""
    return [withhold(r, sizes.get((r["model_id"], r["evaluation"])), EVENT_IDENTITY) for r in rows]


def published_audit_cell(cell: CellEvaluation) -> dict[str, Any]:
    """An audit's cell as its cells.csv / cells.json row (:func:`audit_row`) is written:
    counts rounded to 5 (``cohort_n`` and the API cells' counts, ``resample_n`` and
    ``min_denominator``: :func:`published_cell`), so the cohort size minus the EquiLense
    group sizes of ``mppd.json`` names no withheld group; a cohort of fewer than 11
    records keeps its identity only."""
    n = cell.result.window_n
    out = published_cell(audit_row(cell), n, AUDIT_IDENTITY)
    if not cell.withheld:
        out["cohort_n"] = rounded_count(n)
    return out
