"""Metrics from count tables against metrics from records, and against fairlearn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fairlearn.metrics import (
    demographic_parity_difference,
    demographic_parity_ratio,
    equalized_odds_difference,
)
from hypothesis import assume, given
from hypothesis import strategies as st

from monitor.core.counts import CountTable
from monitor.core.metrics import (
    METRICS,
    Tallies,
    _extremes,
    _numpy_extremes,
    expected_calibration_error,
    passes,
    tallies_from_table,
)
from monitor.reference.metrics import metric_from_records
from tests.support.strategies import cohorts


def _point(name, cohort, min_support):
    groups, g, y, d, s = cohort
    t = CountTable.from_records(groups, g, y, d, s)
    support = t.group_counts() >= min_support
    fast = float(METRICS[name](tallies_from_table(t), support, min_support))
    included = [i for i in range(len(groups)) if support[i]]
    slow = metric_from_records(name, g, y, d, s, included, min_support=min_support)
    return fast, slow


@pytest.mark.parametrize("name", sorted(METRICS))
@given(cohort=cohorts(), min_support=st.sampled_from([1, 5, 20, 30]))
def test_counts_equal_records(name, cohort, min_support):
    fast, slow = _point(name, cohort, min_support)
    if math.isnan(slow):
        assert math.isnan(fast)
    else:
        assert fast == pytest.approx(slow, abs=1e-12, rel=0)


def _included(cohort, min_support=1):
    groups, g, y, d, s = cohort
    counts = np.bincount(g, minlength=len(groups))
    keep_groups = np.flatnonzero(counts >= min_support)
    keep = np.isin(g, keep_groups)
    return keep_groups, g[keep], y[keep], d[keep], s[keep]


@given(cohorts(min_n=1))
def test_di_and_spd_equal_fairlearn(cohort):
    keep_groups, g, y, d, s = _included(cohort, 20)
    assume(len(keep_groups) >= 2)
    sr = [d[g == k].mean() for k in keep_groups]
    assume(max(sr) > 0)  # fairlearn's ratio is 0/0 there; docs/method.md section 2 defines DI = 1.0
    groups = cohort[0]
    t = tallies_from_table(CountTable.from_records(groups, g, y, d, s))
    support = np.isin(np.arange(len(groups)), keep_groups)
    di = float(METRICS["DI"](t, support))
    spd = float(METRICS["SPD"](t, support))
    assert di == pytest.approx(demographic_parity_ratio(y, d, sensitive_features=g), abs=1e-12)
    assert spd == pytest.approx(
        demographic_parity_difference(y, d, sensitive_features=g), abs=1e-12
    )


@given(cohorts(min_n=1))
def test_eod_equals_fairlearn(cohort):
    keep_groups, g, y, d, s = _included(cohort, 20)
    # fairlearn needs positives and negatives in every group
    keep_groups = [k for k in keep_groups if 0 < y[g == k].sum() < (g == k).sum()]
    assume(len(keep_groups) >= 2)
    keep = np.isin(g, keep_groups)
    g, y, d, s = g[keep], y[keep], d[keep], s[keep]
    groups = cohort[0]
    t = tallies_from_table(CountTable.from_records(groups, g, y, d, s))
    support = np.isin(np.arange(len(groups)), keep_groups)
    eod = float(METRICS["EOD"](t, support))
    expected = equalized_odds_difference(y, d, sensitive_features=g, method="between_groups")
    assert eod == pytest.approx(expected, abs=1e-12)


def test_hand_computed_example():
    # group a: 10 records, 4 positives (3 predicted 1), 6 negatives (1 predicted 1)
    # group b: 10 records, 5 positives (2 predicted 1), 5 negatives (3 predicted 1)
    n = np.array([[[5, 1], [1, 3]], [[2, 3], [3, 2]]], dtype=float)
    t = Tallies.from_confusion(n)
    both = np.array([True, True])
    assert float(METRICS["DI"](t, both)) == pytest.approx(0.4 / 0.5)
    assert float(METRICS["SPD"](t, both)) == pytest.approx(0.1)
    assert float(METRICS["EOPP"](t, both)) == pytest.approx(0.75 - 0.4)
    assert float(METRICS["EOD"](t, both)) == pytest.approx(max(0.35, 0.6 - 1 / 6))
    assert float(METRICS["PP"](t, both)) == pytest.approx(0.75 - 0.4)
    # Theil: benefits a: tn 5*1 + fp 1*2 + fn 1*0 + tp 3*1 = 10 -> mu_a = 1.0;
    # b: 2 + 6 + 0 + 2 = 10 -> mu_b = 1.0; equal means -> 0
    assert float(METRICS["TI"](t, both)) == pytest.approx(0.0, abs=1e-15)
    # one group left: undefined
    assert math.isnan(float(METRICS["DI"](t, np.array([True, False]))))


def test_theil_matches_definition_on_unequal_groups():
    n = np.array(
        [[[8, 2], [0, 0]], [[0, 0], [6, 4]]], dtype=float
    )  # a all negative, b all positive
    t = Tallies.from_confusion(n)
    mu_a, mu_b = (8 * 1 + 2 * 2) / 10, (6 * 0 + 4 * 1) / 10
    mu = (mu_a + mu_b) / 2
    expected = 0.5 * (mu_a / mu) * math.log(mu_a / mu) + 0.5 * (mu_b / mu) * math.log(mu_b / mu)
    assert float(METRICS["TI"](t, np.array([True, True]))) == pytest.approx(expected, rel=1e-14)


def test_di_is_one_when_nobody_is_selected():
    n = np.array([[[5, 0], [5, 0]], [[3, 0], [7, 0]]], dtype=float)
    assert float(METRICS["DI"](Tallies.from_confusion(n), np.array([True, True]))) == 1.0


@pytest.mark.parametrize(
    ("value", "threshold", "direction", "expected"),
    [
        (0.80, 0.80, ">=", True),
        (0.7999, 0.80, ">=", False),
        (0.1 + 0.2 - 0.2, 0.10, "abs<=", True),  # 0.10000000000000003: float noise is not a Fail
        (-0.10, 0.10, "abs<=", True),
        (0.11, 0.10, "abs<=", False),
        (0.05, 0.05, "<=", True),
        (float("nan"), 0.80, ">=", False),
        (float("nan"), 0.10, "<=", False),
    ],
)
def test_pass_rules(value, threshold, direction, expected):
    assert bool(passes(np.array(value), threshold, direction)) is expected


def test_unknown_direction_is_an_error():
    with pytest.raises(ValueError, match="direction"):
        passes(np.array([0.5]), 0.5, ">")


def test_compiled_ece_is_numpys_to_the_bit():
    """The compiled ECE terms (C-ordered stacks) give numpy's figures bit for bit, on a
    strided view (numpy's own path) as on a contiguous stack; an empty group is NaN."""
    rng = np.random.default_rng(3)
    bin_n = rng.integers(0, 40, size=(3, 50, 4, 2, 10)).astype(np.float64)
    bin_n[0, 0, 1] = 0.0
    bin_score = rng.uniform(0, 1, size=(3, 50, 4, 10)) * bin_n.sum(axis=-2)
    zeros = np.zeros((3, 50, 4))
    t = Tallies(zeros, zeros, zeros, zeros, bin_n=bin_n, bin_score=bin_score)
    gap = np.abs(bin_n[..., :, 1, :] - bin_score).sum(axis=-1)
    den = bin_n.sum(axis=(-1, -2))
    expected = np.divide(gap, den, out=np.full(den.shape, np.nan), where=den > 0)
    got = expected_calibration_error(t)
    assert got.tobytes() == expected.tobytes()
    assert math.isnan(got[0, 0, 1])
    strided = Tallies(zeros, zeros, zeros, zeros, bin_n=bin_n[:, ::2], bin_score=bin_score[:, ::2])
    assert expected_calibration_error(strided).tobytes() == expected[:, ::2].tobytes()


def test_compiled_extremes_are_numpys_to_the_bit():
    """The compiled min/max over valid groups equals numpy's loop bit for bit: ties, rows
    with fewer than two valid groups, a broadcast mask; a valid NaN or zeros of both signs
    in a row fall back to numpy (whose own rules decide those bits)."""
    rng = np.random.default_rng(5)
    values = rng.integers(0, 6, size=(7, 40, 5)) / 4.0  # many ties
    valid = rng.random((7, 1, 5)) < 0.6
    for v, ok in ((values, valid), (values[:, 0], valid[:, 0]), (values[0, 0], valid[0, 0])):
        (lo, hi), (want_lo, want_hi) = _extremes(v, ok), _numpy_extremes(v, ok)
        assert lo.shape == want_lo.shape and lo.tobytes() == want_lo.tobytes()
        assert hi.shape == want_hi.shape and hi.tobytes() == want_hi.tobytes()
    signed = np.array([[0.0, -0.0, 1.0], [np.nan, 0.5, 0.2]])
    for row in signed:
        got, want = _extremes(row, np.ones(3, bool)), _numpy_extremes(row, np.ones(3, bool))
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
