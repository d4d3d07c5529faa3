"""monitor.publish.volumes: monthly volumes, one family under the small-cell rule."""

from __future__ import annotations

from datetime import date

from hypothesis import given
from hypothesis import strategies as st

from monitor.core.privacy import SMALL_CELL
from monitor.publish.counts import published_count
from monitor.publish.volumes import monthly_volume
from tests.support.complements import small_recovered

_months = st.lists(st.one_of(st.integers(0, 12), st.integers(0, 2000)), min_size=1, max_size=12)


@given(_months)
def test_no_small_month_is_shown_or_follows_from_the_total(counts):
    days = [(date(2026, m + 1, 1 + m % 3), n) for m, n in enumerate(counts)]
    total = sum(counts)
    shown = {v.month: v.records for v in monthly_volume(days)}
    assert len(shown) == len(counts)
    assert all(shown[f"2026-{m + 1:02d}"] is None for m, n in enumerate(counts)
               if 0 < n < SMALL_CELL)  # fmt: skip
    if total >= SMALL_CELL:  # the total as the report shows it
        assert small_recovered(published_count(total), shown) == {}


def test_days_of_one_month_are_summed_before_the_rule():
    days = [(date(2026, 1, 1), 6), (date(2026, 1, 20), 6), (date(2026, 2, 1), 400)]
    assert [(v.month, v.records) for v in monthly_volume(days)] == [
        ("2026-01", 10), ("2026-02", 400)
    ]
