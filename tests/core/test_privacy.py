"""monitor.core.privacy: the small-cell rule's pure parts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from monitor.core.privacy import (
    SMALL_CELL,
    model_withheld,
    suppressed_groups,
)
from tests.support.strategies import families


# ----------------------------------------------------------------------------- secondary
# suppression (issue 21, complements): no withheld group follows from the total and the
# shown groups
@given(families(min_total=SMALL_CELL))
def test_suppressed_groups_never_leave_a_withheld_group_derivable(sizes):
    """The withheld groups hold 0 or at least 11 records together, and never is exactly
    one group with records withheld (the total minus the shown ones would be it)."""
    hidden = suppressed_groups(sizes)
    withheld = sum(sizes[g] for g in hidden)
    assert withheld == 0 or withheld >= SMALL_CELL
    assert len([g for g in hidden if sizes[g] > 0]) != 1
    assert all(g in hidden for g, n in sizes.items() if 0 < n < SMALL_CELL)  # primary


@given(families())
def test_a_small_family_withholds_every_group_with_records(sizes):
    """Under 11 records in all (a family the level above withholds too): every group
    with records is withheld, so no figure of its few patients shows."""
    if sum(sizes.values()) < SMALL_CELL:
        assert suppressed_groups(sizes) == {g for g, n in sizes.items() if n > 0}


# ----------------------------------------------------------------------------- across
# families (issue 24): an intersection's groups are also families of their margin groups
def _tables():
    """race x sex tables of 2-4 races and 2 sexes, many cells small, some empty."""
    cell = st.one_of(st.integers(0, 12), st.integers(0, 300))
    return st.integers(2, 4).flatmap(
        lambda r: st.lists(cell, min_size=2 * r, max_size=2 * r).map(
            lambda xs: {f"{i // 2}:{i % 2}": n for i, n in enumerate(xs)}
        )
    )


def _linked(table: dict[str, int]) -> tuple[dict, dict[str, frozenset[str]]]:
    race: dict[str, int] = {}
    sex: dict[str, int] = {}
    for code, n in table.items():
        r, s = code.split(":")
        race[r] = race.get(r, 0) + n
        sex[s] = sex.get(s, 0) + n
    sizes = {"race": race, "sex": sex, "race_x_sex": table}
    return sizes, model_withheld(sizes)


@given(_tables())
def test_no_margin_minus_its_shown_combinations_is_one_small_group(table):
    """Every margin group shown: the combinations withheld within it hold 0 or 11+ records
    and never exactly one of them holds any (its margin minus the shown ones would be
    it); a margin withheld: every combination within it too (their sum is the margin).
    Each attribute's own family keeps the rule of :func:`suppressed_groups`."""
    sizes, hidden = _linked(table)
    for attr, pos in (("race", 0), ("sex", 1)):
        for m in sizes[attr]:
            kids = {c: k for c, k in table.items() if c.split(":")[pos] == m}
            held = [c for c in kids if c in hidden["race_x_sex"] and kids[c] > 0]
            if m in hidden[attr]:
                assert set(held) == {c for c, k in kids.items() if k > 0}
            else:
                assert sum(kids[c] for c in held) == 0 or sum(kids[c] for c in held) >= SMALL_CELL
                assert len(held) != 1, (attr, m, held)
    for attr, fam in sizes.items():
        held = [g for g in hidden[attr] if fam[g] > 0]
        assert all(g in hidden[attr] for g, n in fam.items() if 0 < n < SMALL_CELL)
        if sum(fam.values()) >= SMALL_CELL:
            assert len(held) != 1
            assert sum(fam[g] for g in held) == 0 or sum(fam[g] for g in held) >= SMALL_CELL


def test_the_sibling_of_a_small_combination_is_withheld_within_its_margin():
    """The attack test's case: Native American 23 men and 7 women. suppressed_groups on
    the intersection alone withholds the smallest other combination (not the sibling);
    the linked rule withholds the sibling, so "Native American" minus a shown "Native
    American x Male" no longer leaves the 7 women."""
    table = {"0:0": 23, "0:1": 7, "1:0": 16, "1:1": 22, "2:0": 200, "2:1": 300}
    assert suppressed_groups(table) == {"0:1", "1:0"}
    _, hidden = _linked(table)
    assert {"0:0", "0:1"} <= hidden["race_x_sex"]
    assert hidden["race"] == frozenset() and hidden["sex"] == frozenset()
