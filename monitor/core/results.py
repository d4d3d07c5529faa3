"""What one evaluation produces, as typed records that travel the whole data path.

The pipeline makes them (:class:`EvaluationRecord` per hop, one :class:`CellEvaluation`
per cell), the store writes them, the exporter reads them at scrape time and the API
serves them. Conversion to and from JSON happens only at the edges (:meth:`to_dict`,
:meth:`from_dict`), so no layer reads a result back through string keys.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any

from monitor.core.axis1 import CellResult
from monitor.core.coverage import AttributeCoverage
from monitor.core.events import CellEvent
from monitor.core.numbers import as_float, float_or_none
from monitor.core.support import support_note
from monitor.core.tiers import Tier, TierResult

_FLOAT_FIELDS = frozenset(
    f.name for f in fields(CellResult) if f.type in ("float", float)
)


def cell_result_from_dict(d: dict[str, Any]) -> CellResult:
    """The inverse of :meth:`CellResult.to_dict` after a JSON round trip (null -> NaN).

    A field a row written before it existed lacks (``evaluable`` and the other
    not-evaluable fields) takes its default."""
    kw: dict[str, Any] = {}
    for f in fields(CellResult):
        if f.name not in d and f.default is not MISSING:
            continue  # a result stored before the field existed: its default
        v = d.get(f.name)
        if f.name in _FLOAT_FIELDS:
            v = as_float(v)
        elif f.name.startswith("groups_left_out") or f.name == "records_needed_groups":
            v = tuple(v or ())
        elif f.name == "extreme_shares":
            v = tuple((str(g), float(lo), float(hi)) for g, lo, hi in (v or ()))
        elif f.name == "low_subgroups":
            v = tuple((str(g), float(r)) for g, r in (v or ()))
        elif f.name.endswith("_withheld"):
            v = bool(v)
        elif f.name == "verdict_basis":
            v = v or "raw"
        kw[f.name] = v
    return CellResult(**kw)


@dataclass(frozen=True)
class CertifiedVerdict:
    """A cell's certified verdict (docs/method.md section 11; monitor.core.certify) as of
    an evaluation: 'undetermined' until its first certification, then 'pass' or 'fail';
    the records its detectors have taken since the latest change (the evidence behind
    the next one), the latest change and the records behind it, and how far each
    detector is from its threshold (log10 of detector / c: >= 0 certifies; None while
    that side is off, i.e. the verdict it would certify is the current one, or the cell
    is not evaluable)."""

    verdict: str
    records: int
    evaluable: bool
    last_change: tuple[str, str] | None = None
    last_change_records: int | None = None
    evidence_fail: float | None = None
    evidence_pass: float | None = None

    @property
    def code(self) -> int:
        """The exported encoding: 1 pass, 0 undetermined, -1 fail."""
        return {"pass": 1, "fail": -1}.get(self.verdict, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "records": self.records, "evaluable": self.evaluable,
            "last_change": None if self.last_change is None else list(self.last_change),
            "last_change_records": self.last_change_records,
            "evidence_fail": self.evidence_fail, "evidence_pass": self.evidence_pass,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: Any) -> CertifiedVerdict | None:
        """Read back :meth:`to_dict` (None: a cell that is not certified, or a row written
        before certified verdicts were)."""
        if not isinstance(d, dict):
            return None
        change = d.get("last_change")
        return cls(
            str(d["verdict"]), int(d["records"]), bool(d.get("evaluable", True)),
            None if change is None else (str(change[0]), str(change[1])),
            None if d.get("last_change_records") is None else int(d["last_change_records"]),
            float_or_none(d.get("evidence_fail")), float_or_none(d.get("evidence_pass")),
        )  # fmt: skip


@dataclass(frozen=True)
class CellEvaluation:
    """One cell's Axis 1 result with its tier, the axes behind the tier and the debounced
    (confirmed) verdict and tier after this evaluation, and the cell's reliable verdict
    (confirmed with VFR <= tau_vfr in every confirming evaluation; None: none yet, see
    :class:`monitor.core.events.ReliableVerdict`)."""

    result: CellResult
    evaluation: int
    tier: TierResult
    confirmed_tier: str | None
    confirmed_verdict: str | None
    n_star: float | None
    kappa: float | None
    evaluated_at: str
    reliable_verdict: str | None = None
    #: whether this evaluation was released (published): False when some group it rests
    #: on had 1-10 records enter or leave since the cell's last release, so the service
    #: kept showing that release (monitor.stream.publication; docs/privacy.md)
    released: bool = True
    #: issue 23: predictions in the window, and of them those whose outcome had arrived
    #: (what a label-based cell was computed on; a label-free cell used every prediction)
    predictions: int | None = None
    with_outcome: int | None = None
    #: a label-based cell's outcome coverage of its attribute's groups (published figures,
    #: the gap and the reason it gives; monitor.core.coverage); None: no outcomes are
    #: tracked apart from predictions, or a label-free cell
    outcome_coverage: AttributeCoverage | None = None
    #: the cell's certified verdict after this evaluation's block (docs/method.md section
    #: 11); None: the metric is not certifiable (TI, CAL, CAL_GAP) or not tracked here
    certified: CertifiedVerdict | None = None

    @property
    def coverage_reason(self) -> str:
        """The tier reason "outcomes incomplete" while the coverage gap is above the threshold."""
        return "" if self.outcome_coverage is None else self.outcome_coverage.reason

    @property
    def key(self) -> tuple[str, str, str]:
        r = self.result
        return (r.model_id, r.metric, r.attribute)

    @property
    def confirmed_pass(self) -> bool | None:
        return None if self.confirmed_verdict is None else self.confirmed_verdict == "pass"

    @property
    def reliable_pass(self) -> bool | None:
        return None if self.reliable_verdict is None else self.reliable_verdict == "pass"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape stored in ``window_results.result`` and served by ``/api/cells``."""
        return {
            **self.result.to_dict(),
            "evaluation": self.evaluation,
            "tier": self.tier.tier.value,
            "tier_level": self.tier.tier.level,
            "failed_axes": list(self.tier.failed_axes),
            "pending_axes": list(self.tier.pending_axes),
            "not_applicable_axes": list(self.tier.not_applicable_axes),
            "partial": self.tier.partial,
            "tier_reason": self.tier.reason or self.coverage_reason,
            "confirmed_tier": self.confirmed_tier,
            "confirmed_verdict": self.confirmed_verdict,
            "reliable_verdict": self.reliable_verdict,
            "n_star": self.n_star,
            "kappa": self.kappa,
            "evaluated_at": self.evaluated_at,
            "released": self.released,
            "support_note": support_note(
                self.result.groups_evaluated, self.result.groups_total,
                self.result.min_denominator,
            ),
            "predictions": self.predictions,
            "with_outcome": self.with_outcome,
            "outcome_coverage": (
                None if self.outcome_coverage is None else self.outcome_coverage.to_dict()
            ),
            "coverage_reason": self.coverage_reason,
            "certified": None if self.certified is None else self.certified.to_dict(),
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellEvaluation:
        """Read back what :meth:`to_dict` wrote (also rows written before
        ``not_applicable_axes`` was stored: a partial tier then lacked only Axis 3)."""
        na = d.get("not_applicable_axes")
        if na is None:
            na = ["axis3"] if d.get("partial") else []
        tier = TierResult(
            Tier(d["tier"]),
            tuple(d.get("failed_axes") or ()),
            tuple(d.get("pending_axes") or ()),
            tuple(na),
            str(d.get("tier_reason") or ""),
        )
        n_star, kappa = d.get("n_star"), d.get("kappa")
        return cls(
            result=cell_result_from_dict(d),
            evaluation=int(d["evaluation"]),
            tier=tier,
            confirmed_tier=d.get("confirmed_tier"),
            confirmed_verdict=d.get("confirmed_verdict"),
            n_star=None if n_star is None else as_float(n_star),
            kappa=None if kappa is None else as_float(kappa),
            evaluated_at=str(d.get("evaluated_at", "")),
            reliable_verdict=d.get("reliable_verdict"),
            released=bool(d.get("released", True)),
            predictions=d.get("predictions"),
            with_outcome=d.get("with_outcome"),
            outcome_coverage=_coverage_from(d.get("outcome_coverage")),
            certified=CertifiedVerdict.from_dict(d.get("certified")),
        )


def _coverage_from(d: Any) -> AttributeCoverage | None:
    """A stored cell's outcome coverage (absent in rows written before issue 23, or
    withheld as a whole under the small-cell rule: None)."""
    return AttributeCoverage.from_dict(d) if isinstance(d, dict) else None


@dataclass(frozen=True)
class WindowPosition:
    """Which records an evaluation saw: the window at a model's stream position."""

    kind: str  # "count" | "time"
    first_seq: int | None
    last_seq: int | None
    end_count: int  # the model's accepted-record count at the hop
    seed: int  # the Axis 1 seed derived from (seed, model, end_count)


@dataclass(frozen=True)
class EvaluationRecord:
    """One hop evaluation of a model: what the store writes in the batch's transaction."""

    model_id: str
    evaluation: int
    window: WindowPosition
    cells: tuple[CellEvaluation, ...]
    #: (metric, attribute, tracker state) after this evaluation
    states: tuple[tuple[str, str, dict[str, Any]], ...]
    events: tuple[CellEvent, ...]
    evaluated_at: Any  # pandas Timestamp (UTC)
    #: a wall-clock (``hop_seconds``) evaluation between two count hops: shown as the
    #: cells' latest result, but not numbered, not in the window history and not seen by
    #: the debounce, as where it falls depends on timing (docs/decisions.md)
    interim: bool = False
