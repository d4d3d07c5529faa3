"""The examples of the README and the documentation pages run as written.

Why: a newcomer copies these blocks first. The Texas-100X audit config must map every
PAT_AGE band the loader maps (and leave code 23 out, as the loader does), and
`vfr-monitor audit` must accept it; a `produce` + `run` recipe must store what it
produced. Blocks are found wherever they live (README.md, docs/**/*.md), so moving an
example between pages keeps it tested, and each kind must be found at least once.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.data.datasets.texas100x import PAT_AGE_CODES
from tests.support.texas_frames import clean_texas_frame

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]

#: a fenced block: its info string and its body
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks(lang: str) -> list[tuple[str, str]]:
    """(page, body) of every fenced block in ``lang`` on every page."""
    return [
        (str(page.relative_to(ROOT)), m.group(2))
        for page in PAGES
        for m in FENCE.finditer(page.read_text(encoding="utf-8"))
        if m.group(1).strip() == lang
    ]


def _texas_blocks() -> list[tuple[str, str]]:
    return [
        (page, body) for page, body in _blocks("toml") if body.startswith("[input]\nscore_columns")
    ]


TEXAS = _texas_blocks()


def test_the_texas_config_is_on_a_page() -> None:
    assert TEXAS, "no ```toml block starting [input]\\nscore_columns on any page"


@pytest.mark.parametrize("page, block", TEXAS, ids=[page for page, _ in TEXAS])
def test_texas_config_age_codes_are_the_loaders(page: str, block: str) -> None:
    cfg = tomllib.loads(block)
    want = {str(k): v for k, v in PAT_AGE_CODES.items() if isinstance(k, int) and v is not None}
    assert cfg["input"]["codes"]["age_group"] == want, page
    assert "23" not in cfg["input"]["codes"]["age_group"], page


@pytest.mark.parametrize("page, block", TEXAS, ids=[page for page, _ in TEXAS])
def test_texas_config_audits_a_texas_layout_file(page: str, block: str, tmp_path, capsys) -> None:
    config = tmp_path / "texas.toml"
    config.write_text(block, encoding="utf-8")
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


# ------------------------------------------------------------ produce + run recipes
#: Fewer discharges than the pages' default 100,000, so a recipe runs in seconds; what
#: is under test is that the recipe stores what it produced, not the volume.
RECIPE_RECORDS = "3000"


#: an optional argument or alternatives, as usage synopses write them: not a command
SYNOPSIS = re.compile(r"\[--|\s\|\s")


def _recipes(kind: str) -> list[tuple[str, str, str]]:
    """Every ``produce`` line directly followed by a ``run`` line in a ```sh block, as
    (pages, produce line, run line); ``kind`` "kafka" (produce --bootstrap) or "file".
    The same pair on several pages is run once, its id naming every page."""
    found: dict[tuple[str, str], list[str]] = {}
    for page, body in _blocks("sh"):
        lines = body.splitlines()
        for produce, run in itertools.pairwise(lines):
            if " produce " not in produce or " run " not in run:
                continue
            if any(SYNOPSIS.search(line) for line in (produce, run)):
                continue  # a usage line (the command line page's `[--option]` list)
            if ("--bootstrap" in produce) == (kind == "kafka"):
                found.setdefault((produce, run), []).append(page)
    return [(",".join(pages), produce, run) for (produce, run), pages in found.items()]


def _steps(produce: str, run: str, bootstrap: str = "", topic: str = ""):
    """(environment variables, argv) of each line, as written there, with the broker
    address and topic substituted."""
    import shlex

    out = []
    for line in (produce, run):
        line = line.replace("127.0.0.1:9092", bootstrap).replace("scored-discharges", topic)
        words = shlex.split(line.split(" #")[0])
        env = dict(w.split("=", 1) for w in words if "=" in w and w.startswith("VFR_"))
        argv = [w for w in words if w not in {f"{k}={v}" for k, v in env.items()}]
        assert argv[0] == ".venv/bin/vfr-monitor", line
        out.append((env, argv[1:]))
    return out


FILE_RECIPES = _recipes("file")
KAFKA_RECIPES = _recipes("kafka")


def test_both_recipes_are_on_the_pages_and_the_readme_has_the_kafka_one() -> None:
    assert FILE_RECIPES, "no `produce --out` + `run --input` pair in a ```sh block"
    assert KAFKA_RECIPES, "no `produce --bootstrap` + `run` pair in a ```sh block"
    assert any("README.md" in pages.split(",") for pages, _, _ in KAFKA_RECIPES)


def _run_recipe(steps, tmp_path, monkeypatch, capsys) -> str:
    """Run the steps in ``tmp_path`` as the page shows them (plus a smaller cohort for
    produce and, for run, a private DuckDB file, any free port and a stop once idle)."""
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
    produced = re.search(r"produce: ([\d,]+) scored records", out)
    assert produced is not None, "`produce` prints how many records it sent"
    n = int(produced.group(1).replace(",", ""))
    assert n > 0
    assert f"stopped after {n} messages: stored {n}, duplicates 0, dead-lettered 0" in out, out


@pytest.mark.parametrize("pages, produce, run", FILE_RECIPES, ids=[p for p, _, _ in FILE_RECIPES])
def test_file_recipe_stores_what_produce_wrote(
    pages, produce, run, tmp_path, monkeypatch, capsys
) -> None:
    """Issue 22, finding 6: `produce --out` then `run --input` as the pages write them
    stored 0 records (unknown_model, out_of_range:event_time); now it stores them all."""
    out = _run_recipe(_steps(produce, run), tmp_path, monkeypatch, capsys)
    _stored_all(out)
    assert "run --input stream.jsonl --config stream.toml" in out  # program: as it runs here


@pytest.mark.parametrize("pages, produce, run", KAFKA_RECIPES, ids=[p for p, _, _ in KAFKA_RECIPES])
def test_kafka_recipe_stores_what_produce_published(
    pages, produce, run, kafka_broker, tmp_path, monkeypatch, capsys
) -> None:
    """The same through a real broker: `produce --bootstrap ... --topic T`, then
    `VFR_KAFKA_BOOTSTRAP=... VFR_KAFKA_TOPIC=T vfr-monitor run --config T.toml`."""
    import uuid

    topic = f"readme-{uuid.uuid4().hex[:8]}"
    out = _run_recipe(_steps(produce, run, kafka_broker, topic), tmp_path, monkeypatch, capsys)
    _stored_all(out)
    assert (tmp_path / f"{topic}.toml").exists()
