"""End-to-end check of the local Kafka broker from deploy/kafka/kafka.sh.

The broker is the session-wide one of tests/support/kafka.py (shared with every Kafka test
module): a real single-node Kafka 4.x (KRaft) broker provisioned from Maven Central jars and
started on a free 127.0.0.1 port. If it cannot be provisioned or started the test FAILS: a
missing broker must never pass silently as a skip.
"""

from __future__ import annotations

import time
import uuid
import warnings

with warnings.catch_warnings():
    # kafka-python 3 loads its protocol schemas through the deprecated
    # importlib.resources.read_text/open_text: ~200 DeprecationWarnings at import time.
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.serializer import DefaultSerializer, JsonSerializer


N_MESSAGES = 1_000
N_PARTITIONS = 3


def _create_topic(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-admin")
    try:
        admin.create_topics({name: {"num_partitions": N_PARTITIONS, "replication_factor": 1}})
        admin.wait_for_topics([name], timeout_ms=30_000)
    finally:
        admin.close()


def _consumer(bootstrap: str, group: str, topic: str) -> KafkaConsumer:
    return KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"test-{group}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        value_deserializer=JsonSerializer(),
        max_poll_records=250,
    )


def test_produce_consume_commit_roundtrip(kafka_broker: str) -> None:
    topic = f"vfr-test-{uuid.uuid4().hex[:10]}"
    group = f"vfr-test-group-{uuid.uuid4().hex[:10]}"
    _create_topic(kafka_broker, topic)
    partitions = [TopicPartition(topic, p) for p in range(N_PARTITIONS)]

    # --- produce 1,000 JSON messages, keyed so that they spread over all partitions
    producer = KafkaProducer(
        bootstrap_servers=kafka_broker,
        acks="all",
        linger_ms=5,
        key_serializer=DefaultSerializer(),
        value_serializer=JsonSerializer(),
    )
    try:
        futures = [
            producer.send(topic, key=f"k{i}", value={"id": i, "score": i / N_MESSAGES})
            for i in range(N_MESSAGES)
        ]
        producer.flush(timeout=60)
        metas = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    assert {m.partition for m in metas} == set(range(N_PARTITIONS))

    # --- consume everything back in a consumer group with manual commits
    consumer = _consumer(kafka_broker, group, topic)
    seen: list[tuple[int, int, dict]] = []
    try:
        deadline = time.monotonic() + 60
        while len(seen) < N_MESSAGES and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                seen.extend((tp.partition, r.offset, r.value) for r in records)
        # Let any duplicate that would follow surface before checking.
        for _ in range(3):
            for tp, records in consumer.poll(timeout_ms=300).items():
                seen.extend((tp.partition, r.offset, r.value) for r in records)

        ids = sorted(v["id"] for _, _, v in seen)
        assert len(seen) == N_MESSAGES, f"got {len(seen)} messages, want {N_MESSAGES}"
        assert ids == list(range(N_MESSAGES)), "messages lost or duplicated"
        assert len({(p, o) for p, o, _ in seen}) == N_MESSAGES
        assert all(v["score"] == v["id"] / N_MESSAGES for _, _, v in seen)

        consumer.commit()
        end = consumer.end_offsets(partitions)
        assert sum(end.values()) == N_MESSAGES
        committed = {tp: consumer.committed(tp) for tp in partitions}
        assert committed == end
    finally:
        consumer.close()

    # --- a second member of the same group resumes at the committed offsets: nothing new
    again = _consumer(kafka_broker, group, topic)
    try:
        extra: list[object] = []
        deadline = time.monotonic() + 30
        while set(again.assignment()) != set(partitions) and time.monotonic() < deadline:
            extra.extend(r for rs in again.poll(timeout_ms=300).values() for r in rs)
        assert set(again.assignment()) == set(partitions), "second consumer never got assigned"
        for _ in range(5):
            extra.extend(r for rs in again.poll(timeout_ms=300).values() for r in rs)
        assert extra == []
        assert {tp: again.position(tp) for tp in partitions} == end
    finally:
        again.close()
