"""Outcome coverage beside every label-based cell (predictions now, outcomes later): the window's
per-group figures (monitor.stream.window.WindowCoverage) turned into what a cell carries
(monitor.core.coverage.AttributeCoverage: published coverage and median delay per group,
the gap, the "outcomes incomplete" reason).

Only a model whose window holds predictions that came without their outcome gets it: a
stream of joined records has every outcome at scoring, and a coverage of 1.0 beside every
cell would say nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from monitor.config import MonitorConfig
from monitor.core.coverage import GroupCoverage, daily_edges, needs_outcome
from monitor.core.results import CellEvaluation
from monitor.publish.coverage import attribute_coverage
from monitor.stream.window import WindowCoverage


def tracks_outcomes(cov: WindowCoverage | None) -> bool:
    """Whether the window holds predictions whose outcome came later (or not yet)."""
    if cov is None or cov.predictions == 0:
        return False
    if cov.with_outcome < cov.predictions:
        return True
    first = next(iter(cov.groups.values()), {})
    return any(sum(g.delay_days[1:]) > 0 for g in first.values())


def group_coverages(cov: WindowCoverage) -> dict[str, list[GroupCoverage]]:
    """attribute -> each group's exact figures, in code order."""
    out = {}
    for attr, groups in cov.groups.items():
        out[attr] = [
            GroupCoverage(code, g.predictions, g.with_outcome, g.delay_days,
                          daily_edges(len(g.delay_days)))
            for code, g in groups.items()
        ]  # fmt: skip
    return out


def with_coverage(
    cells: Sequence[CellEvaluation], cov: WindowCoverage | None, config: MonitorConfig
) -> list[CellEvaluation]:
    """The cells, each label-based one carrying its attribute's outcome coverage."""
    if not tracks_outcomes(cov):
        return list(cells)
    assert cov is not None
    groups = group_coverages(cov)
    support = config.axis1.min_group_support
    max_gap = config.outcomes.max_coverage_gap
    out = []
    for c in cells:
        r = c.result
        if needs_outcome(r.metric) and r.attribute in groups:
            ac = attribute_coverage(r.metric, groups[r.attribute], support, max_gap)
            c = replace(c, outcome_coverage=ac)
        out.append(c)
    return out
