from __future__ import annotations

import pytest

from monitor.cli.benches import soak
from tests.cli.benches import bench_args, recorder


def test_minutes_rate_and_broker_reach_the_soak(monkeypatch) -> None:
    calls = recorder(monkeypatch, "monitor.bench.soak.run_soak")
    soak.measure(bench_args("soak", "--minutes", "0.1", "--rate", "200"))
    assert calls == [{"args": (), "minutes": 0.1, "rate": 200.0, "bootstrap": None}]


@pytest.mark.parametrize("argv", [["--minutes", "0"], ["--config", "x.toml"]])
def test_refused_before_a_broker_starts(argv, capsys) -> None:
    """A soak of no time, and a config (the soak's is its own), are usage errors."""
    with pytest.raises(SystemExit) as info:
        bench_args("soak", *argv)
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith("usage: vfr-monitor bench soak ")
