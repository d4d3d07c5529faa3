"""Outcome coverage as a cell carries it out of the service: each group's coverage and
median delay, and the attribute's gap, under the small-cell rule.

A group's coverage rests on its predictions, so it is withheld below
:data:`~monitor.core.privacy.SMALL_CELL` predictions; its median delay rests on its
outcomes, so it is withheld below SMALL_CELL outcomes. Rates keep
:data:`~monitor.core.privacy.RATE_DECIMALS` decimals, the delay 0.1 day; the tier reason
(:func:`~monitor.core.coverage.coverage_reason`) reads the published gap, so a reader can
check it against the threshold. The figures and their types are
:mod:`monitor.core.coverage`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from monitor.core.coverage import (
    DELAY_DECIMALS,
    AttributeCoverage,
    GroupCoverage,
    PublishedCoverage,
    coverage_gap,
    coverage_reason,
)
from monitor.core.privacy import reportable, rounded_rate


def published_coverage(g: GroupCoverage) -> PublishedCoverage:
    """A group's figures under the small-cell rule: coverage from >= 11 predictions, median
    delay from >= 11 outcomes, rates to 2 decimals, the delay to 0.1 day.

    >>> published_coverage(GroupCoverage("2", 40, 7, (7,) + (0,) * 17))
    PublishedCoverage(group='2', coverage=0.17, median_delay_days=None)
    >>> published_coverage(GroupCoverage("2", 8, 8)).coverage is None
    True
    """
    cov = rounded_rate(g.coverage) if reportable(g.predictions) else None
    delay = g.median_delay_days if reportable(g.with_outcome) else None
    return PublishedCoverage(g.group, cov, None if delay is None else round(delay, DELAY_DECIMALS))


def attribute_coverage(
    metric: str, groups: Sequence[GroupCoverage], min_support: int, max_gap: float
) -> AttributeCoverage:
    """The coverage a cell of ``metric`` on an attribute with these ``groups`` carries: the
    published figures of each group, the published gap, and the tier reason it gives.

    >>> ac = attribute_coverage(
    ...     "EOPP", [GroupCoverage("0", 400, 360), GroupCoverage("1", 400, 252)], 20, 0.10)
    >>> ac.gap, ac.reason, [g.coverage for g in ac.groups]
    (0.3, 'outcomes incomplete', [0.9, 0.63])
    """
    gap = rounded_rate(coverage_gap(groups, min_support))
    return AttributeCoverage(
        tuple(published_coverage(g) for g in groups),
        gap,
        float(max_gap),
        coverage_reason(metric, gap, max_gap),
    )
