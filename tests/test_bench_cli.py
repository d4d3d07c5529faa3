"""The `vfr-monitor bench` commands run and print the keys their notes quote.

Smoke tests only: timings are measured by running the commands, never asserted here
(machines are shared and noisy). What is asserted is that each benchmark still compares
the fast path with its baseline and agrees with it (same pairs, VFR within tolerance).
"""

from __future__ import annotations

import json

from monitor.cli import main


def _run(capsys, *argv: str) -> dict:
    assert main(["bench", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_bench_axes_runs_the_service_entry_points(capsys) -> None:
    out = _run(capsys, "axes", "--records", "20000", "--repeats", "1")
    assert out["cells"] == 28 and out["records"] == 20000
    assert out["axis2_s"] > 0 and out["axis3_s"] > 0


def test_bench_mppd_fast_matcher_agrees_with_the_oracle(capsys) -> None:
    out = _run(capsys, "mppd", "--n", "1500", "--n-large", "3000")
    assert out["same_pairs"] is True and out["speedup"] > 0


def test_bench_axis1_fast_agrees_with_the_record_oracle(capsys) -> None:
    out = _run(capsys, "axis1", "--models", "1", "--window", "2000", "--repeats", "1")
    assert out["cells"] == 28 and out["max_vfr_diff"] <= out["vfr_tolerance"]
