"""``vfr-monitor intervene``: its flags reach the comparison and a bad input is named with
exit 2 (real runs through this command: tests/audit/test_interventions.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import monitor.audit.intervene as intervene
from monitor.cli import main


def test_a_missing_input_is_named_with_exit_two(tmp_path, capsys) -> None:
    missing = tmp_path / "cohort.parquet"
    assert main(["intervene", "--input", str(missing), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.endswith(
        f"vfr-monitor intervene: input file not found: {missing}\n"
    )


def test_flags_reach_the_comparison(tmp_path, capsys, monkeypatch) -> None:
    seen = {}

    def fake_run(source, config, *, model, seed, progress):
        seen.update(source=source, model=model, seed=seed, progress=progress)
        return "report"

    monkeypatch.setattr(intervene, "run_interventions", fake_run)
    monkeypatch.setattr(intervene, "format_tables", lambda report: "tables")
    monkeypatch.setattr(intervene, "write_report",
                        lambda report, out: {"json": Path(out) / "baselines.json"})  # fmt: skip
    out = str(tmp_path / "o")
    assert main(["intervene", "--input", "diabetes130", "--out", out]) == 0
    assert seen == {"source": "diabetes130", "model": "xgb", "seed": 0, "progress": sys.stderr}
    assert capsys.readouterr().out == f"tables\n\nwritten: {out}/baselines.json\n"
    argv = ["intervene", "--input", "c.csv", "--out", out, "--model", "logreg", "--seed", "4"]
    assert main([*argv, "--quiet"]) == 0
    assert seen == {"source": "c.csv", "model": "logreg", "seed": 4, "progress": None}
    with pytest.raises(SystemExit) as info:
        main([*argv[:-4], "--model", "svm"])
    assert info.value.code == 2
