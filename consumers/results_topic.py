"""The fleet's results topic: publish stored results, read them back for the view.

Every instance of a consumer group publishes what it stores (window results, events,
axis results; :mod:`monitor.store.results_messages`) to one compacted topic, keyed by
what determines each result, so a result recomputed by a partition's new owner replaces
its twin. ``vfr-monitor view`` reads the whole topic from the beginning.

Why compacted and not deleted by time: the view of a restarted ``vfr-monitor view`` is
rebuilt from the topic, and compaction keeps one message per key for as long as the
topic exists, so its size is bounded by the number of distinct results, not by time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from consumers.kafka_source import _kafka, open_consumer
from consumers.kafka_tools import create_topic
from monitor.config.sources import KafkaConfig

log = logging.getLogger(__name__)


def ensure_results_topic(cfg: KafkaConfig, topic: str, partitions: int) -> bool:
    """Create the compacted results topic unless it exists; True if created."""
    return create_topic(
        cfg.client_kwargs(), topic, partitions, configs={"cleanup.policy": "compact"}
    )


class ResultsPublisher:
    """A producer of results messages; :meth:`publish` returns once the broker has all."""

    def __init__(self, cfg: KafkaConfig, topic: str):
        kafka = _kafka()
        self.topic = topic
        self._producer = kafka.KafkaProducer(
            **cfg.client_kwargs(), acks="all", linger_ms=20,
            max_request_size=4 * 1_048_576,
        )  # fmt: skip

    def publish(self, messages: Sequence[tuple[str, str]], timeout_s: float = 60.0) -> None:
        """Send (key, value) pairs in order; raises if any was not acknowledged. Messages
        of one model share a partition (the key starts with its kind and model, and the
        partitioner hashes the whole key; order across keys does not matter: each key is
        one result)."""
        errors: list[BaseException] = []
        for key, value in messages:
            self._producer.send(self.topic, key=key.encode(), value=value.encode()).add_errback(
                errors.append
            )
        self._producer.flush(timeout=timeout_s)
        if errors:
            raise RuntimeError(f"{len(errors)} of {len(messages)} results not delivered")

    def close(self) -> None:
        self._producer.close(timeout=10)


def read_results(
    cfg: KafkaConfig,
    topic: str,
    handle: Callable[[list[tuple[bytes | None, bytes | None]]], None],
    *,
    stop: Callable[[], bool],
    on_idle: Callable[[bool], None] | None = None,
) -> None:
    """Read ``topic`` from its beginning and go on following it, handing batches of (key,
    value) to ``handle``; ``on_idle(caught_up)`` after each empty poll. No group membership
    (every partition assigned, nothing committed): each view reads everything, from the
    beginning at each start; applying a message twice changes nothing (keys upsert)."""
    kafka = _kafka()
    consumer = open_consumer(cfg)  # no subscription: partitions are assigned below
    try:
        deadline = time.monotonic() + 60
        parts = consumer.partitions_for_topic(topic)
        while not parts:
            if time.monotonic() > deadline:
                raise RuntimeError(f"results topic {topic!r} not found")
            time.sleep(0.5)
            parts = consumer.partitions_for_topic(topic)
        tps = [kafka.TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while not stop():
            polled: dict[Any, list[Any]] = consumer.poll(
                timeout_ms=cfg.poll_timeout_ms, max_records=cfg.max_batch
            )
            batch = [(r.key, r.value) for records in polled.values() for r in records]
            if batch:
                handle(batch)
                continue
            if on_idle is not None:
                end = consumer.end_offsets(tps)
                on_idle(all(consumer.position(tp) >= end[tp] for tp in tps))
    finally:
        consumer.close(autocommit=False)
