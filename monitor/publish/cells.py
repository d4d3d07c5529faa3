"""Cells, windows and events as they leave the service: the API's cells, windows and
events, the fleet view's cells, the exporter's cell series, the audit's ``cells.csv`` /
``cells.json`` and the report of an audit.

A cell, window or event computed from fewer than :data:`~monitor.core.privacy.SMALL_CELL`
records keeps its identity only (:data:`CELL_IDENTITY`, :data:`EVENT_IDENTITY`, the
audit's :data:`~batch_axes.audit_cell.AUDIT_IDENTITY`): its figures are one
:class:`~monitor.publish.shown.Withheld` (the row stays: its absence would say as much,
and a reader needs to know the cell exists but is too small to show). A larger one is
:class:`~monitor.publish.shown.Shown` with its record counts rounded
(:data:`CELL_COUNTS`) and its certified verdict as :func:`certified_value` publishes it.

Each published thing has its typed record here (:class:`PublishedCell`,
:class:`PublishedWindow`, :class:`PublishedEvent`, :class:`PublishedAuditCell`); a
withheld record holds no figure, so no reader can show one by mistake. Their JSON and
CSV rows are :mod:`monitor.publish.encode`'s (``<11`` in place of every withheld figure);
:func:`withhold` and :func:`published_cell` apply the same rule to a JSON row that has
no typed source.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from batch_axes.audit_cell import AUDIT_IDENTITY, audit_row, read_withheld
from monitor.core.events import CellEvent
from monitor.core.numbers import float_or_none
from monitor.core.privacy import reportable, rounded_count
from monitor.core.results import CellEvaluation, CertifiedVerdict
from monitor.publish.encode import (
    JsonObject,
    audit_cell_json,
    cell_json,
    certified_json,
    encoded_row,
    withheld_row,
)
from monitor.publish.shown import SMALL, Published, Shown, Withheld

#: Fields of a cell row that are identity or configuration, not figures computed from
#: records: they stay when the figures are withheld, so a reader sees which cell it is
#: and why it shows no figures (:class:`CellIdentity`).
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

#: Record counts of a cell's certified verdict (CertifiedVerdict.to_dict): published as
#: every count is (rounded, withheld below the rule)
CERTIFIED_COUNTS = ("records", "last_change_records")


#: a tuple, not ``int | float``: the union would be built again at every call
_NUMBER = (int, float)


def _rounded(v: Any) -> Any:
    """A record count as published from a shown row: rounded when it is a finite number;
    anything else (None, NaN, infinity, a boolean) as it is."""
    if isinstance(v, _NUMBER) and v is not True and v is not False and math.isfinite(v):
        return rounded_count(v)
    return v


# --------------------------------------------------------------------------- certified


@dataclass(frozen=True, slots=True)
class PublishedCertified:
    """A cell's certified verdict as it leaves (:class:`CertifiedVerdict`'s fields): its
    record counts rounded (withheld below the small-cell rule; 0, right after a change,
    stays 0) and its evidence (log10 of detector / threshold) to one decimal: how far
    from a certification, not a figure a count can be read from."""

    verdict: str
    records: Published[int]
    evaluable: bool
    last_change: tuple[str, str] | None
    last_change_records: Published[int] | None
    evidence_fail: float | None
    evidence_pass: float | None


def _certified_count(n: int) -> Published[int]:
    return Shown(0) if n == 0 else Shown(rounded_count(n)) if reportable(n) else SMALL


def _evidence(x: float | None) -> float | None:
    return round(x, 1) if isinstance(x, float) and math.isfinite(x) else x


def certified_value(c: CertifiedVerdict) -> PublishedCertified:
    """A cell's certified verdict as it leaves the service.

    >>> p = certified_value(CertifiedVerdict("pass", 4012, True, ("u", "pass"), 7, -3.14159))
    >>> p.records, p.last_change_records.why.name, p.evidence_fail
    (Shown(value=4010), 'SMALL_CELL', -3.1)
    """
    n = c.last_change_records
    return PublishedCertified(
        verdict=c.verdict,
        records=_certified_count(c.records),
        evaluable=c.evaluable,
        last_change=c.last_change,
        last_change_records=None if n is None else _certified_count(n),
        evidence_fail=_evidence(c.evidence_fail),
        evidence_pass=_evidence(c.evidence_pass),
    )


# --------------------------------------------------------------------------- cells


@dataclass(frozen=True, slots=True)
class Identity:
    """Which cell and which rule: what any withheld cell keeps."""

    model_id: str
    metric: str
    attribute: str
    threshold: float
    direction: str
    K: int


@dataclass(frozen=True, slots=True)
class CellIdentity(Identity):
    """A cell of the service: which cell, which evaluation, which rule
    (:data:`CELL_IDENTITY`)."""

    evaluation: int
    evaluated_at: str
    groups_left_out: tuple[str, ...]
    groups_left_out_point: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CellCounts:
    """A shown cell's record counts as they leave: rounded (:data:`CELL_COUNTS`; a count
    that is no finite number stays as it is)."""

    window_n: int
    resample_n: int
    min_denominator: float
    predictions: int | None
    with_outcome: int | None


@dataclass(frozen=True, slots=True)
class ShownCell:
    """What a cell evaluated on 11 records or more shows: the evaluation (its figures
    leave as they are), its record counts rounded and its certified verdict as
    published."""

    evaluation: CellEvaluation
    counts: CellCounts
    certified: PublishedCertified | None


@dataclass(frozen=True, slots=True)
class PublishedCell:
    """A released cell evaluation as it leaves the service (the API's cells and windows,
    the fleet view, the exporter): its identity, and its figures shown or withheld as
    one (a window of fewer than 11 records)."""

    identity: CellIdentity
    figures: Shown[ShownCell] | Withheld
    #: the stored form's columns, in order: a withheld cell's row keeps every one, each
    #: figure withheld (empty for a shown cell, whose row is its evaluation's)
    columns: tuple[str, ...] = ()


def cell_value(cell: CellEvaluation) -> PublishedCell:
    """A released cell evaluation as it leaves the service: withheld when its window held
    fewer than 11 records, else shown with its counts rounded."""
    r = cell.result
    identity = CellIdentity(
        model_id=r.model_id, metric=r.metric, attribute=r.attribute, threshold=r.threshold,
        direction=r.direction, K=r.K, evaluation=cell.evaluation,
        evaluated_at=cell.evaluated_at, groups_left_out=tuple(r.groups_left_out),
        groups_left_out_point=tuple(r.groups_left_out_point),
    )  # fmt: skip
    if not reportable(r.window_n):
        return PublishedCell(identity, SMALL, tuple(cell.to_dict()))
    counts = CellCounts(
        window_n=_rounded(r.window_n), resample_n=_rounded(r.resample_n),
        min_denominator=_rounded(r.min_denominator), predictions=_rounded(cell.predictions),
        with_outcome=_rounded(cell.with_outcome),
    )  # fmt: skip
    certified = None if cell.certified is None else certified_value(cell.certified)
    return PublishedCell(identity, Shown(ShownCell(cell, counts, certified)))


def published_evaluation(cell: CellEvaluation) -> JsonObject:
    """A released cell evaluation's JSON row, as the API and the fleet view serve it
    (:func:`cell_value`, encoded)."""
    return cell_json(cell_value(cell))


@dataclass(frozen=True, slots=True)
class PublishedWindow:
    """One stored evaluation of a cell as the API's windows route serves it: the row's own
    columns (the stream position its window ended at is a figure of its records, withheld
    with the cell's) and the cell as published."""

    evaluation: int
    evaluated_at: str
    window_end_count: Published[int | None]
    seed: int
    cell: PublishedCell


def window_value(
    evaluation: int, evaluated_at: str, window_end_count: int | None, seed: int,
    cell: CellEvaluation,
) -> PublishedWindow:  # fmt: skip
    """A stored window row (its columns and its result) as it leaves the service."""
    published = cell_value(cell)
    end: Published[int | None] = (
        Shown(window_end_count) if isinstance(published.figures, Shown) else SMALL
    )
    return PublishedWindow(evaluation, evaluated_at, end, seed, published)


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class EventFigures:
    """What an event of a window of 11 records or more shows: the event (verdicts or
    tiers, direction, axes) and its sentence."""

    event: CellEvent
    explanation: str


@dataclass(frozen=True, slots=True)
class PublishedEvent:
    """A stored event as the API's events route serves it: its row's identity
    (:data:`EVENT_IDENTITY`), and its verdicts, tiers, axes and sentence shown or
    withheld as one (an evaluation whose window held fewer than 11 records, or whose
    window size is unknown)."""

    id: int
    created_at: str
    kind: str
    model_id: str
    metric: str
    attribute: str
    confirmed: bool
    evaluation: int
    decision_config: str | None
    figures: Shown[EventFigures] | Withheld


def event_value(
    event: CellEvent, *, id: int, created_at: str, decision_config: str | None,
    window_n: int | None, explain: Callable[[CellEvent], str],
) -> PublishedEvent:  # fmt: skip
    """A stored event as it leaves the service; ``explain`` (its sentence) is called only
    for an event that may be shown."""
    figures: Shown[EventFigures] | Withheld = (
        Shown(EventFigures(event, explain(event))) if reportable(window_n) else SMALL
    )
    e = event
    return PublishedEvent(
        id=id, created_at=created_at, kind=e.kind, model_id=e.model_id, metric=e.metric,
        attribute=e.attribute, confirmed=e.confirmed, evaluation=e.evaluation,
        decision_config=decision_config, figures=figures,
    )  # fmt: skip


# --------------------------------------------------------------------------- audit cells


@dataclass(frozen=True, slots=True)
class AuditIdentity(Identity):
    """An audit cell: which cell and which rule (:data:`AUDIT_IDENTITY`)."""

    groups_left_out: tuple[str, ...]
    groups_total: int


@dataclass(frozen=True, slots=True)
class ShownAuditCell:
    """What an audit cell on a cohort of 11 records or more shows: the cell (its figures
    leave as they are) and its record counts rounded to 5 (``cohort_n`` with the API
    cells' counts, so that the cohort size minus the EquiLense group sizes of
    ``mppd.json`` names no withheld group)."""

    cell: CellEvaluation
    cohort_n: int
    resample_n: int
    #: the fewest records a rate of the value rests on, rounded; None: undefined
    min_denominator: float | None

    def read_back(self) -> CellEvaluation:
        """The cell as a reader of ``cells.json`` gets it back
        (:func:`~batch_axes.audit_cell.audit_cell_from_row`): its counts as published."""
        m = self.min_denominator
        r = self.cell.result
        return replace(self.cell, result=replace(
            r, window_n=self.cohort_n, resample_n=self.resample_n,
            min_denominator=math.nan if m is None else float(m),
        ))  # fmt: skip


@dataclass(frozen=True, slots=True)
class PublishedAuditCell:
    """An offline audit's cell as it leaves (cells.csv, cells.json, the intervention
    audit's files, :class:`~monitor.audit.frame.FrameAudit`'s tidy cells and report):
    withheld as a whole when its model's cohort held fewer than 11 records."""

    identity: AuditIdentity
    figures: Shown[ShownAuditCell] | Withheld
    #: a withheld cell's columns, in order (empty for a shown one: see PublishedCell)
    columns: tuple[str, ...] = ()


def _audit_identity(c: CellEvaluation) -> AuditIdentity:
    r = c.result
    return AuditIdentity(
        r.model_id, r.metric, r.attribute, r.threshold, r.direction, r.K,
        tuple(r.groups_left_out), r.groups_total,
    )  # fmt: skip


def audit_cell_value(cell: CellEvaluation) -> PublishedAuditCell:
    """An audit cell as it leaves: withheld below the small-cell rule, else its counts
    rounded to 5."""
    if cell.withheld:
        return PublishedAuditCell(_audit_identity(cell), SMALL, tuple(audit_row(cell)))
    r = cell.result
    shown = ShownAuditCell(
        cell, rounded_count(r.window_n), _rounded(r.resample_n),
        _rounded(float_or_none(r.min_denominator)),
    )  # fmt: skip
    return PublishedAuditCell(_audit_identity(cell), Shown(shown))


def audit_cell_read(cell: CellEvaluation) -> PublishedAuditCell:
    """A cell read back from ``cells.json``
    (:func:`~batch_axes.audit_cell.audit_cell_from_row`: its counts as published, a
    withheld row read as identity only, with no records) as the published cell it was."""
    if read_withheld(cell):
        return PublishedAuditCell(_audit_identity(cell), SMALL, tuple(audit_row(cell)))
    r = cell.result
    shown = ShownAuditCell(cell, r.window_n, r.resample_n, float_or_none(r.min_denominator))
    return PublishedAuditCell(_audit_identity(cell), Shown(shown))


def published_audit_cell(cell: CellEvaluation) -> JsonObject:
    """The audit's cells.csv / cells.json row (:func:`~batch_axes.audit_cell.audit_row`
    under the rule: :func:`audit_cell_value`, encoded)."""
    return audit_cell_json(audit_cell_value(cell))


# --------------------------------------------------------------------------- JSON rows


def withhold(
    row: JsonObject, n: int | float | None, keep: frozenset[str] = CELL_IDENTITY
) -> JsonObject:
    """A JSON row with no typed source, unchanged when computed from ``n`` >= SMALL_CELL
    records; else every field not in ``keep`` withheld.

    >>> withhold({"metric": "DI", "value": 0.5, "window_n": 4}, 4)
    {'metric': 'DI', 'value': '<11', 'window_n': '<11'}
    """
    if reportable(n):
        return row
    return withheld_row(row, {k: v for k, v in row.items() if k in keep})


def published_cell(
    row: JsonObject, n: int | float | None, keep: frozenset[str] = CELL_IDENTITY
) -> JsonObject:
    """A JSON cell row with no typed source as it leaves the service: withheld below the
    small-cell rule (:func:`withhold`), else with its record counts rounded and its
    certified verdict published, as :func:`cell_value` publishes a typed one.

    >>> published_cell({"metric": "DI", "value": 0.9, "window_n": 87}, 87)
    {'metric': 'DI', 'value': 0.9, 'window_n': 85}
    """
    if not reportable(n):
        return withhold(row, n, keep)
    certified = CertifiedVerdict.from_dict(row.get("certified"))
    return encoded_row(
        row,
        {k: _rounded(row[k]) for k in CELL_COUNTS if k in row},
        None if certified is None else {"certified": certified_json(certified_value(certified))},
    )


def published_windows(rows: Iterable[JsonObject]) -> list[JsonObject]:
    """JSON window rows with no typed source (:func:`window_value` publishes a stored
    one): each under :func:`published_cell` of its own window size, the seed kept."""
    return [published_cell(r, r.get("window_n"), WINDOW_IDENTITY) for r in rows]


def published_event_rows(
    rows: Iterable[JsonObject], sizes: Mapping[tuple[str, int], int | None]
) -> list[JsonObject]:
    """JSON event rows with no typed source (:func:`event_value` publishes a stored
    event): an event of an evaluation whose window held fewer than 11 records
    (``sizes``: (model, evaluation) -> window records) withheld but its identity."""
    return [withhold(r, sizes.get((r["model_id"], r["evaluation"])), EVENT_IDENTITY) for r in rows]


__all__ = [
    "AUDIT_IDENTITY", "CELL_COUNTS", "CELL_IDENTITY", "CERTIFIED_COUNTS", "EVENT_IDENTITY",
    "WINDOW_IDENTITY", "AuditIdentity", "CellCounts", "CellIdentity", "EventFigures",
    "Identity", "PublishedAuditCell", "PublishedCell", "PublishedCertified",
    "PublishedEvent", "PublishedWindow", "ShownAuditCell", "ShownCell", "audit_cell_read",
    "audit_cell_value", "cell_value", "certified_value", "event_value",
    "published_audit_cell", "published_cell", "published_evaluation", "published_event_rows",
    "published_windows", "window_value", "withhold",
]  # fmt: skip
