"""The fleet's results topic (consumers.results_topic) on the session's real broker.

A compacted topic is made once; a real store's outbox goes through the relay and
:class:`ResultsPublisher`; :func:`read_results` reads it back from the beginning, says when
it has caught up and stops when asked. The whole fleet (several services, a SIGKILL, the
view process) is tests/scenarios/test_fleet_kafka.py.
"""

from __future__ import annotations

import time
import uuid

import pandas as pd

from consumers.kafka_source import _kafka
from consumers.results_topic import ResultsPublisher, ensure_results_topic, read_results
from monitor.config import config_from_mapping
from monitor.config.sources import KafkaConfig
from monitor.service.outbox_relay import OutboxRelay
from monitor.store import Store, queries
from monitor.store.results_messages import parse_message

CFG = config_from_mapping({"window": {"size": 600, "hop_records": 150, "hop_seconds": 0}})


def _kafka_cfg(broker: str) -> KafkaConfig:
    return KafkaConfig(bootstrap_servers=(broker,), poll_timeout_ms=200)


def _topic_config(cfg: KafkaConfig, topic: str) -> dict[str, str]:
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = _kafka().KafkaAdminClient(**cfg.client_kwargs())
    try:
        answer = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        admin.close()
    return {k: v["value"] for k, v in answer["topic"][topic].items()}


def _read(
    cfg: KafkaConfig, topic: str, want: int
) -> tuple[list[tuple[bytes | None, bytes | None]], list[bool]]:
    got: list[tuple[bytes | None, bytes | None]] = []
    idle: list[bool] = []
    deadline = time.monotonic() + 60
    read_results(
        cfg, topic, got.extend,
        stop=lambda: (len(got) >= want and bool(idle) and idle[-1]) or time.monotonic() > deadline,
        on_idle=idle.append,
    )  # fmt: skip
    return got, idle


def test_the_outbox_published_is_read_back_whole_from_a_compacted_topic(kafka_broker, tmp_path):
    cfg = _kafka_cfg(kafka_broker)
    topic = f"results-{uuid.uuid4().hex[:10]}"
    assert ensure_results_topic(cfg, topic, 3) is True
    assert ensure_results_topic(cfg, topic, 3) is False  # made once
    assert _topic_config(cfg, topic)["cleanup.policy"] == "compact"

    store = Store(tmp_path / "member.duckdb", CFG)
    store.outbox = True
    cur = store.cursor()
    for model in ("model-00", "model-01"):
        for position in range(300, 1800, 300):
            store.write_axis_results("axis2", model, position, [{"n": position}],
                                     pd.Timestamp("2026-11-02", tz="UTC"), cursor=cur,
                                     position=position)  # fmt: skip
    sent = [(k, v) for _, k, v in queries.outbox_batch(cur, 10**6)]
    cur.close()
    relay = OutboxRelay(store, ResultsPublisher(cfg, topic), batch=4)
    assert relay.drain_once() == len(sent) == 10
    relay.close()  # closes the producer
    assert relay.failures == 0
    cur = store.cursor()
    assert queries.outbox_batch(cur, 10) == []  # acknowledged: forgotten
    cur.close()
    store.close()

    got, idle = _read(cfg, topic, len(sent))
    assert sorted((k.decode(), v.decode()) for k, v in got) == sorted(sent)
    assert idle[-1] is True  # caught up with the topic's end
    assert {parse_message(k, v).kind for k, v in got} == {"axis"}


def test_one_keys_messages_keep_their_order_in_one_partition(kafka_broker):
    cfg = _kafka_cfg(kafka_broker)
    topic = f"results-{uuid.uuid4().hex[:10]}"
    ensure_results_topic(cfg, topic, 3)
    publisher = ResultsPublisher(cfg, topic)
    key = '["axis", "axis2", "model-07", 600]'
    publisher.publish([(key, f'{{"v": {i}}}') for i in range(5)] + [("other", "{}")])
    publisher.close()

    kafka = _kafka()
    consumer = kafka.KafkaConsumer(bootstrap_servers=kafka_broker, enable_auto_commit=False)
    try:
        tps = [kafka.TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        deadline = time.monotonic() + 30
        while sum(map(len, by_partition.values())) < 6 and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=300).items():
                by_partition.setdefault(tp.partition, []).extend((r.key, r.value) for r in records)
    finally:
        consumer.close()
    mine = [[v for k, v in got if k == key.encode()] for got in by_partition.values()]
    assert [vs for vs in mine if vs] == [[f'{{"v": {i}}}'.encode() for i in range(5)]]
    assert sum(map(len, by_partition.values())) == 6
