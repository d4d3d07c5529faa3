"""The report's figures: matplotlib (Agg) drawn straight to inline SVG strings.

No file, no CDN, no script: each function returns an ``<svg>`` element to put in the
page. Text stays text (``svg.fonttype = none``), so the page is searchable, prints
sharply and stays small. Colours are Okabe-Ito (safe for colour-blind readers) and
every coloured cell also carries a text label. Values withheld by the small-cell
rule arrive as ``None`` (see :mod:`monitor.report.data`) and are drawn as "<11".
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Sequence
from datetime import datetime

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from batch_axes.axis3 import LANDIS_KOCH
from batch_axes.mppd_sample import Z95
from monitor.core.explain import tier_name
from monitor.core.privacy import SMALL_CELL_LABEL as WITHHELD
from monitor.report.data import (
    WITHHELD_TIER,
    CellPoint,
    EventRow,
    ModelReport,
)

#: Okabe-Ito colours per tier (worse is warmer); Pending is neutral grey.
TIER_COLOURS = {
    "Practical-Stability": "#009E73",
    "Caution-Required": "#F0E442",
    "High-Variance": "#E69F00",
    "Catastrophic-Instability": "#D55E00",
    "Pending": "#C8C8C8",
}
TIER_ORDER = tuple(TIER_COLOURS)
#: A cell whose tier is withheld (small-cell rule): white, so no colour says a tier.
WITHHELD_COLOUR = "#FFFFFF"
BLUE, SKY, PURPLE, BLACK = "#0072B2", "#56B4E9", "#CC79A7", "#000000"
LINE_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")

_RC = {
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _styled(fn):
    """Run a figure function inside the report's matplotlib style (titles, ticks, fonts)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with plt.rc_context(_RC):
            return fn(*args, **kwargs)

    return wrapper


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def to_svg(fig: Figure, name: str, label: str) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog, no metadata, unique ids).

    ``name`` salts matplotlib's element ids, so two figures on one page never share
    a clip-path id; ``label`` is the figure's accessible name.
    """
    buf = io.StringIO()
    with plt.rc_context({**_RC, "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    # every id unique on the page: matplotlib numbers its groups per figure (axes_1 ...)
    prefix = _slug(name)
    svg = re.sub(
        r'\bid="([^"]+)"',
        lambda m: m.group(0) if m.group(1).startswith("tier--") else f'id="{prefix}-{m.group(1)}"',
        svg,
    )
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", svg)
    svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}-{m.group(1)}"', svg)
    safe = label.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    svg = re.sub(
        r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"',
        lambda m: (
            f'<svg{m.group(1)} width="{m.group(2)}pt" height="{m.group(3)}pt" '
            f'role="img" aria-label="{safe}" class="fig" id="fig-{_slug(name)}"'
        ),
        svg,
        count=1,
    )
    return svg


def _figure(w: float, h: float) -> Figure:
    with plt.rc_context(_RC):
        return plt.figure(figsize=(w, h))


# --------------------------------------------------------------------------- tier grid


@_styled
def tier_grid(
    model: ModelReport,
    metrics: Sequence[str],
    attributes: Sequence[str],
    tau: float,
    name: str | None = None,
) -> str:
    """Metric rows x attribute columns, coloured by tier, with tier, verdict and VFR in text.

    Each cell's rectangle has the SVG id ``tier--<model>--<metric>--<attribute>--<tier>``
    (tests compare it with the database); a withheld cell's tier reads ``Withheld``.
    """
    with plt.rc_context(_RC):
        fig = _figure(1.0 + 1.6 * len(attributes), 0.5 + 0.55 * len(metrics))
        ax = fig.add_subplot()
    ax.set_xlim(0, len(attributes))
    ax.set_ylim(len(metrics), 0)
    for i, metric in enumerate(metrics):
        for j, attr in enumerate(attributes):
            c = model.cell(metric, attr)
            tier = c.tier if c is not None else "Pending"
            withheld = tier == WITHHELD_TIER
            colour = WITHHELD_COLOUR if withheld else TIER_COLOURS.get(tier, "#fff")
            edge = "#999999" if withheld else colour
            rect = Rectangle((j + 0.03, i + 0.05), 0.94, 0.9, facecolor=colour, edgecolor=edge)
            token = "Withheld" if withheld else tier
            rect.set_gid(_slug(f"tier--{model.model_id}--{metric}--{attr}--{token}"))
            ax.add_patch(rect)
            if c is None:
                top, bottom = "no result", ""
            elif c.suppressed:
                top, bottom = "withheld", f"n {WITHHELD}"
            elif withheld:  # figures shown, tier withheld (a scheduled axis's cohort < 11)
                verdict = c.dominant_verdict or "undefined"
                top, bottom = f"tier {WITHHELD}", verdict
            else:
                verdict = c.dominant_verdict or "undefined"
                vfr = "VFR n/a" if c.vfr is None else f"VFR {c.vfr:.2f}"
                mark = " (!)" if c.vfr is not None and c.vfr > tau else ""
                top, bottom = tier_name(tier), f"{verdict} · {vfr}{mark}"
            ax.text(j + 0.5, i + 0.36, top, ha="center", va="center", fontsize=9.5, weight="bold")
            ax.text(j + 0.5, i + 0.7, bottom, ha="center", va="center", fontsize=8.5)
    ax.set_xticks([j + 0.5 for j in range(len(attributes))], list(attributes), fontsize=9)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(metrics))], list(metrics), fontsize=9, weight="bold")
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    return to_svg(
        fig, name or f"grid-{model.model_id}", f"Tier grid of {model.model_id}: metric by attribute"
    )


# --------------------------------------------------------------------------- time series


def _grid_axes(n_rows: int, n_cols: int, w: float, h: float) -> tuple[Figure, list[list]]:
    with plt.rc_context(_RC):
        fig = _figure(w, h)
        axes = fig.subplots(n_rows, n_cols, sharex=True, squeeze=False)
    return fig, [list(r) for r in axes]


def _dates(ax) -> None:
    loc = mdates.AutoDateLocator(minticks=2, maxticks=4)
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))


def _series(points: Sequence[CellPoint], get) -> tuple[list[datetime], list[float]]:
    """x and y of a panel; a withheld or undefined point is a gap (NaN), never a value."""
    xs, ys = [], []
    for p in points:
        if p.at is None:
            continue
        v = get(p)
        ok = not p.suppressed and v is not None and math.isfinite(v)
        xs.append(p.at)
        ys.append(v if ok else math.nan)
    return xs, ys


def _event_marks(ax, points: Sequence[CellPoint], events: Sequence[EventRow], get) -> None:
    by_eval = {p.evaluation: p for p in points}
    for e in events:
        p = by_eval.get(e.evaluation)
        if p is None or p.at is None or p.suppressed or get(p) is None:
            continue
        if e.kind == "verdict_flip":
            ax.plot([p.at], [get(p)], marker="v", color=BLACK, ms=6, ls="none", zorder=5)
        else:
            colour = TIER_COLOURS.get(e.new, BLACK)
            ax.plot(
                [p.at], [get(p)], marker="D", mfc=colour, mec=BLACK, ms=4.5, ls="none", zorder=5
            )


def _small_multiples(
    model: ModelReport,
    metrics: Sequence[str],
    attributes: Sequence[str],
    draw,
    name: str,
    label: str,
    ylabel: str,
    sharey: bool,
) -> str:
    n_r, n_c = len(metrics), len(attributes)
    fig, axes = _grid_axes(n_r, n_c, 1.75 * n_c + 0.6, 0.95 * n_r + 0.6)
    for i, metric in enumerate(metrics):
        for j, attr in enumerate(attributes):
            ax = axes[i][j]
            points = model.history.get((metric, attr), [])
            events = [e for e in model.events if (e.metric, e.attribute) == (metric, attr)]
            shown = [p for p in points if not p.suppressed and p.at is not None]
            if not shown:
                msg = WITHHELD if any(p.suppressed for p in points) else "no data"
                ax.text(0.5, 0.5, msg, transform=ax.transAxes, ha="center", va="center")
            else:
                draw(ax, points, events)
                _dates(ax)
            if i == 0:
                ax.set_title(attr.replace("_", " "))
            if j == 0:
                ax.set_ylabel(metric, rotation=0, ha="right", va="center", weight="bold")
            ax.tick_params(labelsize=6)
    fig.supylabel(ylabel, x=0.0, fontsize=7)
    fig.subplots_adjust(hspace=0.35, wspace=0.3)
    del sharey
    return to_svg(fig, name, label)


@_styled
def vfr_over_time(model: ModelReport, metrics, attributes, tau: float) -> str:
    """VFR per cell over the period, with the tau line and marks at confirmed events."""

    def draw(ax, points, events):
        xs, ys = _series(points, lambda p: p.vfr)
        ax.plot(xs, ys, color=BLUE, lw=1.1)
        ax.axhline(tau, color=PURPLE, lw=0.9, ls="--")
        ax.axhspan(tau, 0.5, color="#D55E00", alpha=0.07, lw=0)
        _event_marks(ax, points, events, lambda p: p.vfr)
        ax.set_ylim(0, 0.5)

    return _small_multiples(
        model,
        metrics,
        attributes,
        draw,
        f"vfr-{model.model_id}",
        f"Verdict flip rate over time, {model.model_id}",
        f"verdict flip rate (dashed: tau {tau:.2f}; shaded: unstable)",
        True,
    )


@_styled
def value_over_time(model: ModelReport, metrics, attributes) -> str:
    """The observed value per cell with its bootstrap interval band and the pass threshold."""

    def draw(ax, points, events):
        xs, ys = _series(points, lambda p: p.value)
        lo_x, lo = _series(points, lambda p: p.ci_low)
        _, hi = _series(points, lambda p: p.ci_high)
        ax.fill_between(lo_x, lo, hi, color=SKY, alpha=0.35, lw=0)
        ax.plot(xs, ys, color=BLUE, lw=1.1)
        p0 = points[-1]
        ax.axhline(p0.threshold, color=PURPLE, lw=0.9, ls="--")
        if p0.direction.startswith("abs"):
            ax.axhline(-p0.threshold, color=PURPLE, lw=0.9, ls="--")
        _event_marks(ax, points, events, lambda p: p.value)

    return _small_multiples(
        model,
        metrics,
        attributes,
        draw,
        f"value-{model.model_id}",
        f"Metric value over time with its bootstrap interval, {model.model_id}",
        "value (band: 95 % bootstrap interval; dashed: pass threshold)",
        False,
    )


# --------------------------------------------------------------------------- axis 3, axis 2


@_styled
def kappa_figure(model: ModelReport, attributes: Sequence[str]) -> str | None:
    """Fleiss' kappa per metric against the Landis-Koch bands; folds passing per cell."""
    a3 = model.axis3
    if a3 is None or not a3.applicable or not a3.metrics:
        return None
    metrics = [m.metric for m in a3.metrics]
    with plt.rc_context(_RC):
        fig = _figure(7.4, 0.45 * len(metrics) + 1.0)
        ax, hm = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.2, 1]})
    shades = ("#F2F2F2", "#E4E4E4", "#F2F2F2", "#E4E4E4", "#F2F2F2", "#E4E4E4")
    bounds = [*(lo for lo, _ in LANDIS_KOCH), 1.0]
    for k, (lo, band) in enumerate(LANDIS_KOCH):
        lo_ = max(lo, -0.2)
        ax.axvspan(lo_, bounds[k + 1], color=shades[k], lw=0)
        ax.text((lo_ + bounds[k + 1]) / 2, -0.75, band, ha="center", va="bottom", fontsize=6)
    ys = range(len(metrics))
    for y, m in zip(ys, a3.metrics, strict=True):
        if m.kappa is None:
            ax.text(0.02, y, "undefined", va="center", fontsize=7)
            continue
        colour = "#D55E00" if m.fails else "#009E73"
        ax.barh(y, m.kappa, color=colour, height=0.6)
        note = " (all folds agree trivially)" if m.degenerate else ""
        ax.text(max(m.kappa, 0) + 0.02, y, f"{m.kappa:.2f}{note}", va="center", fontsize=7)
    ax.axvline(a3.kappa_cutoff, color=BLACK, ls="--", lw=0.9)
    ax.set_yticks(list(ys), metrics)
    ax.set_ylim(len(metrics) - 0.5, -0.8)
    ax.set_xlim(-0.2, 1.0)
    ax.set_xlabel(f"Fleiss' kappa over {a3.n_folds} hospital folds (dashed: {a3.kappa_cutoff:.2f})")
    # per-fold verdict counts: folds that pass, per metric x attribute
    hm.set_xlim(0, len(attributes))
    hm.set_ylim(len(metrics) - 0.5, -0.8)
    for i, m in enumerate(a3.metrics):
        for j, attr in enumerate(attributes):
            got = m.pass_folds.get(attr)
            if got is None:
                continue
            n_pass, n = got
            share = n_pass / n if n else 0.0
            hm.add_patch(
                Rectangle(
                    (j + 0.03, i - 0.42), 0.94, 0.84, color=BLUE, alpha=0.12 + 0.6 * share, lw=0
                )
            )
            hm.text(j + 0.5, i, f"{n_pass}/{n}", ha="center", va="center", fontsize=7)
    hm.set_xticks(
        [j + 0.5 for j in range(len(attributes))], [a.replace("_", " ") for a in attributes]
    )
    hm.set_yticks([])
    hm.tick_params(length=0)
    hm.set_title("hospital folds whose verdict is pass", fontsize=7)
    for s in hm.spines.values():
        s.set_visible(False)
    fig.subplots_adjust(wspace=0.08)
    return to_svg(fig, f"kappa-{model.model_id}", f"Hospital agreement, {model.model_id}")


@_styled
def n_star_figure(
    model: ModelReport,
    metrics: Sequence[str],
    attributes: Sequence[str],
    cv_cutoff: float,
    n_field: int,
) -> str | None:
    """CV of each metric against audit size, per attribute; N* where it crosses the cut-off."""
    if not model.n_star:
        return None
    present = [m for m in metrics if any(c.metric == m for c in model.n_star)]
    n_c = min(4, len(present))
    n_r = math.ceil(len(present) / n_c)
    with plt.rc_context(_RC):
        fig = _figure(1.9 * n_c + 0.6, 1.45 * n_r + 0.7)
        axes = fig.subplots(n_r, n_c, squeeze=False, sharey=True)
    colours = {a: LINE_COLOURS[k % len(LINE_COLOURS)] for k, a in enumerate(attributes)}
    top = 0.3
    for k, metric in enumerate(present):
        ax = axes[k // n_c][k % n_c]
        for cur in (c for c in model.n_star if c.metric == metric):
            xs = [p.size for p in cur.curve]
            ys = [min(p.cv, top) for p in cur.curve]  # cv is inf where not computable
            ax.plot(
                xs,
                ys,
                marker="o",
                ms=2.5,
                lw=1,
                color=colours.get(cur.attribute, BLACK),
                label=cur.attribute.replace("_", " "),
            )
            if cur.reached:
                ax.plot(
                    [cur.n_star],
                    [cv_cutoff],
                    marker="*",
                    ms=8,
                    color=colours.get(cur.attribute, BLACK),
                )
        ax.axhline(cv_cutoff, color=PURPLE, ls="--", lw=0.9)
        ax.axvline(n_field, color=BLACK, ls=":", lw=0.9)
        ax.set_xscale("log")
        ax.set_ylim(0, top)
        ax.set_title(metric, weight="bold")
        ax.set_xlabel("audit size (records)", fontsize=6)
    for k in range(len(present), n_r * n_c):
        axes[k // n_c][k % n_c].axis("off")
    axes[0][0].set_ylabel(f"CV (dashed {cv_cutoff:.0%}; capped at {top:.0%})")
    handles, labels = axes[0][0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color=BLACK, ls=":"))
    labels.append(f"N_field {n_field:,}")
    handles.append(plt.Line2D([], [], marker="*", color=BLACK, ls="none"))
    labels.append("N* (first size under the cut-off)")
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=len(labels),
        frameon=False,
        bbox_to_anchor=(0.5, -0.06),
    )
    fig.subplots_adjust(hspace=0.6, wspace=0.12)
    return to_svg(fig, f"nstar-{model.model_id}", f"Audit size curves, {model.model_id}")


# --------------------------------------------------------------------------- MPPD


@_styled
def mppd_figure(model: ModelReport, group_labels: dict[str, dict[str, str]]) -> str | None:
    """Per attribute: pairwise MPPD heatmap (mean, pairs) and the reference-based bars."""
    if not model.mppd:
        return None
    n = len(model.mppd)
    with plt.rc_context(_RC):
        fig = _figure(7.4, 2.5 * n + 0.3)
        axes = fig.subplots(n, 2, squeeze=False, gridspec_kw={"width_ratios": [1.3, 1]})
    for row, mp in enumerate(model.mppd):
        labels = group_labels.get(mp.attribute, {})
        names = [labels.get(g, g) for g in mp.groups]
        hm, bar = axes[row]
        k = len(mp.groups)
        vals = [v for r in mp.means for v in r if v is not None]
        vmax = max(vals) if vals else 1.0
        for i in range(k):
            for j in range(k):
                mean, pairs = mp.means[i][j], mp.pairs[i][j]
                if pairs is None:
                    hm.add_patch(
                        Rectangle(
                            (j, i), 1, 1, facecolor="#FFFFFF", edgecolor="#999", hatch="///", lw=0.3
                        )
                    )
                    hm.text(j + 0.5, i + 0.5, WITHHELD, ha="center", va="center", fontsize=7)
                    continue
                shade = 0.1 + 0.75 * ((mean or 0) / vmax if vmax else 0)
                hm.add_patch(Rectangle((j, i), 1, 1, facecolor=BLUE, alpha=shade, lw=0))
                low = "*" if mp.low_support[i][j] else ""
                txt = "n/a" if mean is None else f"{mean:.3f}{low}"
                hm.text(j + 0.5, i + 0.42, txt, ha="center", va="center", fontsize=7)
                hm.text(
                    j + 0.5, i + 0.72, f"{pairs:,} pairs", ha="center", va="center", fontsize=5.5
                )
        hm.set_xlim(0, k)
        hm.set_ylim(k, 0)
        hm.set_xticks([j + 0.5 for j in range(k)], names, rotation=20, ha="right", fontsize=6)
        hm.set_yticks([i + 0.5 for i in range(k)], names, fontsize=6)
        hm.set_title(
            f"{mp.attribute.replace('_', ' ')}: mean |score gap| of matched pairs "
            "(row: anchor group)",
            fontsize=7,
        )
        for s in hm.spines.values():
            s.set_visible(False)
        ys = list(range(len(mp.bars)))
        for y, b in zip(ys, mp.bars, strict=True):
            if b.suppressed or b.mean is None:
                bar.text(
                    0.001,
                    y,
                    WITHHELD if b.suppressed else "no matched pairs",
                    va="center",
                    fontsize=7,
                )
                continue
            colour = BLACK if b.group == mp.reference else (PURPLE if b.low_support else BLUE)
            bar.barh(y, b.mean, color=colour, height=0.6)
            gap = "reference" if b.group == mp.reference else f"{b.gap:+.3f}"
            pm = "" if b.se is None else f" ± {Z95 * b.se:.3f}"  # on a sample: 95 % interval
            bar.text(b.mean, y, f" {b.mean:.3f}{pm} ({gap})", va="center", fontsize=6)
        bar.set_yticks(ys, [labels.get(b.group, b.group) for b in mp.bars], fontsize=6)
        bar.set_ylim(len(ys) - 0.5, -0.5)
        ref = labels.get(mp.reference or "", mp.reference or "none")
        bar.set_title(f"against the reference group ({ref})", fontsize=7)
        bar.set_xlim(0, (vmax or 1) * 1.45)
    fig.subplots_adjust(hspace=0.75, wspace=0.55)
    return to_svg(
        fig, f"mppd-{model.model_id}", f"Matched-pair prediction differences, {model.model_id}"
    )


# --------------------------------------------------------------------------- health


@_styled
def health_figure(model: ModelReport, dead_letters: int | str | None) -> str | None:
    """Records per month (withheld months: <11) and the rolling AUROC, when there are any."""
    if not model.volume and not model.auroc:
        return None
    panels = [p for p in ("volume", "auroc") if getattr(model, p)]
    with plt.rc_context(_RC):
        fig = _figure(3.7 * len(panels), 1.9)
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, p in zip(axes, panels, strict=True):
        if p == "volume":
            xs = list(range(len(model.volume)))
            for x, v in zip(xs, model.volume, strict=True):
                if v.records is None:
                    ax.text(x, 0, WITHHELD, ha="center", va="bottom", fontsize=6)
                else:
                    ax.bar(x, v.records, color=BLUE, width=0.75)
            step = max(1, len(xs) // 8)
            ax.set_xticks(
                xs[::step], [v.month for v in model.volume][::step], rotation=30, ha="right"
            )
            shown = f"{dead_letters:,}" if isinstance(dead_letters, int) else dead_letters
            extra = "" if dead_letters is None else f"; dead letters (all models): {shown}"
            ax.set_title(f"records per month (event time){extra}")
        else:
            ax.plot(
                [a.records for a in model.auroc], [a.auroc for a in model.auroc], color=BLUE, lw=1
            )
            ax.set_ylim(0.5, 1.0)
            ax.set_xlabel("records received")
            ax.set_title("model health: AUROC of each block of records")
    fig.subplots_adjust(wspace=0.3)
    return to_svg(fig, f"health-{model.model_id}", f"Ingestion and model health, {model.model_id}")
