"""The governance report's cell points as the report may show them.

The report (:mod:`monitor.report`) draws each cell at each released evaluation from a
:class:`CellPoint`; what such a point carries is decided here, so the report only formats
it. A point whose window held fewer than :data:`~monitor.core.privacy.SMALL_CELL` records
keeps its identity only (which cell, evaluation, rule): no value, flip rate, interval,
verdict, N*, kappa, sentence, nor the tier resting on them (:data:`WITHHELD_TIER`), and
``suppressed`` set so no later step draws a figure by mistake. Two more rules withhold
figures of points computed on enough records:

* the guard (:func:`guarded_point`): with ``[axis1] min_group_support`` below
  SMALL_CELL a metric may rest on a group of fewer than 11 records, so every point's
  figures are withheld;
* a scheduled axis whose model's cohort held fewer than 11 records
  (:func:`without_small_axes`): its figure (N* for Axis 2, kappa for Axis 3), and the tier
  resting on it, are withheld.

The cell rows of the API and the audit files are :mod:`monitor.publish.cells`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from monitor.core.cell_result import needs_words
from monitor.core.drivers import driver_clause, driver_sentence
from monitor.core.numbers import float_or_none
from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL
from monitor.core.results import CellEvaluation
from monitor.publish.cells import PublishedAuditCell
from monitor.publish.shown import Shown

#: The tier a cell withheld by the small-cell rule shows: the tier rests on the window's
#: figures (flip rate, audit size, hospital agreement), so it is withheld with them.
WITHHELD_TIER = SMALL_CELL_LABEL


@dataclass(frozen=True)
class CellPoint:
    """One cell (model, metric, attribute) at one evaluation: the Axis 1 result and its tier."""

    model_id: str
    metric: str
    attribute: str
    evaluation: int
    at: datetime | None  # event time of the window's last record (else evaluation time)
    window_n: int
    threshold: float
    direction: str
    value: float | None
    vfr: float | None
    ci_low: float | None
    ci_high: float | None
    dominant_verdict: str | None
    point_verdict: str | None
    tier: str
    confirmed_tier: str | None = None
    confirmed_verdict: str | None = None
    n_star: float | None = None  # math.inf when not reached; None when not computed
    kappa: float | None = None
    failed_axes: tuple[str, ...] = ()
    pending_axes: tuple[str, ...] = ()
    partial: bool = False
    n_pass: int | None = None
    K: int | None = None
    suppressed: bool = False  # window_n < SMALL_CELL: no figure (nor tier) may be shown
    #: not evaluable (no verdict, VFR, kappa or tier): why, and what it needs in words
    not_evaluable_reason: str = ""
    needs: str = ""

    #: what drives the disparity of a failing or flipping cell, one sentence
    #: (monitor.core.drivers.driver_sentence; privacy rules applied there); None: none
    driver: str | None = None
    #: the groups at the extremes, named, as a clause ("Female patients are selected at
    #: 0.27 against 0.44 for Male patients"); what "what changed" quotes. None: none
    driver_clause: str | None = None
    #: the pooled estimate beside the raw one (monitor.core.pooling), when configured
    pooled_value: float | None = None
    pooled_vfr: float | None = None
    pooled_dominant_verdict: str | None = None

    #: "4 of 12 groups evaluated" and whether it rests on two groups or dozens
    support_note: str = ""
    #: N* not reached: the time this volume needs, e.g. "about 14 weeks at this volume"
    time_to_reliable: str = ""

    #: "outcomes incomplete" while the attribute's outcome coverage gap is above
    #: [outcomes] max_coverage_gap (label-based cells; monitor.core.coverage), else ""
    coverage_reason: str = ""
    #: the certified verdict (docs/method.md section 11): 'pass', 'fail' or
    #: 'undetermined'; None: not certifiable, not tracked (an audit), or withheld
    certified: str | None = None
    coverage_gap: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.metric, self.attribute)


# --------------------------------------------------------------------------- parsing helpers


def _int(x: Any) -> int | None:
    """A count, or None when it is withheld ("<11") or missing."""
    if x is None or isinstance(x, str):
        return None
    return int(x)


def _certified(d: Any) -> str | None:
    """A stored cell's certified verdict (None: not certified, or a row written before)."""
    return str(d["verdict"]) if isinstance(d, dict) and d.get("verdict") else None


def _needs(r: Mapping[str, Any]) -> str:
    """What a stored not-evaluable cell needs, in words ("" when nothing is stored)."""
    groups = r.get("records_needed_groups") or ()
    return needs_words(str(r["metric"]), _int(r.get("records_needed")), groups)


def _coverage_gap(d: Any) -> float | None:
    return float_or_none(d.get("gap")) if isinstance(d, Mapping) else None


def _figures(small: bool, clean: Callable[[Any], float | None]) -> Callable[[Any], float | None]:
    """How a figure of a point is shown: None when the point is withheld (``small``),
    else ``clean`` of it (a stored value to a float, NaN to None)."""
    return lambda x: None if small else clean(x)


# --------------------------------------------------------------------------- points


def published_point(
    r: Mapping[str, Any],
    at: datetime | None = None,
    labels: Mapping[str, Mapping[str, str]] | None = None,
) -> CellPoint:
    """A stored window result (``CellEvaluation.to_dict``, or the fields of it the history
    query picks) as the report may show it: a window of fewer than SMALL_CELL records keeps
    its identity only. ``labels`` (attribute -> code -> name) names the groups of its
    sentences.

    >>> row = {"model_id": "m", "metric": "DI", "attribute": "sex", "evaluation": 3,
    ...        "window_n": 10, "threshold": 0.8, "direction": "min", "value": 0.9,
    ...        "vfr": 0.1, "tier": "Reliable"}
    >>> p = published_point(row)
    >>> p.suppressed, p.value, p.vfr, p.tier, p.metric, p.evaluation
    (True, None, None, '<11', 'DI', 3)
    >>> p = published_point({**row, "window_n": 11})
    >>> p.suppressed, p.value, p.tier
    (False, 0.9, 'Reliable')
    """
    window_n = int(r.get("window_n") or 0)
    names = (labels or {}).get(str(r["attribute"]))
    small = window_n < SMALL_CELL
    shown = _figures(small, float_or_none)
    return CellPoint(
        model_id=str(r["model_id"]),
        metric=str(r["metric"]),
        attribute=str(r["attribute"]),
        evaluation=int(r.get("evaluation") or 0),
        at=at,
        window_n=window_n,
        threshold=float(r["threshold"]),
        direction=str(r["direction"]),
        value=shown(r.get("value")),
        vfr=shown(r.get("vfr")),
        ci_low=shown(r.get("ci_low")),
        ci_high=shown(r.get("ci_high")),
        dominant_verdict=None if small else r.get("dominant_verdict"),
        point_verdict=None if small else r.get("point_verdict"),
        tier=WITHHELD_TIER if small else str(r.get("tier") or "Pending"),
        confirmed_tier=None if small else r.get("confirmed_tier"),
        confirmed_verdict=None if small else r.get("confirmed_verdict"),
        n_star=shown(r.get("n_star")),
        kappa=shown(r.get("kappa")),
        failed_axes=() if small else tuple(r.get("failed_axes") or ()),
        pending_axes=() if small else tuple(r.get("pending_axes") or ()),
        partial=False if small else bool(r.get("partial")),
        n_pass=None if small else _int(r.get("n_pass")),
        K=_int(r.get("K")),
        suppressed=small,
        not_evaluable_reason="" if small else str(r.get("not_evaluable_reason") or ""),
        needs="" if small else _needs(r),
        driver=None if small else driver_sentence(r, names),
        driver_clause=None if small else driver_clause(r, names),
        pooled_value=shown(r.get("pooled_value")),
        pooled_vfr=shown(r.get("pooled_vfr")),
        pooled_dominant_verdict=None if small else r.get("pooled_dominant_verdict"),
        support_note="" if small else str(r.get("support_note") or ""),
        coverage_reason="" if small else str(r.get("coverage_reason") or ""),
        coverage_gap=None if small else _coverage_gap(r.get("outcome_coverage")),
        certified=None if small else _certified(r.get("certified")),
    )


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else x


def published_audit_point(c: CellEvaluation) -> CellPoint:
    """An offline audit's cell (made by the audit, or a ``cells.json`` row read back with
    ``audit_cell_from_row``) as the report may show it; a withheld cell (a cohort of fewer
    than SMALL_CELL records) keeps its identity only. Its kappa is the one the audit shows
    as the cell's own (``own_kappa``)."""
    small = c.withheld
    shown = _figures(small, _finite)
    r = c.result
    return CellPoint(
        model_id=r.model_id,
        metric=r.metric,
        attribute=r.attribute,
        evaluation=0,
        at=None,
        window_n=r.window_n,
        threshold=r.threshold,
        direction=r.direction,
        value=shown(r.value),
        vfr=shown(r.vfr),
        ci_low=shown(r.ci_low),
        ci_high=shown(r.ci_high),
        dominant_verdict=None if small else r.dominant_verdict,
        point_verdict=None if small else r.point_verdict,
        tier=WITHHELD_TIER if small else c.tier.tier.value,
        n_star=shown(c.n_star),
        kappa=shown(c.own_kappa),
        failed_axes=() if small else c.tier.failed_axes,
        pending_axes=() if small else c.tier.pending_axes,
        partial=False if small else c.tier.partial,
        n_pass=None if small else r.n_pass,
        K=r.K,
        suppressed=small,
        not_evaluable_reason="" if small else r.not_evaluable_reason,
        needs="" if small else r.needs(),
        support_note="" if small else r.support_note,
        time_to_reliable="" if small or c.axis2 is None else c.axis2.time_to_reliable,
    )


def audit_cell_point(c: PublishedAuditCell) -> CellPoint:
    """A published audit cell (:func:`~monitor.publish.cells.audit_cell_value`, or one
    read back from ``cells.json``) as the report may show it: a withheld cell keeps its
    identity only, as ``published_audit_point`` leaves a cell read back withheld (no
    cohort size)."""
    if isinstance(c.figures, Shown):
        return published_audit_point(c.figures.value.read_back())
    i = c.identity
    return CellPoint(
        model_id=i.model_id, metric=i.metric, attribute=i.attribute, evaluation=0, at=None,
        window_n=0, threshold=i.threshold, direction=i.direction, value=None, vfr=None,
        ci_low=None, ci_high=None, dominant_verdict=None, point_verdict=None,
        tier=WITHHELD_TIER, K=i.K, suppressed=True,
    )  # fmt: skip


def guarded_point(p: CellPoint) -> CellPoint:
    """``p`` with its identity only, as a window of fewer than SMALL_CELL records keeps
    it: the guard, when ``[axis1] min_group_support`` is below SMALL_CELL (a metric may
    then rest on a group of fewer than 11 records). Its tier rests on the figures, so it
    goes too, and so do the words derived from them (why it is not evaluable and what it
    needs, its support note, its wait to N*) and its certified verdict: the page shows
    none of them for a suppressed point, and none is left for a later step to show."""
    return replace(
        p,
        not_evaluable_reason="",
        needs="",
        support_note="",
        time_to_reliable="",
        certified=None,
        value=None,
        vfr=None,
        ci_low=None,
        ci_high=None,
        dominant_verdict=None,
        point_verdict=None,
        confirmed_verdict=None,
        n_star=None,
        kappa=None,
        n_pass=None,
        tier=WITHHELD_TIER,
        confirmed_tier=None,
        failed_axes=(),
        pending_axes=(),
        partial=False,
        suppressed=True,
        driver=None,
        driver_clause=None,
        pooled_value=None,
        pooled_vfr=None,
        pooled_dominant_verdict=None,
        coverage_reason="",
        coverage_gap=None,
    )


def without_small_axes(p: CellPoint, small_axis2: bool, small_axis3: bool) -> CellPoint:
    """``p`` without the figure of a scheduled axis whose model's cohort held fewer than
    SMALL_CELL records (``small_axis2``: N*; ``small_axis3``: kappa), nor the tier resting
    on it; ``p`` itself when neither is small. A point already withheld stays as it is."""
    if not (small_axis2 or small_axis3) or p.suppressed:
        return p
    return replace(
        p,
        n_star=None if small_axis2 else p.n_star,
        kappa=None if small_axis3 else p.kappa,
        tier=WITHHELD_TIER,
        confirmed_tier=None,
        failed_axes=(),
        pending_axes=(),
        partial=False,
    )


def reported_point(p: CellPoint, *, guard: bool, small_axis2: bool, small_axis3: bool) -> CellPoint:
    """A point of a model's page as the report shows it: under the guard (``guard``:
    :func:`guarded_point`), then without the figures of a scheduled axis whose cohort was
    small (:func:`without_small_axes`)."""
    return without_small_axes(guarded_point(p) if guard else p, small_axis2, small_axis3)
