"""The certified blocks counted in memory (monitor/stream/certified_blocks.py) against the
file's read of the same blocks (Store.block_records, the definition), on random streams
through the real pipeline: predictions with their label or without, outcomes later,
before their prediction or never, replays, old events, windows small enough that outcomes
come for records the window no longer holds."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumers.base import Origin
from monitor.config import config_from_mapping
from monitor.store import Store
from monitor.stream.certified import ModelCertified
from monitor.stream.certified_blocks import Block, BlockBook, cube, read_block
from monitor.stream.pipeline import Pipeline
from monitor.stream.window import RecordBatch
from tests.support.outcome_streams import T0, records


def _stream(rng: np.random.Generator, n: int, labelled: float, old: float) -> list[bytes]:
    """``n`` records of two models: a share ``labelled`` scored with their label, the
    others as a prediction and (mostly) an outcome some messages later or earlier; a
    share ``old`` scored 40 days before the others; a few messages sent twice."""
    out: list[tuple[float, dict]] = []
    for i, rec in enumerate(records(n, 2, int(rng.integers(0, 1000)))):
        scored = T0 + pd.Timedelta(minutes=i) - pd.Timedelta(days=40 * (rng.random() < old))
        at = scored.strftime("%Y-%m-%dT%H:%M:%SZ")
        if rng.random() < labelled:
            out.append((i, {**rec, "event_time": at}))
            continue
        pred = {k: v for k, v in rec.items() if k != "label"}
        out.append((i, {**pred, "kind": "prediction", "event_time": at}))
        if rng.random() < 0.9:  # the outcome: later (mostly), or before its prediction
            known = (pd.Timestamp(at) + pd.Timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
            outcome = {"kind": "outcome", "model_id": rec["model_id"],
                       "record_id": rec["record_id"], "label": int(rec["label"]),
                       "event_time": known}  # fmt: skip
            out.append((i + float(rng.choice([-3.5, 0.5, 40.5, 150.5])), outcome))
    out.sort(key=lambda m: m[0])
    msgs = [m for _, m in out]
    again = [msgs[int(j)] for j in rng.integers(0, len(msgs), len(msgs) // 20)]
    return [json.dumps(m).encode() for m in msgs + again]


def _same(a: Block, b: Block) -> None:
    assert (a.first_ns, a.end_ns) == (b.first_ns, b.end_ns)
    for kind in ("free", "joined"):
        x, y = getattr(a, kind), getattr(b, kind)
        assert x.keys() == y.keys()
        for attr in x:
            np.testing.assert_array_equal(x[attr], y[attr], err_msg=f"{kind} {attr}")


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    hop=st.sampled_from([20, 50]),
    window=st.sampled_from([{"size": 60}, {"size": 400}, {"kind": "time", "days": 10}]),
    labelled=st.sampled_from([0.0, 0.5, 1.0]),
    old=st.sampled_from([0.0, 0.1]),
    batch=st.integers(20, 300),
    worker=st.booleans(),
)
def test_blocks_counted_in_memory_are_the_files(
    tmp_path_factory, seed, hop, window, labelled, old, batch, worker
):
    """Every block the certified cells take or replay from memory equals the file's read
    of it (counts, clock); the others are read from the file."""
    cfg = config_from_mapping(
        {"window": {**window, "hop_records": hop, "hop_seconds": 0},
         "axis1": {"K": 20}, "service": {"evaluation_worker": worker},
         "models": [{"id": "model-00"}, {"id": "model-01"}]}
    )  # fmt: skip
    seen: list[tuple[str, int, int, Block]] = []
    reads: list[tuple[str, int, int]] = []
    block = ModelCertified._block

    def watched(self, source, after, upto, take=False):
        got = self.blocks.peek(after, upto)
        if got is None:
            reads.append((self.model_id, after, upto))
        else:
            seen.append((self.model_id, after, upto, got))
        return block(self, source, after, upto, take)

    store = Store(tmp_path_factory.mktemp("blocks") / "m.duckdb", cfg)
    payloads = _stream(np.random.default_rng(seed), 300, labelled, old)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ModelCertified, "_block", watched)
        pipe = Pipeline(cfg, store)
        for i in range(0, len(payloads), batch):
            chunk = payloads[i : i + batch]
            pipe.ingest_batch(chunk, [Origin("t", 0, i + k) for k in range(len(chunk))])
        pipe.flush()
    for model, after, upto, got in seen:
        _same(got, read_block(store, model, after, upto, cfg))
    taken = {(m, a, u) for m, a, u, _ in seen} | set(reads)
    assert len(taken) >= 2 * (150 // hop) - 2  # every hop's block, once at least
    assert seen  # (a window of 60 loses the records of the outcomes 150 messages late)
    store.close()


def test_a_block_is_read_from_the_file_when_memory_lacks_part_of_it():
    """A block whose first positions came before this process, an outcome whose record
    is not in memory, a gap: not whole, so not used."""
    cfg = config_from_mapping({"window": {"size": 100, "hop_records": 10}})
    book = BlockBook(cfg)
    batch = _batch(cfg, 10, label=-1)
    book.add_predictions(batch.take(slice(0, 4)), 13)  # a restart at 13: block (13, 20]
    book.add_predictions(batch.take(slice(4, 10)), 17)  # ... positions 14-17 missing
    assert book.peek(10, 20) is None and book.peek(13, 20) is None
    book.add_predictions(batch.take(slice(0, 10)), 20)
    assert book.peek(20, 30) is not None
    joined = _batch(cfg, 1, label=1)  # as the window hands it back: with its label
    book.add_outcomes(np.array([25, 31]), np.array([True, False]), joined, 30)
    assert book.peek(20, 30) is not None  # the outcome at 25 found its record
    book.add_predictions(batch, 30)
    assert book.peek(30, 40) is None  # the one at 31 did not
    assert book.take(20, 30) is not None and book.pending() == {40: False}


def test_the_blocks_clock_and_counts():
    cfg = config_from_mapping({"window": {"size": 100, "hop_records": 10}})
    book = BlockBook(cfg)
    batch = _batch(cfg, 10, label=1)
    book.add_predictions(batch.take(slice(0, 3)), 0)
    book.add_predictions(batch.take(slice(3, 10)), 3)
    got = book.take(0, 10)
    assert got is not None
    assert (got.first_ns, got.end_ns) == (int(batch.event_time[0]), int(batch.event_time[-1]))
    for a, g in batch.groups.items():
        assert got.joined[a].sum() == 10  # stored with their label: outcomes of the block
        np.testing.assert_array_equal(got.free[a][:, 1, :], 0)  # label-free: label 0
        want = cube(g, np.zeros(10, np.int64), batch.decision, got.free[a].shape[0])
        np.testing.assert_array_equal(got.free[a], want)
    assert book.pending() == {}


def _batch(cfg, n: int, label: int) -> RecordBatch:
    frame = pd.DataFrame(records(n, 1, 5))
    frame["seq"] = np.arange(n)
    frame["event_time"] = [T0 + pd.Timedelta(minutes=i) for i in range(n)]
    frame["label"] = label
    frame["decision"] = np.arange(n) % 2
    return RecordBatch.from_frame(frame, cfg)


@pytest.mark.parametrize("labelled", [0.0, 1.0])
def test_a_pipeline_takes_its_blocks_from_memory(tmp_path, monkeypatch, labelled):
    """A plain run reads no block from the file: each is counted as its records come."""
    cfg = config_from_mapping(
        {"window": {"size": 400, "hop_records": 50, "hop_seconds": 0}, "axis1": {"K": 20},
         "service": {"evaluation_worker": False},
         "models": [{"id": "model-00"}, {"id": "model-01"}]}
    )  # fmt: skip
    store = Store(tmp_path / "m.duckdb", cfg)
    monkeypatch.setattr(store, "block_records", _no_read)
    pipe = Pipeline(cfg, store)
    payloads = _stream(np.random.default_rng(1), 400, labelled, 0.0)
    for i in range(0, len(payloads), 97):
        chunk = payloads[i : i + 97]
        pipe.ingest_batch(chunk, [Origin("t", 0, i + k) for k in range(len(chunk))])
    assert all(ms.certified.position >= 150 for ms in pipe._models.values())


def _no_read(*args):
    raise AssertionError("a block read from the file")
