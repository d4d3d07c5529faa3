"""What Axis 1 says about one (model, metric, attribute) cell, composed of small parts.

A :class:`CellResult` is the cell's identity and window facts with three parts:

* :class:`Estimate` - one estimate of the metric: its value on the window and what the K
  resamples say of it (verdicts, flip rate, spread, interval). Every cell has its *raw*
  estimate (docs/method.md section 3); a pooled attribute's poolable metric has a
  *pooled* one beside it (:mod:`monitor.core.pooling`), and ``verdict_basis`` says which
  of the two carries the cell's verdict ("raw", the method; or "pooled", configured);
* :class:`Evaluability` - whether the cell carries a verdict, and if not why and what it
  would need (docs/decisions.md, "Undefined is not a verdict");
* :class:`~monitor.core.drivers.Drivers` or None - which groups drive a failing or
  flipping cell's disparity, privacy rules applied.

Why composed: the cell used to be ~60 flat fields, a pooled verdict was made by swapping
figures into ``raw_*`` fields, and a stored row was parsed back by field-name prefix. The
parts are built once per cell by the engine (``bench axis1``: slotted, no per-field
copies) and read as parts; the verdict estimate's figures are also read through flat
properties (``cell.vfr``) by the many callers that want the verdict.

The stored form is flat (``window_results.result``, ``/api/cells``, the results topic):
:meth:`CellResult.to_dict` writes exactly the keys and order every earlier version wrote,
and :func:`monitor.store.codec.decode_cell_result` reads them back. A pooled verdict's
flat form keeps the raw estimate's value, verdicts and flip rate only (``raw_*``), and an
estimate beside the verdict keeps no spread: the engine keeps no more than that either,
so a cell read back equals the cell written.

>>> from dataclasses import replace
>>> raw = Estimate(0.62, "fail", 120, 0.24, "fail", 0.9, 0.6, 0.1, 0.4, 0.8, 0)
>>> cell = CellResult("m", "DI", "race", 0.8, "min", 500, 9000, 9000, (), (), raw)
>>> cell.vfr, cell.verdict is cell.raw, cell.verdict_basis, cell.evaluable
(0.24, True, 'raw', True)
>>> pooled = Estimate(0.81, "pass", 350, 0.3, "pass", ci_low=0.7, ci_high=0.9, strength=100.0)
>>> beside = replace(cell, pooled=pooled)
>>> beside.value, beside.pooled.value, beside.to_dict()["pooled_strength"]
(0.62, 0.81, 100.0)
>>> as_verdict = replace(cell, raw=raw.beside_verdict(), pooled=pooled, verdict_basis="pooled")
>>> as_verdict.value, as_verdict.to_dict()["raw_value"], as_verdict.raw.ci_low
(0.81, 0.62, nan)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from monitor.core.drivers import Drivers
from monitor.core.support import support_note

#: The verdict word of a cell that has none (docs/method.md section 2, revised 2026-12-01).
NOT_EVALUABLE = "not_evaluable"

#: The kind of record a metric's denominators count (for "up to 15 more positives").
NEEDED_KIND = {
    "EOPP": "positives",
    "EOD": "positives or negatives",
    "PP": "flagged records (decision 1)",
}

_NAN = math.nan


@dataclass(frozen=True, slots=True)
class Estimate:
    """One estimate of a cell's metric: its value on the whole window and what its K
    resamples say.

    ``point_verdict`` is the verdict of ``value``; ``n_pass`` the passing resamples among
    the defined ones; ``vfr`` the flip rate over them and ``dominant_verdict`` the
    majority (a tie is "fail"); both verdicts are "not_evaluable" and ``vfr`` NaN for a
    cell without a verdict. ``sigma`` = |mean - tau| / sd of the resampled values (inf
    when sd is 0), ``ci_low``/``ci_high`` their 95 % interval, ``n_undefined`` the
    resamples whose value was undefined (left out of VFR). ``strength``: the prior
    strength (records) of a pooled estimate; NaN for the raw one.

    An estimate beside the verdict (the pooled one with a raw verdict, the raw one with a
    pooled verdict) keeps what the stored form keeps of it: value, verdicts, n_pass and
    VFR, and a pooled one its interval and strength; the rest stays at its default.

    >>> Estimate(0.5, "pass", 400, 0.2, "pass").sigma
    nan
    """

    value: float  # on the whole window (NaN: undefined)
    point_verdict: str
    n_pass: int
    vfr: float
    dominant_verdict: str
    sigma: float = _NAN
    mean: float = _NAN
    sd: float = _NAN
    ci_low: float = _NAN
    ci_high: float = _NAN
    n_undefined: int = 0
    strength: float = _NAN

    def beside_verdict(self) -> Estimate:
        """The raw estimate as a cell keeps it when its pooled estimate carries the
        verdict: value, verdicts, n_pass and VFR (what the stored ``raw_*`` fields hold).

        >>> Estimate(0.6, "fail", 100, 0.2, "fail", 1.0, 0.6, 0.1, 0.4, 0.8).beside_verdict()
        Estimate(value=0.6, point_verdict='fail', n_pass=100, vfr=0.2, dominant_verdict='fail', sigma=nan, mean=nan, sd=nan, ci_low=nan, ci_high=nan, n_undefined=0, strength=nan)
        """  # noqa: E501
        return Estimate(self.value, self.point_verdict, self.n_pass, self.vfr,
                        self.dominant_verdict)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Evaluability:
    """Whether a cell carries a verdict, and if not why and what it would need.

    >>> Evaluability(False, "race has fewer than two groups").evaluable
    False
    """

    evaluable: bool
    #: why not, in words ("" when evaluable)
    reason: str = ""
    #: more window records (of the kind the reason names) that would make the value
    #: defined: an upper bound rounded up to 5; None when evaluable or not a matter of counts
    records_needed: int | None = None
    #: the groups those records are needed in
    records_needed_groups: tuple[str, ...] = ()


EVALUABLE = Evaluability(True)


@dataclass(frozen=True, slots=True)
class CellResult:
    """Everything Axis 1 says about one (model, metric, attribute) cell (module docstring)."""

    model_id: str
    metric: str
    attribute: str
    threshold: float
    direction: str
    K: int
    window_n: int
    resample_n: int
    groups_left_out: tuple[str, ...]  # too few records in the resample
    groups_left_out_point: tuple[str, ...]  # too few records in the window
    #: the estimate of the method (docs/method.md section 3)
    raw: Estimate
    #: False when the cell carries no verdict, VFR or tier: the value is undefined on the
    #: window, or in more than MAX_UNDEFINED_SHARE of the resamples (monitor.core.axis1)
    evaluability: Evaluability = EVALUABLE
    #: the smallest denominator among the rates that entered the value (positives for
    #: TPR, negatives for FPR, flagged for PPV, records otherwise); NaN when undefined
    min_denominator: float = _NAN
    #: groups whose rates entered the value (every denominator of the metric at least
    #: min_group_support in the window), of ``groups_total`` configured: "4 of 12 groups
    #: evaluated" (an intersection's cell says how thin it is)
    groups_evaluated: int = 0
    groups_total: int = 0
    #: what drives the disparity (monitor.core.drivers), for a defined cell that fails or
    #: flips; privacy rules applied. None: not set
    drivers: Drivers | None = None
    #: the pooled estimate (monitor.core.pooling), for pooled attributes and metrics only
    pooled: Estimate | None = None
    #: which estimate carries the verdict: "raw" (the method) or "pooled" (configured)
    verdict_basis: str = "raw"

    @property
    def verdict(self) -> Estimate:
        """The estimate the cell's verdict, VFR and tier rest on (``verdict_basis``)."""
        if self.verdict_basis == "pooled" and self.pooled is not None:
            return self.pooled
        return self.raw

    # The verdict estimate's figures under their flat names (read by many callers).
    @property
    def value(self) -> float:
        return self.verdict.value

    @property
    def point_verdict(self) -> str:
        return self.verdict.point_verdict

    @property
    def n_pass(self) -> int:
        return self.verdict.n_pass

    @property
    def vfr(self) -> float:
        return self.verdict.vfr

    @property
    def dominant_verdict(self) -> str:
        return self.verdict.dominant_verdict

    @property
    def sigma(self) -> float:
        return self.verdict.sigma

    @property
    def mean(self) -> float:
        return self.verdict.mean

    @property
    def sd(self) -> float:
        return self.verdict.sd

    @property
    def ci_low(self) -> float:
        return self.verdict.ci_low

    @property
    def ci_high(self) -> float:
        return self.verdict.ci_high

    @property
    def n_undefined(self) -> int:
        return self.verdict.n_undefined

    @property
    def evaluable(self) -> bool:
        return self.evaluability.evaluable

    @property
    def not_evaluable_reason(self) -> str:
        return self.evaluability.reason

    @property
    def low_group(self) -> str | None:
        """The lowest group of the drivers (None: no drivers, or withheld)."""
        return None if self.drivers is None else self.drivers.low_group

    @property
    def driver_rate(self) -> str | None:
        """The per-group rate the drivers compare (None: no drivers)."""
        return None if self.drivers is None else self.drivers.rate

    @property
    def support_note(self) -> str:
        """The support in words ("4 of 12 groups evaluated"; two groups; dozens)."""
        return support_note(self.groups_evaluated, self.groups_total, self.min_denominator)

    def stable(self, tau_vfr: float) -> bool:
        """VFR <= tau; a cell that is not evaluable is not stable (it has no verdict)."""
        return self.evaluable and self.vfr <= tau_vfr

    def needs(self) -> str:
        """What the cell would need to be evaluable, in words ("" when not a count).

        >>> ev = Evaluability(False, "...", 15, ("Black",))
        >>> nan = math.nan
        >>> est = Estimate(nan, NOT_EVALUABLE, 0, nan, NOT_EVALUABLE)
        >>> CellResult("m", "EOPP", "race", 0.1, "abs<=", 500, 1683, 1683, (), (), est,
        ...            ev).needs()
        'up to 15 more positives in Black'
        """
        e = self.evaluability
        return needs_words(self.metric, e.records_needed, e.records_needed_groups)

    def with_low_subgroups(self, subgroups: tuple[tuple[str, float], ...]) -> CellResult:
        """The cell with the shown combined groups within its lowest group (its drivers'
        ``subgroups``); the cell itself when it has no drivers."""
        if self.drivers is None:
            return self
        return replace(self, drivers=replace(self.drivers, subgroups=subgroups))

    def to_dict(self) -> dict[str, Any]:
        """The flat stored form, in the keys and order every version wrote (JSON-able
        after :func:`monitor.core.jsonable.to_jsonable`: NaN is a float here)."""
        v, raw, pooled, d, e = self.verdict, self.raw, self.pooled, self.drivers, self.evaluability
        as_verdict = self.verdict_basis == "pooled" and pooled is not None
        out: dict[str, Any] = {
            "model_id": self.model_id,
            "metric": self.metric,
            "attribute": self.attribute,
            "threshold": self.threshold,
            "direction": self.direction,
            "value": v.value,
            "point_verdict": v.point_verdict,
            "n_pass": v.n_pass,
            "K": self.K,
            "vfr": v.vfr,
            "dominant_verdict": v.dominant_verdict,
            "sigma": v.sigma,
            "mean": v.mean,
            "sd": v.sd,
            "ci_low": v.ci_low,
            "ci_high": v.ci_high,
            "n_undefined": v.n_undefined,
            "window_n": self.window_n,
            "resample_n": self.resample_n,
            "groups_left_out": list(self.groups_left_out),
            "groups_left_out_point": list(self.groups_left_out_point),
            "min_denominator": self.min_denominator,
            "evaluable": e.evaluable,
            "not_evaluable_reason": e.reason,
            "records_needed": e.records_needed,
            "records_needed_groups": list(e.records_needed_groups),
        }
        if d is None:
            out.update(_NO_DRIVERS)
            out["extreme_shares"], out["low_subgroups"] = [], []
        else:
            out.update(
                driver_rate=d.rate, low_group=d.low_group, high_group=d.high_group,
                low_rate=d.low_rate, high_rate=d.high_rate, low_share=d.low_share,
                high_share=d.high_share, low_withheld=d.low_withheld,
                high_withheld=d.high_withheld, extreme_shares=[list(x) for x in d.shares],
                low_subgroups=[list(x) for x in d.subgroups],
            )  # fmt: skip
        if pooled is None:
            out.update(_NO_POOLED)
        else:
            out.update(
                pooled_value=pooled.value, pooled_point_verdict=pooled.point_verdict,
                pooled_n_pass=pooled.n_pass, pooled_vfr=pooled.vfr,
                pooled_dominant_verdict=pooled.dominant_verdict, pooled_ci_low=pooled.ci_low,
                pooled_ci_high=pooled.ci_high, pooled_strength=pooled.strength,
            )  # fmt: skip
        out["verdict_basis"] = self.verdict_basis
        if as_verdict:
            out.update(
                raw_value=raw.value, raw_point_verdict=raw.point_verdict, raw_n_pass=raw.n_pass,
                raw_vfr=raw.vfr, raw_dominant_verdict=raw.dominant_verdict,
            )  # fmt: skip
        else:
            out.update(_NO_RAW)
        out["groups_evaluated"] = self.groups_evaluated
        out["groups_total"] = self.groups_total
        return out


#: The flat fields of a cell without drivers (and its two empty lists, made fresh per
#: row), without a pooled estimate, with a raw verdict: what every version wrote.
_NO_DRIVERS: dict[str, Any] = {
    "driver_rate": None, "low_group": None, "high_group": None, "low_rate": _NAN,
    "high_rate": _NAN, "low_share": _NAN, "high_share": _NAN, "low_withheld": False,
    "high_withheld": False,
}  # fmt: skip
_NO_POOLED: dict[str, Any] = {
    "pooled_value": _NAN, "pooled_point_verdict": None, "pooled_n_pass": None,
    "pooled_vfr": _NAN, "pooled_dominant_verdict": None, "pooled_ci_low": _NAN,
    "pooled_ci_high": _NAN, "pooled_strength": _NAN,
}  # fmt: skip
_NO_RAW: dict[str, Any] = {
    "raw_value": _NAN, "raw_point_verdict": None, "raw_n_pass": None, "raw_vfr": _NAN,
    "raw_dominant_verdict": None,
}  # fmt: skip


def needs_words(metric: str, needed: int | None, groups: Sequence[str]) -> str:
    """ "up to 15 more positives in Black": what a not-evaluable cell needs ("" if not a count)."""
    if needed is None:
        return ""
    kind = NEEDED_KIND.get(metric, "records")
    return f"up to {needed} more {kind} in {' and '.join(groups)}"


def verdict_word(flag: bool, evaluable: bool = True) -> str:
    """'pass' / 'fail', or 'not_evaluable' for a cell that carries no verdict."""
    if not evaluable:
        return NOT_EVALUABLE
    return "pass" if flag else "fail"
