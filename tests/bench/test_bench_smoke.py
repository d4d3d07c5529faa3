"""Every `vfr-monitor bench` subcommand runs in the suite, at small sizes, so that a
benchmark cannot rot unseen (`bench soak` once failed at start-up for months: its own
config broke a validation rule added later, and nothing ran it).

tests/bench/test_bench_cli.py runs axis1, axes (both modes), mppd (both modes), ingest,
alerts and page; this module runs the rest (soak, outcomes, axis1 --sweep, ingest
--two-kinds) and checks, from the parser itself, that no subcommand or mode flag is left
without a run in tests/bench/. As there, timings are printed by the commands, never asserted
(shared machines); what is asserted is the JSON's keys, the counts asked for, and the
invariants each benchmark promises (nothing lost, ratios consistent with their parts).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
from pathlib import Path

import pandas as pd

from monitor.bench.outcome_lead import METRICS, PLANTED, UPDATE_START
from monitor.cli import build_parser, main
from monitor.core.coverage import needs_outcome

HERE = Path(__file__).resolve().parent


def _run(capsys, *argv: str) -> dict:
    assert main(["bench", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def bench_subparsers() -> dict[str, argparse.ArgumentParser]:
    """The `bench` subcommands as the CLI defines them (name -> parser)."""

    def subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        (action,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        return dict(action.choices)

    return subparsers(subparsers(build_parser())["bench"])


def _invocations() -> list[list[str]]:
    """The literal command lines of tests/bench/*.py: the string arguments of each call
    (``_run(capsys, "soak", "--minutes", ...)``, ``main(["bench", "alerts", ...])``)."""
    out = []
    for path in HERE.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            words: list[str] = []
            for arg in node.args:
                items = arg.elts if isinstance(arg, ast.List) else [arg]
                constants = [i.value for i in items if isinstance(i, ast.Constant)]
                words += [w for w in constants if isinstance(w, str)]
            if words[:1] == ["bench"]:
                words = words[1:]
            if words:
                out.append(words)
    return out


def test_every_subcommand_and_mode_flag_has_a_run_in_the_suite() -> None:
    """Each subcommand, and each of its on/off flags but --json (--sweep, --bound,
    --from-store, --no-evaluations, --two-kinds: each selects other code), appears in a
    command line a test in tests/bench/ runs."""
    runs = _invocations()
    subs = bench_subparsers()
    assert set(subs) == {
        "axis1", "axes", "mppd", "ingest", "alerts", "soak", "page", "outcomes", "detection",
    }  # fmt: skip
    for name, parser in subs.items():
        lines = [words for words in runs if words[0] == name]
        assert lines, f"`bench {name}` is run by no test in tests/bench/"
        flags = [
            a.option_strings[0]
            for a in parser._actions
            if isinstance(a, argparse._StoreTrueAction) and a.option_strings != ["--json"]
        ]
        for flag in flags:
            assert any(flag in words for words in lines), f"`bench {name} {flag}` is never run"


def test_bench_detection_runs_small(capsys) -> None:
    """One stationary year, no year of today's rule, one run per planted crossing: the
    command line reaches every part (false pages, delays, calibration, the demo year)."""
    out = _run(capsys, "detection", "--years", "1", "--today-years", "0", "--delay-reps", "1",
               "--seed", "1")  # fmt: skip
    assert out["seconds"] > 0
    assert {"false_pages", "delay", "calibration"} <= set(out), sorted(out)


def test_bench_soak_loses_nothing_through_the_real_broker(capsys, kafka_broker) -> None:
    """Six seconds of the README's soak (service, scheduler, retention, a producer process)
    against the session's broker: everything produced is accepted once, and the lag drains."""
    out = _run(capsys, "soak", "--minutes", "0.1", "--rate", "500", "--bootstrap", kafka_broker)
    assert (out["minutes"], out["rate"]) == (0.1, 500.0)
    # the producer paces chunks of 4 models x 12 records to the rate: it never runs ahead
    # by more than one chunk; under load it may fall behind, but sends at least one chunk
    assert 48 <= out["events"] <= 500 * 6 + 48
    assert math.isclose(out["achieved_rate"], out["events"] / 6, abs_tol=0.06)
    assert out["lost"] == 0 and out["duplicates"] == 0
    assert out["drain_s"] is not None and out["drain_s"] >= 0  # lag 0, all accepted
    assert 0 <= out["max_lag"] <= out["events"]
    assert 0 <= out["stored_at_end"] <= out["events"]  # retention may have deleted some
    assert out["rss_start_mb"] > 0 and out["rss_end_mb"] > 0 and out["duckdb_end_mb"] > 0
    assert out["evaluations"] >= 0 and out["steady_from_s"] > 0


def test_bench_outcomes_reads_the_lead_and_the_bias_from_the_runs(capsys) -> None:
    """Three small demo years (joined, delayed, delayed with 30 % of race group 2's outcomes
    left out); the figures are read back from each run's DuckDB file."""
    out = _run(capsys, "outcomes", "--records", "3000", "--outcome-bias", "race=2:0.3")
    assert out["cell"] == " ".join(PLANTED) and out["bias"] == "race=2:0.3"
    for flip in (out["joined_flip"], out["delayed_flip"], out["biased_flip"]):
        # a small year may confirm no flip; one it confirms follows the planted update
        assert flip is None or (flip["evaluation"] >= 1 and flip["at"] >= UPDATE_START[:10])
    assert set(out["by_metric"]) == set(METRICS)
    for m in out["by_metric"].values():
        if m["joined"] is None or m["delayed"] is None:
            assert m["lead_days"] is None
        else:
            days = (pd.Timestamp(m["joined"]) - pd.Timestamp(m["delayed"])).total_seconds()
            assert math.isclose(m["lead_days"], days / 86_400, abs_tol=0.006)
    cells = {c["cell"]: c for c in out["delayed_label_cells"]}
    biased = {c["cell"]: c for c in out["biased_label_cells"]}
    assert cells and set(cells) == set(biased)
    for c in (*cells.values(), *biased.values()):
        assert needs_outcome(c["cell"].split(" x ")[0])
        assert 0 <= c["with_outcome"] <= c["predictions"]
        assert all(v is None or 0 <= v <= 1 for v in c["coverage"].values())
    # The bias removes 30 % of group 2's outcomes, so its coverage falls by about 0.3 x its
    # unbiased coverage (~0.97): ~0.29. Group 2 (Black) is >= 12.5 % of the cohort, so >= 250
    # of the window's 2,000 predictions: the binomial SE of the removed share is at most
    # sqrt(0.25 / 250) = 0.032, and a fall of at least 0.15 is more than 4 SE inside it.
    for name, c in biased.items():
        if name.endswith(" x race"):
            assert cells[name]["coverage"]["2"] - c["coverage"]["2"] >= 0.15
            assert c["reason"] == "outcomes incomplete"


def test_bench_axis1_sweep_times_each_window(capsys) -> None:
    out = _run(
        capsys, "axis1", "--sweep", "--models", "1", "--windows", "3000,1000", "--repeats", "1"
    )
    assert (out["cells"], out["models"], out["repeats"]) == (28, 1, 1)
    fast = out["fast_s"]
    assert set(fast) == {"1000", "3000"} and all(s > 0 for s in fast.values())
    ratio = fast["3000"] / fast["1000"]
    assert math.isclose(out["ratio_largest_to_smallest"], ratio, rel_tol=1e-3, abs_tol=1e-3)
    assert "jit_first_call_s" in out


def test_bench_ingest_two_kinds_joins_predictions_and_outcomes(capsys, kafka_broker) -> None:
    """--two-kinds: each record as its prediction and, later, its outcome: twice the
    messages for the same events, all through the pipeline and the sink-alone run."""
    out = _run(
        capsys, "ingest", "--events", "6000", "--max-batch", "500", "--bootstrap", kafka_broker,
        "--two-kinds",
    )  # fmt: skip
    assert out["two_kinds"] is True and out["events"] == 6000  # 12 models x 250 records x 2
    assert out["sink_alone_records"] == 6000 and out["ratio"] > 0 and out["raw_eps"] > 0
