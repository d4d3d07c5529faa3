"""The report's outcome-coverage figure: each group's share of predictions with an outcome,
per attribute, over the period (predictions now, outcomes later), as an inline ``<svg>`` string.

Why a module of its own, written as SVG text: it is one chart of lines and text, and
keeping it apart from :mod:`monitor.report.figures` lets that module change how it draws
without this one moving. The conventions are the other figures': sizes in
points, Okabe-Ito colours, every coloured line also named in text, a withheld value
(None, fewer than 11 predictions) drawn as a gap and listed as "<11", element ids
prefixed by the figure's name so two figures never share one on a page.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from monitor.publish.rule import SMALL_CELL_LABEL as WITHHELD
from monitor.report.data import CoveragePoint, ModelReport

#: Okabe-Ito, as monitor.report.figures.LINE_COLOURS
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
PURPLE, GREY = "#CC79A7", "#555555"
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"

#: Panel geometry in points: plot area, margins, legend line height.
PANEL_W, PANEL_H = 190.0, 105.0
LEFT, TOP, GAP_X, LEGEND_LINE = 34.0, 26.0, 150.0, 10.0
#: Panels per row (attributes beyond wrap to the next row).
COLUMNS = 2


def _esc(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def _fmt(x: float) -> str:
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _text(x: float, y: float, s: str, size: float = 7, anchor: str = "start", **kw: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in kw.items())
    return (
        f'<text x="{_fmt(x)}" y="{_fmt(y)}" font-size="{size}" text-anchor="{anchor}"'
        f"{extra}>{_esc(s)}</text>"
    )


def _date_ticks(t0: float, t1: float) -> list[float]:
    """Three tick times (start, middle, end) of a period; one when it is a single instant."""
    return [t0] if t1 <= t0 else [t0, (t0 + t1) / 2, t1]


def _segments(pts: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """Runs of consecutive shown values: a withheld value breaks the line."""
    runs: list[list[tuple[float, float]]] = [[]]
    for t, v in pts:
        if v is None or not math.isfinite(v):
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((t, v))
    return [r for r in runs if r]


def _panel(
    attr: str,
    points: Sequence[CoveragePoint],
    labels: Mapping[str, str],
    x0: float,
    prefix: str,
) -> list[str]:
    """One attribute's panel at horizontal offset ``x0`` (placed by the caller's
    ``<g transform>``): axes, a line per group, the latest gap in the title and a legend
    naming each group with its latest coverage."""
    times = [p.at.timestamp() for p in points if p.at is not None]
    t0, t1 = min(times), max(times)
    span = (t1 - t0) or 1.0

    def px(t: float) -> float:
        return x0 + LEFT + (t - t0) / span * PANEL_W if t1 > t0 else x0 + LEFT + PANEL_W / 2

    def py(v: float) -> float:
        return TOP + (1.0 - v) * PANEL_H

    last = points[-1]
    gap = "n/a" if last.gap is None else f"{last.gap:.2f}"
    note = " > max: outcomes incomplete" if last.reason else ""
    out = [
        f'<g id="{prefix}-{_slug(attr)}">',
        _text(x0 + LEFT, 10, f"{attr.replace('_', ' ')}: coverage gap {gap}{note}", 8,
              font_weight="bold"),
        f'<rect x="{_fmt(x0 + LEFT)}" y="{_fmt(TOP)}" width="{_fmt(PANEL_W)}" '
        f'height="{_fmt(PANEL_H)}" fill="none" stroke="#BBBBBB" stroke-width="0.6"/>',
    ]  # fmt: skip
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(
            f'<line x1="{_fmt(x0 + LEFT - 3)}" x2="{_fmt(x0 + LEFT)}" y1="{_fmt(py(v))}" '
            f'y2="{_fmt(py(v))}" stroke="{GREY}" stroke-width="0.6"/>'
        )
        out.append(_text(x0 + LEFT - 5, py(v) + 2.5, _fmt(v), 6, "end"))
    for k, t in enumerate(_date_ticks(t0, t1)):
        day = datetime.fromtimestamp(t, tz=last.at.tzinfo if last.at else None)
        anchor = "start" if k == 0 else ("end" if t == t1 and t1 > t0 else "middle")
        out.append(_text(px(t), TOP + PANEL_H + 9, f"{day:%Y-%m-%d}", 6, anchor))
    codes = list(dict.fromkeys(code for p in points for code in p.groups))
    for i, code in enumerate(codes):
        colour = COLOURS[i % len(COLOURS)]
        series = [(p.at.timestamp(), p.groups.get(code)) for p in points if p.at is not None]
        for j, run in enumerate(_segments(series)):
            path = " ".join(f"{_fmt(px(t))},{_fmt(py(v))}" for t, v in run)
            if len(run) == 1:
                ((t, v),) = run
                out.append(
                    f'<circle id="{prefix}-{_slug(attr)}-{_slug(code)}-{j}" cx="{_fmt(px(t))}" '
                    f'cy="{_fmt(py(v))}" r="1.6" fill="{colour}"/>'
                )
            else:
                out.append(
                    f'<polyline id="{prefix}-{_slug(attr)}-{_slug(code)}-{j}" points="{path}" '
                    f'fill="none" stroke="{colour}" stroke-width="1.1"/>'
                )
        now = last.groups.get(code)
        shown = WITHHELD if now is None else f"{now:.2f}"
        ly = TOP + 4 + i * LEGEND_LINE
        lx = x0 + LEFT + PANEL_W + 8
        out.append(
            f'<line x1="{_fmt(lx)}" x2="{_fmt(lx + 10)}" y1="{_fmt(ly)}" y2="{_fmt(ly)}" '
            f'stroke="{colour}" stroke-width="1.6"/>'
        )
        out.append(_text(lx + 13, ly + 2.5, f"{labels.get(code, code)}: {shown}", 6.5))
    out.append("</g>")
    return out


def coverage_over_time(
    model: ModelReport, group_labels: Mapping[str, Mapping[str, str]]
) -> str | None:
    """Outcome coverage per group over time, one panel per attribute (None: the model's
    outcomes come with its predictions, or none was released in the period)."""
    by_attr: dict[str, list[CoveragePoint]] = {}
    for p in model.coverage:
        if p.at is not None:
            by_attr.setdefault(p.attribute, []).append(p)
    if not by_attr:
        return None
    name = f"coverage-{_slug(model.model_id)}"
    panel_w = LEFT + PANEL_W + GAP_X
    n_groups = max(len(p.groups) for ps in by_attr.values() for p in ps)
    panel_h = TOP + max(PANEL_H, 4 + n_groups * LEGEND_LINE) + 16
    cols = min(COLUMNS, len(by_attr))
    rows = -(-len(by_attr) // cols)
    width, height = panel_w * cols, panel_h * rows
    label = f"Outcome coverage per group over time, {model.model_id}"
    body: list[str] = []
    for k, (attr, points) in enumerate(by_attr.items()):
        body.append(f'<g transform="translate(0 {_fmt((k // cols) * panel_h)})">')
        body += _panel(attr, points, group_labels.get(attr, {}), (k % cols) * panel_w, name)
        body.append("</g>")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}pt" '
        f'height="{_fmt(height)}pt" viewBox="0 0 {_fmt(width)} {_fmt(height)}" role="img" '
        f'aria-label="{_esc(label)}" class="fig" id="fig-{name}" font-family="{FONT}">'
        + "".join(body)
        + "</svg>"
    )
