"""Axis 2 (N*): hypergeometric subsampling of count tables against record-level subsampling.

Monte Carlo tolerances. Fast engine and oracle are independent estimates, each
from R subsamples per size, of which n_f and n_o are defined (not NaN); mean,
sd and CV are compared only when both have at least 30 defined draws. With
z = 5 (two-sided p ~ 6e-7 per comparison) and fixed seeds (repeatable runs):

* mean of the metric draws: se(mean) = sd / sqrt(n), so
  |m_f - m_o| <= z * sqrt(sd_f^2 / n_f + sd_o^2 / n_o).
* sd of the draws: se(sd) ~= sd * sqrt((kurt - 1) / (4 n)). The kurtosis is
  bounded conservatively by k = max(5, 1.5 * the oracle draws' sample kurtosis)
  (TI behaves like a scaled chi-square, kurtosis up to ~15), so
  |sd_f - sd_o| <= z * sdbar * sqrt((k - 1) / 4 * (1 / n_f + 1 / n_o)).
* CV = sd / |mean|: by the delta method, adding relative errors linearly (a
  bound whatever the correlation of mean and sd),
  se(cv) / cv <= sqrt((k - 1) / (4 n)) + cv / sqrt(n) =: rel(n), so
  |cv_f - cv_o| <= z * cvbar * sqrt(rel(n_f)^2 + rel(n_o)^2).
* share of undefined draws u: binomial, |u_f - u_o| <= z * sqrt(2 ubar (1 - ubar) / R) + 2 / R.
* hypergeometric moments of a cell holding K of N records, n drawn:
  mean n p, variance n p (1 - p) (N - n) / (N - 1), p = K / N; the sample mean is
  within z * sqrt(var / D) of it and the sample variance within
  z * sqrt((m4 - var^2) / D) (m4: sample fourth central moment), D draws.

The comparison uses R = 1000 on 3,000-record cohorts with sizes 200, 600 and
2,500: 600 puts a 3.5 % group right at the support rule (per-draw support), and
2,500 of 3,000 makes the finite-population correction visible (a with-replacement
draw would have an sd about 2.4x too large there).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batch_axes.axis2 import (
    DEFAULT_SIZES,
    NOT_REACHED,
    Axis2Cell,
    CurvePoint,
    audit_sizes,
    axis2,
    axis2_rngs,
    cv_of_draws,
    hypergeometric_counts,
    make_cell,
    minimum_reliable_size,
    subsample_score_sums,
)
from monitor.bench.synthetic import synthetic_cohort, synthetic_tables
from monitor.config import MonitorConfig
from monitor.core.axis1 import table_rng
from monitor.core.counts import CountTable
from monitor.reference.axis2 import (
    reference_axis2,
    reference_axis2_draws,
)
from tests.support.strategies import cohorts

Z = 5.0
#: Moment comparisons need this many defined draws on both sides (asymptotic se formulas).
MIN_DEFINED = 30
RULES = MonitorConfig().metrics
NAMES = [r.name for r in RULES]


# ----------------------------------------------------------------------------- helpers
def _kurtosis(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    if x.size < 4 or x.var() == 0:
        return 3.0
    d = x - x.mean()
    return float((d**4).mean() / x.var() ** 2)


def assert_point_close(
    f: CurvePoint, o: CurvePoint, R: int, kurt: float, what: tuple[str, int]
) -> None:
    """Fast vs oracle summaries of one (cell, size), within the module docstring's bounds."""
    assert f.size == o.size
    uf, uo = f.n_undefined / R, o.n_undefined / R
    ubar = (uf + uo) / 2
    assert abs(uf - uo) <= Z * math.sqrt(2 * ubar * (1 - ubar) / R) + 2 / R, (what, uf, uo)
    nf, no = R - f.n_undefined, R - o.n_undefined  # defined draws behind each summary
    if min(nf, no) < MIN_DEFINED:
        return  # too few defined draws on one side for the asymptotic moment bounds
    k = max(5.0, 1.5 * kurt)
    mean_tol = Z * math.sqrt(f.sd**2 / nf + o.sd**2 / no) + 1e-12
    assert abs(f.mean - o.mean) <= mean_tol, (what, "mean", f.mean, o.mean, mean_tol)
    sdbar = (f.sd + o.sd) / 2
    sd_tol = Z * sdbar * math.sqrt((k - 1) / 4 * (1 / nf + 1 / no)) + 1e-12
    assert abs(f.sd - o.sd) <= sd_tol, (what, "sd", f.sd, o.sd, sd_tol)
    if math.isfinite(f.cv) and math.isfinite(o.cv):
        cvbar = (f.cv + o.cv) / 2
        rel = [math.sqrt((k - 1) / (4 * n)) + cvbar / math.sqrt(n) for n in (nf, no)]
        cv_tol = Z * cvbar * math.hypot(*rel) + 1e-12
        assert abs(f.cv - o.cv) <= cv_tol, (what, "cv", f.cv, o.cv, cv_tol)


def compare_with_oracle(groups, g, y, d, s, sizes, R, seed, min_support=20) -> list[Axis2Cell]:
    """Run both engines on one cohort and check every (metric, size); returns the fast cells."""
    table = CountTable.from_records(groups, g, y, d, s)
    fast = axis2(
        {("m", "a"): table}, RULES, sizes=sizes, R=R, min_group_support=min_support, seed=seed
    )
    grid = audit_sizes(len(g), sizes).tolist()
    ref = reference_axis2_draws(
        g,
        y,
        d,
        s,
        NAMES,
        grid,
        G=len(groups),
        R=R,
        min_group_support=min_support,
        bins=10,
        rng=np.random.default_rng(seed + 7),
    )
    assert [c.metric for c in fast] == NAMES
    for cell in fast:
        draws = ref[cell.metric]
        assert [p.size for p in cell.curve] == grid
        oracle_cell = make_cell("m", cell.metric, "a", len(g), grid, draws, 0.05, 50_000)
        for i, (fp, op) in enumerate(zip(cell.curve, oracle_cell.curve, strict=True)):
            assert_point_close(fp, op, R, _kurtosis(draws[i]), (cell.metric, fp.size))
    return fast


# ----------------------------------------------------------------------------- fast vs oracle
@pytest.mark.parametrize("attribute", ["race", "sex"])
def test_fast_matches_record_level_subsampling(attribute):
    cfg = MonitorConfig()
    c = synthetic_cohort(3000, 1, seed=3)
    s = c.scores[0]
    d = (s >= 0.5).astype(np.int64)
    groups = cfg.attribute(attribute).codes
    cells = compare_with_oracle(
        groups, c.attributes[attribute], c.label, d, s, (200, 600, 2500), R=1000, seed=1
    )
    # the scenario is not degenerate: every CV is finite and positive
    for cell in cells:
        assert all(math.isfinite(p.cv) and p.cv > 0 for p in cell.curve)
        if attribute == "sex":  # both groups always supported: the spread shrinks with size
            assert cell.curve[-1].sd < cell.curve[0].sd


def test_fast_matches_oracle_when_support_makes_draws_undefined():
    """Two groups, the small one of 30 in 1500: at size 1000 it has ~20, so about half undefined."""
    rng = np.random.default_rng(21)
    n = 1500
    g = np.zeros(n, np.int64)
    g[rng.choice(n, 30, replace=False)] = 1
    y = (rng.uniform(size=n) < 0.4).astype(np.int64)
    s = np.clip(0.3 * y + rng.uniform(0, 0.7, size=n), 0, 1)
    d = (s >= 0.5).astype(np.int64)
    cells = compare_with_oracle(("a", "b"), g, y, d, s, (300, 1000, 1400), R=600, seed=2)
    di = next(c for c in cells if c.metric == "DI")
    und = {p.size: p.n_undefined for p in di.curve}
    assert und[300] == 600  # group b never reaches 20 records in 300
    assert 100 < und[1000] < 500
    assert und[1400] < und[1000]


@settings(max_examples=20)
@given(
    cohort=cohorts(max_n=400, min_n=120),
    min_support=st.sampled_from([1, 10, 20]),
    seed=st.integers(0, 2**31),
)
def test_fast_matches_oracle_on_random_cohorts(cohort, min_support, seed):
    groups, g, y, d, s = cohort
    compare_with_oracle(
        groups, g, y, d, s, (20, 100, 250, 399), R=200, seed=seed, min_support=min_support
    )


def test_reference_axis2_returns_cells_like_the_fast_engine():
    c = synthetic_cohort(1200, 1, seed=8)
    s = c.scores[0]
    d = (s >= 0.5).astype(np.int64)
    groups = MonitorConfig().attribute("sex").codes
    ref = reference_axis2(
        "m",
        "sex",
        groups,
        c.attributes["sex"],
        c.label,
        d,
        s,
        RULES,
        sizes=(100, 1200, 5000),
        R=20,
        rng=np.random.default_rng(0),
    )
    assert [r.metric for r in ref] == NAMES
    assert all([p.size for p in r.curve] == [100] and r.cohort_n == 1200 for r in ref)


# ----------------------------------------------------------------------------- hypergeometric draws
def test_hypergeometric_counts_have_the_exact_moments():
    c = synthetic_cohort(2000, 1, seed=5)
    s = c.scores[0]
    table = CountTable.from_records(
        MonitorConfig().attribute("race").codes,
        c.attributes["race"],
        c.label,
        (s >= 0.5).astype(np.int64),
        s,
    )
    N, n, D = table.n, 1500, 20_000
    draws = hypergeometric_counts(table.counts, n, D, np.random.default_rng(4))
    assert draws.shape == (D, *table.counts.shape)
    flat = draws.reshape(D, -1).astype(np.float64)
    p = table.counts.reshape(-1) / N
    fpc = (N - n) / (N - 1)
    exp_mean = n * p
    exp_var = n * p * (1 - p) * fpc
    mean = flat.mean(axis=0)
    var = flat.var(axis=0, ddof=1)
    m4 = ((flat - mean) ** 4).mean(axis=0)
    assert np.all(np.abs(mean - exp_mean) <= Z * np.sqrt(exp_var / D) + 1e-12)
    assert np.all(np.abs(var - exp_var) <= Z * np.sqrt(np.maximum(m4 - var**2, 0) / D) + 1e-9)
    # the finite-population factor (0.25 here) is what makes this a without-replacement draw
    big = np.argsort(p)[-2:]
    assert np.all(var[big] < 0.5 * n * p[big] * (1 - p[big]))
    # covariance of two cells: -n p_i p_j (N - n) / (N - 1), se ~ sqrt((var_i var_j + cov^2) / D)
    i, j = big
    cov = np.cov(flat[:, i], flat[:, j])[0, 1]
    exp_cov = -n * p[i] * p[j] * fpc
    assert abs(cov - exp_cov) <= Z * math.sqrt((exp_var[i] * exp_var[j] + exp_cov**2) / D)


@settings(max_examples=60)
@given(cohort=cohorts(max_n=300), frac=st.floats(0, 1), seed=st.integers(0, 2**31))
def test_hypergeometric_counts_sum_to_size_and_stay_within_the_table(cohort, frac, seed):
    groups, g, y, d, s = cohort
    table = CountTable.from_records(groups, g, y, d, s)
    size = round(frac * table.n)
    draws = hypergeometric_counts(table.counts, size, 25, np.random.default_rng(seed))
    assert np.all(draws.reshape(25, -1).sum(axis=1) == size)
    assert np.all(draws >= 0) and np.all(draws <= table.counts)
    if size == table.n:
        assert np.all(draws == table.counts)


def test_hypergeometric_counts_reject_impossible_sizes():
    counts = np.array([[[[3, 0], [1, 2]], [[0, 0], [4, 0]]]])
    with pytest.raises(ValueError):
        hypergeometric_counts(counts, 11, 2, np.random.default_rng(0))


# ----------------------------------------------------------------------------- score sums
def _one_cell_table(scores: np.ndarray) -> CountTable:
    n = scores.size
    z = np.zeros(n, np.int64)
    return CountTable.from_records(("a",), z, z, z, scores)


def test_score_sums_match_without_replacement_moments():
    """Sum of c of n scores drawn without replacement: mean c mu, var c var (n - c) / (n - 1)."""
    rng = np.random.default_rng(12)
    scores = rng.uniform(0.3, 0.4, size=50)  # all in bin 3
    table = _one_cell_table(scores)
    c, D = 30, 20_000
    drawn = np.broadcast_to(table.counts, (D, *table.counts.shape)).copy()
    drawn[:, 0, 0, 0, 3] = c
    sums = subsample_score_sums(
        drawn, table.counts, table.score_sum, table.score_sq, np.random.default_rng(1)
    )[:, 0, 3]
    mu, var = scores.mean(), scores.var()
    exp_var = c * var * (50 - c) / (50 - 1)
    assert abs(sums.mean() - c * mu) <= Z * math.sqrt(exp_var / D)
    assert abs(sums.var(ddof=1) - exp_var) <= Z * exp_var * math.sqrt(2 / D)
    # and the record-level sums agree with the same formula
    rec = np.array([scores[rng.choice(50, c, replace=False)].sum() for _ in range(D)])
    assert abs(rec.var(ddof=1) - exp_var) <= Z * exp_var * math.sqrt(3 / D)


def test_score_sums_are_exact_for_the_whole_cell_and_clipped_to_the_bin():
    rng = np.random.default_rng(2)
    scores = np.concatenate([rng.uniform(0.0, 0.1, 5), rng.uniform(0.9, 1.0, 7)])
    table = _one_cell_table(scores)
    full = np.broadcast_to(table.counts, (4, *table.counts.shape))
    sums = subsample_score_sums(full, table.counts, table.score_sum, table.score_sq, rng)
    assert np.allclose(sums[:, 0, :], table.score_sum[0, 0, 0], atol=1e-12)
    none = np.zeros_like(full)
    assert np.all(
        subsample_score_sums(none, table.counts, table.score_sum, table.score_sq, rng) == 0
    )
    for c in (1, 2, 4):
        part = np.broadcast_to(table.counts, (2000, *table.counts.shape)).copy()
        part[..., 0] = np.minimum(part[..., 0], c)
        part[..., 9] = np.minimum(part[..., 9], c)
        got = subsample_score_sums(part, table.counts, table.score_sum, table.score_sq, rng)
        k = part[:, 0, 0, 0, :]
        assert np.all(got >= k * np.arange(10) / 10 - 1e-12)
        assert np.all(got <= k * np.arange(1, 11) / 10 + 1e-12)


# ----------------------------------------------------------------------------- summaries and N*
def test_cv_guard_and_undefined_draws():
    v = np.array([1.0, 2.0, 3.0, np.nan])
    s = cv_of_draws(v)
    assert float(s["mean"]) == 2.0 and float(s["sd"]) == 1.0
    assert float(s["cv"]) == 0.5 and int(s["n_undefined"]) == 1
    assert float(cv_of_draws(np.full(5, 0.7))["cv"]) == 0.0  # no variability
    assert float(cv_of_draws(np.zeros(5))["cv"]) == 0.0  # identically zero: still no variability
    assert float(cv_of_draws(np.array([-1.0, 1.0]))["cv"]) == math.inf  # mean 0, sd > 0
    assert float(cv_of_draws(np.array([-0.5, 0.5, 0.3]))["cv"]) == pytest.approx(
        np.std([-0.5, 0.5, 0.3], ddof=1) / 0.1
    )
    one = cv_of_draws(np.array([0.4, np.nan, np.nan]))
    assert float(one["cv"]) == math.inf and float(one["mean"]) == 0.4 and math.isnan(one["sd"])
    none = cv_of_draws(np.full(3, np.nan))
    assert float(none["cv"]) == math.inf and math.isnan(none["mean"])
    rows = cv_of_draws(np.array([[1.0, 3.0], [2.0, 2.0]]))  # vectorised over leading axes
    assert rows["cv"].tolist() == [pytest.approx(math.sqrt(2) / 2), 0.0]


def test_minimum_reliable_size_is_the_first_size_strictly_below_the_cutoff():
    assert minimum_reliable_size([1000, 2000, 5000], [0.2, 0.04, 0.06], 0.05) == 2000
    assert minimum_reliable_size([5000, 1000], [0.01, 0.03], 0.05) == 1000  # order-free
    assert minimum_reliable_size([1000, 2000], [0.05, math.inf], 0.05) == math.inf
    assert minimum_reliable_size([], [], 0.05) == math.inf


def test_cell_fails_when_n_star_exceeds_n_field():
    steady = np.tile([1.0, 1.01], (3, 15))  # CV ~ 0.007 at every size
    noisy = np.tile([1.0, 3.0], (3, 15))
    at = make_cell("m", "DI", "a", 100_000, [50_000, 60_000, 70_000], steady, 0.05, 50_000)
    assert at.n_star == 50_000 and at.reached and not at.fails  # N* == N_field passes
    above = make_cell("m", "DI", "a", 100_000, [60_000, 70_000, 80_000], steady, 0.05, 50_000)
    assert above.n_star == 60_000 and above.fails
    never = make_cell("m", "DI", "a", 100_000, [1_000, 2_000, 5_000], noisy, 0.05, 50_000)
    assert never.n_star == math.inf and not never.reached and never.fails
    assert never.n_star_text == NOT_REACHED and at.n_star_text == "50000"
    looser = make_cell("m", "DI", "a", 100_000, [1_000, 2_000, 5_000], noisy, 0.9, 50_000)
    assert looser.n_star == 1_000  # configurable cutoff


def test_only_sizes_strictly_below_the_cohort_are_evaluated():
    assert audit_sizes(5000, DEFAULT_SIZES).tolist() == [1000, 2000]
    assert audit_sizes(5001, DEFAULT_SIZES).tolist() == [1000, 2000, 5000]
    assert audit_sizes(10**7, DEFAULT_SIZES).tolist() == list(DEFAULT_SIZES)
    tables = synthetic_tables(1000, models=1, seed=2)
    res = axis2(tables, RULES, sizes=(300, 1000, 2000), R=10)
    assert all([p.size for p in r.curve] == [300] for r in res)
    empty = axis2({("m", "race"): CountTable(("a", "b"))}, RULES, R=10)
    for r in empty:
        assert r.curve == () and r.n_star == math.inf and r.fails and r.cohort_n == 0


def test_to_dict_is_strict_json_with_none_for_infinity():
    tables = {k: v for k, v in synthetic_tables(3000, models=1, seed=1).items() if k[1] == "sex"}
    tables[("model-00", "tiny")] = CountTable.from_records(
        ("a", "b"), np.array([0, 1, 1]), np.array([0, 1, 0]), np.array([1, 0, 1]), np.full(3, 0.5)
    )
    res = axis2(tables, RULES, sizes=(2, 500, 2000), R=10, seed=3)
    for r in res:
        d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
        assert d["reached"] == r.reached and d["fails"] == r.fails
        assert d["n_star"] == (None if not r.reached else int(r.n_star))
        assert [p["size"] for p in d["curve"]] == [p.size for p in r.curve]
        for p, q in zip(d["curve"], r.curve, strict=True):
            assert (p["cv"] is None) == (q.cv == math.inf)
            assert (p["mean"] is None) == math.isnan(q.mean)
    tiny = [r for r in res if r.attribute == "tiny"]
    assert all(r.curve[0].n_undefined == 10 and r.curve[0].cv == math.inf for r in tiny)


# ----------------------------------------------------------------------------- streams and grid
def test_results_do_not_depend_on_other_tables_or_metrics():
    tables = synthetic_tables(4000, models=3, seed=4)
    one = {k: v for k, v in tables.items() if k[0] == "model-01"}
    sizes = (500, 1000, 2000)
    full = axis2(tables, RULES, sizes=sizes, R=30, seed=9)
    alone = axis2(one, RULES, sizes=sizes, R=30, seed=9)
    assert [r for r in full if r.model_id == "model-01"] == alone
    # the calibration score draws use their own stream: asking for CAL changes nothing else
    no_cal = axis2(one, [r for r in RULES if r.name != "CAL"], sizes=sizes, R=30, seed=9)
    assert no_cal == [r for r in alone if r.metric != "CAL"]
    # a larger grid leaves the smaller sizes' draws as they were
    grown = axis2(one, RULES, sizes=(*sizes, 3000), R=30, seed=9)
    assert [r.curve[:3] for r in grown] == [r.curve for r in alone]
    assert axis2(tables, RULES, sizes=sizes, R=30, seed=10) != full


def test_axis2_streams_differ_from_axis1_streams():
    counts_rng, scores_rng = axis2_rngs(0, "model-00", "race")
    a1 = table_rng(0, "model-00", "race").integers(0, 2**62, 4)
    assert not np.array_equal(counts_rng.integers(0, 2**62, 4), a1)
    assert not np.array_equal(scores_rng.integers(0, 2**62, 4), a1)
    again, _ = axis2_rngs(0, "model-00", "race")
    other, _ = axis2_rngs(0, "model-00", "sex")
    assert again.integers(0, 2**62) != other.integers(0, 2**62)


def test_grid_shape_order_and_defaults():
    tables = synthetic_tables(30_000, models=2, seed=1)
    res = axis2(tables, RULES, seed=1)
    assert len(res) == 2 * len(RULES) * 4
    assert [r.model_id for r in res] == sorted(r.model_id for r in res)
    first = [r for r in res if r.model_id == "model-00"]
    assert [r.metric for r in first[::4]] == NAMES
    assert [r.attribute for r in first[:4]] == ["race", "sex", "ethnicity", "age_group"]
    for r in res:
        assert r.cohort_n == 30_000
        assert [p.size for p in r.curve] == [1000, 2000, 5000, 10000, 25000]
        assert r.reached == math.isfinite(r.n_star)
        assert r.fails == (r.n_star > 50_000)
        if r.reached:
            assert r.n_star in [p.size for p in r.curve]
            first_ok = next(p.size for p in r.curve if p.cv < 0.05)
            assert r.n_star == first_ok
    # the cohort is large enough that the most stable cells reach N*, and not all do
    assert any(r.reached for r in res) and any(not r.reached for r in res)
    with pytest.raises(ValueError):
        axis2(tables, RULES, R=1)
    with pytest.raises(ValueError):
        axis2(tables, ["NOPE"])


# ----------------------------------------------------------------------------- round trip
_names = st.text("abcdefgh_", min_size=1, max_size=8)


@st.composite
def axis2_cells(draw):
    sizes = sorted(draw(st.sets(st.integers(1, 10**6), max_size=5)))
    curve = tuple(
        CurvePoint(
            size,
            draw(st.one_of(st.just(math.inf), st.floats(0, 10))),
            draw(st.floats(-1e6, 1e6)),
            draw(st.floats(0, 1e3)),
            draw(st.integers(0, 50)),
        )
        for size in sizes
    )
    reached = bool(sizes) and draw(st.booleans())
    n_star = float(draw(st.sampled_from(sizes))) if reached else math.inf
    return Axis2Cell(
        draw(_names), draw(_names), draw(_names), draw(st.integers(0, 10**7)), n_star, reached,
        draw(st.booleans()), curve,
    )  # fmt: skip


@given(axis2_cells())
def test_axis2_cell_round_trips_through_strict_json(cell):
    d = json.loads(json.dumps(cell.to_dict(), allow_nan=False))
    assert Axis2Cell.from_dict(d) == cell


def test_computed_axis2_cells_round_trip_with_undefined_draws():
    tables = {k: v for k, v in synthetic_tables(3000, models=1, seed=1).items() if k[1] == "sex"}
    tables[("model-00", "tiny")] = CountTable.from_records(
        ("a", "b"), np.array([0, 1, 1]), np.array([0, 1, 0]), np.array([1, 0, 1]), np.full(3, 0.5)
    )
    for r in axis2(tables, RULES, sizes=(2, 500, 2000), R=10, seed=3):
        back = Axis2Cell.from_dict(json.loads(json.dumps(r.to_dict(), allow_nan=False)))
        assert back.to_dict() == r.to_dict()  # NaN mean/sd: equal as JSON, not as floats
        assert (back.n_star, back.reached, len(back.curve)) == (r.n_star, r.reached, len(r.curve))


def test_mostly_undefined_draws_do_not_make_cv_small():
    """Issue 24: 28 of 30 subsamples undefined and the 2 defined ones equal used to give
    CV 0 (N* reached at that size); more than half undefined is now CV = inf."""
    v = np.array([0.3, 0.3] + [np.nan] * 28)
    s = cv_of_draws(v)
    assert float(s["cv"]) == math.inf and int(s["n_undefined"]) == 28
    half = np.array([0.3, 0.31] * 8 + [np.nan] * 14)  # 14 of 30 undefined: still counted
    assert math.isfinite(float(cv_of_draws(half)["cv"]))
