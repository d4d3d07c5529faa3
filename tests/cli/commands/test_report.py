"""``vfr-monitor report``: its options reach the writer, a period is whole UTC days, and
the writer's note and path are printed (real reports through this command:
tests/report/test_report.py)."""

from __future__ import annotations

from datetime import date

import pytest

import monitor.report.render as render
from monitor.cli import main


def test_a_time_of_day_is_refused_naming_the_option(tmp_path, capsys) -> None:
    argv = ["report", "--db", str(tmp_path / "m.duckdb"), "--until", "2026-01-01T10:00"]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("vfr-monitor report: --until '2026-01-01T10:00': "
                                              "not a whole day")  # fmt: skip


def test_an_audit_dir_without_cells_is_named(tmp_path, capsys) -> None:
    assert main(["report", "--audit-dir", str(tmp_path)]) == 2
    assert f"--audit-dir {tmp_path}: no cells.json" in capsys.readouterr().err


def test_one_source_exactly(capsys) -> None:
    for argv in (["report"], ["report", "--db", "a", "--audit-dir", "b"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    assert "argument --audit-dir: not allowed with argument --db" in capsys.readouterr().err


def test_options_reach_the_writer_and_its_note_is_printed(tmp_path, capsys, monkeypatch) -> None:
    seen = {}

    def fake_write(**kwargs):
        seen.update(kwargs)
        return tmp_path / "report-1.html", "2 models left out"

    monkeypatch.setattr(render, "write_report", fake_write)
    config = tmp_path / "m.toml"
    config.write_text("[service.http]\nport = 9999\n")
    argv = ["report", "--db", "m.duckdb", "--model", "a", "--model", "b", "--since",
            "2026-01-01", "--compare", "a", "b", "--config", str(config)]  # fmt: skip
    assert main(argv) == 0
    assert capsys.readouterr().out == (
        "vfr-monitor report: 2 models left out\n"
        f"vfr-monitor report: written {tmp_path / 'report-1.html'}\n"
    )
    assert seen["db"] == "m.duckdb" and seen["audit_dir"] is None
    assert seen["models"] == ["a", "b"] and seen["compare"] == ("a", "b")
    assert (seen["since"], seen["until"]) == (date(2026, 1, 1), None)
    assert seen["config"].service.http.port == 9999
