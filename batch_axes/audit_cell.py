"""One cell of an offline audit: its three axes and its tier, one row of cells.csv.

:func:`batch_axes.runner.combine_cell` makes it; the audit writes :meth:`AuditCell.to_dict`
to ``cells.csv`` and ``cells.json``, and the report reads those back with
:meth:`AuditCell.from_dict`. The row's conventions are the files' (kept as they were):
an infinite sigma or N* is the string ``"inf"``, the failed and pending axes are joined
with ``+``, groups left out with spaces. A cell of fewer than 11 records keeps only its
identity (:data:`AUDIT_IDENTITY`) and shows ``<11`` for every figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from monitor.core.numbers import as_float, float_or_none
from monitor.core.privacy import SMALL_CELL_LABEL, published_cell, reportable, rounded_count
from monitor.core.support import support_note
from monitor.core.tiers import Tier, TierResult

#: Columns that stay when a cell's figures are withheld (identity and configuration).
AUDIT_IDENTITY = frozenset(
    {
        "model_id", "metric", "attribute", "threshold", "direction", "K", "groups_left_out",
        "groups_total",
    }
)  # fmt: skip


def _joined(axes: tuple[str, ...]) -> str:
    return "+".join(axes)


def _split(text: Any, sep: str = "+") -> tuple[str, ...]:
    return tuple(a for a in str(text or "").split(sep) if a)


def _inf_word(x: float | None) -> float | str | None:
    """``"inf"`` for an infinity (JSON has none), else the number or None."""
    return "inf" if x is not None and math.isinf(x) else x


def _int_or_none(x: Any) -> int | None:
    return None if x in (None, "") else int(float(x))


def _none_or_float(x: Any) -> float | None:
    return None if x is None else as_float(x)


@dataclass(frozen=True)
class AuditCell:
    """Axis 1, Axis 2 and Axis 3 of one (model, metric, attribute) cell and its tier.

    ``cohort_n`` is None only for a cell read back withheld (fewer than 11 records):
    such a cell has identity and nothing else (its figures are NaN or None).
    """

    model_id: str
    metric: str
    attribute: str
    threshold: float
    direction: str
    K: int
    groups_left_out: tuple[str, ...]
    cohort_n: int | None
    value: float  # NaN: undefined
    point_verdict: str
    dominant_verdict: str
    vfr: float
    sigma: float  # inf: zero spread of the replicates; NaN: undefined
    ci_low: float
    ci_high: float
    n_pass: int
    resample_n: int
    min_denominator: float  # the fewest records any rate of the value rests on
    tier: TierResult
    n_star: float | None  # None: no Axis 2 result; inf: not reached below the cohort
    n_star_reached: bool | None
    kappa: float | None  # None: no Axis 3 result (or not applicable)
    kappa_band: str | None  # "not applicable" without hospital ids
    kappa_degenerate: bool | None
    axis3_note: str
    #: resamples whose value was undefined (left out of the VFR)
    n_undefined: int = 0
    #: not evaluable (tier Not-Evaluable): why, and what it would need (core.axis1)
    not_evaluable_reason: str = ""
    records_needed: int | None = None
    records_needed_groups: tuple[str, ...] = ()
    #: why the cell has no kappa although Axis 3 ran ("" otherwise)
    kappa_reason: str = ""

    @property
    def evaluable(self) -> bool:
        return self.tier.evaluable

    #: groups whose rates entered ``value``, of the attribute's (issue 24)
    groups_evaluated: int = 0
    groups_total: int = 0
    #: N* not reached: how long this volume needs (batch_axes.axis2.TimeToReliable)
    time_to_reliable: str = ""
    #: the cohort size that would reach N* (with time_to_reliable)
    records_to_reliable: int | None = None

    @property
    def support_note(self) -> str:
        """The support in words ("4 of 12 groups evaluated"; two groups; dozens)."""
        return support_note(self.groups_evaluated, self.groups_total, self.min_denominator)

    @property
    def withheld(self) -> bool:
        return not reportable(self.cohort_n)

    def to_dict(self) -> dict[str, Any]:
        """The cells.csv / cells.json row (small-cell rule applied), in CELL_COLUMNS order:
        counts rounded to 5 (``cohort_n`` and the API cells' counts, ``resample_n`` and
        ``min_denominator``: :func:`~monitor.core.privacy.published_cell`), so the cohort
        size minus the EquiLense group sizes of ``mppd.json`` names no withheld group."""
        row = {
            "model_id": self.model_id,
            "metric": self.metric,
            "attribute": self.attribute,
            "value": float_or_none(self.value),
            "point_verdict": self.point_verdict,
            "dominant_verdict": self.dominant_verdict,
            "vfr": float_or_none(self.vfr),
            "sigma": _inf_word(float_or_none(self.sigma)),
            "ci_low": float_or_none(self.ci_low),
            "ci_high": float_or_none(self.ci_high),
            "n_star": _inf_word(self.n_star),
            "kappa": float_or_none(self.kappa),
            "kappa_band": self.kappa_band,
            "failed_axes": _joined(self.tier.failed_axes),
            "tier": self.tier.tier.value,
            "partial": self.tier.partial,
            "pending_axes": _joined(self.tier.pending_axes),
            "threshold": self.threshold,
            "direction": self.direction,
            "n_pass": self.n_pass,
            "K": self.K,
            "resample_n": self.resample_n,
            "cohort_n": self.cohort_n,
            "groups_left_out": " ".join(self.groups_left_out),
            "n_star_reached": self.n_star_reached,
            "kappa_degenerate": self.kappa_degenerate,
            "axis3_note": self.axis3_note,
            "min_denominator": float_or_none(self.min_denominator),
            "n_undefined": self.n_undefined,
            "evaluable": self.evaluable,
            "not_evaluable_reason": self.not_evaluable_reason,
            "records_needed": self.records_needed,
            "records_needed_groups": " ".join(self.records_needed_groups),
            "kappa_reason": self.kappa_reason,
            "groups_evaluated": self.groups_evaluated,
            "groups_total": self.groups_total,
            "support_note": self.support_note,
            "time_to_reliable": self.time_to_reliable,
            "records_to_reliable": self.records_to_reliable,
        }
        out = published_cell(row, self.cohort_n, AUDIT_IDENTITY)
        if not self.withheld:
            out["cohort_n"] = rounded_count(self.cohort_n)  # type: ignore[arg-type]  # not withheld: a count
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AuditCell:
        """The inverse of :meth:`to_dict`; a withheld row gives a cell with identity only."""
        identity: dict[str, Any] = {
            "model_id": str(d["model_id"]),
            "metric": str(d["metric"]),
            "attribute": str(d["attribute"]),
            "threshold": float(d["threshold"]),
            "direction": str(d["direction"]),
            "K": int(d["K"]),
            "groups_left_out": _split(d.get("groups_left_out"), " "),
            "groups_total": int(d.get("groups_total") or 0),
        }
        if d.get("cohort_n") == SMALL_CELL_LABEL or d.get("cohort_n") is None:
            return cls(
                **identity, cohort_n=None, value=math.nan, point_verdict="",
                dominant_verdict="", vfr=math.nan, sigma=math.nan, ci_low=math.nan,
                ci_high=math.nan, n_pass=0, resample_n=0, min_denominator=math.nan,
                tier=TierResult(Tier.PENDING, (), (), ()), n_star=None, n_star_reached=None,
                kappa=None, kappa_band=None, kappa_degenerate=None, axis3_note="",
            )  # fmt: skip
        partial = d.get("partial") in (True, "True", "true")
        return cls(
            **identity,
            cohort_n=int(d["cohort_n"]),
            value=as_float(d.get("value")),
            point_verdict=str(d["point_verdict"]),
            dominant_verdict=str(d["dominant_verdict"]),
            vfr=as_float(d.get("vfr")),
            sigma=as_float(d.get("sigma")),
            ci_low=as_float(d.get("ci_low")),
            ci_high=as_float(d.get("ci_high")),
            n_pass=int(d["n_pass"]),
            resample_n=int(d["resample_n"]),
            min_denominator=as_float(d.get("min_denominator")),
            tier=TierResult(
                Tier(d["tier"]),
                _split(d.get("failed_axes")),
                _split(d.get("pending_axes")),
                ("axis3",) if partial else (),
                str(d.get("not_evaluable_reason") or ""),
            ),
            n_star=_none_or_float(d.get("n_star")),
            n_star_reached=d.get("n_star_reached"),
            kappa=_none_or_float(d.get("kappa")),
            kappa_band=d.get("kappa_band"),
            kappa_degenerate=d.get("kappa_degenerate"),
            axis3_note=str(d.get("axis3_note") or ""),
            n_undefined=int(d.get("n_undefined") or 0),
            not_evaluable_reason=str(d.get("not_evaluable_reason") or ""),
            records_needed=_int_or_none(d.get("records_needed")),
            records_needed_groups=_split(d.get("records_needed_groups"), " "),
            kappa_reason=str(d.get("kappa_reason") or ""),
            groups_evaluated=int(d.get("groups_evaluated") or 0),
            time_to_reliable=str(d.get("time_to_reliable") or ""),
            records_to_reliable=_int_or_none(d.get("records_to_reliable")),
        )
