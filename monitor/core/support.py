"""How thin a cell's support is, in words (honest about sparse groups: docs/decisions.md,
"Intersectional cells").

An intersection of race and sex has ten groups, of which a window may hold enough
records for four: the cell's verdict is then about those four. Every cell says how
many of its groups were evaluated (the support rule of docs/method.md section 2:
each rate denominator at least ``min_group_support``), and a cell resting on two
groups, or on a smallest group of only dozens of records, says so.
"""

from __future__ import annotations

import math

#: A smallest evaluated group with fewer rate-denominator records than this is "dozens".
DOZENS_BELOW = 100


def support_note(groups_evaluated: int, groups_total: int, min_denominator: float) -> str:
    """One phrase for a cell's support; empty when the counts are unknown.

    >>> support_note(4, 12, 350.0)
    '4 of 12 groups evaluated'
    >>> support_note(2, 10, 40.0)
    '2 of 10 groups evaluated: rests on two groups, the smaller of only dozens of records'
    >>> support_note(2, 2, 3500.0)
    '2 of 2 groups evaluated'
    >>> support_note(5, 10, 60.0)
    '5 of 10 groups evaluated: the smallest has only dozens of records'
    """
    if groups_total <= 0:
        return ""
    head = f"{groups_evaluated} of {groups_total} groups evaluated"
    dozens = math.isfinite(min_denominator) and min_denominator < DOZENS_BELOW
    if groups_evaluated < 2:
        return head + ": fewer than two groups reach the support rule"
    if groups_evaluated == 2 and groups_total > 2:  # a two-group attribute always does
        tail = ", the smaller of only dozens of records" if dozens else ""
        return f"{head}: rests on two groups{tail}"
    if dozens:
        return head + ": the smallest has only dozens of records"
    return head
