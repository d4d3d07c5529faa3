"""monitor.publish.periods: period filters widened to whole release blocks."""

from __future__ import annotations

from datetime import date, timedelta

from hypothesis import given
from hypothesis import strategies as st

from monitor.core.privacy import SMALL_CELL
from monitor.publish.periods import in_period, snap_period

DAY0 = date(2026, 3, 1)


def _records(days, start, end) -> set[tuple[date, int]]:
    """The records (day, index) of the days in [start, end)."""
    return {(d, i) for d, n in days if in_period(d, start, end) for i in range(n)}


_days = st.lists(st.integers(1, 30), min_size=1, max_size=20).map(
    lambda ns: [(DAY0 + timedelta(2 * k), n) for k, n in enumerate(ns)]  # a gap day each
)
_bound = st.one_of(st.none(), st.integers(-2, 42).map(lambda k: DAY0 + timedelta(k)))


@given(_days, _bound, _bound, _bound, _bound)
def test_two_snapped_periods_differ_by_no_record_or_by_eleven_or_more(days, a, b, c, d):
    """Issue 21's differencing attack on period filters: whatever two filters a reader
    asks for, the records of the two reports differ by 0 or at least SMALL_CELL."""
    if sum(n for _, n in days) < SMALL_CELL:
        return  # a model of fewer than 11 records is withheld whole (monitor.report.data)
    one = _records(days, *snap_period(days, a, b))
    two = _records(days, *snap_period(days, c, d))
    assert len(one ^ two) == 0 or len(one ^ two) >= SMALL_CELL


@given(_days, _bound, _bound)
def test_a_snapped_period_holds_every_record_the_filter_asked_for(days, first, end):
    assert _records(days, first, end) <= _records(days, *snap_period(days, first, end))


def test_a_filter_of_no_day_with_records_stays_as_asked():
    days = [(DAY0, 30)]
    later = DAY0 + timedelta(5)
    assert snap_period(days, later, None) == (later, None)
