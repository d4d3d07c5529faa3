"""Time to a reliable verdict (issue 24): how long this volume needs to reach N*.

The extrapolation's law is checked on a curve it must fit exactly, its arithmetic on
hand-made cases, and its prediction against an N* actually measured on a cohort ten
times larger than the one it was made from.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from batch_axes.axis2 import (
    Axis2Cell,
    CurvePoint,
    TimeToReliable,
    axis2,
    records_for_cutoff,
    time_to_reliable,
    with_time_to_reliable,
)
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.core.tables import tables_from_frame


def _curve(c: float, sizes: list[int], cohort_n: int) -> tuple[CurvePoint, ...]:
    return tuple(CurvePoint(n, c * math.sqrt(1 / n - 1 / cohort_n), 1.0, 0.1, 0) for n in sizes)


def _cell(curve: tuple[CurvePoint, ...], cohort_n: int) -> Axis2Cell:
    return Axis2Cell("m", "DI", "race_x_sex", cohort_n, math.inf, False, True, curve)


def test_a_curve_of_the_law_gives_its_size_and_small_sizes_do_not_count():
    curve = _curve(12.0, [1_000, 2_000, 5_000, 10_000], 20_000)
    assert records_for_cutoff(curve, 20_000, 0.05) == pytest.approx((12 / 0.05) ** 2)
    # below half the largest evaluated size groups drop out of the support rule: ignored
    wild = (CurvePoint(1_000, 5.0, 1.0, 5.0, 0), *curve[2:])
    assert records_for_cutoff(wild, 20_000, 0.05) == pytest.approx((12 / 0.05) ** 2)
    infinite = (CurvePoint(1_000, math.inf, math.nan, math.nan, 30),)
    assert math.isnan(records_for_cutoff(infinite, 20_000, 0.05))


@pytest.mark.parametrize(
    ("c", "days", "text"),
    [
        # cohort: 20,000 records over 90 days; needed = (c / 0.05)^2 records
        (math.sqrt(80_000) * 0.05, 360.0, "about 51 weeks at this volume"),
        (math.sqrt(100_000) * 0.05, 450.0, "not within a year"),
        (math.sqrt(4_000) * 0.05, 18.0, "about 3 weeks at this volume"),
        (math.sqrt(2_000) * 0.05, 9.0, "about 9 days at this volume"),
    ],
)
def test_days_are_the_smallest_groups_need_over_its_arrival_rate(c, days, text):
    cell = _cell(_curve(c, [5_000, 10_000], 20_000), 20_000)
    est = time_to_reliable(cell, smallest_group_n=400, cohort_days=90.0, cv_cutoff=0.05)
    assert est.days == pytest.approx(days, abs=0.1) and est.text == text
    # the smallest group holds 2 % of the cohort: it needs 2 % of the records needed
    assert est.group_needed == pytest.approx(0.02 * est.records_needed, rel=0.02)


def test_no_estimate_without_a_curve_two_groups_or_a_time_span():
    cell = _cell(_curve(10.0, [5_000, 10_000], 20_000), 20_000)
    for smallest, days, why in [
        (math.nan, 90.0, "fewer than two groups evaluated"),
        (400, 0.0, "the cohort spans no time"),
    ]:
        est = time_to_reliable(cell, smallest, days, 0.05)
        assert est == TimeToReliable(None, None, None, f"not estimable: {why}")
    flat = _cell((CurvePoint(5_000, math.inf, 0.0, 0.0, 0),), 20_000)
    assert time_to_reliable(flat, 400, 90.0, 0.05).text.startswith("not estimable")


def test_the_prediction_from_a_small_cohort_meets_the_n_star_of_a_large_one():
    """From 12,000 records, the records needed for EOPP by race x sex; measured on a
    cohort of 150,000 of the same population, N* falls within a factor two of it."""
    cfg = config_from_mapping({"intersections": [{"attributes": ["race", "sex"]}]})
    big = synthetic_window(150_000, seed=5, config=cfg)
    small = big.sample(12_000, random_state=1)
    grid = (1_000, 2_000, 4_000, 6_000, 8_000, 10_000)
    fine = tuple(range(2_000, 140_001, 2_000))
    rule = [r for r in cfg.metrics if r.name == "EOPP"]
    key = ("model-00", "race_x_sex")
    t_small = {key: tables_from_frame(small, cfg)[key]}
    t_big = {key: tables_from_frame(big, cfg)[key]}
    cell = axis2(t_small, rule, sizes=grid, R=60, seed=3)[0]
    assert not cell.reached  # too few records for a reliable EOPP by race x sex
    est = with_time_to_reliable([cell], t_small, {"model-00": 30.0}, 0.05)[0].to_reliable
    assert est is not None and est.records_needed is not None
    measured = axis2(t_big, rule, sizes=fine, R=60, seed=3)[0]
    assert measured.reached
    assert 0.5 <= est.records_needed / measured.n_star <= 2.0, (est, measured.n_star)
    # and the days follow the volume: 12,000 records in 30 days
    assert est.days == pytest.approx(est.records_needed / (12_000 / 30.0), rel=0.03)


def test_a_reached_cell_carries_no_estimate_and_the_dict_round_trips():
    cfg = config_from_mapping({})
    frame = synthetic_window(30_000, seed=2, config=cfg)
    tables = tables_from_frame(frame, cfg)
    cells = with_time_to_reliable(
        axis2(tables, cfg.metrics, R=20, seed=1), tables, {"model-00": 60.0}, 0.05
    )
    assert any(c.reached for c in cells) and any(not c.reached for c in cells)
    for c in cells:
        assert (c.to_reliable is None) == c.reached
        assert Axis2Cell.from_dict(c.to_dict()) == c
    assert np.all([c.to_reliable.text for c in cells if not c.reached])
