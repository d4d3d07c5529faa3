"""monitor.publish.counts: one count, and one family of group sizes, as published."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL, family_withheld
from monitor.publish.counts import (
    published_count,
    published_family,
    published_left_out,
    published_size,
)
from tests.support.complements import small_recovered
from tests.support.strategies import families


@given(st.integers(0, 100_000))
def test_a_count_is_withheld_below_the_rule_else_within_two_of_itself(n):
    """1-10 records show "<11" (and 0 too for a count, not for a size: an empty group
    discloses no patient); the rest are rounded to 5, at most 2 off."""
    shown = published_count(n)
    if n < SMALL_CELL:
        assert shown == SMALL_CELL_LABEL
        assert published_size(n) == (0 if n == 0 else SMALL_CELL_LABEL)
    else:
        assert shown % 5 == 0 and abs(shown - n) <= 2 and published_size(n) == shown


@given(families(min_total=SMALL_CELL))
def test_published_family_survives_the_complement(sizes):
    """What leaves (rounded total, published_family) lets no reader pin a group of 1-10
    records, whether the sizes come exact or already withheld from a stored result."""
    total = published_size(sum(sizes.values()))
    assert small_recovered(total, published_family(sizes)) == {}
    stored = {g: SMALL_CELL_LABEL if 0 < n < SMALL_CELL else n for g, n in sizes.items()}
    assert family_withheld(stored) >= {g for g, n in sizes.items() if 0 < n < SMALL_CELL}
    assert small_recovered(total, published_family(stored)) == {}


def test_left_out_counts_withhold_one_to_ten_and_keep_the_rest():
    out = published_left_out({"a": 0, "b": 1, "c": 10, "d": 11, "e": 1234})
    assert out == {"a": 0, "b": SMALL_CELL_LABEL, "c": SMALL_CELL_LABEL, "d": 11, "e": 1234}
