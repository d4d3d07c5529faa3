"""MPPD on a bounded stratified sample (batch_axes.mppd_sample, issue 25 target 2).

What holds: the sample is nested, stratified and seeded; the weighted estimates equal a
record-loop Horvitz-Thompson oracle; a sample that is the whole cohort gives the exact
figures; a cohort beyond the bounds costs at most the configured pairs and says so; and
the stated errors are right: across seeds, the interval estimate +- 1.96 SE covers the
cohort's exact value at about 95 % (tolerance from the Monte Carlo error of the rate),
and the spread of the estimates matches the mean stated SE.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batch_axes.equilense import EquiLenseResult
from batch_axes.mppd import (
    Pairs,
    individual_fairness_gap,
    matched_pairs,
    mppd_reference,
    scale_features,
)
from batch_axes.mppd_sample import (
    Z95,
    allocate,
    bounded_sample,
    pair_weights,
    sample_keys,
    sampled_attribute,
    sampled_gap,
    strata_codes,
    stratified_sample,
    with_disparity_error,
)
from batch_axes.runner import run_equilense
from monitor.config import MonitorConfig
from monitor.core.tables import tables_from_frame
from monitor.publish.equilense import published_equilense

REPEATABLE = settings(
    derandomize=True, deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip

FEATURES = ("n_diagnoses", "n_procedures", "admission_type", "emergency", "charges")


def dense_cohort(n: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Records whose features are small integers, as the demo's: many records share a
    direction, so matched pairs grow as n^2 (the cost the sample bounds). Scores depend
    on the features and on sex and race, so MPPD differs between groups."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n, p=[0.45, 0.55])
    race = rng.choice(["A", "B", "W"], n, p=[0.1, 0.2, 0.7])
    X = np.column_stack([
        np.clip(rng.poisson(4, n), 0, 12), np.clip(rng.poisson(1, n), 0, 6),
        rng.integers(1, 4, n), rng.integers(0, 2, n), np.round(rng.normal(9, 0.6, n), 1),
    ]).astype(float)  # fmt: skip
    logit = -1 + 0.25 * X[:, 0] - 0.3 * X[:, 3] + 0.4 * (sex == "F") - 0.3 * (race == "B")
    # noisier scores for F: similar F patients differ more (an MPPD gap by sex)
    score = 1 / (1 + np.exp(-(logit + rng.normal(0, 1, n) * np.where(sex == "F", 1.1, 0.6))))
    frame = pd.DataFrame({
        "record_id": [f"r{seed}-{i}" for i in range(n)], "model_id": "m",
        "sex": sex, "race": race, "age_group": rng.choice(["0", "1"], n),
        "ethnicity": rng.choice(["0", "1"], n),
        "label": (rng.uniform(size=n) < score).astype(np.int64), "score": score,
        "decision": (score >= 0.5).astype(np.int64),
    })  # fmt: skip
    return frame, X


def config(**equilense: object) -> MonitorConfig:
    attrs = [
        {"name": "sex", "groups": {"F": "female", "M": "male"}},
        {"name": "race", "groups": {"A": "a", "B": "b", "W": "w"}},
    ]
    return MonitorConfig.model_validate(
        {"attributes": attrs, "equilense": {"features": list(FEATURES), **equilense}}
    )


# --------------------------------------------------------------------------- the sample


def test_allocation_keeps_small_strata_whole_and_shares_the_rest() -> None:
    N = np.array([5, 30, 1000, 4000])
    n = allocate(N, 500, floor=20)
    assert n[0] == 5 and n[1] >= 20 and 490 <= n.sum() <= 500
    assert n[3] > n[2] > n[1]  # proportional beyond the floor
    assert np.array_equal(allocate(N, 10_000, floor=20), N)  # a census


@REPEATABLE
@given(st.integers(50, 600), st.integers(0, 3), st.data())
def test_samples_are_nested_stratified_and_seeded(n: int, seed: int, data: st.DataObject) -> None:
    rng = np.random.default_rng(seed)
    strata = strata_codes(
        rng.integers(0, 2, n), [rng.choice(["a", "b", "c"], n, p=[0.8, 0.15, 0.05])]
    )
    keys = sample_keys([f"id{i}" for i in range(n)], seed)
    small, large = sorted(data.draw(st.tuples(st.integers(1, n), st.integers(1, n))))
    a = stratified_sample(strata, keys, small, floor=5)
    b = stratified_sample(strata, keys, large, floor=5)
    assert set(a.rows.tolist()) <= set(b.rows.tolist())  # nested
    assert np.array_equal(np.bincount(strata[b.rows], minlength=b.N.size), b.n)
    # the same ids in another order give the same records
    perm = rng.permutation(n)
    c = stratified_sample(strata[perm], keys[perm], large, floor=5)
    assert sorted(perm[c.rows].tolist()) == b.rows.tolist()


# --------------------------------------------------------------------------- the estimates


def horvitz_thompson_loop(sample, pairs, p, groups, ref):
    """Reference means by record loops: each directed contribution weighted by
    1 / P(both records sampled), computed from the stratum sizes one pair at a time."""
    sums: dict[str, float] = {}
    weights: dict[str, float] = {}
    for a, b in zip(*pairs, strict=True):
        ha, hb = sample.stratum[a], sample.stratum[b]
        Na, na, Nb, nb = sample.N[ha], sample.n[ha], sample.N[hb], sample.n[hb]
        prob = na * (na - 1) / (Na * (Na - 1)) if ha == hb else (na / Na) * (nb / Nb)
        for x, y in ((a, b), (b, a)):
            if groups[x] == ref:
                g = groups[y]
                sums[g] = sums.get(g, 0.0) + abs(p[x] - p[y]) / prob
                weights[g] = weights.get(g, 0.0) + 1 / prob
    return {g: sums[g] / weights[g] for g in sums}


@REPEATABLE
@given(st.integers(40, 160), st.integers(0, 5))
def test_weighted_means_equal_a_record_loop_oracle(n: int, seed: int) -> None:
    frame, X = dense_cohort(n, seed)
    strata = strata_codes(frame["label"], [frame["sex"], frame["race"]])
    s = stratified_sample(strata, sample_keys(frame["record_id"], seed), n // 2, floor=3)
    Xs = scale_features(X)[s.rows]
    pairs = matched_pairs(Xs, 0.01)
    p, g = frame["score"].to_numpy()[s.rows], frame["race"].to_numpy(str)[s.rows]
    ref = str(pd.Series(g).mode().sort_values().iloc[0])
    got = sampled_attribute(s, pairs, pair_weights(s, pairs), p, g, ref, 30).reference
    want = horvitz_thompson_loop(s, pairs, p, g, ref)
    for entry in got.groups:
        if entry.group in want:
            assert entry.mean == pytest.approx(want[entry.group], rel=1e-9, abs=1e-12)
        else:
            assert entry.mean is None and entry.pairs == 0


def test_a_cohort_within_the_bounds_gives_the_exact_figures() -> None:
    frame, X = dense_cohort(1500, 1)
    cfg = config(sample_records=5000, sample_pairs=10**7)
    exact = run_equilense(frame, X, FEATURES, tables_from_frame(frame, cfg),
                          config(sample_records=0))  # fmt: skip
    got = run_equilense(frame, X, FEATURES, tables_from_frame(frame, cfg), cfg)
    m, e = got.models["m"], exact.models["m"]
    assert m.sampling is not None and m.sampling.method == "all records"
    assert m.sampling.records == m.sampling.cohort_records == 1500
    assert m.mppd == e.mppd and m.individual_fairness_gap == e.individual_fairness_gap
    assert m.individual_fairness_gap is not None
    assert m.individual_fairness_gap.se is None  # exact: no sampling error


def test_a_cohort_beyond_the_bounds_costs_at_most_the_configured_pairs() -> None:
    """The finding: the exact run matches every pair of the cohort (here ~30 times the
    bound). Bounded, it matches at most ``sample_pairs`` and says how it computed."""
    frame, X = dense_cohort(12_000, 2)
    cfg = config(sample_records=20_000, sample_pairs=50_000)
    all_pairs = matched_pairs(scale_features(X), 0.01)[0].size
    assert all_pairs > 20 * 50_000
    result = run_equilense(frame, X, FEATURES, tables_from_frame(frame, cfg), cfg)
    m = result.models["m"]
    assert m.sampling is not None and m.sampling.method == "stratified sample"
    # a stored result: counts, never the small-cell label (that is the published form's)
    assert isinstance(m.sampling.records, int) and m.individual_fairness_gap is not None
    assert isinstance(m.individual_fairness_gap.pairs, int)
    assert m.sampling.cohort_records == 12_000 and m.sampling.records < 12_000
    assert m.individual_fairness_gap.pairs <= 50_000  # unordered pairs matched
    ref = m.mppd["sex"].reference
    assert ref.disparity_se is not None and ref.disparity_se > 0
    assert all(g.se is not None and g.se > 0 for g in ref.groups)
    # the errors are in the stored form (absent from a result on all records)
    stored = ref.to_dict()
    assert stored["disparity_se"] == ref.disparity_se and "se" in stored["groups"][0]
    # stored form round-trips; the published form rounds the record counts to 5
    assert EquiLenseResult.from_dict(result.to_dict()) == result
    shown = published_equilense(result)["models"]["m"]["sampling"]
    assert shown["records"] % 5 == 0 and shown["cohort_records"] == 12_000


# --------------------------------------------------------------------------- the errors


@cache
def _population() -> tuple[pd.DataFrame, np.ndarray, np.ndarray, Pairs]:
    frame, X = dense_cohort(6000, 7)
    Xs = scale_features(X)
    pairs = matched_pairs(Xs, 0.01)
    p = frame["score"].to_numpy()
    return frame, Xs, p, pairs


SEEDS = 200
SAMPLE = 800


@cache
def _replicates() -> dict[str, np.ndarray]:
    """Per seed: estimate, stated SE and truth of four figures of one population."""
    frame, Xs, p, pairs = _population()
    sex = frame["sex"].to_numpy(str)
    truth_ref = mppd_reference(p, sex, pairs)
    assert truth_ref.reference is not None  # the population has both sexes
    truth = {
        "disparity": truth_ref.disparity,
        "mean_F": truth_ref.group("F").mean,
        "gap_F": truth_ref.group("F").gap_to_reference,
        "if_gap": individual_fairness_gap(p, pairs).mean,
    }
    strata = strata_codes(frame["label"], [sex, frame["race"]])
    rows: dict[str, list[tuple[float | None, float | None, float | None]]] = {
        k: [] for k in truth
    }
    for seed in range(SEEDS):
        s = stratified_sample(strata, sample_keys(frame["record_id"], seed), SAMPLE, floor=20)
        pr = matched_pairs(Xs[s.rows], 0.01)
        w = pair_weights(s, pr)
        attr = sampled_attribute(s, pr, w, p[s.rows], sex[s.rows], truth_ref.reference, 30)
        ref = with_disparity_error(attr.reference, attr, s)
        assert ref.disparity_between is not None  # a sample's result names its two groups
        hi, lo = (ref.group(x) for x in ref.disparity_between)
        assert hi.mean is not None and lo.mean is not None
        m = ref.group("F")
        gap = sampled_gap(s, pr, w, p[s.rows], 30)
        got = {
            "disparity": (hi.mean - lo.mean, ref.disparity_se),
            "mean_F": (m.mean, m.se),
            "gap_F": (m.gap_to_reference, m.gap_se),
            "if_gap": (gap.mean, gap.se),
        }
        for k, (v, se) in got.items():
            rows[k].append((v, se, truth[k]))
    return {k: np.array(v) for k, v in rows.items()}


@pytest.mark.parametrize("figure", ["disparity", "mean_F", "gap_F", "if_gap"])
def test_the_stated_interval_covers_the_exact_value_at_the_stated_rate(figure: str) -> None:
    r = _replicates()[figure]
    covered = np.abs(r[:, 0] - r[:, 2]) <= Z95 * r[:, 1]
    # the rate of SEEDS Bernoulli(0.95) draws has sd sqrt(0.95 * 0.05 / SEEDS): 3 sd
    tolerance = 3 * math.sqrt(0.95 * 0.05 / SEEDS)
    assert abs(covered.mean() - 0.95) <= tolerance, (figure, covered.mean(), tolerance)


@pytest.mark.parametrize("figure", ["disparity", "mean_F", "gap_F", "if_gap"])
def test_the_stated_error_matches_the_spread_across_seeds(figure: str) -> None:
    r = _replicates()[figure]
    ratio = r[:, 1].mean() / r[:, 0].std(ddof=1)
    # a sample sd of SEEDS values has relative sd about 1 / sqrt(2 (SEEDS - 1)): 3 of them
    assert abs(ratio - 1) <= 3 / math.sqrt(2 * (SEEDS - 1)), (figure, ratio)


def test_the_bounded_sample_is_a_subset_of_the_full_allocation() -> None:
    frame, X = dense_cohort(5000, 3)
    Xs = scale_features(X)
    strata = strata_codes(frame["label"], [frame["sex"], frame["race"]])
    keys = sample_keys(frame["record_id"], 0)
    got = bounded_sample(Xs, strata, keys, threshold=0.01, max_records=4000,
                         max_pairs=20_000, floor=20)  # fmt: skip
    assert got.pairs[0].size <= 20_000
    full = stratified_sample(strata, keys, 4000, floor=20)
    assert set(got.sample.rows.tolist()) <= set(full.rows.tolist())
