"""The report's SVG primitives (monitor.report.svg): ticks, labels, dates, and a drawn figure
read back as XML, as a browser and the disclosure tests (tests/report/test_disclosure.py)
read it."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from monitor.report.svg import (
    MINUS,
    Axes,
    Canvas,
    date_ticks,
    esc,
    log_ticks,
    nice_ticks,
    num,
    slug,
    tick_label,
    timestamp,
)

NS = {"s": "http://www.w3.org/2000/svg"}
XLINK = "{http://www.w3.org/1999/xlink}href"


@given(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(1e-6, 1e6, allow_nan=False),
    st.integers(1, 8),
)
def test_nice_ticks_are_round_evenly_spaced_and_inside_the_range(lo, span, n):
    hi = lo + span
    # a range at least a millionth of its magnitude (a figure's; narrower ones are lost in
    # float rounding: ticks rounded to 12 decimals are no longer evenly spaced)
    assume(span >= 1e-6 * max(1.0, abs(lo)))
    ticks = nice_ticks(lo, hi, n)
    assert len(ticks) >= 2
    tol = span * 1e-6
    assert all(lo - tol <= t <= hi + tol for t in ticks)
    step = ticks[1] - ticks[0]
    assert all(math.isclose(b - a, step, rel_tol=1e-6) for a, b in itertools.pairwise(ticks))
    mantissa = step / 10.0 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 2.5, 5, 10))
    assert len(ticks) <= 2 * (n + 3) + 1


def test_nice_ticks_of_an_empty_or_broken_range_is_its_start():
    assert nice_ticks(3.0, 3.0) == [3.0]
    assert nice_ticks(5.0, 1.0) == [5.0]
    assert nice_ticks(0.0, math.inf) == [0.0]
    assert nice_ticks(0.0, 1.0) == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_tick_labels_have_the_decimals_of_their_step():
    assert [tick_label(v, [0, 0.25, 0.5]) for v in (0, 0.25, 0.5)] == ["0.00", "0.25", "0.50"]
    assert tick_label(12500, [0, 2500, 5000]) == "12,500"
    assert tick_label(-0.5, [-0.5, 0.0]) == f"{MINUS}0.5"
    assert tick_label(7, [7]) == "7"  # one tick: a step of 1


def test_log_ticks_are_the_decades_inside_or_the_ends_decades():
    assert log_ticks(1, 10_000) == [1.0, 10.0, 100.0, 1000.0, 10000.0]
    assert log_ticks(30, 5000) == [100.0, 1000.0]
    assert log_ticks(20, 50) == [10.0, 100.0]


def test_date_ticks_pick_months_days_or_hours_by_the_span():
    year = date_ticks(datetime(2026, 1, 10, tzinfo=UTC), datetime(2026, 12, 20, tzinfo=UTC))
    ticks, labels, offset = year
    assert [t.month for t in ticks] == [4, 7, 10] and labels == ["Apr", "Jul", "Oct"]
    assert offset == "2026"
    ticks, labels, offset = date_ticks(datetime(2025, 11, 5, tzinfo=UTC),
                                       datetime(2026, 8, 1, tzinfo=UTC))  # fmt: skip
    assert labels == ["2026", "Mar", "May", "Jul"] and offset == ""  # January: the year
    ticks, labels, offset = date_ticks(datetime(2026, 3, 2, tzinfo=UTC),
                                       datetime(2026, 3, 30, tzinfo=UTC))  # fmt: skip
    assert labels == ["02", "16", "30"] and offset == "2026-Mar"  # weekly would be 5
    ticks, labels, offset = date_ticks(datetime(2026, 3, 2, tzinfo=UTC),
                                       datetime(2026, 3, 2, 20, tzinfo=UTC))  # fmt: skip
    assert labels == ["Mar-02", "06:00", "12:00", "18:00"] and offset == "2026-Mar-02"
    lo = datetime(2026, 3, 2, 10, tzinfo=UTC)
    ticks, labels, _ = date_ticks(lo, lo + timedelta(minutes=20))  # too short: its ends
    assert ticks == [lo, lo + timedelta(minutes=20)]


def test_small_helpers():
    assert slug("model 1/<x>") == "model_1_x_"
    assert esc('a<b & "c">') == "a&lt;b &amp; &quot;c&quot;&gt;"
    assert [num(v) for v in (1.0, 0.1234, -0.0001, 2.5)] == ["1", "0.123", "0", "2.5"]
    assert timestamp(datetime(1970, 1, 2)) == 86_400.0  # naive: UTC


def _figure() -> tuple[ET.Element, Axes]:
    c = Canvas("m<1>", 'Volume of "m<1>" & co', 300, 200, digits=6)
    ax = Axes(c, 40, 20, 240, 150, xlim=(0, 10), ylim=(0, 500))
    with ax.body():
        ax.spines()
        ticks = nice_ticks(0, 500)
        ax.yticks(ticks, [tick_label(v, ticks) for v in ticks])
        ax.xticks([0, 5, 10], ["0", "5", "10"])
        c.rect(ax.px(2), ax.py(137), ax.px(3) - ax.px(2), ax.py(0) - ax.py(137), "#0072B2")
        ax.line2d([0, 1, 2, 3, 4, 5], [10, 20, math.nan, 40, math.nan, 60], "#d55e00")
        ax.band([0, 1, 2], [1, 2, 3], [4, 5, 6], "#cccccc", 0.3)
        for kind in ("v", "D", "*", "o"):
            ax.marker(5, 250, kind, "#009e73", 6)
        ax.title("Records <per> month")
    return ET.fromstring(c.svg()), ax


def test_a_drawn_figure_is_well_formed_and_named():
    root, _ = _figure()
    assert root.get("id") == "fig-m_1_" and root.get("role") == "img"
    assert root.get("aria-label") == 'Volume of "m<1>" & co'
    assert root.find("s:title", NS).text == 'Volume of "m<1>" & co'
    ids = [g.get("id") for g in root.iter(f"{{{NS['s']}}}g")]
    assert len(ids) == len(set(ids)) and "m_1_-axes_1" in ids
    assert [i for i in ids if "line2d" in i] == ["m_1_-line2d_1", "m_1_-line2d_2",
                                                  "m_1_-line2d_3"]  # fmt: skip
    lines = [g for g in root.iter(f"{{{NS['s']}}}g") if "line2d" in g.get("id")]
    # split at NaN: a two-point run, then two lone points drawn as dots
    assert [len(g) for g in lines] == [1, 1, 1]
    assert [g[0].tag.split("}")[1] for g in lines] == ["path", "circle", "circle"]
    texts = ["".join(t.itertext()) for t in root.iter(f"{{{NS['s']}}}text")]
    assert "Records <per> month" in texts and "400" in texts


def test_a_bar_reads_back_through_the_ticks_to_its_value():
    """What an attacker (or the disclosure tests) can do: fit value = a * pixel + b from the
    y tick marks and their labels, and decode a bar's height."""
    root, ax = _figure()
    px, val = [], []
    for g in root.iter(f"{{{NS['s']}}}g"):
        if "-ytick_" in g.get("id"):
            use = g.find("s:use", NS)
            assert use.get(XLINK) == "#m_1_-my"
            px.append(float(use.get("y")))
            val.append(float("".join(g.find("s:text", NS).itertext()).replace(",", "")))
    a = (val[-1] - val[0]) / (px[-1] - px[0])
    (bar,) = [p for p in root.iter(f"{{{NS['s']}}}path") if "fill: #0072b2" in p.get("style")]
    coords = bar.get("d").replace("M", "").replace("L", "").replace("z", "").split()
    ys = [float(v) for v in coords[1::2]]
    assert abs(a * (max(ys) - min(ys))) == pytest.approx(137, abs=1e-3)
    assert ax.py(500) == ax.y and ax.py(0) == ax.y + ax.h


def test_a_log_axis_and_a_downward_axis():
    c = Canvas("f", "f", 100, 100)
    ax = Axes(c, 0, 0, 100, 100, xlim=(1, 1000), ylim=(10, 0), xlog=True)
    assert [round(ax.px(v), 6) for v in (1, 10, 1000)] == [0, 33.333333, 100]
    assert ax.py(10) == 100 and ax.py(0) == 0  # lo > hi: the first row on top
    assert Axes(c, 0, 0, 10, 10, xlim=(5, 5), ylim=(0, 1)).px(5) == 0  # empty range: no /0
    assert Axes(c, 0, 0, 10, 10, xlim=(0, 1), ylim=(0, 1)).index == 3
