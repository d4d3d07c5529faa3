"""monitor.core.privacy: the small-cell rule's pure parts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from monitor.core.privacy import (
    SMALL_CELL,
    SMALL_CELL_LABEL,
    family_withheld,
    published_family,
    published_size,
    suppressed_groups,
)
from tests.support.complements import small_recovered


# ----------------------------------------------------------------------------- secondary
# suppression (issue 21, complements): no withheld group follows from the total and the
# shown groups
def _families(min_total: int = 0):
    """Size maps of 1-8 groups, many of them small, some empty, totals of ``min_total``
    records or more."""
    sizes = st.one_of(st.integers(0, 12), st.integers(0, 400))
    return st.dictionaries(st.sampled_from("abcdefgh"), sizes, min_size=1).filter(
        lambda d: sum(d.values()) >= min_total
    )


@given(_families(min_total=SMALL_CELL))
def test_suppressed_groups_never_leave_a_withheld_group_derivable(sizes):
    """The withheld groups hold 0 or at least 11 records together, and never is exactly
    one group with records withheld (the total minus the shown ones would be it)."""
    hidden = suppressed_groups(sizes)
    withheld = sum(sizes[g] for g in hidden)
    assert withheld == 0 or withheld >= SMALL_CELL
    assert len([g for g in hidden if sizes[g] > 0]) != 1
    assert all(g in hidden for g, n in sizes.items() if 0 < n < SMALL_CELL)  # primary


@given(_families())
def test_a_small_family_withholds_every_group_with_records(sizes):
    """Under 11 records in all (a family the level above withholds too): every group
    with records is withheld, so no figure of its few patients shows."""
    if sum(sizes.values()) < SMALL_CELL:
        assert suppressed_groups(sizes) == {g for g, n in sizes.items() if n > 0}


@given(_families(min_total=SMALL_CELL))
def test_published_family_survives_the_complement(sizes):
    """What leaves (rounded total, published_family) lets no reader pin a group of 1-10
    records, whether the sizes come exact or already withheld from a stored result."""
    total = published_size(sum(sizes.values()))
    assert small_recovered(total, published_family(sizes)) == {}
    stored = {g: SMALL_CELL_LABEL if 0 < n < SMALL_CELL else n for g, n in sizes.items()}
    assert family_withheld(stored) >= {g for g, n in sizes.items() if 0 < n < SMALL_CELL}
    assert small_recovered(total, published_family(stored)) == {}
