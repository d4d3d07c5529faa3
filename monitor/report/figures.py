"""The report's figures, written as inline SVG straight from the data (no matplotlib).

No file, no CDN, no script: each function returns an ``<svg>`` element to put in the
page. Text stays text, so the page is searchable, prints sharply and stays small.
Colours are Okabe-Ito (safe for colour-blind readers) and every coloured cell also
carries a text label. Values withheld by the small-cell rule arrive as ``None`` (see
:mod:`monitor.report.data`) and are drawn as "<11".

Why written directly: matplotlib took 12 of the 12.1 s the demo's page took,
almost all of it laying out the ticks of the 2 x 28 small multiples; the figures are
lines, bars, rectangles and text, which :mod:`monitor.report.svg` writes in milliseconds.
The figures keep their titles, axis labels, tick labels, legends, marks and accessible
names, and matplotlib's element ids (see :mod:`monitor.report.svg`).

Why cached: the status page is redrawn after new evaluations, and most figures (Axis 2,
Axis 3, MPPD; every figure of a model that got no record) have the same input as in the
last drawing. :data:`CACHE` keeps each figure's SVG under a hash of its inputs and of
this code, so an unchanged figure is not drawn again (:class:`FigureCache`).
"""

from __future__ import annotations

import functools
import hashlib
import math
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from batch_axes.axis3 import LANDIS_KOCH
from batch_axes.mppd_sample import Z95
from monitor.core.explain import tier_name
from monitor.core.locks import named_lock
from monitor.publish.points import WITHHELD_TIER
from monitor.publish.rule import SMALL_CELL_LABEL as WITHHELD
from monitor.report.data import (
    CellPoint,
    EventRow,
    ModelReport,
)
from monitor.report.svg import (
    PT,
    Axes,
    Canvas,
    date_ticks,
    log_ticks,
    nice_ticks,
    slug,
    text_width,
    tick_label,
    timestamp,
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
#: A failing verdict: a pale red tile with a dark red edge and "FAIL", whatever its tier,
#: so no failing cell reads as "fine"; its tier shows as a strip in the tier's colour.
FAIL_FILL, FAIL_INK = "#FBE3E0", "#A50F15"
BLUE, SKY, PURPLE, BLACK = "#0072B2", "#56B4E9", "#CC79A7", "#000000"
LINE_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")


def _slug(text: str) -> str:
    """An id-safe form of a name (the tier grid's ids; the tests build them the same way)."""
    return slug(text)


# --------------------------------------------------------------------------- the cache

#: This module's and the SVG writer's code: a cached figure of other code is not reused.
_CODE = hashlib.blake2b(
    b"".join(Path(p).read_bytes() for p in (__file__, Path(__file__).with_name("svg.py"))),
    digest_size=16,
).hexdigest()


class FigureCache:
    """SVG strings under a hash of the figure's kind, its inputs and this code.

    In memory (up to ``max_bytes`` of SVG text, least recently used dropped first: the
    demo's 14 figures are about 0.8 MB, so the default keeps a fleet of some 150 models),
    and, with
    ``directory``, also as ``<hash>.svg`` files there, so a report written again from the
    same data draws nothing. A figure holds only what the page shows (withheld values are
    already ``<11``), and its file name is a hash: the directory holds nothing the page
    does not. Thread-safe: the status page and a view may draw at once.
    """

    def __init__(self, max_bytes: int = 64 << 20, directory: str | Path | None = None):
        self.max_bytes = max_bytes
        self.directory = None if directory is None else Path(directory)
        self._lock = named_lock("figures")
        self._svgs: OrderedDict[str, str] = OrderedDict()
        self._bytes = 0
        #: figures drawn and figures served from the cache (tests and the bench read them)
        self.drawn = 0
        self.hits = 0

    @staticmethod
    def key(kind: str, inputs: Any) -> str:
        """The hash of a figure's inputs (their pickle: every field, in order)."""
        blob = pickle.dumps((_CODE, kind, inputs), protocol=pickle.HIGHEST_PROTOCOL)
        return hashlib.blake2b(blob, digest_size=20).hexdigest()

    def get(self, key: str) -> str | None:
        with self._lock:
            svg = self._svgs.get(key)
            if svg is not None:
                self._svgs.move_to_end(key)
                self.hits += 1
                return svg
        if self.directory is not None:
            path = self.directory / f"{key}.svg"
            if path.is_file():
                svg = path.read_text(encoding="utf-8")
                self._remember(key, svg)
                with self._lock:
                    self.hits += 1
                return svg
        return None

    def put(self, key: str, svg: str) -> None:
        self._remember(key, svg)
        with self._lock:
            self.drawn += 1
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f".{key}.{threading.get_ident()}.tmp"
            tmp.write_text(svg, encoding="utf-8")
            tmp.replace(self.directory / f"{key}.svg")

    def _remember(self, key: str, svg: str) -> None:
        with self._lock:
            old = self._svgs.pop(key, None)
            self._bytes += len(svg) - (0 if old is None else len(old))
            self._svgs[key] = svg
            while self._bytes > self.max_bytes and len(self._svgs) > 1:
                _, dropped = self._svgs.popitem(last=False)
                self._bytes -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._svgs.clear()
            self._bytes = 0
            self.drawn = self.hits = 0


#: The process's cache: the service's page renderer and every report drawn in it.
CACHE = FigureCache()
_local = threading.local()


def active_cache() -> FigureCache:
    """The cache figures use on this thread (:data:`CACHE` unless :func:`using_cache`)."""
    return getattr(_local, "cache", None) or CACHE


class using_cache:  # noqa: N801 (a context manager, used as ``with using_cache(c):``)
    """Draw this thread's figures through ``cache`` (e.g. one with a directory)."""

    def __init__(self, cache: FigureCache):
        self.cache = cache

    def __enter__(self) -> FigureCache:
        self._before = getattr(_local, "cache", None)
        _local.cache = self.cache
        return self.cache

    def __exit__(self, *exc: object) -> None:
        _local.cache = self._before


def _cached(
    inputs: Callable[..., Any],
) -> Callable[[Callable[..., str | None]], Callable[..., str | None]]:
    """Memoise a figure function on ``inputs(*args, **kwargs)``: exactly the data the
    figure is drawn from (not the whole model), so a figure whose data did not change is
    served from the cache whatever else changed."""

    def wrap(fn: Callable[..., str | None]) -> Callable[..., str | None]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> str | None:
            cache = active_cache()
            key = cache.key(fn.__name__, inputs(*args, **kwargs))
            got = cache.get(key)
            if got is not None:
                return got
            svg = fn(*args, **kwargs)
            if svg is not None:
                cache.put(key, svg)
            return svg

        return wrapper

    return wrap


# --------------------------------------------------------------------------- tier grid


def _grid_inputs(model, metrics, attributes, tau, name=None):
    cells = tuple(model.cell(m, a) for m in metrics for a in attributes)
    return model.model_id, tuple(metrics), tuple(attributes), tau, name, cells


@_cached(_grid_inputs)
def tier_grid(
    model: ModelReport,
    metrics: Sequence[str],
    attributes: Sequence[str],
    tau: float,
    name: str | None = None,
) -> str:
    """Metric rows x attribute columns, coloured by tier, with tier, verdict and VFR in text.

    Each cell's rectangle is in a ``<g>`` whose id is
    ``tier--<model>--<metric>--<attribute>--<tier>`` (tests compare it with the
    database); a withheld cell's tier reads ``Withheld``.
    """
    col, row = 1.6 * PT, 0.55 * PT
    left = max((text_width(m, 9, True) for m in metrics), default=0) + 10
    top = 20.0
    c = Canvas(
        name or f"grid-{model.model_id}",
        f"Tier grid of {model.model_id}: metric by attribute",
        left + col * len(attributes) + 8,
        top + row * len(metrics) + 6,
    )
    ax = Axes(c, left, top, col * len(attributes), row * len(metrics),
              (0, len(attributes)), (len(metrics), 0))  # fmt: skip
    with ax.body():
        for i, metric in enumerate(metrics):
            for j, attr in enumerate(attributes):
                _grid_cell(c, ax, model, metric, attr, i, j, tau)
        ax.xticks([j + 0.5 for j in range(len(attributes))], list(attributes), size=9,
                  top=True, marks=False)  # fmt: skip
        ax.yticks([i + 0.5 for i in range(len(metrics))], list(metrics), size=9,
                  marks=False, bold=True)  # fmt: skip
    return c.svg()


def _grid_cell(
    c: Canvas, ax: Axes, model: ModelReport, metric: str, attr: str, i: int, j: int, tau: float
) -> None:
    cell = model.cell(metric, attr)
    tier = cell.tier if cell is not None else "Pending"
    withheld = tier == WITHHELD_TIER
    fails = cell is not None and not cell.suppressed and cell.dominant_verdict == "fail"
    colour = WITHHELD_COLOUR if withheld else TIER_COLOURS.get(tier, "#FFFFFF")
    edge = "#999999" if withheld else colour
    token = "Withheld" if withheld else tier
    c.add(f'<g id="{_slug(f"tier--{model.model_id}--{metric}--{attr}--{token}")}">')
    x0, y0 = ax.px(j + 0.03), ax.py(i + 0.05)
    w, h = ax.px(j + 0.97) - x0, ax.py(i + 0.95) - y0
    if fails:  # the verdict first: pale red, dark red edge; the tier a strip on the left
        c.rect(x0, y0, w, h, FAIL_FILL, edge=FAIL_INK, edge_width=2.0)
        if not withheld:
            c.rect(x0 + 1, y0 + 1, 0.09 * w, h - 2, colour)
    else:
        c.rect(x0, y0, w, h, colour, edge=edge)
    c.add("</g>")
    ink = "#000000"
    if cell is None:
        top, bottom = "no result", ""
    elif cell.suppressed:
        top, bottom = "withheld", f"n {WITHHELD}"
    elif withheld:  # figures shown, tier withheld (a scheduled axis's cohort < 11)
        top, bottom = f"tier {WITHHELD}", cell.dominant_verdict or "undefined"
        if fails:
            top, bottom, ink = "FAIL", f"tier {WITHHELD}", FAIL_INK
    else:
        verdict = cell.dominant_verdict or "undefined"
        vfr = "VFR n/a" if cell.vfr is None else f"VFR {cell.vfr:.2f}"
        mark = " (!)" if cell.vfr is not None and cell.vfr > tau else ""
        top, bottom = tier_name(tier), f"{verdict} · {vfr}{mark}"
        if fails:
            top, bottom, ink = "FAIL", f"{tier_name(tier)} · {vfr}{mark}", FAIL_INK
    c.text(ax.px(j + 0.5), ax.py(i + 0.36), top, 9.5, bold=True, colour=ink)
    if bottom:
        c.text(ax.px(j + 0.5), ax.py(i + 0.7), bottom, 8.5)


# --------------------------------------------------------------------------- time series


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


def _event_marks(ax: Axes, points: Sequence[CellPoint], events: Sequence[EventRow], get) -> None:
    by_eval = {p.evaluation: p for p in points}
    for e in events:
        p = by_eval.get(e.evaluation)
        if p is None or p.at is None or p.suppressed or get(p) is None:
            continue
        x, y = timestamp(p.at), get(p)
        if e.kind == "verdict_flip":
            ax.marker(x, y, "v", BLACK, 6)
        else:
            ax.marker(x, y, "D", TIER_COLOURS.get(e.new, BLACK), 4.5)


def _history_inputs(model, metrics, attributes, *rest):
    keys = [(m, a) for m in metrics for a in attributes]
    cells = tuple((k, tuple(model.history.get(k, ()))) for k in keys)
    wanted = set(keys)
    events = tuple(e for e in model.events if (e.metric, e.attribute) in wanted)
    return model.model_id, tuple(metrics), tuple(attributes), rest, cells, events


def _time_range(model: ModelReport, metrics, attributes) -> tuple[float, float] | None:
    """The panels' shared x range: every shown point of the model's panels."""
    ts = [
        timestamp(p.at)
        for m in metrics
        for a in attributes
        for p in model.history.get((m, a), [])
        if p.at is not None and not p.suppressed
    ]
    if not ts:
        return None
    lo, hi = min(ts), max(ts)
    pad = (hi - lo) * 0.05 or 86_400.0
    return lo - pad, hi + pad


def _small_multiples(
    model: ModelReport,
    metrics: Sequence[str],
    attributes: Sequence[str],
    draw: Callable[[Axes, list[CellPoint], list[EventRow]], None],
    ylim: Callable[[list[CellPoint]], tuple[float, float]],
    name: str,
    label: str,
    ylabel: str,
) -> str:
    """Metric rows x attribute columns of small time-series panels sharing the time axis
    (labelled on the bottom row); ``ylim`` gives a panel's value range."""
    n_r, n_c = len(metrics), len(attributes)
    pw, ph = 1.75 * PT - 30, 0.95 * PT - 22
    metric_w = max((text_width(m, 8, True) for m in metrics), default=0)
    left = 18 + metric_w + 28
    top, gap_x, gap_y = 16.0, 30.0, 22.0
    c = Canvas(name, label, left + n_c * (pw + gap_x), top + n_r * (ph + gap_y) + 14)
    c.text(8, top + n_r * (ph + gap_y) / 2, ylabel, 7, rotate=-90)
    span = _time_range(model, metrics, attributes)
    ticks: tuple[list[float], list[str], str] | None = None
    if span is not None:
        lo, hi = (datetime.fromtimestamp(t, UTC) for t in span)
        when, labels, offset = date_ticks(lo, hi)
        ticks = [timestamp(t) for t in when], labels, offset
    for i, metric in enumerate(metrics):
        for j, attr in enumerate(attributes):
            points = model.history.get((metric, attr), [])
            events = [e for e in model.events if (e.metric, e.attribute) == (metric, attr)]
            ax = Axes(c, left + j * (pw + gap_x), top + i * (ph + gap_y), pw, ph,
                      span or (0.0, 1.0), ylim(points))  # fmt: skip
            with ax.body():
                _panel(ax, points, events, draw, ticks, bottom=i == n_r - 1)
                if i == 0:
                    ax.title(attr.replace("_", " "))
                if j == 0:
                    c.text(ax.x - 28, ax.y + ph / 2, metric, 8, "end", bold=True)
    return c.svg()


def _panel(
    ax: Axes,
    points: list[CellPoint],
    events: list[EventRow],
    draw: Callable[[Axes, list[CellPoint], list[EventRow]], None],
    ticks: tuple[list[float], list[str], str] | None,
    bottom: bool,
) -> None:
    shown = [p for p in points if not p.suppressed and p.at is not None]
    ax.spines()
    if not shown:
        msg = WITHHELD if any(p.suppressed for p in points) else "no data"
        ax.canvas.text(ax.x + ax.w / 2, ax.y + ax.h / 2, msg, 8)
        return
    draw(ax, points, events)
    lo, hi = ax.ylim
    yt = nice_ticks(min(lo, hi), max(lo, hi), 3)
    ax.yticks(yt, [tick_label(v, yt) for v in yt], size=6)
    if ticks is not None:
        xs, labels, offset = ticks
        ax.xticks(xs, labels if bottom else None, size=6)
        if bottom and offset:
            ax.canvas.text(ax.x + ax.w, ax.y + ax.h + 15, offset, 6, "end", baseline="hanging")


def _ts(xs: Sequence[datetime]) -> list[float]:
    return [timestamp(x) for x in xs]


@_cached(_history_inputs)
def vfr_over_time(model: ModelReport, metrics, attributes, tau: float) -> str:
    """VFR per cell over the period, with the tau line and marks at confirmed events."""

    def draw(ax: Axes, points, events) -> None:
        y_tau = ax.py(tau)
        ax.canvas.rect(ax.x, ax.py(0.5), ax.w, y_tau - ax.py(0.5), "#D55E00", opacity=0.07)
        xs, ys = _series(points, lambda p: p.vfr)
        ax.line2d(_ts(xs), ys, BLUE, 1.1)
        ax.hline(tau, PURPLE)
        _event_marks(ax, points, events, lambda p: p.vfr)

    return _small_multiples(
        model,
        metrics,
        attributes,
        draw,
        lambda points: (0.0, 0.5),
        f"vfr-{model.model_id}",
        f"Verdict flip rate over time, {model.model_id}",
        f"verdict flip rate (dashed: tau {tau:.2f}; shaded: unstable)",
    )


def _value_range(points: list[CellPoint]) -> tuple[float, float]:
    """A value panel's y range: its values, band and threshold(s), with a 5 % margin."""
    vals: list[float] = []
    for p in points:
        if p.suppressed or p.at is None:
            continue
        vals += [v for v in (p.value, p.ci_low, p.ci_high) if v is not None and math.isfinite(v)]
    if points:
        t = points[-1].threshold
        vals += [t, -t] if points[-1].direction.startswith("abs") else [t]
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.05 or max(abs(hi) * 0.05, 0.05)
    return lo - pad, hi + pad


@_cached(_history_inputs)
def value_over_time(model: ModelReport, metrics, attributes) -> str:
    """The observed value per cell with its bootstrap interval band and the pass threshold."""

    def draw(ax: Axes, points, events) -> None:
        xs, ys = _series(points, lambda p: p.value)
        lo_x, lo = _series(points, lambda p: p.ci_low)
        _, hi = _series(points, lambda p: p.ci_high)
        ax.band(_ts(lo_x), lo, hi, SKY, 0.35)
        ax.line2d(_ts(xs), ys, BLUE, 1.1)
        p0 = points[-1]
        ax.hline(p0.threshold, PURPLE)
        if p0.direction.startswith("abs"):
            ax.hline(-p0.threshold, PURPLE)
        _event_marks(ax, points, events, lambda p: p.value)

    return _small_multiples(
        model,
        metrics,
        attributes,
        draw,
        _value_range,
        f"value-{model.model_id}",
        f"Metric value over time with its bootstrap interval, {model.model_id}",
        "value (band: 95 % bootstrap interval; dashed: pass threshold)",
    )


# --------------------------------------------------------------------------- axis 3, axis 2


def _kappa_inputs(model, attributes):
    return model.model_id, model.axis3, tuple(attributes)


@_cached(_kappa_inputs)
def kappa_figure(model: ModelReport, attributes: Sequence[str]) -> str | None:
    """Fleiss' kappa per metric against the Landis-Koch bands; folds passing per cell."""
    a3 = model.axis3
    if a3 is None or not a3.applicable or not a3.metrics:
        return None
    metrics = [m.metric for m in a3.metrics]
    row = 0.45 * PT
    left, top = max(text_width(m, 7) for m in metrics) + 12, 14.0
    kw, hw = 250.0, 40.0 * max(1, len(attributes))
    height = row * (len(metrics) + 0.8)
    c = Canvas(f"kappa-{model.model_id}", f"Hospital agreement, {model.model_id}",
               left + kw + 14 + hw + 8, top + height + 30)  # fmt: skip
    ax = Axes(c, left, top, kw, height, (-0.2, 1.0), (len(metrics) - 0.5, -0.8))
    with ax.body():
        _kappa_bars(c, ax, a3, metrics)
    hm = Axes(c, left + kw + 14, top, hw, height, (0, max(1, len(attributes))),
              (len(metrics) - 0.5, -0.8))  # fmt: skip
    with hm.body():
        for i, m in enumerate(a3.metrics):
            for j, attr in enumerate(attributes):
                got = m.pass_folds.get(attr)
                if got is None:
                    continue
                n_pass, n = got
                share = n_pass / n if n else 0.0
                x0, y0 = hm.px(j + 0.03), hm.py(i - 0.42)
                c.rect(x0, y0, hm.px(j + 0.97) - x0, hm.py(i + 0.42) - y0, BLUE,
                       opacity=0.12 + 0.6 * share)  # fmt: skip
                c.text(hm.px(j + 0.5), hm.py(i), f"{n_pass}/{n}", 7)
        hm.xticks([j + 0.5 for j in range(len(attributes))],
                  [a.replace("_", " ") for a in attributes], marks=False)  # fmt: skip
        hm.title("hospital folds whose verdict is pass", 7)
    return c.svg()


def _kappa_bars(c: Canvas, ax: Axes, a3: Any, metrics: list[str]) -> None:
    shades = ("#F2F2F2", "#E4E4E4", "#F2F2F2", "#E4E4E4", "#F2F2F2", "#E4E4E4")
    bounds = [*(lo for lo, _ in LANDIS_KOCH), 1.0]
    y_top, y_bottom = ax.y, ax.y + ax.h
    for k, (lo, band) in enumerate(LANDIS_KOCH):
        lo_ = max(lo, -0.2)
        c.rect(ax.px(lo_), y_top, ax.px(bounds[k + 1]) - ax.px(lo_), y_bottom - y_top, shades[k])
        c.text(ax.px((lo_ + bounds[k + 1]) / 2), ax.py(-0.75), band, 6, baseline="auto")
    for y, m in enumerate(a3.metrics):
        if m.kappa is None:
            c.text(ax.px(0.02), ax.py(y), "undefined", 7, "start")
            continue
        colour = "#D55E00" if m.fails else "#009E73"
        x0, x1 = sorted((ax.px(0.0), ax.px(m.kappa)))
        c.rect(x0, ax.py(y - 0.3), x1 - x0, ax.py(y + 0.3) - ax.py(y - 0.3), colour)
        note = " (all folds agree trivially)" if m.degenerate else ""
        label = f"{m.kappa:.2f}{note}"
        at = ax.px(max(m.kappa, 0) + 0.02)
        if at + text_width(label, 7) > ax.x + ax.w and x1 - x0 > text_width(label, 7) + 6:
            c.text(x1 - 3, ax.py(y), label, 7, "end", colour="#FFFFFF")  # inside its bar
        else:
            c.text(at, ax.py(y), label, 7, "start")
    ax.vline(a3.kappa_cutoff, BLACK)
    ax.spines()
    ax.yticks(list(range(len(metrics))), metrics, size=7)
    xt = nice_ticks(-0.2, 1.0, 6)
    ax.xticks(xt, [tick_label(v, xt) for v in xt])
    c.text(ax.x + ax.w / 2, y_bottom + 18,
           f"Fleiss' kappa over {a3.n_folds} hospital folds (dashed: {a3.kappa_cutoff:.2f})",
           8, baseline="hanging")  # fmt: skip


def _nstar_inputs(model, metrics, attributes, cv_cutoff, n_field):
    return (
        model.model_id,
        tuple(model.n_star),
        tuple(metrics),
        tuple(attributes),
        cv_cutoff,
        n_field,
    )


@_cached(_nstar_inputs)
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
    colours = {a: LINE_COLOURS[k % len(LINE_COLOURS)] for k, a in enumerate(attributes)}
    top_cv = 0.3
    sizes = [p.size for cur in model.n_star for p in cur.curve if p.size > 0] + [n_field]
    xlim = (min(sizes) / 1.3, max(sizes) * 1.3)
    pw, ph, left, top, gap_x, gap_y = 1.9 * PT - 14, 1.45 * PT - 40, 46.0, 16.0, 14.0, 40.0
    legend = [(cur_attr.replace("_", " "), colours[cur_attr]) for cur_attr in attributes
              if any(x.attribute == cur_attr for x in model.n_star)]  # fmt: skip
    height = top + n_r * (ph + gap_y) + 6
    c = Canvas(f"nstar-{model.model_id}", f"Audit size curves, {model.model_id}",
               left + n_c * (pw + gap_x), height)  # fmt: skip
    for k, metric in enumerate(present):
        ax = Axes(c, left + (k % n_c) * (pw + gap_x), top + (k // n_c) * (ph + gap_y), pw, ph,
                  xlim, (0.0, top_cv), xlog=True)  # fmt: skip
        with ax.body():
            _nstar_panel(ax, model, metric, colours, cv_cutoff, n_field, top_cv, k % n_c == 0)
    c.text(10, top + n_r * (ph + gap_y) / 2 - gap_y / 2,
           f"CV (dashed {cv_cutoff:.0%}; capped at {top_cv:.0%})", 7, rotate=-90)  # fmt: skip
    _nstar_legend(c, legend, n_field, height - 8)
    return c.svg()


def _nstar_panel(ax: Axes, model: ModelReport, metric: str, colours: dict[str, str],
                 cv_cutoff: float, n_field: int, top_cv: float, first: bool) -> None:  # fmt: skip
    c = ax.canvas
    ax.spines()
    for cur in (x for x in model.n_star if x.metric == metric):
        colour = colours.get(cur.attribute, BLACK)
        xs = [float(p.size) for p in cur.curve]
        ys = [min(p.cv, top_cv) for p in cur.curve]  # cv is inf where not computable
        ax.line2d(xs, ys, colour, 1.0)
        for x, y in zip(xs, ys, strict=True):
            if math.isfinite(y) and x > 0:
                ax.marker(x, y, "o", colour, 2.5)
        if cur.reached:
            ax.marker(cur.n_star, cv_cutoff, "*", colour, 8, edge=colour)
    ax.hline(cv_cutoff, PURPLE)
    ax.vline(n_field, BLACK, dash="0.9,1.5")
    xt = log_ticks(*ax.xlim)
    ax.xticks(xt, [f"{v:,.0f}" for v in xt], size=5.5)
    yt = nice_ticks(0.0, top_cv, 3)
    ax.yticks(yt, [tick_label(v, yt) for v in yt] if first else None)
    ax.title(metric, bold=True)
    c.text(ax.x + ax.w / 2, ax.y + ax.h + 14, "audit size (records)", 6, baseline="hanging")


def _nstar_legend(c: Canvas, items: list[tuple[str, str]], n_field: int, y: float) -> None:
    entries: list[tuple[str, str, str]] = [(lab, col, "line") for lab, col in items]
    entries += [(f"N_field {n_field:,}", BLACK, "dotted"),
                ("N* (first size under the cut-off)", BLACK, "star")]  # fmt: skip
    widths = [22 + text_width(lab, 7) + 10 for lab, _, _ in entries]
    x = max(4.0, (c.width - sum(widths)) / 2)
    for (lab, col, kind), w in zip(entries, widths, strict=True):
        if kind == "star":
            d = Axes(c, x, y - 4, 16, 8, (0, 1), (0, 1))
            d.marker(0.5, 0.5, "*", col, 8, edge=col)
        else:
            c.line(x, y, x + 16, y, col, 1.0, "0.9,1.5" if kind == "dotted" else None)
            if kind == "line":
                c.add(f'<circle cx="{c.n(x + 8)}" cy="{c.n(y)}" r="1.25" fill="{col}"/>')
        c.text(x + 20, y, lab, 7, "start")
        x += w


# --------------------------------------------------------------------------- MPPD


def _mppd_inputs(model, group_labels):
    return model.model_id, tuple(model.mppd), group_labels


@_cached(_mppd_inputs)
def mppd_figure(model: ModelReport, group_labels: dict[str, dict[str, str]]) -> str | None:
    """Per attribute: pairwise MPPD heatmap (mean, pairs) and the reference-based bars."""
    if not model.mppd:
        return None
    hw, bw, row_h = 270.0, 150.0, 2.5 * PT
    names_w = max(
        (text_width(group_labels.get(mp.attribute, {}).get(g, g), 6) for mp in model.mppd
         for g in mp.groups), default=20.0,
    )  # fmt: skip
    left = names_w + 10
    gap = names_w + 30
    c = Canvas(f"mppd-{model.model_id}",
               f"Matched-pair prediction differences, {model.model_id}",
               left + hw + gap + bw + 80, len(model.mppd) * row_h + 10)  # fmt: skip
    c.defs.append(
        f'<pattern id="{c.prefix}-hatch" width="5" height="5" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><path d="M 0 0 L 0 5" style="stroke: #999999; '
        'stroke-width: 0.6"/></pattern>'
    )
    for row, mp in enumerate(model.mppd):
        y0 = row * row_h + 18
        size = row_h - 70
        labels = group_labels.get(mp.attribute, {})
        k = max(1, len(mp.groups))
        vals = [v for r in mp.means for v in r if v is not None]
        vmax = max(vals) if vals else 1.0
        hm = Axes(c, left, y0, hw, size, (0, k), (k, 0))
        with hm.body():
            _mppd_matrix(c, hm, mp, labels, vmax)
        bar = Axes(c, left + hw + gap, y0, bw, size, (0, (vmax or 1) * 1.45),
                   (len(mp.bars) - 0.5, -0.5))  # fmt: skip
        with bar.body():
            _mppd_bars(c, bar, mp, labels)
    return c.svg()


def _mppd_matrix(c: Canvas, hm: Axes, mp: Any, labels: dict[str, str], vmax: float) -> None:
    names = [labels.get(g, g) for g in mp.groups]
    k = len(mp.groups)
    for i in range(k):
        for j in range(k):
            mean, pairs = mp.means[i][j], mp.pairs[i][j]
            x0, y0 = hm.px(j), hm.py(i)
            w, h = hm.px(j + 1) - x0, hm.py(i + 1) - y0
            if pairs is None:
                c.rect(x0, y0, w, h, f"url(#{c.prefix}-hatch)", edge="#999999", edge_width=0.3)
                c.text(hm.px(j + 0.5), hm.py(i + 0.5), WITHHELD, 7)
                continue
            shade = 0.1 + 0.75 * ((mean or 0) / vmax if vmax else 0)
            c.rect(x0, y0, w, h, BLUE, opacity=shade)
            low = "*" if mp.low_support[i][j] else ""
            txt = "n/a" if mean is None else f"{mean:.3f}{low}"
            c.text(hm.px(j + 0.5), hm.py(i + 0.42), txt, 7)
            c.text(hm.px(j + 0.5), hm.py(i + 0.72), f"{pairs:,} pairs", 5.5)
    hm.xticks([j + 0.5 for j in range(k)], names, size=6, rotate=20, marks=False)
    hm.yticks([i + 0.5 for i in range(k)], names, size=6, marks=False)
    c.text(hm.x, hm.y - 5,
           f"{mp.attribute.replace('_', ' ')}: mean |score gap| of matched pairs "
           "(row: anchor group)", 7, "start", baseline="auto")  # fmt: skip


def _mppd_bars(c: Canvas, bar: Axes, mp: Any, labels: dict[str, str]) -> None:
    bar.spines()
    for y, b in enumerate(mp.bars):
        if b.suppressed or b.mean is None:
            c.text(bar.px(0.0) + 2, bar.py(y), WITHHELD if b.suppressed else "no matched pairs",
                   7, "start")  # fmt: skip
            continue
        colour = BLACK if b.group == mp.reference else (PURPLE if b.low_support else BLUE)
        x1 = bar.px(b.mean)
        c.rect(bar.px(0.0), bar.py(y - 0.3), x1 - bar.px(0.0), bar.py(y + 0.3) - bar.py(y - 0.3),
               colour)  # fmt: skip
        gap = "reference" if b.group == mp.reference else f"{b.gap:+.3f}"
        pm = "" if b.se is None else f" ± {Z95 * b.se:.3f}"  # on a sample: 95 % interval
        c.text(x1 + 2, bar.py(y), f"{b.mean:.3f}{pm} ({gap})", 6, "start")
    bar.yticks(list(range(len(mp.bars))), [labels.get(b.group, b.group) for b in mp.bars], size=6)
    xt = nice_ticks(*bar.xlim, 3)
    bar.xticks(xt, [tick_label(v, xt) for v in xt], size=6)
    ref = labels.get(mp.reference or "", mp.reference or "none")
    bar.title(f"against the reference group ({ref})", 7)


# --------------------------------------------------------------------------- health


def _health_inputs(model, dead_letters):
    return model.model_id, tuple(model.volume), tuple(model.auroc), dead_letters


@_cached(_health_inputs)
def health_figure(model: ModelReport, dead_letters: int | str | None) -> str | None:
    """Records per month (withheld months: <11) and the rolling AUROC, when there are any.

    The bars are drawn from the published (rounded) counts with 6-decimal coordinates,
    so a bar read back through the axis ticks gives that rounded count (the disclosure
    tests decode them)."""
    if not model.volume and not model.auroc:
        return None
    panels = [p for p in ("volume", "auroc") if getattr(model, p)]
    pw, ph, left, top, gap = 3.7 * PT - 60, 1.9 * PT - 40, 44.0, 16.0, 60.0
    c = Canvas(f"health-{model.model_id}", f"Ingestion and model health, {model.model_id}",
               left + len(panels) * (pw + gap) - gap + 16, top + ph + 46, digits=6)  # fmt: skip
    for k, p in enumerate(panels):
        x0 = left + k * (pw + gap)
        if p == "volume":
            _volume_panel(c, x0, top, pw, ph, model, dead_letters)
        else:
            _auroc_panel(c, x0, top, pw, ph, model)
    return c.svg()


def _volume_panel(c: Canvas, x0: float, y0: float, w: float, h: float, model: ModelReport,
                  dead_letters: int | str | None) -> None:  # fmt: skip
    n = len(model.volume)
    top = max((v.records for v in model.volume if v.records is not None), default=0)
    yt = nice_ticks(0.0, top * 1.05 or 1.0, 4)
    ax = Axes(c, x0, y0, w, h, (-0.6, n - 0.4), (0.0, max(top * 1.05, yt[-1]) or 1.0))
    with ax.body():
        for x, v in enumerate(model.volume):
            if v.records is None:
                c.text(ax.px(x), ax.py(0) - 2, WITHHELD, 6, baseline="auto")
            else:
                left, right = ax.px(x - 0.375), ax.px(x + 0.375)
                c.rect(left, ax.py(v.records), right - left, ax.py(0) - ax.py(v.records), BLUE)
        ax.spines()
        step = max(1, n // 8)
        xs = list(range(n))[::step]
        ax.xticks(xs, [model.volume[x].month for x in xs], rotate=30)
        ax.yticks(yt, [f"{v:,.0f}" for v in yt])
        shown = f"{dead_letters:,}" if isinstance(dead_letters, int) else dead_letters
        extra = "" if dead_letters is None else f"; dead letters (all models): {shown}"
        ax.title(f"records per month (event time){extra}", 8)


def _auroc_panel(c: Canvas, x0: float, y0: float, w: float, h: float, model: ModelReport) -> None:
    xs = [float(a.records) for a in model.auroc]
    lo, hi = min(xs), max(xs)
    pad = (hi - lo) * 0.05 or max(hi * 0.05, 1.0)
    ax = Axes(c, x0, y0, w, h, (lo - pad, hi + pad), (0.5, 1.0))
    with ax.body():
        ax.line2d(xs, [a.auroc for a in model.auroc], BLUE, 1.0)
        ax.spines()
        xt = nice_ticks(lo - pad, hi + pad, 4)
        ax.xticks(xt, [f"{v:,.0f}" for v in xt])
        yt = nice_ticks(0.5, 1.0, 5)
        ax.yticks(yt, [tick_label(v, yt) for v in yt])
        c.text(ax.x + ax.w / 2, ax.y + ax.h + 16, "records received", 8, baseline="hanging")
        ax.title("model health: AUROC of each block of records", 8)
