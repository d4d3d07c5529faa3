"""monitor.publish.shown: a published figure is Shown or Withheld, and says why."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.core.privacy import SMALL_CELL, family_withheld
from monitor.publish.counts import count_value, family_values
from monitor.publish.shown import SECONDARY, SMALL, Shown, Why, Withheld, shown_or_none
from tests.support.strategies import families


def test_the_values_are_frozen_and_slotted_and_compare_by_value():
    assert Shown(5) == Shown(5) != Shown(6)
    assert Withheld() == SMALL != SECONDARY
    for v, field in ((Shown(5), "value"), (SMALL, "why")):
        assert not hasattr(v, "__dict__")  # slotted: no stray attribute can be attached
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(v, field, None)
    assert {Shown(1), Shown(1), SMALL, Withheld(Why.SMALL_CELL)} == {Shown(1), SMALL}


def test_a_reason_names_the_rule_in_words():
    assert Why.SMALL_CELL.value == f"fewer than {SMALL_CELL} records"
    assert "secondary" in Why.SECONDARY.value


@given(st.integers(0, 1000))
def test_a_count_is_shown_exactly_when_it_may_leave(n):
    v = count_value(n)
    assert isinstance(v, Shown) == (n >= SMALL_CELL)
    assert shown_or_none(v) == (v.value if isinstance(v, Shown) else None)


@given(families())
def test_a_family_says_which_groups_are_small_and_which_are_withheld_beside_them(sizes):
    """The primary groups (1-10 records) are withheld for being small; the ones secondary
    suppression adds, for the others' sake; the rest shown."""
    out = family_values(sizes)
    hidden = family_withheld(sizes)
    assert {g for g, v in out.items() if not isinstance(v, Shown)} == hidden
    for g, v in out.items():
        if isinstance(v, Withheld):
            assert v.why is (Why.SMALL_CELL if 0 < sizes[g] < SMALL_CELL else Why.SECONDARY)
