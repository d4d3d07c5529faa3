"""Axis 3 (docs/method.md section 5): Fleiss' kappa, hospital folds, fold verdicts vs oracles.

Oracles: statsmodels' Fleiss' kappa; the VFR-Audit authors' published kappas
(tests/data/fleiss_kappa_passcounts.csv); scikit-learn's GroupKFold on the raw record ids;
the record-level
metric functions of monitor.reference.metrics evaluated fold by fold; CountTable for
the count arrays.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.model_selection import GroupKFold
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from batch_axes.axis3 import (
    axis3,
    fleiss_kappa,
    fleiss_kappa_from_pass_counts,
    fold_sums,
    hospital_codes,
    hospital_count_arrays,
    hospital_folds,
    label_decision_bin,
    landis_koch_band,
)
from monitor.bench.synthetic import synthetic_cohort
from monitor.config import AttributeConfig, MetricRule, MonitorConfig
from monitor.core.counts import CountTable, score_bins
from monitor.core.metrics import passes
from monitor.reference.metrics import metric_from_records
from tests.support.strategies import TEST_DATA, cohorts

CFG = MonitorConfig()
RULES = CFG.metrics
ATTRS = CFG.attributes


# ----------------------------------------------------------------------------- helpers
def hospital_names(n_hospitals: int) -> np.ndarray:
    return np.array([f"St-Example-Hospital-{i:04d}" for i in range(n_hospitals)], dtype=object)


def skewed_ids(rng: np.random.Generator, n: int, n_hospitals: int) -> np.ndarray:
    w = 1.0 / np.arange(1, n_hospitals + 1) ** 1.2
    return hospital_names(n_hospitals)[rng.choice(n_hospitals, size=n, p=w / w.sum())]


def groupkfold_folds(ids: np.ndarray, n_splits: int) -> np.ndarray:
    """Fold of every record as scikit-learn's GroupKFold numbers it, on the raw ids."""
    out = np.full(len(ids), -1, np.int64)
    for f, (_, test) in enumerate(GroupKFold(n_splits=n_splits).split(ids, groups=ids)):
        out[test] = f
    return out


def slow_fold_verdicts(ids, groups, label, decision, score, attributes, rules, n_folds, support):
    """Per-fold verdicts recomputed from records: GroupKFold on raw ids, record-level metrics."""
    present = ~pd.isna(pd.Series(ids, dtype=object)).to_numpy()
    idx = np.flatnonzero(present)
    k = min(n_folds, len(set(ids[idx])))
    fold = np.full(len(ids), -1, np.int64)
    fold[idx] = groupkfold_folds(ids[idx], k)
    values, verdicts = {}, {}  # verdict None: undefined value, the fold does not vote
    for f in range(k):
        m = fold == f
        for a in attributes:
            g = groups[a.name][m]
            included = [j for j in range(len(a.codes)) if (g == j).sum() >= support]
            for r in rules:
                v = metric_from_records(
                    r.name, g, label[m], decision[m], score[m], included, 10, support
                )
                values[(r.name, a.name, f)] = v
                verdicts[(r.name, a.name, f)] = (
                    None if math.isnan(v) else bool(passes(np.array(v), r.threshold, r.direction))
                )
    return k, values, verdicts


def pairwise_kappa(items: list[list[bool]]) -> float | None:
    """Fleiss' kappa from its meaning, by explicit rater pairs: each item's share of agreeing
    ordered pairs among its own voters, chance from the pooled pass share. Items with fewer
    than two votes are left out; None when the pooled votes are all one verdict."""
    items = [v for v in items if len(v) >= 2]
    agree = [
        sum(a == b for a, b in itertools.permutations(v, 2)) / (len(v) * (len(v) - 1))
        for v in items
    ]
    p = sum(map(sum, items)) / sum(map(len, items))
    p_e = p * p + (1 - p) * (1 - p)
    return None if p_e == 1 else (sum(agree) / len(agree) - p_e) / (1 - p_e)


def assert_matches_slow(result, ids, groups, label, decision, score, attributes, rules, support):
    k, values, verdicts = slow_fold_verdicts(
        ids, groups, label, decision, score, attributes, rules, result.n_folds_requested, support
    )
    assert result.applicable and result.n_folds == k
    word = {True: "pass", False: "fail", None: "undefined"}
    for r in rules:
        votes = []  # per attribute: the verdicts of the folds that vote
        for a in attributes:
            cell = result.cell(r.name, a.name)
            for f in range(k):
                want = values[(r.name, a.name, f)]
                if math.isnan(want):
                    assert math.isnan(cell.fold_values[f]), (r.name, a.name, f)
                else:
                    assert cell.fold_values[f] == pytest.approx(want, abs=1e-9), (r.name, a.name)
            row = [verdicts[(r.name, a.name, f)] for f in range(k)]
            assert cell.fold_verdicts == tuple(word[v] for v in row)
            assert cell.n_pass_folds == sum(v is True for v in row)
            assert cell.n_undefined_folds == sum(v is None for v in row)
            votes.append([v for v in row if v is not None])
        voting_folds = {
            f for a in attributes for f in range(k) if verdicts[(r.name, a.name, f)] is not None
        }
        agreement = result.metrics[[m.metric for m in result.metrics].index(r.name)]
        if sum(len(v) >= 2 for v in votes) < 2 or len(voting_folds) < 3:
            assert math.isnan(agreement.kappa) and agreement.reason  # not evaluable
            assert all(math.isnan(result.cell(r.name, a.name).kappa) for a in attributes)
            continue
        want = pairwise_kappa(votes)
        if want is None:
            assert agreement.kappa == 1.0 and agreement.degenerate
        else:
            assert agreement.kappa == pytest.approx(want, abs=1e-12)
            if len({len(v) for v in votes}) == 1:  # equal raters: Fleiss (1971) itself
                table = np.array([[sum(v), len(v) - sum(v)] for v in votes])
                assert agreement.kappa == pytest.approx(
                    sm_fleiss_kappa(table, method="fleiss"), abs=1e-12
                )
        for a, v in zip(attributes, votes, strict=True):
            cell = result.cell(r.name, a.name)
            if len(v) < 2:  # too few folds judge this cell: no kappa of its own
                assert math.isnan(cell.kappa) and cell.kappa_reason
            else:
                assert cell.kappa == agreement.kappa and not cell.kappa_reason


def cohort_arrays(n: int, n_hospitals: int, seed: int):
    c = synthetic_cohort(n, 1, seed, CFG)
    ids = skewed_ids(np.random.default_rng(seed + 1), n, n_hospitals)
    score = c.scores[0]
    return ids, c.attributes, c.label, (score >= 0.5).astype(np.int64), score


# ----------------------------------------------------------------------------- (a) kappa
@st.composite
def rating_matrices(draw):
    items = draw(st.integers(1, 30))
    categories = draw(st.integers(2, 5))
    raters = draw(st.integers(2, 25))
    concentration = draw(st.sampled_from([0.1, 1.0, 10.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p = rng.dirichlet(np.full(categories, concentration), size=items)
    return np.stack([rng.multinomial(raters, row) for row in p])


@settings(max_examples=300)
@given(rating_matrices())
def test_fleiss_kappa_equals_statsmodels(ratings):
    assume(np.count_nonzero(ratings.sum(axis=0)) >= 2)
    kappa, degenerate = fleiss_kappa(ratings)
    assert not degenerate
    assert kappa == pytest.approx(sm_fleiss_kappa(ratings, method="fleiss"), abs=1e-12)


def test_fleiss_kappa_textbook_example():
    # Fleiss (1971) style example: 10 items, 14 raters, 5 categories; kappa = 0.210.
    ratings = np.array(
        [
            [0, 0, 0, 0, 14],
            [0, 2, 6, 4, 2],
            [0, 0, 3, 5, 6],
            [0, 3, 9, 2, 0],
            [2, 2, 8, 1, 1],
            [7, 7, 0, 0, 0],
            [3, 2, 6, 3, 0],
            [2, 5, 3, 2, 2],
            [6, 5, 2, 1, 0],
            [0, 2, 2, 3, 7],
        ]
    )
    kappa, degenerate = fleiss_kappa(ratings)
    assert kappa == pytest.approx(0.210, abs=5e-4) and not degenerate


@pytest.mark.parametrize(
    "ratings",
    [
        np.array([[20, 0]] * 4),
        np.array([[0, 20]] * 7),
        np.array([[0, 5, 0]] * 3),
        np.array([[2, 0]]),
    ],
)
def test_identical_ratings_are_degenerate_kappa_one(ratings):
    assert fleiss_kappa(ratings) == (1.0, True)


def test_perfect_agreement_across_categories_is_not_degenerate():
    assert fleiss_kappa(np.array([[20, 0], [0, 20], [20, 0]])) == (1.0, False)


def test_pass_counts_degenerate_at_both_ends():
    assert fleiss_kappa_from_pass_counts(np.zeros(4, int), 20) == (1.0, True)
    assert fleiss_kappa_from_pass_counts(np.full(4, 20), 20) == (1.0, True)


@pytest.mark.parametrize(
    "ratings",
    [
        np.array([[1, 0], [0, 1]]),  # one rater per item: no item can show agreement
        np.array([[3, -1], [1, 1]]),  # negative count
        np.array([[1.5, 0.5], [1.0, 1.0]]),  # not counts
        np.zeros((0, 2)),
    ],
)
def test_fleiss_kappa_rejects_malformed_matrices(ratings):
    with pytest.raises(ValueError):
        fleiss_kappa(ratings)


@settings(max_examples=200)
@given(rating_matrices(), st.data())
def test_unequal_raters_leave_equal_rater_items_as_statsmodels(ratings, data):
    """Per-item raters: with every item at the same count it is statsmodels' Fleiss (1971);
    items with fewer than two ratings drop out without changing the rest."""
    assume(np.count_nonzero(ratings.sum(axis=0)) >= 2 and ratings.sum(axis=1)[0] >= 2)
    lone = np.zeros((data.draw(st.integers(1, 3)), ratings.shape[1]), dtype=ratings.dtype)
    lone[:, 0] = data.draw(st.integers(0, 1))  # items with 0 or 1 rating
    kappa, degenerate = fleiss_kappa(np.vstack([ratings, lone]))
    assert not degenerate
    assert kappa == pytest.approx(sm_fleiss_kappa(ratings, method="fleiss"), abs=1e-12)


def test_unequal_raters_equal_the_pairwise_definition():
    """Items with 20, 12 and 3 voting folds (the rest undefined): kappa from agreeing pairs."""
    n_pass, votes = np.array([2, 7, 3, 0]), np.array([20, 12, 3, 9])
    kappa, degenerate = fleiss_kappa_from_pass_counts(n_pass, votes)
    items = [[True] * k + [False] * (n - k) for k, n in zip(n_pass, votes, strict=True)]
    assert not degenerate and kappa == pytest.approx(pairwise_kappa(items), abs=1e-12)


def test_pass_counts_outside_raters_rejected():
    with pytest.raises(ValueError):
        fleiss_kappa_from_pass_counts(np.array([0, 21]), 20)


# ----------------------------------------------------------------------------- (b) oracle
ORACLE = pd.read_csv(TEST_DATA / "fleiss_kappa_passcounts.csv")


@pytest.mark.parametrize("metric", ORACLE["Metric"].unique().tolist())
def test_oracle_per_metric_kappa(metric):
    rows = ORACLE[ORACLE["Metric"] == metric]
    assert len(rows) == 4
    kappa, degenerate = fleiss_kappa_from_pass_counts(rows["n_pass_of_20"].to_numpy(), 20)
    assert abs(kappa - rows["Per_metric_kappa"].iloc[0]) <= 1e-12
    all_same = rows["n_pass_of_20"].isin([0, 20]).all() and rows["n_pass_of_20"].nunique() == 1
    assert degenerate == bool(all_same)


@pytest.mark.parametrize("attribute", ORACLE["Attribute"].unique().tolist())
def test_oracle_per_attribute_kappa(attribute):
    rows = ORACLE[ORACLE["Attribute"] == attribute]
    assert len(rows) == 7
    kappa, degenerate = fleiss_kappa_from_pass_counts(rows["n_pass_of_20"].to_numpy(), 20)
    assert abs(kappa - rows["Per_attribute_kappa"].iloc[0]) <= 1e-12 and not degenerate


def test_oracle_overall_kappa():
    assert len(ORACLE) == 28
    kappa, _ = fleiss_kappa_from_pass_counts(ORACLE["n_pass_of_20"].to_numpy(), 20)
    assert abs(kappa - ORACLE["Overall_kappa"].iloc[0]) <= 1e-12


def test_oracle_degenerate_metric_is_reported_as_one():
    """TI: no fold passes for any attribute; statsmodels gives NaN, docs/method.md section 5
    says 1.0 + flag."""
    rows = ORACLE[ORACLE["Metric"] == "TI"]
    assert (rows["n_pass_of_20"] == 0).all() and (rows["Per_metric_kappa"] == 1.0).all()
    assert fleiss_kappa_from_pass_counts(rows["n_pass_of_20"].to_numpy(), 20) == (1.0, True)


# ----------------------------------------------------------------------------- (c) folds
@st.composite
def hospital_id_arrays(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_hospitals = draw(st.integers(2, 60))
    # sizes from a small set so that many hospitals tie (GroupKFold's tie order matters)
    sizes = rng.choice(
        draw(st.sampled_from([[1, 2, 3], [5, 5, 40], [1, 10, 100, 1000]])), n_hospitals
    )
    kind = draw(st.sampled_from(["str", "int", "float"]))
    names = {
        "str": hospital_names(n_hospitals),
        "int": rng.permutation(10_000)[:n_hospitals],
        "float": rng.permutation(10_000)[:n_hospitals].astype(float) / 7,
    }[kind]
    ids = np.repeat(names, sizes)
    ids = ids[rng.permutation(ids.size)]
    n_missing = draw(st.sampled_from([0, 0, 1, 17]))
    if n_missing:
        ids = ids.astype(object)
        ids[rng.choice(ids.size, size=min(n_missing, ids.size - 1), replace=False)] = (
            None if kind == "str" else np.nan
        )
    return ids, draw(st.integers(2, 25))


@settings(max_examples=120)
@given(hospital_id_arrays())
def test_folds_equal_groupkfold_on_records(case):
    ids, n_folds = case
    folds = hospital_folds(ids, n_folds)
    present = ~pd.isna(pd.Series(ids, dtype=object)).to_numpy()
    n_hosp = len(pd.unique(ids[present]))
    assume(n_hosp >= 2)
    k = min(n_folds, n_hosp)
    expected = np.full(ids.size, -1, np.int64)
    expected[present] = groupkfold_folds(ids[present], k)
    assert folds.applicable and folds.n_folds == k and folds.n_hospitals == n_hosp
    np.testing.assert_array_equal(folds.fold_of_record, expected)
    assert folds.n_excluded_missing == int((~present).sum())
    assert ("excluded" in folds.note) == bool((~present).any())
    assert ("one fold per hospital" in folds.note) == (n_hosp < n_folds)
    # no hospital in two folds
    per_hospital = pd.Series(folds.fold_of_record[present]).groupby(ids[present]).nunique()
    assert (per_hospital == 1).all()
    # balanced: fold sizes differ by at most the largest hospital (greedy largest-first)
    sizes = np.bincount(folds.fold_of_record[present], minlength=k)
    assert tuple(sizes) == folds.fold_sizes and sizes.min() > 0
    assert sizes.max() - sizes.min() <= pd.Series(ids[present]).value_counts().max()
    assert_balanced(folds, ids)


def assert_balanced(folds, ids):
    """GroupKFold's guarantee: each fold was the lightest when its last (smallest) hospital
    joined, so no fold exceeds the lightest fold by more than its smallest hospital."""
    present = ~pd.isna(pd.Series(ids, dtype=object)).to_numpy()
    per_hospital = pd.Series(ids[present]).value_counts()
    fold_of = pd.Series(folds.fold_of_record[present]).groupby(ids[present]).first()
    smallest = per_hospital.groupby(fold_of.reindex(per_hospital.index)).min()
    sizes = np.array(folds.fold_sizes)
    assert np.all(sizes - smallest.sort_index().to_numpy() <= sizes.min())


def test_large_cohort_folds_balanced_and_equal_to_groupkfold():
    rng = np.random.default_rng(3)
    ids = skewed_ids(rng, 200_000, 300)
    folds = hospital_folds(ids, 20)
    np.testing.assert_array_equal(folds.fold_of_record, groupkfold_folds(ids, 20))
    assert_balanced(folds, ids)
    # without dominant hospitals, folds are near-equal in size
    even = hospital_names(300)[rng.integers(0, 300, 200_000)]
    sizes = np.array(hospital_folds(even, 20).fold_sizes)
    assert np.ptp(sizes) <= 0.02 * sizes.mean()


def test_fewer_hospitals_than_folds_one_fold_per_hospital():
    ids = np.repeat(hospital_names(5), [50, 10, 30, 30, 7])
    folds = hospital_folds(ids, 20)
    assert folds.applicable and folds.n_folds == 5 and folds.n_folds_requested == 20
    assert sorted(folds.fold_sizes) == [7, 10, 30, 30, 50]
    assert sorted(folds.fold_of_hospital.tolist()) == [0, 1, 2, 3, 4]
    assert "5 hospitals" in folds.note and "one fold per hospital" in folds.note


@pytest.mark.parametrize(
    "ids, reason",
    [
        (np.array([None] * 50, dtype=object), "no record has a hospital_id"),
        (np.full(50, np.nan), "no record has a hospital_id"),
        (np.array([], dtype=object), "no records"),
        (np.array(["H1"] * 40 + [None] * 3, dtype=object), "only one hospital"),
    ],
)
def test_not_applicable_without_two_hospitals(ids, reason):
    folds = hospital_folds(ids, 20)
    assert not folds.applicable and reason in folds.reason and folds.n_folds == 0
    n = ids.size
    rng = np.random.default_rng(0)
    groups = {a.name: rng.integers(0, len(a.codes), n) for a in ATTRS}
    res = axis3(
        "m", ids, rng.integers(0, 2, n), rng.integers(0, 2, n), rng.uniform(size=n),
        groups, ATTRS, RULES,
    )  # fmt: skip
    assert not res.applicable and reason in res.reason
    assert res.cells == () and res.metrics == ()
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert "kappa" not in json.dumps(d["cells"]) and d["n_folds"] == 0


def test_hospital_codes_follow_sorted_order_and_mark_missing():
    codes = hospital_codes(np.array(["b", None, "a", "c", "a", np.nan], dtype=object))
    assert codes.tolist() == [1, -1, 0, 2, 0, -1]


def test_fewer_than_two_folds_rejected():
    with pytest.raises(ValueError):
        hospital_folds(np.array(["a", "b"]), 1)


# ----------------------------------------------------------------------------- counts
def test_hospital_count_arrays_equal_count_tables_per_hospital():
    ids, groups, label, decision, score = cohort_arrays(5_000, 12, seed=4)
    hosp = hospital_codes(ids)
    codes = ATTRS[0].codes
    ldb = label_decision_bin(label, decision, score_bins(score, 10), 10)
    counts, score_sum = hospital_count_arrays(hosp, groups["race"], ldb, score, 12, len(codes), 10)
    assert counts.shape == (12, len(codes), 2, 2, 10) and counts.dtype == np.int64
    for h in range(12):
        m = hosp == h
        t = CountTable.from_records(
            codes, groups["race"][m], label[m], decision[m], score[m], bins=10
        )
        np.testing.assert_array_equal(counts[h], t.counts)
        np.testing.assert_allclose(score_sum[h], t.score_sum, rtol=0, atol=1e-9)


def test_fold_tables_are_sums_of_their_hospitals():
    ids, groups, label, decision, score = cohort_arrays(5_000, 30, seed=5)
    folds = hospital_folds(ids, 7)
    codes = ATTRS[3].codes
    g = groups["age_group"]
    ldb = label_decision_bin(label, decision, score_bins(score, 10), 10)
    counts, score_sum = hospital_count_arrays(
        folds.hospital_of_record, g, ldb, score, folds.n_hospitals, len(codes), 10
    )
    f_counts = fold_sums(counts, folds.fold_of_hospital, 7)
    f_scores = fold_sums(score_sum, folds.fold_of_hospital, 7)
    for f in range(7):
        m = folds.fold_of_record == f
        t = CountTable.from_records(codes, g[m], label[m], decision[m], score[m], bins=10)
        np.testing.assert_array_equal(f_counts[f], t.counts)
        np.testing.assert_allclose(f_scores[f], t.score_sum, rtol=0, atol=1e-9)


# ----------------------------------------------------------------------------- (d) axis 3
@pytest.mark.parametrize(
    "n, n_hospitals, n_folds, support, seed",
    [
        (20_000, 60, 20, 20, 0),  # default grid
        (6_000, 40, 20, 150, 1),  # high support: small groups left out, undefined folds
        (3_000, 6, 20, 20, 2),  # fewer hospitals than folds
    ],
)
def test_axis3_fold_verdicts_equal_record_level_recomputation(
    n, n_hospitals, n_folds, support, seed
):
    ids, groups, label, decision, score = cohort_arrays(n, n_hospitals, seed)
    res = axis3(
        "model-00", ids, label, decision, score, groups, ATTRS, RULES,
        min_group_support=support, n_folds=n_folds,
    )  # fmt: skip
    assert len(res.cells) == len(RULES) * len(ATTRS)
    assert_matches_slow(res, ids, groups, label, decision, score, ATTRS, RULES, support)
    if support == 150:  # the test must exercise undefined fold values (no vote)
        assert any(c.n_undefined_folds > 0 for c in res.cells)
        assert any(c.groups_left_out for c in res.cells)
    for c in res.cells:
        for f, v in enumerate(c.fold_values):
            if math.isnan(v):
                assert c.fold_verdicts[f] == "undefined"


@settings(max_examples=40)
@given(cohorts(max_n=400, min_n=30), st.integers(2, 12), st.integers(2, 6), st.integers(1, 40))
def test_axis3_small_cohorts_equal_record_level(cohort, n_hospitals, n_folds, support):
    group_codes, group, label, decision, score = cohort
    codes = {str(i): c for i, c in enumerate(group_codes)}
    if len(codes) < 2:
        codes["1"] = "unused"
    attrs = [AttributeConfig(name="attr", groups=codes)]
    rng = np.random.default_rng(len(label) * 31 + n_hospitals)
    ids = hospital_names(n_hospitals)[rng.integers(0, n_hospitals, len(label))]
    assume(len(set(ids)) >= 2)
    res = axis3(
        "m", ids, label, decision, score, {"attr": group}, attrs, RULES,
        min_group_support=support, n_folds=n_folds,
    )  # fmt: skip
    assert_matches_slow(res, ids, {"attr": group}, label, decision, score, attrs, RULES, support)


def test_missing_hospital_records_are_excluded_not_invented():
    ids, groups, label, decision, score = cohort_arrays(8_000, 30, seed=7)
    ids = ids.copy()
    missing = np.random.default_rng(7).choice(ids.size, 250, replace=False)
    ids[missing] = None
    res = axis3("m", ids, label, decision, score, groups, ATTRS, RULES)
    assert res.n_excluded_missing_hospital == 250 and "250 records" in res.note
    assert res.n_records == 8_000 - 250 and sum(res.fold_sizes) == 8_000 - 250
    keep = np.ones(ids.size, bool)
    keep[missing] = False
    sub = axis3(
        "m", ids[keep], label[keep], decision[keep], score[keep],
        {k: v[keep] for k, v in groups.items()}, ATTRS, RULES,
    )  # fmt: skip
    assert res.to_dict()["cells"] == sub.to_dict()["cells"]
    assert res.metrics == sub.metrics
    assert_matches_slow(res, ids, groups, label, decision, score, ATTRS, RULES, 20)


def test_kappa_is_shared_by_the_cells_of_a_metric_and_cutoff_is_configurable():
    ids, groups, label, decision, score = cohort_arrays(10_000, 50, seed=8)
    res = axis3("m", ids, label, decision, score, groups, ATTRS, RULES)
    for m in res.metrics:
        cells = [res.cell(m.metric, a.name) for a in ATTRS]
        assert {c.kappa for c in cells} == {m.kappa}
        assert m.n_pass_folds == tuple(c.n_pass_folds for c in cells)
        assert m.n_voting_folds == tuple(c.n_folds - c.n_undefined_folds for c in cells)
        assert (m.kappa, m.degenerate) == fleiss_kappa_from_pass_counts(
            np.array(m.n_pass_folds), np.array(m.n_voting_folds)
        )
        assert all(c.fails_axis3 == (c.kappa < 0.40) for c in cells)
        assert all(c.band == landis_koch_band(c.kappa) for c in cells)
    strict = axis3("m", ids, label, decision, score, groups, ATTRS, RULES, kappa_cutoff=1.01)
    lax = axis3("m", ids, label, decision, score, groups, ATTRS, RULES, kappa_cutoff=-1.01)
    assert all(c.fails_axis3 for c in strict.cells) and not any(c.fails_axis3 for c in lax.cells)


def test_all_folds_undefined_is_not_evaluable_not_perfect_agreement():
    """Support above every fold's size: every value undefined, so no fold votes. This used
    to count every fold as Fail and report kappa 1.0 "almost perfect" (degenerate); now the
    kappa is not evaluable and says why (docs/method.md section 5, revised 2026-12-01)."""
    ids, groups, label, decision, score = cohort_arrays(2_000, 25, seed=9)
    res = axis3("m", ids, label, decision, score, groups, ATTRS, RULES, min_group_support=10**6)
    for c in res.cells:
        assert c.n_pass_folds == 0 and c.n_undefined_folds == c.n_folds
        assert set(c.fold_verdicts) == {"undefined"}
        assert math.isnan(c.kappa) and (c.degenerate, c.band, c.fails_axis3) == (
            False,
            "not evaluable",
            False,
        )
        assert c.kappa_reason.startswith("only 0 attributes have two or more folds")
    assert all(m.reason and math.isnan(m.kappa) for m in res.metrics)
    assert json.loads(json.dumps(res.to_dict(), allow_nan=False))["metrics"][0]["kappa"] is None


def test_genuine_fails_in_every_fold_stay_degenerate_kappa_one():
    """Folds that all vote Fail do agree: that case keeps 1.0 with the degenerate flag."""
    ids, groups, label, decision, score = cohort_arrays(5_000, 25, seed=9)
    never = [MetricRule(name="DI", threshold=2.0, direction=">=")]  # DI <= 1 always fails
    res = axis3("m", ids, label, decision, score, groups, ATTRS, never)
    assert all(c.n_pass_folds == 0 for c in res.cells)
    assert sum(c.n_folds - c.n_undefined_folds for c in res.cells) >= 3 * res.n_folds
    assert (res.metrics[0].kappa, res.metrics[0].degenerate) == (1.0, True)


def test_reused_folds_give_the_same_result():
    ids, groups, label, decision, score = cohort_arrays(5_000, 30, seed=10)
    folds = hospital_folds(ids, 20)
    a = axis3("m", ids, label, decision, score, groups, ATTRS, RULES)
    b = axis3("m", None, label, decision, score, groups, ATTRS, RULES, folds=folds)
    assert a.to_dict() == b.to_dict()


def test_to_dict_is_json_and_carries_no_hospital_ids_or_records():
    ids, groups, label, decision, score = cohort_arrays(6_000, 40, seed=11)
    res = axis3("m", ids, label, decision, score, groups, ATTRS, RULES, min_group_support=150)
    text = json.dumps(res.to_dict(), allow_nan=False)
    assert "St-Example-Hospital" not in text
    d = json.loads(text)
    assert d["applicable"] and len(d["cells"]) == 28 and len(d["metrics"]) == 7
    assert all(len(c["fold_verdicts"]) == d["n_folds"] for c in d["cells"])
    assert None in [v for c in d["cells"] for v in c["fold_values"]]  # NaN became null

    def list_lengths(x):  # every list in the output, however deeply nested
        if isinstance(x, dict):
            return [n for v in x.values() for n in list_lengths(v)]
        if isinstance(x, list):
            return [len(x)] + [n for v in x for n in list_lengths(v)]
        return []

    # nothing per record: the longest list is the 28 cells (folds are 20)
    assert max(list_lengths(d)) == 28


def test_axis3_rejects_malformed_records():
    ids, groups, label, decision, score = cohort_arrays(500, 5, seed=12)
    bad = dict(groups, race=groups["race"] + 5)
    with pytest.raises(ValueError, match="race"):
        axis3("m", ids, label, decision, score, bad, ATTRS, RULES)
    with pytest.raises(ValueError, match="scores"):
        axis3("m", ids, label, decision, score * 2, groups, ATTRS, RULES)
    with pytest.raises(ValueError, match="records"):
        axis3("m", ids, label[:-1], decision, score, groups, ATTRS, RULES)


def test_custom_rule_direction_is_honoured():
    ids, groups, label, decision, score = cohort_arrays(5_000, 30, seed=13)
    rule = [MetricRule(name="SPD", threshold=0.0, direction="<=")]  # only SPD <= 0 passes
    res = axis3("m", ids, label, decision, score, groups, ATTRS, rule)
    assert all(c.n_pass_folds == 0 for c in res.cells) and res.metrics[0].degenerate


# ----------------------------------------------------------------------------- (e) bands
@pytest.mark.parametrize(
    "kappa, band",
    [
        (-1.0, "poor"),
        (-1e-12, "poor"),
        (0.0, "slight"),
        (0.20, "slight"),
        (0.20 + 1e-12, "fair"),
        (0.40, "fair"),
        (0.40 + 1e-12, "moderate"),
        (0.60, "moderate"),
        (0.60 + 1e-12, "substantial"),
        (0.80, "substantial"),
        (0.80 + 1e-12, "almost perfect"),
        (1.0, "almost perfect"),
    ],
)
def test_landis_koch_band_boundaries(kappa, band):
    assert landis_koch_band(kappa) == band


def test_band_of_nan_is_an_error():
    with pytest.raises(ValueError):
        landis_koch_band(float("nan"))


# ----------------------------------------------------------------------------- round trip
def test_axis3_result_round_trips_through_strict_json():
    from batch_axes.axis3 import Axis3Result

    ids, groups, label, decision, score = cohort_arrays(6_000, 40, seed=11)
    res = axis3("m", ids, label, decision, score, groups, ATTRS, RULES, min_group_support=150)
    back = Axis3Result.from_dict(json.loads(json.dumps(res.to_dict(), allow_nan=False)))
    assert back.to_dict() == res.to_dict()  # NaN fold values: equal as JSON, not as floats
    assert back.metrics == res.metrics
    assert back.cell("DI", "race").kappa == res.cell("DI", "race").kappa
    na = axis3("m", np.array(["h"] * 50), label[:50], decision[:50], score[:50],
               {k: v[:50] for k, v in groups.items()}, ATTRS, RULES)  # fmt: skip
    assert Axis3Result.from_dict(json.loads(json.dumps(na.to_dict()))) == na


@given(
    kappa=st.floats(-1, 1),
    verdicts=st.lists(st.booleans(), min_size=1, max_size=20),
    left=st.dictionaries(st.sampled_from("0123"), st.integers(1, 20)),
)
def test_axis3_cell_and_metric_agreement_round_trip(kappa, verdicts, left):
    from batch_axes.axis3 import Axis3Cell, MetricAgreement

    n = len(verdicts)
    cell = Axis3Cell(
        "m", "DI", "race", 0.8, ">=", kappa, landis_koch_band(kappa), False, kappa < 0.4,
        sum(verdicts), n, 0, tuple("pass" if v else "fail" for v in verdicts),
        tuple(float(i) / 7 for i in range(n)), tuple(left.items()),
    )  # fmt: skip
    assert Axis3Cell.from_dict(json.loads(json.dumps(cell.to_dict()))) == cell
    agreement = MetricAgreement("DI", kappa, landis_koch_band(kappa), False, kappa < 0.4, (n, 0))
    assert MetricAgreement.from_dict(json.loads(json.dumps(agreement.to_dict()))) == agreement
