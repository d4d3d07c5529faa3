"""``vfr-monitor run``: its answers to a user's mistakes (issue 22, finding 5) and the
counts it ends with (finding 6), on an embedded replay of a small file.

A mistake the user can fix (a flag out of range, a file that is not there) must be told
in the project's own words: as a usage error naming the flag (argparse, exit 2) or as a
:class:`~monitor.config.errors.UserError` whose message is printed (exit 2). A builtin
exception's message stays withheld (it may quote record values), so before this fix
``run --rate 0`` answered only ``ValueError (details withheld ...)``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.bench.synthetic import model_name
from monitor.cli import main
from tests.support.pipeline_runs import scored_payloads

WITHHELD = "details withheld"


def _stream(tmp_path: Path, n: int = 600) -> tuple[Path, Path]:
    """A JSON-lines replay of ``n`` records of two models, and the config that admits them."""
    data = tmp_path / "scored.jsonl"
    data.write_bytes(b"\n".join(scored_payloads(n, models=2)) + b"\n")
    config = tmp_path / "monitor.toml"
    config.write_text(
        '[service.intake]\nevent_time_bounds = "none"\n'
        + "".join(f'[[models]]\nid = "{model_name(m)}"\n' for m in range(2)),
        encoding="utf-8",
    )
    return data, config


def _run(tmp_path: Path, data: Path, *flags: str) -> int:
    return main(["run", "--input", str(data), "--db", str(tmp_path / "m.duckdb"), "--port", "0",
                 "--no-scheduler", "--until-idle", "0.5", *flags])  # fmt: skip


def test_run_rate_zero_replays_as_fast_as_it_goes(tmp_path, capsys) -> None:
    """``--rate 0`` means "as fast as it goes", as it does for ``demo`` and ``produce``."""
    data, config = _stream(tmp_path)
    assert _run(tmp_path, data, "--config", str(config), "--rate", "0") == 0
    err = capsys.readouterr()
    assert WITHHELD not in err.err
    assert "stopped after 1200 messages" in err.out


@pytest.mark.parametrize("rate", ["-1", "nan", "inf", "fast"])
def test_run_refuses_a_bad_rate_as_a_usage_error_naming_the_flag(tmp_path, capsys, rate) -> None:
    data, _ = _stream(tmp_path, n=20)
    with pytest.raises(SystemExit) as info:
        _run(tmp_path, data, "--rate", rate)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --rate" in err and WITHHELD not in err


def test_run_names_a_missing_input_file_before_starting(tmp_path, capsys) -> None:
    missing = tmp_path / "nowhere.jsonl"
    assert _run(tmp_path, missing) == 2
    captured = capsys.readouterr()
    assert f"--input: no such file: {missing}" in captured.err
    assert WITHHELD not in captured.err
    assert "serving" not in captured.out  # refused before the service started
    assert not (tmp_path / "m.duckdb").exists()


def test_run_without_a_source_names_both_ways_to_give_one(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("VFR_KAFKA_BOOTSTRAP", raising=False)
    assert main(["run", "--db", str(tmp_path / "m.duckdb")]) == 2
    assert ("field 'embedded.path': no source: configure [kafka] or give --input FILE"
            in capsys.readouterr().err)  # fmt: skip
    assert not (tmp_path / "m.duckdb").exists()


def test_run_ends_with_stored_and_dead_lettered_counts_by_reason(tmp_path, capsys, caplog) -> None:
    """Issue 22, finding 6: a run whose every record is refused said only "stopped after
    N messages" and exited 0. The default config registers no model, so all are
    ``unknown_model``: the log says so once, and the last line counts them."""
    data, config = _stream(tmp_path)
    assert _run(tmp_path, data) == 0  # the default config
    out = capsys.readouterr()
    assert "stopped after 1200 messages: stored 0, duplicates 0, dead-lettered 1200 " \
           "(unknown_model 1200)" in out.out  # fmt: skip
    warned = [r.getMessage() for r in caplog.records if "dead-lettered as" in r.getMessage()]
    assert len(warned) == 1 and "unknown_model" in warned[0] and "[[models]]" in warned[0]

    # registered: the same records are stored (a dead letter is not a stored record)
    assert _run(tmp_path, data, "--config", str(config)) == 0
    out = capsys.readouterr().out
    assert "stopped after 1200 messages: stored 1200, duplicates 0, dead-lettered 0" in out
