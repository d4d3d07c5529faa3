from __future__ import annotations

from monitor.cli.benches import axes
from tests.cli.benches import bench_args, recorder


def test_a_synthetic_cohort_by_default(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.axes.run_axes_bench")
    axes.measure(bench_args("axes", "--records", "20000", "--repeats", "4"))
    (call,) = calls
    assert (call["records"], call["repeats"]) == (20000, 4)


def test_from_a_store_at_most_three_repeats(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.axes.run_axes_store_bench")
    axes.measure(bench_args("axes", "--from-store", "--records-per-model", "500",
                            "--models", "2", "--repeats", "5"))  # fmt: skip
    (call,) = calls
    assert (call["records_per_model"], call["models"], call["repeats"]) == (500, 2, 3)
