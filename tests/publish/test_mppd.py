"""monitor.publish.mppd: the report's re-check of MPPD pair counts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL
from monitor.publish.mppd import family_hidden, published_pair_matrix

_count = st.one_of(st.integers(0, 12), st.integers(0, 500), st.just(SMALL_CELL_LABEL))


@given(st.dictionaries(st.sampled_from("abcdef"), _count, min_size=1))
def test_a_family_withholds_every_small_or_withheld_entry_and_never_one_alone(sizes):
    hidden = family_hidden(sizes)
    small = {k for k, n in sizes.items() if n == SMALL_CELL_LABEL or n < SMALL_CELL}
    assert small <= hidden
    # one withheld entry with records is never alone beside shown ones (its complement)
    with_records = [k for k in hidden if sizes[k] != 0]
    shown = [k for k, n in sizes.items() if k not in hidden and n != 0]
    assert len(with_records) != 1 or not shown


@given(st.integers(2, 4).flatmap(
    lambda k: st.lists(st.lists(_count, min_size=k, max_size=k), min_size=k, max_size=k)
))  # fmt: skip
def test_a_pair_shows_one_count_both_ways_rounded_or_none(pairs):
    out = published_pair_matrix(pairs)
    k = len(pairs)
    for i in range(k):
        for j in range(k):
            a, b = pairs[i][j], pairs[j][i]
            if isinstance(a, str) or isinstance(b, str) or min(a, b) < SMALL_CELL:
                assert out[i][j] is None and out[j][i] is None
            if out[i][j] is not None:
                assert out[i][j] % 5 == 0 and abs(out[i][j] - pairs[i][j]) <= 2
