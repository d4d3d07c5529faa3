"""Rebalances meeting scrapes, on the real broker, with real processes.

The monitor froze for good when a consumer-group rebalance revoked partitions while
evaluations were pending and ``/metrics`` was being scraped (a lock-order inversion between
kafka-python's IO thread, running the revoke callback, and the scrape), and then ignored
SIGTERM. Here a second instance joins and leaves the first one's group several times while
the first one's ``/metrics`` is scraped every 50 ms and records keep arriving; then both get
SIGTERM. Every scrape must answer, and each process must exit, with status 0, within its
``shutdown_grace_s``. The suite's lock-order checker (tests/conftest.py) runs inside both
service processes too: an out-of-order lock there fails the test.

The second test checks, in-process, that the source acts on rebalances on its polling
thread, never on kafka-python's own.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from consumers.kafka_source import KafkaSource
from consumers.kafka_tools import ensure_topic, produce_records
from monitor.config import load_config
from tests.support.service_process import ServiceProcess, paced
from tests.support.streams import interleaved_records

MODELS = 6
PARTITIONS = 6
GRACE_S = 15.0
#: a loaded CI machine: time to exit beyond the grace a process is given
MARGIN_S = 10.0


def _records(per_model: int, seed: int = 21) -> list[dict]:
    return interleaved_records(per_model, MODELS, seed)


def _config(tmp_path: Path, bootstrap: str, topic: str) -> Path:
    p = tmp_path / "rebalance.toml"
    p.write_text(
        f"""
[window]
size = 400
hop_records = 100
hop_seconds = 1
[axis1]
K = 100
[axis2]
sizes = [100, 200]
R = 3
[axis3]
folds = 3
[service.intake]
unknown_models = "admit"
event_time_bounds = "none"
[service.axes]
axis2_interval_s = 5
axis3_interval_s = 7
equilense_interval_s = 3600
[service.shutdown]
grace_s = {GRACE_S}
[kafka]
bootstrap_servers = "{bootstrap}"
topics = ["{topic}"]
group_id = "g-{topic}"
max_batch = 50
session_timeout_ms = 6000
"""
    )
    return p


class _Scraper:
    """GET /metrics every 50 ms on a thread; each answer's status, or the failure."""

    def __init__(self, url: str):
        self.url = url
        self.answers: list[tuple[float, int]] = []
        self.failures: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="scraper", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
                    r.read()
                    self.answers.append((time.monotonic() - t0, r.status))
            except urllib.error.HTTPError as e:
                self.answers.append((time.monotonic() - t0, e.code))
            except Exception as e:  # not answered within 10 s, or refused
                self.failures.append((time.monotonic() - t0, type(e).__name__))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(15)


def _terminate(svc: ServiceProcess) -> float:
    """SIGTERM; seconds until the process exited (its log attached on a timeout)."""
    t0 = time.monotonic()
    svc.proc.send_signal(signal.SIGTERM)
    rc = svc.wait(GRACE_S + MARGIN_S)
    took = time.monotonic() - t0
    assert rc == 0, f"exit status {rc} after SIGTERM\n" + svc.output()
    return took


def test_members_joining_and_leaving_while_metrics_are_scraped(kafka_broker, tmp_path):
    topic = f"rebalance-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, topic, partitions=PARTITIONS)
    cfg = _config(tmp_path, kafka_broker, topic)
    records = _records(1500)
    produce_records(kafka_broker, topic, records[:1200])
    stop_producing = threading.Event()

    def produce_more() -> None:  # records keep arriving: evaluations are always pending
        rest = (r for r in paced(records[1200:], 250) if not stop_producing.is_set())
        produce_records(kafka_broker, topic, rest, linger_ms=5)

    producer = threading.Thread(target=produce_more, name="producer", daemon=True)
    first = ServiceProcess(cfg, tmp_path / "a.duckdb")
    scraper = _Scraper(first.url or "")
    exits: list[float] = []
    try:
        assert first.wait_for_line(r"partitions assigned", 60) is not None, first.output()
        producer.start()
        for cycle in range(3):
            mark = len(first.lines)
            second = ServiceProcess(cfg, tmp_path / f"b{cycle}.duckdb")
            try:
                # the group moved partitions to the second member: the first one revoked some
                got = first.wait_for_line(r"partitions revoked", 120, after=mark)
                assert got is not None, f"cycle {cycle}: no revocation\n" + first.output()
                assert second.wait_for_line(r"partitions assigned", 120) is not None
                time.sleep(1.5)  # it consumes and evaluates a little
            finally:
                exits.append(_terminate(second))
            # its partitions come back to the first member
            back = first.wait_for_line(r"partitions assigned", 120, after=mark + 1)
            assert back is not None, f"cycle {cycle}: nothing reassigned\n" + first.output()
        stop_producing.set()
        n_answers = len(scraper.answers)
        time.sleep(1.0)
        assert len(scraper.answers) > n_answers, "scrapes stopped answering\n" + first.output()
        exits.append(_terminate(first))
    finally:
        stop_producing.set()
        scraper.close()
        if first.proc.poll() is None:
            first.kill()
    # every scrape answered while the first member ran: 200, or 503 once it was stopping
    before_failures = [f for f in scraper.failures if f[1] != "URLError"]
    assert not before_failures, f"scrapes not answered: {before_failures[:5]}"
    codes = {code for _, code in scraper.answers}
    assert codes <= {200, 503} and 200 in codes, codes
    slowest = max(t for t, _ in scraper.answers)
    print(f"{len(scraper.answers)} scrapes answered (slowest {slowest:.2f} s); "
          f"exits after SIGTERM: {[round(x, 1) for x in exits]} s (grace {GRACE_S} s)")  # fmt: skip
    assert all(x <= GRACE_S + MARGIN_S for x in exits)
    assert first.output().count("partitions revoked") >= 3


class _RecordingSink:
    """A history sink that notes which thread tells it about rebalances."""

    def __init__(self) -> None:
        self.batches = 0
        self.calls: list[tuple[str, str]] = []

    def ingest_batch(self, payloads, origins) -> None:
        self.batches += 1

    def source_offsets(self) -> dict:
        return {}

    def forget_partitions(self, partitions) -> list[str]:
        self.calls.append(("forget", threading.current_thread().name))
        return []

    def keep_partitions(self, owned) -> list[str]:
        self.calls.append(("keep", threading.current_thread().name))
        return []


def test_the_source_acts_on_rebalances_on_its_polling_thread(kafka_broker, tmp_path):
    topic = f"rebthread-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, topic, partitions=4)
    produce_records(kafka_broker, topic, [json.loads(json.dumps(r)) for r in _records(50)])
    kcfg = load_config(_config(tmp_path, kafka_broker, topic)).kafka
    assert kcfg is not None
    sinks = [_RecordingSink(), _RecordingSink()]
    stop = threading.Event()
    with KafkaSource(kcfg, sinks[0], horizon_days=30) as one:
        runner = threading.Thread(target=one.run, args=(stop,), name="poll-one", daemon=True)
        runner.start()
        deadline = time.monotonic() + 60
        while not sinks[0].calls and time.monotonic() < deadline:
            time.sleep(0.05)
        stop_two = threading.Event()
        with KafkaSource(kcfg, sinks[1], horizon_days=30) as two:
            r2 = threading.Thread(target=two.run, args=(stop_two,), name="poll-two", daemon=True)
            r2.start()
            while not any(k == "forget" for k, _ in sinks[0].calls):
                assert time.monotonic() < deadline + 60, f"no revocation: {sinks[0].calls}"
                time.sleep(0.05)
            stop_two.set()
            r2.join(30)
        stop.set()
        runner.join(30)
        log = list(one.rebalance_log)
    threads = {t for s in sinks for _, t in s.calls} | {t for *_, t in log}
    assert threads and all(t.startswith(("poll-", "kafka-prefetch")) for t in threads), threads
    assert {k for k, *_ in log} >= {"assigned", "revoked"}, log
