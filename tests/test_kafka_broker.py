"""End-to-end check of the local Kafka broker from deploy/kafka/kafka.sh.

A real single-node Kafka 4.x (KRaft) broker is provisioned from Maven Central jars (cached
between runs), started on a free 127.0.0.1 port in a temporary directory for the whole test
session, and stopped at the end. If the broker cannot be provisioned or started the test
FAILS: a missing broker must never pass silently as a skip.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

with warnings.catch_warnings():
    # kafka-python 3 loads its protocol schemas through the deprecated
    # importlib.resources.read_text/open_text: ~200 DeprecationWarnings at import time.
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.serializer import DefaultSerializer, JsonSerializer

KAFKA_SH = Path(__file__).resolve().parents[1] / "deploy" / "kafka" / "kafka.sh"
N_MESSAGES = 1_000
N_PARTITIONS = 3


def _free_ports(n: int) -> list[int]:
    """n distinct ports that are free on 127.0.0.1 right now (kernel-chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _run_script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKA_PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(KAFKA_SH), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address ("127.0.0.1:PORT") of a broker that lives for the test session."""
    try:
        prov = _run_script("provision", timeout=900)
    except subprocess.TimeoutExpired:
        pytest.fail(f"Kafka provisioning ({KAFKA_SH} provision) timed out after 900 s")
    if prov.returncode != 0:
        pytest.fail(
            f"could not provision the Kafka broker ({KAFKA_SH} provision, "
            f"exit {prov.returncode}); Maven Central must be reachable for the first run.\n"
            f"{_tail(prov.stderr)}"
        )

    run_dir = tmp_path_factory.mktemp("kafka")
    port, controller_port = _free_ports(2)
    try:
        try:
            start = _run_script(
                "start",
                "--port", str(port),
                "--controller-port", str(controller_port),
                "--dir", str(run_dir),
                "--partitions", str(N_PARTITIONS),
                "--timeout", "120",
                timeout=240,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            pytest.fail(f"kafka.sh start timed out; broker logs in {run_dir}/logs")
        if start.returncode != 0:
            pytest.fail(
                f"could not start the Kafka broker (exit {start.returncode}); "
                f"logs in {run_dir}/logs\n{_tail(start.stderr)}"
            )
        bootstrap = start.stdout.strip().splitlines()[-1]
        assert bootstrap == f"127.0.0.1:{port}", start.stdout
        yield bootstrap
    finally:
        _run_script("stop", "--dir", str(run_dir), timeout=120)


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
        extra = []
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
