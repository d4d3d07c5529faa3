"""What the report shows, read into typed objects: from a DuckDB file or an audit directory.

The service owns its DuckDB file (one writer process), so the report reads either
through a cursor the service hands over or through a connection opened
``read_only``, with the read functions of :mod:`monitor.store.queries` (those the
service's API uses), and parses what they return here. The offline audit leaves
``cells.json`` and ``mppd.json``; the same objects are filled with what those hold (no
history, no events).

The small-cell rule is applied on reading, once, for every figure the page can show, so
no later step can draw a withheld one by mistake: a figure withheld is ``None`` (with
``suppressed`` set on a cell point). What a cell point carries is
:mod:`monitor.publish.points`'s (a cell evaluated on fewer than :data:`SMALL_CELL`
records keeps its identity only, its tier withheld too; the guard; the figures of a
scheduled axis computed on a smaller cohort), and whether a stored scheduled axis may be
read at all is :func:`~monitor.publish.axes.reported_axis`'s. Counts that need not be
exact (records, volumes, pairs, dead letters, stream positions) leave here rounded to
:data:`~monitor.core.privacy.ROUNDING_BASE`, and a per-group family (the months of a
model, the groups of an MPPD attribute) gets secondary suppression
(:func:`~monitor.core.privacy.suppressed_groups`), so no total minus the parts shown gives
a withheld one. The rule's other parts that do not need the page's types (MPPD pair
counts, period snapping, monthly volumes, counts, the scheduled axes' notes) are
:mod:`monitor.publish`'s too.

Period filters are whole UTC days, widened to whole release blocks of at least
SMALL_CELL records (:func:`~monitor.publish.periods.snap_period`), so two reports of
neighbouring periods differ by no record or by at least SMALL_CELL; a model whose
period holds 1 to SMALL_CELL - 1 records is withheld as a whole (docs/decisions.md,
"Disclosure control in the report").
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pydantic_core

from batch_axes.audit_cell import axis3_note, kappa_band, kappa_degenerate
from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result
from batch_axes.equilense import AttributeMPPD, EquiLenseResult
from batch_axes.mppd_sample import MPPDSampling
from monitor import __version__
from monitor.config import MonitorConfig
from monitor.config.errors import UserError
from monitor.core.events import CERTIFIED_CHANGE, CellEvent
from monitor.core.numbers import float_or_none
from monitor.core.results import CellEvaluation
from monitor.publish.audit import PublishedAudit, audit_read
from monitor.publish.axes import published_axis3_note, reported_axis
from monitor.publish.cells import PublishedAuditCell
from monitor.publish.counts import count_value, published_count, published_size, rounded_count
from monitor.publish.equilense import PublishedEquiLense
from monitor.publish.mppd import family_hidden, published_pair_matrix
from monitor.publish.periods import in_period, snap_period
from monitor.publish.points import (
    CellPoint,
    audit_cell_point,
    guarded_point,
    published_point,
    reported_point,
)
from monitor.publish.rule import SMALL_CELL
from monitor.publish.shown import Published, Shown
from monitor.publish.volumes import VolumePoint, monthly_volume
from monitor.report.auroc import AurocPoint, rolling_auroc
from monitor.store import queries

#: Points per cell kept for the time-series figures (event evaluations are always kept).
MAX_POINTS = 400
#: Records per model read for the rolling AUROC (the latest ones).
AUROC_MAX_RECORDS = 200_000


#: A stored window result (``CellEvaluation.to_dict``, or the fields of it the history
#: query picks) as a point of the page, the small-cell rule applied: the publish
#: package decides what a point carries (:func:`monitor.publish.points.published_point`).
cell_from_result = published_point

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class ReportInputError(UserError, ValueError):
    """The input cannot be reported on; the message names the file, field or option (a
    user's mistake: the CLI prints it as it is)."""


def whole_day(option: str, value: str | date | None) -> date | None:
    """A period filter's day (a UTC calendar day), or None for no filter.

    Only whole days are taken: a time of day lets two reports a few hours apart be
    subtracted, and bisecting the time then dates each record.

    >>> whole_day("--since", "2026-03-10"), whole_day("--since", None)
    (datetime.date(2026, 3, 10), None)
    >>> whole_day("--since", "2026-03-10T06:00")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    monitor.report.data.ReportInputError: --since '2026-03-10T06:00': not a whole day; ...
    """
    if value is None:
        return None
    bad = ReportInputError(
        f"{option} {str(value)!r}: not a whole day; give a date YYYY-MM-DD "
        "(periods are whole UTC days)"
    )
    if isinstance(value, datetime):
        t = value.astimezone(UTC) if value.tzinfo is not None else value
        if t.time() != time(0):
            raise bad
        return t.date()
    if isinstance(value, date):
        return value
    if not _DAY.fullmatch(str(value)):
        raise bad
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise bad from None


# --------------------------------------------------------------------------- typed rows


@dataclass(frozen=True)
class CoveragePoint:
    """One attribute's outcome coverage at one evaluation, as released: group code ->
    share of its predictions with an outcome (None: withheld, fewer than 11 predictions),
    the gap between the groups and the tier reason it gave the attribute's label cells."""

    attribute: str
    evaluation: int
    at: datetime | None
    groups: dict[str, float | None]
    gap: float | None
    max_gap: float
    reason: str


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
    #: standard error of ``mean`` when MPPD was estimated on a sample (None: all records)
    se: float | None = None


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
    #: max - min of the bars shown, and its standard error on a sample
    disparity: float | None = None
    disparity_se: float | None = None


@dataclass(frozen=True)
class ModelPeriod:
    """The days one model's period figures rest on: [start, end) in whole UTC days (None:
    open), the filter's days widened to whole release blocks; ``records`` as published
    (rounded, or withheld: the period is withheld as a whole)."""

    start: date | None
    end: date | None
    records: Published[int]
    filtered: bool

    @property
    def withheld(self) -> bool:
        return not isinstance(self.records, Shown)


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
    #: the certified changes of the period (kind certified_change), oldest first: kept
    #: apart from the confirmed flips and tier changes the events table lists
    certified_changes: list[EventRow] = field(default_factory=list)
    #: event id -> the cell at the event (None when its history has no such evaluation)
    event_context: dict[int, CellPoint | None] = field(default_factory=dict)
    n_star: list[Axis2Cell] = field(default_factory=list)  # Axis 2's cells, with their curves
    axis3: Axis3Summary | None = None
    mppd: list[MPPDAttribute] = field(default_factory=list)
    mppd_note: str = ""
    #: how MPPD was computed: on all records or on a stratified sample (with its size)
    mppd_basis: str = ""
    #: why Axis 2 and Axis 3 show nothing ("" when they show what they have)
    axes_note: str = ""
    records: int | str | None = None  # records received, as published (rounded or "<11")
    evaluations: int | None = None
    period: ModelPeriod | None = None
    volume: list[VolumePoint] = field(default_factory=list)
    auroc: list[AurocPoint] = field(default_factory=list)
    #: outcome coverage per attribute over the period (empty: outcomes come with predictions)
    coverage: list[CoveragePoint] = field(default_factory=list)

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
    dead_letters: int | str | None = None  # as published (rounded or "<11")
    jobs: list[JobSummary] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the period filter asked for: first and last UTC day (None: open); None: no filter
    days: tuple[date | None, date | None] | None = None

    def model(self, model_id: str) -> ModelReport:
        for m in self.models:
            if m.model_id == model_id:
                return m
        raise KeyError(model_id)


# --------------------------------------------------------------------------- parsing helpers


def coverage_points(
    rows: Iterable[queries.CoverageRow],
    model: str,
    times: Mapping[tuple[str, int], datetime | None],
) -> list[CoveragePoint]:
    """Stored outcome coverage (queries.coverage_history) as CoveragePoints; an evaluation
    whose window is under the small-cell rule shows nothing (left out)."""
    out = []
    for attr, ev, window_n, cov in rows:
        if window_n < SMALL_CELL:
            continue
        groups = {g.group: float_or_none(g.coverage) for g in cov.groups}
        out.append(
            CoveragePoint(
                attr, ev, times.get((model, ev)), groups, float_or_none(cov.gap),
                cov.max_gap, cov.reason,
            )
        )  # fmt: skip
    return out


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
        # the note as published (its counts rounded or withheld: monitor.publish.axes)
        reason=result.reason or published_axis3_note(result),
        n_folds=result.n_folds,
        n_hospitals=result.n_hospitals,
        kappa_cutoff=result.kappa_cutoff,
        metrics=metrics,
    )


def mppd_attributes(per_attr: Mapping[str, AttributeMPPD]) -> list[MPPDAttribute]:
    """One model's MPPD per attribute, with the small-cell rule re-applied.

    The service already withholds means over fewer than 11 pairs ("<11"); an older file
    or another writer may not have, so the rule is applied here again, with secondary
    suppression over the groups of the attribute (the reference bars, and the pairs of
    groups of the matrix), and the pair counts shown rounded.
    """
    out = []
    for attr, entry in per_attr.items():
        ref, pw = entry.reference, entry.pairwise
        hidden = family_hidden({g.group: g.pairs for g in ref.groups})
        bars = []
        for g in ref.groups:
            small = g.group in hidden
            pairs = None if small else rounded_count(g.pairs)  # type: ignore[arg-type]  # not small: a count
            bars.append(
                ReferenceBar(
                    group=g.group,
                    mean=None if small else float_or_none(g.mean),
                    pairs=pairs,
                    low_support=g.low_support,
                    gap=None if small else float_or_none(g.gap_to_reference),
                    suppressed=small,
                    se=None if small else float_or_none(g.se),
                )
            )
        pairs_rows = published_pair_matrix(pw.pairs)
        means = tuple(
            tuple(float_or_none(m) if n is not None else None for m, n in zip(mr, pr, strict=True))
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
                **_disparity(bars, ref.disparity_between, ref.disparity_se),
            )
        )
    return out


def _disparity(
    bars: Sequence[ReferenceBar], between: tuple[str, str] | None, se: float | None
) -> dict[str, float | None]:
    """max - min of the shown bars; on a sample its error, the stored one while the same
    two groups are the maximum and minimum, else the two bars' errors in quadrature
    (as :func:`batch_axes.equilense.disparity_of_shown`)."""
    shown = [b for b in bars if b.mean is not None and not b.suppressed]
    if len(shown) < 2:
        return {"disparity": None, "disparity_se": None}
    hi = max(shown, key=lambda b: b.mean)  # type: ignore[arg-type, return-value]  # shown: has a mean
    lo = min(shown, key=lambda b: b.mean)  # type: ignore[arg-type, return-value]  # shown: has a mean
    if between is not None and tuple(between) != (hi.group, lo.group):
        se = None if hi.se is None or lo.se is None else math.hypot(hi.se, lo.se)
    elif between is None:
        se = None
    return {"disparity": hi.mean - lo.mean, "disparity_se": float_or_none(se)}  # type: ignore[operator]  # shown: has a mean


def mppd_basis(sampling: MPPDSampling | None) -> str:
    """The sentence that says how a model's MPPD figures were computed."""
    if sampling is None:
        return ""
    n, total = (
        f"{c:,}" if isinstance(c := published_size(x) if isinstance(x, int) else x, int) else c
        for x in (sampling.records, sampling.cohort_records)
    )
    if not sampling.sampled:
        return f"MPPD from all {total} records of the cohort (exact)."
    return (
        f"MPPD from a stratified sample (label x groups, seed {sampling.seed}) of {n} of "
        f"{total} records: ± is the 95 % interval of the sampling error "
        "(1.96 standard errors)."
    )


def config_hash(config: MonitorConfig) -> str:
    """A short hash of the whole configuration (what the service ran with): of its JSON
    with ``[service]`` in the flat layout it had before its sections
    (``ServiceConfig.flat_settings``), so the same settings keep the same hash."""
    data = config.model_dump(mode="json")
    data["service"] = config.service.flat_settings()
    return hashlib.sha256(pydantic_core.to_json(data)).hexdigest()[:12]


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
    attributes = [a.name for a in config.grid_attributes]
    for c in cells:
        if c.metric not in metrics:
            metrics.append(c.metric)
        if c.attribute not in attributes:
            attributes.append(c.attribute)
    return metrics, attributes


def _base(config: MonitorConfig, generated_at: datetime | None, **kw: Any) -> dict[str, Any]:
    """The header fields every report shares. ``generated_at``: the time the header
    shows, None for now (the one wall-clock value of a report; injected by the golden
    run, tests/golden)."""
    return {
        "generated_at": datetime.now(UTC) if generated_at is None else generated_at,
        "version": __version__,
        "group_labels": {a.name: dict(a.groups) for a in config.grid_attributes},
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
    """Every stored evaluation of a model's cells (fields picked by DuckDB, not by json.loads;
    the axes lists, a handful of distinct texts, decoded once each)."""
    out: dict[tuple[str, str], list[CellPoint]] = {}

    @functools.cache
    def axes(text: str | None) -> tuple[str, ...]:
        return tuple(json.loads(text) or ()) if text else ()

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
            "failed_axes": axes(failed),
            "pending_axes": axes(pending),
            "partial": partial == "true",
            "n_pass": None if n_pass is None else int(n_pass),
            "K": None if K is None else int(K),
            "confirmed_verdict": cverdict,
        }
        out.setdefault((metric, attr), []).append(cell_from_result(r, times.get((m, int(ev)))))
    return out


def _at_in(t: datetime | None, start: date | None, end: date | None) -> bool:
    """Whether a point at event time ``t`` belongs to the days [start, end) (a point of
    unknown time stays, as it did before filters snapped)."""
    return t is None or in_period(t.astimezone(UTC).date(), start, end)


def model_period(
    c: duckdb.DuckDBPyConnection, model: str, filt: tuple[date | None, date | None] | None
) -> tuple[ModelPeriod, list[VolumePoint]]:
    """A model's period (the filter's days widened to whole release blocks) and its
    monthly volume; a period of 1 to SMALL_CELL - 1 records is withheld as a whole."""
    days = queries.daily_records(c, model)
    if filt is None:
        start = end = None
    else:
        last = filt[1]
        start, end = snap_period(days, filt[0], None if last is None else last + timedelta(1))
    mine = [(d, n) for d, n in days if in_period(d, start, end)]
    total = sum(n for _, n in mine)
    period = ModelPeriod(start, end, count_value(total) if total else Shown(0), filt is not None)
    return period, ([] if period.withheld else monthly_volume(mine))


def _auroc(c: duckdb.DuckDBPyConnection, model: str, block: int, records: int) -> list[AurocPoint]:
    label, score = queries.latest_labels_scores(c, model, AUROC_MAX_RECORDS)
    return rolling_auroc(label, score, block, max(records, len(label)))


def _latest_axis(c: duckdb.DuckDBPyConnection, axis: str, model: str) -> tuple[Any, bool]:
    """A model's latest result of one scheduled axis, typed (None: none stored), and
    whether it was withheld: computed on a cohort of fewer than SMALL_CELL records."""
    rows = queries.axis_history(c, axis, model, limit=1)
    if not rows:
        return None, False
    row = rows[0]
    result = reported_axis(row.cohort_n, lambda: row.result)
    return result, result is None


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


def _events(
    c: duckdb.DuckDBPyConnection, model: str, times: dict[tuple[str, int], datetime | None]
) -> list[EventRow]:
    return [
        EventRow(
            **{f.name: getattr(s.event, f.name) for f in fields(CellEvent)},
            id=s.id,
            at=times.get((s.event.model_id, s.event.evaluation)),
        )
        for s in queries.model_events(c, model)
    ]


def _set_axes(c: duckdb.DuckDBPyConnection, mr: ModelReport) -> tuple[bool, bool]:
    """The model's latest Axis 2, Axis 3 and MPPD results, each only when its cohort held
    at least SMALL_CELL records; returns which of Axis 2 and Axis 3 were withheld."""
    a2, small2 = _latest_axis(c, "axis2", mr.model_id)
    a3, small3 = _latest_axis(c, "axis3", mr.model_id)
    eq, small_eq = _latest_axis(c, "equilense", mr.model_id)
    if a2 is not None:
        mr.n_star = list(a2)
        waits = {(x.metric, x.attribute): x.to_reliable.text for x in a2 if x.to_reliable}
        mr.cells = [
            replace(p, time_to_reliable=waits.get(p.key, "")) if not p.suppressed else p
            for p in mr.cells
        ]
    if a3 is not None:
        mr.axis3 = axis3_summary(a3)
    if eq is not None:
        _set_mppd(mr, eq)
    small = [name for name, s in (("audit size (Axis 2)", small2),
                                  ("hospital agreement (Axis 3)", small3)) if s]  # fmt: skip
    if small:
        what = " and ".join(small)
        mr.axes_note = (
            f"{what[0].upper()}{what[1:]} withheld: the model's audit cohort holds fewer than "
            f"{SMALL_CELL} records."
        )
    if small_eq:
        mr.mppd_note = (
            f"Matched-pair differences withheld: the model's audit cohort holds fewer than "
            f"{SMALL_CELL} records."
        )
    return small2, small3


def _read_model(
    c: duckdb.DuckDBPyConnection,
    model: str,
    cfg: MonitorConfig,
    times: dict[tuple[str, int], datetime | None],
    filt: tuple[date | None, date | None] | None,
    progress: tuple[int | None, int | None],
) -> ModelReport:
    """One model's part of the page, with the small-cell rule applied to every figure."""
    labels = {a.name: dict(a.groups) for a in cfg.grid_attributes}
    latest = [
        cell_from_result(r.to_dict(), times.get((model, r.evaluation)), labels)
        for r in queries.latest_cells(c, model)
    ]
    history = _history(c, model, times)
    events = _events(c, model, times)
    context = {
        e.id: event_context(history.get((e.metric, e.attribute), []), e)
        for e in events
        if e.confirmed
    }
    period, volume = model_period(c, model, filt)
    coverage = coverage_points(queries.coverage_history(c, model), model, times)
    if period.withheld:  # 1 to 10 records in the period: withheld as a whole
        events, history, coverage = [], {}, []
    else:
        events = [e for e in events if _at_in(e.at, period.start, period.end)]
        history = {
            k: [p for p in v if _at_in(p.at, period.start, period.end)] for k, v in history.items()
        }
        coverage = [p for p in coverage if _at_in(p.at, period.start, period.end)]
    records, evaluations = progress
    mr = ModelReport(model_id=model, cells=latest, records=None, evaluations=evaluations)
    mr.period, mr.volume = period, volume
    small2, small3 = _set_axes(c, mr)
    guard = bool(_guard_notes(cfg))
    shown = functools.partial(reported_point, guard=guard, small_axis2=small2, small_axis3=small3)
    certified = [e for e in events if e.kind == CERTIFIED_CHANGE]
    events = [e for e in events if e.kind != CERTIFIED_CHANGE]
    confirmed = [e for e in events if e.confirmed]
    keep = {e.evaluation for e in confirmed}
    mr.cells = [shown(p) for p in mr.cells]  # latest, with _set_axes's time to N*
    mr.history = {k: _downsample([shown(p) for p in v], keep) for k, v in history.items()}
    mr.events = confirmed
    mr.certified_changes = certified
    mr.raw_events = len(events) - len(confirmed)
    mr.event_context = {
        e.id: None if context[e.id] is None else shown(context[e.id])  # type: ignore[arg-type]  # None: checked on the line
        for e in confirmed
    }
    mr.auroc = _auroc(c, model, cfg.window.hop_records, records or 0)
    mr.coverage = coverage  # rests on predictions and outcomes, not on min_group_support
    mr.records = None if records is None else published_count(records)
    return mr


def read_database(
    conn: duckdb.DuckDBPyConnection,
    config: MonitorConfig | None = None,
    *,
    models: list[str] | None = None,
    since: date | str | None = None,
    until: date | str | None = None,
    source_name: str = "DuckDB",
    generated_at: datetime | None = None,
) -> ReportData:
    """Read a service's DuckDB file (through ``conn``; SELECT only) into a ReportData.

    ``config``: what the service ran with, when known (its hash goes in the header;
    without it the thresholds stored with the results are hashed). ``since`` and
    ``until``: the first and last UTC day of the period (whole days only, see
    :func:`whole_day`); each model's evaluations, events and volumes are those of the
    period widened to whole release blocks (:func:`snap_period`). ``generated_at``: the
    header's time (None: now).
    """
    cfg = config or MonitorConfig()
    c = conn
    missing = {"window_results", "cell_state", "events"} - queries.tables(c)
    if missing:
        raise ReportInputError(
            f"{source_name}: not a vfr-monitor database (no table {sorted(missing)[0]})"
        )
    first, last = whole_day("--since", since), whole_day("--until", until)
    if first is not None and last is not None and last < first:
        raise ReportInputError(f"--until {last}: before --since {first}")
    filt = None if first is None and last is None else (first, last)
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
    out_models = [_read_model(c, m, cfg, times, filt, state.get(m, (None, None))) for m in stored]
    all_cells = [p for mr in out_models for p in mr.cells]
    metrics, attributes = _axis_names(all_cells, cfg)
    for mr in out_models:
        mr.cells = _ordered(mr.cells, metrics, attributes)
    points = [p.at for mr in out_models for v in mr.history.values() for p in v if p.at]
    period = (min(points), max(points)) if points else None
    dead = queries.counts(c)["dead_letters"]
    return ReportData(
        **_base(
            cfg,
            generated_at,
            source="database",
            source_name=source_name,
            config_hash=config_hash(cfg) if config is not None else thresholds_hash(all_cells),
            config_hash_kind="configuration" if config is not None else "thresholds",
            period=period,
            models=out_models,
            metrics=metrics,
            attributes=attributes,
            dead_letters=published_count(dead) if dead else 0,
            jobs=_jobs(c, None if first is None else datetime.combine(first, time(0), UTC)),
            notes=_guard_notes(cfg),
            days=filt,
        )
    )


# --------------------------------------------------------------------------- audit directory


def read_audit_dir(
    path: str | Path,
    config: MonitorConfig | None = None,
    *,
    models: list[str] | None = None,
    generated_at: datetime | None = None,
) -> ReportData:
    """An offline audit's ``cells.json`` (and ``mppd.json`` when present) as a ReportData:
    the files read back as the published audit they hold (:func:`audit_read`), then
    :func:`read_audit`."""
    d = Path(path)
    cells_path = d / "cells.json"
    if not cells_path.is_file():
        raise ReportInputError(f"--audit-dir {d}: no cells.json (write one with vfr-monitor audit)")
    try:
        raw = json.loads(cells_path.read_text())
        raw["cells"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ReportInputError(f"{cells_path}: not an audit cells.json ({exc})") from None
    mppd = json.loads((d / "mppd.json").read_text()) if (d / "mppd.json").is_file() else None
    return read_audit(
        audit_read(raw, mppd), config, models=models, generated_at=generated_at,
        source_name=str(d), where=str(cells_path),
    )  # fmt: skip


def read_audit(
    audit: PublishedAudit,
    config: MonitorConfig | None = None,
    *,
    models: list[str] | None = None,
    generated_at: datetime | None = None,
    source_name: str = "audit_frame",
    where: str = "the audit",
) -> ReportData:
    """An offline audit, as published (:class:`~monitor.publish.audit.PublishedAudit`:
    from its files, or from memory for an audit of a DataFrame), as a ReportData.

    The audit has one cohort, so there is no history, no events and no N* curve (only
    N* itself); kappa per metric is the kappa its cells carry. ``generated_at``: the
    header's time (None: now); ``source_name``: the header's name of the audit;
    ``where``: the audit as an error message names it.
    """
    cfg = config or MonitorConfig()
    cells = [audit_cell_point(c) for c in audit.cells]
    guard = _guard_notes(cfg)
    if guard:
        cells = [guarded_point(p) for p in cells]
    names = sorted({c.model_id for c in cells})
    if models:
        unknown = [m for m in models if m not in names]
        if unknown:
            raise ReportInputError(
                f"--model {unknown[0]}: not in {where}; models there: {', '.join(names)}"
            )
        names = [m for m in names if m in models]
    metrics, attributes = _axis_names(cells, cfg)
    out = []
    for model in names:
        mine = _ordered([c for c in cells if c.model_id == model], metrics, attributes)
        mr = ModelReport(model_id=model, cells=mine)
        cohort = max((c.window_n for c in mine), default=0)
        mr.axis3 = reported_axis(cohort, functools.partial(_audit_axis3, audit.cells, model, cfg))
        if mr.axis3 is None:  # the audit's cells.json withholds a cohort under 11: so does its page
            mr.axes_note = (
                f"Hospital agreement (Axis 3) withheld: the audit cohort holds fewer than "
                f"{SMALL_CELL} records."
            )
        if audit.equilense is not None:
            _set_mppd(mr, audit.equilense)
        mr.records = published_count(cohort) if cohort else None
        out.append(mr)
    notes = [*guard, *audit.notes]
    return ReportData(
        **_base(
            cfg,
            generated_at,
            source="audit",
            source_name=source_name,
            config_hash=thresholds_hash(cells),
            config_hash_kind="thresholds",
            period=None,
            models=out,
            metrics=metrics,
            attributes=attributes,
            notes=notes,
        )
    )


def _set_mppd(mr: ModelReport, result: EquiLenseResult | PublishedEquiLense) -> None:
    """The model's MPPD from an EquiLense result, or the note saying why there is none."""
    entry = result.models.get(mr.model_id)
    if entry is not None:
        mr.mppd = mppd_attributes(entry.mppd)
        mr.mppd_basis = mppd_basis(entry.sampling)
    elif result.mppd_note:
        mr.mppd_note = result.mppd_note


def _audit_axis3(
    cells: Sequence[PublishedAuditCell], model: str, cfg: MonitorConfig
) -> Axis3Summary:
    mine = [c for c in cells if c.identity.model_id == model]
    shown = [c.figures.value.read_back() for c in mine if isinstance(c.figures, Shown)]
    applicable = not any(kappa_band(c) == "not applicable" for c in shown)
    by_metric: dict[str, CellEvaluation] = {}
    for c in shown:
        by_metric.setdefault(c.metric, c)
    small = len(shown) < len(mine)
    metrics = tuple(
        MetricKappa(
            metric=m,
            kappa=None if small else float_or_none(c.own_kappa),
            band=kappa_band(c),
            degenerate=bool(kappa_degenerate(c)),
            fails="axis3" in c.tier.failed_axes,
        )
        for m, c in by_metric.items()
    )
    reason = next((axis3_note(c) for c in shown if axis3_note(c)), "")
    return Axis3Summary(applicable, reason, 0, 0, cfg.axis3.kappa_cutoff, metrics)
