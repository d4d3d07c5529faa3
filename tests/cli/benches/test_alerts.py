from __future__ import annotations

from pathlib import Path

import pytest

import monitor.cli.benches.demo_runs as demo_runs
from monitor.bench.alerts import ALERTMANAGER, RULE_FILES
from monitor.cli.benches import alerts
from tests.cli.benches import bench_args, recorder

FIGURES = {"models": 2, "planted": 1, "interval_s": 900, "evaluations": 40, "pages": []}


def test_a_given_file_is_replayed_with_the_shipped_rules(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.alerts.run_alerts_bench", dict(FIGURES))
    monkeypatch.setattr(demo_runs, "headless_demo", lambda *a, **k: pytest.fail("no demo"))
    out = alerts.measure(bench_args("alerts", "--db", "demo.duckdb", "--gap", "60"))
    assert calls == [{"args": ("demo.duckdb",), "interval_s": 900, "gap_s": 60,
                      "rule_files": RULE_FILES, "alertmanager": ALERTMANAGER}]  # fmt: skip
    assert out == {k: FIGURES[k] for k in ("models", "planted", "interval_s", "evaluations")}
    out = alerts.measure(bench_args("alerts", "--db", "d", "--json", "--rules", "a.yml", "b.yml",
                                    "--alertmanager", "am.yml"))  # fmt: skip
    assert out == FIGURES  # --json: every figure
    assert calls[1]["rule_files"] == [Path("a.yml"), Path("b.yml")]
    assert calls[1]["alertmanager"] == Path("am.yml")


def test_without_a_file_the_demo_runs_headless_in_a_temporary_directory(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.alerts.run_alerts_bench", dict(FIGURES))
    demos = []

    def fake_demo(cfg, records, out_dir):
        demos.append((records, out_dir))
        return f"{out_dir}/synthetic.duckdb"

    monkeypatch.setattr(demo_runs, "headless_demo", fake_demo)
    alerts.measure(bench_args("alerts", "--records", "5000"))
    ((records, out_dir),) = demos
    assert records == 5000 and calls[0]["args"] == (f"{out_dir}/synthetic.duckdb",)
    assert "vfr-bench-alerts-" in out_dir and not Path(out_dir).exists()  # removed after


def test_a_refused_replay_is_exit_two_with_its_message(monkeypatch, capsys) -> None:
    def refuse(db, **kwargs):
        raise ValueError("--interval: 5 is not within 15-3600")

    monkeypatch.setattr("monitor.bench.alerts.run_alerts_bench", refuse)
    assert alerts.measure(bench_args("alerts", "--db", "d", "--interval", "5")) == 2
    assert capsys.readouterr().err == (
        "vfr-monitor bench alerts: --interval: 5 is not within 15-3600\n"
    )
