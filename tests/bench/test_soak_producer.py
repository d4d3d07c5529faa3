"""The soak's producer (monitor.bench.soak_producer) against the session's real broker.

A broker is unavoidable: producing is all the module does. One second at 400 records/s:
what it says it sent is what the topic holds, paced, keyed by model, each record a valid
scored discharge with a unique id and a current event time.
"""

from __future__ import annotations

import json
import queue
import time
import uuid

import pandas as pd

from consumers.kafka_source import _kafka
from consumers.kafka_tools import ensure_topic
from monitor.bench.soak_producer import produce

RATE, SECONDS = 400.0, 1.0


def _read_all(bootstrap: str, topic: str, n: int) -> list[tuple[bytes, bytes]]:
    kafka = _kafka()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = [kafka.TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        got: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.key, r.value) for r in records]
        # nothing beyond what was counted
        assert sum(consumer.end_offsets(parts).values()) == len(got)
        return got
    finally:
        consumer.close()


def test_what_it_counts_is_what_the_topic_holds(kafka_broker):
    topic = f"soak-{uuid.uuid4().hex[:10]}"
    assert ensure_topic(kafka_broker, topic, 3) is True
    out: queue.Queue[int] = queue.Queue()
    start = time.monotonic()
    produce(kafka_broker, topic, RATE, SECONDS, out)
    took = time.monotonic() - start
    sent = out.get_nowait()
    # paced: chunks of 40 (10 per model) until a second has passed, never ahead of the rate
    assert sent % 40 == 0 and RATE * SECONDS * 0.5 <= sent <= RATE * SECONDS + 40, sent
    assert took >= SECONDS

    messages = _read_all(kafka_broker, topic, sent)
    assert len(messages) == sent
    records = pd.DataFrame([json.loads(v) for _, v in messages])
    assert records["record_id"].is_unique
    assert [k.decode() for k, _ in messages] == records["model_id"].tolist()
    assert sorted(records["model_id"].unique()) == [f"model-0{i}" for i in range(4)]
    assert (records["model_id"].value_counts() == sent // 4).all()
    assert "decision" not in records.columns  # the service decides, not the producer
    assert {"score", "label", "race", "sex", "hospital_id"} <= set(records.columns)
    at = pd.to_datetime(records["event_time"], format="%Y-%m-%dT%H:%M:%SZ", utc=True)
    now = pd.Timestamp.now(tz="UTC")
    assert ((now - at) < pd.Timedelta(minutes=2)).all() and (at <= now).all()
