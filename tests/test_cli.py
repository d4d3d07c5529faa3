"""The command line's answers to a user's mistakes (issue 22, finding 5).

A mistake the user can fix (a flag out of range, a file that is not there) must be told
in the project's own words: as a usage error naming the flag (argparse, exit 2) or as a
:class:`~monitor.config.errors.UserError` whose message is printed (exit 2). A builtin
exception's message stays withheld (it may quote record values), so before this fix
``run --rate 0`` answered only ``ValueError (details withheld ...)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.bench.synthetic import model_name
from monitor.cli import error_line, main
from monitor.config.errors import ConfigError, MissingInputError, UsageError, UserError
from tests.support.pipeline_runs import scored_payloads

WITHHELD = "details withheld"


def _stream(tmp_path: Path, n: int = 600) -> tuple[Path, Path]:
    """A JSON-lines replay of ``n`` records of two models, and the config that admits them."""
    data = tmp_path / "scored.jsonl"
    data.write_bytes(b"\n".join(scored_payloads(n, models=2)) + b"\n")
    config = tmp_path / "monitor.toml"
    config.write_text(
        '[service]\nevent_time_bounds = "none"\n'
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


def test_negative_counts_are_usage_errors(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["synth", "--records", "-5", "--out", str(tmp_path / "c.parquet")])
    assert info.value.code == 2
    assert "argument --records" in capsys.readouterr().err


def test_demo_names_a_missing_texas_file(tmp_path, capsys) -> None:
    missing = tmp_path / "texas.csv"
    rc = main(["demo", "--dataset", "texas100x", "--data", str(missing),
               "--out-dir", str(tmp_path / "out")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert f"texas100x: file not found: {missing}" in err and WITHHELD not in err


def test_user_errors_are_the_projects_own_types_and_builtins_stay_withheld() -> None:
    """ConfigError and the usage errors share one base; a builtin's message is withheld
    even when it looks harmless (the rule is by type, not by content)."""
    for exc in (ConfigError("x", "y"), UsageError("--rate", "bad"), MissingInputError("f", "g")):
        assert isinstance(exc, UserError) and isinstance(exc, ValueError)
        assert error_line(exc).endswith(str(exc))
    assert isinstance(MissingInputError("f", "g"), FileNotFoundError)
    assert WITHHELD in error_line(ValueError("rate must be a positive number"))


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


def test_produce_never_overwrites_a_config_it_did_not_write(tmp_path, capsys) -> None:
    """`produce --out monitor.jsonl` writes its settings to monitor.toml: a user's file of
    that name is left alone (refused before any model is trained)."""
    mine = tmp_path / "monitor.toml"
    mine.write_text("[service]\nhttp_port = 9999\n", encoding="utf-8")
    assert main(["produce", "--records", "2000", "--out", str(tmp_path / "monitor.jsonl")]) == 2
    assert f"--config-out: {mine} exists and was not written by produce" in capsys.readouterr().err
    assert mine.read_text(encoding="utf-8") == "[service]\nhttp_port = 9999\n"
    assert not (tmp_path / "monitor.jsonl").exists()


def test_produce_names_a_config_it_cannot_write(tmp_path, capsys) -> None:
    """An unwritable --config-out stops produce before the stream is written or sent."""
    target = tmp_path / "no-such-dir" / "run.toml"
    out = tmp_path / "s.jsonl"
    rc = main(["produce", "--records", "2000", "--out", str(out), "--config-out", str(target)])
    assert rc == 2
    assert f"--config-out: cannot write {target}" in capsys.readouterr().err
    assert not out.exists()


def test_produce_sends_predictions_and_outcomes_apart(tmp_path, capsys) -> None:
    """`produce --outcomes delayed`: one prediction per scored record, and its outcome (here
    30 % of race group 3's outcomes left out); the flags are checked before training."""
    out = tmp_path / "feed.jsonl"
    assert main(["produce", "--records", "2000", "--out", str(out),
                 "--outcome-bias", "race=3:0.3"]) == 2  # fmt: skip
    assert "--outcome-bias: needs --outcomes delayed" in capsys.readouterr().err
    assert main(["produce", "--records", "2000", "--out", str(tmp_path / "f.parquet"),
                 "--outcomes", "delayed"]) == 2  # fmt: skip
    assert "--out: predictions and outcomes are written as .jsonl" in capsys.readouterr().err
    assert main(["produce", "--records", "2000", "--out", str(out), "--outcomes", "delayed",
                 "--outcome-bias", "race=3:0.3"]) == 0  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    preds = {(r["model_id"], r["record_id"]): r for r in rows if r["kind"] == "prediction"}
    outs = [r for r in rows if r["kind"] == "outcome"]
    assert preds and all("label" not in r for r in preds.values())
    assert all(set(r) == {"kind", "model_id", "record_id", "event_time", "label"} for r in outs)
    assert all((r["model_id"], r["record_id"]) in preds for r in outs)
    race3 = [k for k, r in preds.items() if r["race"] == "3"]
    got = {(r["model_id"], r["record_id"]) for r in outs}
    share = 1 - sum(k in got for k in race3) / len(race3)
    assert 0.2 < share < 0.4  # the bias acted on that group
    others = [k for k, r in preds.items() if r["race"] != "3"]
    assert all(k in got for k in others)
    assert "outcomes of race=3 missing" in capsys.readouterr().out
