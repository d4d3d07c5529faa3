"""The report's outcome-coverage figure (issue 23): what it draws, and what it withholds."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from monitor.report.coverage_figure import PANEL_H, TOP, coverage_over_time
from monitor.report.data import CoveragePoint, ModelReport

SVG = "{http://www.w3.org/2000/svg}"
T0 = datetime(2026, 7, 1, tzinfo=UTC)


def _point(day: int, groups: dict, gap: float | None, reason: str = "") -> CoveragePoint:
    return CoveragePoint("race", day, T0 + timedelta(days=day), groups, gap, 0.10, reason)


def _model(points: list[CoveragePoint]) -> ModelReport:
    return ModelReport(model_id="los-xgb", cells=[], coverage=points)


def test_one_line_per_group_drawn_at_its_coverage_and_withheld_values_are_gaps():
    points = [
        _point(0, {"2": 0.9, "3": 0.9, "0": None}, 0.0),
        _point(10, {"2": 0.63, "3": 0.9, "0": None}, 0.3, "outcomes incomplete"),
        _point(20, {"2": None, "3": 0.88, "0": None}, None),
        _point(30, {"2": 0.6, "3": 0.87, "0": None}, 0.31, "outcomes incomplete"),
    ]
    svg = coverage_over_time(_model(points), {"race": {"2": "Black", "3": "White"}})
    assert svg is not None
    root = ET.fromstring(svg)  # well-formed, one <svg>, with its accessible name
    assert root.get("role") == "img" and "los-xgb" in root.get("aria-label", "")
    lines = {el.get("id"): el for el in root.iter(f"{SVG}polyline")}
    dots = {el.get("id"): el for el in root.iter(f"{SVG}circle")}
    # group 3: one unbroken line; group 2: broken at the withheld day 20 (a line of two
    # points, then a lone point); group 0, withheld throughout: nothing drawn
    assert sorted(lines) == [
        "coverage-los-xgb-race-2-0",
        "coverage-los-xgb-race-3-0",
    ]
    assert sorted(dots) == ["coverage-los-xgb-race-2-1"]
    ys = [float(p.split(",")[1]) for p in lines["coverage-los-xgb-race-2-0"].get("points").split()]
    assert [round(1 - (y - TOP) / PANEL_H, 2) for y in ys] == [0.9, 0.63]
    assert float(dots["coverage-los-xgb-race-2-1"].get("cy")) == TOP + (1 - 0.6) * PANEL_H
    text = " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))
    assert "coverage gap 0.31 > max: outcomes incomplete" in text
    assert "Black: 0.60" in text and "White: 0.87" in text and "0: <11" in text


def test_no_figure_without_coverage():
    assert coverage_over_time(_model([]), {}) is None
