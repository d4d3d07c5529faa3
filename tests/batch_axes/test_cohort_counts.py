"""Per-hospital count tables (batch_axes.cohort_counts): Axis 3 from counts is Axis 3 from
records, however the counts were reached (adds, removes, any order)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.model_selection import GroupKFold

from batch_axes.axis3 import axis3, axis3_from_counts, hospital_folds, hospital_folds_from_counts
from batch_axes.cohort_counts import CohortCounts, CountsLayout, group_kfold_from_sizes
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


# ----------------------------------------------------------------------------- the monoid
def built(r: dict) -> CohortCounts:
    counts = CohortCounts(ATTRS)
    counts.add(*args(r))
    return counts


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 1_500), st.integers(1, 30), st.integers(0, 2**31),
    st.integers(2, 4), st.sampled_from([0.0, 0.1, 1.0]),
)  # fmt: skip
def test_the_sum_of_disjoint_parts_is_the_counts_of_their_union(n, hosp, seed, parts, miss):
    """Parts share hospitals or not (a random split of the records): their sum, in any
    order, is the counts built from all the records, array for array; Axis 3 on the sum
    is Axis 3 on the union."""
    r = records(n, hosp, seed, miss)
    rng = np.random.default_rng(seed)
    part_of = rng.integers(0, parts, n)
    pieces = [built(take(r, np.flatnonzero(part_of == p))) for p in range(parts)]
    total = pieces[0]
    for p in pieces[1:]:
        total = total + p
    whole = built(r)
    assert total == whole
    assert pieces[-1] + sum(pieces[1:-1], pieces[0]) == whole  # another order
    # array for array, once both are in one layout (the vector: every integer)
    layout = whole.layout()
    np.testing.assert_array_equal(total.to_vector(layout)[0], whole.to_vector()[0])
    for a in ATTRS:
        assert total.tables[a.name] == whole.tables[a.name]
    got = axis3_from_counts("m", total, RULES, min_group_support=5, n_folds=7)
    assert got.to_dict() == axis3_from_counts("m", whole, RULES, min_group_support=5,
                                              n_folds=7).to_dict()  # fmt: skip
    assert (total - pieces[0]) + pieces[0] == whole
    assert total - pieces[0] == sum(pieces[2:], pieces[1])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 1_000), st.integers(1, 20), st.integers(0, 2**31))
def test_the_vector_round_trip_is_bit_identical(n, hosp, seed):
    r = records(n, hosp, seed)
    counts = built(r)
    vector, layout = counts.to_vector()
    assert vector.dtype == np.int64 and vector.ndim == 1 and vector.size == layout.size
    back = CohortCounts.from_vector(vector, layout)
    assert back == counts
    np.testing.assert_array_equal(back.to_vector()[0], vector)
    S = len(counts.slot_ids)
    for a in ATTRS:
        for name in ("counts", "score_hi", "score_lo"):
            np.testing.assert_array_equal(
                getattr(back, name)[a.name][:S], getattr(counts, name)[a.name][:S]
            )
        for x, y in zip(back.tables[a.name].words(), counts.tables[a.name].words(), strict=True):
            np.testing.assert_array_equal(x, y)
    if counts.n:
        want = axis3_from_counts("m", counts, RULES, n_folds=5).to_dict()
        assert axis3_from_counts("m", back, RULES, n_folds=5).to_dict() == want


def test_vectors_in_one_shared_layout_sum_to_the_vector_of_the_sum():
    """What a network does: each site writes its counts in the layout of every site's
    hospitals; the element-wise sum of the vectors reads back as the pooled counts."""
    r = records(3_000, 12, seed=4)
    site = np.array([int(h[1:]) % 3 if h else 0 for h in r["ids"]])
    sites = [built(take(r, np.flatnonzero(site == k))) for k in range(3)]
    hospitals = tuple(sorted({h for s in sites for h in s.hospital_ids}))
    layout = CountsLayout(tuple(ATTRS), 10, hospitals)
    total = sum((s.to_vector(layout)[0] for s in sites), np.zeros(layout.size, np.int64))
    assert CohortCounts.from_vector(total, layout) == built(r)
    with pytest.raises(ValueError, match="not in the 2 hospitals given"):
        sites[0].to_vector(CountsLayout(tuple(ATTRS), 10, hospitals[:2]))


def test_from_tables_is_the_counts_of_the_records():
    """Per-hospital count tables (what a site may keep) give the same cohort counts."""
    r = records(2_000, 6, seed=5)
    per_hospital = {}
    for h in dict.fromkeys(r["ids"]):
        rows = np.flatnonzero(np.array([x == h for x in r["ids"]]))
        part = take(r, rows)
        per_hospital[h] = {
            a.name: CountTable.from_records(a.codes, part["groups"][a.name], part["label"],
                                            part["decision"], part["score"])
            for a in ATTRS
        }  # fmt: skip
    assert CohortCounts.from_tables(ATTRS, per_hospital) == built(r)
    bad = dict(per_hospital)
    h = next(iter(bad))
    bad[h] = {**bad[h], "b": CountTable(("0", "1"))}
    with pytest.raises(ValueError, match="count different records"):
        CohortCounts.from_tables(ATTRS, bad)


def test_check_compatible_names_the_difference():
    base = built(records(100, 3, seed=6))
    other_codes = [ATTRS[0], AttributeConfig(name="b", groups={"0": "p", "1": "q", "2": "r"})]
    cases = [
        (CohortCounts(ATTRS[:1]), r"different attributes: \['a', 'b'\] here, \['a'\] there"),
        (CohortCounts(other_codes), r"attribute 'b' has different group codes"),
        (CohortCounts(ATTRS, bins=20), "different score bins: 10 here, 20 there"),
        (CohortCounts(ATTRS, with_tables=False), "keep Axis 2's count tables"),
    ]
    for other, message in cases:
        with pytest.raises(ValueError, match=message):
            base.check_compatible(other)
        with pytest.raises(ValueError, match=message):
            base + other
        assert base != other
    with pytest.raises(TypeError):
        base.check_compatible(base.tables["a"])  # type: ignore[arg-type]
    layout = base.to_vector()[1]
    with pytest.raises(ValueError, match="different hospital slots"):
        layout.check_compatible(CohortCounts(ATTRS).layout())


def test_subtracting_what_is_not_contained_raises():
    r = records(500, 4, seed=7)
    part = built(take(r, np.arange(100)))
    with pytest.raises(ValueError, match="not contained"):
        part - built(r)


def test_a_vector_that_is_no_records_counts_is_refused():
    counts = built(records(300, 4, seed=8))
    vector, layout = counts.to_vector()
    with pytest.raises(ValueError, match=f"takes a vector of {layout.size}"):
        CohortCounts.from_vector(vector[:-1], layout)
    with pytest.raises(TypeError, match="integers"):
        CohortCounts.from_vector(vector.astype(float), layout)
    broken = vector.copy()
    broken[0] += 1  # one more record in slot 0 than its attributes count
    with pytest.raises(ValueError, match="records differ between 'a' and the total"):
        CohortCounts.from_vector(broken, layout)
    broken = vector.copy()
    broken[-1] = -1  # a negative score word of the last table
    with pytest.raises(ValueError, match="not cohort counts"):
        CohortCounts.from_vector(broken, layout)
