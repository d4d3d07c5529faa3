"""The intake on a real DuckDB file's row layout: both paths judge a batch the same way.

tests/stream/test_columnar.py compares the two paths under hypothesis through the whole
pipeline; these tests pin the intake's own contract: what comes out of one call (rows,
positions, dead letters in order, outcomes) and which path took the batch.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from consumers.base import Origin
from monitor.config import config_from_mapping
from monitor.store import Store
from monitor.stream.intake import Intake
from monitor.stream.stats import PipelineStats
from tests.support.outcome_streams import T0, prediction_and_outcome, records

CFG = config_from_mapping(
    {"window": {"size": 1500, "hop_records": 400, "hop_seconds": 0},
     "models": [{"id": "model-00"}, {"id": "model-01"}]}
)  # fmt: skip
NOW = T0 + pd.Timedelta(days=30)


#: predictions in the batch (each followed by its outcome)
N = 12


def _batch(parse_faults: bool = True) -> list[bytes | None]:
    """Twelve predictions and their outcomes, then a fault of each kind the intake judges
    (``parse_faults``: also the ones only the per-message path judges)."""
    out: list[bytes | None] = []
    recs = records(N // 2, 2, seed=5)
    assert len(recs) == N
    for i, rec in enumerate(recs):
        p, o = prediction_and_outcome(rec, i, 1)
        out += [json.dumps(p).encode(), json.dumps(o).encode()]
    first, its_outcome = out[0], out[1]
    assert first is not None and its_outcome is not None  # the pairs above, no fault yet
    future = dict(json.loads(first), record_id="later", event_time="2099-01-01T00:00:00Z")
    late_outcome = dict(json.loads(its_outcome), event_time="2099-01-01T00:00:00Z")
    judged = [
        json.dumps({"model_id": "model-00"}).encode(),  # fields missing
        json.dumps(future).encode(),  # scored in the future: refused at admission
        json.dumps(late_outcome).encode(),  # an outcome known in the future: refused
    ]
    unparsed = [b"", b"{not json", None]  # empty, invalid JSON, a tombstone
    return [*out, *judged, *(unparsed if parse_faults else [])]


def _check(columnar: bool, store: Store):
    stats = PipelineStats()
    intake = Intake(CFG, store, stats)
    intake.columnar = columnar
    payloads = _batch()
    origins = [Origin("t", 0, k) for k in range(len(payloads))]
    return intake.check(payloads, origins, NOW, {"model-00", "model-01"}), stats


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "m.duckdb", CFG)
    yield s
    s.close()


def test_a_batch_leaves_as_rows_positions_dead_letters_and_outcomes(store):
    batch, stats = _check(True, store)
    assert batch.positions.tolist() == list(range(0, 2 * N, 2))  # the predictions
    assert batch.rows.num_rows == N
    assert batch.outcomes is not None
    assert batch.outcomes["position"].tolist() == list(range(1, 2 * N, 2))
    f = 2 * N  # the first fault's offset
    # the per-message path's order: decode faults, then validation faults and admission
    # refusals by position, then the outcomes' refusals
    assert [(d.reason, d.offset) for d in batch.dead] == [
        ("empty_payload", f + 3), ("invalid_json", f + 4), ("empty_payload", f + 5),
        ("missing:record_id", f), ("out_of_range:event_time", f + 1),
        ("out_of_range:event_time", f + 2),
    ]  # fmt: skip
    assert stats.batches == 0  # the pipeline counts batches; the intake, its paths
    assert stats.per_message_batches == 1  # unparsable payloads are the per-message path's


def test_both_paths_give_the_same_batch(store):
    """Without unparsable payloads the bulk path judges the batch itself, and agrees."""
    payloads = _batch(parse_faults=False)
    origins = [Origin("t", 0, k) for k in range(len(payloads))]
    got = {}
    for columnar in (True, False):
        stats = PipelineStats()
        intake = Intake(CFG, store, stats)
        intake.columnar = columnar
        got[columnar] = intake.check(payloads, origins, NOW, {"model-00", "model-01"})
        assert stats.per_message_batches == (0 if columnar else 1)
    bulk, each = got[True], got[False]
    assert np.array_equal(bulk.positions, each.positions)
    assert bulk.rows.to_pylist() == each.rows.to_pylist()
    assert [(d.reason, d.offset, d.payload) for d in bulk.dead] == [
        (d.reason, d.offset, d.payload) for d in each.dead
    ]
    assert bulk.outcomes is not None and each.outcomes is not None
    pd.testing.assert_frame_equal(
        bulk.outcomes.reset_index(drop=True), each.outcomes.reset_index(drop=True),
        check_dtype=False,
    )  # fmt: skip


def test_an_unknown_model_is_refused_by_admission_not_raised(store):
    payload = dict(json.loads(_batch()[0]), model_id="model-99")
    stats = PipelineStats()
    batch = Intake(CFG, store, stats).check(
        [json.dumps(payload).encode()], [Origin("t", 0, 0)], NOW, {"model-00", "model-01"}
    )
    assert batch.rows.num_rows == 0 and len(batch.dead) == 1
    assert batch.dead[0].reason == "unknown_model"
