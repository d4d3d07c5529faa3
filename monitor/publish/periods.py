"""A report's period filter as it may be published: widened to whole release blocks.

Period filters are whole UTC days; a model's days with records form release blocks of at
least :data:`~monitor.core.privacy.SMALL_CELL` records
(:func:`~monitor.core.privacy.period_blocks`), and a filter is widened to the whole blocks
it touches, so two reports of neighbouring periods differ by no record or by at least
SMALL_CELL (docs/decisions.md, "Disclosure control in the report").
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import date

from monitor.core.privacy import period_blocks


def in_period(d: date, start: date | None, end: date | None) -> bool:
    """Whether day ``d`` is in the days [start, end) (None: open).

    >>> day = date(2026, 3, 2)
    >>> in_period(day, day, None), in_period(day, None, day)
    (True, False)
    """
    return (start is None or d >= start) and (end is None or d < end)


def snap_period(
    days: Sequence[tuple[date, int]], first: date | None, end: date | None
) -> tuple[date | None, date | None]:
    """The days [start, end) a model's period figures rest on, for a filter of the days
    [first, end) (None: open): the whole release blocks (:func:`period_blocks` over the
    model's days with records) holding a record of those days; (first, end) as asked
    when they hold none. A start or end that is the edge of the data stays open (None).

    >>> d = [(date(2026, 3, k), n) for k, n in ((1, 30), (2, 4), (3, 20), (4, 20), (5, 3))]
    >>> snap_period(d, date(2026, 3, 2), None) == snap_period(d, date(2026, 3, 3), None)
    True
    >>> snap_period(d, date(2026, 3, 3), None)
    (datetime.date(2026, 3, 2), None)
    >>> snap_period(d, None, date(2026, 3, 5))  # the last block holds 23 records
    (None, None)
    """
    starts = period_blocks([n for _, n in days])
    inside = [i for i, (d, _) in enumerate(days) if in_period(d, first, end)]
    if not inside:
        return first, end
    b0 = bisect.bisect_right(starts, inside[0]) - 1
    b1 = bisect.bisect_right(starts, inside[-1]) - 1
    start = None if b0 == 0 else days[starts[b0]][0]
    stop = None if b1 + 1 >= len(starts) else days[starts[b1 + 1]][0]
    return start, stop
