from __future__ import annotations

import json

import monitor.cli.benches.demo_runs as demo_runs
from monitor.cli.benches import page
from tests.cli.benches import bench_args, recorder


def test_the_demos_payloads_are_timed_and_a_before_run_adds_ratios(tmp_path, monkeypatch) -> None:
    after = {"first_byte_p50_s": 0.1, "first_byte_p95_s": 0.2}
    calls = recorder(monkeypatch, "monitor.bench.page.run_page_bench", after)
    asked = []

    def fake_payloads(cfg, records, rate):
        asked.append((records, rate))
        return "demo config", [b"{}"]

    monkeypatch.setattr(demo_runs, "demo_payloads", fake_payloads)
    argv = ["page", "--records", "2000", "--rate", "500", "--clients", "2", "--repeats", "1"]
    assert page.measure(bench_args(*argv)) == after
    assert asked == [(2000, 500.0)]
    assert calls == [{"args": ("demo config", [b"{}"]), "records": 2000, "rate": 500.0,
                      "clients": 2, "repeats": 1}]  # fmt: skip
    before = tmp_path / "before.json"
    before.write_text(json.dumps({"first_byte_p50_s": 0.3, "first_byte_p95_s": 0.2}))
    out = page.measure(bench_args(*argv, "--before", str(before)))
    assert out["ratio_before_over_after"] == {"first_byte_p50_s": 3.0, "first_byte_p95_s": 1.0}
