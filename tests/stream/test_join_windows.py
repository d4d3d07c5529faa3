"""A batch's outcomes on their way to the windows: the cursor's slicing and the clocks.

Each join rule, through a real store, is tests/stream/test_join_rules.py's; the whole path
(outcomes later, batching and restarts change nothing) tests/stream/test_pipeline.py's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.stream.join_windows import JoinCursor, advance_clocks
from monitor.stream.window import ModelWindow, RecordBatch

CFG = config_from_mapping(
    {"window": {"size": 500, "hop_records": 100, "hop_seconds": 0},
     "models": [{"id": "model-00"}]}
)  # fmt: skip


def _window_awaiting(n: int) -> ModelWindow:
    """A window of ``n`` predictions (seq 0..n-1), none with its outcome yet."""
    frame = synthetic_window(n, models=1, seed=7)
    frame = frame.assign(
        seq=np.arange(n), event_time=pd.Timestamp("2026-11-01", tz="UTC"), label=-1
    )
    w = ModelWindow("model-00", CFG)
    w.add(RecordBatch.from_frame(frame, CFG))
    return w


def test_the_cursor_joins_up_to_each_position_once_in_seq_order():
    w = _window_awaiting(50)
    # five joins, by label_pos, of predictions out of seq order
    seq = np.array([9, 3, 7, 1, 5], np.int64)
    pos = np.array([10, 20, 20, 30, 40], np.int64)
    cursor = JoinCursor((seq, np.array([1, 0, 1, 0, 1], np.int8), np.zeros(5), pos))
    assert w.with_outcome == 0
    cursor.apply(w, 5)  # none counts before 10
    assert w.with_outcome == 0 and cursor.done == 0
    joined = cursor.apply(w, 20)  # label_pos <= 20: three
    assert w.with_outcome == 3 and cursor.done == 3
    assert joined is not None  # in seq order, with the records they joined (certified blocks)
    label_pos, found, records = joined
    assert label_pos.tolist() == [20, 20, 10] and found.all()
    assert records is not None and records.seq.tolist() == [3, 7, 9]
    assert records.label.tolist() == [0, 1, 1]
    assert cursor.apply(w, 20) is None  # again: nothing twice
    assert w.with_outcome == 3 and cursor.done == 3
    cursor.apply(w, None)  # the rest
    assert w.with_outcome == 5 and cursor.done == 5
    gone = JoinCursor((np.array([999]), np.array([1]), np.zeros(1), np.array([50])))
    label_pos, found, records = gone.apply(w, None) or (None, None, None)
    assert label_pos is not None and not found.any() and records is None  # not in the window


def test_a_models_clock_moves_to_its_latest_scoring_time_and_never_back():
    clocks = {"a": 50, "c": 7}
    models = pa.array(["a", "b", "a", "b", "c"])
    advance_clocks(clocks, models, np.array([10, 20, 60, 5, 3], np.int64))
    assert clocks == {"a": 60, "b": 20, "c": 7}
    advance_clocks(clocks, pa.chunked_array([pa.array(["a"])]), np.array([1], np.int64))
    assert clocks["a"] == 60
