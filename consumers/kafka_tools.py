"""Kafka helpers around the source: produce records, create a topic, read raw (the baseline).

:func:`produce_records` (tests, demo, benchmark), :func:`ensure_topic` and
:func:`consume_raw` (the ingest benchmark's baseline: kafka-python alone).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from consumers.encoding import encode_record
from consumers.kafka_source import METADATA_WAIT_S, _kafka, await_partitions, consumer_kwargs
from monitor.config.sources import KafkaConfig


def produce_records(
    bootstrap: str,
    topic: str,
    records: Iterable[Mapping[str, Any] | bytes | None],
    *,
    partitions_key: str = "model_id",
    linger_ms: int = 20,
    batch_size: int = 512 * 1024,
    compression_type: str | None = None,
    acks: str | int = "all",
    timeout_s: float = 120.0,
) -> int:
    """Publish records as JSON (bytes and None go out as they are); returns the count.

    The key is ``record[partitions_key]`` (the model id by default) so one model's records
    stay in order within one partition; raw bytes go out without a key, None as a tombstone
    (null value) with an empty key. Big batches and a short linger make this the fast
    path for loading a topic; ``compression_type`` is "gzip" or None (lz4/zstd/snappy need
    extra packages). Raises RuntimeError if any record was not acknowledged.
    """
    kafka = _kafka()
    kwargs: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "linger_ms": linger_ms,
        "batch_size": batch_size,
        "compression_type": compression_type,
        "acks": acks,
        "max_request_size": max(1_048_576, 2 * batch_size),
    }
    if acks not in ("all", -1):
        kwargs["enable_idempotence"] = False  # idempotence requires acks=all
    producer = kafka.KafkaProducer(**kwargs)
    errors: list[BaseException] = []
    n = 0
    try:
        for rec in records:
            if rec is None:
                # kafka-python refuses a record with neither key nor value: a tombstone
                # (null value) goes out with an empty key.
                value, key = None, b""
            elif isinstance(rec, bytes | bytearray | memoryview):
                value, key = bytes(rec), None
            else:
                value = encode_record(rec)
                k = rec.get(partitions_key)
                key = None if k is None else str(k).encode()
            producer.send(topic, value=value, key=key).add_errback(errors.append)
            n += 1
        producer.flush(timeout=timeout_s)
    finally:
        producer.close(timeout=10)
    if errors:
        raise RuntimeError(f"{len(errors)} of {n} records not delivered to {topic}: {errors[0]!r}")
    return n


def ensure_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 3,
    *,
    replication_factor: int = 1,
    retention_ms: int | None = -1,
) -> bool:
    """Create ``topic`` unless it exists and wait until every partition has a leader.

    Returns True if it was created. An existing topic is left as it is (its partition
    count and settings are not changed). ``retention_ms`` is the new topic's
    ``retention.ms``: unlimited (-1) by default, because the topics made here (tests,
    benchmarks, the demo's local broker) must pass the service's retention check
    (:mod:`consumers.retention`); None leaves the broker's default (7 days).
    """
    configs = {} if retention_ms is None else {"retention.ms": str(retention_ms)}
    return create_topic(
        {"bootstrap_servers": bootstrap, "client_id": "vfr-monitor-admin"}, topic, partitions,
        replication_factor=replication_factor, configs=configs,
    )  # fmt: skip


def create_topic(
    client_kwargs: Mapping[str, Any],
    topic: str,
    partitions: int,
    *,
    replication_factor: int = 1,
    configs: Mapping[str, str] | None = None,
) -> bool:
    """Create ``topic`` with ``configs`` unless it exists; wait for its leaders; True if
    created. ``client_kwargs``: connection settings (e.g. ``KafkaConfig.client_kwargs()``)."""
    kafka = _kafka()
    admin = kafka.KafkaAdminClient(**client_kwargs)
    try:
        created = True
        try:
            spec: dict[str, Any] = {
                "num_partitions": partitions, "replication_factor": replication_factor
            }  # fmt: skip
            if configs:
                spec["configs"] = dict(configs)
            admin.create_topics({topic: spec})
        except kafka.errors.TopicAlreadyExistsError:
            created = False
        admin.wait_for_topics([topic], timeout_ms=30_000)
        return created
    finally:
        admin.close()


def consume_raw(
    bootstrap: str, topic: str, group_id: str, n_messages: int, max_batch: int
) -> float:
    """Seconds to consume ``n_messages`` with the source's consumer settings, doing nothing else.

    The baseline of the ingest benchmark: same group consumer, same poll size, offsets
    committed once at the end; the clock starts at the first poll (so it includes joining
    the group and the first fetch) and stops after the commit.
    """
    kafka = _kafka()
    cfg = KafkaConfig(bootstrap_servers=(bootstrap,), topics=(topic,), group_id=group_id,
                      max_batch=max_batch)  # fmt: skip
    consumer = kafka.KafkaConsumer(topic, **consumer_kwargs(cfg))
    try:
        await_partitions(consumer, [topic], METADATA_WAIT_S)  # as the source does
        got = 0
        start = time.perf_counter()
        deadline = time.monotonic() + 600
        while got < n_messages:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {got} of {n_messages} messages in 600 s")
            polled = consumer.poll(timeout_ms=cfg.poll_timeout_ms,
                                   max_records=min(max_batch, n_messages - got))  # fmt: skip
            got += sum(len(records) for records in polled.values())
        consumer.commit()
        return time.perf_counter() - start
    finally:
        consumer.close(autocommit=False)

