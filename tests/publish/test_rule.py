"""monitor.publish.rule: the rule as the outputs state and check it."""

from __future__ import annotations

from monitor.config import SMALL_CELL_RECORDS
from monitor.core import privacy
from monitor.publish import rule


def test_the_outputs_state_the_rule_the_primitives_apply():
    """One threshold, one label and one rounding base, whichever module an output reads."""
    assert rule.SMALL_CELL == privacy.SMALL_CELL == SMALL_CELL_RECORDS == 11
    assert rule.SMALL_CELL_LABEL == "<11" and rule.ROUNDING_BASE == 5
    for n in (None, 0, 9, 10, 11, 12, 1000):
        assert rule.reportable(n) == (n is not None and n >= 11)
        # a published (rounded) count of 11+ records reads 10 or more
        assert rule.published(n) == (n is not None and n >= 10)
