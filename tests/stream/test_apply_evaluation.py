"""Applying a computed evaluation: tiers from the given axes, the trackers and the evaluation
number only on a hop, a position written already a no-op, drift fed each hop's values.

The full path (a stream of batches, restarts, the worker) is tests/stream/test_pipeline.py's
and the golden run's; here one model state and a real, empty DuckDB file (the certified
block of a window whose records are not stored is empty)."""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pandas as pd

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Cell, Axis3Result
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.core.drift import DriftBook
from monitor.core.events import CellTracker
from monitor.core.tiers import cell_tier
from monitor.store import Store
from monitor.stream.apply_evaluation import apply_evaluation
from monitor.stream.axis_cache import AxisCache
from monitor.stream.evaluation_queue import EvaluationQueue
from monitor.stream.model_state import ModelState
from monitor.stream.window import ModelWindow, RecordBatch

CFG = config_from_mapping(
    {
        "window": {"size": 1500, "hop_records": 400, "hop_seconds": 0},
        "axis1": {"K": 60},
        "models": [{"id": "model-00"}],
    }
)
NOW = pd.Timestamp("2026-11-01", tz="UTC")
MODEL = "model-00"


def _state(n: int = 400) -> ModelState:
    frame = synthetic_window(n, models=1, seed=4).assign(
        seq=np.arange(n), event_time=NOW, model_id=MODEL
    )
    w = ModelWindow(MODEL, CFG)
    w.add(RecordBatch.from_frame(frame, CFG))
    return ModelState(w)


def _axis3(kappas: dict[tuple[str, str], float]) -> Axis3Result:
    """An applicable Axis 3 result of MODEL with these kappas."""
    cells = tuple(
        Axis3Cell(MODEL, m, a, 0.8, ">=", k, "fair", False, False, 3, 4, 0,
                  ("pass",) * 4, (0.9,) * 4, ())
        for (m, a), k in kappas.items()
    )  # fmt: skip
    return Axis3Result(MODEL, True, "", "five hospitals", 0.4, 5, 5, 5, 500, 0, (100,) * 5,
                       11, 10, cells=cells)  # fmt: skip


def _computed(ms: ModelState):
    q = EvaluationQueue(CFG, use_worker=False)
    job = q.snapshot(ms.window, ms, NOW)
    q.compute(job, ms.window)
    return job


def test_an_interim_evaluation_keeps_the_number_and_leaves_the_trackers_alone(tmp_path):
    ms = _state()
    job = _computed(ms)
    applied = apply_evaluation(
        job, ms, CFG, Store(tmp_path / "s.duckdb", CFG), axes=AxisCache(), interim=True,
    )  # fmt: skip
    assert applied is not None and applied.drift == ()
    rec = applied.record
    assert rec.interim and rec.evaluation == ms.evaluations == 0 and ms.evaluated == 400
    for metric, attribute, state in rec.states:
        fresh = CellTracker(MODEL, metric, attribute, confirm_windows=CFG.confirm_windows,
                            tau_vfr=CFG.axis1.tau_vfr)  # fmt: skip
        assert {k: v for k, v in state.items() if k != "released"} == fresh.to_dict()
    assert {c.key for c in rec.cells} == {(MODEL, *k) for k in ms.latest}


def test_a_hop_numbers_the_evaluation_tiers_from_the_axes_and_feeds_drift(tmp_path):
    ms = _state()
    job = _computed(ms)
    cells = {(r.metric, r.attribute): r for r in job.results}
    n_star = {k: 50.0 * (i + 1) for i, k in enumerate(sorted(cells))}
    kappa = {k: 0.3 + 0.05 * i for i, k in enumerate(sorted(cells))}
    axes = AxisCache()
    axes.set_axis2(MODEL, [Axis2Cell(MODEL, *k, 400, n, True, False, ())
                           for k, n in n_star.items()])  # fmt: skip
    axes.set_axis3(MODEL, _axis3(kappa))
    book, twin = DriftBook(), DriftBook()
    # every other cell's detector has seen a level 1.0 lower for 100 hops, then this one
    # for 15: ADWIN's next check (the 116th value, this hop's) detects the change
    for i, (k, r) in enumerate(sorted(cells.items())):
        moved = i % 2 == 0 and np.isfinite(r.value)
        history = [r.value - 1.0] * 100 + [r.value] * 15 if moved else [r.value] * 3
        for v in history:
            twin.update((MODEL, *k), v)
            book.update((MODEL, *k), v)
    applied = apply_evaluation(
        job, ms, CFG, Store(tmp_path / "s.duckdb", CFG), axes=axes, drift=book,
    )  # fmt: skip
    assert applied is not None
    rec = applied.record
    assert (rec.evaluation, ms.evaluations, ms.evaluated, rec.interim) == (1, 1, 400, False)
    label_cells = [c for c in rec.cells if (c.result.metric, c.result.attribute) in cells]
    assert label_cells
    for c in label_cells:
        k = (c.result.metric, c.result.attribute)
        assert c.n_star == n_star[k] and c.kappa == kappa[k] and c.evaluation == 1
        assert c.tier == cell_tier(c.result.vfr, n_star[k], kappa[k], True, CFG,
                                   c.result.not_evaluable_reason)  # fmt: skip
        assert c.axis3.band == "fair" and c.axis3.note == "five hospitals"
    expected = tuple(
        (MODEL, r.metric, r.attribute) for r in job.results
        if twin.update((MODEL, r.metric, r.attribute), r.value)
    )  # fmt: skip
    assert applied.drift == expected and 0 < len(expected) < len(cells)


def test_a_position_written_already_is_a_no_op_and_cancels_the_worker_call(tmp_path):
    ms = _state()
    job = _computed(ms)
    ms.evaluated, ms.evaluations = 400, 3
    job.results, job.future = None, Future()
    before = (dict(ms.trackers), dict(ms.latest))
    got = apply_evaluation(
        job, ms, CFG, Store(tmp_path / "s.duckdb", CFG), axes=AxisCache(),
    )  # fmt: skip
    assert got is None and job.future.cancelled()
    assert (ms.evaluated, ms.evaluations) == (400, 3) and (ms.trackers, ms.latest) == before
