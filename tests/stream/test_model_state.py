"""ModelState: a model's whole in-memory state, and that dropping, reloading or restoring
a model gives the state a fresh restore from the store gives (no map left behind)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.store import Store, queries
from monitor.stream.model_state import GroupSummary, ModelState
from monitor.stream.pipeline import Pipeline
from monitor.stream.window import ModelWindow, RecordBatch

CFG = config_from_mapping(
    {
        "window": {"size": 300, "hop_records": 100, "hop_seconds": 10},
        "axis1": {"K": 40},
        "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"},
                    "evaluation_worker": False},
    }
)  # fmt: skip


class _Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


def _payloads(n: int, models: int = 2, seed: int = 5) -> list[bytes]:
    df = synthetic_window(n, models=models, seed=seed).drop(columns=["decision"])
    df["event_time"] = "2026-11-01T00:00:00Z"
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    return [json.dumps(r).encode() for r in df.to_dict("records")]


def _partition(payload: bytes) -> int:
    return int(json.loads(payload)["model_id"].rsplit("-", 1)[1])


def _feed(pipe: Pipeline, payloads: list[bytes], clock: _Clock, start: int = 0) -> None:
    for i in range(start, len(payloads), 70):
        chunk = payloads[i : i + 70]
        pipe.ingest_batch(chunk, [Origin("t", _partition(p), i + k) for k, p in enumerate(chunk)])
        clock.t += 3


def _state(pipe: Pipeline, model_id: str) -> dict:
    """Everything a model's state holds, comparable (its releases included: they are
    restored exactly, monitor.stream.publication.ModelPublication.restore)."""
    ms: ModelState = pipe._models[model_id]
    return {
        "view": ms.view(),
        "releases": ms.publication.saved(),
        "released_cells": ms.publication.released_cells(),
        "evaluated": ms.evaluated,
        "since_eval": ms.since_eval,
        "last_eval_wall": ms.last_eval_wall,
        "trackers": {k: t.to_dict() for k, t in ms.trackers.items()},
        "latest": dict(ms.latest),
        "tables": ms.window.table_map(),
        "seqs": ms.window.seqs().tolist(),
    }


def test_the_view_counts_each_groups_records_and_selections():
    w = ModelWindow("model-00", CFG)
    frame = synthetic_window(250, models=1, seed=3)
    frame = frame.assign(seq=np.arange(len(frame)), event_time=pd.Timestamp("2026-11-01", tz="UTC"))
    w.add(RecordBatch.from_frame(frame, CFG))
    view = ModelState(w, evaluations=2).view()
    assert (view.model_id, view.window_records, view.arrivals, view.evaluations) == (
        "model-00", 250, 250, 2,
    )  # fmt: skip
    for attr in CFG.attributes:
        codes = frame[attr.name].astype(str)
        for g in attr.codes:
            rows = frame[codes == g]
            assert view.groups[attr.name][g] == GroupSummary(
                len(rows), int(rows["decision"].sum())
            )
    assert GroupSummary(0, 0).selection_rate == 0.0 and GroupSummary(4, 1).selection_rate == 0.25


def test_a_dropped_and_returned_model_equals_one_restored_from_the_store(tmp_path):
    clock = _Clock()
    store = Store(tmp_path / "m.duckdb", CFG)
    pipe = Pipeline(CFG, store, clock=clock)
    payloads = _payloads(500)
    _feed(pipe, payloads[:700], clock)
    assert pipe.forget_partitions([("t", 1)]) == ["model-01"]
    assert pipe.model_view("model-01") is None and not pipe.has_cell("model-01", "DI", "sex")
    _feed(pipe, payloads, clock, start=700)  # model-01's records arrive again
    fresh = Pipeline(CFG, store, clock=clock)
    for m in ("model-00", "model-01"):
        assert _state(pipe, m) == _state(fresh, m), m
    store.close()


def test_a_failed_batch_reloads_every_model_as_a_fresh_restore(tmp_path, monkeypatch):
    clock = _Clock()
    store = Store(tmp_path / "m.duckdb", CFG)
    pipe = Pipeline(CFG, store, clock=clock)
    payloads = _payloads(400)
    _feed(pipe, payloads[:500], clock)
    clock.t += 20
    assert pipe.tick() == 2  # interim evaluations: wall times the file does not hold
    assert pipe.forget_partitions([("t", 1)]) == ["model-01"]

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(store, "write_evaluations", boom)
    mine = [p for p in payloads[500:] if _partition(p) == 0]  # model-01's stay away
    with pytest.raises(OSError):
        _feed(pipe, mine, clock)
    monkeypatch.undo()
    # the revoked model stays dropped; the other is what a restart would build
    assert pipe.owned_models() == ["model-00"]
    fresh = Pipeline(CFG, store, clock=clock)
    fresh.forget_partitions([("t", 1)])
    assert _state(pipe, "model-00") == _state(fresh, "model-00")
    store.close()


def test_the_hop_cadence_goes_on_from_the_stored_last_evaluation_after_a_restart(tmp_path):
    """The last evaluation's wall time is restored from the file (as the service exports
    it, see MonitorService): a restart does not make every model with new records due."""
    clock = _Clock()
    store = Store(tmp_path / "m.duckdb", CFG)
    pipe = Pipeline(CFG, store, clock=clock)
    payloads = _payloads(160, models=1)  # a hop at 100, 60 records past it
    _feed(pipe, payloads, clock)
    stored = store.read(queries.last_evaluation_times)["model-00"]
    assert _state(pipe, "model-00")["last_eval_wall"] == stored
    store.close()
    store = Store(tmp_path / "m.duckdb", CFG)
    pipe = Pipeline(CFG, store, clock=clock)
    ms = pipe._models["model-00"]
    assert (ms.last_eval_wall, ms.since_eval) == (stored, 60)
    clock.t = stored + 5
    assert pipe.tick() == 0  # not due yet: 5 s after the last evaluation
    clock.t = stored + 10
    assert pipe.tick() == 1
    store.close()


def test_an_evaluation_resets_the_wall_clock_cadence_and_a_restore_resumes_it():
    w = ModelWindow("model-00", CFG)
    w.arrivals = 1300
    ms = ModelState(w, evaluated=1200)
    ms.resume(last_eval_wall=50.0)
    assert (ms.since_eval, ms.last_eval_wall) == (100, 50.0)  # what no evaluation saw
    ms.mark_evaluated(75.0)
    assert (ms.since_eval, ms.last_eval_wall) == (0, 75.0)
    never = ModelState(ModelWindow("model-01", CFG))
    never.window.arrivals = 30
    never.resume(0.0)
    assert never.since_eval == 30


def test_the_saved_row_is_what_a_restore_reads_back(tmp_path):
    """Through a real file: the row written is decoded to the same counters, release
    points and certified state (monitor.store.codec)."""
    w = ModelWindow("model-00", CFG)
    w.arrivals, w.old_events = 1300, 4
    ms = ModelState(w, evaluations=3, evaluated=1200)
    at = pd.Timestamp("2026-12-01", tz="UTC")
    row = ms.saved_row(at)
    assert row[:6] == ("model-00", 1300, 3, 4, at, 1200)
    store = Store(tmp_path / "m.duckdb", CFG)
    try:
        store.write_model_states([row])
        back = store.read(queries.model_states)["model-00"]
    finally:
        store.close()
    assert (back.records, back.evaluations, back.old_events, back.evaluated) == (1300, 3, 4, 1200)
    assert back.releases == ms.publication.saved()
    assert back.certified == json.loads(ms.certified.saved())


@pytest.mark.parametrize(("start", "size"), [(0, 250), (90, 25), (95, 5), (0, 0), (30, 370)])
def test_records_enter_the_window_in_order_stopping_at_each_hop_point(start, size):
    """Whatever the batch's size and where the stream stands, the window stops at every
    multiple of the hop, and only there, with exactly the records before it."""
    hop = 100
    w = ModelWindow("model-00", CFG)
    w.arrivals = start
    ms = ModelState(w)
    frame = synthetic_window(max(size, 1), models=1, seed=4).iloc[:size]
    frame = frame.assign(seq=np.arange(size), event_time=pd.Timestamp("2026-11-01", tz="UTC"))
    batch = RecordBatch.from_frame(frame, CFG)
    seen = [(at, ms.window.n) for at in ms.add_to_hops(batch, hop)]
    want = list(range((start // hop + 1) * hop, start + size + 1, hop))
    assert [at for at, _ in seen] == want
    # the records up to the hop point, no more (the window keeps its last 300)
    assert all(n == min(at - start, CFG.window.size) for at, n in seen)
    assert (w.arrivals, w.n, ms.since_eval) == (start + size, min(size, 300), size)
