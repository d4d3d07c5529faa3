"""A restart's rebuild on a real DuckDB file: what comes back is what the pipeline held.

The end-to-end restart equalities (a killed and restarted run stores what an
uninterrupted one does) are tests/stream/test_pipeline.py's and tests/scenarios'; these
pin the restore module's own pieces.
"""

from __future__ import annotations

import numpy as np
import pytest

from monitor.config import config_from_mapping
from monitor.core.jsonable import to_json
from monitor.store import Store
from monitor.stream.model_state import ModelState
from monitor.stream.pipeline import Pipeline
from monitor.stream.restore import (
    missing_hop_points,
    rebuilt_window,
    restore_models,
    window_frame,
)
from monitor.stream.window import ModelWindow
from tests.support.pipeline_runs import feed, scored_payloads

CFG = config_from_mapping(
    {"window": {"size": 500, "hop_records": 200, "hop_seconds": 0}, "axis1": {"K": 40},
     "models": [{"id": "model-00"}, {"id": "model-01"}]}
)  # fmt: skip


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    """A pipeline fed 1,300 records of two models (650 each: three hops), its file closed."""
    path = tmp_path_factory.mktemp("restore") / "m.duckdb"
    store = Store(path, CFG)
    pipe = Pipeline(CFG, store)
    feed(pipe, scored_payloads(n=650, models=2))
    held = {m: pipe._models[m] for m in pipe.owned_models()}
    pipe.close()
    store.close()
    return path, held


def test_every_model_comes_back_as_the_pipeline_held_it(fed):
    path, held = fed
    store = Store(path, CFG)
    try:
        restored = restore_models(store, CFG, lambda m: True)
    finally:
        store.close()
    assert sorted(restored) == sorted(held) == ["model-00", "model-01"]
    for m, ms in restored.items():
        was = held[m]
        window = (ms.window.n, ms.window.arrivals)
        assert window == (was.window.n, was.window.arrivals) == (500, 650)
        assert np.array_equal(ms.window.seqs(), was.window.seqs())
        assert (ms.evaluations, ms.evaluated) == (was.evaluations, was.evaluated) == (3, 600)
        assert {k: t.to_dict() for k, t in ms.trackers.items()} == {
            k: t.to_dict() for k, t in was.trackers.items()
        }
        # as stored (NaN figures of a not-evaluable cell are equal only as stored JSON)
        assert {k: to_json(c.to_dict()) for k, c in ms.latest.items()} == {
            k: to_json(c.to_dict()) for k, c in was.latest.items()
        }
        assert ms.publication.saved() == was.publication.saved()
        assert ms.certified.saved() == was.certified.saved()


def test_only_the_wanted_models_are_rebuilt(fed):
    path, _ = fed
    store = Store(path, CFG)
    try:
        restored = restore_models(store, CFG, lambda m: m == "model-01")
    finally:
        store.close()
    assert list(restored) == ["model-01"]


def test_a_window_rebuilt_at_a_past_position_holds_the_records_it_held_then(fed):
    path, _ = fed
    store = Store(path, CFG)
    try:
        at_400 = rebuilt_window(store, CFG, "model-00", 400, 400)
        frame = window_frame(store, CFG, "model-00", 400)
    finally:
        store.close()
    assert at_400.arrivals == 400 and at_400.n == 400 == len(frame)
    assert np.array_equal(at_400.seqs(), np.sort(frame["seq"].to_numpy()))


@pytest.mark.parametrize(
    ("evaluated", "arrivals", "want"),
    [(600, 650, []), (200, 650, [400, 600]), (None, 650, []), (0, 399, [200]), (400, 400, [])],
)
def test_the_hop_points_without_an_evaluation_are_found_in_order(evaluated, arrivals, want):
    """``None``: a file written before the position evaluated was kept (nothing is known
    missing, as before)."""
    w = ModelWindow("m", CFG)
    w.arrivals = arrivals
    ms = ModelState(w, evaluated=evaluated)
    assert missing_hop_points({"m": ms}, 200) == [("m", end) for end in want]
