"""A cell's support in words (monitor.core.support): every branch, and the boundary of
"dozens". The phrase is checked where it is served by tests/stream/test_intersections.py,
tests/service/test_api_intersections.py and tests/audit/test_run.py."""

from __future__ import annotations

import math

import pytest

from monitor.core.support import DOZENS_BELOW, support_note


@pytest.mark.parametrize(
    ("evaluated", "total", "smallest", "note"),
    [
        (4, 12, 350.0, "4 of 12 groups evaluated"),
        (0, 0, 10.0, ""),  # counts unknown: nothing said
        (3, -1, 10.0, ""),
        (0, 10, math.inf, "0 of 10 groups evaluated: fewer than two groups reach the support rule"),
        (1, 10, 40.0, "1 of 10 groups evaluated: fewer than two groups reach the support rule"),
        (2, 10, 500.0, "2 of 10 groups evaluated: rests on two groups"),
        (2, 10, 40.0,
         "2 of 10 groups evaluated: rests on two groups, the smaller of only dozens of records"),
        # a two-group attribute always rests on two groups: only the dozens are said
        (2, 2, 3500.0, "2 of 2 groups evaluated"),
        (2, 2, 40.0, "2 of 2 groups evaluated: the smallest has only dozens of records"),
        (5, 10, 60.0, "5 of 10 groups evaluated: the smallest has only dozens of records"),
        (5, 10, math.inf, "5 of 10 groups evaluated"),  # no smallest denominator known
        (5, 10, math.nan, "5 of 10 groups evaluated"),
    ],
)  # fmt: skip
def test_the_phrase(evaluated, total, smallest, note):
    assert support_note(evaluated, total, smallest) == note


def test_dozens_ends_at_a_hundred_records():
    assert support_note(3, 3, DOZENS_BELOW - 0.5).endswith("only dozens of records")
    assert support_note(3, 3, DOZENS_BELOW) == "3 of 3 groups evaluated"
