"""Outcome coverage: how many of a group's predictions have their outcome yet, and how late.

With predictions scored at admission and outcomes known at discharge (or 30 days later),
every label-based metric (EOPP, EOD, PP, CAL, TI) is computed on the predictions whose
outcome has arrived. When outcomes of one group arrive later or less often than those of
another, that subset is not the group: the metric is computed on a biased sample, however
stable its bootstrap looks. So coverage is a figure of its own, per (model, attribute
group, window), and a gap between the groups of one attribute qualifies every
label-based cell of that attribute.

Definitions (docs/decisions.md, "Outcome coverage"):

* **coverage** of a group = predictions with an outcome / predictions, in [0, 1];
* **median delay** of a group = the median of (time the outcome was known - time of
  scoring) over the predictions with an outcome, read from a small delay histogram
  (linear within the bin that holds the median);
* **coverage gap** of an attribute = the relative shortfall of the least covered group
  to the best covered one, ``1 - min_g c_g / max_g c_g``, over the groups with at least
  ``min_support`` predictions (those a cell can rest on). 0 when coverage is equal, 0.30
  when one group's outcomes are known 30 % less often than the best group's. Undefined
  (None) with fewer than two such groups or no outcome at all (then no label-based cell
  has a value to qualify).

Disclosure (:mod:`monitor.publish.coverage` makes the published figures a cell carries):
a group's coverage rests on its predictions, so it is withheld below
:data:`~monitor.core.privacy.SMALL_CELL` predictions; its median delay rests on its
outcomes, so it is withheld below SMALL_CELL outcomes. Published rates keep
:data:`~monitor.core.privacy.RATE_DECIMALS` decimals; the rule that qualifies a cell reads
the published (rounded) gap, so a reader can check it against the threshold.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.core.privacy import rounded_rate

#: The tier reason of a label-based cell while the coverage of its attribute's groups is
#: not comparable (gap above ``[outcomes] max_coverage_gap``).
OUTCOMES_INCOMPLETE = "outcomes incomplete"

#: Metrics that need the outcome (docs/method.md section 2): computed on the predictions
#: whose outcome has arrived, so qualified by the coverage gap. DI and SPD need decisions
#: only and are evaluated on every prediction of the window.
LABEL_METRICS = frozenset({"EOPP", "EOD", "TI", "PP", "CAL", "CAL_GAP"})

#: Upper edges (days) of the default delay histogram: hours for same-day outcomes, days for
#: a length of stay, weeks for a 30-day readmission; the last bin is open.
DELAY_EDGES_DAYS: tuple[float, ...] = (
    0.25, 0.5, 1, 2, 3, 4, 5, 7, 10, 14, 21, 30, 45, 60, 90, 180, 365, math.inf,
)  # fmt: skip

#: Decimals of a published median delay in days (0.1 day = 2.4 hours; the bins are coarser).
DELAY_DECIMALS = 1


def needs_outcome(metric: str) -> bool:
    """Whether ``metric`` is computed on the predictions with an outcome.

    >>> needs_outcome("EOPP"), needs_outcome("DI")
    (True, False)
    """
    return metric in LABEL_METRICS


def coverage(predictions: int, with_outcome: int) -> float | None:
    """Share of ``predictions`` whose outcome has arrived (None: no prediction).

    >>> coverage(200, 150), coverage(0, 0)
    (0.75, None)
    """
    if predictions < 0 or with_outcome < 0 or with_outcome > predictions:
        raise ValueError("need 0 <= with_outcome <= predictions")
    return None if predictions == 0 else with_outcome / predictions


def delay_bin(delay_days: float, edges: Sequence[float] = DELAY_EDGES_DAYS) -> int:
    """The histogram bin of one outcome delay: the first upper edge it does not exceed
    (a negative delay, an outcome stamped before its scoring, counts as 0).

    >>> delay_bin(0.0), delay_bin(2.0), delay_bin(2.5), delay_bin(1e9)
    (0, 3, 4, 17)
    """
    d = max(0.0, float(delay_days))
    for i, upper in enumerate(edges):
        if d <= upper:
            return i
    return len(edges) - 1


def median_delay(counts: Sequence[int], edges: Sequence[float] = DELAY_EDGES_DAYS) -> float | None:
    """The median delay (days) of a delay histogram: ``counts[i]`` outcomes with delay in
    (edges[i-1], edges[i]] (the first bin starts at 0). Linear within the bin holding the
    median, the usual grouped-data median; the open last bin reports its lower edge (a
    median there is "at least that"). None without outcomes.

    >>> median_delay([0, 0, 0, 10, 0], (0.5, 1, 2, 3, math.inf))  # all in (2, 3] days
    2.5
    >>> median_delay([0, 0, 0, 0, 4], (0.5, 1, 2, 3, math.inf))  # open last bin: ">= 3"
    3.0
    >>> median_delay([0] * len(DELAY_EDGES_DAYS)) is None
    True
    """
    if len(counts) != len(edges):
        raise ValueError("one count per histogram bin")
    total = sum(int(c) for c in counts)
    if total <= 0:
        return None
    half = total / 2
    below = 0
    for i, c in enumerate(counts):
        c = int(c)
        if c > 0 and below + c >= half:
            lower = 0.0 if i == 0 else float(edges[i - 1])
            upper = float(edges[i])
            if math.isinf(upper):
                return lower
            return lower + (upper - lower) * (half - below) / c
        below += c
    return float(edges[-2]) if len(edges) > 1 else 0.0  # unreachable: the counts sum to total


@dataclass(frozen=True)
class GroupCoverage:
    """One group's predictions, predictions with an outcome and their delay histogram in a
    window (exact counts: what the service computes, before release)."""

    group: str
    predictions: int
    with_outcome: int
    delay_counts: tuple[int, ...] = ()
    #: upper edges (days) of the delay histogram's bins (default: DELAY_EDGES_DAYS)
    delay_edges: tuple[float, ...] = DELAY_EDGES_DAYS

    @property
    def coverage(self) -> float | None:
        return coverage(self.predictions, self.with_outcome)

    @property
    def median_delay_days(self) -> float | None:
        if not self.delay_counts:
            return None
        return median_delay(self.delay_counts, self.delay_edges)


def daily_edges(bins: int) -> tuple[float, ...]:
    """Upper edges of a histogram of whole days (bin d: d days; the last bin open), as the
    stream's windows keep it (monitor.stream.window.GroupCoverage.delay_days).

    >>> daily_edges(4)
    (1.0, 2.0, 3.0, inf)
    """
    if bins < 1:
        raise ValueError("at least one bin")
    return (*(float(d) for d in range(1, bins)), math.inf)


def coverage_gap(
    groups: Sequence[GroupCoverage] | Mapping[str, tuple[int, int]], min_support: int
) -> float | None:
    """Relative shortfall ``1 - min c_g / max c_g`` of an attribute's groups with at least
    ``min_support`` predictions (exact). None with fewer than two such groups or when none
    has an outcome. ``groups``: GroupCoverage rows or {group: (predictions, with_outcome)}.

    >>> coverage_gap({"a": (100, 90), "b": (100, 63), "c": (5, 0)}, 20)
    0.3
    >>> coverage_gap({"a": (100, 90), "b": (10, 0)}, 20) is None
    True
    """
    pairs = (
        [(g.predictions, g.with_outcome) for g in groups]
        if not isinstance(groups, Mapping)
        else list(groups.values())
    )
    rates = [w / n for n, w in pairs if n >= max(1, min_support)]
    if len(rates) < 2 or max(rates) <= 0:
        return None
    return round(1.0 - min(rates) / max(rates), 12)


@dataclass(frozen=True)
class PublishedCoverage:
    """A group's coverage as it leaves the service: rounded, or None where withheld."""

    group: str
    coverage: float | None
    median_delay_days: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "coverage": self.coverage,
            "median_delay_days": self.median_delay_days,
        }


def coverage_reason(metric: str, gap: float | None, max_gap: float) -> str:
    """The tier reason the coverage of a cell's attribute gives it: OUTCOMES_INCOMPLETE for a
    label-based cell whose attribute's published gap exceeds ``max_gap``, else "".

    The tier itself is kept (its axes say how stable the verdict is on the outcomes that
    arrived); the reason says the outcomes it rests on are not comparable across groups,
    so the verdict may change as the missing ones come in. A reason, not a tier: a stable
    verdict on a biased subset is still stable, and the board needs both facts.

    >>> coverage_reason("EOPP", 0.30, 0.10), coverage_reason("DI", 0.30, 0.10)
    ('outcomes incomplete', '')
    >>> coverage_reason("EOPP", 0.10, 0.10), coverage_reason("EOPP", None, 0.10)
    ('', '')
    """
    shown = rounded_rate(gap)  # the gap as it is shown (2 decimals)
    if not needs_outcome(metric) or shown is None:
        return ""
    return OUTCOMES_INCOMPLETE if shown > max_gap else ""


@dataclass(frozen=True)
class AttributeCoverage:
    """What a label-based cell of one attribute carries about its outcomes: the published
    coverage and median delay of each group, the published gap, the threshold it was read
    against and the tier reason it gives (OUTCOMES_INCOMPLETE or "")."""

    groups: tuple[PublishedCoverage, ...]
    gap: float | None
    max_gap: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "gap": self.gap,
            "max_gap": self.max_gap,
            "reason": self.reason,
            "groups": {g.group: g.to_dict() for g in self.groups},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AttributeCoverage:
        groups = tuple(
            PublishedCoverage(str(code), g.get("coverage"), g.get("median_delay_days"))
            for code, g in (d.get("groups") or {}).items()
        )
        return cls(groups, d.get("gap"), float(d.get("max_gap", 0.0)), str(d.get("reason", "")))
