"""Per-hospital count tables (batch_axes.cohort_counts): Axis 3 from counts is Axis 3 from
records, however the counts were reached (adds, removes, any order)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.model_selection import GroupKFold

from batch_axes.axis3 import axis3, axis3_from_counts, hospital_folds, hospital_folds_from_counts
from batch_axes.cohort_counts import CohortCounts, group_kfold_from_sizes
from monitor.config import AttributeConfig, MetricRule
from monitor.core.counts import CountTable

ATTRS = [
    AttributeConfig(name="a", groups={"0": "x", "1": "y", "2": "z"}),
    AttributeConfig(name="b", groups={"0": "p", "1": "q"}),
]
RULES = [
    MetricRule(name="DI", threshold=0.8, direction=">="),
    MetricRule(name="EOD", threshold=0.1, direction="<="),
    MetricRule(name="CAL", threshold=0.05, direction="<="),
]


def records(n: int, n_hospitals: int, seed: int, missing: float = 0.05) -> dict:
    """A seeded cohort: hospital ids (some missing), groups, label, decision, score."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"h{i:03d}" for i in rng.integers(0, n_hospitals, n)], dtype=object)
    ids[rng.uniform(size=n) < missing] = None
    score = rng.uniform(size=n)
    score[rng.uniform(size=n) < 0.01] = 1.0  # the last bin's edge
    return {
        "ids": ids,
        "groups": {a.name: rng.integers(0, len(a.codes), n) for a in ATTRS},
        "label": rng.integers(0, 2, n),
        "decision": (score > rng.uniform(0.3, 0.7)).astype(np.int64),
        "score": score,
    }


def take(r: dict, rows: np.ndarray) -> dict:
    return {
        "ids": r["ids"][rows],
        "groups": {k: g[rows] for k, g in r["groups"].items()},
        **{k: r[k][rows] for k in ("label", "decision", "score")},
    }


def args(r: dict) -> tuple:
    return r["ids"], r["groups"], r["label"], r["decision"], r["score"]


def from_records(r: dict, support: int, n_folds: int):
    return axis3(
        "m", r["ids"], r["label"], r["decision"], r["score"], r["groups"], ATTRS, RULES,
        min_group_support=support, n_folds=n_folds,
    )  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=60), st.integers(2, 25))
def test_group_kfold_from_sizes_is_sklearns_group_kfold(sizes, k):
    """Ties (equal sizes) included: the stable order and argmin's first-fold rule."""
    sizes = np.array([s + 1 for s in sizes], dtype=np.int64)
    k = min(k, sizes.size)
    if k < 2:
        return
    groups = np.repeat(np.arange(sizes.size), sizes)
    want = np.full(sizes.size, -1)
    for f, (_, test) in enumerate(GroupKFold(n_splits=k).split(groups, groups=groups)):
        want[groups[test]] = f
    np.testing.assert_array_equal(group_kfold_from_sizes(sizes, k), want)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(30, 3_000), st.integers(1, 40), st.integers(2, 20), st.integers(1, 60),
    st.integers(0, 2**31), st.sampled_from([0.0, 0.05, 1.0]),
)  # fmt: skip
def test_axis3_from_counts_is_axis3_from_records(n, n_hospitals, n_folds, support, seed, miss):
    """Fold assignment, fold sizes, notes, fold values (bit for bit), verdicts, kappas."""
    r = records(n, n_hospitals, seed, miss)
    counts = CohortCounts(ATTRS)
    counts.add(*args(r))
    want = from_records(r, support, n_folds)
    got = axis3_from_counts("m", counts, RULES, min_group_support=support, n_folds=n_folds)
    assert got.to_dict() == want.to_dict()
    folds, _ = hospital_folds_from_counts(counts, n_folds)
    ref = hospital_folds(r["ids"], n_folds)
    assert (folds.applicable, folds.reason, folds.note, folds.fold_sizes) == (
        ref.applicable, ref.reason, ref.note, ref.fold_sizes,
    )  # fmt: skip
    np.testing.assert_array_equal(folds.fold_of_hospital, ref.fold_of_hospital)


@settings(max_examples=30, deadline=None)
@given(st.integers(200, 4_000), st.integers(2, 30), st.integers(0, 2**31), st.integers(1, 6))
def test_counts_after_adds_and_removes_are_those_of_the_remaining_records(n, hosp, seed, steps):
    """A cohort moved in steps (batches enter, earlier ones leave, in any order) holds the
    same tables as one built from the records left: Axis 3 identical, Axis 2's tables equal."""
    r = records(n, hosp, seed)
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(steps, n - 1), replace=False))
    batches = np.split(rng.permutation(n), cuts)
    counts = CohortCounts(ATTRS)
    inside = np.zeros(n, bool)
    for i, b in enumerate(batches):
        counts.add(*args(take(r, b)))
        inside[b] = True
        if i % 2 and i >= 1:  # an earlier batch leaves
            gone = batches[i - 1]
            counts.remove(*args(take(r, gone)))
            inside[gone] = False
    rest = take(r, np.flatnonzero(inside))
    for a in ATTRS:
        want = CountTable.from_records(
            a.codes, rest["groups"][a.name], rest["label"], rest["decision"], rest["score"]
        )
        assert counts.tables[a.name] == want
    assert counts.n == int(inside.sum())
    got = axis3_from_counts("m", counts, RULES, min_group_support=5, n_folds=7)
    assert got.to_dict() == from_records(rest, 5, 7).to_dict()


def test_removing_records_not_in_the_tables_raises_and_changes_nothing():
    r = records(500, 5, seed=1)
    counts = CohortCounts(ATTRS)
    counts.add(*args(take(r, np.arange(400))))
    before = counts.copy()
    with pytest.raises(ValueError, match="not in the cohort"):
        counts.remove(*args(take(r, np.arange(300, 500))))
    for a in ATTRS:
        np.testing.assert_array_equal(counts.counts[a.name], before.counts[a.name])
        assert counts.tables[a.name] == before.tables[a.name]
    np.testing.assert_array_equal(counts.slot_n[: before.slot_n.size], before.slot_n)


def test_a_hospital_whose_records_all_left_takes_no_part_in_the_folds():
    r = records(2_000, 12, seed=2, missing=0.0)
    counts = CohortCounts(ATTRS)
    counts.add(*args(r))
    gone = np.flatnonzero(r["ids"] == "h003")
    counts.remove(*args(take(r, gone)))
    rest = take(r, np.setdiff1d(np.arange(len(r["ids"])), gone))
    folds, _ = hospital_folds_from_counts(counts, 20)
    assert folds.n_hospitals == 11 == hospital_folds(rest["ids"], 20).n_hospitals
    got = axis3_from_counts("m", counts, RULES, min_group_support=5, n_folds=20)
    assert got.to_dict() == from_records(rest, 5, 20).to_dict()
