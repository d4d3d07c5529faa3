from __future__ import annotations

from monitor.cli.benches import detection
from tests.cli.benches import bench_args, recorder


def test_years_repetitions_and_seed_reach_the_bench(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.detection.run_detection_bench")
    detection.measure(bench_args("detection", "--years", "3", "--today-years", "0",
                                 "--delay-reps", "2", "--seed", "9"))  # fmt: skip
    (call,) = calls
    (config,) = call.pop("args")
    assert config.axis1.K == 500  # the defaults when no --config
    assert call == {"years": 3, "today_years": 0, "delay_reps": 2, "seed": 9}
