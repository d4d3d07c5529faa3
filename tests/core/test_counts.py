"""Count tables: exact add/remove, merge, serialisation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.core.counts import CountTable, score_bins
from tests.support.strategies import cohorts


def _table(groups, g, y, d, s):
    return CountTable.from_records(groups, g, y, d, s)


@given(cohorts(), st.integers(0, 2**31))
def test_add_then_remove_restores_exactly(cohort, seed):
    groups, g, y, d, s = cohort
    base = _table(groups, g, y, d, s)
    rng = np.random.default_rng(seed)
    m = int(rng.integers(0, 200))
    G = len(groups)
    bg, by, bd, bs = (
        rng.integers(0, G, m),
        rng.integers(0, 2, m),
        rng.integers(0, 2, m),
        rng.uniform(size=m),
    )
    t = base.copy()
    t.add(bg, by, bd, bs)
    t.remove(bg, by, bd, bs)
    assert t == base
    assert np.array_equal(t.score_sum, base.score_sum)  # bit for bit, not approximately
    assert np.array_equal(t.score_sq, base.score_sq)


@given(cohorts(), cohorts())
def test_merge_equals_table_of_union(a, b):
    groups, g1, y1, d1, s1 = a
    _, g2, y2, d2, s2 = b
    G = len(groups)
    g2 = g2 % G
    ta, tb = _table(groups, g1, y1, d1, s1), _table(groups, g2, y2, d2, s2)
    union = _table(groups, *(np.concatenate(p) for p in ((g1, g2), (y1, y2), (d1, d2), (s1, s2))))
    assert ta + tb == union
    assert union - tb == ta
    acc = ta.copy()
    acc += tb
    assert acc == union


@given(cohorts())
def test_sums_match_records(cohort):
    groups, g, y, d, s = cohort
    t = _table(groups, g, y, d, s)
    b = score_bins(s, t.bins)
    for gi in range(len(groups)):
        for yi in (0, 1):
            for di in (0, 1):
                sel = (g == gi) & (y == yi) & (d == di)
                np.testing.assert_array_equal(
                    t.counts[gi, yi, di], np.bincount(b[sel], minlength=t.bins)
                )
                np.testing.assert_allclose(
                    t.score_sum[gi, yi, di],
                    np.bincount(b[sel], weights=s[sel], minlength=t.bins),
                    rtol=0,
                    atol=1e-12,
                )
                np.testing.assert_allclose(
                    t.score_sq[gi, yi, di],
                    np.bincount(b[sel], weights=s[sel] ** 2, minlength=t.bins),
                    rtol=0,
                    atol=1e-12,
                )


@given(cohorts())
def test_serialisation_round_trip(cohort):
    t = _table(*cohort)
    again = CountTable.from_dict(json.loads(json.dumps(t.to_dict())))
    assert again == t
    assert np.array_equal(again.score_sum, t.score_sum)


def test_score_one_goes_to_last_bin_and_edges_bin_up():
    assert score_bins(np.array([0.0, 0.1, 0.5, 0.999, 1.0]), 10).tolist() == [0, 1, 5, 9, 9]


def test_bad_batches_are_refused_and_leave_table_unchanged():
    t = CountTable(("a", "b"))
    t.add([0, 1], [1, 0], [1, 1], [0.2, 0.3])
    before = t.copy()
    with pytest.raises(ValueError, match="group index"):
        t.add([2], [0], [0], [0.5])
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        t.add([0], [0], [0], [1.5])
    with pytest.raises(ValueError, match="0 or 1"):
        t.add([0], [2], [0], [0.5])
    with pytest.raises(ValueError, match="not in the table"):
        t.remove([0], [0], [0], [0.5])
    with pytest.raises(ValueError, match="different groups"):
        _ = t + CountTable(("a", "c"))
    with pytest.raises(ValueError, match="not contained"):
        _ = t - (t + t)
    assert t == before


def test_equality_sees_score_differences():
    a = CountTable.from_records(("a", "b"), [0], [1], [1], [0.21])
    b = CountTable.from_records(("a", "b"), [0], [1], [1], [0.22])
    assert a != b


def test_prepared_batches_give_the_same_table_words_as_add_and_remove():
    import numpy as np

    from monitor.core.counts import CountTable

    rng = np.random.default_rng(11)
    n = 3000
    g, y, d = rng.integers(0, 4, n), rng.integers(0, 2, n), rng.integers(0, 2, n)
    s = rng.uniform(size=n)
    s[:5] = [0.0, 1.0, 0.5, 0.1, 0.9999999999]
    a, b = CountTable("ABCD", 10), CountTable("ABCD", 10)
    a.add(g, y, d, s)
    a.remove(g[:700], y[:700], d[:700], s[:700])
    b.apply_prepared(g, CountTable.prepare(y, d, s, 10), +1)
    b.apply_prepared(g[:700], CountTable.prepare(y[:700], d[:700], s[:700], 10), -1)
    for name in ("counts", "_hi", "_lo", "_sq_hi", "_sq_lo"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


@given(
    st.integers(1, 400),
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(1, 6), min_size=1, max_size=4),
    st.sampled_from([1, 5, 10]),
)
def test_one_bincount_for_several_tables_gives_each_tables_own_words(n, seed, sizes, bins):
    """Oracle: apply_prepared table by table (itself checked against add/remove above)."""
    rng = np.random.default_rng(seed)
    y, d = rng.integers(0, 2, n), rng.integers(0, 2, n)
    s = rng.uniform(size=n)
    s[: min(n, 3)] = [0.0, 1.0, 0.5][: min(n, 3)]
    groups = [rng.integers(0, k, n) for k in sizes]
    names = [tuple(f"g{j}" for j in range(k)) for k in sizes]
    many = [CountTable(c, bins) for c in names]
    one = [CountTable(c, bins) for c in names]
    prepared = CountTable.prepare(y, d, s, bins)
    CountTable.apply_prepared_many(many, groups, prepared, +1)
    for t, g in zip(one, groups, strict=True):
        t.apply_prepared(g, prepared, +1)
    cut = n // 3
    part = CountTable.prepare(y[:cut], d[:cut], s[:cut], bins)
    CountTable.apply_prepared_many(many, [g[:cut] for g in groups], part, -1)
    for t, g in zip(one, groups, strict=True):
        t.apply_prepared(g[:cut], part, -1)
    for a, b in zip(many, one, strict=True):
        for name in ("counts", "_hi", "_lo", "_sq_hi", "_sq_lo"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    if cut:  # removing the whole batch again does not fit: every table is left as it was
        before = [t.copy() for t in many]
        with pytest.raises(ValueError):
            CountTable.apply_prepared_many(many, groups, prepared, -1)
        assert all(a == b for a, b in zip(many, before, strict=True))
