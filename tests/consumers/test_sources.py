"""Sources of scored discharges: the Kafka consumer group and the embedded replay.

The Kafka tests run against the real session broker (tests/support/kafka.py); nothing of
Kafka is mocked. The sink is a recording fake: it is the pipeline's side of the contract,
not Kafka. Every test uses its own topic and consumer group.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import uuid
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from consumers.base import (
    Origin,
    SinkRetriesExhaustedError,
)
from consumers.embedded import EmbeddedSource
from consumers.kafka_source import (
    KafkaSource,
)
from consumers.kafka_tools import (
    ensure_topic,
    produce_records,
)
from monitor.config import ConfigError, MonitorConfig
from monitor.config.errors import MissingInputError, UsageError
from monitor.config.sources import (
    EmbeddedConfig,
    KafkaConfig,
    embedded_config,
    kafka_config_with_env,
)
from monitor.stream.schema import validate_records
from tests.support.kafka import OwnBroker

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka import KafkaConsumer, TopicPartition

PARTITIONS = 3


# ---------------------------------------------------------------------- helpers


class RecordingSink:
    """Stores every accepted batch; can fail chosen calls or run a hook before storing."""

    def __init__(
        self,
        fail_calls: set[int] | None = None,
        always_fail: bool = False,
        hook: Callable[[int, list[Origin]], None] | None = None,
    ) -> None:
        self.fail_calls = fail_calls or set()
        self.always_fail = always_fail
        self.hook = hook
        self.calls = 0
        self.batches: list[list[tuple[Origin, bytes | None]]] = []
        self.failed: list[list[Origin]] = []

    def ingest_batch(self, payloads: list[bytes | None], origins: list[Origin]) -> None:
        self.calls += 1
        assert len(payloads) == len(origins)
        if self.hook is not None:
            self.hook(self.calls, origins)
        if self.always_fail or self.calls in self.fail_calls:
            self.failed.append(list(origins))
            raise RuntimeError("store unavailable")
        self.batches.append(list(zip(origins, payloads, strict=True)))

    @property
    def delivered(self) -> list[tuple[Origin, bytes | None]]:
        return [item for batch in self.batches for item in batch]

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(p) for _, p in self.delivered if p is not None]


def records(n: int, models: int = 6, start: int = 0) -> list[dict[str, Any]]:
    """Valid scored discharges (docs/method.md section 1); every third one carries a decision."""
    out = []
    for i in range(start, start + n):
        score = (i * 37 % 100) / 100
        rec: dict[str, Any] = {
            "record_id": f"r{i}",
            "model_id": f"m{i % models}",
            "event_time": f"2026-01-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
            "hospital_id": f"h{i % 7}",
            "score": score,
            "label": i % 2,
            "race": str(i % 5),
            "sex": str(i % 2),
            "ethnicity": str(i % 2),
            "age_group": str(i % 4),
        }
        if i % 3 == 0:
            rec["decision"] = int(score >= 0.5)
        out.append(rec)
    return out


def new_topic(broker: str) -> str:
    topic = f"src-{uuid.uuid4().hex[:10]}"
    assert ensure_topic(broker, topic, PARTITIONS) is True
    assert ensure_topic(broker, topic, PARTITIONS) is False  # idempotent
    return topic


def config(broker: str, topic: str, group: str | None = None, **kw: Any) -> KafkaConfig:
    settings: dict[str, Any] = {"poll_timeout_ms": 200, "sink_retry_backoff_ms": 50, **kw}
    return KafkaConfig(
        bootstrap_servers=broker,
        topics=topic,
        group_id=group or f"g-{uuid.uuid4().hex[:10]}",
        **settings,
    )


def offsets(broker: str, group: str, topic: str) -> tuple[dict[int, int | None], dict[int, int]]:
    """(committed, end) offsets per partition, seen by a probe outside the group."""
    probe = KafkaConsumer(bootstrap_servers=broker, group_id=group, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = {tp.partition: probe.committed(tp) for tp in tps}
        end = {tp.partition: off for tp, off in probe.end_offsets(tps).items()}
        return committed, end
    finally:
        probe.close(autocommit=False)


def by_partition(delivered: list[tuple[Origin, bytes | None]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for origin, _ in delivered:
        out[origin.partition].append(origin.offset)
    return out


# ---------------------------------------------------------------------- Kafka source


def test_all_messages_once_in_offset_order_then_committed(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    sent = records(600)
    assert produce_records(kafka_broker, topic, sent) == 600
    cfg = config(kafka_broker, topic, max_batch=100)
    sink = RecordingSink()
    with KafkaSource(cfg, sink) as source:
        assert source.run(threading.Event(), max_messages=600) == 600
        assert source.stats.messages == 600 and source.stats.commits == source.stats.batches

    delivered = sink.delivered
    assert len(delivered) == 600
    assert len({o for o, _ in delivered}) == 600, "a message was handed over twice"
    assert all(len(batch) <= 100 for batch in sink.batches)
    committed, end = offsets(kafka_broker, cfg.group_id, topic)
    assert sum(end.values()) == 600 and sum(1 for e in end.values() if e) >= 2
    for partition, offs in by_partition(delivered).items():
        assert offs == list(range(end[partition])), f"partition {partition} out of order"
    assert committed == end

    got = sink.records()
    assert sorted(r["record_id"] for r in got) == sorted(r["record_id"] for r in sent)
    # Keyed by model_id: each model's records arrive in the order they were produced.
    for model in {r["model_id"] for r in sent}:
        assert [r["record_id"] for r in got if r["model_id"] == model] == [
            r["record_id"] for r in sent if r["model_id"] == model
        ]
    # The payloads are what the pipeline's validator accepts.
    assert validate_records(got, MonitorConfig()).rejected == []


def test_a_source_opened_right_after_its_topic_was_created_joins_knowing_its_partitions(
    kafka_broker: str,
) -> None:
    """The group's assignment is computed from the metadata its members hold when they
    join: a consumer that joined before it had its new topic's partitions was assigned
    nothing and waited in a rebalance for a minute or more (a source-test failure under
    load; "No partition metadata for topic" in its log). Without the source's wait a
    constructor held them in 0 of 5 tries."""
    for _ in range(5):
        topic = new_topic(kafka_broker)
        with KafkaSource(config(kafka_broker, topic), RecordingSink()) as source:
            known = source._consumer._cluster.partitions_for_topic(topic)
            assert known == set(range(PARTITIONS)), known


def test_a_topic_that_never_appears_delays_the_start_by_a_bounded_wait(
    kafka_broker: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = f"absent-{uuid.uuid4().hex[:10]}"
    t0 = time.monotonic()
    with KafkaSource(config(kafka_broker, topic, bootstrap_timeout_ms=2_000), RecordingSink()):
        took = time.monotonic() - t0
    assert 2.0 <= took < 2.0 + 10, took  # the configured bound (under METADATA_WAIT_S)
    assert f"no partitions of {topic} on the broker after 2 s" in caplog.text


def test_failed_sink_call_commits_nothing_and_batch_is_redelivered(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    produce_records(kafka_broker, topic, records(300))
    group = f"g-{uuid.uuid4().hex[:10]}"
    seen_at_retry: dict[int, int | None] = {}

    def check_nothing_committed(call: int, origins: list[Origin]) -> None:
        if call == 2:  # the redelivery after the failed first call
            seen_at_retry.update(offsets(kafka_broker, group, topic)[0])

    sink = RecordingSink(fail_calls={1}, hook=check_nothing_committed)
    with KafkaSource(config(kafka_broker, topic, group, max_batch=80), sink) as source:
        assert source.run(threading.Event(), max_messages=300) == 300
        stats = source.stats
    assert stats.sink_failures == 1 and stats.redelivered > 0
    assert seen_at_retry == dict.fromkeys(range(PARTITIONS))  # nothing committed
    failed = set(sink.failed[0])
    delivered = [o for o, _ in sink.delivered]
    assert failed <= set(delivered), "the failed batch was not redelivered"
    assert len(delivered) == len(set(delivered)) == 300
    committed, end = offsets(kafka_broker, group, topic)
    assert committed == end


def _contiguous(delivered: list[tuple[Origin, bytes | None]], end: dict[int, int]) -> None:
    """Each partition's accepted messages: every offset once, in offset order."""
    got = by_partition(delivered)
    for partition, last in end.items():
        assert got.get(partition, []) == list(range(last)), f"partition {partition}"


@pytest.mark.parametrize("prefetch", [True, False])
def test_failures_with_a_batch_polled_ahead_skip_and_repeat_nothing(
    kafka_broker: str,
    prefetch: bool,
) -> None:
    """Failed calls while the next batch is already polled (prefetch): that batch's
    partitions are rewound too, so the accepted batches hold every offset once, in order.
    Every batch fails once (every even call), so a failure meets each partition boundary
    (a batch polled ahead holding a partition the failed one does not)."""
    topic = new_topic(kafka_broker)
    produce_records(kafka_broker, topic, records(400))
    cfg = config(kafka_broker, topic, max_batch=40, prefetch=prefetch)
    sink = RecordingSink(fail_calls=set(range(2, 200, 2)))
    stop = threading.Event()
    timer = threading.Timer(60, stop.set)  # a skipped message would leave run waiting
    timer.start()
    with KafkaSource(cfg, sink) as source:
        assert source.run(stop, max_messages=400) == 400
        assert source.stats.sink_failures == source.stats.batches - 1  # all but the first
    timer.cancel()
    committed, end = offsets(kafka_broker, cfg.group_id, topic)
    _contiguous(sink.delivered, end)
    assert committed == end


def test_the_next_batch_is_polled_while_the_sink_stores_one(kafka_broker: str) -> None:
    """With prefetch the consumer's positions pass the batch in the sink during the call
    (the next poll ran beside it); a stop then leaves that polled batch unhanded, and it is
    rewound: the next run starts with it, nothing skipped."""
    topic = new_topic(kafka_broker)
    produce_records(kafka_broker, topic, records(300))
    stop = threading.Event()
    ahead: list[bool] = []

    def during_call(call: int, origins: list[Origin]) -> None:
        if call != 2:
            return
        last = {o.partition: o.offset for o in origins}
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the prefetch poll runs on its own thread
            with source._lock:
                pos = {tp.partition: source._consumer.position(tp)
                       for tp in source._consumer.assignment()}  # fmt: skip
            if any(pos[p] > last.get(p, -1) + 1 for p in pos):
                ahead.append(True)
                break
            time.sleep(0.02)
        stop.set()

    sink = RecordingSink(hook=during_call)
    cfg = config(kafka_broker, topic, max_batch=30)
    with KafkaSource(cfg, sink) as source:
        assert source.run(stop) == 60  # two batches accepted, the polled third one not
        assert ahead == [True]
        again = threading.Event()
        timer = threading.Timer(60, again.set)  # a skipped message would leave run waiting
        timer.start()
        assert source.run(again, max_messages=240) == 240
        timer.cancel()
    committed, end = offsets(kafka_broker, cfg.group_id, topic)
    _contiguous(sink.delivered, end)
    assert committed == end and sum(end.values()) == 300


def test_persistently_failing_sink_raises_after_bounded_retries(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    produce_records(kafka_broker, topic, records(50))
    cfg = config(kafka_broker, topic, sink_max_retries=2)
    sink = RecordingSink(always_fail=True)
    with KafkaSource(cfg, sink) as source, pytest.raises(SinkRetriesExhaustedError):
        source.run(threading.Event())
    assert sink.calls == 3 and sink.batches == []
    # every attempt started again at the first offset of the batch
    firsts = [{o.partition: o.offset for o in reversed(batch)} for batch in sink.failed]
    assert all(offset == 0 for first in firsts for offset in first.values())
    assert offsets(kafka_broker, cfg.group_id, topic)[0] == dict.fromkeys(range(PARTITIONS))


def test_restarted_consumer_resumes_from_committed_offsets(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    produce_records(kafka_broker, topic, records(300))
    group = f"g-{uuid.uuid4().hex[:10]}"
    first, second = RecordingSink(), RecordingSink()
    with KafkaSource(config(kafka_broker, topic, group, max_batch=50), first) as source:
        assert source.run(threading.Event(), max_messages=120) == 120
    assert sum(v or 0 for v in offsets(kafka_broker, group, topic)[0].values()) == 120

    with KafkaSource(config(kafka_broker, topic, group, max_batch=50), second) as source:
        assert source.run(threading.Event(), max_messages=180) == 180
        stop = threading.Event()
        threading.Timer(1.0, stop.set).start()
        assert source.run(stop) == 0, "more than the 300 produced messages arrived"
    a = {o for o, _ in first.delivered}
    b = [o for o, _ in second.delivered]
    assert a.isdisjoint(b), "a committed batch was delivered again after the restart"
    assert len(a | set(b)) == 300


def test_poison_payloads_are_handed_over_unchanged(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    rng = random.Random(7)
    garbage = bytes(rng.randrange(256) for _ in range(512))
    big = json.dumps({"record_id": "big", "pad": "x" * 100_000}).encode()
    poison: list[bytes | None] = [b'{"record_id": "r1", ', garbage, big, b"", None, b"[1, 2]"]
    valid = records(1)
    produce_records(kafka_broker, topic, [*poison, *valid])
    sink = RecordingSink()
    with KafkaSource(config(kafka_broker, topic), sink) as source:
        assert source.run(threading.Event(), max_messages=7) == 7
        assert source.stats.null_values == 1
    got = [p for _, p in sink.delivered]
    expected = [*poison, json.dumps(valid[0], separators=(",", ":")).encode()]

    def key(p: bytes | None) -> bytes:
        return b"\x00none" if p is None else p

    assert sorted(got, key=key) == sorted(expected, key=key)


def test_lag_counts_unconsumed_messages(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    produce_records(kafka_broker, topic, records(90))
    reports: list[dict[tuple[str, int], int]] = []
    sink = RecordingSink()
    with KafkaSource(config(kafka_broker, topic, max_batch=15), sink, on_lag=reports.append) as src:
        assert src.run(threading.Event(), max_messages=90) == 90
        lag = src.lag()
        assert set(lag) == {(topic, p) for p in range(PARTITIONS)}
        assert sum(lag.values()) == 0
        assert reports and reports[-1] == lag
        # Let the prefetch that is parked at the broker (fetch_max_wait_ms = 500) come back
        # empty, so the next fetch is issued after the new messages exist.
        time.sleep(0.7)
        # 60 more of one model: one partition (kafka-python refreshes a partition's
        # high-water mark only when it drains that partition's fetched records).
        more = records(60, models=1, start=90)
        produce_records(kafka_broker, topic, more)
        assert src.run(threading.Event(), max_messages=15) == 15
        lag = src.lag()
        assert sum(lag.values()) == 45 and sorted(lag.values()) == [0, 0, 45]
        assert sum(reports[-1].values()) == 45
        # Spread over all partitions: exact=True asks the broker for the end offsets.
        produce_records(kafka_broker, topic, records(30, start=150))
        exact, cheap = src.lag(exact=True), src.lag()
        assert sum(exact.values()) == 45 + 30
        assert all(exact[tp] >= cheap[tp] for tp in exact)  # the cheap one is a lower bound


def test_stop_event_makes_run_return_promptly(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    stop = threading.Event()
    result: list[int] = []
    with KafkaSource(config(kafka_broker, topic), RecordingSink()) as source:
        worker = threading.Thread(target=lambda: result.append(source.run(stop)))
        worker.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        stop.set()
        worker.join(timeout=5)
        assert not worker.is_alive() and time.monotonic() - t0 < 2.0
    assert result == [0]

    # ... also while backing off after a failed sink call: nothing gets committed.
    produce_records(kafka_broker, topic, records(20))
    stop = threading.Event()
    cfg = config(
        kafka_broker, topic, sink_retry_backoff_ms=20_000, sink_retry_backoff_max_ms=20_000
    )
    sink = RecordingSink(
        always_fail=True, hook=lambda call, _: threading.Timer(0.2, stop.set).start()
    )
    with KafkaSource(cfg, sink) as source:
        t0 = time.monotonic()
        assert source.run(stop) == 0
        assert time.monotonic() - t0 < 5.0 and sink.calls == 1
    assert offsets(kafka_broker, cfg.group_id, topic)[0] == dict.fromkeys(range(PARTITIONS))


#: Slack on top of a configured bound for a loaded 2-core machine: the broker's sockets
#: close when its JVM exits, and kafka-python's IO thread must then be scheduled to see it.
LOADED_MACHINE_MARGIN_S = 5.0


def _wait_until(cond: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until ``cond()`` held, or None if it did not within ``timeout_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if cond():
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def test_a_frozen_broker_is_reported_within_the_bound(own_kafka_broker: OwnBroker) -> None:
    """A broker that hangs rather than closes (SIGSTOP: connections open, its port still
    accepting, no answers) must be reported within ``broker_unreachable_after_s`` (+
    margin): kafka-python gives up on the unanswered requests after ``request_timeout_ms``
    and new connections never finish their ApiVersions exchange. Before the fix the
    connections still open or being opened counted as reachable, and a commit stuck on
    the hung broker kept the poll loop from looking at all: the source said "ok" for good.
    """
    broker = own_kafka_broker.bootstrap
    topic = new_topic(broker)
    produce_records(broker, topic, records(120))
    cfg = config(broker, topic, session_timeout_ms=6_000)
    sink = RecordingSink()
    stop = threading.Event()
    try:
        with KafkaSource(cfg, sink) as source:
            worker = threading.Thread(target=source.run, args=(stop,), daemon=True)
            worker.start()
            frozen = False
            try:
                assert _wait_until(lambda: len(sink.delivered) == 120, 60) is not None
                assert source.health() == (True, "ok")
                own_kafka_broker.freeze()
                frozen = True
                bound = cfg.broker_unreachable_after_s + LOADED_MACHINE_MARGIN_S
                took = _wait_until(lambda: not source.health()[0], bound)
                assert took is not None, (
                    f"health still {source.health()} {bound} s after the freeze"
                )
                assert source.health() == (False, "broker unreachable")
                own_kafka_broker.thaw()
                frozen = False
                back = _wait_until(lambda: source.health()[0], bound)
                assert back is not None, source.health()
                print(f"not healthy {took:.1f} s after the freeze, "
                      f"healthy {back:.1f} s after thaw")  # fmt: skip
            finally:
                if frozen:
                    own_kafka_broker.thaw()
                stop.set()
                worker.join(timeout=120)
    finally:
        # a broker stopped for seconds and resumed may stay fenced by its own controller
        # for a while (seen: the next test's 200 messages not delivered in 60 s on a
        # loaded machine): the next test that needs it gets a fresh start
        own_kafka_broker.stop()


def test_health_does_not_wait_for_a_consumer_call_the_outage_blocks(
    own_kafka_broker: OwnBroker,
) -> None:
    """The service's tick asks the source for its lag every second; during an outage each
    such call blocks on the dead broker (``position()`` of a partition without a commit
    waits ``request_timeout_ms``) while holding the consumer's lock. Health must still turn
    within ``broker_unreachable_after_s`` (+ margin). Before the fix only the poll loop read
    the connection state, and it needs that lock: with the lag asked for back to back it
    never got it, and the source stayed "ok" until the calls stopped.
    """
    broker = own_kafka_broker.bootstrap
    topic = new_topic(broker)
    # one model: its records land in one partition, the others never get a commit
    produce_records(broker, topic, records(200, models=1))
    cfg = config(broker, topic, session_timeout_ms=6_000)
    sink = RecordingSink()
    stop = threading.Event()

    def ask_for_lag() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # it may fail as well as block
                source.lag()

    with KafkaSource(cfg, sink) as source:
        worker = threading.Thread(target=source.run, args=(stop,), daemon=True)
        worker.start()
        asker = threading.Thread(target=ask_for_lag, daemon=True)
        try:
            assert _wait_until(lambda: len(sink.delivered) == 200, 60) is not None
            assert source.health() == (True, "ok")
            asker.start()
            own_kafka_broker.stop()
            bound = cfg.broker_unreachable_after_s + LOADED_MACHINE_MARGIN_S
            took = _wait_until(lambda: not source.health()[0], bound)
            assert took is not None, f"health still {source.health()} {bound} s after the stop"
            assert source.health() == (False, "broker unreachable")
            # and it stays so while the broker is away (no flapping on reconnect attempts)
            seen = []
            t_end = time.monotonic() + 3.0
            while time.monotonic() < t_end:
                seen.append(source.health()[0])
                time.sleep(0.01)
            print(f"not healthy {took:.1f} s after the stop; healthy in {sum(seen)} of "
                  f"{len(seen)} reads after that")  # fmt: skip
            assert not any(seen)
        finally:
            stop.set()
            if asker.is_alive():  # not started when the first wait failed
                asker.join(timeout=120)
            worker.join(timeout=120)


# ---------------------------------------------------------------------- configuration


def test_the_readiness_bound_must_fit_the_request_timeout_and_heartbeat() -> None:
    """A silent broker is noticed after request_timeout_ms plus at most one heartbeat
    interval: a bound shorter than that is refused, naming the setting to lower."""
    ok = kafka_config_with_env({"bootstrap_servers": "b:9092"}, {})
    assert ok is not None and ok.broker_unreachable_after_s == 10.0
    assert ok.request_timeout_ms + ok.heartbeat_interval_ms <= 10_000
    with pytest.raises(ConfigError) as err:
        kafka_config_with_env({"bootstrap_servers": "b:9092", "broker_unreachable_after_s": 5}, {})
    assert "kafka.request_timeout_ms" in str(err.value) and "2000" in str(err.value)
    short = kafka_config_with_env(
        {"bootstrap_servers": "b:9092", "broker_unreachable_after_s": 5,
         "request_timeout_ms": 2000}, {}
    )  # fmt: skip
    assert short is not None and short.request_timeout_ms == 2000
    with pytest.raises(ConfigError, match="broker_unreachable_after_s"):
        kafka_config_with_env({"bootstrap_servers": "b:9092", "broker_unreachable_after_s": 1}, {})


def test_config_env_overrides_and_defaults() -> None:
    env = {
        "VFR_KAFKA_BOOTSTRAP": "b1:9093, b2:9093",
        "VFR_KAFKA_TOPIC": "t1,t2",
        "VFR_KAFKA_GROUP": "env-group",
        "VFR_KAFKA_MAX_BATCH": "250",
        "VFR_KAFKA_CLIENT_ID": "",  # empty = unset
    }
    cfg = kafka_config_with_env({"bootstrap_servers": "file:9092", "group_id": "file"}, env)
    assert cfg is not None
    assert cfg.bootstrap_servers == ("b1:9093", "b2:9093")
    assert cfg.topics == ("t1", "t2") and cfg.group_id == "env-group"
    assert cfg.max_batch == 250 and cfg.client_id == "vfr-monitor"
    assert cfg.security_protocol == "PLAINTEXT"
    # no [kafka] table and no VFR_KAFKA_BOOTSTRAP: no Kafka (embedded replay)
    assert kafka_config_with_env(None, {}) is None
    only_env = kafka_config_with_env(None, {"VFR_KAFKA_BOOTSTRAP": "k:1"})
    assert only_env is not None and only_env.bootstrap_servers == ("k:1",)
    # a model from the file keeps its explicit settings under the overrides
    base = KafkaConfig(bootstrap_servers="a:1", max_batch=10)
    over = kafka_config_with_env(base, {"VFR_KAFKA_GROUP": "g2"})
    assert over is not None and (over.max_batch, over.group_id) == (10, "g2")


def test_config_secrets_never_shown() -> None:
    secret, key_secret = "s3cr3t-Pa55", "k3y-Pa55"
    cfg = kafka_config_with_env(
        {
            "bootstrap_servers": "b:9093",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "monitor",
        },
        {"VFR_KAFKA_SASL_PASSWORD": secret},
    )
    assert cfg is not None
    for text in (repr(cfg), str(cfg), cfg.model_dump_json(), str(cfg.model_dump()), cfg.describe()):
        assert secret not in text
    assert cfg.client_kwargs()["sasl_plain_password"] == secret
    assert "monitor" in cfg.describe() and "SCRAM-SHA-512" in cfg.describe()
    ssl = KafkaConfig(bootstrap_servers="b:1", security_protocol="SSL", ssl_password=key_secret)
    assert key_secret not in repr(ssl) and ssl.client_kwargs()["ssl_password"] == key_secret
    # an error about the SASL settings names the field, never the password
    with pytest.raises(ConfigError) as err:
        kafka_config_with_env(
            {
                "bootstrap_servers": "b:1",
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "PLAIN",
            },
            {"VFR_KAFKA_SASL_PASSWORD": secret},
        )
    assert err.value.field == "kafka.sasl_plain_username" and secret not in str(err.value)


@pytest.mark.parametrize(
    ("raw", "env", "field", "words"),
    [
        ({"security_protocol": "TLS"}, {}, "kafka.security_protocol", "SASL_SSL"),
        ({}, {"VFR_KAFKA_SECURITY_PROTOCOL": "sasl"}, "kafka.security_protocol", "VFR_KAFKA_"),
        ({"security_protocol": "SASL_SSL"}, {}, "kafka.sasl_mechanism", "required"),
        ({"sasl_mechanism": "GSSAPI"}, {}, "kafka.sasl_mechanism", "PLAIN"),
        ({"security_protocol": "SSL", "ssl_cafile": "/nonexistent/ca.pem"}, {}, "kafka.ssl_cafile",
         "not found"),
        ({"ssl_cafile": "/etc/hostname"}, {}, "kafka.ssl_cafile", "only used with SSL"),
        ({"max_batch": 0}, {}, "kafka.max_batch", "greater than"),
        ({"max_bach": 10}, {}, "kafka.max_bach", "unknown field"),
        ({"bootstrap_servers": "no-port"}, {}, "kafka.bootstrap_servers", "host:port"),
        ({}, {"VFR_KAFKA_MAX_BATCH": "many"}, "kafka.max_batch", "VFR_KAFKA_MAX_BATCH"),
    ],
)  # fmt: skip
def test_config_errors_name_the_field(
    raw: dict[str, Any], env: dict[str, str], field: str, words: str
) -> None:
    with pytest.raises(ConfigError) as err:
        kafka_config_with_env({"bootstrap_servers": "b:1", **raw}, env)
    assert err.value.field == field, str(err.value)
    assert words in str(err.value)


def test_embedded_config() -> None:
    cfg = embedded_config({"path": "x.parquet", "rate": 50})
    assert cfg.rate == 50.0 and cfg.batch_size == 1000 and cfg.topic_name == "embedded"
    assert EmbeddedConfig().rate is None
    # 0 is "as fast as it goes", as `--rate 0` is on every command (issue 22, finding 5)
    assert embedded_config({"rate": 0}).rate is None
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ConfigError) as err:
            embedded_config({"rate": bad})
        assert err.value.field == "embedded.rate"
    with pytest.raises(ConfigError) as err:
        embedded_config({"path": "x.xlsx"})
    assert err.value.field == "embedded.path"


# ---------------------------------------------------------------------- embedded replay


def test_embedded_dataframe_full_speed_round_trip() -> None:
    sent = records(2500)
    sink = RecordingSink()
    source = EmbeddedSource(pd.DataFrame(sent), sink, batch_size=1000)
    assert source.run(threading.Event()) == 2500 and source.exhausted
    assert [len(b) for b in sink.batches] == [1000, 1000, 500]
    assert [o for o, _ in sink.delivered] == [Origin("embedded", 0, i) for i in range(2500)]
    # the JSON round trip gives the records back; a missing decision is left out, not null
    assert sink.records() == sent
    assert validate_records(sink.records(), MonitorConfig()).rejected == []
    assert source.run(threading.Event()) == 0


def test_embedded_datetime_column_becomes_rfc3339_utc() -> None:
    sent = records(50)
    frame = pd.DataFrame(sent)
    frame["event_time"] = pd.to_datetime(frame["event_time"], utc=True).dt.tz_convert(
        "America/Chicago"
    )
    sink = RecordingSink()
    EmbeddedSource(frame, sink).run(threading.Event())
    got = sink.records()
    assert all(r["event_time"].endswith("Z") for r in got)
    assert [pd.Timestamp(r["event_time"]) for r in got] == [
        pd.Timestamp(r["event_time"]) for r in sent
    ]
    assert validate_records(got, MonitorConfig()).rejected == []


def test_embedded_csv_parquet_and_jsonl_files(tmp_path: Path) -> None:
    sent = records(300)
    sent[5]["features"] = {"age": 71.0, "n_visits": 3.0}
    sent[6]["hospital_id"] = "007"  # text ids keep their spelling
    frame = pd.DataFrame(sent)
    csv_frame = frame.copy()
    csv_frame["features"] = [json.dumps(f) if isinstance(f, dict) else None for f in frame.features]
    csv_frame.to_csv(tmp_path / "scored.csv", index=False)
    frame.drop(columns="features").to_parquet(tmp_path / "scored.parquet")

    sink = RecordingSink()
    assert (
        EmbeddedSource(tmp_path / "scored.csv", sink, batch_size=128).run(threading.Event()) == 300
    )
    assert sink.records() == sent

    sink = RecordingSink()
    assert EmbeddedSource(str(tmp_path / "scored.parquet"), sink).run(threading.Event()) == 300
    assert sink.records() == [{k: v for k, v in r.items() if k != "features"} for r in sent]

    lines = [json.dumps(sent[0]).encode(), b"{broken", b"", json.dumps(sent[1]).encode()]
    (tmp_path / "scored.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    sink = RecordingSink()
    source = EmbeddedSource.from_config(
        EmbeddedConfig(path=tmp_path / "scored.jsonl", topic_name="replay"), sink
    )
    assert source.run(threading.Event()) == 3
    assert [p for _, p in sink.delivered] == [lines[0], lines[1], lines[3]]
    assert sink.delivered[1][0] == Origin("replay", 0, 1)


def test_embedded_rate_is_respected() -> None:
    sink = RecordingSink()
    source = EmbeddedSource(records(300), sink, rate=600.0, batch_size=1000)
    t0 = time.monotonic()
    assert source.run(threading.Event()) == 300
    elapsed = time.monotonic() - t0
    assert 0.35 < elapsed < 1.5, f"300 records at 600/s took {elapsed:.2f} s"
    # smooth stream: ~10 batches a second, not one burst
    assert len(sink.batches) == 5 and all(len(b) == 60 for b in sink.batches)


def test_embedded_argument_mistakes_raise_the_projects_own_errors(tmp_path: Path) -> None:
    """The CLI shows the message of a UserError and withholds a builtin's (issue 22,
    finding 5): a bad rate or a missing file must be the former, and found at once."""
    with pytest.raises(ConfigError, match=r"embedded\.rate"):
        EmbeddedSource(records(3), RecordingSink(), rate=-5.0)
    with pytest.raises(MissingInputError, match="no such file"):
        EmbeddedSource(tmp_path / "absent.jsonl", RecordingSink())  # before any run
    (tmp_path / "scored.txt").write_text("x", encoding="utf-8")
    with pytest.raises(UsageError, match="unsupported file type"):
        EmbeddedSource(tmp_path / "scored.txt", RecordingSink())
    sink = RecordingSink()
    source = EmbeddedSource(records(2500), sink, rate=0.0, batch_size=1000)
    assert source.run(threading.Event()) == 2500  # unpaced: whole batches, no sleeps
    assert [len(b) for b in sink.batches] == [1000, 1000, 500]


def test_embedded_max_messages_resume_stop_and_retry() -> None:
    sink = RecordingSink(fail_calls={2})
    source = EmbeddedSource(iter(records(1000)), sink, batch_size=300, sink_retry_backoff_ms=10)
    assert source.run(threading.Event(), max_messages=450) == 450
    assert source.run(threading.Event()) == 550
    assert [o.offset for o, _ in sink.delivered] == list(range(1000))
    assert source.stats.sink_failures == 1 and sink.records() == records(1000)

    stop = threading.Event()
    slow = EmbeddedSource(records(1000), RecordingSink(), rate=100.0)
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    n = slow.run(stop)
    assert time.monotonic() - t0 < 1.0 and 10 <= n <= 60

    broken = EmbeddedSource(records(10), RecordingSink(always_fail=True), sink_max_retries=1,
                            sink_retry_backoff_ms=10)  # fmt: skip
    with pytest.raises(SinkRetriesExhaustedError):
        broken.run(threading.Event())
