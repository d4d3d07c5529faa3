"""monitor.publish.points: the report's cell points as the report may show them."""

from __future__ import annotations

import math
from dataclasses import fields, replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batch_axes.audit_cell import audit_cell_from_row
from monitor.core.cell_result import CellResult, Estimate
from monitor.core.privacy import SMALL_CELL
from monitor.core.results import Axis2Outcome, Axis3Outcome, CellEvaluation
from monitor.core.tiers import Tier, TierResult
from monitor.publish.cells import published_audit_cell
from monitor.publish.points import (
    WITHHELD_TIER,
    CellPoint,
    guarded_point,
    published_audit_point,
    published_point,
    reported_point,
    without_small_axes,
)

AT = datetime(2026, 12, 1, tzinfo=UTC)
LABELS = {"sex": {"0": "Male", "1": "Female"}}

#: A stored window result with every field a point can show set (drivers, pooled
#: estimate, coverage, certified verdict, support note).
ROW = {
    "model_id": "m", "metric": "DI", "attribute": "sex", "evaluation": 7, "window_n": 3000,
    "threshold": 0.8, "direction": ">=", "value": 0.61, "vfr": 0.3, "ci_low": 0.55,
    "ci_high": 0.66, "dominant_verdict": "fail", "point_verdict": "fail",
    "tier": "Caution-Required", "confirmed_tier": "Caution-Required",
    "confirmed_verdict": "fail", "n_star": 5000.0, "kappa": 0.4, "failed_axes": ["axis1"],
    "pending_axes": ["axis3"], "partial": True, "n_pass": 12, "K": 200,
    "driver_rate": "SR", "low_group": "1", "high_group": "0", "low_rate": 0.27,
    "high_rate": 0.44, "low_share": 1.0, "high_share": 1.0, "pooled_value": 0.7,
    "pooled_vfr": 0.2, "pooled_dominant_verdict": "fail", "support_note": "2 of 2 groups",
    "coverage_reason": "outcomes incomplete", "outcome_coverage": {"gap": 0.3},
    "certified": {"verdict": "fail"},
}  # fmt: skip

#: What a point keeps when it is withheld: which cell, which evaluation, which rule.
IDENTITY = ("model_id", "metric", "attribute", "evaluation", "at", "window_n", "threshold",
            "direction", "K")  # fmt: skip


def _identity_only(p: CellPoint) -> CellPoint:
    """``p`` as a point that shows nothing but its identity."""
    return CellPoint(
        **{k: getattr(p, k) for k in IDENTITY}, value=None, vfr=None, ci_low=None,
        ci_high=None, dominant_verdict=None, point_verdict=None, tier=WITHHELD_TIER,
        suppressed=True,
    )  # fmt: skip


def test_a_window_of_ten_records_keeps_its_identity_only_and_one_of_eleven_shows_it_all():
    small = published_point({**ROW, "window_n": SMALL_CELL - 1}, AT, LABELS)
    assert small == _identity_only(small)
    assert (small.model_id, small.evaluation, small.at, small.K) == ("m", 7, AT, 200)
    shown = published_point({**ROW, "window_n": SMALL_CELL}, AT, LABELS)
    assert not shown.suppressed
    assert (shown.value, shown.vfr, shown.ci_low, shown.ci_high) == (0.61, 0.3, 0.55, 0.66)
    assert (shown.tier, shown.n_star, shown.kappa, shown.n_pass) == (
        "Caution-Required", 5000.0, 0.4, 12
    )
    assert (shown.pooled_value, shown.certified, shown.coverage_gap) == (0.7, "fail", 0.3)
    assert shown.driver and "Female" in shown.driver and shown.driver_clause
    assert shown.support_note and shown.coverage_reason


@given(st.integers(0, 200))
def test_a_stored_point_shows_a_figure_only_from_eleven_records(n):
    p = published_point({**ROW, "window_n": n})
    assert p.suppressed == (n < SMALL_CELL)
    if n < SMALL_CELL:
        assert p == _identity_only(p)
    else:
        assert p.value == 0.61 and p.tier == "Caution-Required"


def _audit_cell(cohort_n: int, value: float = 0.61, kappa: float = 0.4) -> CellEvaluation:
    tier = TierResult(Tier.CAUTION_REQUIRED, ("axis1",), ("axis2",), ("axis3",))
    result = CellResult(
        "m", "DI", "sex", 0.8, ">=", 200, cohort_n, 500, (), (),
        Estimate(value, "fail", 12, 0.3, "fail", 0.02, ci_low=0.55, ci_high=0.66),
        min_denominator=40.0, groups_evaluated=2, groups_total=2,
    )  # fmt: skip
    return CellEvaluation(
        result, tier, Axis2Outcome(5000.0, "about 3 weeks"),
        Axis3Outcome(True, kappa, "fair", False),
    )  # fmt: skip


@pytest.mark.parametrize("cohort_n", [0, SMALL_CELL - 1])
def test_a_withheld_audit_cell_keeps_its_identity_only(cohort_n):
    p = published_audit_point(_audit_cell(cohort_n))
    assert p == _identity_only(p)
    assert (p.model_id, p.metric, p.attribute, p.window_n, p.K) == (
        "m", "DI", "sex", cohort_n, 200
    )
    # as the report reads it back from cells.json: identity only too
    back = audit_cell_from_row(published_audit_cell(_audit_cell(cohort_n)))
    assert published_audit_point(back) == replace(p, window_n=0)


def test_an_audit_cell_of_eleven_records_shows_its_figures_and_nan_reads_as_none():
    p = published_audit_point(_audit_cell(SMALL_CELL))
    assert not p.suppressed and p.window_n == SMALL_CELL
    assert (p.value, p.vfr, p.tier, p.n_star, p.kappa) == (
        0.61, 0.3, "Caution-Required", 5000.0, 0.4
    )
    assert (p.failed_axes, p.pending_axes, p.partial) == (("axis1",), ("axis2",), True)
    assert p.time_to_reliable == "about 3 weeks" and p.support_note
    undefined = published_audit_point(_audit_cell(SMALL_CELL, value=math.nan, kappa=math.nan))
    assert undefined.value is None and undefined.kappa is None


def test_the_guard_withholds_every_figure_of_a_large_point():
    p = published_point(ROW, AT, LABELS)
    g = guarded_point(p)
    assert g.suppressed and g.tier == WITHHELD_TIER
    for f in fields(CellPoint):
        if f.name in IDENTITY:
            assert getattr(g, f.name) == getattr(p, f.name), f.name
    assert {g.value, g.vfr, g.ci_low, g.ci_high, g.n_star, g.kappa, g.n_pass} == {None}
    assert {g.dominant_verdict, g.point_verdict, g.confirmed_verdict, g.confirmed_tier} == {None}
    assert {g.driver, g.driver_clause, g.pooled_value, g.pooled_vfr, g.coverage_gap} == {None}
    assert (g.failed_axes, g.pending_axes, g.partial, g.coverage_reason) == ((), (), False, "")
    # identity only, as a small window keeps it: no words derived from the figures either
    assert (g.not_evaluable_reason, g.needs, g.support_note, g.time_to_reliable) == ("",) * 4
    assert g.certified is None
    small = published_point({**ROW, "window_n": 4}, AT, LABELS)
    shown = {f.name for f in fields(CellPoint) if f.name not in IDENTITY}
    assert {n: getattr(g, n) for n in shown} == {n: getattr(small, n) for n in shown}


def test_guard_off_and_no_small_axis_leave_a_point_as_published():
    p = published_point(ROW, AT, LABELS)
    assert reported_point(p, guard=False, small_axis2=False, small_axis3=False) is p
    on = reported_point(p, guard=True, small_axis2=False, small_axis3=False)
    assert on == guarded_point(p)
    # a point the guard withheld stays as the guard left it whatever the axes
    assert reported_point(p, guard=True, small_axis2=True, small_axis3=True) == on


@pytest.mark.parametrize(("axis2", "axis3"), [(True, False), (False, True), (True, True)])
def test_a_small_axis_withholds_its_figure_and_the_tier_only(axis2, axis3):
    p = published_point(ROW, AT, LABELS)
    out = without_small_axes(p, axis2, axis3)
    assert reported_point(p, guard=False, small_axis2=axis2, small_axis3=axis3) == out
    assert out.n_star == (None if axis2 else p.n_star)
    assert out.kappa == (None if axis3 else p.kappa)
    assert (out.tier, out.confirmed_tier) == (WITHHELD_TIER, None)
    assert (out.failed_axes, out.pending_axes, out.partial) == ((), (), False)
    # the window's own figures rest on enough records: they stay
    assert (out.value, out.vfr, out.dominant_verdict, out.suppressed) == (0.61, 0.3, "fail", False)


def test_a_small_axis_leaves_a_withheld_point_as_it_is():
    small = published_point({**ROW, "window_n": 4})
    assert without_small_axes(small, True, True) is small
    large = published_point(ROW)
    assert without_small_axes(large, False, False) is large

