"""Tests for the calibrated synthetic cohort (monitor.data.cohort).

Why these checks: the demo and the drift tests are only meaningful if the cohort reproduces
what makes the paper's verdicts (un)stable -- Table-3 group sizes and base rates, skewed and
genuinely heterogeneous hospitals, informative features -- and if each drift scenario moves
only the quantity it names.  Every assertion has a margin a broken generator would miss.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from monitor.data.cohort import (
    ATTRIBUTES,
    DRIFT_START,
    N_HOSPITALS,
    PAPER_N,
    SCENARIOS,
    TABLE3,
    _systematic_bernoulli,
    case_mix_cluster,
    synth_cohort,
)

SEED = 7
N_FULL = 900_000
N_SCENARIO = 400_000


@pytest.fixture(scope="module")
def full() -> pd.DataFrame:
    return synth_cohort(N_FULL, seed=SEED)


@pytest.fixture(scope="module")
def scenario_frames() -> dict[str | None, pd.DataFrame]:
    return {s: synth_cohort(N_SCENARIO, seed=SEED, scenario=s) for s in [None, *SCENARIOS]}


def _auroc(label: np.ndarray, score: np.ndarray) -> float:
    """Mann-Whitney AUROC with tie correction (average ranks)."""
    ranks = stats.rankdata(score)
    pos = label == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _split(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    post = df["event_time"] >= DRIFT_START
    return df[~post], df[post]


def _share(df: pd.DataFrame, attr: str, code: str) -> float:
    return float((df[attr] == code).mean())


# --- Table 3 calibration -------------------------------------------------------------------


@pytest.mark.parametrize("attr", ATTRIBUTES)
def test_composition_and_positive_rate_match_table3(full: pd.DataFrame, attr: str) -> None:
    comp = full[attr].value_counts(normalize=True) * 100
    rate = full.groupby(attr)["label"].mean()
    for code, info in TABLE3["attributes"][attr].items():
        assert abs(comp[code] - info["pct"]) <= 1.0, (attr, code, comp[code], info["pct"])
        assert abs(rate[code] - info["pos_rate"]) <= 0.01, (attr, code, rate[code])


def test_black_records_are_almost_all_hispanic_and_marginals_hold(full: pd.DataFrame) -> None:
    black = full[full["race"] == "2"]
    assert (black["ethnicity"] == "0").mean() == pytest.approx(0.994, abs=0.003)
    white = full[full["race"] == "3"]
    assert 0.6 < (white["ethnicity"] == "0").mean() < 0.75  # not forced onto everybody


def test_columns_types_and_time_range(full: pd.DataFrame) -> None:
    expected = {
        "record_id",
        "hospital_id",
        "event_time",
        *ATTRIBUTES,
        "n_diagnoses",
        "n_procedures",
        "admission_type",
        "emergency",
        "comorbidity_index",
        "prior_admissions",
        "total_charges_log",
        "label",
    }
    assert set(full.columns) == expected
    assert full["record_id"].is_unique
    assert str(full["event_time"].dt.tz) == "UTC"
    assert full["event_time"].min() >= pd.Timestamp("2026-01-01", tz="UTC")
    assert full["event_time"].max() < pd.Timestamp("2027-01-01", tz="UTC")
    assert full["event_time"].is_monotonic_increasing
    monthly = full["event_time"].dt.month.value_counts()
    assert len(monthly) == 12 and monthly.min() > 0.07 * len(full)
    for attr in ATTRIBUTES:
        assert set(full[attr].unique()) == set(TABLE3["attributes"][attr])
    assert set(full["label"].unique()) == {0, 1}
    assert set(full["emergency"].unique()) == {0, 1}
    assert set(full["admission_type"].unique()) <= {1, 2, 3, 4}


def test_systematic_labels_are_unbiased_and_tight() -> None:
    """Every label is Bernoulli(p_i) and each stratum's total sits within a record of sum(p)."""
    rng = np.random.default_rng(1)
    p = rng.uniform(0.02, 0.98, 2_000)
    strata = rng.integers(0, 7, 2_000)
    draws = np.array(
        [_systematic_bernoulli(np.random.default_rng(k), p, strata) for k in range(800)]
    )
    assert np.abs(draws.mean(axis=0) - p).max() < 5 * np.sqrt(0.25 / 800)
    for s in range(7):
        totals = draws[:, strata == s].sum(axis=1)
        assert np.abs(totals - p[strata == s].sum()).max() <= 1.0 + 1e-9
    assert set(np.unique(draws)) == {0, 1}


# --- hospitals ------------------------------------------------------------------------------


def test_hospital_volume_distribution(full: pd.DataFrame) -> None:
    counts = full["hospital_id"].value_counts().to_numpy()  # descending
    assert len(counts) == N_HOSPITALS == TABLE3["hospitals"]["n_hospitals"]
    median_scaled = np.median(counts) * PAPER_N / len(full)
    assert 500 <= median_scaled <= 900
    share = np.cumsum(counts) / counts.sum()
    assert 0.42 <= share[49] <= 0.51
    for top, target in TABLE3["hospitals"]["top_share"].items():
        assert abs(share[top - 1] - target) < 0.03, (top, share[top - 1])


def test_hospitals_differ_beyond_binomial_noise(full: pd.DataFrame) -> None:
    sizes = full["hospital_id"].value_counts()
    big = full[full["hospital_id"].isin(sizes[sizes >= 500].index)]
    for column, value in (("label", 1), ("age_group", "3")):
        hits = (big[column] == value).groupby(big["hospital_id"]).agg(["sum", "count"])
        table = np.column_stack([hits["sum"], hits["count"] - hits["sum"]])
        chi2, p, dof, _ = stats.chi2_contingency(table)
        assert p < 1e-6, (column, chi2, dof)
    # And a homogeneous control (binomial noise only) does not reject: the test can fail.
    rng = np.random.default_rng(0)
    n_h = big.groupby("hospital_id").size().to_numpy()
    fake = rng.binomial(n_h, big["label"].mean())
    _, p_null, _, _ = stats.chi2_contingency(np.column_stack([fake, n_h - fake]))
    assert p_null > 1e-3


# --- features -------------------------------------------------------------------------------


def test_features_correlate_with_label(full: pd.DataFrame) -> None:
    y = full["label"].to_numpy()
    for feature in ("comorbidity_index", "n_diagnoses", "total_charges_log"):
        assert _auroc(y, full[feature].to_numpy()) > 0.6, feature
    assert _auroc(y, full["record_id"].str[-3:].astype(int).to_numpy()) == pytest.approx(
        0.5, abs=0.01
    )  # control: an unrelated column is not predictive


def test_features_correlate_with_attributes(full: pd.DataFrame) -> None:
    by_age = full.groupby("age_group")["comorbidity_index"].mean()
    assert by_age["3"] - by_age["1"] > 0.5
    by_race = full.groupby("race")["prior_admissions"].mean()
    assert by_race["2"] / by_race["3"] > 1.15
    # A features-only score still shows the age disparity (selection-rate DI well below 0.8).
    score = full["comorbidity_index"] + full["n_diagnoses"] / 4 + full["emergency"]
    flagged = score >= score.quantile(0.55)
    sel = flagged.groupby(full["age_group"]).mean()
    assert sel["1"] / sel["3"] < 0.8


# --- drift scenarios ------------------------------------------------------------------------


def test_no_scenario_is_stationary(scenario_frames: dict) -> None:
    pre, post = _split(scenario_frames[None])
    for attr in ATTRIBUTES:
        for code in TABLE3["attributes"][attr]:
            assert abs(_share(pre, attr, code) - _share(post, attr, code)) < 0.01
            a, b = pre.loc[pre[attr] == code, "label"], post.loc[post[attr] == code, "label"]
            tol = 4.5 * np.sqrt(0.25 * (1 / len(a) + 1 / len(b))) + 0.005  # ~4.5 SE
            assert abs(a.mean() - b.mean()) < tol, (attr, code, a.mean(), b.mean())


def test_demographic_shift(scenario_frames: dict) -> None:
    pre, post = _split(scenario_frames["demographic_shift"])
    assert _share(post, "race", "2") - _share(pre, "race", "2") > 0.08
    assert _share(post, "age_group", "3") - _share(pre, "age_group", "3") > 0.08
    assert abs(_share(post, "sex", "1") - _share(pre, "sex", "1")) < 0.01
    # The label model is untouched: rates within (race, age) cells stay put.
    for race in ("2", "3", "4"):
        for age in ("1", "2", "3"):
            a = pre.loc[(pre["race"] == race) & (pre["age_group"] == age), "label"].mean()
            b = post.loc[(post["race"] == race) & (post["age_group"] == age), "label"].mean()
            assert abs(a - b) < 0.025, (race, age, a, b)
    # Hospital volumes are untouched.
    va = pre["hospital_id"].value_counts(normalize=True)
    vb = post["hospital_id"].value_counts(normalize=True)
    assert (va - vb).abs().max() < 0.002


def test_hospital_case_mix(scenario_frames: dict) -> None:
    df = scenario_frames["hospital_case_mix"]
    cluster = set(case_mix_cluster(SEED))
    assert 30 <= len(cluster) <= 150
    inside = df["hospital_id"].isin(cluster)
    assert 0.10 < inside.mean() < 0.20
    pre_in, post_in = _split(df[inside])
    pre_out, post_out = _split(df[~inside])
    assert _share(post_in, "age_group", "3") - _share(pre_in, "age_group", "3") > 0.15
    assert post_in["comorbidity_index"].mean() - pre_in["comorbidity_index"].mean() > 0.3
    assert abs(_share(post_out, "age_group", "3") - _share(pre_out, "age_group", "3")) < 0.01
    assert abs(post_out["comorbidity_index"].mean() - pre_out["comorbidity_index"].mean()) < 0.03
    assert abs(post_out["label"].mean() - pre_out["label"].mean()) < 0.01
    for code in TABLE3["attributes"]["race"]:  # race mix is not part of case mix
        assert abs(_share(post_in, "race", code) - _share(pre_in, "race", code)) < 0.015


def test_label_rate(scenario_frames: dict) -> None:
    pre, post = _split(scenario_frames["label_rate"])
    for attr in ("race", "age_group"):
        for code in TABLE3["attributes"][attr]:
            a = pre.loc[pre[attr] == code, "label"].mean()
            b = post.loc[post[attr] == code, "label"].mean()
            assert b - a > 0.06, (attr, code, a, b)
    for attr in ATTRIBUTES:
        for code in TABLE3["attributes"][attr]:
            assert abs(_share(post, attr, code) - _share(pre, attr, code)) < 0.01
    for feature in ("comorbidity_index", "n_diagnoses", "emergency"):
        assert abs(post[feature].mean() - pre[feature].mean()) < 0.03 * max(
            1.0, pre[feature].mean()
        )


def test_scenarios_leave_the_first_half_alone(scenario_frames: dict) -> None:
    base, _ = _split(scenario_frames[None])
    for name in SCENARIOS:
        pre, _ = _split(scenario_frames[name])
        assert abs(pre["label"].mean() - base["label"].mean()) < 0.005, name


def test_group_score_shift_is_not_a_data_scenario() -> None:
    assert "group_score_shift" not in SCENARIOS
    assert set(SCENARIOS) == {"demographic_shift", "hospital_case_mix", "label_rate"}
    with pytest.raises(ValueError):
        synth_cohort(10, scenario="group_score_shift")


# --- determinism ----------------------------------------------------------------------------


def test_same_seed_same_frame_different_seed_different() -> None:
    a = synth_cohort(20_000, seed=3, scenario="label_rate")
    b = synth_cohort(20_000, seed=3, scenario="label_rate")
    pd.testing.assert_frame_equal(a, b)
    c = synth_cohort(20_000, seed=4, scenario="label_rate")
    assert not a["label"].equals(c["label"])
    assert not a["hospital_id"].equals(c["hospital_id"])
    assert not a["event_time"].equals(c["event_time"])


def test_small_and_empty_cohorts() -> None:
    assert len(synth_cohort(0)) == 0
    small = synth_cohort(50, seed=1)
    assert len(small) == 50 and small["record_id"].is_unique
