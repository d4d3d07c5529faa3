from __future__ import annotations

from monitor.cli.benches import ingest
from tests.cli.benches import bench_args, recorder


def test_the_config_only_when_given_and_evaluations_on_by_default(tmp_path, monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.ingest.run_ingest_bench")
    ingest.measure(bench_args("ingest", "--events", "3000", "--bootstrap", "h:9092"))
    (call,) = calls
    assert call == {"args": (), "events": 3000, "bootstrap": "h:9092", "max_batch": 5_000,
                    "config": None, "evaluations": True, "two_kinds": False}  # fmt: skip
    config = tmp_path / "b.toml"
    config.write_text("[axis1]\nK = 200\n")
    ingest.measure(bench_args("ingest", "--config", str(config), "--no-evaluations",
                              "--two-kinds", "--max-batch", "100"))  # fmt: skip
    call = calls[1]
    assert call["config"].axis1.K == 200 and call["max_batch"] == 100
    assert (call["evaluations"], call["two_kinds"]) == (False, True)
