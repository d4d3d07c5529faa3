"""EquiLense matcher and MPPD (docs/method.md section 7): fast paths vs oracles, hand examples."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Literal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from batch_axes.mppd import (
    IndividualFairnessGap,
    MPPDPairwise,
    MPPDReference,
    Strategy,
    _slab_bounds,
    individual_fairness_gap,
    matched_pairs,
    mppd_pairwise,
    mppd_reference,
    scale_features,
    unit_rows,
)
from monitor.bench.synthetic import (
    synthetic_similarity_cohort,
)
from monitor.reference.mppd import (
    matched_pairs_all_pairs,
    mppd_pairwise_all_pairs,
    mppd_pairwise_loop,
    mppd_reference_all_pairs,
    mppd_reference_loop,
)

REPEATABLE = settings(
    derandomize=True,
    deadline=None,
    max_examples=120,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
STRATEGIES: tuple[Strategy, ...] = ("kdtree", "blocked")

# --------------------------------------------------------------------------- generators

# A small value grid makes duplicate rows, all-zero rows and exact cosine ties
# common; free floats (down to subnormals) cover everything else.
_values = st.one_of(
    st.sampled_from([0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 3.0]),
    st.floats(-4.0, 4.0, allow_nan=False, allow_subnormal=True),
)


@st.composite
def cohorts(draw: st.DrawFn, max_n: int = 40) -> np.ndarray:
    """Raw feature matrices with 0..max_n records, forced duplicates and zero rows."""
    n = draw(st.integers(0, max_n))
    f = draw(st.integers(1, 4))
    X = draw(arrays(np.float64, (n, f), elements=_values))
    if n >= 2:
        for _ in range(draw(st.integers(0, 3))):
            src, dst = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
            X[dst] = X[src]
        for _ in range(draw(st.integers(0, 2))):
            X[draw(st.integers(0, n - 1))] = 0.0
    return X


thresholds = st.one_of(
    st.sampled_from([0.01, 1e-6, 0.05, 0.3, 1.0, 1.5]),
    st.floats(1e-9, 2.5, allow_nan=False),
)
scalings = st.sampled_from(["minmax", "none"])


def pair_set(pairs: tuple[np.ndarray, np.ndarray]) -> set[tuple[int, int]]:
    return set(zip(pairs[0].tolist(), pairs[1].tolist(), strict=True))


def naive_pairs(X: np.ndarray, threshold: float) -> set[tuple[int, int]]:
    """Pure-Python double loop over the shared unit vectors (no numpy arithmetic)."""
    U, valid = unit_rows(X)
    rows = U.tolist()
    found = set()
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            if not (valid[a] and valid[b]):
                continue
            acc = rows[a][0] * rows[b][0]
            for k in range(1, len(rows[a])):
                acc += rows[a][k] * rows[b][k]
            if 1.0 - acc < threshold:
                found.add((a, b))
    return found


def textbook_cosine_distance(x: np.ndarray, y: np.ndarray) -> float:
    """1 - cos from the definition, independent of :func:`unit_rows`."""
    return 1.0 - float(np.dot(x, y)) / (float(np.linalg.norm(x)) * float(np.linalg.norm(y)))


def counts(row: tuple[int | str, ...]) -> list[int]:
    """An unpublished row's pair counts (the small-cell label is the published form's)."""
    ints = [c for c in row if isinstance(c, int)]
    assert len(ints) == len(row), row
    return ints


def close(a: float | None, b: float | None, tol: float = 1e-12) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol


def assert_reference_equal(x: MPPDReference, y: MPPDReference) -> None:
    assert x.reference == y.reference
    assert x.min_pairs == y.min_pairs
    assert [g.group for g in x.groups] == [g.group for g in y.groups]
    for gx, gy in zip(x.groups, y.groups, strict=True):
        assert gx.pairs == gy.pairs
        assert gx.low_support == gy.low_support
        assert close(gx.mean, gy.mean), (gx, gy)
        assert close(gx.gap_to_reference, gy.gap_to_reference), (gx, gy)
    assert close(x.disparity, y.disparity)


def assert_pairwise_equal(x: MPPDPairwise, y: MPPDPairwise) -> None:
    assert x.groups == y.groups
    assert x.pairs == y.pairs
    assert x.low_support == y.low_support
    for row_x, row_y in zip(x.means, y.means, strict=True):
        for mx, my in zip(row_x, row_y, strict=True):
            assert close(mx, my), (mx, my)


# --------------------------------------------------------------------------- scaling


@REPEATABLE
@given(cohorts())
def test_minmax_scaling_maps_every_column_onto_zero_one(X: np.ndarray) -> None:
    S = scale_features(X)
    assert S.shape == X.shape
    if X.shape[0] == 0:
        return
    assert S.min() >= 0.0 and S.max() <= 1.0
    for k in range(X.shape[1]):
        if X[:, k].max() > X[:, k].min():
            assert S[:, k].min() == 0.0 and S[:, k].max() == 1.0
            # Order-preserving (ties may appear by rounding, never inversions).
            assert np.all(np.diff(S[np.argsort(X[:, k], kind="stable"), k]) >= 0)
        else:
            assert np.all(S[:, k] == 0.0)


def test_scaling_by_hand_and_method_none() -> None:
    X = np.array([[50.0, 7.0, 1.0], [70.0, 7.0, 3.0], [95.0, 7.0, 2.0]])
    assert np.allclose(scale_features(X), [[0.0, 0.0, 0.0], [20 / 45, 0.0, 1.0], [1.0, 0.0, 0.5]])
    kept = scale_features(X, method="none")
    assert np.array_equal(kept, X) and kept is not X
    with pytest.raises(ValueError):
        scale_features(X, method="zscore")  # type: ignore[arg-type]  # the refused method
    with pytest.raises(ValueError):
        scale_features([[1.0, math.nan]])
    with pytest.raises(ValueError):
        scale_features([1.0, 2.0])


# --------------------------------------------------------------------------- matching


@REPEATABLE
@given(cohorts(), thresholds, scalings)
def test_fast_matcher_equals_oracle_and_naive_loop(
    X: np.ndarray, threshold: float, scaling: Literal["minmax", "none"]
) -> None:
    S = scale_features(X, method=scaling)
    oracle = matched_pairs_all_pairs(S, threshold)
    expected = naive_pairs(S, threshold)
    assert pair_set(oracle) == expected
    _, valid = unit_rows(S)
    for strategy in STRATEGIES:
        fast = matched_pairs(S, threshold, strategy=strategy)
        assert np.array_equal(fast[0], oracle[0]) and np.array_equal(fast[1], oracle[1])
        i, j = fast
        assert np.all(i < j)
        assert np.all(valid[i]) and np.all(valid[j])  # zero vectors match nothing
        keys = i.astype(np.int64) * max(len(S), 1) + j
        assert np.all(np.diff(keys) > 0)  # lexicographically sorted, no repeats


@REPEATABLE
@given(cohorts(), thresholds, scalings)
def test_matching_agrees_with_textbook_cosine_away_from_the_boundary(
    X: np.ndarray, threshold: float, scaling: Literal["minmax", "none"]
) -> None:
    """Checks unit_rows and the predicate against the definition, independent of shared code."""
    S = scale_features(X, method=scaling)
    found = pair_set(matched_pairs(S, threshold))
    for a in range(len(S)):
        for b in range(a + 1, len(S)):
            if not (np.any(S[a]) and np.any(S[b])):
                assert (a, b) not in found
                continue
            if np.max(np.abs(S[a])) < 1e-150 or np.max(np.abs(S[b])) < 1e-150:
                continue  # the textbook formula underflows there; unit_rows does not
            d = textbook_cosine_distance(S[a], S[b])
            if abs(d - threshold) > 1e-9:
                assert ((a, b) in found) == (d < threshold), (a, b, d, threshold)


@REPEATABLE
@given(cohorts(max_n=25), st.data())
def test_boundary_pairs_are_decided_identically(X: np.ndarray, data: st.DataObject) -> None:
    """A threshold equal to a pair's own distance excludes it (strict <), in both paths."""
    U, valid = unit_rows(X)
    rows = np.flatnonzero(valid)
    if rows.size < 2:
        return
    a, b = sorted(
        data.draw(st.lists(st.sampled_from(rows.tolist()), min_size=2, max_size=2, unique=True))
    )
    d = 1.0 - sum(float(U[a, k]) * float(U[b, k]) for k in range(U.shape[1]))
    if not d > 0:
        return  # the threshold must be positive
    for threshold, inside in ((d, False), (float(np.nextafter(d, np.inf)), True)):
        oracle = matched_pairs_all_pairs(X, threshold)
        assert ((a, b) in pair_set(oracle)) == inside
        for strategy in STRATEGIES:
            fast = matched_pairs(X, threshold, strategy=strategy)
            assert pair_set(fast) == pair_set(oracle)


@st.composite
def clustered_cohorts(draw: st.DrawFn) -> np.ndarray:
    """A few hundred records around a handful of centres: many near and exact duplicates.

    Large enough for the k-d tree path to cut the cohort into several slabs, so
    pairs straddling slab boundaries (and ties on a boundary) are exercised.
    """
    n = draw(st.integers(130, 400))
    f = draw(st.integers(2, 5))
    centres = draw(arrays(np.float64, (draw(st.integers(1, 6)), f), elements=st.floats(0, 1)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = draw(st.sampled_from([0.0, 1e-3, 0.05, 0.3]))
    X = centres[rng.integers(0, len(centres), n)] + spread * rng.normal(size=(n, f))
    X = np.round(X, draw(st.sampled_from([1, 2, 8])))  # rounding makes exact ties
    return scale_features(X)


@settings(REPEATABLE, max_examples=60)
@given(clustered_cohorts(), thresholds)
def test_slabbed_tree_finds_every_pair_in_larger_cohorts(S: np.ndarray, threshold: float) -> None:
    oracle = matched_pairs_all_pairs(S, threshold)
    for workers in (1, 2):
        fast = matched_pairs(S, threshold, workers=workers)
        assert np.array_equal(fast[0], oracle[0]) and np.array_equal(fast[1], oracle[1])
    blocked = matched_pairs(S, threshold, strategy="blocked")
    assert np.array_equal(blocked[0], oracle[0]) and np.array_equal(blocked[1], oracle[1])


@REPEATABLE
@given(
    arrays(np.float64, st.integers(2, 300), elements=st.floats(-2, 2)),
    st.floats(1e-3, 1.0),
    st.integers(1, 12),
)
def test_slab_cuts_leave_every_inner_slab_at_least_one_radius_wide(
    x: np.ndarray, width: float, slabs: int
) -> None:
    cuts = _slab_bounds(x, width, slabs)
    assert cuts.size <= slabs - 1
    assert np.all(cuts > x.min())
    assert np.all(np.diff(cuts) >= width)


def test_zero_vectors_match_nothing_and_duplicates_match_each_other() -> None:
    X = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [2.0, 0.0]])
    for strategy in STRATEGIES:
        # At 1.5 every two non-zero rows here match (d <= 1), but no zero row does.
        assert pair_set(matched_pairs(X, 1.5, strategy=strategy)) == {
            (2, 3),
            (2, 4),
            (2, 5),
            (3, 4),
            (3, 5),
            (4, 5),
        }
        # At the default threshold only the parallel rows and the duplicates match.
        assert pair_set(matched_pairs(X, strategy=strategy)) == {(2, 4), (2, 5), (4, 5)}
    assert pair_set(matched_pairs_all_pairs(X, 1.5)) == {
        (2, 3),
        (2, 4),
        (2, 5),
        (3, 4),
        (3, 5),
        (4, 5),
    }
    # The cohort-minimum record becomes a zero vector under min-max scaling.
    S = scale_features([[1.0, 5.0], [1.0, 5.0], [2.0, 6.0], [2.0, 6.0]])
    assert pair_set(matched_pairs(S)) == {(2, 3)}


@pytest.mark.parametrize("n", [0, 1, 2])
def test_tiny_cohorts(n: int) -> None:
    X = np.ones((n, 3))
    expected = {(0, 1)} if n == 2 else set()
    for strategy in STRATEGIES:
        i, j = matched_pairs(X, strategy=strategy)
        assert pair_set((i, j)) == expected
        assert i.dtype == np.intp and j.dtype == np.intp
    assert pair_set(matched_pairs_all_pairs(X)) == expected
    assert matched_pairs(np.zeros((n, 0)))[0].size == 0
    p, groups = np.linspace(0.2, 0.4, n), np.array(["a", "b"][:n])
    pairs = matched_pairs(X)
    gap = individual_fairness_gap(p, pairs)
    assert gap.pairs == len(expected)
    assert close(gap.mean, 0.2 if n == 2 else None)
    assert_reference_equal(mppd_reference(p, groups, pairs), mppd_reference_loop(p, groups, pairs))
    assert_pairwise_equal(mppd_pairwise(p, groups, pairs), mppd_pairwise_loop(p, groups, pairs))
    if n == 0:
        assert mppd_reference(p, groups, pairs).reference is None
        configured = mppd_reference(p, groups, pairs, reference="a")
        assert configured.reference == "a" and configured.groups == ()
        assert configured.disparity is None
        assert mppd_pairwise(p, groups, pairs).groups == ()


def test_synthetic_cohort_fast_equals_oracle() -> None:
    for features in (3, 8, 16):
        X, p, groups = synthetic_similarity_cohort(1500, seed=7, features=features)
        S = scale_features(X)
        oracle = matched_pairs_all_pairs(S)
        assert oracle[0].size > 0
        for strategy in STRATEGIES:
            fast = matched_pairs(S, strategy=strategy)
            assert np.array_equal(fast[0], oracle[0]) and np.array_equal(fast[1], oracle[1])
        serial = matched_pairs(S, workers=1)
        assert np.array_equal(serial[0], oracle[0]) and np.array_equal(serial[1], oracle[1])
        assert_reference_equal(
            mppd_reference(p, groups, matched_pairs(S)), mppd_reference_all_pairs(S, p, groups)
        )
        assert_pairwise_equal(
            mppd_pairwise(p, groups, matched_pairs(S)), mppd_pairwise_all_pairs(S, p, groups)
        )


def test_matcher_rejects_bad_input() -> None:
    X = np.ones((3, 2))
    for bad in (0.0, -0.01, math.nan, math.inf):
        with pytest.raises(ValueError):
            matched_pairs(X, bad)
        with pytest.raises(ValueError):
            matched_pairs_all_pairs(X, bad)
    with pytest.raises(ValueError):
        matched_pairs(X, strategy="annoy")  # type: ignore[arg-type]  # the refused strategy
    with pytest.raises(ValueError):
        matched_pairs(X, workers=0)
    with pytest.raises(ValueError):
        matched_pairs([[1.0, math.inf], [1.0, 1.0]])


# --------------------------------------------------------------------------- metrics


@st.composite
def scored_cohorts(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    X = scale_features(draw(cohorts()))
    n = X.shape[0]
    p = draw(arrays(np.float64, n, elements=st.floats(0.0, 1.0)))
    groups = draw(arrays(object, n, elements=st.sampled_from(["white", "black", "asian", "h"])))
    return X, p, groups.astype(str), draw(thresholds)


@REPEATABLE
@given(scored_cohorts(), st.integers(0, 12))
def test_vectorised_metrics_equal_loops_on_oracle_pairs(
    cohort: tuple[np.ndarray, np.ndarray, np.ndarray, float], min_pairs: int
) -> None:
    X, p, groups, threshold = cohort
    fast_pairs = matched_pairs(X, threshold)
    oracle_pairs = matched_pairs_all_pairs(X, threshold)

    gap = individual_fairness_gap(p, fast_pairs, min_pairs=min_pairs)
    diffs = [abs(p[a] - p[b]) for a, b in pair_set(oracle_pairs)]
    assert gap.pairs == len(diffs)
    assert close(gap.mean, sum(diffs) / len(diffs) if diffs else None)
    assert gap.low_support == (len(diffs) < min_pairs)

    fast_ref = mppd_reference(p, groups, fast_pairs, min_pairs=min_pairs)
    assert_reference_equal(
        fast_ref, mppd_reference_all_pairs(X, p, groups, threshold, min_pairs=min_pairs)
    )
    fast_pw = mppd_pairwise(p, groups, fast_pairs, min_pairs=min_pairs)
    assert_pairwise_equal(fast_pw, mppd_pairwise_all_pairs(X, p, groups, threshold, min_pairs))

    for entry in fast_ref.groups:
        assert isinstance(entry.pairs, int)  # unpublished: a count, never the small-cell label
        assert entry.low_support == (entry.pairs < min_pairs)
        assert (entry.mean is None) == (entry.pairs == 0)
    for row, flags in zip(fast_pw.pairs, fast_pw.low_support, strict=True):
        assert list(flags) == [c < min_pairs for c in counts(row)]


@REPEATABLE
@given(scored_cohorts(), st.data())
def test_reference_result_is_the_reference_row_of_the_pairwise_matrix(
    cohort: tuple[np.ndarray, np.ndarray, np.ndarray, float], data: st.DataObject
) -> None:
    X, p, groups, threshold = cohort
    pairs = matched_pairs(X, threshold)
    pairwise = mppd_pairwise(p, groups, pairs)
    names = sorted(set(groups.tolist()))
    reference = data.draw(st.sampled_from([None, *names]))
    result = mppd_reference(p, groups, pairs, reference=reference)
    if not names:
        assert result.reference is None and result.groups == ()
        return
    if reference is None:
        sizes = {g: int(np.sum(groups == g)) for g in names}
        assert result.reference == min(g for g in names if sizes[g] == max(sizes.values()))
    else:
        assert result.reference == reference
    row = pairwise.groups.index(result.reference)
    assert [e.group for e in result.groups] == list(pairwise.groups)
    assert [e.pairs for e in result.groups] == list(pairwise.pairs[row])
    assert [e.low_support for e in result.groups] == list(pairwise.low_support[row])
    for entry, mean in zip(result.groups, pairwise.means[row], strict=True):
        assert close(entry.mean, mean)
    # Directed reading: cross-group cells are symmetric, diagonal counts are even.
    k = len(pairwise.groups)
    for a in range(k):
        assert pairwise.pairs[a][a] % 2 == 0
        for b in range(k):
            assert pairwise.pairs[a][b] == pairwise.pairs[b][a]
            assert close(pairwise.means[a][b], pairwise.means[b][a])
    assert sum(map(sum, map(counts, pairwise.pairs))) == 2 * pairs[0].size


def test_hand_computed_example() -> None:
    # Rows 0, 1, 6 (group A) and 2 (group B) point the same way; row 1 duplicates
    # row 0; rows 3 (B) and 5 (C) are parallel; row 4 (C) is a zero vector.
    X = np.array([[1, 0], [1, 0], [2, 0.001], [0, 1], [0, 0], [0, 3], [5, 0]], dtype=float)
    groups = np.array(["A", "A", "B", "B", "C", "C", "A"])
    p = np.array([0.1, 0.3, 0.6, 0.9, 0.5, 0.2, 0.4])
    pairs = matched_pairs(X)  # features used as given (already on a common scale)
    assert pair_set(pairs) == {(0, 1), (0, 2), (0, 6), (1, 2), (1, 6), (2, 6), (3, 5)}

    gap = individual_fairness_gap(p, pairs)
    assert gap.pairs == 7 and gap.low_support
    assert gap.mean == pytest.approx(2.3 / 7, abs=1e-12)

    # Reference A (3 records, largest). r=0: B 0.5, A 0.2 + 0.3; r=1: B 0.3, A 0.2 + 0.1;
    # r=6: B 0.2, A 0.3 + 0.1. The three A-A pairs each count twice.
    ref = mppd_reference(p, groups, pairs, min_pairs=3)
    assert ref.reference == "A"
    assert [(e.group, e.pairs, e.low_support) for e in ref.groups] == [
        ("A", 6, False),
        ("B", 3, False),
        ("C", 0, True),
    ]
    assert ref.group("A").mean == pytest.approx(0.2, abs=1e-12)
    assert ref.group("B").mean == pytest.approx(1 / 3, abs=1e-12)
    assert ref.group("C").mean is None
    assert ref.group("A").gap_to_reference == pytest.approx(0.0, abs=1e-12)
    assert ref.group("B").gap_to_reference == pytest.approx(1 / 3 - 0.2, abs=1e-12)
    assert ref.group("C").gap_to_reference is None
    assert ref.disparity == pytest.approx(1 / 3 - 0.2, abs=1e-12)
    assert_reference_equal(ref, mppd_reference_loop(p, groups, pairs, min_pairs=3))

    # Reference C: row 5 is matched to row 3 (B) only; the zero vector row 4 to nothing.
    ref_c = mppd_reference(p, groups, pairs, reference="C")
    assert [(e.group, e.pairs) for e in ref_c.groups] == [("A", 0), ("B", 1), ("C", 0)]
    assert ref_c.group("B").mean == pytest.approx(0.7, abs=1e-12)
    assert ref_c.group("B").low_support
    assert ref_c.disparity is None  # one defined mean: no spread to report

    pw = mppd_pairwise(p, groups, pairs, min_pairs=3)
    assert pw.groups == ("A", "B", "C")
    assert pw.pairs == ((6, 3, 0), (3, 0, 1), (0, 1, 0))
    assert pw.low_support == ((False, False, True), (False, True, True), (True, True, True))
    expected = ((0.2, 1 / 3, None), (1 / 3, None, 0.7), (None, 0.7, None))
    for row, want in zip(pw.means, expected, strict=True):
        for got, w in zip(row, want, strict=True):
            assert close(got, w)
    assert pw.cell("B", "C") == (pytest.approx(0.7, abs=1e-12), 1, True)

    # Ties for the largest group go to the first name in sorted order, not in record order.
    idx = [4, 5, 2, 3]  # groups C, C, B, B
    tied_pairs = matched_pairs(X[idx])
    assert mppd_reference(p[idx], groups[idx], tied_pairs).reference == "B"
    assert mppd_reference_loop(p[idx], groups[idx], tied_pairs).reference == "B"


def test_results_are_frozen_and_json_able_without_record_values() -> None:
    X, p, groups = synthetic_similarity_cohort(400, seed=3)
    pairs = matched_pairs(scale_features(X))
    results = (
        individual_fairness_gap(p, pairs),
        mppd_reference(p, groups, pairs),
        mppd_pairwise(p, groups, pairs),
    )
    for result in results:
        text = json.dumps(result.to_dict(), allow_nan=False)
        assert json.loads(text) == result.to_dict()
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.min_pairs = 1  # type: ignore[misc, union-attr]  # the refused assignment
    gap, ref, pw = results
    assert isinstance(gap, IndividualFairnessGap)
    assert set(gap.to_dict()) == {"mean", "pairs", "low_support"}
    assert set(ref.to_dict()) == {"reference", "min_pairs", "disparity", "groups"}
    assert {tuple(sorted(g)) for g in ref.to_dict()["groups"]} == {
        ("gap_to_reference", "group", "low_support", "mean", "pairs")
    }
    assert set(pw.to_dict()) == {"groups", "min_pairs", "means", "pairs", "low_support"}
    assert len(pw.to_dict()["means"]) == len(set(groups.tolist()))


def test_metrics_reject_bad_input() -> None:
    p = np.array([0.1, 0.2, 0.3])
    groups = np.array(["a", "a", "b"])
    good = (np.array([0]), np.array([1]))
    with pytest.raises(ValueError):
        mppd_reference(p, groups, good, reference="zzz")
    with pytest.raises(ValueError):
        mppd_reference_loop(p, groups, good, reference="zzz")
    for bad in (
        (np.array([0]), np.array([0])),
        (np.array([0]), np.array([3])),
        (np.array([0, 1]), np.array([2])),
        (np.array([-1]), np.array([2])),
    ):
        with pytest.raises(ValueError):
            individual_fairness_gap(p, bad)
        with pytest.raises(ValueError):
            mppd_pairwise(p, groups, bad)
    with pytest.raises(ValueError):
        mppd_pairwise(p, groups[:2], good)
    with pytest.raises(ValueError):
        individual_fairness_gap(np.array([0.1, math.nan, 0.3]), good)


# --------------------------------------------------------------------------- round trip


def test_results_round_trip_through_strict_json() -> None:
    from batch_axes.mppd import GroupMPPD

    X, p, groups = synthetic_similarity_cohort(400, seed=3)
    pairs = matched_pairs(scale_features(X))
    for result in (
        individual_fairness_gap(p, pairs),
        mppd_reference(p, groups, pairs),
        mppd_pairwise(p, groups, pairs),
    ):
        back = type(result).from_dict(json.loads(json.dumps(result.to_dict(), allow_nan=False)))
        assert back == result
    withheld = GroupMPPD("a", None, "<11", True, None)  # as the small-cell rule leaves it
    assert GroupMPPD.from_dict(json.loads(json.dumps(withheld.to_dict()))) == withheld


_mean = st.one_of(st.none(), st.floats(0, 1))


@given(
    st.lists(st.tuples(_mean, st.integers(0, 100), st.booleans()), min_size=1, max_size=4),
    st.integers(0, 50),
)
def test_reference_and_pairwise_round_trip(entries, min_pairs) -> None:
    from batch_axes.mppd import GroupMPPD

    names = tuple(f"g{i}" for i in range(len(entries)))
    ref = MPPDReference(
        names[0], min_pairs,
        tuple(GroupMPPD(g, m, n, low, m) for g, (m, n, low) in zip(names, entries, strict=True)),
        None,
    )  # fmt: skip
    assert MPPDReference.from_dict(json.loads(json.dumps(ref.to_dict()))) == ref
    pw = MPPDPairwise(
        names, min_pairs,
        tuple(tuple(m for m, _, _ in entries) for _ in names),
        tuple(tuple(n for _, n, _ in entries) for _ in names),
        tuple(tuple(low for _, _, low in entries) for _ in names),
    )  # fmt: skip
    assert MPPDPairwise.from_dict(json.loads(json.dumps(pw.to_dict()))) == pw
