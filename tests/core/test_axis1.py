"""Axis 1: the count-level bootstrap against the record-level oracle (Algorithm 1).

Monte Carlo tolerances. Fast engine and oracle are independent estimates from
K resamples each. With z = 5 (two-sided p ~ 6e-7 per comparison, so the whole
file's few thousand comparisons fail by chance with probability < 0.2 %):

* pass share pi = n_pass / K: |pi_f - pi_o| <= z * sqrt(2 pbar (1 - pbar) / K) + 2 / K
  (binomial sd of each share; 2/K absorbs the discreteness at pbar near 0 or 1).
* mean of the metric draws: |m_f - m_o| <= z * sqrt((sd_f^2 + sd_o^2) / K).
* sd of the draws: the sd of a sample sd is about sd * sqrt((kurtosis - 1) / (4 K));
  with kurtosis taken as at most 5 (metrics are bounded, mildly skewed):
  |sd_f - sd_o| <= z * sqrt(2) * sdbar * sqrt(1 / K) + 1e-12.
Seeds are fixed, so the run is repeatable.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.bench.synthetic import synthetic_tables
from monitor.config import MonitorConfig
from monitor.core import sampling
from monitor.core.axis1 import (
    allocate_resample,
    draw_params,
    evaluate_axis1,
    percentile_of_sorted,
    summarise_draws,
)
from monitor.core.cell_result import EVALUABLE
from monitor.core.counts import CountTable
from monitor.reference.axis1 import reference_axis1
from tests.support.strategies import cohorts

Z = 5.0
RULES = MonitorConfig().metrics


def assert_close_to_oracle(fast, ref, K):
    assert (fast.model_id, fast.metric, fast.attribute) == (ref.model_id, ref.metric, ref.attribute)
    assert fast.window_n == ref.window_n and fast.resample_n == ref.resample_n
    assert fast.groups_left_out == ref.groups_left_out
    # issue 24: how many groups a value rests on, "4 of 12 groups evaluated"
    assert (fast.groups_evaluated, fast.groups_total) == (ref.groups_evaluated, ref.groups_total)
    if math.isnan(ref.value):
        assert math.isnan(fast.value)
    else:
        assert fast.value == pytest.approx(ref.value, abs=1e-12)
    assert fast.point_verdict == ref.point_verdict
    assert fast.evaluable == ref.evaluable or abs(fast.n_undefined - ref.n_undefined) <= max(
        3, Z * math.sqrt(K)
    )  # the more-than-half rule may fall either side for a cell at half undefined
    if not (fast.evaluable and ref.evaluable):
        return
    # the support rule's report: the fewest records any rate of the value rests on
    if math.isnan(ref.min_denominator):
        assert math.isnan(fast.min_denominator)
    else:
        assert fast.min_denominator == ref.min_denominator
    pf, po = fast.n_pass / K, ref.n_pass / K
    pbar = (pf + po) / 2
    tol = Z * math.sqrt(2 * pbar * (1 - pbar) / K) + 2 / K
    assert abs(pf - po) <= tol, (fast.metric, pf, po, tol)
    assert abs(fast.vfr - ref.vfr) <= tol
    # undefined draws come from support rules that do not depend on resampling
    # except zero denominators (PPV); compare their shares like pass shares
    uf, uo = fast.n_undefined / K, ref.n_undefined / K
    ubar = (uf + uo) / 2
    assert abs(uf - uo) <= Z * math.sqrt(2 * ubar * (1 - ubar) / K) + 2 / K
    if (
        fast.n_undefined < K
        and ref.n_undefined < K
        and not math.isnan(fast.sd)
        and not math.isnan(ref.sd)
    ):
        mean_tol = Z * math.sqrt((fast.sd**2 + ref.sd**2) / K) + 1e-12
        assert abs(fast.mean - ref.mean) <= mean_tol, (fast.metric, fast.mean, ref.mean, mean_tol)
        sdbar = (fast.sd + ref.sd) / 2
        sd_tol = Z * math.sqrt(2) * sdbar * math.sqrt(1 / K) + 1e-12
        assert abs(fast.sd - ref.sd) <= sd_tol, (fast.metric, fast.sd, ref.sd, sd_tol)


def _fast_and_oracle(cohort, K, N, min_support, seed):
    groups, g, y, d, s = cohort
    table = CountTable.from_records(groups, g, y, d, s)
    fast = evaluate_axis1(
        {("m", "a"): table}, RULES, K=K, N=N, min_group_support=min_support, seed=seed
    )
    ref = reference_axis1(
        "m",
        "a",
        groups,
        g,
        y,
        d,
        s,
        RULES,
        K=K,
        N=N,
        min_group_support=min_support,
        rng=np.random.default_rng(seed + 1),
    )
    return fast, ref


@settings(max_examples=25)
@given(
    cohort=cohorts(max_n=400, min_n=0),
    N=st.sampled_from([50, 150, 10_000]),
    min_support=st.sampled_from([1, 10, 20]),
    seed=st.integers(0, 2**31),
)
def test_fast_bootstrap_matches_oracle_on_random_cohorts(cohort, N, min_support, seed):
    K = 300
    fast, ref = _fast_and_oracle(cohort, K, N, min_support, seed)
    assert len(fast) == len(ref) == len(RULES)
    for f, r in zip(fast, ref, strict=True):
        assert_close_to_oracle(f, r, K)


def test_fast_bootstrap_matches_oracle_precisely_near_thresholds():
    """A larger K on cells near their thresholds, where a biased engine would show."""
    rng = np.random.default_rng(11)
    n = 1500
    g = rng.choice(3, size=n, p=[0.5, 0.35, 0.15])
    y = (rng.uniform(size=n) < np.array([0.40, 0.45, 0.50])[g]).astype(np.int64)
    s = np.clip(0.35 * y + rng.uniform(0, 0.65, size=n) + 0.02 * g, 0, 1)
    d = (s >= 0.5).astype(np.int64)
    K = 2000
    fast, ref = _fast_and_oracle((("a", "b", "c"), g, y, d, s), K, 1000, 20, 5)
    flipping = 0
    for f, r in zip(fast, ref, strict=True):
        assert_close_to_oracle(f, r, K)
        flipping += f.vfr > 0.05
    assert flipping >= 2  # the scenario does exercise cells near their thresholds


def test_vfr_and_dominant_verdict_definitions():
    # 10 draws around a >= 0.8 threshold: 6 pass -> VFR 0.4, dominant pass
    draws = np.array([0.81, 0.9, 0.85, 0.8, 0.95, 0.82, 0.7, 0.75, 0.6, 0.79])
    s = summarise_draws(draws, 0.8, ">=")
    assert int(s["n_pass"]) == 6 and float(s["vfr"]) == pytest.approx(0.4)
    assert bool(s["dominant_pass"])
    # a tie is a Fail
    tie = summarise_draws(np.array([0.9, 0.9, 0.1, 0.1]), 0.8, ">=")
    assert float(tie["vfr"]) == 0.5 and not bool(tie["dominant_pass"])
    # sigma = |mean - tau| / sd (ddof 1); CI = numpy's linear percentiles
    assert float(s["sigma"]) == pytest.approx(abs(draws.mean() - 0.8) / draws.std(ddof=1))
    assert float(s["ci_low"]) == pytest.approx(np.percentile(draws, 2.5))
    assert float(s["ci_high"]) == pytest.approx(np.percentile(draws, 97.5))
    # undefined draws carry no verdict: VFR and the dominant verdict are over the defined
    # ones (2 of 3 pass: VFR 1/3, dominant pass; as Fail it was 2 of 4, a tie: fail), and
    # they are left out of mean/sd/CI
    u = summarise_draws(np.array([0.9, np.nan, 0.9, 0.7]), 0.8, ">=")
    assert int(u["n_pass"]) == 2 and int(u["n_undefined"]) == 1
    assert float(u["vfr"]) == pytest.approx(1 / 3) and bool(u["dominant_pass"])
    assert float(u["mean"]) == pytest.approx((0.9 + 0.9 + 0.7) / 3)
    assert bool(u["evaluable"])
    # more than half undefined: not evaluable (half exactly still is)
    assert not bool(summarise_draws(np.array([0.9, np.nan, np.nan]), 0.8, ">=")["evaluable"])
    assert bool(summarise_draws(np.array([0.9, np.nan]), 0.8, ">=")["evaluable"])


@given(st.lists(st.floats(0, 1), min_size=1, max_size=60), st.floats(0, 100))
def test_percentile_of_sorted_equals_numpy(values, q):
    v = np.sort(np.array(values))
    padded = np.concatenate([v, [np.nan] * 3])[None, :]
    got = percentile_of_sorted(padded, np.array([len(v)]), q)[0]
    assert got == pytest.approx(np.percentile(v, q), abs=1e-12)


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=12), st.integers(0, 20_000))
def test_allocation_is_proportional_and_exact(counts, size):
    c = np.array(counts)
    sizes = allocate_resample(c, size)
    if c.sum() == 0:
        assert sizes.sum() == 0
        return
    assert sizes.sum() == size
    assert np.all(np.abs(sizes - c * size / c.sum()) < 1)  # within one of proportional
    assert np.all(sizes[c == 0] == 0)


def test_allocation_keeps_the_window_when_it_fits():
    c = np.array([[30, 7], [0, 3]])
    assert np.array_equal(allocate_resample(c, int(c.sum())), c)


def test_multinomial_rows_moments_and_totals():
    rng = np.random.default_rng(3)
    n = np.array([0, 1, 7, 250, 3000])
    probs = np.array(
        [
            [0.2, 0.8, 0.0],
            [0.0, 0.0, 1.0],
            [0.5, 0.25, 0.25],
            [0.1, 0.6, 0.3],
            [0.001, 0.0, 0.999],
        ]
    )
    K = 20_000
    draws = sampling.multinomial_rows(rng, n, probs, K).transpose(0, 2, 1)  # (S, C, K)
    assert np.all(draws.sum(axis=1) == n[:, None])
    assert np.all(draws[probs == 0] == 0)
    mean = draws.mean(axis=-1)
    var = draws.var(axis=-1)
    exp_mean = n[:, None] * probs
    exp_var = n[:, None] * probs * (1 - probs)
    # z = 5 on the mean; the variance estimate's sd is about var * sqrt(2 / K) (+ excess kurtosis)
    assert np.all(np.abs(mean - exp_mean) <= 5 * np.sqrt(exp_var / K) + 1e-12)
    assert np.all(np.abs(var - exp_var) <= 5 * exp_var * np.sqrt(3 / K) + 1e-9)
    cov = np.cov(draws[3, 0], draws[3, 1])[0, 1]
    assert cov == pytest.approx(-250 * 0.1 * 0.6, rel=0.1)


def test_results_do_not_depend_on_other_models_or_threads():
    tables = synthetic_tables(3000, models=3, seed=4)
    one = {k: v for k, v in tables.items() if k[0] == "model-01"}
    full = evaluate_axis1(tables, RULES, K=200, seed=9, threads=1)
    alone = evaluate_axis1(one, RULES, K=200, seed=9, threads=1)
    threaded = evaluate_axis1(tables, RULES, K=200, seed=9, threads=3)
    assert [r for r in full if r.model_id == "model-01"] == alone
    assert full == threaded
    again = evaluate_axis1(tables, RULES, K=200, seed=10, threads=1)
    assert again != full  # a different seed gives different draws


def test_decision_metrics_do_not_depend_on_whether_calibration_is_drawn():
    """Decisions are drawn first from each table's stream, so dropping CAL from the rule
    set (which skips the bin and score draws) leaves every other cell bit-identical."""
    tables = synthetic_tables(2000, models=2, seed=3)
    no_cal = [r for r in RULES if r.name != "CAL"]
    assert len(no_cal) < len(RULES)
    full = evaluate_axis1(tables, RULES, K=100, seed=2, threads=2)
    without = evaluate_axis1(tables, no_cal, K=100, seed=2, threads=2)
    assert [r for r in full if r.metric != "CAL"] == without


def test_empty_and_single_group_windows_are_not_evaluable():
    """They used to read as stable fails (point fail, VFR 0); now no verdict, no VFR."""
    empty = CountTable(("a", "b"))
    single = CountTable.from_records(
        ("a", "b"), np.zeros(50, int), np.arange(50) % 2, np.ones(50, int), np.full(50, 0.7)
    )
    res = evaluate_axis1({("m", "empty"): empty, ("m", "single"): single}, RULES, K=50, seed=1)
    for r in res:
        assert math.isnan(r.value) and r.point_verdict == "not_evaluable"
        assert r.dominant_verdict == "not_evaluable" and math.isnan(r.vfr)
        assert r.n_undefined == 50 and not r.evaluable and not r.stable(0.10)
        assert r.not_evaluable_reason.startswith("fewer than two")
    single_res = [r for r in res if r.attribute == "single"]
    assert all(r.groups_left_out == ("b",) for r in single_res)


def test_grid_shape_and_order():
    tables = synthetic_tables(2000, models=2, seed=1)
    res = evaluate_axis1(tables, RULES, K=50, seed=1)
    assert len(res) == 2 * len(RULES) * 4
    assert [r.model_id for r in res] == sorted(r.model_id for r in res)
    assert {r.K for r in res} == {50}
    assert all(0.0 <= r.vfr <= 0.5 for r in res)
    assert all(r.resample_n == 2000 for r in res)


def test_defined_window_with_mostly_undefined_resamples_is_not_evaluable():
    """Two groups of 30 records with N = 30: each resample holds ~15 of a group, under the
    support of 20, so the value is undefined in every resample although the window's is
    defined. Counting those as Fail gave a stable fail (VFR 0); now not evaluable."""
    g = np.repeat([0, 1], 30)
    y = np.tile([0, 1], 30)
    t = CountTable.from_records(("a", "b"), g, y, np.tile([0, 1, 1], 20), np.full(60, 0.5))
    rule = [r for r in RULES if r.name == "DI"]
    (r,) = evaluate_axis1({("m", "x"): t}, rule, K=100, N=30, seed=3)
    assert not math.isnan(r.value) and r.n_undefined == 100
    assert not r.evaluable and math.isnan(r.vfr) and r.dominant_verdict == "not_evaluable"
    assert r.not_evaluable_reason.startswith("the value is undefined in 100 of 100 resamples")
    # each group has 15 of 20 in a resample: 5 more there, 10 more in the window (x 60/30),
    # in both groups (neither reaches)
    e = r.evaluability
    assert (e.records_needed, e.records_needed_groups) == (20, ("a", "b"))
    assert r.needs() == "up to 20 more records in a and b"


def test_icu_like_cohort_eopp_by_race_not_evaluable_with_records_needed():
    from monitor.core.tables import tables_from_frame
    from tests.support.sparse_cohort import icu_like_cohort

    cfg = MonitorConfig()
    frame = icu_like_cohort().assign(decision=lambda d: (d["score"] >= 0.5).astype(int))
    tables = tables_from_frame(frame, cfg)
    res = {(r.metric, r.attribute): r for r in evaluate_axis1(tables, RULES, K=100, seed=1)}
    race = res[("EOPP", "race")]
    assert not race.evaluable and math.isnan(race.vfr) and race.point_verdict == "not_evaluable"
    assert race.not_evaluable_reason == "fewer than two race groups have 20 positives (1 of 5 do)"
    assert race.needs() == "up to 5 more positives in 2"  # code 2 (Black): 15 positives
    assert res[("EOPP", "sex")].evaluable and res[("DI", "race")].evaluable


# ----------------------------------------------------------------------------- engine internals
def _numpy_draw_params(table: CountTable) -> tuple[np.ndarray, ...]:
    """The sampling parameters as numpy computed them before the compiled kernel."""
    counts = table.counts
    G, _, _, B = counts.shape
    strata = counts.sum(axis=(2, 3))
    ones = counts[:, :, 1, :].sum(axis=-1)
    p1 = np.divide(ones, strata, out=np.zeros(strata.shape), where=strata > 0)
    per_bin = counts.sum(axis=2)
    q = np.divide(
        per_bin, strata[..., None], out=np.zeros(per_bin.shape), where=strata[..., None] > 0
    )
    s_sum, s_sq = table.score_sum.sum(axis=2), table.score_sq.sum(axis=2)
    mu = np.divide(s_sum, per_bin, out=np.zeros(s_sum.shape), where=per_bin > 0)
    var = np.maximum(
        np.divide(s_sq, per_bin, out=np.zeros(s_sq.shape), where=per_bin > 0) - mu * mu, 0.0
    )
    return p1.reshape(-1), q.reshape(2 * G, B), mu, var


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 3_000), seed=st.integers(0, 2**31 - 1))
def test_draw_params_kernel_equals_the_numpy_statement_to_the_bit(n, seed):
    rng = np.random.default_rng(seed)
    table = CountTable(("a", "b", "c"), bins=10)
    # few records per cell: empty strata and bins, scores at 0 and 1 included
    scores = np.where(rng.random(n) < 0.05, rng.integers(0, 2, n), rng.random(n))
    table.add(rng.integers(0, 3, n), rng.integers(0, 2, n), rng.integers(0, 2, n), scores)
    got = draw_params(table, np.zeros((3, 2)))
    for want, have in zip(_numpy_draw_params(table), (got.p1, got.q, got.mu, got.var), strict=True):
        assert want.shape == have.shape and want.tobytes() == have.tobytes()


def test_the_engine_makes_each_cell_of_frozen_slotted_parts():
    cells = evaluate_axis1(synthetic_tables(400, 1, 3), RULES, K=20, N=400, threads=1)
    assert cells
    for cell in cells:
        # slotted: no per-instance dict; the verdict is the raw estimate without pooling
        assert not hasattr(cell, "__dict__") and not hasattr(cell.raw, "__dict__")
        assert cell.verdict is cell.raw and cell.pooled is None and cell.verdict_basis == "raw"
        if cell.evaluable:  # the common case shares one part
            assert cell.evaluability is EVALUABLE
        else:  # no verdict: no drivers to explain it
            assert cell.drivers is None and cell.point_verdict == "not_evaluable"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cells[0].raw.vfr = 0.0  # frozen as ever
    with pytest.raises(dataclasses.FrozenInstanceError):
        cells[0].K = 1
