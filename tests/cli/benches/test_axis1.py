from __future__ import annotations

import pytest

from monitor.cli.benches import axis1
from tests.cli.benches import bench_args, recorder


def test_the_plain_run_takes_k_and_n_from_the_config(tmp_path, monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.axis1.run_axis1_bench")
    config = tmp_path / "b.toml"
    config.write_text("[axis1]\nK = 200\nN = 5000\n")
    out = axis1.measure(bench_args("axis1", "--config", str(config), "--models", "3",
                                   "--oracle-models", "2"))  # fmt: skip
    assert out == {"ran": "monitor.bench.axis1.run_axis1_bench"}
    (call,) = calls
    assert (call["K"], call["N"], call["config"].axis1.K) == (200, 5000, 200)
    assert {k: call[k] for k in ("models", "window", "repeats", "oracle_models")} == {
        "models": 3, "window": 10_000, "repeats": 5, "oracle_models": 2}  # fmt: skip


def test_the_sweep_times_the_engine_at_each_window(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.axis1.run_axis1_sweep")
    axis1.measure(bench_args("axis1", "--sweep", "--windows", "100,2000", "--repeats", "2"))
    (call,) = calls
    assert (call["windows"], call["repeats"], call["models"]) == ((100, 2000), 2, 12)
    assert (call["K"], call["N"]) == (500, 10_000)  # docs/method.md section 9


def test_a_bad_window_list_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        bench_args("axis1", "--sweep", "--windows", "100,x")
    assert info.value.code == 2
    assert "argument --windows: 'x' is not a whole number >= 1" in capsys.readouterr().err
