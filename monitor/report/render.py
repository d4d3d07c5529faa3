"""The page: ReportData + figures + sentences through one Jinja2 template, to one HTML string.

The page is self-contained (inline CSS and SVG, no URL, no script), so it can be
mailed, archived with the board papers and printed on A4 as it is.
:func:`render_report` is also what the service calls to serve the page live: it
accepts the service's own DuckDB cursor, because the service's process is the
file's one writer.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from batch_axes.axis3 import landis_koch_band
from batch_axes.mppd_sample import Z95
from monitor.config import MonitorConfig
from monitor.core.explain import tier_name
from monitor.core.tiers import TIER_LEVEL
from monitor.publish.audit import PublishedAudit
from monitor.publish.encode import encoded
from monitor.publish.points import WITHHELD_TIER
from monitor.publish.rule import ROUNDING_BASE, SMALL_CELL
from monitor.publish.rule import SMALL_CELL_LABEL as WITHHELD
from monitor.report import coverage_figure, figures
from monitor.report.changes import Attention, cell_reliable, model_changes, period_changes
from monitor.report.data import (
    CellPoint,
    ModelReport,
    ReportData,
    ReportInputError,
    open_database,
    read_audit,
    read_audit_dir,
    read_database,
)
from monitor.report.interventions import InterventionsView, read_interventions
from monitor.report.sentences import (
    cell_label,
    cell_sentence,
    event_sentence,
    fmt_count,
    fmt_n,
)


@dataclass(frozen=True)
class CellRow:
    """One line of the per-cell table, every field already text."""

    metric: str
    attribute: str
    tier: str
    tier_name: str
    verdict: str
    value: str
    vfr: str
    n_star: str
    kappa: str
    sentence: str
    unstable: bool
    #: the verdict fails (a failing verdict is drawn in red whatever its tier)
    fails: bool = False
    #: the certified verdict (docs/method.md section 11): pass, fail, undetermined, or
    #: "n/a" (a metric that is not certified, or an audit: no stream of blocks)
    certified: str = "n/a"


@dataclass(frozen=True)
class EventLine:
    when: str
    kind: str
    cell: str
    change: str
    sentence: str


def _num(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def tier_token(tier: str) -> str:
    """The tier as a CSS class and data attribute ("Withheld" for a withheld tier)."""
    return "Withheld" if tier == WITHHELD_TIER else tier


def cell_row(c: CellPoint, data: ReportData) -> CellRow:
    if c.suppressed:
        value = vfr = n_star = kappa = verdict = WITHHELD
    else:
        verdict = c.dominant_verdict or "undefined"
        rule = {">=": "≥", "<=": "≤", "abs<=": "|x| ≤"}.get(c.direction, c.direction)
        value = f"{_num(c.value)} ({rule} {c.threshold:g})"
        vfr = _num(c.vfr)
        n_star = "pending" if c.n_star is None and "axis2" in c.pending_axes else fmt_n(c.n_star)
        if c.kappa is not None:
            kappa = f"{c.kappa:.2f} ({landis_koch_band(c.kappa)})"
        elif c.partial and "axis3" not in c.pending_axes:
            kappa = "no hospitals"
        else:
            kappa = "pending" if "axis3" in c.pending_axes else "n/a"
    return CellRow(
        metric=c.metric,
        attribute=c.attribute,
        tier=tier_token(c.tier),
        tier_name=tier_name(c.tier) + (" (partial)" if c.partial else "") + _coverage_note(c),
        verdict=verdict,
        value=value,
        vfr=vfr,
        n_star=n_star,
        kappa=kappa,
        sentence=cell_sentence(c, data.tau, data.n_field, data.kappa_cutoff),
        unstable=c.vfr is not None and c.vfr > data.tau,
        fails=not c.suppressed and c.dominant_verdict == "fail",
        certified=WITHHELD if c.suppressed else (c.certified or "n/a"),
    )


def _coverage_note(c: CellPoint) -> str:
    """The tier reason of a label-based cell whose outcomes are not comparable across
    groups (monitor.core.coverage), with the gap behind it."""
    if not c.coverage_reason:
        return ""
    gap = "" if c.coverage_gap is None else f", coverage gap {c.coverage_gap:.2f}"
    return f"; {c.coverage_reason}{gap}"


def _when(t: datetime | None) -> str:
    return "" if t is None else t.strftime("%Y-%m-%d")


def event_lines(m: ModelReport, data: ReportData) -> list[EventLine]:
    """Every confirmed event of the period, newest first (the page folds them away)."""
    out = []
    for e in reversed(m.events):
        cur = m.event_context.get(e.id)
        if cur is None or cur.suppressed:  # its verdicts and tiers rest on <11 records
            change = WITHHELD
        elif e.kind == "verdict_flip":
            change = f"{e.old} → {e.new}"
        else:
            change = f"{tier_name(e.old)} → {tier_name(e.new)}"
        out.append(
            EventLine(
                when=f"{_when(e.at)} (#{e.evaluation})",
                kind="verdict flip" if e.kind == "verdict_flip" else "tier change",
                cell=cell_label(e.metric, e.attribute),
                change=change,
                sentence=event_sentence(e, cur, data.tau, data.n_field, data.kappa_cutoff),
            )
        )
    return out


def model_summary(m: ModelReport, data: ReportData) -> str:
    """The first sentence a board member reads about a model (withheld tiers not counted
    by tier: they are withheld)."""
    counts = Counter(c.tier for c in m.cells if c.tier != WITHHELD_TIER)
    tiers = ", ".join(
        f"{counts[t]} {tier_name(t)}" for t in sorted(counts, key=lambda t: -TIER_LEVEL.get(t, -2))
    )
    n_withheld_tier = len(m.cells) - sum(counts.values())
    if n_withheld_tier:
        tiers = ", ".join(x for x in (tiers, f"{n_withheld_tier} with the tier withheld") if x)
    shown = [c for c in m.cells if not c.suppressed]
    fails = sum(1 for c in shown if c.dominant_verdict == "fail")
    unstable = sum(1 for c in shown if c.vfr is not None and c.vfr > data.tau)
    withheld = len(m.cells) - len(shown)
    parts = [f"{len(m.cells)} cells: {tiers}."]
    if shown:
        parts.append(
            f"{fails} of {len(shown)} fail their fairness rule; {unstable} have a verdict "
            f"that flips in more than {data.tau:.0%} of resamples."
        )
    if withheld:
        parts.append(f"{withheld} cells rest on fewer than {SMALL_CELL} records and are withheld.")
    if m.period is not None and m.period.withheld:
        parts.append(
            f"This model's period holds fewer than {SMALL_CELL} records: its evaluations, "
            "events and volumes are withheld."
        )
    elif data.source == "database":
        flips = sum(1 for e in m.events if e.kind == "verdict_flip")
        parts.append(
            f"{len(m.events)} confirmed events in the period ({flips} verdict flips), "
            f"{m.raw_events} unconfirmed changes filtered out."
        )
        parts.append(certified_sentence(m))
    return " ".join(parts)


def certified_sentence(m: ModelReport) -> str:
    """The period's certified pages (pass <-> fail changes of a certified verdict: the
    ones with a false-page budget, docs/method.md section 11), and its first
    certifications (notices)."""
    pages = [e for e in m.certified_changes if e.old != "undetermined"]
    firsts = len(m.certified_changes) - len(pages)
    if not pages:
        head = "No certified page in the period"
    else:
        listed = "; ".join(
            f"{cell_label(e.metric, e.attribute)} {e.old} → {e.new} ({_when(e.at)}, "
            f"#{e.evaluation})"
            for e in pages
        )
        head = f"{len(pages)} certified page{'s' if len(pages) > 1 else ''}: {listed}"
    return f"{head} ({firsts} first certifications)."


def _severity(c: CellPoint, tau: float) -> int:
    """0: fails reliably (act on it); 1: fails, but the verdict is not reliable; 2: the rest."""
    if c.suppressed or c.dominant_verdict != "fail":
        return 2
    return 0 if cell_reliable(c, tau) else 1


def _rows_by_severity(m: ModelReport, data: ReportData) -> list[CellRow]:
    """Failing-and-reliable cells first (those that changed to fail in the period before
    the others), then failing unreliable ones, then worst tier first."""
    order = {c.key: k for k, c in enumerate(m.cells)}
    new_fails = {(x.metric, x.attribute) for x in model_changes(m, data) if x.to_fail}
    cells = sorted(
        m.cells,
        key=lambda c: (
            _severity(c, data.tau),
            c.key not in new_fails,  # a cell that changed to fail in the period leads
            -TIER_LEVEL.get(c.tier, -2),
            order[c.key],
        ),
    )
    return [cell_row(c, data) for c in cells]


def _model_view(m: ModelReport, data: ReportData) -> dict[str, Any]:
    metrics = [x for x in data.metrics if any(c.metric == x for c in m.cells)]
    attributes = [x for x in data.attributes if any(c.attribute == x for c in m.cells)]
    figs: list[tuple[str, str, Markup]] = []

    def add(title: str, caption: str, svg: str | None) -> None:
        if svg is not None:
            figs.append((title, caption, Markup(svg)))

    if any(m.history.values()):
        add(
            "Verdict flip rate over time",
            "How often the verdict flips when the window is resampled. Above the dashed line "
            f"({data.tau:.2f}) the verdict is unstable; triangles mark confirmed verdict flips, "
            "diamonds confirmed tier changes.",
            figures.vfr_over_time(m, metrics, attributes, data.tau),
        )
        add(
            "Metric value over time",
            "The observed value with its 95 % bootstrap interval (band) and the pass threshold "
            "(dashed). Where the band straddles the threshold, the verdict is a coin toss.",
            figures.value_over_time(m, metrics, attributes),
        )
    add(
        "Outcome coverage",
        "Share of each group's predictions whose outcome has arrived. The label-based cells "
        "(EOPP, EOD, PP, CAL, TI) are computed on those predictions only: where the groups' "
        "coverage differs by more than the configured gap (1 - lowest / highest) they say "
        f"'outcomes incomplete'. A group with fewer than {SMALL_CELL} predictions shows "
        f"{WITHHELD}.",
        coverage_figure.coverage_over_time(m, data.group_labels),
    )
    add(
        "Hospital agreement (Axis 3)",
        "Fleiss' kappa of each metric's verdicts over hospital folds, against the Landis-Koch "
        "bands; below the dashed cut-off hospitals disagree. Right: folds that pass, per cell.",
        figures.kappa_figure(m, attributes),
    )
    add(
        "Audit size needed (Axis 2)",
        "Coefficient of variation of each metric at growing audit sizes; N* is the first size "
        "under the dashed line. Curves that stay above it never settle within the data.",
        figures.n_star_figure(m, metrics, attributes, data.cv_cutoff, data.n_field),
    )
    add(
        "Matched-pair prediction differences (MPPD)",
        "Similar patients should get similar scores. Left: mean score gap between matched "
        f"patients of two groups (hatched {WITHHELD}: fewer than {SMALL_CELL} pairs; * under "
        "the minimum pairs for a stable mean). Right: each group against the reference group.",
        figures.mppd_figure(m, data.group_labels),
    )
    add(
        "Ingestion and model health",
        f"Records received per month, rounded to {ROUNDING_BASE}, and the model's "
        "discrimination (AUROC) on consecutive blocks of records; a month with fewer than "
        f"{SMALL_CELL} records shows {WITHHELD}, and so does the next smallest, so that the "
        "total minus the months shown gives no month.",
        figures.health_figure(m, data.dead_letters),
    )
    return {
        "id": m.model_id,
        "summary": model_summary(m, data),
        "grid": Markup(figures.tier_grid(m, metrics, attributes, data.tau)),
        "rows": _rows_by_severity(m, data),
        "events": event_lines(m, data),
        "n_flips": sum(1 for e in m.events if e.kind == "verdict_flip"),
        "figures": figs,
        "records": None if m.records is None else fmt_count(m.records),
        "evaluations": m.evaluations,
        "period": _period_line(m),
        "axes_note": m.axes_note,
        "axis3_note": (
            ""
            if m.axis3 is None or m.axis3.applicable
            else f"Hospital agreement not applicable: {m.axis3.reason}"
        ),
        "mppd_note": m.mppd_note,
        "mppd_basis": _mppd_headline(m),
    }


def _mppd_headline(m: ModelReport) -> str:
    """How MPPD was computed and, per attribute, its disparity (max - min against the
    reference), with the 95 % sampling interval when it was estimated on a sample."""
    parts = []
    for mp in m.mppd:
        if mp.disparity is None:
            continue
        pm = "" if mp.disparity_se is None else f" ± {Z95 * mp.disparity_se:.3f}"
        parts.append(f"{mp.attribute.replace('_', ' ')} {mp.disparity:.3f}{pm}")
    head = f"MPPD disparity (max - min): {'; '.join(parts)}. " if parts else ""
    return (head + m.mppd_basis).strip()


def _day_text(d: Any) -> str:
    return "" if d is None else f"{d:%Y-%m-%d}"


def _period_line(m: ModelReport) -> dict[str, str] | None:
    """What a period filter gave this model: its days, widened to whole release blocks of at
    least SMALL_CELL records, and their records (rounded, or withheld)."""
    p = m.period
    if p is None or not p.filtered:
        return None
    last = None if p.end is None else p.end - timedelta(days=1)
    frm = _day_text(p.start) or "its first record"
    to = _day_text(last) or "its latest record"
    records: int | str = encoded(p.records)
    text = (
        f"Period of this model: {frm} to {to}, {fmt_count(records)} records (the days asked "
        f"for, widened to whole blocks of at least {SMALL_CELL} records, so that no two "
        "reports differ by a few records)."
    )
    return {"from": _day_text(p.start), "to": _day_text(last), "text": text}


def compare_view(data: ReportData, a: str, b: str) -> dict[str, Any]:
    """Two models' grids and the cells whose verdict or tier differ between them."""
    ma, mb = data.model(a), data.model(b)
    changed = []
    for ca in ma.cells:
        cb = mb.cell(ca.metric, ca.attribute)
        if cb is None:
            continue
        if ca.tier != cb.tier or ca.dominant_verdict != cb.dominant_verdict:
            changed.append(
                (cell_label(ca.metric, ca.attribute), cell_row(ca, data), cell_row(cb, data))
            )
    metrics = [x for x in data.metrics if any(c.metric == x for c in ma.cells + mb.cells)]
    attributes = [x for x in data.attributes if any(c.attribute == x for c in ma.cells + mb.cells)]
    return {
        "a": a,
        "b": b,
        "grid_a": Markup(figures.tier_grid(ma, metrics, attributes, data.tau, f"cmp-a-{a}")),
        "grid_b": Markup(figures.tier_grid(mb, metrics, attributes, data.tau, f"cmp-b-{b}")),
        "changed": changed,
        "same": len(ma.cells) - len(changed),
    }


def _changes_view(attention: list[Attention]) -> dict[str, Any]:
    """The first screen: the period's changes to fail (one line each), the changes to pass
    (one line per model), the coin tosses, one line per model (those needing attention
    first) and, folded, the cells that fail reliably and did not change."""
    items = [x for a in attention for x in a.changes]
    to_pass = []
    for a in attention:
        mine = [x for x in a.changes if x.kind == "verdict_change" and not x.to_fail]
        if mine:
            cells = ", ".join(
                f"{cell_label(x.metric, x.attribute)}{'' if x.at is None else f' ({x.at:%B %Y})'}"
                for x in mine
            )
            to_pass.append((a.model_id, f"{a.model_id}: {cells}; stable since."))
    return {
        "to_fail": [x for x in items if x.to_fail],
        "to_pass": to_pass,
        "coin_tosses": [x for x in items if x.kind == "coin_toss"],
        "failing": [x for x in items if x.kind == "still_failing"],
        "withheld": [x for x in items if x.kind == "withheld"],
        "models": [
            (a.model_id, a.line, bool(a.changed_to_fail or a.failing_reliably)) for a in attention
        ],
    }


@functools.cache
def _env() -> Environment:
    """The page's Jinja2 environment, one per process: it keeps the compiled template (70 ms
    to compile, the page's largest part after its figures), so the status page, which
    renders the page again after new evaluations, compiles it once (Jinja2 reloads a
    template whose file changed)."""
    return Environment(
        loader=PackageLoader("monitor.report", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_data(
    data: ReportData,
    compare: tuple[str, str] | None = None,
    interventions: InterventionsView | None = None,
) -> str:
    """The HTML page of a ReportData (with a comparison section, and the interventions
    of ``vfr-monitor intervene``, when asked)."""
    period = (
        f"{data.period[0]:%Y-%m-%d} to {data.period[1]:%Y-%m-%d}"
        if data.period
        else "one audit cohort (no period)"
    )
    if data.days is not None:
        frm, to = (_day_text(d) for d in data.days)
        period += f" (filter: {frm or 'the start'} to {to or 'the end'}, whole UTC days)"
    cmp = None
    if compare is not None:
        for m in compare:
            data.model(m)  # KeyError names it
        cmp = compare_view(data, *compare)
    attention = [] if compare else period_changes(data)
    rank = {a.model_id: k for k, a in enumerate(attention)}
    ordered = sorted(data.models, key=lambda m: rank.get(m.model_id, 0))
    models = [] if compare else [_model_view(m, data) for m in ordered]
    return (
        _env()
        .get_template("report.html.j2")
        .render(
            d=data,
            period=period,
            generated=f"{data.generated_at:%Y-%m-%d %H:%M} UTC",
            models=models,
            at_a_glance=[(m.model_id, model_summary(m, data)) for m in ordered],
            changes=None if compare else _changes_view(attention),
            compare=cmp,
            interventions=interventions,
            small=SMALL_CELL,
            base=ROUNDING_BASE,
            tau=data.tau,
            n_field=f"{data.n_field:,}",
            cv=f"{data.cv_cutoff:.0%}",
        )
    )


def _read_database_file(
    path: str | Path,
    config: MonitorConfig | None,
    models: list[str] | None,
    since: date | str | None,
    until: date | str | None = None,
    generated_at: datetime | None = None,
) -> ReportData:
    """:func:`read_database` on a file opened read-only, closed again whatever happens."""
    conn = open_database(path)
    try:
        return read_database(
            conn, config, models=models, since=since, until=until, source_name=Path(path).name,
            generated_at=generated_at,
        )  # fmt: skip
    finally:
        conn.close()


def render_report(
    source: str | Path | duckdb.DuckDBPyConnection,
    *,
    config: MonitorConfig | None = None,
    models: list[str] | None = None,
    since: date | str | None = None,
    until: date | str | None = None,
    compare: tuple[str, str] | None = None,
    generated_at: datetime | None = None,
) -> str:
    """The report of a service's DuckDB file, as one self-contained HTML string.

    ``source``: a path (opened read-only) or an open connection/cursor, e.g. the
    service's ``store.cursor()`` (the service owns the file; only SELECTs are issued).
    ``since``/``until``: first and last UTC day of the period (whole days; see
    :func:`monitor.report.data.whole_day`). With ``compare=(A, B)`` the page holds the
    two models' grids and changed cells. ``generated_at``: the time in the header (None:
    now).
    """
    if isinstance(source, duckdb.DuckDBPyConnection):
        data = read_database(
            source, config, models=models, since=since, until=until, source_name="service",
            generated_at=generated_at,
        )  # fmt: skip
    else:
        data = _read_database_file(source, config, models, since, until, generated_at)
    if not data.models:
        raise ReportInputError("no model has any evaluated cell yet: nothing to report")
    return render_data(data, compare)


def report_file_name(
    model: str | None, period: tuple[datetime, datetime] | None, generated: datetime
) -> str:
    """report_<model|all>_<from>_<to>.html; an audit (no period) carries its date."""
    who = "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in (model or "all"))
    if period is None:
        return f"report_{who}_audit_{generated:%Y-%m-%d}.html"
    return f"report_{who}_{period[0]:%Y-%m-%d}_{period[1]:%Y-%m-%d}.html"


def unused_path(path: Path) -> Path:
    """``path`` if free, else the first free ``stem-2.html``, ``stem-3.html`` ..."""
    if not path.exists():
        return path
    k = 2
    while True:
        candidate = path.with_name(f"{path.stem}-{k}{path.suffix}")
        if not candidate.exists():
            return candidate
        k += 1


def write_report(
    *,
    db: str | Path | None = None,
    audit_dir: str | Path | None = None,
    audit: PublishedAudit | None = None,
    out: str | Path | None = None,
    models: list[str] | None = None,
    since: date | str | None = None,
    until: date | str | None = None,
    compare: tuple[str, str] | None = None,
    config: MonitorConfig | None = None,
    interventions: str | Path | None = None,
    figure_cache: str | Path | None = None,
    generated_at: datetime | None = None,
) -> tuple[Path, str | None]:
    """Render and write a report; returns the path written and a note when it was renamed.

    The data: a DuckDB file (``db``), an audit directory (``audit_dir``) or an audit's
    published results in memory (``audit``: :meth:`monitor.audit.run.AuditReport.published`,
    what :meth:`monitor.audit.frame.FrameAudit.report` passes), exactly one of them.
    ``out``: a file, a directory, or None (the current directory). In a directory the
    name carries the model(s) and the period; an existing file is never overwritten:
    the first free ``-2``, ``-3`` ... suffix is used, and the note says so.
    ``figure_cache``: a directory where each figure's SVG is kept under a hash of its
    data (:class:`monitor.report.figures.FigureCache`), so a report written again from
    unchanged data draws no figure. ``generated_at``: the time in the header and, for an
    audit, in the file name (None: now).
    """
    if sum(x is not None for x in (db, audit_dir, audit)) != 1:
        raise ReportInputError("give exactly one of --db FILE or --audit-dir DIR")
    if db is not None:
        data = _read_database_file(db, config, models, since, until, generated_at)
    elif audit_dir is not None:
        data = read_audit_dir(audit_dir, config, models=models, generated_at=generated_at)
    else:
        data = read_audit(audit, config, models=models, generated_at=generated_at)  # type: ignore[arg-type]  # the one given: checked
    if not data.models:
        raise ReportInputError("no model has any evaluated cell yet: nothing to report")
    if compare is not None:
        for m in compare:
            if m not in [x.model_id for x in data.models]:
                names = ", ".join(x.model_id for x in data.models)
                raise ReportInputError(f"--compare {m}: no such model; models: {names}")
    cache = (
        figures.active_cache()
        if figure_cache is None
        else figures.FigureCache(directory=figure_cache)
    )
    with figures.using_cache(cache):
        html = render_data(
            data, compare, None if interventions is None else read_interventions(interventions)
        )
    who = (
        f"{compare[0]}-vs-{compare[1]}"
        if compare
        else (models[0] if models and len(models) == 1 else None)
    )
    name = report_file_name(who, data.period, data.generated_at)
    target = Path(out) if out is not None else Path.cwd()
    if target.is_dir() or (out is not None and str(out).endswith(("/", "\\"))):
        target.mkdir(parents=True, exist_ok=True)
        target = target / name
    target.parent.mkdir(parents=True, exist_ok=True)
    final = unused_path(target)
    note = None
    if final != target:
        note = f"{target} exists: written to {final} instead (reports are never overwritten)"
    # exclusive create: a report written meanwhile by another run is not overwritten either
    with final.open("x", encoding="utf-8") as f:
        f.write(html)
    return final, note
