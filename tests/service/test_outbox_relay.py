"""The results outbox's relay (monitor.service.outbox_relay) on a real DuckDB file.

The publisher here is an in-process one that keeps what it is given (the protocol's two
methods); the broker's own publisher (consumers.results_topic) is exercised with a real
broker by tests/consumers/test_results_topic.py and tests/scenarios/test_fleet_kafka.py.
A broker that refuses a publish is the one fault caused by hand: the publisher raises on
the calls the test names.
"""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from monitor.config import config_from_mapping
from monitor.service.outbox_relay import OutboxRelay
from monitor.store import Store, queries
from monitor.store.results_messages import axis_result_message

CFG = config_from_mapping({"window": {"size": 600, "hop_records": 150, "hop_seconds": 0}})
AT = pd.Timestamp("2026-11-02", tz="UTC")


class KeepingPublisher:
    """Keeps every published batch; raises (nothing kept) on the calls in ``fail_on``."""

    def __init__(self, fail_on: set[int] | None = None):
        self.batches: list[list[tuple[str, str]]] = []
        self.calls = 0
        self.fail_on = fail_on or set()
        self.closed = False

    def publish(self, messages: list[tuple[str, str]]) -> None:
        self.calls += 1
        if self.calls in self.fail_on:
            raise ConnectionError("broker away")
        self.batches.append(list(messages))

    def close(self) -> None:
        self.closed = True

    def positions(self) -> list[int]:
        return [json.loads(v)["position"] for b in self.batches for _, v in b]


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "o.duckdb", CFG)
    s.outbox = True
    yield s
    s.close()


def _write(store: Store, positions: range) -> None:
    """Axis results, each with its outbox row in one transaction (as a scheduled job)."""
    cur = store.cursor()
    try:
        for p in positions:
            store.write_axis_results("axis2", "model-00", 600, [], AT, cursor=cur, position=p)
    finally:
        cur.close()


def _left(store: Store) -> list[int]:
    cur = store.cursor()
    try:
        return [json.loads(v)["position"] for _, _, v in queries.outbox_batch(cur, 10**6)]
    finally:
        cur.close()


def test_drain_sends_the_outbox_in_id_order_in_batches_and_forgets_it(store):
    _write(store, range(7))
    pub = KeepingPublisher()
    relay = OutboxRelay(store, pub, batch=3)
    assert relay.drain_once() == 7
    assert [len(b) for b in pub.batches] == [3, 3, 1]
    assert pub.positions() == list(range(7))
    assert [k for b in pub.batches for k, _ in b] == [
        axis_result_message("axis2", "model-00", p, AT, 600, "[]")[0] for p in range(7)
    ]
    assert _left(store) == [] and relay.published == 7
    assert relay.drain_once() == 0 and pub.calls == 3  # nothing left: nothing sent
    # the results stay; only the outbox empties
    assert store.read(queries.counts)["axis_results"] == 7


def test_a_refused_publish_keeps_what_was_not_acknowledged(store):
    _write(store, range(5))
    pub = KeepingPublisher(fail_on={2})
    relay = OutboxRelay(store, pub, batch=2)
    with pytest.raises(ConnectionError):
        relay.drain_once()
    assert pub.positions() == [0, 1] and _left(store) == [2, 3, 4]
    assert relay.drain_once() == 3
    assert pub.positions() == [0, 1, 2, 3, 4]  # nothing lost, nothing sent twice
    assert _left(store) == []


def test_the_thread_publishes_what_arrives_retries_after_failures_and_drains_at_close(store):
    pub = KeepingPublisher(fail_on={1, 2})
    relay = OutboxRelay(store, pub, interval_s=0.02, max_backoff_s=0.1)
    relay.start()
    try:
        _write(store, range(4))
        deadline = time.monotonic() + 20
        # published counts after the acknowledged rows are deleted: wait for it, not for
        # the publisher (which has them a moment before)
        while relay.published < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(pub.positions()) == [0, 1, 2, 3]
        assert relay.failures >= 2 and relay.published == 4 and _left(store) == []
    finally:
        relay.close()
    assert pub.closed and not relay._thread.is_alive()
    _write(store, range(4, 6))  # after the thread stopped: sent by the next close only
    time.sleep(0.1)
    assert _left(store) == [4, 5]


def test_close_sends_what_is_left_and_keeps_it_when_the_broker_refuses(store):
    _write(store, range(3))
    pub = KeepingPublisher()
    OutboxRelay(store, pub).close()  # never started: close still drains
    assert pub.positions() == [0, 1, 2] and pub.closed and _left(store) == []

    _write(store, range(3, 5))
    refusing = KeepingPublisher(fail_on={1})
    OutboxRelay(store, refusing).close()  # logs, raises nothing
    assert refusing.closed and _left(store) == [3, 4]  # kept for the next start
