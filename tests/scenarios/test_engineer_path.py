"""The engineer's path as written: `vfr-monitor run` as a real process, its lines, its file.

* tiers appear within a minute of a model having enough records, though the slow axes'
  cadence is the default hour (their first run per model; real process, real DuckDB);
* a progress line every few seconds;
* with a real broker (tests/support/kafka.py): the environment alone configures Kafka; a
  wrong broker address is named, with what to check, within the configured bound;
  kafka-python's INFO chatter is gone; the command `produce` prints runs as printed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import duckdb
import pandas as pd

from monitor.bench.synthetic import synthetic_window

VFR = Path(sys.executable).with_name("vfr-monitor")
#: light axes, so that a first run takes seconds on a shared machine; cadence: the default
LIGHT = """
[window]
size = 2000
hop_records = 500
hop_seconds = 0
[axis1]
K = 100
[axis2]
sizes = [500, 1000, 2000]
R = 10
[axis3]
folds = 5
[[models]]
id = "model-00"
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VFR_KAFKA")}
    return {**env, **extra}


def _stream(path: Path, n: int) -> None:
    df = synthetic_window(n, models=1, seed=3).drop(columns=["decision"])
    df["record_id"] = [f"r{i}" for i in range(n)]
    df["event_time"] = "2026-11-01T00:00:00Z"
    path.write_text("".join(json.dumps(r) + "\n" for r in df.to_dict("records")))


def test_tiers_appear_within_a_minute_not_an_hour(tmp_path):
    _stream(tmp_path / "s.jsonl", 4000)
    (tmp_path / "c.toml").write_text(LIGHT + '[service.intake]\nevent_time_bounds = "none"\n')
    db = tmp_path / "s.duckdb"
    t0 = time.time()
    # 4,000 records at 100/s: the model reaches [service.axes] first_run_records (1,000) at ~10 s
    done = subprocess.run(
        [str(VFR), "run", "--config", str(tmp_path / "c.toml"), "--input",
         str(tmp_path / "s.jsonl"), "--rate", "100", "--db", str(db), "--port", "0",
         "--until-idle", "3", "--progress-interval", "2"],
        capture_output=True, text=True, env=_env(), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    con = duckdb.connect(str(db), read_only=True)
    runs = con.execute(
        "SELECT job, epoch(started_at) AS t, state FROM job_runs ORDER BY started_at"
    ).df()
    axes = con.execute(
        "SELECT axis, epoch(computed_at) AS t, cohort_n FROM axis_results "
        "WHERE model_id = 'model-00' ORDER BY computed_at"
    ).df()
    tiers = con.execute(
        "SELECT evaluation, tier FROM window_results WHERE model_id = 'model-00' "
        "ORDER BY evaluation"
    ).df()
    con.close()
    # the runs at start found an empty file or, on a loaded machine, the first few records;
    # the next regular run is an hour away: a result on the model's 1,000+ records comes
    # from its first run, within a minute of the start
    assert (runs["state"] == "success").all(), runs
    for axis in ("axis2", "axis3"):
        mine = axes[(axes["axis"] == axis) & (axes["cohort_n"] >= 1000)]
        assert len(mine) >= 1, (axis, axes, runs)
        assert mine["t"].iloc[0] - t0 < 60, (axis, axes, t0)
    last = tiers[tiers["evaluation"] == tiers["evaluation"].max()]
    assert len(last) == 28 and "Pending" not in set(last["tier"]), last
    # a progress line every 2 s of the ~40 s run
    progress = [ln for ln in done.stdout.splitlines() if ln.startswith("vfr-monitor: progress:")]
    assert len(progress) >= 5, done.stdout
    assert re.search(r"progress: [\d,]+ messages \([\d,]+/s\), stored [\d,]+, dead letters 0, "
                     r"lag -", progress[-1]), progress[-1]  # fmt: skip


def test_progress_line_off(tmp_path):
    _stream(tmp_path / "s.jsonl", 300)
    (tmp_path / "c.toml").write_text(LIGHT + "[service]\nprogress_interval_s = 0.5\n"
                                     '[service.intake]\nevent_time_bounds = "none"\n')
    done = subprocess.run(
        [str(VFR), "run", "--config", str(tmp_path / "c.toml"), "--input",
         str(tmp_path / "s.jsonl"), "--rate", "100", "--db", str(tmp_path / "s.duckdb"),
         "--port", "0", "--until-idle", "2", "--no-scheduler", "--progress-interval", "0"],
        capture_output=True, text=True, env=_env(), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "progress:" not in done.stdout and "stored 300" in done.stdout


# ------------------------------------------------------------------ with a real broker


def _produce(broker: str, topic: str, cwd: Path, records: int = 2000) -> tuple[str, int]:
    """`vfr-monitor produce` as a program: its printed `run` command, messages sent."""
    done = subprocess.run(
        [str(VFR), "produce", "--bootstrap", broker, "--topic", topic, "--records",
         str(records)],
        capture_output=True, text=True, env=_env(), cwd=cwd, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    n = int(re.search(r"produce: ([\d,]+) scored records", done.stdout)[1].replace(",", ""))
    return done.stdout.split("consume with: ", 1)[1].strip(), n


def test_environment_alone_configures_kafka(kafka_broker, tmp_path):
    topic = f"env-{uuid.uuid4().hex[:8]}"
    _produce(kafka_broker, topic, tmp_path, records=500)
    done = subprocess.run(
        [str(VFR), "run", "--db", str(tmp_path / "e.duckdb"), "--port", "0",
         "--no-scheduler", "--until-idle", "3"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=_env(VFR_KAFKA_BOOTSTRAP=kafka_broker, VFR_KAFKA_TOPIC=topic,
                 VFR_KAFKA_GROUP=f"g-{topic}"),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # no --config: the default registry is empty, so every message is consumed and
    # dead-lettered as unknown_model (the point: Kafka was configured and read)
    m = re.search(r"stopped after (\d+) messages", done.stdout)
    assert m and int(m.group(1)) > 0, done.stdout
    assert "unknown_model" in done.stdout
    # kafka-python at WARNING: none of its INFO lines (about 100 a run before)
    assert not re.search(r" INFO kafka\.", done.stderr), done.stderr[:3000]


def test_library_logs_can_be_raised(kafka_broker, tmp_path):
    topic = f"log-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [str(VFR), "run", "--db", str(tmp_path / "l.duckdb"), "--port", "0",
         "--no-scheduler", "--until-idle", "2"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=_env(VFR_KAFKA_BOOTSTRAP=kafka_broker, VFR_KAFKA_TOPIC=topic,
                 VFR_KAFKA_LOG_LEVEL="INFO"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.search(r" INFO kafka\.", done.stderr)


def test_wrong_broker_address_is_named_within_the_bound(tmp_path):
    # a port nothing listens on: kafka-python retries until bootstrap_timeout_ms
    from tests.support.servers import free_ports

    (port,) = free_ports(1)
    wrong = f"127.0.0.1:{port}"
    t0 = time.monotonic()
    done = subprocess.run(
        [str(VFR), "run", "--db", str(tmp_path / "w.duckdb"), "--port", "0"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env=_env(VFR_KAFKA_BOOTSTRAP=wrong, VFR_KAFKA_BOOTSTRAP_TIMEOUT_MS="4000"),
    )  # fmt: skip
    took = time.monotonic() - t0
    assert done.returncode == 3, done.stderr
    assert f"cannot start: no Kafka broker answered at {wrong} within 4 s" in done.stderr
    assert "nothing listens on that port (connection refused): check that the broker" in done.stderr
    assert "Check kafka.bootstrap_servers (VFR_KAFKA_BOOTSTRAP)" in done.stderr
    assert f"kafka: connecting to {wrong}" in done.stderr  # said at once, not after 4 s
    assert "details withheld" not in done.stderr
    assert took < 4 + 30  # the bound, plus the start-up of a Python process on a busy host
    # a host name that does not resolve is said so
    done = subprocess.run(
        [str(VFR), "run", "--db", str(tmp_path / "w2.duckdb"), "--port", "0"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env=_env(VFR_KAFKA_BOOTSTRAP="kafka-typo.invalid:9092",
                 VFR_KAFKA_BOOTSTRAP_TIMEOUT_MS="2000"),
    )  # fmt: skip
    assert done.returncode == 3 and "the host name does not resolve" in done.stderr


def test_the_run_command_produce_prints_runs_as_printed(kafka_broker, tmp_path):
    topic = f"printed-{uuid.uuid4().hex[:8]}"
    command, sent = _produce(kafka_broker, topic, tmp_path)
    # the venv is not activated: `vfr-monitor` is not on PATH, so a bare name would fail
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != VFR.parent
    )
    assert command.startswith(f"VFR_KAFKA_BOOTSTRAP={kafka_broker} VFR_KAFKA_TOPIC={topic} ")
    proc = subprocess.Popen(
        ["bash", "-c", f"{command} --port 0 --db run.duckdb --progress-interval 1"],
        cwd=tmp_path, env=_env(PATH=path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    lines: list[str] = []
    deadline = time.monotonic() + 180
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            m = re.search(r"progress: ([\d,]+) messages.*stored ([\d,]+)", line)
            if m and int(m.group(2).replace(",", "")) >= sent:
                break
            assert time.monotonic() < deadline, "".join(lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    out = "".join(lines) + rest
    assert proc.returncode == 0, out
    assert f"stored {sent}, duplicates 0, dead-lettered 0" in out, out
    stored = duckdb.connect(str(tmp_path / "run.duckdb"), read_only=True)
    n = stored.execute("SELECT count(*) FROM discharges").fetchone()[0]
    stored.close()
    assert n == sent
    # the printed command is a shell command whose program exists as written
    program = shlex.split(command)[2]
    assert Path(program).is_file() or program == "vfr-monitor", program


def test_printed_file_command_runs_too(tmp_path):
    done = subprocess.run(
        [str(VFR), "produce", "--out", "stream.jsonl", "--records", "300"],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    command = done.stdout.split("consume with: ", 1)[1].strip()
    run = subprocess.run(
        ["bash", "-c", f"{command} --port 0 --until-idle 2 --no-scheduler"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env=_env(PATH="/usr/bin:/bin"),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    sent = pd.read_json(tmp_path / "stream.jsonl", lines=True).shape[0]
    assert f"{sent:,} scored records" in done.stdout
    assert f"stored {sent}, duplicates 0, dead-lettered 0" in run.stdout
