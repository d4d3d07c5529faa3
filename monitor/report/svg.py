"""SVG written straight from the data: the few primitives the report's figures need.

Why not matplotlib: drawing the report's 14 figures through it took 12 s of the 12.1 s
the page took (most of it laying out the 2 x 28 small multiples' ticks), for
charts that are lines, bars, rectangles and text. Here a figure is a :class:`Canvas`
(one ``<svg>``, sizes in points as matplotlib's SVG had them) holding :class:`Axes`
(a data-to-point mapping with ticks).

Element ids keep matplotlib's scheme (``<name>-axes_<k>``, ``-xtick_<i>``,
``-ytick_<i>``, ``-line2d_<i>``; a tick mark is a ``<use>`` at the tick's position next
to its ``<text>`` label), so a reader of the SVG (and the disclosure tests, which decode
bars and lines back through the ticks) finds what it found before. Every id carries the
figure's name, so two figures never share one on a page. Text stays text (searchable,
prints sharply); its width is estimated from the font size, which is all the layout
needs (labels are short and margins generous).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial

#: Points per inch: the figures keep their old sizes in inches.
PT = 72.0
#: Average advance of a DejaVu Sans glyph, as a share of the font size (digits 0.64,
#: lower-case letters 0.5-0.65): enough to reserve room for a label.
CHAR_W = 0.6
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
MINUS = "\u2212"


def slug(text: str) -> str:
    """An id-safe form of a model, metric or attribute name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def esc(text: str) -> str:
    """Text for an SVG text node or attribute value."""
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Estimated width in points of ``text`` at ``size`` points (capitals and bold run
    wider)."""
    caps = sum(ch.isupper() for ch in text)
    return (len(text) + 0.25 * caps) * size * CHAR_W * (1.12 if bold else 1.0)


def num(v: float, digits: int = 3) -> str:
    """A coordinate: at most ``digits`` decimals, no trailing zeros."""
    s = f"{v:.{digits}f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


@dataclass
class Canvas:
    """One ``<svg>`` figure; ``name`` salts every id, ``label`` is its accessible name.

    ``digits``: decimals of the coordinates written (6 where a count is drawn as a
    bar, as matplotlib wrote them, so reading a bar back through its axis ticks is
    exact to well under one record).
    """

    name: str
    label: str
    width: float
    height: float
    digits: int = 3
    parts: list[str] = field(default_factory=list)
    defs: list[str] = field(default_factory=list)
    _axes: int = 0
    #: figure-wide counters of ticks and lines, as matplotlib numbers its ids
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return slug(self.name)

    def n(self, v: float) -> str:
        return num(v, self.digits)

    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(
        self,
        x: float,
        y: float,
        s: str,
        size: float = 7.0,
        anchor: str = "middle",
        *,
        bold: bool = False,
        rotate: float = 0.0,
        baseline: str = "central",
        colour: str = "#000000",
    ) -> None:
        """Text at (x, y) points; ``baseline`` central puts y at the text's middle."""
        transform = (
            f' transform="rotate({num(rotate, 1)} {self.n(x)} {self.n(y)})"' if rotate else ""
        )
        weight = ' font-weight="bold"' if bold else ""
        fill = "" if colour == "#000000" else f' fill="{colour}"'
        self.add(
            f'<text x="{self.n(x)}" y="{self.n(y)}" font-size="{num(size, 2)}" '
            f'text-anchor="{anchor}" dominant-baseline="{baseline}"{weight}{fill}{transform}>'
            f"{esc(s)}</text>"
        )

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        colour: str,
        width: float = 0.9,
        dash: str | None = None,
    ) -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(
            f'<path d="M {self.n(x1)} {self.n(y1)} L {self.n(x2)} {self.n(y2)}" '
            f'style="fill: none; stroke: {colour}; stroke-width: {num(width, 2)}"{d}/>'
        )

    def rect(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        fill: str,
        *,
        opacity: float | None = None,
        edge: str | None = None,
        edge_width: float = 1.0,
    ) -> None:
        """A rectangle as a closed path, its fill in a ``style`` attribute (``fill:
        #rrggbb``, lower case, as matplotlib wrote its bars)."""
        d = (
            f"M {self.n(x)} {self.n(y + h)} L {self.n(x + w)} {self.n(y + h)} "
            f"L {self.n(x + w)} {self.n(y)} L {self.n(x)} {self.n(y)} z"
        )
        style = [f"fill: {fill.lower()}"]
        if opacity is not None:
            style.append(f"opacity: {num(opacity, 3)}")
        if edge is not None:
            style.append(f"stroke: {edge}; stroke-width: {num(edge_width, 2)}")
        self.add(f'<path d="{d}" style="{"; ".join(style)}"/>')

    def polyline(
        self, points: Sequence[tuple[float, float]], colour: str, width: float = 1.1
    ) -> str:
        """A ``<path>`` element through ``points`` (one run, no gap)."""
        d = " L ".join(f"{self.n(x)} {self.n(y)}" for x, y in points)
        style = (
            f"fill: none; stroke: {colour}; stroke-width: {num(width, 2)}; stroke-linejoin: round"
        )
        return f'<path d="M {d}" style="{style}"/>'

    @contextmanager
    def group(self, gid: str) -> Iterator[None]:
        """A ``<g>`` whose id is ``<name>-<gid>`` (as matplotlib's element ids)."""
        self.add(f'<g id="{self.prefix}-{gid}">')
        yield
        self.add("</g>")

    def next_axes(self) -> int:
        self._axes += 1
        return self._axes

    def next_id(self, kind: str) -> str:
        """``<kind>_<n>``, n counting from 1 over the figure."""
        self.counters[kind] = self.counters.get(kind, 0) + 1
        return f"{kind}_{self.counters[kind]}"

    def svg(self) -> str:
        """The ``<svg>`` element, with role, accessible name and ``fig-<name>`` id."""
        w, h = num(self.width, 2), num(self.height, 2)
        defs = f"<defs>{''.join(self.defs)}</defs>" if self.defs else ""
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
            f'width="{w}pt" height="{h}pt" viewBox="0 0 {w} {h}" role="img" '
            f'aria-label="{esc(self.label)}" class="fig" id="fig-{self.prefix}" '
            f'font-family="{FONT}">'
            f"<title>{esc(self.label)}</title>{defs}"
            f'<rect width="100%" height="100%" fill="#ffffff"/>'
            f"{''.join(self.parts)}</svg>"
        )


# --------------------------------------------------------------------------- ticks


def nice_ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """About ``n`` round values in [lo, hi] (steps 1, 2, 2.5, 5 x 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    for want in range(max(1, n), max(1, n) + 4):  # a narrow range: a finer step, >= 2 ticks
        raw = (hi - lo) / want
        mag = 10.0 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw * 0.999)
        k = math.ceil(lo / step - 1e-9)
        out = []
        while k * step <= hi + step * 1e-9:
            out.append(round(k * step, 12))
            k += 1
        if len(out) >= 2:
            break
    return out


def tick_label(v: float, ticks: Sequence[float]) -> str:
    """A tick's label with the decimals its step needs (thousands separated; a
    typographic minus, as matplotlib's)."""
    step = min((b - a for a, b in itertools.pairwise(ticks)), default=1.0) or 1.0
    digits = next((d for d in range(7) if abs(round(step, d) - step) < 1e-9 * max(1.0, step)), 6)
    return f"{v:,.{digits}f}".replace("-", MINUS)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten in [lo, hi] (and the ends' decades when none falls inside)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    out = [10.0**k for k in range(a, b + 1) if lo * 0.999 <= 10.0**k <= hi * 1.001]
    return out or [10.0**a, 10.0**b]


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _month_ticks(lo: datetime, hi: datetime, step: int) -> list[datetime]:
    y, m = lo.year, lo.month
    out: list[datetime] = []
    while True:
        t = datetime(y, m, 1, tzinfo=lo.tzinfo)
        if t > hi:
            return out
        if t >= lo and (m - 1) % step == 0:
            out.append(t)
        m += 1
        if m > 12:
            y, m = y + 1, 1


def _span_ticks(lo: datetime, hi: datetime, step: timedelta) -> list[datetime]:
    t = lo.replace(hour=0, minute=0, second=0, microsecond=0)
    out = []
    while t <= hi:
        if t >= lo:
            out.append(t)
        t += step
    return out


def date_ticks(
    lo: datetime, hi: datetime, max_ticks: int = 4
) -> tuple[list[datetime], list[str], str]:
    """Tick times, their labels and an offset text (the year), as matplotlib's concise
    date formatter gives them: month names (the year at January), day numbers, hours."""
    candidates: list[tuple[str, Callable[[], list[datetime]]]] = []
    span = hi - lo
    if span <= timedelta(days=3):
        for h in (1, 3, 6, 12):
            candidates.append(("hour", partial(_span_ticks, lo, hi, timedelta(hours=h))))
    if span <= timedelta(days=120):
        for d in (1, 2, 7, 14):
            candidates.append(("day", partial(_span_ticks, lo, hi, timedelta(days=d))))
    for m in (1, 2, 3, 4, 6, 12):
        candidates.append(("month", partial(_month_ticks, lo, hi, m)))
    kind, ticks = "month", []
    for k, make in candidates:
        got = make()
        if 2 <= len(got) <= max_ticks:
            kind, ticks = k, got
            break
    if not ticks:  # a very short or very long period: its ends
        kind, ticks = "day", [lo, hi]
    labels = []
    for t in ticks:
        if kind == "month":
            labels.append(str(t.year) if t.month == 1 else _MONTHS[t.month - 1])
        elif kind == "day":
            labels.append(_MONTHS[t.month - 1] if t.day == 1 else f"{t.day:02d}")
        else:
            labels.append(f"{t:%b-%d}" if t.hour == 0 else f"{t:%H:%M}")
    if kind == "month":  # no offset where a label already names the year
        offset = "" if any(t.month == 1 for t in ticks) else f"{ticks[-1].year}"
    elif kind == "day":
        offset = f"{ticks[-1]:%Y-%b}"
    else:
        offset = f"{ticks[-1]:%Y-%b-%d}"
    return ticks, labels, offset


def timestamp(t: datetime) -> float:
    """Seconds since the epoch (a naive time is UTC)."""
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


# --------------------------------------------------------------------------- axes


@dataclass
class Axes:
    """A panel: the rectangle (x, y, w, h) in points and its data limits.

    ``ylim`` may run downwards (lo > hi) for grids whose first row is on top; ``xlog``
    maps x on a log scale.
    """

    canvas: Canvas
    x: float
    y: float
    w: float
    h: float
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    xlog: bool = False
    index: int = 0

    def __post_init__(self) -> None:
        self.index = self.canvas.next_axes()

    def px(self, v: float) -> float:
        lo, hi = self.xlim
        if self.xlog:
            v, lo, hi = math.log10(v), math.log10(lo), math.log10(hi)
        return self.x + (v - lo) / ((hi - lo) or 1.0) * self.w

    def py(self, v: float) -> float:
        lo, hi = self.ylim
        return self.y + self.h - (v - lo) / ((hi - lo) or 1.0) * self.h

    @contextmanager
    def body(self) -> Iterator[None]:
        with self.canvas.group(f"axes_{self.index}"):
            yield

    def spines(self, left: bool = True, bottom: bool = True) -> None:
        c = self.canvas
        if left:
            c.line(self.x, self.y, self.x, self.y + self.h, "#000000", 0.8)
        if bottom:
            c.line(self.x, self.y + self.h, self.x + self.w, self.y + self.h, "#000000", 0.8)

    def _tick_defs(self) -> tuple[str, str]:
        c = self.canvas
        xm, ym = f"{c.prefix}-mx", f"{c.prefix}-my"
        if not any(f'id="{xm}"' in d for d in c.defs):
            c.defs.append(
                f'<path id="{xm}" d="M 0 0 L 0 3.5" style="stroke: #000000; stroke-width: 0.8"/>'
            )
            c.defs.append(
                f'<path id="{ym}" d="M 0 0 L -3.5 0" style="stroke: #000000; stroke-width: 0.8"/>'
            )
        return xm, ym

    def xticks(
        self,
        values: Sequence[float],
        labels: Sequence[str] | None,
        *,
        size: float = 7.0,
        rotate: float = 0.0,
        top: bool = False,
        marks: bool = True,
        bold: bool = False,
    ) -> None:
        """Ticks along the bottom (or ``top``); ``labels`` None: marks only."""
        xm, _ = self._tick_defs()
        c = self.canvas
        y0 = self.y if top else self.y + self.h
        for k, v in enumerate(values):
            with c.group(c.next_id("xtick")):
                x = self.px(v)
                if marks:
                    c.add(f'<use xlink:href="#{xm}" x="{c.n(x)}" y="{c.n(y0)}"/>')
                if labels is not None:
                    if rotate:
                        c.text(
                            x,
                            y0 + 5,
                            labels[k],
                            size,
                            "end",
                            rotate=-rotate,
                            baseline="hanging",
                            bold=bold,
                        )
                    elif top:
                        c.text(x, y0 - 3, labels[k], size, baseline="auto", bold=bold)
                    else:
                        c.text(x, y0 + 5.5, labels[k], size, baseline="hanging", bold=bold)

    def yticks(
        self,
        values: Sequence[float],
        labels: Sequence[str] | None,
        *,
        size: float = 7.0,
        marks: bool = True,
        bold: bool = False,
    ) -> None:
        _, ym = self._tick_defs()
        c = self.canvas
        for k, v in enumerate(values):
            with c.group(c.next_id("ytick")):
                y = self.py(v)
                if marks:
                    c.add(f'<use xlink:href="#{ym}" x="{c.n(self.x)}" y="{c.n(y)}"/>')
                if labels is not None:
                    c.text(self.x - (5.5 if marks else 2.0), y, labels[k], size, "end", bold=bold)

    def title(self, s: str, size: float = 8.0, bold: bool = False) -> None:
        self.canvas.text(self.x + self.w / 2, self.y - 4, s, size, baseline="auto", bold=bold)

    def hline(
        self, v: float, colour: str, width: float = 0.9, dash: str | None = "3.3,1.4"
    ) -> None:
        y = self.py(v)
        self.canvas.line(self.x, y, self.x + self.w, y, colour, width, dash)

    def vline(
        self, v: float, colour: str, width: float = 0.9, dash: str | None = "3.3,1.4"
    ) -> None:
        x = self.px(v)
        self.canvas.line(x, self.y, x, self.y + self.h, colour, width, dash)

    def line2d(
        self, xs: Sequence[float], ys: Sequence[float], colour: str, width: float = 1.1
    ) -> None:
        """A data line, split at NaN into runs; each run is a ``line2d`` group."""
        run: list[tuple[float, float]] = []
        runs = []
        for x, y in zip(xs, ys, strict=True):
            if math.isfinite(x) and math.isfinite(y):
                run.append((self.px(x), self.py(y)))
            elif run:
                runs.append(run)
                run = []
        if run:
            runs.append(run)
        for r in runs:
            with self.canvas.group(self.canvas.next_id("line2d")):
                if len(r) == 1:  # a lone point still shows
                    cx, cy = (self.canvas.n(v) for v in r[0])
                    self.canvas.add(
                        f'<circle cx="{cx}" cy="{cy}" r="{num(width, 2)}" fill="{colour}"/>'
                    )
                else:
                    self.canvas.add(self.canvas.polyline(r, colour, width))

    def band(
        self,
        xs: Sequence[float],
        lo: Sequence[float],
        hi: Sequence[float],
        colour: str,
        opacity: float,
    ) -> None:
        """The area between ``lo`` and ``hi``, split where either is NaN."""
        runs: list[list[tuple[float, float, float]]] = [[]]
        for x, a, b in zip(xs, lo, hi, strict=True):
            if math.isfinite(a) and math.isfinite(b):
                runs[-1].append((x, a, b))
            elif runs[-1]:
                runs.append([])
        c = self.canvas
        for r in runs:
            if len(r) < 2:
                continue
            top = [f"{c.n(self.px(x))} {c.n(self.py(b))}" for x, _, b in r]
            bottom = [f"{c.n(self.px(x))} {c.n(self.py(a))}" for x, a, _ in reversed(r)]
            style = f"fill: {colour}; opacity: {num(opacity, 3)}"
            c.add(f'<path d="M {" L ".join(top + bottom)} z" style="{style}"/>')

    def marker(
        self, x: float, y: float, kind: str, fill: str, size: float, edge: str = "#000000"
    ) -> None:
        """A marker at data (x, y): ``v`` a downward triangle, ``D`` a diamond, ``o`` a
        dot, ``*`` a star; ``size`` in points, as matplotlib's ``ms``."""
        cx, cy, r = self.px(x), self.py(y), size / 2
        c = self.canvas
        if kind == "v":
            pts = [(cx - r, cy - r * 0.8), (cx + r, cy - r * 0.8), (cx, cy + r)]
        elif kind == "D":  # matplotlib's: a square of side ``size`` standing on a corner
            r *= 1.2
            pts = [(cx, cy - r), (cx + r * 0.8, cy), (cx, cy + r), (cx - r * 0.8, cy)]
        elif kind == "*":
            pts = []
            for k in range(10):
                a = math.pi / 2 + k * math.pi / 5
                rr = r if k % 2 == 0 else r * 0.4
                pts.append((cx + rr * math.cos(a), cy - rr * math.sin(a)))
        else:
            c.add(f'<circle cx="{c.n(cx)}" cy="{c.n(cy)}" r="{num(r, 2)}" fill="{fill}"/>')
            return
        d = " L ".join(f"{c.n(px)} {c.n(py)}" for px, py in pts)
        c.add(f'<path d="M {d} z" style="fill: {fill}; stroke: {edge}; stroke-width: 0.5"/>')
