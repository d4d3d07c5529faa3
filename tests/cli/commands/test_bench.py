"""``vfr-monitor bench``: the chosen benchmark's figures printed one a line or as one JSON
object, and an exit status a benchmark returns passed on (each benchmark's own options:
tests/cli/benches/; the benchmarks run: tests/bench/test_bench_cli.py)."""

from __future__ import annotations

import json

import pytest

import monitor.cli.benches.mppd as mppd
from monitor.cli import main
from monitor.cli.benches import BENCHES
from monitor.cli.commands.bench import DESCRIPTION


@pytest.fixture
def figures(monkeypatch) -> dict:
    out = {"same_pairs": True, "speedup": 12.5}
    monkeypatch.setattr(mppd, "measure", lambda args: out)
    return out


def test_figures_one_a_line(figures, capsys) -> None:
    assert main(["bench", "mppd"]) == 0
    assert capsys.readouterr().out == "        same_pairs: True\n           speedup: 12.5\n"


def test_figures_as_json(figures, capsys) -> None:
    assert main(["bench", "mppd", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == figures


def test_an_exit_status_of_the_benchmark_is_passed_on(monkeypatch, capsys) -> None:
    monkeypatch.setattr(mppd, "measure", lambda args: 2)
    assert main(["bench", "mppd", "--json"]) == 2
    assert capsys.readouterr().out == ""


def test_bench_help_lists_every_benchmark_with_its_summary(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # one line each: argparse would wrap at hyphens
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    listing = " ".join(capsys.readouterr().out.split())
    assert " ".join(DESCRIPTION.split()) in listing
    for name, info in BENCHES.items():
        assert f"{name} {' '.join(info.summary.split())}" in listing
