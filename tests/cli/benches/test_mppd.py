from __future__ import annotations

import pytest

from monitor.cli.benches import mppd
from tests.cli.benches import bench_args, recorder


def test_the_matcher_against_the_oracle_by_default(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.mppd.run_mppd_bench")
    mppd.measure(bench_args("mppd", "--n", "1500"))
    assert calls == [{"args": (), "n": 1500, "n_large": 50_000}]


def test_bound_at_each_size(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.mppd.run_mppd_bound_bench")
    mppd.measure(bench_args("mppd", "--bound", "--sizes", "5000,30000", "--repeats", "1"))
    assert calls == [{"args": (), "sizes": (5000, 30000), "repeats": 1}]


def test_no_config_option(capsys) -> None:
    """The matcher reads no configuration: ``--config`` is not offered."""
    with pytest.raises(SystemExit) as info:
        bench_args("mppd", "--config", "x.toml")
    assert info.value.code == 2
    assert "bench mppd: error: unrecognized arguments: --config x.toml" in capsys.readouterr().err
