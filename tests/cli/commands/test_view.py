"""``vfr-monitor view``: refused, naming the setting, without a broker or a results topic
(the view on a real fleet: tests/scenarios/test_fleet_kafka.py)."""

from __future__ import annotations

import logging

from monitor.cli import main


def test_a_view_needs_a_broker_and_a_results_topic(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: None)  # the test's logging kept
    monkeypatch.delenv("VFR_KAFKA_BOOTSTRAP", raising=False)
    db = tmp_path / "v.duckdb"
    assert main(["view", "--db", str(db)]) == 2
    assert "field 'kafka.bootstrap_servers': the view reads the fleet's results topic" in (
        capsys.readouterr().err
    )
    monkeypatch.setenv("VFR_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    assert main(["view", "--db", str(db)]) == 2
    assert "field 'kafka.results_topic': name the topic the instances publish to" in (
        capsys.readouterr().err
    )
    assert not db.exists()  # refused before the view opened its file
