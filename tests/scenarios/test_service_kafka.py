"""The service end to end against a real Kafka broker: results, offsets, kill -9, poison.

The service runs as a real process (`vfr-monitor run`), is killed with SIGKILL in
the middle of the stream, restarted, and must end with exactly the results of
an uninterrupted run: every record stored once, every window result equal to
the one computed in-process on the same records, offsets committed to the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import duckdb
import pandas as pd

from consumers.base import (
    Origin,
)
from consumers.kafka_source import (
    _kafka,
)
from consumers.kafka_tools import (
    ensure_topic,
    produce_records,
)
from monitor.bench.synthetic import synthetic_window
from monitor.config import load_config
from monitor.store import Store, queries
from monitor.stream.pipeline import (
    Pipeline,
)
from tests.support.pipeline_runs import stored_results

VFR = Path(sys.executable).with_name("vfr-monitor")
POISON = [b"{not json", b"\xff\xfe garbage", b"[1,2]", b'{"record_id": 5}', b"x" * 70_000]


def _records(n=1200, models=3):
    df = synthetic_window(n, models=models, seed=11).drop(columns=["decision"])
    df["event_time"] = "2026-11-01T00:00:00Z"
    return df.to_dict("records")


def _config(tmp_path: Path, bootstrap: str, topic: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(
        f"""
[window]
size = 800
hop_records = 200
hop_seconds = 0
[axis1]
K = 1500
[[models]]
id = "model-00"
[[models]]
id = "model-01"
[[models]]
id = "model-02"
[kafka]
bootstrap_servers = "{bootstrap}"
topics = ["{topic}"]
group_id = "g-{topic}"
max_batch = 150
"""
    )
    return p


def _start(cfg: Path, db: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VFR_KAFKA")}
    proc = subprocess.Popen(
        [str(VFR), "run", "--config", str(cfg), "--db", str(db), "--port", "0",
         "--no-scheduler", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None  # stdout=PIPE
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        m = re.search(r"on (http://127\.0\.0\.1:\d+)", line or "")
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("service did not start:\n" + (proc.stdout.read() or ""))


def _evaluations(url: str) -> float:
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vfr_evaluations_total{")
    )


def test_kill_9_mid_stream_then_restart_equals_uninterrupted(kafka_broker, tmp_path):
    topic = f"e2e-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, topic, partitions=3)
    records = _records()
    produce_records(kafka_broker, topic, records)  # keyed by model: a model's order is fixed
    produce_records(kafka_broker, topic, POISON)
    cfg = _config(tmp_path, kafka_broker, topic)
    db = tmp_path / "svc.duckdb"

    proc, url = _start(cfg, db)
    deadline = time.monotonic() + 120
    while _evaluations(url) < 3:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with duckdb.connect(str(db), read_only=True) as c:
        done = c.execute(
            "SELECT COUNT(DISTINCT (model_id, evaluation)) FROM window_results"
        ).fetchone()[0]
    total_evaluations = 3 * (1200 // 200)
    assert 0 < done < total_evaluations, "the kill must land in the middle of the stream"

    proc, url = _start(cfg, db, "--until-idle", "2")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out

    # the same records through the pipeline in-process, uninterrupted
    ref = Store(tmp_path / "ref.duckdb", load_config(cfg))
    pipe = Pipeline(load_config(cfg), ref)
    payloads = [json.dumps(r).encode() for r in records]
    for i in range(0, len(payloads), 500):
        pipe.ingest_batch(
            payloads[i : i + 500],
            [Origin("x", 0, i + k) for k in range(500)][: len(payloads[i : i + 500])],
        )
    pipe.flush()

    got = Store(db, load_config(cfg))
    assert got.read(queries.counts)["discharges"] == len(records)  # nothing lost, nothing twice
    assert got.read(queries.counts)["window_results"] == total_evaluations * 28
    # arrival sequence numbers depend on how partitions interleave; a model's own
    # stream, its windows and every result must not
    drop = ["window_first_seq", "window_last_seq"]
    pd.testing.assert_frame_equal(
        stored_results(ref).drop(columns=drop), stored_results(got).drop(columns=drop)
    )
    reasons = sorted(
        r[0] for r in got.cursor().execute("SELECT reason FROM dead_letters").fetchall()
    )
    assert reasons == sorted(
        ["invalid_json", "invalid_json", "not_an_object", "wrong_type:record_id", "oversized"]
    )

    kafka = _kafka()
    admin = kafka.KafkaAdminClient(bootstrap_servers=kafka_broker)
    consumer = kafka.KafkaConsumer(bootstrap_servers=kafka_broker)
    try:
        committed = admin.list_group_offsets(f"g-{topic}")[f"g-{topic}"]
        tps = [kafka.TopicPartition(topic, p) for p in range(3)]
        ends = consumer.end_offsets(tps)
        used = [tp for tp in tps if ends[tp] > 0]  # a partition nothing was sent to has no commit
        assert used and {tp: committed[tp].offset for tp in used} == {tp: ends[tp] for tp in used}
    finally:
        admin.close()
        consumer.close()


def test_a_topic_kept_shorter_than_the_horizon_stops_start_up(kafka_broker, tmp_path):
    """A topic left at the broker's 7-day default cannot rebuild a 90-day cohort: the
    service refuses to start and says which topic setting to change; "warn" lets it run."""
    topic = f"short-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, topic, partitions=1, retention_ms=7 * 86_400_000)
    cfg = _config(tmp_path, kafka_broker, topic)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VFR_KAFKA")}
    run = [str(VFR), "run", "--config", str(cfg), "--db", str(tmp_path / "s.duckdb"),
           "--port", "0", "--no-scheduler"]  # fmt: skip
    done = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"topic '{topic}' keeps records for 7 days (retention.ms=604800000)" in done.stderr
    assert "90-day horizon" in done.stderr and "retention.ms=7776000000" in done.stderr

    cfg.write_text(cfg.read_text() + 'retention_check = "warn"\n')
    produce_records(kafka_broker, topic, _records(30, models=1))
    done = subprocess.run([*run, "--max-messages", "30"], capture_output=True, text=True,
                          env=env, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "keeps records for 7 days" in done.stdout + done.stderr  # the warning
