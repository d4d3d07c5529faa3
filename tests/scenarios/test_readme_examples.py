"""The README's Texas-100X audit config works on a file in the Texas-100X layout.

Why: a newcomer copies that block first; it must map every PAT_AGE band the loader maps
(and leave code 23 out, as the loader does), and `vfr-monitor audit` must accept it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np

from monitor.cli import main
from monitor.data.datasets.texas100x import PAT_AGE_CODES
from tests.support.texas_frames import clean_texas_frame

README = Path(__file__).resolve().parents[2] / "README.md"


def _texas_block() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("[input]\nscore_columns")
    return text[start : text.index("```", start)]


def test_readme_age_codes_are_the_loaders() -> None:
    cfg = tomllib.loads(_texas_block())
    want = {str(k): v for k, v in PAT_AGE_CODES.items() if isinstance(k, int) and v is not None}
    assert cfg["input"]["codes"]["age_group"] == want
    assert "23" not in cfg["input"]["codes"]["age_group"]


def test_readme_texas_config_audits_a_texas_layout_file(tmp_path, capsys) -> None:
    config = tmp_path / "texas.toml"
    config.write_text(_texas_block(), encoding="utf-8")
    frame = clean_texas_frame(n=6_000)
    frame = frame[frame["PAT_AGE"] != "23"]
    frame["p_xgb"] = np.random.default_rng(0).random(len(frame))
    data = tmp_path / "scored.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "out"
    assert main(["audit", "--input", str(data), "--config", str(config), "--out", str(out),
                 "--quiet"]) == 0  # fmt: skip
    assert (out / "cells.csv").exists()
    assert "age_group" in capsys.readouterr().out


# ------------------------------------------------------------ the Data section's recipes
#: Fewer discharges than the README's default 100,000, so a recipe runs in seconds; what
#: is under test is that the recipe stores what it produced, not the volume.
RECIPE_RECORDS = "3000"


def _recipe(kind: str, bootstrap: str = "", topic: str = "") -> list[tuple[dict, list[str]]]:
    """The Data section's ``produce`` + ``run`` commands for ``kind`` ("kafka" or
    "file"), as written there, with the broker address and topic substituted:
    (environment variables, argv) pairs."""
    import shlex

    text = README.read_text(encoding="utf-8")
    start = text.index("```sh\n.venv/bin/vfr-monitor synth --records 100000 --seed 0 --scenario")
    lines = text[start : text.index("```", start + 5)].splitlines()[1:]
    kafka = next(i for i, line in enumerate(lines) if "--bootstrap" in line)
    pick = lines[kafka : kafka + 2] if kind == "kafka" else lines[kafka + 2 : kafka + 4]
    out = []
    for line in pick:
        line = line.replace("127.0.0.1:9092", bootstrap).replace("scored-discharges", topic)
        words = shlex.split(line)
        env = dict(w.split("=", 1) for w in words if "=" in w and w.startswith("VFR_"))
        argv = [w for w in words if w not in {f"{k}={v}" for k, v in env.items()}]
        assert argv[0] == ".venv/bin/vfr-monitor", line
        out.append((env, argv[1:]))
    return out


def _run_recipe(steps, tmp_path, monkeypatch, capsys) -> str:
    """Run the steps in ``tmp_path`` as the README shows them (plus a smaller cohort for
    produce and, for run, a private DuckDB file, any free port and a stop once idle)."""
    from monitor.cli import main

    monkeypatch.chdir(tmp_path)
    (produce_env, produce), (run_env, run) = steps
    assert produce[0] == "produce" and run[0] == "run" and not produce_env
    assert main([*produce, "--records", RECIPE_RECORDS]) == 0
    produced = capsys.readouterr().out
    for k, v in run_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("VFR_KAFKA_GROUP", f"readme-{tmp_path.name}")
    assert main([*run, "--db", "recipe.duckdb", "--port", "0", "--no-scheduler",
                 "--until-idle", "2"]) == 0  # fmt: skip
    return produced + capsys.readouterr().out


def _stored_all(out: str) -> None:
    import re

    n = int(re.search(r"produce: ([\d,]+) scored records", out).group(1).replace(",", ""))
    assert n > 0
    assert f"stopped after {n} messages: stored {n}, duplicates 0, dead-lettered 0" in out, out


def test_readme_file_recipe_stores_what_produce_wrote(tmp_path, monkeypatch, capsys) -> None:
    """Issue 22, finding 6: `produce --out` then `run --input` as the README writes them
    stored 0 records (unknown_model, out_of_range:event_time); now it stores them all."""
    out = _run_recipe(_recipe("file"), tmp_path, monkeypatch, capsys)
    _stored_all(out)
    assert "run --input stream.jsonl --config stream.toml" in out  # program: as it runs here


def test_readme_kafka_recipe_stores_what_produce_published(
    kafka_broker, tmp_path, monkeypatch, capsys
) -> None:
    """The same through a real broker: `produce --bootstrap ... --topic T`, then
    `VFR_KAFKA_BOOTSTRAP=... VFR_KAFKA_TOPIC=T vfr-monitor run --config T.toml`."""
    import uuid

    topic = f"readme-{uuid.uuid4().hex[:8]}"
    out = _run_recipe(_recipe("kafka", kafka_broker, topic), tmp_path, monkeypatch, capsys)
    _stored_all(out)
    assert (tmp_path / f"{topic}.toml").exists()
