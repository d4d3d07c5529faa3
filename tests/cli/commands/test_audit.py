"""``vfr-monitor audit``: its flags reach the audit, a bad input is named with exit 2, and
what it prints (real audits through this command: tests/audit/test_run.py)."""

from __future__ import annotations

from pathlib import Path

import monitor.audit.run as audit_run
from monitor.cli import main


def test_a_missing_input_is_named_with_exit_two(tmp_path, capsys) -> None:
    missing = tmp_path / "scored.csv"
    out = tmp_path / "out"
    assert main(["audit", "--input", str(missing), "--out", str(out), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"vfr-monitor audit: input file not found: {missing}\n"
    assert not out.exists()


def test_flags_reach_the_audit_and_the_written_files_are_listed(
    tmp_path, capsys, monkeypatch
) -> None:
    seen = {}

    def fake_run(path, config, progress):
        seen.update(path=path, skip=config.input.skip_invalid_rows, progress=progress.enabled)
        return "report"

    monkeypatch.setattr(audit_run, "run_audit", fake_run)
    monkeypatch.setattr(audit_run, "format_summary", lambda report: f"summary of {report}")
    monkeypatch.setattr(audit_run, "write_report", lambda report, out: {
        "cells_csv": Path(out) / "cells.csv", "cells_json": Path(out) / "cells.json"})  # fmt: skip
    out = str(tmp_path / "o")
    assert main(["audit", "--input", "in.csv", "--out", out]) == 0
    assert seen == {"path": "in.csv", "skip": False, "progress": True}
    assert capsys.readouterr().out == (
        f"summary of report\n\nwritten: {out}/cells.csv, {out}/cells.json\n"
    )
    assert main(["audit", "--input", "in.csv", "--out", out, "--quiet", "--skip-invalid-rows"]) == 0
    assert seen == {"path": "in.csv", "skip": True, "progress": False}
