"""``vfr-monitor produce``: the settings ``run`` needs are written beside the stream and
never over a file it did not write, predictions and outcomes go apart, and the command
it prints runs from where it is printed."""

from __future__ import annotations

import json
import sys
import time

from monitor.cli import main
from monitor.cli.commands import produce


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


def test_produce_without_kafka_needs_an_out_file(capsys) -> None:
    assert main(["produce"]) == 2
    assert "field '--out': without --bootstrap, give --out FILE" in capsys.readouterr().err


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
    printed = capsys.readouterr().out
    assert "outcomes of race=3 missing" in printed
    # the settings beside the stream, and the command that consumes it with them
    config = out.with_suffix(".toml")
    assert config.read_text().startswith(produce.RUN_CONFIG_HEADER)
    assert f"-m monitor.cli run --input {out} --config {config}" in printed


def test_the_printed_command_names_this_interpreter_outside_a_console_script(
    monkeypatch, tmp_path
) -> None:
    monkeypatch.setattr(sys, "argv", ["/somewhere/pytest"])
    assert produce._self_command() == f"{produce._q(sys.executable)} -m monitor.cli"
    script = tmp_path / "vfr-monitor"  # a vfr-monitor that is not the one on PATH
    script.write_text("")
    monkeypatch.setattr(sys, "argv", [str(script)])
    monkeypatch.setenv("PATH", "")
    assert produce._self_command() == produce._q(script.resolve())
    monkeypatch.setenv("PATH", str(tmp_path))
    script.chmod(0o755)
    assert produce._self_command() == "vfr-monitor"


def test_paced_records_keep_their_rate() -> None:
    assert list(produce._paced(iter(range(5)), None)) == list(range(5))
    start = time.monotonic()
    assert list(produce._paced(iter(range(11)), 100.0)) == list(range(11))
    assert time.monotonic() - start >= 0.1  # the 11th record is due 0.1 s after the first
