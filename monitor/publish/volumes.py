"""A model's monthly record volumes as the report shows them.

The months of a model are one family: a month of 1 to SMALL_CELL - 1 records is withheld,
and secondary suppression (:func:`~monitor.core.privacy.suppressed_groups`) keeps its
total minus the months shown from giving one month; the rest are rounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from monitor.core.privacy import rounded_count, suppressed_groups


@dataclass(frozen=True)
class VolumePoint:
    """Records of one model in one calendar month, rounded (None: withheld, as a month of
    1 to SMALL_CELL - 1 records or by secondary suppression)."""

    month: str
    records: int | None


def monthly_volume(days: Iterable[tuple[date, int]]) -> list[VolumePoint]:
    """Records per calendar month as published: rounded, a month of 1 to SMALL_CELL - 1
    records withheld, and secondary suppression over the months (the months of a model
    are one family: its total minus the months shown must not give one month).

    >>> [(v.month, v.records) for v in monthly_volume(
    ...     [(date(2026, 1, 3), 846), (date(2026, 2, 1), 701), (date(2026, 3, 9), 4)])]
    [('2026-01', 845), ('2026-02', None), ('2026-03', None)]
    """
    months: dict[str, int] = {}
    for d, n in days:
        key = f"{d:%Y-%m}"
        months[key] = months.get(key, 0) + int(n)
    hidden = suppressed_groups(months)
    return [VolumePoint(m, None if m in hidden else rounded_count(n)) for m, n in months.items()]
