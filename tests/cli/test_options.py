"""The command line's value types and shared flags: refused values are usage errors
naming the flag, a subcommand's unknown option is refused with its own usage line, the
outcome flags are checked together, and ``--out`` picks the file's format by its name."""

from __future__ import annotations

import argparse
import json
import logging

import pandas as pd
import pytest

from monitor.cli.options import (
    COUNT,
    NONNEG,
    PORT,
    POSITIVE,
    SIZE,
    OwnUsageParser,
    add_outcome_flags,
    outcome_options,
    service_config,
    sizes,
    write_frame,
)
from monitor.config import ConfigError
from monitor.config.errors import UsageError


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        (COUNT, {"0": 0, "12": 12}, ["-1", "1.5", "many"]),
        (SIZE, {"1": 1}, ["0", "-3", "x"]),
        (NONNEG, {"0": 0.0, "2.5": 2.5}, ["-0.1", "nan", "inf", "fast"]),
        (POSITIVE, {"0.5": 0.5}, ["0", "nan", "-inf"]),
        (PORT, {"0": 0, "65535": 65535}, ["65536", "-1", "http"]),
    ],
)
def test_each_type_takes_its_values_and_names_what_it_wanted(kind, good, bad) -> None:
    for text, value in good.items():
        assert kind(text) == value
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError) as info:
            kind(text)
        assert str(info.value) == f"{text!r} is not {kind.__name__}"


def test_a_flag_of_the_wrong_kind_is_a_usage_error_naming_it(capsys) -> None:
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--sizes", type=sizes)
    assert p.parse_args(["--sizes", "1000, 20"]).sizes == (1000, 20)
    with pytest.raises(SystemExit) as info:
        p.parse_args(["--sizes", "1000,0"])
    assert info.value.code == 2
    assert "argument --sizes: '0' is not a whole number >= 1" in capsys.readouterr().err


def test_a_subcommand_refuses_an_option_it_lacks_with_its_own_usage(capsys) -> None:
    p = argparse.ArgumentParser(prog="tool")
    sub = p.add_subparsers(dest="what", parser_class=OwnUsageParser)
    sub.add_parser("one").add_argument("--size")
    with pytest.raises(SystemExit) as info:
        p.parse_args(["one", "--minutes", "3"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tool one [-h] [--size SIZE]")
    assert "tool one: error: unrecognized arguments: --minutes 3" in err


def _outcomes(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_outcome_flags(p)
    return p.parse_args(argv)


def test_outcome_bias_needs_delayed_outcomes_and_a_readable_bias() -> None:
    assert outcome_options(_outcomes()) == ("none", None)
    mode, bias = outcome_options(_outcomes("--outcomes", "delayed", "--outcome-bias", "race=2:0.3"))
    assert mode == "delayed" and (bias.attribute, bias.group, bias.share) == ("race", "2", 0.3)
    with pytest.raises(UsageError) as info:
        outcome_options(_outcomes("--outcomes", "joined", "--outcome-bias", "race=2:0.3"))
    assert str(info.value) == "--outcome-bias: needs --outcomes delayed"
    with pytest.raises(UsageError) as info:
        outcome_options(_outcomes("--outcomes", "delayed", "--outcome-bias", "race"))
    assert str(info.value).startswith("--outcome-bias: expected ATTR=GROUP:SHARE")


def test_write_frame_by_the_names_suffix(tmp_path) -> None:
    frame = pd.DataFrame({
        "record_id": ["a", "b"],
        "event_time": pd.to_datetime(["2026-01-01", "2026-01-02"], utc=True),
        "features": [{"age": 40}, {"age": 71}],
    })  # fmt: skip
    write_frame(frame, str(tmp_path / "c.CSV"))
    back = pd.read_csv(tmp_path / "c.CSV")
    assert [json.loads(f) for f in back["features"]] == [{"age": 40}, {"age": 71}]
    write_frame(frame, str(tmp_path / "c.jsonl"))
    rows = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert [r["record_id"] for r in rows] == ["a", "b"]
    assert rows[0]["event_time"].startswith("2026-01-01T00:00:00")
    write_frame(frame.drop(columns="features"), str(tmp_path / "c.parquet"))
    assert list(pd.read_parquet(tmp_path / "c.parquet")["record_id"]) == ["a", "b"]
    with pytest.raises(ConfigError) as info:
        write_frame(frame, str(tmp_path / "c.txt"))
    assert "field '--out': file name must end in .parquet, .csv or .jsonl" in str(info.value)
    assert not (tmp_path / "c.txt").exists()


def test_service_config_reads_the_file_with_kafka_from_the_environment(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: None)  # the test's logging kept
    path = tmp_path / "m.toml"
    path.write_text("[service.http]\nport = 9999\n")
    monkeypatch.delenv("VFR_KAFKA_BOOTSTRAP", raising=False)
    config, kafka = service_config(argparse.Namespace(config=str(path)))
    assert config.service.http.port == 9999 and kafka is None
    monkeypatch.setenv("VFR_KAFKA_BOOTSTRAP", "broker:9092")
    config, kafka = service_config(argparse.Namespace(config=str(path)))
    assert kafka == config.kafka and kafka.bootstrap_servers == ("broker:9092",)
