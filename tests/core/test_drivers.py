"""What drives a disparity: extreme groups, their share of resamples, privacy, sentences.

Tolerance of a resample share against its expected value p: binomial sd sqrt(p (1 - p) / K)
of a share over K independent resamples, times Z = 5, plus 1 / K for discreteness.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import MetricRule, MonitorConfig
from monitor.core.axis1 import evaluate_axis1
from monitor.core.counts import CountTable
from monitor.core.drivers import (
    driver_sentence,
    extreme_shares,
    group_rates,
    stack_shares,
    subgroup_extremes,
)
from monitor.core.intersections import Intersection
from monitor.core.jsonable import to_json
from monitor.core.metrics import Tallies, supported_groups
from monitor.store.codec import cell_result_from_json

Z = 5.0
RULES = MonitorConfig().metrics


def window(spec: list[tuple[str, int, float]], seed: int = 0) -> CountTable:
    """A window of groups (name, records, selection rate), labels half 1, scores uniform."""
    rng = np.random.default_rng(seed)
    table = CountTable([g for g, _, _ in spec])
    for g, (_, n, rate) in enumerate(spec):
        sel = round(n * rate)
        table.add(
            np.full(n, g), rng.integers(0, 2, n), (np.arange(n) < sel).astype(int), rng.random(n)
        )
    return table


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), groups=st.integers(2, 6), ms=st.sampled_from([1, 11, 20]))
def test_compiled_shares_equal_numpy_shares(seed, groups, ms):
    """The compiled counter (the engine's) and the plain numpy statement agree exactly,
    for every metric's driver rate and its rule of which groups enter a resample."""
    rng = np.random.default_rng(seed)
    M, K, G, B = 3, 40, groups, 4
    cells = rng.integers(0, 30, size=(M, K, G, 4)).astype(float)
    bin_n = rng.integers(0, 10, size=(M, K, G, 2, B)).astype(float)
    boot = Tallies(
        tn=cells[..., 0], fp=cells[..., 1], fn=cells[..., 2], tp=cells[..., 3],
        bin_n=bin_n, bin_score=bin_n.sum(axis=3) * rng.random((M, K, G, B)),
    )  # fmt: skip
    support = rng.random((M, G)) < 0.8
    rows = np.array([0, 2])
    for name, rate in [("DI", "SR"), ("SPD", "SR"), ("EOPP", "TPR"), ("EOD", "TPR"),
                       ("EOD", "FPR"), ("PP", "PPV"), ("TI", "benefit"), ("CAL", "ECE"),
                       ("CAL_GAP", "gap")]:  # fmt: skip
        lo, hi = stack_shares(name, rate, boot, support, ms, rows)
        valid = supported_groups(name, boot, support[:, None, :], ms)
        ref_lo, ref_hi = extreme_shares(group_rates(rate, boot), valid)
        np.testing.assert_allclose(lo, ref_lo[rows], atol=1e-12, err_msg=name)
        np.testing.assert_allclose(hi, ref_hi[rows], atol=1e-12, err_msg=name)


def test_failing_cell_names_its_extremes_and_how_often():
    # "N" selected at 0.30, "W" at 0.52, "A" at 0.50 and "B" at 0.51: N is the lowest in
    # every resample; the highest is shared between W, A and B
    t = window([("N", 400, 0.30), ("W", 2000, 0.52), ("A", 1000, 0.50), ("B", 1000, 0.51)])
    di = [r for r in RULES if r.name == "DI"]
    K = 500
    (c,) = evaluate_axis1({("m", "race"): t}, di, K=K, N=4400, seed=5)
    assert c.point_verdict == "fail"
    d = c.drivers
    assert (d.rate, d.low_group, d.low_rate) == ("SR", "N", 0.30)
    assert (d.high_group, d.high_rate) == ("W", 0.52)
    assert d.low_share == 1.0
    assert 0.3 < d.high_share < 1.0  # W is often but not always the highest
    shares = {g: (lo, hi) for g, lo, hi in d.shares}
    assert sum(hi for _, hi in shares.values()) == pytest.approx(1.0, abs=0.02)
    assert driver_sentence(c.to_dict()) == (
        "DI by race fails because N patients are selected at 0.30 against 0.52 for W "
        f"patients; in 100 % of resamples N is the lowest group and in "
        f"{round(100 * d.high_share)} % W is the highest."
    )


def test_share_of_two_tied_groups_is_about_one_half():
    """Two groups with the same low selection rate and size: each is the lowest in about
    half of the resamples (ties are rare at this size, counted for both)."""
    t = window([("X", 600, 0.35), ("Y", 600, 0.35), ("W", 3000, 0.55)], seed=2)
    K = 1000
    (c,) = evaluate_axis1(
        {("m", "race"): t}, [r for r in RULES if r.name == "SPD"], K=K, N=4200, seed=9
    )
    shares = {g: lo for g, lo, _ in c.drivers.shares}
    tol = Z * math.sqrt(0.25 / K) + 1 / K + 0.05  # 0.05: the tie share, at most
    assert abs(shares["X"] - 0.5) <= tol and abs(shares["Y"] - 0.5) <= tol
    assert shares["X"] + shares["Y"] >= 1.0  # one of them is the lowest in every resample


def test_withheld_group_is_a_small_group_without_figures():
    # "S" (4 records) is withheld, so secondary suppression withholds the next smallest
    # group, "N" (60 records), which is the lowest: its name and figures must not show
    t = window([("S", 4, 0.5), ("N", 60, 0.20), ("W", 2000, 0.52), ("A", 900, 0.50)])
    (c,) = evaluate_axis1({("m", "race"): t}, [r for r in RULES if r.name == "DI"], K=200,
                          N=2964, seed=1)  # fmt: skip
    assert c.point_verdict == "fail"
    d = c.drivers
    assert d.low_group is None and d.low_withheld and math.isnan(d.low_rate)
    assert math.isnan(d.low_share)
    assert all(g not in ("N", "S") for g, _, _ in d.shares)
    s = driver_sentence(c.to_dict())
    assert s.startswith("DI by race fails because a small group is selected against 0.52 for W")
    assert "N" not in s.replace("DI by", "") and "0.20" not in s


def test_stable_pass_and_undefined_cells_have_no_drivers():
    t = window([("A", 3000, 0.50), ("B", 3000, 0.51)])
    undefined = window([("A", 3000, 0.50), ("B", 5, 0.2)])
    cells = evaluate_axis1(
        {("m", "race"): t, ("m", "sex"): undefined},
        [r for r in RULES if r.name in ("DI", "SPD")], K=200, N=6000, seed=1,
    )  # fmt: skip
    for c in cells:
        assert c.drivers is None and c.driver_rate is None and c.low_group is None, c
        assert driver_sentence(c.to_dict()) is None
    assert any(c.attribute == "race" and c.vfr == 0 and c.point_verdict == "pass" for c in cells)
    assert any(c.attribute == "sex" and math.isnan(c.value) for c in cells)


def test_drivers_survive_the_json_round_trip():
    t = window([("N", 400, 0.30), ("W", 2000, 0.52)])
    (c,) = evaluate_axis1({("m", "race"): t}, [r for r in RULES if r.name == "DI"], K=100,
                          N=2400, seed=1)  # fmt: skip
    assert c.drivers is not None
    assert cell_result_from_json(c.to_dict()) == c
    assert cell_result_from_json(json.loads(to_json(c.to_dict()))) == c


def test_calibration_driver_is_the_largest_error():
    rng = np.random.default_rng(4)
    t = CountTable(["A", "B"])
    n = 2000
    g = rng.integers(0, 2, n)
    score = rng.random(n)
    label = np.where(g == 0, rng.random(n) < score, rng.random(n) < 0.5).astype(int)
    t.add(g, label, (score > 0.5).astype(int), score)
    cal = [MetricRule(name="CAL", threshold=0.05, direction="<=")]
    (c,) = evaluate_axis1({("m", "sex"): t}, cal, K=200, N=n, seed=1)
    assert c.point_verdict == "fail" and c.drivers.high_group == "B"
    assert driver_sentence(c.to_dict()).startswith(
        f"CAL by sex fails because B patients have the largest calibration error "
        f"({c.drivers.high_rate:.2f}); in 100 % of resamples B is the highest group"
    )


def test_subgroups_within_an_extreme_group():
    names = ["N x F", "N x M", "W x F", "W x M", "A x F", "A x M"]

    def point(a_f: int) -> Tallies:
        spec = [(names[0], 200, 0.20), (names[1], 250, 0.40), (names[2], 1000, 0.52),
                (names[3], 1000, 0.50), (names[4], a_f, 0.4), (names[5], 300, 0.45)]  # fmt: skip
        return Tallies.from_confusion(window(spec).counts.sum(axis=-1).astype(float))

    parent_of = [0, 0, 1, 1, 2, 2]
    subs, lo, hi = subgroup_extremes("SR", names, point(50), parent_of, 0, 20)
    assert [s.group for s in subs] == ["N x F", "N x M"]
    assert (lo, hi) == ("N x F", "N x M")
    assert [s.rate for s in subs] == [0.20, 0.40]
    # "A x F" with 5 records is withheld, and with it (secondary suppression) the
    # smallest shown combined group, "N x F" (200): only "N x M" shows within N
    subs, lo, hi = subgroup_extremes("SR", names, point(5), parent_of, 0, 20)
    assert subs[0].withheld and math.isnan(subs[0].rate) and subs[1].rate == 0.40
    assert (lo, hi) == ("N x M", "N x M")
    subs_a, lo_a, hi_a = subgroup_extremes("SR", names, point(5), parent_of, 2, 20)
    assert subs_a[0].withheld and not subs_a[0].entered
    assert (lo_a, hi_a) == ("A x M", "A x M")


def _subs(c) -> tuple:
    """The combined groups within a cell's lowest group (none: no drivers)."""
    return () if c.drivers is None else c.drivers.subgroups


def test_attribute_cell_names_the_combined_groups_within_its_lowest_group():
    """DI by race fails because of N; the race_x_sex table of the same grid says which
    sex groups within N are selected least (N:F at 0.20, N:M at 0.40). Which combined
    groups lie within N comes from the configured intersection, not from the names."""
    spec = [("N:F", 200, 0.20), ("N:M", 250, 0.40), ("W:F", 1000, 0.52),
            ("W:M", 1000, 0.50)]  # fmt: skip
    comb = window(spec)
    race = CountTable(["N", "W"])
    race.counts[0] = comb.counts[0] + comb.counts[1]
    race.counts[1] = comb.counts[2] + comb.counts[3]
    di = [r for r in RULES if r.name == "DI"]
    inter = {"race_x_sex": Intersection("race_x_sex", ("race", "sex"), (("N", "W"), ("F", "M")))}
    tables = {("m", "race"): race, ("m", "race_x_sex"): comb}
    cells = evaluate_axis1(tables, di, K=100, N=2450, seed=1, intersections=inter)
    by_attr = {c.attribute: c for c in cells}
    c = by_attr["race"]
    assert c.low_group == "N" and _subs(c) == (("N:F", 0.20), ("N:M", 0.40))
    assert driver_sentence(c.to_dict()).endswith("; within N: N:F 0.20, N:M 0.40.")
    assert _subs(by_attr["race_x_sex"]) == ()  # a combined cell has no finer groups
    assert cell_result_from_json(json.loads(to_json(c.to_dict()))) == c
    # without the configured intersection, or without its table, nothing to decompose
    assert _subs(evaluate_axis1(tables, di, K=100, N=2450, seed=1)[0]) == ()
    (alone,) = evaluate_axis1({("m", "race"): race}, di, K=100, N=2450, seed=1,
                              intersections=inter)  # fmt: skip
    assert _subs(alone) == ()
    # a table that is not the configured combinations is refused, not misread
    wrong = {("m", "race"): race, ("m", "race_x_sex"): window(list(reversed(spec)))}
    with pytest.raises(ValueError, match="not the 4 combinations of race x sex"):
        evaluate_axis1(wrong, di, K=100, N=2450, seed=1, intersections=inter)


def test_the_sentence_names_groups_and_reads_as_english():
    """Group codes become the configured names; a bare number is never a noun ("1
    patients"); a passing cell that flips reads as a sentence; a withheld group stays "a
    small group" with no figure."""
    row = {"metric": "DI", "attribute": "sex", "dominant_verdict": "fail",
           "point_verdict": "fail", "driver_rate": "SR", "low_group": "1", "high_group": "0",
           "low_rate": 0.27, "high_rate": 0.44, "low_share": 1.0, "high_share": 1.0}  # fmt: skip
    names = {"0": "Male", "1": "Female"}
    assert driver_sentence(row, names) == (
        "DI by sex fails because Female patients are selected at 0.27 against 0.44 for Male "
        "patients; in 100 % of resamples Female is the lowest group and in 100 % Male is "
        "the highest."
    )
    assert driver_sentence(row, {}).startswith(
        "DI by sex fails because patients of group 1 are selected at 0.27 against 0.44 for "
        "patients of group 0;"
    )
    flips = {**row, "metric": "EOPP", "dominant_verdict": "pass", "point_verdict": "pass",
             "driver_rate": "TPR", "low_rate": 0.58, "high_rate": 0.61}  # fmt: skip
    assert driver_sentence(flips, names).startswith(
        "EOPP by sex passes, but its verdict flips in some resamples: Female patients have a "
        "true-positive rate of 0.58 against 0.61 for Male patients;"
    )
    small = {**row, "low_group": None, "low_withheld": True, "low_rate": None,
             "low_share": None}  # fmt: skip
    s = driver_sentence(small, names)
    assert s == ("DI by sex fails because a small group is selected against 0.44 for Male "
                 "patients; in 100 % of resamples Male is the highest group.")  # fmt: skip
