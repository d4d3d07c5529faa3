"""An offline audit's cell as one row of cells.csv / cells.json, and read back.

An audit's cell is the one cell type of the stream too,
:class:`~monitor.core.results.CellEvaluation` (its Axis 1 result, what Axis 2 and Axis 3
say of it, its tier: :func:`batch_axes.runner.cell_with_axes`); this module is the edge of
the audit's files: :func:`audit_row` writes a cell as its row (what leaves is
:func:`monitor.publish.cells.published_audit_cell` of it, under the small-cell rule), and
:func:`audit_cell_from_row` reads a published row back (the report of an audit directory,
``intervene``'s baselines). The row's conventions are the files' (kept as they were): an
infinite sigma or N* is the string ``"inf"``, the failed and pending axes are joined with
``+``, groups left out with spaces; a cell shows no kappa of its own when it is not
evaluable or Axis 3 does not apply (:attr:`CellEvaluation.own_kappa`). A cell of fewer than
11 records keeps only its identity (:data:`AUDIT_IDENTITY`) and shows ``<11`` for every
figure; read back, it is its identity with no figures (NaN), Pending.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from monitor.core.cell_result import EVALUABLE, CellResult, Estimate, Evaluability
from monitor.core.numbers import as_float, float_or_none
from monitor.core.privacy import SMALL_CELL_LABEL
from monitor.core.results import Axis2Outcome, Axis3Outcome, CellEvaluation
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


def _judged(cell: CellEvaluation) -> Axis3Outcome | None:
    """Axis 3's outcome for a cell that shows one of its own: evaluable, Axis 3 applies."""
    a3 = cell.axis3
    if a3 is None or not a3.applicable or not cell.result.evaluable:
        return None
    return a3


def kappa_band(cell: CellEvaluation) -> str | None:
    """The cell's kappa band as the audit shows it: its Landis-Koch band, "not evaluable"
    for a cell without a verdict, "not applicable" without hospital ids; None: no Axis 3
    result for it."""
    if not cell.result.evaluable:
        return "not evaluable"
    a3 = cell.axis3
    if a3 is not None and not a3.applicable:
        return "not applicable"
    return None if a3 is None else a3.band


def kappa_degenerate(cell: CellEvaluation) -> bool | None:
    """Whether every hospital fold voted alike (None: no kappa of the cell's own)."""
    a3 = _judged(cell)
    return None if a3 is None else a3.degenerate


def axis3_note(cell: CellEvaluation) -> str:
    """The model's Axis 3 note, or why Axis 3 cannot run ("" without an Axis 3 result)."""
    return "" if cell.axis3 is None else cell.axis3.note


def audit_row(cell: CellEvaluation) -> dict[str, Any]:
    """The cells.csv / cells.json row of a cell, exact, in ``CELL_COLUMNS`` order
    (monitor.audit.run): what leaves is :func:`monitor.publish.cells.published_audit_cell`
    of it (small-cell rule applied, counts rounded)."""
    r, tier, a2 = cell.result, cell.tier, cell.axis2
    judged = _judged(cell)
    return {
        "model_id": r.model_id,
        "metric": r.metric,
        "attribute": r.attribute,
        "value": float_or_none(r.value),
        "point_verdict": r.point_verdict,
        "dominant_verdict": r.dominant_verdict,
        "vfr": float_or_none(r.vfr),
        "sigma": _inf_word(float_or_none(r.sigma)),
        "ci_low": float_or_none(r.ci_low),
        "ci_high": float_or_none(r.ci_high),
        "n_star": _inf_word(cell.n_star),
        "kappa": float_or_none(cell.own_kappa),
        "kappa_band": kappa_band(cell),
        "failed_axes": _joined(tier.failed_axes),
        "tier": tier.tier.value,
        "partial": tier.partial,
        "pending_axes": _joined(tier.pending_axes),
        "threshold": r.threshold,
        "direction": r.direction,
        "n_pass": r.n_pass,
        "K": r.K,
        "resample_n": r.resample_n,
        "cohort_n": r.window_n,
        "groups_left_out": " ".join(r.groups_left_out),
        "n_star_reached": None if a2 is None else a2.reached,
        "kappa_degenerate": kappa_degenerate(cell),
        "axis3_note": axis3_note(cell),
        "min_denominator": float_or_none(r.min_denominator),
        "n_undefined": r.n_undefined,
        "evaluable": tier.evaluable,
        "not_evaluable_reason": r.not_evaluable_reason,
        "records_needed": r.evaluability.records_needed,
        "records_needed_groups": " ".join(r.evaluability.records_needed_groups),
        "kappa_reason": "" if judged is None else judged.reason,
        "groups_evaluated": r.groups_evaluated,
        "groups_total": r.groups_total,
        "support_note": r.support_note,
        "time_to_reliable": "" if a2 is None else a2.time_to_reliable,
        "records_to_reliable": None if a2 is None else a2.records_to_reliable,
        **pooled_columns(r),
    }


#: The columns of a cell with a pooled estimate ([pooling], docs/method.md "Pooled
#: estimates"), after the others; ``raw_*`` when the pooled estimate is the verdict (the
#: verdict columns then hold the pooled figures). Absent without pooling, so an audit
#: without ``[pooling]`` writes the files it always wrote.
POOLED_COLUMNS = (
    "verdict_basis", "pooled_value", "pooled_point_verdict", "pooled_vfr",
    "pooled_dominant_verdict", "pooled_ci_low", "pooled_ci_high", "pooled_strength",
    "raw_value", "raw_point_verdict", "raw_vfr", "raw_dominant_verdict",
)  # fmt: skip


def pooled_columns(r: CellResult) -> dict[str, Any]:
    """A cell's pooled estimate as row columns (:data:`POOLED_COLUMNS`); {} without one."""
    p = r.pooled
    if p is None:
        return {}
    out: dict[str, Any] = {
        "verdict_basis": r.verdict_basis,
        "pooled_value": float_or_none(p.value),
        "pooled_point_verdict": p.point_verdict,
        "pooled_vfr": float_or_none(p.vfr),
        "pooled_dominant_verdict": p.dominant_verdict,
        "pooled_ci_low": float_or_none(p.ci_low),
        "pooled_ci_high": float_or_none(p.ci_high),
        "pooled_strength": _inf_word(float_or_none(p.strength)),
    }
    if r.verdict_basis == "pooled":
        raw = r.raw
        out.update(
            raw_value=float_or_none(raw.value), raw_point_verdict=raw.point_verdict,
            raw_vfr=float_or_none(raw.vfr), raw_dominant_verdict=raw.dominant_verdict,
        )  # fmt: skip
    return out


def _pooled_from_row(d: Mapping[str, Any]) -> tuple[Estimate | None, Estimate | None, str]:
    """(pooled estimate, raw estimate beside a pooled verdict, verdict basis) of a row."""
    if not d.get("pooled_point_verdict"):  # no pooled estimate (a CSV row holds "")
        return None, None, "raw"
    pooled = Estimate(
        as_float(d.get("pooled_value")), str(d.get("pooled_point_verdict") or ""), 0,
        as_float(d.get("pooled_vfr")), str(d.get("pooled_dominant_verdict") or ""),
        ci_low=as_float(d.get("pooled_ci_low")), ci_high=as_float(d.get("pooled_ci_high")),
        strength=as_float(d.get("pooled_strength")),
    )  # fmt: skip
    basis = str(d.get("verdict_basis") or "raw")
    if basis != "pooled":
        return pooled, None, basis
    raw = Estimate(
        as_float(d.get("raw_value")), str(d.get("raw_point_verdict") or ""), 0,
        as_float(d.get("raw_vfr")), str(d.get("raw_dominant_verdict") or ""),
    )  # fmt: skip
    return pooled, raw, basis


def audit_cell_from_row(d: Mapping[str, Any]) -> CellEvaluation:
    """A published cells.json row (``published_audit_cell``) as its cell: what
    :func:`audit_row` wrote of it, the counts as published. A withheld row gives a cell
    with its identity only (no figures: NaN; no record count: 0; Pending). Columns a row
    of an earlier version lacks read as their absence meant (nothing: 0, "" or None).

    >>> row = {"model_id": "m", "metric": "DI", "attribute": "race", "threshold": 0.8,
    ...        "direction": "min", "K": 500, "groups_left_out": "", "groups_total": 5,
    ...        "cohort_n": "<11"}
    >>> c = audit_cell_from_row(row)
    >>> c.withheld, c.tier.tier.value, c.result.K
    (True, 'Pending', 500)
    """
    identity: dict[str, Any] = {
        "model_id": str(d["model_id"]),
        "metric": str(d["metric"]),
        "attribute": str(d["attribute"]),
        "threshold": float(d["threshold"]),
        "direction": str(d["direction"]),
        "K": int(d["K"]),
    }
    left_out = _split(d.get("groups_left_out"), " ")
    groups_total = int(d.get("groups_total") or 0)
    if d.get("cohort_n") == SMALL_CELL_LABEL or d.get("cohort_n") is None:
        nan = math.nan
        nothing = CellResult(
            **identity, window_n=0, resample_n=0, groups_left_out=left_out,
            groups_left_out_point=(), raw=Estimate(nan, "", 0, nan, ""), evaluability=EVALUABLE,
            groups_total=groups_total,
        )  # fmt: skip
        return CellEvaluation(nothing, TierResult(Tier.PENDING, (), (), ()))
    partial = d.get("partial") in (True, "True", "true")
    reason = str(d.get("not_evaluable_reason") or "")
    tier = TierResult(
        Tier(d["tier"]), _split(d.get("failed_axes")), _split(d.get("pending_axes")),
        ("axis3",) if partial else (), reason,
    )  # fmt: skip
    pooled, raw_beside, basis = _pooled_from_row(d)
    result = CellResult(
        **identity,
        window_n=int(d["cohort_n"]),
        resample_n=int(d["resample_n"]),
        groups_left_out=left_out,
        groups_left_out_point=(),
        raw=Estimate(
            as_float(d.get("value")), str(d["point_verdict"]), int(d["n_pass"]),
            as_float(d.get("vfr")), str(d["dominant_verdict"]), as_float(d.get("sigma")),
            ci_low=as_float(d.get("ci_low")), ci_high=as_float(d.get("ci_high")),
            n_undefined=int(d.get("n_undefined") or 0),
        ),
        evaluability=Evaluability(
            tier.evaluable, reason, _int_or_none(d.get("records_needed")),
            _split(d.get("records_needed_groups"), " "),
        ),
        min_denominator=as_float(d.get("min_denominator")),
        groups_evaluated=int(d.get("groups_evaluated") or 0),
        groups_total=groups_total,
    )
    if pooled is not None:  # the verdict columns hold the pooled figures with a pooled verdict
        verdict = result.raw
        result = replace(
            result, pooled=replace(pooled, n_pass=verdict.n_pass) if basis == "pooled" else pooled,
            raw=raw_beside if raw_beside is not None else verdict, verdict_basis=basis,
        )  # fmt: skip
    n_star = _none_or_float(d.get("n_star"))
    axis2 = None
    if n_star is not None:
        to_reliable = str(d.get("time_to_reliable") or "")
        axis2 = Axis2Outcome(n_star, to_reliable, _int_or_none(d.get("records_to_reliable")))
    return CellEvaluation(result, tier, axis2, _axis3_from_row(d, tier.evaluable))


def read_withheld(cell: CellEvaluation) -> bool:
    """Whether a cell read back by :func:`audit_cell_from_row` came from a withheld row (its
    identity only, no records). A shown row's cohort is rounded from 11 records or more, so
    it reads back as 10 at least, and stays shown.

    >>> row = {"model_id": "m", "metric": "DI", "attribute": "race", "threshold": 0.8,
    ...        "direction": "min", "K": 500, "cohort_n": "<11"}
    >>> read_withheld(audit_cell_from_row(row))
    True
    """
    return cell.result.window_n == 0


def _axis3_from_row(d: Mapping[str, Any], evaluable: bool) -> Axis3Outcome | None:
    """Axis 3's outcome as far as a row shows it: a cell without a verdict shows none of
    Axis 3 but its note."""
    band, note = d.get("kappa_band"), str(d.get("axis3_note") or "")
    if band == "not applicable":
        return Axis3Outcome(False, note=note)
    if not evaluable or band is None:
        return Axis3Outcome(True, note=note) if note else None
    return Axis3Outcome(
        True, as_float(d.get("kappa")), str(band), d.get("kappa_degenerate"),
        str(d.get("kappa_reason") or ""), note,
    )  # fmt: skip
