"""Applying a computed hop evaluation to its model: tiers, trackers, events, what is shown.

Axis 1 gives each cell's result (:class:`~monitor.core.cell_result.CellResult`); what an
evaluation *means* is decided here, in stream order, from the model's state
(:class:`~monitor.stream.model_state.ModelState`): each cell's reliability tier from
what the latest scheduled axes say of it (:class:`~monitor.stream.axis_cache.AxisCache`;
the tier assembly of the audit too, :func:`~monitor.core.results.axes_tier`), its debounced verdict
and tier (:class:`~monitor.core.events.CellTracker`), the certified verdicts' block
(:mod:`monitor.stream.certified`), the outcome-coverage cells, and what of it is
released (:mod:`monitor.stream.publication`). The result is the one typed
:class:`~monitor.core.results.EvaluationRecord` the store writes.

Called by :class:`~monitor.stream.pipeline.Pipeline` under its lock, inside the store's
transaction (the certified block is read from the store).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from monitor.config import MonitorConfig
from monitor.core.events import CellTracker, EventAxes
from monitor.core.results import CellEvaluation, EvaluationRecord, axes_tier
from monitor.publish.events import published_events
from monitor.stream.axis_cache import AxisCache
from monitor.stream.certified import BlockSource
from monitor.stream.coverage_cells import with_coverage
from monitor.stream.evaluation_queue import Job
from monitor.stream.model_state import ModelState

if TYPE_CHECKING:  # river's detectors: imported by the service that makes one
    from monitor.core.drift import DriftBook


@dataclass(frozen=True)
class Applied:
    """An applied evaluation: the row to store, and the cells whose value moved the drift
    detector (model, metric, attribute), in cell order."""

    record: EvaluationRecord
    drift: tuple[tuple[str, str, str], ...] = ()


def apply_evaluation(
    job: Job,
    ms: ModelState,
    config: MonitorConfig,
    store: BlockSource,
    *,
    axes: AxisCache,
    drift: DriftBook | None = None,
    interim: bool = False,
) -> Applied | None:
    """Tiers, trackers and events of a computed evaluation (waiting for the worker if it
    computes it); returns what to store.

    An evaluation is identified by (model, stream position): one at a position the
    model's written evaluations have reached already is a no-op (None). An interim
    (wall-clock) evaluation keeps the last hop's number and leaves the trackers alone.
    ``axes``: the model's latest scheduled-axis results; ``drift``: the drift detectors,
    fed each hop's values (None: no drift detection).
    """
    cfg = config
    model_id, now = job.model_id, job.now
    if ms.evaluated is not None and job.window.end_count <= ms.evaluated:
        job.cancel()
        return None
    results = job.computed()
    evaluation = ms.evaluations + (0 if interim else 1)
    ms.evaluations = evaluation
    ms.evaluated = job.window.end_count
    cells, states, events, drifted = [], [], [], []
    if not interim:  # the hop's block into the certified verdicts (stream order)
        events.extend(ms.certified.advance(store, job.window.end_count, evaluation))
    certified = ms.certified.verdicts()
    for r in results:
        key = (model_id, r.metric, r.attribute)
        cell_key = (r.metric, r.attribute)
        a2, a3 = axes.outcomes(model_id, r.metric, r.attribute)
        tier = axes_tier(r, a2, a3, cfg)
        figures: EventAxes = {
            "value": r.value, "vfr": r.vfr, "n_star": None if a2 is None else a2.n_star,
            "kappa": None if a3 is None else a3.kappa, "sigma": r.sigma,
        }  # fmt: skip
        tracker = ms.trackers.get(cell_key)
        if tracker is None:
            tracker = ms.trackers[cell_key] = CellTracker(
                *key, confirm_windows=cfg.confirm_windows, tau_vfr=cfg.axis1.tau_vfr
            )
        if not interim and not r.evaluable:  # no verdict, no tier: nothing to flip
            tracker.observe_not_evaluable()
        elif not interim:
            events.extend(
                tracker.observe(evaluation, r.dominant_verdict, tier.tier.value, figures)
            )
        cell = CellEvaluation(
            result=r,
            tier=tier,
            axis2=a2,
            axis3=a3,
            evaluation=evaluation,
            confirmed_tier=tracker.tier.confirmed,
            confirmed_verdict=tracker.verdict.confirmed,
            evaluated_at=str(now),
            reliable_verdict=tracker.reliable.confirmed,
            predictions=job.predictions,
            with_outcome=job.with_outcome,
            certified=certified.get(cell_key),
        )
        cells.append(cell)
        if not interim and drift is not None and drift.update(key, r.value):
            drifted.append(key)
    cells = with_coverage(cells, job.coverage, cfg)  # beside the label-based cells
    cells = ms.publication.publish(cells, job.release, job.bases)  # what of it is shown
    for cell in cells:
        cell_key = (cell.result.metric, cell.result.attribute)
        ms.latest[cell_key] = cell
        state = ms.trackers[cell_key].to_dict()
        shown = ms.publication.cells.get(cell_key)
        if shown is not None:  # saved with the state: a restart shows the same
            state["released"] = shown.to_dict()
        states.append((*cell_key, state))
    events = published_events(events)
    record = EvaluationRecord(
        model_id,
        evaluation,
        job.window,
        tuple(cells),
        tuple(states),
        tuple(events),
        now,
        interim=interim,
    )
    return Applied(record, tuple(drifted))
