"""The service over SASL_SSL with SCRAM-SHA-512, against a real broker configured for it.

The broker (tests.support.kafka.kafka_scram_broker) has a self-signed certificate for
127.0.0.1 and a SCRAM user made by the KRaft storage format. The service runs as a real
process (`python -m monitor.cli run`) and reads its password from the file named by
VFR_KAFKA_SASL_PASSWORD_FILE; the records are produced over the same SASL_SSL listener.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import duckdb
import pytest

from consumers.kafka_source import _kafka
from monitor.bench.synthetic import synthetic_window
from monitor.config.sources import kafka_config_with_env
from tests.support.kafka import ScramBroker

N_RECORDS = 300


def _settings(broker: ScramBroker, topic: str) -> dict:
    return {
        "bootstrap_servers": broker.bootstrap,
        "topics": [topic],
        "group_id": f"g-{topic}",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": broker.user,
        "ssl_cafile": str(broker.cafile),
        "bootstrap_timeout_ms": 8000,
    }


def _toml(path: Path, settings: dict) -> Path:
    lines = ["[window]", "size = 200", "hop_records = 100", "hop_seconds = 0",
             "[axis1]", "K = 50", "[service.intake]", 'unknown_models = "admit"',
             'event_time_bounds = "none"', "[kafka]"]  # fmt: skip
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _produce(broker: ScramBroker, topic: str) -> None:
    cfg = kafka_config_with_env(
        _settings(broker, topic), {"VFR_KAFKA_SASL_PASSWORD_FILE": str(broker.password_file)}
    )
    assert cfg is not None
    df = synthetic_window(N_RECORDS, models=1, seed=7).drop(columns=["decision"])
    df["record_id"] = [f"scram-{i}" for i in range(len(df))]
    df["event_time"] = "2026-11-01T00:00:00Z"
    kafka = _kafka()
    producer = kafka.KafkaProducer(**cfg.client_kwargs(), acks="all")
    try:
        futures = [producer.send(topic, json.dumps(r).encode()) for r in df.to_dict("records")]
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close()


def _run(config: Path, db: Path, password_file: Path, *extra: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VFR_KAFKA")}
    env["VFR_KAFKA_SASL_PASSWORD_FILE"] = str(password_file)
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "run", "--config", str(config), "--db", str(db),
         "--port", "0", "--no-scheduler", *extra],
        capture_output=True, text=True, env=env, timeout=180, check=False,
    )  # fmt: skip


def test_the_service_consumes_over_sasl_ssl_with_scram(kafka_scram_broker, tmp_path):
    broker = kafka_scram_broker
    topic = f"scram-{uuid.uuid4().hex[:8]}"
    _produce(broker, topic)
    config = _toml(tmp_path / "c.toml", _settings(broker, topic))
    db = tmp_path / "s.duckdb"
    done = _run(config, db, broker.password_file, "--max-messages", str(N_RECORDS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "security=SASL_SSL/SCRAM-SHA-512 user=vfr-monitor" in done.stderr
    password = broker.password_file.read_text().strip()
    assert password not in done.stdout + done.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        (n,) = con.execute("SELECT count(*) FROM discharges").fetchone()
    assert n == N_RECORDS


def test_a_wrong_password_names_the_setting(kafka_scram_broker, tmp_path):
    broker = kafka_scram_broker
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password-4711\n")
    config = _toml(tmp_path / "c.toml", _settings(broker, f"scram-{uuid.uuid4().hex[:8]}"))
    done = _run(config, tmp_path / "w.duckdb", wrong)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "field 'kafka.sasl_plain_password_file'" in out and "rejected" in out, out
    assert "not-the-password-4711" not in out
    assert broker.password_file.read_text().strip() not in out


def test_sasl_plaintext_with_plain_warns_at_start_up(caplog, tmp_path):
    secret = tmp_path / "p"
    secret.write_text("pw\n")
    cfg = kafka_config_with_env(
        {"bootstrap_servers": "127.0.0.1:1", "security_protocol": "SASL_PLAINTEXT",
         "sasl_mechanism": "PLAIN", "sasl_plain_username": "u", "bootstrap_timeout_ms": 1000,
         "request_timeout_ms": 1000},
        {"VFR_KAFKA_SASL_PASSWORD_FILE": str(secret)},
    )  # fmt: skip
    assert cfg is not None and cfg.client_kwargs()["sasl_plain_password"] == "pw"
    from consumers.kafka_source import open_consumer
    from monitor.config import StartupError

    # nothing listens on port 1: the address is named (docs/kafka.md); the warning matters
    with caplog.at_level(logging.WARNING), pytest.raises(StartupError, match=r"127\.0\.0\.1:1"):
        open_consumer(cfg)
    assert "SASL_PLAINTEXT with PLAIN sends the password in clear text" in caplog.text
    assert "pw\n" not in caplog.text
