"""Reliability tiers (docs/method.md section 6): failed-axis count -> tier, honestly marked.

A tier is only as good as the axes behind it, so two states are explicit:

* ``Pending``: an axis that applies has no result yet (its scheduled job has
  not run). The tier is not guessed from the others.
* ``partial``: an axis cannot exist for this data, e.g. Axis 3 without hospital
  ids. The tier counts the failed axes among those that do exist and says so;
  it never fakes the missing axis.
* ``Not-Evaluable``: the cell's value is undefined (fewer than two groups reach
  the rate denominator, docs/method.md section 2): it carries no tier of its own,
  only the reason (``TierResult.reason``). Like Pending it is a state, not a tier:
  it has no level among the four and no tier change is ever made of it
  (monitor.core.events). An Axis 3 whose kappa is not evaluable for a cell (too
  few hospital folds can judge it) counts as not applicable for that cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol


class Tier(StrEnum):
    PRACTICAL_STABILITY = "Practical-Stability"
    CAUTION_REQUIRED = "Caution-Required"
    HIGH_VARIANCE = "High-Variance"
    CATASTROPHIC_INSTABILITY = "Catastrophic-Instability"
    PENDING = "Pending"
    NOT_EVALUABLE = "Not-Evaluable"

    @property
    def level(self) -> int:
        """0 (stable) .. 3 (catastrophic); -1 for Pending, -2 for Not-Evaluable (neither is a
        tier). Larger is worse."""
        return TIER_LEVEL[self]


TIER_LEVEL: dict[str, int] = {  # a Tier or its value
    Tier.PRACTICAL_STABILITY: 0,
    Tier.CAUTION_REQUIRED: 1,
    Tier.HIGH_VARIANCE: 2,
    Tier.CATASTROPHIC_INSTABILITY: 3,
    Tier.PENDING: -1,
    Tier.NOT_EVALUABLE: -2,
}

#: The four tiers and Pending: the states an evaluable cell can be in.
EVALUABLE_TIERS = tuple(t for t in Tier if t is not Tier.NOT_EVALUABLE)
_BY_FAILED = [
    Tier.PRACTICAL_STABILITY,
    Tier.CAUTION_REQUIRED,
    Tier.HIGH_VARIANCE,
    Tier.CATASTROPHIC_INSTABILITY,
]

#: An axis outcome: True = failed, False = passed, None = no result yet,
#: NOT_APPLICABLE = cannot exist for this data.
NOT_APPLICABLE = "not_applicable"
AxisOutcome = bool | None | str


@dataclass(frozen=True)
class TierResult:
    tier: Tier
    failed_axes: tuple[str, ...]
    pending_axes: tuple[str, ...]
    not_applicable_axes: tuple[str, ...]
    #: why the cell has no tier (Not-Evaluable); "" otherwise
    reason: str = ""

    @property
    def partial(self) -> bool:
        return bool(self.not_applicable_axes)

    @property
    def evaluable(self) -> bool:
        return self.tier is not Tier.NOT_EVALUABLE

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier.value,
            "tier_level": self.tier.level,
            "failed_axes": list(self.failed_axes),
            "pending_axes": list(self.pending_axes),
            "not_applicable_axes": list(self.not_applicable_axes),
            "partial": self.partial,
            "tier_reason": self.reason,
        }


def axis1_fails(vfr: float | None, tau_vfr: float) -> bool | None:
    """Axis 1 fails when VFR > tau_VFR."""
    return None if vfr is None else bool(vfr > tau_vfr)


def axis2_fails(n_star: float | None, n_field: float) -> bool | None:
    """Axis 2 fails when N* > N_field (N* = inf when never reached)."""
    return None if n_star is None else bool(n_star > n_field)


def axis3_fails(kappa: float | None, cutoff: float = 0.40, applicable: bool = True) -> AxisOutcome:
    """Axis 3 fails when kappa < cutoff; not applicable without hospitals, and for a cell
    whose kappa is not evaluable (NaN: too few hospital folds can judge it; None is a
    result not there yet)."""
    if not applicable:
        return NOT_APPLICABLE
    if kappa is None:
        return None
    if isinstance(kappa, float) and math.isnan(kappa):
        return NOT_APPLICABLE
    return bool(kappa < cutoff)


def reliability_tier(axis1: AxisOutcome, axis2: AxisOutcome, axis3: AxisOutcome) -> TierResult:
    """Count failed axes -> tier; Pending if an applicable axis has no result.

    >>> reliability_tier(True, False, True).tier.value
    'High-Variance'
    >>> reliability_tier(False, None, False).tier.value
    'Pending'
    >>> r = reliability_tier(True, True, NOT_APPLICABLE); (r.tier.value, r.partial)
    ('High-Variance', True)
    """
    outcomes = {"axis1": axis1, "axis2": axis2, "axis3": axis3}
    na = tuple(k for k, v in outcomes.items() if v == NOT_APPLICABLE)
    pending = tuple(k for k, v in outcomes.items() if v is None)
    failed = tuple(k for k, v in outcomes.items() if v is True)
    if len(na) == len(outcomes):
        raise ValueError("at least one axis must apply")
    tier = Tier.PENDING if pending else _BY_FAILED[len(failed)]
    return TierResult(tier, failed, pending, na)


class _Tau(Protocol):
    @property
    def tau_vfr(self) -> float: ...


class _NField(Protocol):
    @property
    def n_field(self) -> float: ...


class _Cutoff(Protocol):
    @property
    def kappa_cutoff(self) -> float: ...


class TierSettings(Protocol):
    """The three cut-offs a tier reads (``axis1.tau_vfr``, ``axis2.n_field``,
    ``axis3.kappa_cutoff``): a :class:`monitor.config.MonitorConfig`, or :class:`TierRule`
    where there is no configuration (a network's summed tables carry the coordinator's)."""

    @property
    def axis1(self) -> _Tau: ...

    @property
    def axis2(self) -> _NField: ...

    @property
    def axis3(self) -> _Cutoff: ...


@dataclass(frozen=True, slots=True)
class _Cut:
    tau_vfr: float = 0.10
    n_field: float = 50_000
    kappa_cutoff: float = 0.40


@dataclass(frozen=True, slots=True)
class TierRule:
    """The docs/method.md section 9 cut-offs as a value (they default to the method's).

    >>> r = TierRule.of(tau_vfr=0.05)
    >>> (r.axis1.tau_vfr, r.axis2.n_field, r.axis3.kappa_cutoff)
    (0.05, 50000, 0.4)
    """

    axis1: _Cut
    axis2: _Cut
    axis3: _Cut

    @classmethod
    def of(cls, tau_vfr: float = 0.10, n_field: float = 50_000, kappa_cutoff: float = 0.40
           ) -> TierRule:  # fmt: skip
        cut = _Cut(tau_vfr, n_field, kappa_cutoff)
        return cls(cut, cut, cut)


def cell_tier(
    vfr: float | None,
    n_star: float | None,
    kappa: float | None,
    axis3_applicable: bool,
    config: TierSettings,
    not_evaluable: str = "",
) -> TierResult:
    """The tier of a cell from its three axis values (None: no result yet); a cell that is
    not evaluable (``not_evaluable``: the reason) has none: Not-Evaluable with that reason.

    >>> cell_tier(None, None, None, True, TierRule.of(), "fewer than two groups").tier.value
    'Not-Evaluable'
    >>> cell_tier(0.02, 900.0, 0.8, True, TierRule.of()).tier.value
    'Practical-Stability'
    """
    if not_evaluable:
        return not_evaluable_tier(not_evaluable)
    out3 = (
        axis3_fails(kappa, config.axis3.kappa_cutoff)
        if axis3_applicable
        else axis3_fails(None, applicable=False)
    )
    return reliability_tier(
        axis1_fails(vfr, config.axis1.tau_vfr), axis2_fails(n_star, config.axis2.n_field), out3
    )


def not_evaluable_tier(reason: str) -> TierResult:
    """The tier state of a cell without a verdict: no axis counted, the reason kept."""
    if not reason:
        raise ValueError("a cell that is not evaluable needs a reason")
    return TierResult(Tier.NOT_EVALUABLE, (), (), (), reason)
