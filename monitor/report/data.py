"""What the report shows, read into typed objects: from a DuckDB file or an audit directory.

The service owns its DuckDB file (one writer process), so the report reads either
through a cursor the service hands over or through a connection opened
``read_only``, with the read functions of :mod:`monitor.store.queries` (those the
service's API uses), and parses what they return here. The offline audit leaves
``cells.json`` and ``mppd.json``; the same objects are filled with what those hold (no
history, no events).

The small-cell rule is applied here, once, for every figure the page can show: a
cell evaluated on fewer than :data:`SMALL_CELL` records, an MPPD entry with fewer
pairs and a volume count below it are turned into ``None`` with ``suppressed``
set, so no later step can draw them by mistake.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from batch_axes.audit_cell import AuditCell
from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result
from batch_axes.equilense import AttributeMPPD, EquiLenseResult
from monitor import __version__
from monitor.config import MonitorConfig
from monitor.core.events import CellEvent
from monitor.core.privacy import SMALL_CELL
from monitor.store import queries
from monitor.stream.axis_payloads import axis_results

#: Points per cell kept for the time-series figures (event evaluations are always kept).
MAX_POINTS = 400
#: Records per model read for the rolling AUROC (the latest ones).
AUROC_MAX_RECORDS = 200_000


class ReportInputError(ValueError):
    """The input cannot be reported on; the message names the file or field."""


# --------------------------------------------------------------------------- typed rows


@dataclass(frozen=True)
class CellPoint:
    """One cell (model, metric, attribute) at one evaluation: the Axis 1 result and its tier."""

    model_id: str
    metric: str
    attribute: str
    evaluation: int
    at: datetime | None  # event time of the window's last record (else evaluation time)
    window_n: int
    threshold: float
    direction: str
    value: float | None
    vfr: float | None
    ci_low: float | None
    ci_high: float | None
    dominant_verdict: str | None
    point_verdict: str | None
    tier: str
    confirmed_tier: str | None = None
    confirmed_verdict: str | None = None
    n_star: float | None = None  # math.inf when not reached; None when not computed
    kappa: float | None = None
    failed_axes: tuple[str, ...] = ()
    pending_axes: tuple[str, ...] = ()
    partial: bool = False
    n_pass: int | None = None
    K: int | None = None
    suppressed: bool = False  # window_n < SMALL_CELL: nothing numeric may be shown

    @property
    def key(self) -> tuple[str, str]:
        return (self.metric, self.attribute)


@dataclass(frozen=True, kw_only=True)
class EventRow(CellEvent):
    """A stored verdict flip or tier change: the event as the service recorded it (with its
    axes, which :func:`monitor.core.explain.explain_event` words), its row id and time."""

    id: int
    at: datetime | None


@dataclass(frozen=True)
class MetricKappa:
    """Axis 3 of one metric as the page shows it: Fleiss' kappa over hospital folds (None:
    withheld or undefined), and the folds that pass per attribute."""

    metric: str
    kappa: float | None
    band: str | None
    degenerate: bool
    fails: bool
    #: attribute -> (folds that pass, folds with a defined verdict)
    pass_folds: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Axis3Summary:
    applicable: bool
    reason: str
    n_folds: int
    n_hospitals: int
    kappa_cutoff: float
    metrics: tuple[MetricKappa, ...]


@dataclass(frozen=True)
class ReferenceBar:
    """Reference-based MPPD of one group; mean/pairs None when withheld (<11 pairs)."""

    group: str
    mean: float | None
    pairs: int | None
    low_support: bool
    gap: float | None
    suppressed: bool


@dataclass(frozen=True)
class MPPDAttribute:
    """MPPD of one attribute: reference bars and the pairwise matrix (anchor x matched)."""

    attribute: str
    reference: str | None
    bars: tuple[ReferenceBar, ...]
    groups: tuple[str, ...]
    means: tuple[tuple[float | None, ...], ...]
    pairs: tuple[tuple[int | None, ...], ...]  # None: fewer than SMALL_CELL pairs
    low_support: tuple[tuple[bool, ...], ...]


@dataclass(frozen=True)
class VolumePoint:
    """Records of one model in one calendar month (None: fewer than SMALL_CELL)."""

    month: str
    records: int | None


@dataclass(frozen=True)
class AurocPoint:
    records: int  # stream position at the block's end
    auroc: float


@dataclass(frozen=True)
class JobSummary:
    job: str
    success: int
    failed: int
    last_state: str
    last_at: datetime | None


@dataclass
class ModelReport:
    """Everything the page shows about one model."""

    model_id: str
    cells: list[CellPoint]  # latest per cell, in config order
    history: dict[tuple[str, str], list[CellPoint]] = field(default_factory=dict)
    events: list[EventRow] = field(default_factory=list)
    raw_events: int = 0  # unconfirmed changes in the period (debounced)
    #: event id -> the cell at the event (None when its history has no such evaluation)
    event_context: dict[int, CellPoint | None] = field(default_factory=dict)
    n_star: list[Axis2Cell] = field(default_factory=list)  # Axis 2's cells, with their curves
    axis3: Axis3Summary | None = None
    mppd: list[MPPDAttribute] = field(default_factory=list)
    mppd_note: str = ""
    records: int | None = None
    evaluations: int | None = None
    volume: list[VolumePoint] = field(default_factory=list)
    auroc: list[AurocPoint] = field(default_factory=list)

    def cell(self, metric: str, attribute: str) -> CellPoint | None:
        for c in self.cells:
            if c.metric == metric and c.attribute == attribute:
                return c
        return None


@dataclass
class ReportData:
    """The whole page's content, before any drawing."""

    source: str  # "database" | "audit"
    source_name: str
    generated_at: datetime
    version: str
    config_hash: str
    config_hash_kind: str  # "configuration" | "thresholds"
    period: tuple[datetime, datetime] | None
    models: list[ModelReport]
    metrics: list[str]
    attributes: list[str]
    group_labels: dict[str, dict[str, str]]
    tau: float
    cv_cutoff: float
    n_field: int
    kappa_cutoff: float
    confirm_windows: int
    dead_letters: int | None = None
    jobs: list[JobSummary] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def model(self, model_id: str) -> ModelReport:
        for m in self.models:
            if m.model_id == model_id:
                return m
        raise KeyError(model_id)


# --------------------------------------------------------------------------- parsing helpers


def _num(x: Any) -> float | None:
    """A JSON number as float; None for null/NaN; math.inf for "inf"."""
    if x is None:
        return None
    if isinstance(x, str):
        if x in ("inf", "Infinity"):
            return math.inf
        try:
            x = float(x)
        except ValueError:
            return None
    x = float(x)
    return None if math.isnan(x) else x


def _int(x: Any) -> int | None:
    """A count, or None when it is withheld ("<11") or missing."""
    if x is None or isinstance(x, str):
        return None
    return int(x)


def cell_from_result(r: Mapping[str, Any], at: datetime | None = None) -> CellPoint:
    """A stored window result (``CellEvaluation.to_dict``, or the fields of it the history
    query picks) as a CellPoint, small-cell safe."""
    window_n = int(r.get("window_n") or 0)
    small = window_n < SMALL_CELL

    def shown(x: Any) -> float | None:
        return None if small else _num(x)

    return CellPoint(
        model_id=str(r["model_id"]),
        metric=str(r["metric"]),
        attribute=str(r["attribute"]),
        evaluation=int(r.get("evaluation") or 0),
        at=at,
        window_n=window_n,
        threshold=float(r["threshold"]),
        direction=str(r["direction"]),
        value=shown(r.get("value")),
        vfr=shown(r.get("vfr")),
        ci_low=shown(r.get("ci_low")),
        ci_high=shown(r.get("ci_high")),
        dominant_verdict=None if small else r.get("dominant_verdict"),
        point_verdict=None if small else r.get("point_verdict"),
        tier=str(r.get("tier") or "Pending"),
        confirmed_tier=r.get("confirmed_tier"),
        confirmed_verdict=None if small else r.get("confirmed_verdict"),
        n_star=shown(r.get("n_star")),
        kappa=shown(r.get("kappa")),
        failed_axes=tuple(r.get("failed_axes") or ()),
        pending_axes=tuple(r.get("pending_axes") or ()),
        partial=bool(r.get("partial")),
        n_pass=None if small else _int(r.get("n_pass")),
        K=_int(r.get("K")),
        suppressed=small,
    )


def cell_from_audit(c: AuditCell) -> CellPoint:
    """An offline audit's cell (a cells.json row read with ``AuditCell.from_dict``) as a
    CellPoint; a withheld cell keeps its identity only."""
    small = c.withheld

    def shown(x: float | None) -> float | None:
        return None if small or x is None or math.isnan(x) else x

    return CellPoint(
        model_id=c.model_id,
        metric=c.metric,
        attribute=c.attribute,
        evaluation=0,
        at=None,
        window_n=c.cohort_n or 0,
        threshold=c.threshold,
        direction=c.direction,
        value=shown(c.value),
        vfr=shown(c.vfr),
        ci_low=shown(c.ci_low),
        ci_high=shown(c.ci_high),
        dominant_verdict=None if small else c.dominant_verdict,
        point_verdict=None if small else c.point_verdict,
        tier="Pending" if small else c.tier.tier.value,
        n_star=shown(c.n_star),
        kappa=shown(c.kappa),
        failed_axes=c.tier.failed_axes,
        pending_axes=c.tier.pending_axes,
        partial=c.tier.partial,
        n_pass=None if small else c.n_pass,
        K=c.K,
        suppressed=small,
    )


def _ts(x: Any) -> datetime | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    t = pd.Timestamp(x)
    if pd.isna(t):
        return None
    if t.tzinfo is None:
        t = t.tz_localize("UTC")
    return t.to_pydatetime()


def axis3_summary(result: Axis3Result) -> Axis3Summary:
    """Axis 3's result as the page shows it: kappa per metric, folds that pass per cell."""
    folds: dict[str, dict[str, tuple[int, int]]] = {}
    for c in result.cells:
        defined = c.n_folds - c.n_undefined_folds
        folds.setdefault(c.metric, {})[c.attribute] = (c.n_pass_folds, defined)
    metrics = tuple(
        MetricKappa(
            metric=m.metric,
            kappa=None if math.isnan(m.kappa) else m.kappa,
            band=m.band,
            degenerate=m.degenerate,
            fails=m.fails_axis3,
            pass_folds=folds.get(m.metric, {}),
        )
        for m in result.metrics
    )
    return Axis3Summary(
        applicable=result.applicable,
        reason=result.reason or result.note,
        n_folds=result.n_folds,
        n_hospitals=result.n_hospitals,
        kappa_cutoff=result.kappa_cutoff,
        metrics=metrics,
    )


def _pairs_shown(pairs: int | str) -> int | None:
    """A pair count the page may show: None when withheld or below SMALL_CELL."""
    return pairs if isinstance(pairs, int) and pairs >= SMALL_CELL else None


def mppd_attributes(per_attr: Mapping[str, AttributeMPPD]) -> list[MPPDAttribute]:
    """One model's MPPD per attribute, with the small-cell rule re-applied.

    The service already withholds means over fewer than 11 pairs ("<11"); an older file
    or another writer may not have, so the rule is applied here again.
    """
    out = []
    for attr, entry in per_attr.items():
        ref, pw = entry.reference, entry.pairwise
        bars = []
        for g in ref.groups:
            pairs = _pairs_shown(g.pairs)
            small = pairs is None
            bars.append(
                ReferenceBar(
                    group=g.group,
                    mean=None if small else _num(g.mean),
                    pairs=pairs,
                    low_support=g.low_support,
                    gap=None if small else _num(g.gap_to_reference),
                    suppressed=small,
                )
            )
        pairs_rows = tuple(tuple(_pairs_shown(n) for n in row) for row in pw.pairs)
        means = tuple(
            tuple(_num(m) if n is not None else None for m, n in zip(mr, pr, strict=True))
            for mr, pr in zip(pw.means, pairs_rows, strict=True)
        )
        n = len(pw.groups)
        low = pw.low_support or tuple((False,) * n for _ in range(n))
        out.append(
            MPPDAttribute(
                attribute=str(attr),
                reference=ref.reference,
                bars=tuple(bars),
                groups=pw.groups,
                means=means,
                pairs=pairs_rows,
                low_support=low,
            )
        )
    return out


def config_hash(config: MonitorConfig) -> str:
    """A short hash of the whole configuration (what the service ran with)."""
    return hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:12]


def thresholds_hash(cells: Iterable[CellPoint]) -> str:
    """A short hash of the cells' (metric, threshold, direction) rules.

    Why: schema v2 does not store the configuration; the rules the verdicts were
    judged against are in every stored result, so two reports with the same hash
    judged by the same thresholds.
    """
    rules = sorted({(c.metric, c.threshold, c.direction) for c in cells})
    return hashlib.sha256(json.dumps(rules).encode()).hexdigest()[:12]


def _ordered(cells: list[CellPoint], metrics: list[str], attributes: list[str]) -> list[CellPoint]:
    def rank(c: CellPoint) -> tuple[int, int, str, str]:
        m = metrics.index(c.metric) if c.metric in metrics else len(metrics)
        a = attributes.index(c.attribute) if c.attribute in attributes else len(attributes)
        return (m, a, c.metric, c.attribute)

    return sorted(cells, key=rank)


def _axis_names(cells: Iterable[CellPoint], config: MonitorConfig) -> tuple[list[str], list[str]]:
    """Metrics and attributes in config order, then any others the data has."""
    metrics = [m.name for m in config.metrics]
    attributes = [a.name for a in config.attributes]
    for c in cells:
        if c.metric not in metrics:
            metrics.append(c.metric)
        if c.attribute not in attributes:
            attributes.append(c.attribute)
    return metrics, attributes


def _base(config: MonitorConfig, **kw: Any) -> dict[str, Any]:
    return {
        "generated_at": datetime.now(UTC),
        "version": __version__,
        "group_labels": {a.name: dict(a.groups) for a in config.attributes},
        "tau": config.axis1.tau_vfr,
        "cv_cutoff": config.axis2.cv_cutoff,
        "n_field": config.axis2.n_field,
        "kappa_cutoff": config.axis3.kappa_cutoff,
        "confirm_windows": config.confirm_windows,
        **kw,
    }


def _guard_notes(config: MonitorConfig) -> list[str]:
    if config.axis1.min_group_support < SMALL_CELL:
        return [
            f"axis1.min_group_support is {config.axis1.min_group_support}: a metric may rest "
            f"on a group of fewer than {SMALL_CELL} records, so every value is withheld (<11)."
        ]
    return []


# --------------------------------------------------------------------------- DuckDB


def open_database(path: str | Path) -> duckdb.DuckDBPyConnection:
    """The file, read-only; a clear error when it is missing or locked by a running service."""
    p = Path(path)
    if not p.is_file():
        raise ReportInputError(f"--db {p}: no such file")
    try:
        return duckdb.connect(str(p), read_only=True)
    except duckdb.Error as exc:
        raise ReportInputError(
            f"--db {p}: cannot open read-only ({exc}). A running service holds the file: "
            "read the report it serves at /, or stop it first."
        ) from None


def _history(
    c: duckdb.DuckDBPyConnection, model: str, times: dict[tuple[str, int], datetime | None]
) -> dict[tuple[str, str], list[CellPoint]]:
    """Every stored evaluation of a model's cells (fields picked by DuckDB, not by json.loads)."""
    out: dict[tuple[str, str], list[CellPoint]] = {}
    for row in queries.cell_history(c, model):
        (
            m,
            metric,
            attr,
            ev,
            tier,
            ctier,
            wn,
            thr,
            dirn,
            value,
            vfr,
            lo,
            hi,
            dom,
            pt,
            ns,
            kp,
            failed,
            pending,
            partial,
            n_pass,
            K,
            cverdict,
        ) = row
        r = {
            "model_id": m,
            "metric": metric,
            "attribute": attr,
            "evaluation": ev,
            "tier": tier,
            "confirmed_tier": ctier,
            "window_n": int(wn or 0),
            "threshold": thr,
            "direction": dirn,
            "value": value,
            "vfr": vfr,
            "ci_low": lo,
            "ci_high": hi,
            "dominant_verdict": dom,
            "point_verdict": pt,
            "n_star": ns,
            "kappa": kp,
            "failed_axes": json.loads(failed) if failed else [],
            "pending_axes": json.loads(pending) if pending else [],
            "partial": partial == "true",
            "n_pass": None if n_pass is None else int(n_pass),
            "K": None if K is None else int(K),
            "confirmed_verdict": cverdict,
        }
        out.setdefault((metric, attr), []).append(cell_from_result(r, times.get((m, int(ev)))))
    return out


def _volume(c: duckdb.DuckDBPyConnection, model: str, since: datetime | None) -> list[VolumePoint]:
    rows = queries.monthly_records(c, model, since)
    return [VolumePoint(m, int(n) if n >= SMALL_CELL else None) for m, n in rows]


def rolling_auroc(label: np.ndarray, score: np.ndarray, block: int, end: int) -> list[AurocPoint]:
    """AUROC of consecutive blocks of ``block`` records (ending at stream position ``end``).

    A block is left out when either class has fewer than SMALL_CELL records: an
    AUROC over three positives describes three patients.
    """
    from sklearn.metrics import roc_auc_score

    out = []
    n = len(label)
    start0 = n % block
    for s in range(start0, n - block + 1, block):
        y = label[s : s + block]
        pos = int(y.sum())
        if pos < SMALL_CELL or block - pos < SMALL_CELL:
            continue
        out.append(AurocPoint(end - n + s + block, float(roc_auc_score(y, score[s : s + block]))))
    return out


def _auroc(c: duckdb.DuckDBPyConnection, model: str, block: int, records: int) -> list[AurocPoint]:
    label, score = queries.latest_labels_scores(c, model, AUROC_MAX_RECORDS)
    return rolling_auroc(label, score, block, max(records, len(label)))


def _jobs(c: duckdb.DuckDBPyConnection, since: datetime | None) -> list[JobSummary]:
    return [
        JobSummary(j, s, f, st, _ts(at)) for j, s, f, st, at in queries.job_runs(c, since)
    ]


def event_context(points: list[CellPoint], event: EventRow) -> CellPoint | None:
    """The cell as published at the event's evaluation (its rule and small-cell state): its
    release at or before that evaluation (the history holds releases only:
    monitor.stream.publication)."""
    before = [p for p in points if p.evaluation <= event.evaluation]
    return max(before, key=lambda p: p.evaluation) if before else None


def _downsample(points: list[CellPoint], keep: set[int]) -> list[CellPoint]:
    """At most MAX_POINTS evenly spaced evaluations, plus every evaluation in ``keep``."""
    if len(points) <= MAX_POINTS:
        return points
    idx = set(np.linspace(0, len(points) - 1, MAX_POINTS).round().astype(int).tolist())
    return [p for i, p in enumerate(points) if i in idx or p.evaluation in keep]


def read_database(
    conn: duckdb.DuckDBPyConnection,
    config: MonitorConfig | None = None,
    *,
    models: list[str] | None = None,
    since: datetime | None = None,
    source_name: str = "DuckDB",
) -> ReportData:
    """Read a service's DuckDB file (through ``conn``; SELECT only) into a ReportData.

    ``config``: what the service ran with, when known (its hash goes in the header;
    without it the thresholds stored with the results are hashed). ``since`` keeps
    evaluations, events and volumes whose event time is at or after it.
    """
    cfg = config or MonitorConfig()
    c = conn
    missing = {"window_results", "cell_state", "events"} - queries.tables(c)
    if missing:
        raise ReportInputError(
            f"{source_name}: not a vfr-monitor database (no table {sorted(missing)[0]})"
        )
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    times = {k: _ts(t) for k, t in queries.evaluation_times(c).items()}
    stored = queries.models_with_cells(c)
    if models:
        unknown = [m for m in models if m not in stored]
        if unknown:
            raise ReportInputError(
                f"--model {unknown[0]}: not in {source_name}; models there: {', '.join(stored)}"
            )
        stored = [m for m in stored if m in models]
    state = queries.model_progress(c)
    # the stored JSON, typed right after the read
    axis2 = axis_results("axis2", queries.latest_axis_results(c, "axis2"))
    axis3 = axis_results("axis3", queries.latest_axis_results(c, "axis3"))
    eq = axis_results("equilense", queries.latest_axis_results(c, "equilense"))
    hop = cfg.window.hop_records
    guard = _guard_notes(cfg)
    out_models = []
    all_cells: list[CellPoint] = []
    for model in stored:
        latest = []
        for r in queries.latest_cells(c, model):
            latest.append(cell_from_result(r, times.get((model, int(r.get("evaluation") or 0)))))
        history = _history(c, model, times)
        events = [
            EventRow(
                **{f.name: getattr(s.event, f.name) for f in fields(CellEvent)},
                id=s.id,
                at=times.get((s.event.model_id, s.event.evaluation)),
            )
            for s in queries.model_events(c, model)
        ]
        context = {
            e.id: event_context(history.get((e.metric, e.attribute), []), e)
            for e in events
            if e.confirmed
        }
        if since is not None:
            events = [e for e in events if e.at is None or e.at >= since]
            history = {
                k: [p for p in v if p.at is None or p.at >= since] for k, v in history.items()
            }
        if guard:
            latest = [_withheld(p) for p in latest]
            history = {k: [_withheld(p) for p in v] for k, v in history.items()}
        confirmed = [e for e in events if e.confirmed]
        keep = {e.evaluation for e in confirmed}
        history = {k: _downsample(v, keep) for k, v in history.items()}
        records, evaluations = state.get(model, (None, None))
        mr = ModelReport(
            model_id=model,
            cells=latest,
            history=history,
            events=confirmed,
            raw_events=len(events) - len(confirmed),
            records=records,
            evaluations=evaluations,
            event_context={e.id: context[e.id] for e in confirmed},
        )
        if guard:
            mr.event_context = {
                k: None if p is None else _withheld(p) for k, p in mr.event_context.items()
            }
        if model in axis2:
            mr.n_star = list(axis2[model])
        if model in axis3:
            mr.axis3 = axis3_summary(axis3[model])
        for result in eq.values():
            _set_mppd(mr, result)
        mr.volume = _volume(c, model, since)
        mr.auroc = _auroc(c, model, hop, records or 0)
        out_models.append(mr)
        all_cells.extend(latest)
    metrics, attributes = _axis_names(all_cells, cfg)
    for mr in out_models:
        mr.cells = _ordered(mr.cells, metrics, attributes)
    points = [p.at for mr in out_models for v in mr.history.values() for p in v if p.at]
    period = (min(points), max(points)) if points else None
    dead = queries.counts(c)["dead_letters"]
    return ReportData(
        **_base(
            cfg,
            source="database",
            source_name=source_name,
            config_hash=config_hash(cfg) if config is not None else thresholds_hash(all_cells),
            config_hash_kind="configuration" if config is not None else "thresholds",
            period=period,
            models=out_models,
            metrics=metrics,
            attributes=attributes,
            dead_letters=dead,
            jobs=_jobs(c, since),
            notes=guard,
        )
    )


def _withheld(p: CellPoint) -> CellPoint:
    from dataclasses import replace

    return replace(
        p,
        value=None,
        vfr=None,
        ci_low=None,
        ci_high=None,
        dominant_verdict=None,
        point_verdict=None,
        confirmed_verdict=None,
        n_star=None,
        kappa=None,
        n_pass=None,
        suppressed=True,
    )


# --------------------------------------------------------------------------- audit directory


def read_audit_dir(
    path: str | Path, config: MonitorConfig | None = None, *, models: list[str] | None = None
) -> ReportData:
    """An offline audit's ``cells.json`` (and ``mppd.json`` when present) as a ReportData.

    The audit has one cohort, so there is no history, no events and no N* curve (only
    N* itself); kappa per metric is the kappa its cells carry.
    """
    cfg = config or MonitorConfig()
    d = Path(path)
    cells_path = d / "cells.json"
    if not cells_path.is_file():
        raise ReportInputError(f"--audit-dir {d}: no cells.json (write one with vfr-monitor audit)")
    try:
        raw = json.loads(cells_path.read_text())
        rows = raw["cells"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ReportInputError(f"{cells_path}: not an audit cells.json ({exc})") from None
    audit = [AuditCell.from_dict(r) for r in rows]
    cells = [cell_from_audit(c) for c in audit]
    guard = _guard_notes(cfg)
    if guard:
        cells = [_withheld(p) for p in cells]
    names = sorted({c.model_id for c in cells})
    if models:
        unknown = [m for m in models if m not in names]
        if unknown:
            raise ReportInputError(
                f"--model {unknown[0]}: not in {cells_path}; models there: {', '.join(names)}"
            )
        names = [m for m in names if m in models]
    metrics, attributes = _axis_names(cells, cfg)
    eq = None
    if (d / "mppd.json").is_file():
        eq = EquiLenseResult.from_dict(json.loads((d / "mppd.json").read_text()))
    out = []
    for model in names:
        mine = _ordered([c for c in cells if c.model_id == model], metrics, attributes)
        mr = ModelReport(model_id=model, cells=mine)
        mr.axis3 = _audit_axis3(audit, model, cfg)
        if eq is not None:
            _set_mppd(mr, eq)
        mr.records = max((c.window_n for c in mine), default=None)
        out.append(mr)
    notes = [*guard, *(str(n) for n in raw.get("notes", []))]
    return ReportData(
        **_base(
            cfg,
            source="audit",
            source_name=str(d),
            config_hash=thresholds_hash(cells),
            config_hash_kind="thresholds",
            period=None,
            models=out,
            metrics=metrics,
            attributes=attributes,
            notes=notes,
        )
    )


def _set_mppd(mr: ModelReport, result: EquiLenseResult) -> None:
    """The model's MPPD from an EquiLense result, or the note saying why there is none."""
    entry = result.models.get(mr.model_id)
    if entry is not None:
        mr.mppd = mppd_attributes(entry.mppd)
    elif result.mppd_note:
        mr.mppd_note = result.mppd_note


def _audit_axis3(cells: list[AuditCell], model: str, cfg: MonitorConfig) -> Axis3Summary:
    mine = [c for c in cells if c.model_id == model]
    applicable = not any(c.kappa_band == "not applicable" for c in mine)
    by_metric: dict[str, AuditCell] = {}
    for c in mine:
        by_metric.setdefault(c.metric, c)
    small = any(c.withheld for c in mine)
    metrics = tuple(
        MetricKappa(
            metric=m,
            kappa=None if small else _num(c.kappa),
            band=c.kappa_band,
            degenerate=bool(c.kappa_degenerate),
            fails="axis3" in c.tier.failed_axes,
        )
        for m, c in by_metric.items()
    )
    reason = next((c.axis3_note for c in mine if c.axis3_note), "")
    return Axis3Summary(applicable, reason, 0, 0, cfg.axis3.kappa_cutoff, metrics)
