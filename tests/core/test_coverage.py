"""Outcome coverage (issue 23): coverage, median delay, the gap and the tier reason."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.config import ConfigError, MonitorConfig, config_from_mapping
from monitor.core.coverage import (
    DELAY_EDGES_DAYS,
    OUTCOMES_INCOMPLETE,
    GroupCoverage,
    coverage_gap,
    coverage_reason,
    delay_bin,
    median_delay,
)


def _histogram(delays: np.ndarray) -> list[int]:
    counts = [0] * len(DELAY_EDGES_DAYS)
    for d in delays:
        counts[delay_bin(float(d))] += 1
    return counts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_median_delay_lies_in_the_bin_of_the_record_level_median(seed):
    """Oracle: the median of the raw delays. The histogram median is in the same bin and,
    for delays spread within their bins, close to it."""
    rng = np.random.default_rng(seed)
    delays = rng.gamma(2.0, 2.0, size=501)  # length-of-stay-like, days
    m = median_delay(_histogram(delays))
    true = float(np.median(delays))
    assert delay_bin(m) == delay_bin(true)
    i = delay_bin(true)
    width = DELAY_EDGES_DAYS[i] - (0.0 if i == 0 else DELAY_EDGES_DAYS[i - 1])
    assert abs(m - true) <= width


def test_median_delay_of_a_bin_edge_and_of_nothing():
    edges = (1.0, 2.0, math.inf)
    assert median_delay([5, 5, 0], edges) == 1.0  # half the outcomes by day 1
    assert median_delay([0, 0, 7], edges) == 2.0  # open bin: at least its lower edge
    assert median_delay([0, 0, 0], edges) is None
    with pytest.raises(ValueError):
        median_delay([1, 2], edges)


def test_gap_is_the_relative_shortfall_of_the_least_covered_group():
    # the example: one race group's outcomes 30 % less often known
    g = [GroupCoverage("3", 1000, 900), GroupCoverage("2", 400, 252), GroupCoverage("1", 300, 270)]
    assert coverage_gap(g, 20) == pytest.approx(0.30)
    # equal coverage: no gap; a group below the support is not compared
    assert coverage_gap({"a": (100, 50), "b": (200, 100), "c": (19, 0)}, 20) == 0.0
    assert coverage_gap({"a": (100, 50), "b": (200, 100), "c": (20, 0)}, 20) == 1.0
    # fewer than two groups, or no outcome at all: undefined
    assert coverage_gap({"a": (100, 50), "b": (19, 0)}, 20) is None
    assert coverage_gap({"a": (100, 0), "b": (100, 0)}, 20) is None


def test_reason_only_for_label_based_cells_above_the_published_gap():
    for metric in ("EOPP", "EOD", "PP", "CAL", "TI"):
        assert coverage_reason(metric, 0.25, 0.10) == OUTCOMES_INCOMPLETE
    for metric in ("DI", "SPD"):
        assert coverage_reason(metric, 0.90, 0.10) == ""
    # the rule reads the published (2-decimal) gap: 0.104 shows as 0.10, which is not above
    assert coverage_reason("EOPP", 0.104, 0.10) == ""
    assert coverage_reason("EOPP", 0.106, 0.10) == OUTCOMES_INCOMPLETE
    assert coverage_reason("EOPP", None, 0.10) == ""


def test_default_threshold_and_bad_values_fail_at_start_up_naming_the_field():
    assert MonitorConfig().outcomes.max_coverage_gap == 0.10
    assert config_from_mapping({"outcomes": {"max_coverage_gap": 0.2}}).outcomes.max_coverage_gap
    for bad in (1.5, -0.1, "ten percent"):
        with pytest.raises(ConfigError) as info:
            config_from_mapping({"outcomes": {"max_coverage_gap": bad}})
        assert info.value.field == "outcomes.max_coverage_gap"
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"outcomes": {"max_coverage_gaps": 0.1}})
    assert "outcomes.max_coverage_gaps" in str(info.value)
