"""The fleet's pieces without a broker: the results outbox and its messages, the view's
upserts, and a member dropping (and getting back) the models of a revoked partition.

Real DuckDB files and the real pipeline; the broker part is tests/scenarios/test_fleet_kafka.py.
"""

from __future__ import annotations

import json
import math
import random

import pandas as pd
import pytest

from batch_axes.axis2 import Axis2Cell
from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.service.fleet_view import FleetView
from monitor.store import Store, queries
from monitor.store.results_messages import axis_result_message, parse_message
from monitor.stream.pipeline import Pipeline
from tests.support.service_process import stream_results, verdict_events

CFG = config_from_mapping(
    {
        "window": {"size": 600, "hop_records": 150, "hop_seconds": 0},
        "axis1": {"K": 60},
        "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}},
    }
)


def _records(n: int = 1800, models: int = 3, seed: int = 5) -> list[bytes]:
    df = synthetic_window(n // models, models=models, seed=seed).drop(columns=["decision"])
    df["event_time"] = "2026-11-01T00:00:00Z"
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    return [json.dumps(r).encode() for r in df.to_dict("records")]


def _partition(payload: bytes) -> int:
    """The test's partitioner: one model, one partition (as producers keyed by model)."""
    return int(json.loads(payload)["model_id"].rsplit("-", 1)[1])


def _feed(pipe: Pipeline, payloads: list[bytes], batch: int = 97, start: int = 0) -> None:
    for i in range(start, len(payloads), batch):
        chunk = payloads[i : i + batch]
        pipe.ingest_batch(chunk, [Origin("t", _partition(p), i + k) for k, p in enumerate(chunk)])
    pipe.flush()


def _outbox(store: Store) -> list[tuple[bytes, bytes]]:
    cur = store.cursor()
    try:
        rows = queries.outbox_batch(cur, 1_000_000)
    finally:
        cur.close()
    return [(k.encode(), v.encode()) for _, k, v in rows]


def test_results_published_through_the_outbox_rebuild_the_same_tables(tmp_path):
    """Every window result, event and axis result goes to the outbox in its own
    transaction; applied to a view's file (twice, in shuffled batches) they give the
    same window results and events as the instance's own file."""
    src = Store(tmp_path / "src.duckdb", CFG)
    src.outbox = True
    pipe = Pipeline(CFG, src)
    payloads = _records()
    _feed(pipe, payloads)
    cell = Axis2Cell("model-00", "DI", "race", 600, math.inf, False, True, ())
    src.write_axis_results("axis2", "model-00", 600, [cell.to_dict()],
                           pd.Timestamp("2026-11-02", tz="UTC"), position=600)  # fmt: skip
    messages = _outbox(src)
    kinds = [parse_message(k, v).kind for k, v in messages]
    n_windows = src.read(queries.counts)["window_results"]
    assert kinds.count("window") == n_windows > 0
    assert kinds.count("event") == src.read(queries.counts)["events"] > 0
    assert kinds.count("axis") == 1

    view = FleetView(CFG, str(tmp_path / "view.duckdb"))
    try:
        rng = random.Random(1)
        for _ in range(2):  # redelivered: nothing doubles
            for i in range(0, len(messages), 50):
                chunk = messages[i : i + 50]
                rng.shuffle(chunk)
                view.apply(chunk)
        view.apply([(b"x", b"not json"), (None, b"{}"), (b"k", b'{"kind": "other"}')])
        assert view.skipped == 3
        got = view.store
        pd.testing.assert_frame_equal(stream_results(got), stream_results(src))
        # events: same content (ids are the view's own); the view orders them by arrival
        assert sorted(verdict_events(got)) == sorted(verdict_events(src))
        assert got.read(queries.counts)["events"] == src.read(queries.counts)["events"]
        assert got.read(queries.counts)["axis_results"] == 1
        cells = view.cells()
        assert len(cells) == 3 * len(CFG.metrics) * len(CFG.attributes)
        assert {c["model_id"] for c in view.models()} == {"model-00", "model-01", "model-02"}
        assert view.axes("axis2", "model-00", 10, 0)[0]["cohort_n"] == 600
        assert view.axes("axis2", "nobody", 10, 0) is None
        # an axis result recomputed at the same stream position replaces its twin
        key, value = axis_result_message(
            "axis2", "model-00", 600, pd.Timestamp("2026-11-03", tz="UTC"), 600, "[]")
        view.apply([(key.encode(), value.encode())])
        assert got.read(queries.counts)["axis_results"] == 1
        view.status_page()  # starts the drawing, in the background
        assert view.page.wait_drawn(120)
        assert "Fairness reliability report" in view.status_page()
    finally:
        view.close()

    # and the outbox forgets what was acknowledged
    cur = src.cursor()
    ids = [i for i, _, _ in queries.outbox_batch(cur, 10**6)]
    src.outbox_done(ids[:-1], cur)
    assert [i for i, _, _ in queries.outbox_batch(cur, 10**6)] == ids[-1:]
    src.outbox_done(ids[-1:], cur)
    cur.close()
    assert _outbox(src) == []
    src.close()


def test_a_single_service_writes_no_outbox(tmp_path):
    store = Store(tmp_path / "one.duckdb", CFG)
    _feed(Pipeline(CFG, store), _records(600))
    assert store.read(queries.counts)["window_results"] > 0 and _outbox(store) == []
    store.close()


def test_a_revoked_partition_is_dropped_and_restored_when_it_comes_back(tmp_path):
    """forget_partitions drops the partition's models from memory (so from the exported
    state); when their records come again they are restored from the file, and the
    results equal an uninterrupted run's. keep_partitions drops what a restarted member
    no longer owns."""
    payloads = _records()
    ref = Store(tmp_path / "ref.duckdb", CFG)
    _feed(Pipeline(CFG, ref), payloads)

    store = Store(tmp_path / "m.duckdb", CFG)
    pipe = Pipeline(CFG, store)
    half = len(payloads) // 2
    _feed(pipe, payloads[:half])
    assert pipe.owned_models() == ["model-00", "model-01", "model-02"]
    assert pipe.forget_partitions([("t", 1)]) == ["model-01"]
    assert pipe.owned_models() == ["model-00", "model-02"]
    assert not any(c.key[0] == "model-01" for c in pipe.latest_cells())
    assert "model-01" not in pipe.axes.axis2_outcomes
    _feed(pipe, payloads, start=half)  # model-01's records arrive again
    assert pipe.owned_models() == ["model-00", "model-01", "model-02"]
    pd.testing.assert_frame_equal(stream_results(store), stream_results(ref))
    assert verdict_events(store) == verdict_events(ref)
    store.close()

    # a restart: the file remembers each model's partition
    store = Store(tmp_path / "m.duckdb", CFG)
    pipe = Pipeline(CFG, store)
    assert pipe.keep_partitions([("t", 0), ("t", 2)]) == ["model-01"]
    assert pipe.owned_models() == ["model-00", "model-02"]
    assert pipe.keep_partitions([("t", 0), ("t", 2)]) == []
    store.close()
    ref.close()


@pytest.mark.parametrize("bad", [b"[1]", b'{"kind": "window"}'])
def test_a_malformed_results_message_is_skipped_and_counted(tmp_path, bad):
    view = FleetView(CFG, str(tmp_path / "v.duckdb"))
    try:
        view.apply([(b'["window"]', bad)])
        assert view.skipped == 1 and view.applied == 0
    finally:
        view.close()


def test_a_row_committed_while_the_relay_publishes_is_not_forgotten(tmp_path):
    """Outbox ids are drawn at insert, not at commit: an ingest transaction can commit a
    lower id after the relay read a higher one. Deleting "ids up to the last read" lost
    such rows (21 of an evaluation's 28 cells, found by tests/scenarios/test_fleet_kafka.py);
    exactly the published ids are deleted now."""
    store = Store(tmp_path / "o.duckdb", CFG)
    relay_cur, job_cur = store.cursor(), store.cursor()
    with store.transaction():  # the ingest transaction: draws the lower id first
        store._to_outbox([("k-ingest", "{}")])
        job_cur.execute("INSERT INTO results_outbox (key, value) VALUES ('k-job', '{}')")
        seen = queries.outbox_batch(relay_cur, 100)  # the relay reads: the job's row only
        assert [k for _, k, _ in seen] == ["k-job"]
    store.outbox_done([i for i, _, _ in seen], relay_cur)  # after the ingest committed
    assert [k for _, k, _ in queries.outbox_batch(relay_cur, 100)] == ["k-ingest"]
    relay_cur.close()
    job_cur.close()
    store.close()


def test_view_without_a_results_topic_names_the_setting(tmp_path, capsys):
    from monitor.cli import main

    assert main(["view", "--db", str(tmp_path / "v.duckdb")]) == 2
    assert "kafka.bootstrap_servers" in capsys.readouterr().err
    cfg = tmp_path / "k.toml"
    cfg.write_text('[kafka]\nbootstrap_servers = "127.0.0.1:9"\n')
    assert main(["view", "--config", str(cfg), "--db", str(tmp_path / "v.duckdb")]) == 2
    assert "kafka.results_topic" in capsys.readouterr().err
