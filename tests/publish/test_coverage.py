"""monitor.publish.coverage: a cell's outcome coverage under the small-cell rule."""

from __future__ import annotations

from monitor.core.coverage import (
    DELAY_EDGES_DAYS,
    OUTCOMES_INCOMPLETE,
    AttributeCoverage,
    GroupCoverage,
    delay_bin,
)
from monitor.core.privacy import SMALL_CELL
from monitor.publish.coverage import attribute_coverage, published_coverage


def test_small_groups_are_withheld_and_rates_rounded():
    edges0 = (0,) * len(DELAY_EDGES_DAYS)
    few_predictions = published_coverage(GroupCoverage("0", SMALL_CELL - 1, 5, edges0))
    assert few_predictions.coverage is None
    hist = list(edges0)
    hist[delay_bin(2.5)] = SMALL_CELL - 1
    few_outcomes = published_coverage(GroupCoverage("0", 300, SMALL_CELL - 1, tuple(hist)))
    assert few_outcomes.coverage == 0.03 and few_outcomes.median_delay_days is None
    hist[delay_bin(2.5)] = SMALL_CELL
    enough = published_coverage(GroupCoverage("0", 300, SMALL_CELL, tuple(hist)))
    assert enough.coverage == round(SMALL_CELL / 300, 2)
    assert enough.median_delay_days == 2.5


def test_attribute_coverage_travels_as_json():
    ac = attribute_coverage(
        "EOD", [GroupCoverage("0", 500, 450), GroupCoverage("1", 8, 8)], 20, 0.10
    )
    assert ac.gap is None and ac.reason == ""  # the small group is neither shown nor compared
    assert [g.coverage for g in ac.groups] == [0.9, None]
    assert AttributeCoverage.from_dict(ac.to_dict()) == ac


def test_the_reason_reads_the_published_gap():
    """0.104 is published 0.10, which is not above a threshold of 0.10: no reason."""
    groups = [GroupCoverage("0", 1000, 1000), GroupCoverage("1", 1000, 896)]
    ac = attribute_coverage("EOPP", groups, 20, 0.10)
    assert ac.gap == 0.10 and ac.reason == ""
    groups = [GroupCoverage("0", 1000, 1000), GroupCoverage("1", 1000, 894)]
    ac = attribute_coverage("EOPP", groups, 20, 0.10)
    assert ac.gap == 0.11 and ac.reason == OUTCOMES_INCOMPLETE
