"""The one place where the stored state JSON becomes typed values.

The store keeps a model's stream state (``model_state``) and each cell's tracker state
(``cell_state``) as JSON columns; what reads them gets the typed values here, never a
dict keyed by strings, so a renamed or missing field fails in one module and files
written by every earlier version decode in one place (and the model state goes back in
as a :class:`ModelStateRow`):

* ``model_state.evaluated_records`` is NULL in files written before it (the pipeline then
  takes ``records``), ``releases`` before v9 and ``certified`` before v12 (migrations.py);
* a ``cell_state.state`` carries the cell's released evaluation under ``"released"`` only
  since releases existed, and ``latest`` is NULL for a cell not evaluated yet.

The scheduled axes' results (``axis_results.payload``) are written through
:func:`axis_payload` and read back through :func:`axis_result`, wherever they are read
(the pipeline's restart, the API, the report), so no layer reads a result through string
keys.

The cells' evaluations (``window_results.result``, ``cell_state.latest`` and the released
one in ``cell_state.state``) are read back as :class:`~monitor.core.results.CellEvaluation`
(:func:`decode_evaluation`, :func:`evaluation_from_json`: the flat keys every version
wrote, composed back into the cell's parts; the keys older versions did not write are
added once, by migration v13, or as a file opened read-only is read), their outcome
coverage alone as
:class:`~monitor.core.coverage.AttributeCoverage` (:func:`decode_coverage`), and the cohort
a scheduled axis's published result rests on (``axis_releases.cohort``) as a
:class:`CohortRelease`. What leaves the service as JSON is made from these typed values at
the edge that serves it (monitor.service.stored_views, monitor.publish).

The release points and the certified verdicts' state stay decoded JSON mappings here:
their schema belongs to ``monitor.stream.publication`` and ``monitor.stream.certified``,
above the store, which restore them (``ModelPublication.restore``,
``ModelCertified.restore``). The stream hands them to the writer as JSON text already (the
certified state caches its text between blocks), which ``model_state`` stores as is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple, overload

import orjson
import pandas as pd

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result
from batch_axes.equilense import EquiLenseResult
from monitor.core.cell_result import CellResult, Estimate, Evaluability
from monitor.core.coverage import AttributeCoverage
from monitor.core.drivers import Drivers
from monitor.core.events import CellTracker
from monitor.core.jsonable import to_json
from monitor.core.numbers import as_float
from monitor.core.results import Axis2Outcome, Axis3Outcome, CellEvaluation, CertifiedVerdict
from monitor.core.tiers import Tier, TierResult
from monitor.store.migrations import lacks_cell_keys, upgraded_cell


@dataclass(frozen=True)
class StoredModelState:
    """A model's stream counters and restart state as the last written batch left them."""

    #: records of this model accepted (its stream position)
    records: int
    #: numbered (hop) evaluations so far
    evaluations: int
    #: records that arrived older than the time window
    old_events: int
    #: end count of the last written evaluation (None: a file written before it was kept)
    evaluated_records: int | None
    #: the release points (``ModelPublication.saved``; None before v9)
    releases: Mapping[str, Any] | None
    #: the certified verdicts' state (``ModelCertified.saved``; None before v12)
    certified: Mapping[str, Any] | None

    @property
    def evaluated(self) -> int:
        """The position evaluated: ``records`` in a file written before it was kept."""
        return self.records if self.evaluated_records is None else self.evaluated_records


@dataclass(frozen=True)
class StoredCell:
    """A cell's tracker, the evaluation it last released and its latest evaluation."""

    model_id: str
    metric: str
    attribute: str
    tracker: CellTracker
    #: the released evaluation saved with the state (None: none yet, or a file before releases)
    released: CellEvaluation | None
    #: the latest evaluation (None: not evaluated yet, stored as NULL or JSON null)
    latest: CellEvaluation | None


class ModelStateRow(NamedTuple):
    """A model's ``model_state`` row as the writer stores it (what
    :func:`decode_model_state` reads back): its counters, when it was written, and its
    release points and certified state as JSON text (:func:`encode_releases`; the
    certified state caches its own text between blocks: monitor.stream.certified)."""

    model_id: str
    records: int
    evaluations: int
    old_events: int
    at: pd.Timestamp
    #: end count of the last written evaluation (0: never evaluated; None: a row as a file
    #: written before it was kept holds it)
    evaluated_records: int | None
    #: release points (None: as a file written before v9 holds them)
    releases: str | None
    #: certified verdicts' state (None: as a file written before v12 holds it)
    certified: str | None


def encode_releases(saved: Mapping[str, Any]) -> str:
    """The ``model_state.releases`` JSON of a model's release points
    (``ModelPublication.saved``), read back as :attr:`StoredModelState.releases`."""
    return orjson.dumps(saved).decode()


def _json_object(text: str | None) -> dict[str, Any] | None:
    """A JSON object column (None when NULL, empty or JSON null)."""
    if not text:
        return None
    value = json.loads(text)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"stored state is not a JSON object: {text[:80]!r}")
    return value


def decode_model_state(
    records: int,
    evaluations: int,
    old_events: int,
    evaluated_records: int | None,
    releases: str | None,
    certified: str | None,
) -> StoredModelState:
    """One ``model_state`` row (its columns after ``model_id``, as stored)."""
    return StoredModelState(
        int(records), int(evaluations), int(old_events),
        None if evaluated_records is None else int(evaluated_records),
        _json_object(releases), _json_object(certified),
    )  # fmt: skip


def decode_cell(
    model_id: str, metric: str, attribute: str, state: str, latest: str | None
) -> StoredCell:
    """One ``cell_state`` row: the tracker state with its released evaluation, and the
    latest evaluation."""
    d = _json_object(state)
    if d is None:
        raise ValueError(f"cell {model_id}/{metric}/{attribute} has no tracker state")
    released = d.get("released")
    latest_d = _json_object(latest)
    return StoredCell(
        model_id, metric, attribute, CellTracker.from_dict(d),
        None if released is None else evaluation_from_json(released),
        None if not latest_d else evaluation_from_json(latest_d),
    )  # fmt: skip


def decode_evaluation(text: str) -> CellEvaluation:
    """A stored cell evaluation (``window_results.result``, ``cell_state.latest`` or the
    released one of ``cell_state.state``: ``CellEvaluation.to_dict`` as JSON) as its typed
    value (:func:`evaluation_from_json`)."""
    d = _json_object(text)
    if d is None:
        raise ValueError("a stored cell evaluation is empty")
    return evaluation_from_json(d)


def evaluation_from_json(d: Mapping[str, Any]) -> CellEvaluation:
    """The inverse of :meth:`CellEvaluation.to_dict` after a JSON round trip (null -> NaN
    for figures), every key present (rows of earlier versions are upgraded once, by
    migration v13: :func:`monitor.store.migrations.upgraded_cell`).

    The stream's row keeps N* and kappa of the scheduled axes (their other figures are in
    their own results, ``axis_results``): they come back as an
    :class:`~monitor.core.results.Axis2Outcome` and an
    :class:`~monitor.core.results.Axis3Outcome` of that figure alone (a NaN kappa is
    stored as null and comes back as no Axis 3 outcome); the tier is stored as it was.
    A row of a file that was not migrated (opened read-only) gets the keys its version
    lacked as it is read, as v13 gives them (:func:`monitor.store.migrations.upgraded_cell`)."""
    if lacks_cell_keys(d):
        d = upgraded_cell(d)
    tier = TierResult(
        Tier(d["tier"]),
        tuple(d["failed_axes"] or ()),
        tuple(d["pending_axes"] or ()),
        tuple(d["not_applicable_axes"]),
        str(d["tier_reason"] or ""),
    )
    n_star, kappa = d["n_star"], d["kappa"]
    coverage = d["outcome_coverage"]
    return CellEvaluation(
        result=cell_result_from_json(d),
        tier=tier,
        axis2=None if n_star is None else Axis2Outcome(as_float(n_star)),
        axis3=None if kappa is None else Axis3Outcome(True, as_float(kappa)),
        certified=CertifiedVerdict.from_dict(d["certified"]),
        evaluation=int(d["evaluation"]),
        evaluated_at=str(d["evaluated_at"]),
        confirmed_tier=d["confirmed_tier"],
        confirmed_verdict=d["confirmed_verdict"],
        reliable_verdict=d["reliable_verdict"],
        released=bool(d["released"]),
        predictions=d["predictions"],
        with_outcome=d["with_outcome"],
        # withheld as a whole under the small-cell rule in a published row: None
        outcome_coverage=AttributeCoverage.from_dict(coverage)
        if isinstance(coverage, dict)
        else None,
    )


def cell_result_from_json(d: Mapping[str, Any]) -> CellResult:
    """The inverse of :meth:`CellResult.to_dict` after a JSON round trip: the flat keys
    composed back into the cell's parts. Which estimate the main figures are is the row's
    ``verdict_basis``: the raw one (its pooled estimate, if any, under ``pooled_*``), or
    the pooled one (the raw one's value, verdicts and VFR under ``raw_*``)."""
    f = as_float
    main = Estimate(
        f(d["value"]), d["point_verdict"], d["n_pass"], f(d["vfr"]), d["dominant_verdict"],
        f(d["sigma"]), f(d["mean"]), f(d["sd"]), f(d["ci_low"]), f(d["ci_high"]),
        d["n_undefined"],
    )  # fmt: skip
    basis = d["verdict_basis"] or "raw"
    if basis == "pooled":
        raw = Estimate(
            f(d["raw_value"]), d["raw_point_verdict"], d["raw_n_pass"], f(d["raw_vfr"]),
            d["raw_dominant_verdict"],
        )  # fmt: skip
        pooled: Estimate | None = replace(main, strength=f(d["pooled_strength"]))
    else:
        raw = main
        pooled = None
        if d["pooled_point_verdict"] is not None:
            pooled = Estimate(
                f(d["pooled_value"]), d["pooled_point_verdict"], d["pooled_n_pass"],
                f(d["pooled_vfr"]), d["pooled_dominant_verdict"], ci_low=f(d["pooled_ci_low"]),
                ci_high=f(d["pooled_ci_high"]), strength=f(d["pooled_strength"]),
            )  # fmt: skip
    drivers = None
    if d["driver_rate"] is not None:
        drivers = Drivers(
            d["driver_rate"], d["low_group"], d["high_group"], f(d["low_rate"]),
            f(d["high_rate"]), f(d["low_share"]), f(d["high_share"]), bool(d["low_withheld"]),
            bool(d["high_withheld"]),
            tuple((str(g), float(lo), float(hi)) for g, lo, hi in d["extreme_shares"] or ()),
            tuple((str(g), float(r)) for g, r in d["low_subgroups"] or ()),
        )  # fmt: skip
    return CellResult(
        d["model_id"], d["metric"], d["attribute"], f(d["threshold"]), d["direction"], d["K"],
        d["window_n"], d["resample_n"], tuple(d["groups_left_out"] or ()),
        tuple(d["groups_left_out_point"] or ()), raw,
        Evaluability(
            d["evaluable"], d["not_evaluable_reason"], d["records_needed"],
            tuple(d["records_needed_groups"] or ()),
        ),
        f(d["min_denominator"]), d["groups_evaluated"], d["groups_total"], drivers, pooled, basis,
    )  # fmt: skip


def encode_evaluation(cell: CellEvaluation) -> str:
    """The stored JSON of a cell evaluation: what :func:`decode_evaluation` reads back."""
    return to_json(cell.to_dict())


def decode_coverage(text: str) -> AttributeCoverage:
    """A stored outcome coverage (a cell evaluation's ``outcome_coverage`` object) as its
    typed value."""
    d = _json_object(text)
    if d is None:
        raise ValueError("a stored outcome coverage is empty")
    return AttributeCoverage.from_dict(d)


@dataclass(frozen=True)
class CohortRelease:
    """The cohort a scheduled axis's latest published result rests on (``axis_releases``):
    what the next result's cohort is compared with before it may replace it
    (monitor.stream.publication.cohort_release; docs/privacy.md)."""

    #: the cohort's last sequence number (None: an empty cohort)
    seq: int | None
    #: attribute -> records per group, in the attribute's configured code order
    sizes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def records(self) -> int:
        """Records the cohort holds: every record is in one group of each attribute (0 for
        none)."""
        return max((sum(v) for v in self.sizes.values()), default=0)

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON shape, ``{"seq": ..., "n": {attribute: sizes}}``."""
        return {"seq": self.seq, "n": {a: list(v) for a, v in self.sizes.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CohortRelease:
        seq = d.get("seq")
        return cls(
            None if seq is None else int(seq),
            {str(a): tuple(int(x) for x in v) for a, v in (d.get("n") or {}).items()},
        )


def decode_cohort_release(text: str) -> CohortRelease:
    """An ``axis_releases.cohort`` column as its typed value."""
    d = _json_object(text)
    return CohortRelease(None) if d is None else CohortRelease.from_dict(d)


def encode_cohort_release(cohort: CohortRelease) -> str:
    """The ``axis_releases.cohort`` JSON of a cohort: what :func:`decode_cohort_release`
    reads back."""
    return to_json(cohort.to_dict())


def encode_cell_state(state: Mapping[str, Any]) -> str:
    """The ``cell_state.state`` JSON of a tracker's state (``CellTracker.to_dict``, with the
    cell's released evaluation under ``"released"`` once it released one): what
    :func:`decode_cell` reads back."""
    return to_json(state)


#: What one scheduled-axis job produces for one model: an Axis 2 result (one
#: :class:`~batch_axes.axis2.Axis2Cell` per cell), an :class:`~batch_axes.axis3.Axis3Result`
#: or an :class:`~batch_axes.equilense.EquiLenseResult`; ``axis_results.payload`` holds
#: its ``to_dict`` as JSON.
AxisResult = tuple[Axis2Cell, ...] | Axis3Result | EquiLenseResult


def axis_payload(result: AxisResult) -> Any:
    """The JSON-able payload the store writes for a result."""
    if isinstance(result, tuple):
        return [c.to_dict() for c in result]
    return result.to_dict()


@overload
def axis_result(axis: Literal["axis2"], payload: Any) -> tuple[Axis2Cell, ...]: ...
@overload
def axis_result(axis: Literal["axis3"], payload: Any) -> Axis3Result: ...
@overload
def axis_result(axis: Literal["equilense"], payload: Any) -> EquiLenseResult: ...
@overload
def axis_result(axis: str, payload: Any) -> AxisResult: ...
def axis_result(axis: str, payload: Any) -> AxisResult:
    """A stored payload of ``axis`` (decoded JSON) as its typed result (the inverse of
    :func:`axis_payload`)."""
    if axis == "axis2":
        return tuple(Axis2Cell.from_dict(c) for c in payload)
    if axis == "axis3":
        return Axis3Result.from_dict(payload)
    if axis == "equilense":
        return EquiLenseResult.from_dict(payload)
    raise ValueError(f"unknown scheduled axis {axis!r}")


def decode_axis_result(axis: str, payload: str) -> AxisResult:
    """An ``axis_results.payload`` column of ``axis`` as its typed result."""
    return axis_result(axis, json.loads(payload))
