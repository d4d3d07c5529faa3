"""The one encoder of published values into what the outputs write: the JSON of the API's
bodies, ``cells.json``, ``mppd.json`` and the intervention audit's files, and the rows of
``cells.csv``.

Publication (the other modules of :mod:`monitor.publish`) returns typed values: a figure
is :class:`~monitor.publish.shown.Shown` or :class:`~monitor.publish.shown.Withheld`,
inside one typed record per published thing. Only here does a withheld figure become
text: :data:`WITHHELD_TEXT` (``<11``) in its place, or null where a file has always
written null for one (an EquiLense group's value); a withheld record keeps its identity
columns and shows the text in every other. The Prometheus exporter writes no text for a
withheld figure: it leaves the series out (:mod:`monitor.service.exporter`). The encoders
change no figure: rounding and withholding happened in publication, so the JSON of a
record is its stored form (``to_dict``, the same columns in the same order) with the
published values in place.

>>> from monitor.publish.shown import SECONDARY, SMALL
>>> encoded(Shown(85)), encoded(SMALL), encoded(SECONDARY, withheld=None)
(85, '<11', None)
>>> withheld_row(["model_id", "value", "window_n"], {"model_id": "m"})
{'model_id': 'm', 'value': '<11', 'window_n': '<11'}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from batch_axes.audit_cell import audit_row
from monitor.core.privacy import SMALL_CELL_LABEL
from monitor.publish.shown import Published, Shown

if TYPE_CHECKING:  # the records' modules encode through here: no import cycle at run time
    from monitor.publish.axes import (
        PublishedAxis2,
        PublishedAxis3,
        PublishedScheduled,
        ShownAxisRow,
    )
    from monitor.publish.cells import (
        AuditIdentity,
        CellIdentity,
        PublishedAuditCell,
        PublishedCell,
        PublishedCertified,
        PublishedEvent,
        PublishedWindow,
    )
    from monitor.publish.equilense import (
        PublishedEquiLense,
        PublishedGroupMetrics,
        PublishedModelMPPD,
    )
    from monitor.publish.shown import Withheld

K = TypeVar("K")
T = TypeVar("T")
W = TypeVar("W")

#: What a JSON or CSV output writes in place of a withheld figure.
WITHHELD_TEXT = SMALL_CELL_LABEL

#: A JSON object as an output writes it (a row of the API, of ``cells.json``, of
#: ``mppd.json``): the one untyped shape of a published value, named so that every
#: function returning one is visibly a JSON edge.
JsonObject = dict[str, Any]


@overload
def encoded(p: Published[T]) -> T | str: ...
@overload
def encoded(p: Published[T], withheld: W) -> T | W: ...
def encoded(p: Published[T], withheld: object = WITHHELD_TEXT) -> object:
    """A published value as written: its figure, or ``withheld`` (:data:`WITHHELD_TEXT`)
    in place of it."""
    return p.value if isinstance(p, Shown) else withheld


def encoded_values(values: Mapping[K, Published[T]]) -> dict[K, T | str]:
    """:func:`encoded` of every value of a mapping (a family of group sizes, rates)."""
    return {k: v.value if isinstance(v, Shown) else WITHHELD_TEXT for k, v in values.items()}


def withheld_row(columns: Iterable[str], identity: Mapping[str, Any]) -> JsonObject:
    """A withheld record's row: every column, the identity's as they are, each other one
    :data:`WITHHELD_TEXT`."""
    return {c: identity.get(c, WITHHELD_TEXT) for c in columns}


def encoded_row(row: Mapping[str, Any], *published: Mapping[str, Any] | None) -> JsonObject:
    """A shown record's row: its stored form ``row`` with the published values of some of
    its columns (``published``: rounded counts, a published verdict) in their places."""
    out = dict(row)
    for values in published:
        if values:
            out.update(values)
    return out


def csv_row(row: Mapping[str, Any], columns: Sequence[str]) -> JsonObject:
    """A JSON row as a CSV row of ``columns``: an empty field for null or a column the
    row does not have (an audit cell without a pooled estimate, beside pooled ones); a
    withheld figure is already :data:`WITHHELD_TEXT`."""
    return {k: "" if row.get(k) is None else row[k] for k in columns}


# --------------------------------------------------------------------------- cells


def certified_json(c: PublishedCertified) -> JsonObject:
    """A published certified verdict as ``CertifiedVerdict.to_dict`` lays it out."""
    n = c.last_change_records
    return {
        "verdict": c.verdict, "records": encoded(c.records), "evaluable": c.evaluable,
        "last_change": None if c.last_change is None else list(c.last_change),
        "last_change_records": None if n is None else encoded(n),
        "evidence_fail": c.evidence_fail, "evidence_pass": c.evidence_pass,
    }  # fmt: skip


def _cell_identity(i: CellIdentity) -> JsonObject:
    return {
        "model_id": i.model_id, "metric": i.metric, "attribute": i.attribute,
        "threshold": i.threshold, "direction": i.direction, "K": i.K,
        "evaluation": i.evaluation, "evaluated_at": i.evaluated_at,
        "groups_left_out": list(i.groups_left_out),
        "groups_left_out_point": list(i.groups_left_out_point),
    }  # fmt: skip


def cell_json(p: PublishedCell) -> JsonObject:
    """A published cell's row: ``CellEvaluation.to_dict`` with its counts rounded and its
    certified verdict published, or its identity only."""
    if not isinstance(p.figures, Shown):
        return withheld_row(p.columns, _cell_identity(p.identity))
    shown = p.figures.value
    c = shown.counts
    counts = {
        "window_n": c.window_n, "resample_n": c.resample_n,
        "min_denominator": c.min_denominator, "predictions": c.predictions,
        "with_outcome": c.with_outcome,
    }  # fmt: skip
    certified = None if shown.certified is None else certified_json(shown.certified)
    return encoded_row(shown.evaluation.to_dict(), counts, {"certified": certified})


def window_json(p: PublishedWindow) -> JsonObject:
    """A published window row: the row's own columns, then its cell's (whose
    ``evaluation`` and ``evaluated_at`` are the ones shown)."""
    return {
        "evaluation": p.evaluation,
        "evaluated_at": p.evaluated_at,
        "window_end_count": encoded(p.window_end_count),
        "seed": p.seed,
        **cell_json(p.cell),
    }


def event_json(p: PublishedEvent) -> JsonObject:
    """A published event's row: the events table's columns and its sentence."""
    from monitor.publish.events import EVENT_COLUMNS, event_row

    if isinstance(p.figures, Shown):
        shown = p.figures.value
        row = event_row(
            shown.event, id=p.id, created_at=p.created_at, decision_config=p.decision_config
        )
        return {**row, "explanation": shown.explanation}
    identity = {
        "id": p.id, "created_at": p.created_at, "kind": p.kind, "model_id": p.model_id,
        "metric": p.metric, "attribute": p.attribute, "confirmed": p.confirmed,
        "evaluation": p.evaluation, "decision_config": p.decision_config,
    }  # fmt: skip
    return withheld_row((*EVENT_COLUMNS, "explanation"), identity)


def _audit_identity(i: AuditIdentity) -> JsonObject:
    return {
        "model_id": i.model_id, "metric": i.metric, "attribute": i.attribute,
        "threshold": i.threshold, "direction": i.direction, "K": i.K,
        "groups_left_out": " ".join(i.groups_left_out), "groups_total": i.groups_total,
    }  # fmt: skip


def audit_cell_json(p: PublishedAuditCell) -> JsonObject:
    """A published audit cell's ``cells.csv`` / ``cells.json`` row:
    :func:`~batch_axes.audit_cell.audit_row` with its counts rounded, or its identity only."""
    if not isinstance(p.figures, Shown):
        return withheld_row(p.columns, _audit_identity(p.identity))
    s = p.figures.value
    counts = {
        "cohort_n": s.cohort_n, "resample_n": s.resample_n, "min_denominator": s.min_denominator
    }
    return encoded_row(audit_row(s.cell), counts)


# --------------------------------------------------------------------------- scheduled axes


def axis2_json(p: PublishedAxis2) -> JsonObject:
    """An Axis 2 cell as ``Axis2Cell.to_dict`` lays it out, its cohort size published."""
    return encoded_row(p.cell.to_dict(), {"cohort_n": encoded(p.cohort_n)})


def axis3_json(p: PublishedAxis3) -> JsonObject:
    """An Axis 3 result as ``Axis3Result.to_dict`` lays it out, its counts and note as
    published and the verdict and value of every withheld fold withheld."""
    out = p.result.to_dict()
    hidden = {i for i, n in enumerate(p.fold_sizes) if not isinstance(n, Shown)}
    out["fold_sizes"] = [encoded(n) for n in p.fold_sizes]
    out["n_records"] = encoded(p.n_records)
    out["n_excluded_missing_hospital"] = encoded(p.n_excluded_missing_hospital)
    out["note"] = p.note
    for cell in out["cells"]:
        for key in ("fold_verdicts", "fold_values"):
            cell[key] = [WITHHELD_TEXT if i in hidden else v for i, v in enumerate(cell[key])]
    return out


def group_metrics_json(p: PublishedGroupMetrics) -> JsonObject:
    """An EquiLense group metric as ``GroupMetricResult.to_dict`` lays it out: a withheld
    group's value null (as the files have always written it), its size ``<11``."""
    return {
        "model_id": p.model_id, "attribute": p.attribute, "metric": p.metric,
        "by_group": {g: encoded(v, withheld=None) for g, v in p.by_group.items()},
        "group_n": encoded_values(p.group_n), "max_abs": p.max_abs, "mean_abs": p.mean_abs,
    }  # fmt: skip


def _model_json(m: PublishedModelMPPD) -> JsonObject:
    gap = m.individual_fairness_gap
    return {
        "records": encoded(m.records),
        "individual_fairness_gap": None if gap is None else gap.to_dict(),
        "mppd": {name: entry.to_dict() for name, entry in m.mppd.items()},
        **({} if m.sampling is None else {"sampling": m.sampling.to_dict()}),
    }


def equilense_json(p: PublishedEquiLense) -> JsonObject:
    """An EquiLense result as ``EquiLenseResult.to_dict`` lays it out (``mppd.json``, the
    API's ``equilense`` axis), every figure as published."""
    out: JsonObject = {
        "threshold": p.threshold,
        "scaling": p.scaling,
        "features": list(p.features),
        "group_metrics": [group_metrics_json(r) for r in p.group_metrics],
        "models": {m: _model_json(entry) for m, entry in p.models.items()},
    }
    if p.mppd_note is not None:
        out["mppd_note"] = p.mppd_note
    return out


def scheduled_json(p: PublishedScheduled) -> Any:
    """Any published scheduled result as its axis lays it out."""
    from monitor.publish.axes import PublishedAxis3
    from monitor.publish.equilense import PublishedEquiLense

    if isinstance(p, PublishedAxis3):
        return axis3_json(p)
    if isinstance(p, PublishedEquiLense):
        return equilense_json(p)
    return [axis2_json(c) for c in p]


def axis_row_json(p: Shown[ShownAxisRow] | Withheld) -> tuple[int | str, Any]:
    """A stored scheduled result as the API's axes routes write it: (cohort size,
    payload), :data:`WITHHELD_TEXT` and no payload when withheld."""
    if not isinstance(p, Shown):
        return WITHHELD_TEXT, None
    return p.value.cohort_n, scheduled_json(p.value.result)
