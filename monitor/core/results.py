"""What one evaluation produces, as typed records that travel the whole data path.

One cell with its axes and its tier is one :class:`CellEvaluation`, wherever it is made:
the stream makes one per cell per hop (with :class:`EvaluationRecord` per hop), the offline
audit one per cell of its cohort (``batch_axes.runner.audit_cells``). Its parts are the
Axis 1 result (:class:`~monitor.core.cell_result.CellResult`), what Axis 2 and Axis 3 say
of the cell (:class:`Axis2Outcome`, :class:`Axis3Outcome`; None: no result yet), the tier
(:class:`~monitor.core.tiers.TierResult`, assembled by :func:`axes_tier` from those parts
for both) and the certified verdict; the stream's debounce, release and coverage
are the rest, at their "none" for an audit.

The store writes a cell as :meth:`CellEvaluation.to_dict` and the audit as its cells.csv
row (``batch_axes.audit_cell.audit_row``); conversion to and from JSON happens only at
those edges (decoding: :mod:`monitor.store.codec`, ``batch_axes.audit_cell``), so no layer
reads a result back through string keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from monitor.core.cell_result import CellResult
from monitor.core.coverage import AttributeCoverage
from monitor.core.events import CellEvent
from monitor.core.numbers import float_or_none
from monitor.core.privacy import reportable
from monitor.core.tiers import TierResult, TierSettings, cell_tier


@dataclass(frozen=True, slots=True)
class Axis2Outcome:
    """What Axis 2 says of one cell: N*, the audit size at which its value settles
    (inf: not reached below the cohort), and for one not reached how long this volume
    needs (``time_to_reliable``, in words) and the cohort size that would reach it.

    >>> Axis2Outcome(math.inf).reached, Axis2Outcome(800.0).reached
    (False, True)
    """

    n_star: float
    time_to_reliable: str = ""
    records_to_reliable: int | None = None

    @property
    def reached(self) -> bool:
        return not math.isinf(self.n_star)


@dataclass(frozen=True, slots=True)
class Axis3Outcome:
    """What Axis 3 says of one cell: whether it can exist for this data (``applicable``:
    False without hospital ids), the cell's hospital kappa (None: no kappa for this cell;
    NaN: too few hospital folds can judge it, ``reason`` says why), its Landis-Koch
    ``band``, whether every vote was identical (``degenerate``), and the model's Axis 3
    note or why it cannot run.

    >>> Axis3Outcome(False, note="no hospital ids").kappa is None
    True
    """

    applicable: bool
    kappa: float | None = None
    band: str | None = None
    degenerate: bool | None = None
    reason: str = ""
    note: str = ""


def axes_tier(
    result: CellResult,
    axis2: Axis2Outcome | None,
    axis3: Axis3Outcome | None,
    config: TierSettings,
) -> TierResult:
    """The tier of a cell from its Axis 1 result and what Axis 2 and Axis 3 say of it
    (None: no result yet): the one tier assembly of the stream and the audit
    (:func:`~monitor.core.tiers.cell_tier`, with ``config``'s cut-offs: a
    ``MonitorConfig`` or a ``TierRule``; a cell that is not evaluable has none).

    >>> from monitor.core.cell_result import Estimate
    >>> from monitor.core.tiers import TierRule
    >>> r = CellResult("m", "DI", "race", 0.8, "min", 500, 900, 900, (), (),
    ...                Estimate(0.9, "pass", 480, 0.04, "pass"))
    >>> axes_tier(r, Axis2Outcome(300.0), Axis3Outcome(False), TierRule.of()).tier.value
    'Practical-Stability'
    >>> axes_tier(r, None, None, TierRule.of()).pending_axes
    ('axis2', 'axis3')
    """
    applicable = axis3 is None or axis3.applicable
    return cell_tier(
        result.vfr, None if axis2 is None else axis2.n_star,
        None if axis3 is None else axis3.kappa, applicable, config,
        result.not_evaluable_reason,
    )  # fmt: skip


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
        """Read back :meth:`to_dict` after a JSON round trip (None: a cell that is not
        certified). Here, not in the codec only, because the publish package reads it from
        a JSON row that has no typed source too (``publish.cells.published_cell``)."""
        if not isinstance(d, dict):
            return None
        change, records = d["last_change"], d["last_change_records"]
        return cls(
            str(d["verdict"]), int(d["records"]), bool(d["evaluable"]),
            None if change is None else (str(change[0]), str(change[1])),
            None if records is None else int(records),
            float_or_none(d["evidence_fail"]), float_or_none(d["evidence_pass"]),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class CellEvaluation:
    """One cell (model, metric, attribute) with its axes and its tier: the Axis 1 result,
    what Axis 2 and Axis 3 say of it (None: no result yet), the tier they give
    (:func:`axes_tier`) and the certified verdict; in the stream also the evaluation it
    belongs to, the debounced (confirmed) verdict and tier after it, the reliable verdict
    (confirmed with VFR <= tau_vfr in every confirming evaluation; None: none yet, see
    :class:`monitor.core.events.ReliableVerdict`), whether it was released and the
    window's outcome coverage. An audit's cell has the stream's parts at their "none"
    (evaluation 0, nothing confirmed or certified)."""

    result: CellResult
    tier: TierResult
    axis2: Axis2Outcome | None = None
    axis3: Axis3Outcome | None = None
    #: the cell's certified verdict after this evaluation's block (docs/method.md section
    #: 11); None: the metric is not certifiable (TI, CAL, CAL_GAP), not tracked here, or
    #: an audit
    certified: CertifiedVerdict | None = None
    evaluation: int = 0
    evaluated_at: str = ""
    confirmed_tier: str | None = None
    confirmed_verdict: str | None = None
    reliable_verdict: str | None = None
    #: whether this evaluation was released (published): False when some group it rests
    #: on had 1-10 records enter or leave since the cell's last release, so the service
    #: kept showing that release (monitor.stream.publication; docs/privacy.md)
    released: bool = True
    #: predictions in the window, and of them those whose outcome had arrived (what a
    #: label-based cell was computed on; a label-free cell used every prediction)
    predictions: int | None = None
    with_outcome: int | None = None
    #: a label-based cell's outcome coverage of its attribute's groups (published figures,
    #: the gap and the reason it gives; monitor.core.coverage); None: no outcomes are
    #: tracked apart from predictions, or a label-free cell
    outcome_coverage: AttributeCoverage | None = None

    @property
    def n_star(self) -> float | None:
        """N* (inf: not reached; None: no Axis 2 result)."""
        return None if self.axis2 is None else self.axis2.n_star

    @property
    def kappa(self) -> float | None:
        """The kappa Axis 3 gave the cell's metric (None: none; NaN: not evaluable)."""
        return None if self.axis3 is None else self.axis3.kappa

    @property
    def own_kappa(self) -> float | None:
        """The kappa the cell shows as its own: :attr:`kappa`, but None for a cell that is
        not evaluable (no verdict, so no agreement on it: docs/method.md section 2) or
        where Axis 3 does not apply."""
        a3 = self.axis3
        if a3 is None or not a3.applicable or not self.result.evaluable:
            return None
        return a3.kappa

    @property
    def withheld(self) -> bool:
        """Computed from fewer than SMALL_CELL records: only its identity may leave."""
        return not reportable(self.result.window_n)

    @property
    def coverage_reason(self) -> str:
        """The tier reason "outcomes incomplete" while the coverage gap is above the threshold."""
        return "" if self.outcome_coverage is None else self.outcome_coverage.reason

    @property
    def key(self) -> tuple[str, str, str]:
        r = self.result
        return (r.model_id, r.metric, r.attribute)

    @property
    def model_id(self) -> str:
        return self.result.model_id

    @property
    def metric(self) -> str:
        return self.result.metric

    @property
    def attribute(self) -> str:
        return self.result.attribute

    @property
    def confirmed_pass(self) -> bool | None:
        return None if self.confirmed_verdict is None else self.confirmed_verdict == "pass"

    @property
    def reliable_pass(self) -> bool | None:
        return None if self.reliable_verdict is None else self.reliable_verdict == "pass"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape stored in ``window_results.result`` and served by ``/api/cells``
        (read back by :func:`monitor.store.codec.decode_evaluation`)."""
        r = self.result
        return {
            **r.to_dict(),
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
            "support_note": r.support_note,
            "predictions": self.predictions,
            "with_outcome": self.with_outcome,
            "outcome_coverage": (
                None if self.outcome_coverage is None else self.outcome_coverage.to_dict()
            ),
            "coverage_reason": self.coverage_reason,
            "certified": None if self.certified is None else self.certified.to_dict(),
        }  # fmt: skip


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
