"""A partition handed to another member of the consumer group is rebuilt from the topic.

Real broker (tests/support/kafka.py), real pipelines and DuckDB files, in-process. One
member stores the first half of a stream and leaves; a second member with an empty store
joins the group and is given the partition at the committed offset. Without a rebuild it
would compute every window from the second half only; with it, it replays the history
its store lacks, then goes on, and its numbered window results equal an uninterrupted
single-member run's. The first member, back later, replays exactly the part it missed.
"""

from __future__ import annotations

import logging
import threading
import uuid

import pandas as pd
import pytest

from consumers.kafka_source import KafkaSource
from consumers.kafka_tools import ensure_topic, produce_records
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.config.sources import KafkaConfig
from monitor.store import Store, queries
from monitor.stream.pipeline import Pipeline
from tests.support.service_process import reference_run, stream_results

CFG = config_from_mapping(
    {
        "window": {"size": 400, "hop_records": 100, "hop_seconds": 0},
        "axis1": {"K": 60},
        "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}},
    }
)
N = 1200  # 600 per model, 2 models, one partition


def _records() -> list[dict]:
    df = synthetic_window(N // 2, models=2, seed=21).drop(columns=["decision"])
    df["event_time"] = "2026-11-01T00:00:00Z"
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    return df.to_dict("records")


def _member(path, kcfg: KafkaConfig, messages: int, horizon: float | None = 90) -> tuple:
    """Consume ``messages`` (handed to the sink, replay included) as one group member."""
    store = Store(path, CFG)
    pipe = Pipeline(CFG, store)
    with KafkaSource(kcfg, pipe, horizon_days=horizon) as source:
        stop = threading.Event()
        if not messages:  # poll (join the group, get the partition) for a few seconds
            threading.Timer(5.0, stop.set).start()
        handed = source.run(stop, max_messages=messages or None)
        health = source.health()
    pipe.flush()
    return store, handed, health


def test_a_partition_moved_to_a_new_member_is_rebuilt_from_the_topic(
    kafka_broker, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="consumers.kafka_source")
    records = _records()
    topic = f"rebuild-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, topic, partitions=1)
    produce_records(kafka_broker, topic, records)
    kcfg = KafkaConfig(bootstrap_servers=(kafka_broker,), topics=(topic,),
                       group_id=f"g-{topic}", max_batch=100, poll_timeout_ms=200)  # fmt: skip
    ref = reference_run(CFG, tmp_path / "ref.duckdb", records, batch=100)
    expected = stream_results(ref)
    ref.close()

    # member A stores the first half, commits and leaves
    a, handed, _ = _member(tmp_path / "a.duckdb", kcfg, N // 2)
    assert handed == N // 2
    a.close()

    # member B, empty store: replays offsets 0..599 it lacks, then 600..1199
    b, handed, health = _member(tmp_path / "b.duckdb", kcfg, N)
    assert handed == N and health == (True, "ok")
    assert f"rebuilding {topic}:0 from offset 0 (committed {N // 2})" in caplog.text
    assert f"rebuilt {topic}:0 up to offset {N // 2}" in caplog.text
    assert b.read(queries.counts)["discharges"] == N
    pd.testing.assert_frame_equal(stream_results(b), expected)
    b.close()

    # the same without the rebuild: B's windows would start half way (the failure it fixes)
    caplog.clear()
    group2 = kcfg.model_copy(update={"group_id": f"g2-{topic}"})
    c, _, _ = _member(tmp_path / "c.duckdb", group2, N // 2, horizon=None)
    c.close()
    d, handed, _ = _member(tmp_path / "d.duckdb", group2, N // 2, horizon=None)
    assert handed == N // 2 and "rebuilding" not in caplog.text
    assert len(stream_results(d)) < len(expected)
    d.close()

    # member A comes back on the first group (offset committed at 1200): it lacks 600..1199
    # only, and replays exactly those
    caplog.clear()
    a, handed, health = _member(tmp_path / "a.duckdb", kcfg, N // 2)
    assert handed == N // 2 and health == (True, "ok")
    assert f"rebuilding {topic}:0 from offset {N // 2} (committed {N})" in caplog.text
    pd.testing.assert_frame_equal(stream_results(a), expected)
    a.close()

    # and B, which holds everything up to the committed offset, replays nothing
    caplog.clear()
    b, handed, _ = _member(tmp_path / "b.duckdb", kcfg, 0)
    b.close()
    assert handed == 0 and f"partitions assigned: [TopicPartition(topic='{topic}'" in caplog.text
    assert "rebuilding" not in caplog.text


def test_stored_through_offsets_only_move_forward_and_a_v5_file_gains_them(tmp_path):
    import duckdb

    from consumers.base import Origin

    db = tmp_path / "old.duckdb"
    Store(db, CFG).close()
    with duckdb.connect(str(db)) as c:  # a file written before v6
        for stmt in ("DROP TABLE source_offsets", "DROP TABLE results_outbox",
                     "DROP TABLE model_partitions", "DROP TABLE fleet_axis_keys",
                     "DROP SEQUENCE results_outbox_id",
                     "DELETE FROM schema_migrations WHERE version >= 6"):  # fmt: skip
            c.execute(stmt)
    store = Store(db, CFG)
    assert store.read(queries.source_offsets) == {}
    with store.transaction():
        store.write_source_offsets([Origin("t", 0, 5), Origin("t", 0, 9), Origin("t", 1, 2)])
    with store.transaction():  # a replay of older messages never moves an offset back
        store.write_source_offsets([Origin("t", 0, 3), Origin("t", 1, 4)])
    assert store.read(queries.source_offsets) == {("t", 0): 10, ("t", 1): 5}
    with store.transaction():  # known partitions (one UPDATE) and a new one (an insert)
        store.write_source_offsets([Origin("t", 1, 6), Origin("t", 2, 0), Origin("t", 0, 1)])
    assert store.read(queries.source_offsets) == {("t", 0): 10, ("t", 1): 7, ("t", 2): 1}
    with pytest.raises(RuntimeError), store.transaction():  # rolled back: nothing moves
        store.write_source_offsets([Origin("t", 3, 8), Origin("t", 1, 50)])
        raise RuntimeError("rollback")
    assert store.read(queries.source_offsets) == {("t", 0): 10, ("t", 1): 7, ("t", 2): 1}
    store.close()
