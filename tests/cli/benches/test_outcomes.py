from __future__ import annotations

import monitor.cli.benches.demo_runs as demo_runs
from monitor.cli.benches import outcomes
from tests.cli.benches import bench_args, recorder


def test_each_run_is_the_demo_headless_with_the_slow_axes_off(tmp_path, monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.outcome_lead.run_outcome_lead")
    runs = []
    monkeypatch.setattr(demo_runs, "headless_demo", lambda *a, **k: runs.append((a[1:], k)))
    outcomes.measure(bench_args("outcomes", "--records", "3000", "--out-dir", str(tmp_path),
                                "--outcome-bias", "race=2:0.3"))  # fmt: skip
    ((run_demo, out_dir, bias),) = [c["args"] for c in calls]
    assert (out_dir, bias) == (str(tmp_path), "race=2:0.3")
    run_demo("delayed", "race=2:0.3", "d")
    assert runs == [((3000, "d"), {"outcomes": "delayed", "bias": "race=2:0.3", "axes_s": 3600.0})]


def test_a_temporary_directory_without_out_dir(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.outcome_lead.run_outcome_lead")
    outcomes.measure(bench_args("outcomes"))
    (_, out_dir, bias) = calls[0]["args"]
    assert "vfr-bench-outcomes-" in out_dir and bias is None
