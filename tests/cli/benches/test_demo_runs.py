from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

import monitor.demo
from monitor.cli.benches.demo_runs import demo_payloads, headless_demo
from monitor.config import MonitorConfig


def test_headless_is_unpaced_without_a_view_and_returns_the_file(monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(monitor.demo, "run_demo", lambda cfg, opts, out: seen.append(opts) or 0)
    path = headless_demo(MonitorConfig(), 4000, "/tmp/x", outcomes="delayed", bias="race=2:0.3")
    assert path == "/tmp/x/synthetic.duckdb"
    (opts,) = seen
    assert (opts.records, opts.rate, opts.live, opts.out_dir) == (4000, None, False, "/tmp/x")
    assert (opts.outcomes, opts.outcome_bias.group, opts.axes_interval_s) == ("delayed", "2", 6.0)
    monkeypatch.setattr(monitor.demo, "run_demo", lambda cfg, opts, out: 1)
    with pytest.raises(RuntimeError, match="the demo run failed"):
        headless_demo(MonitorConfig(), 4000, "/tmp/x")


def test_payloads_carry_the_demos_config_for_its_models(monkeypatch) -> None:
    stream = SimpleNamespace(
        models=[SimpleNamespace(model_id="m1", features=["age"]), SimpleNamespace(model_id="m2")],
        frame=pd.DataFrame({"event_time": ["2026-03-01T00:00:00Z", "2026-01-05T00:00:00Z"]}),
    )
    monkeypatch.setattr(monitor.demo, "build_stream", lambda opts: (stream, None))
    asked = {}

    def fake_config(base, attributes, opts, features, models, oldest_event_time):
        asked.update(features=features, models=models, oldest=oldest_event_time, rate=opts.rate)
        return "demo config"

    monkeypatch.setattr(monitor.demo, "demo_config", fake_config)
    monkeypatch.setattr(monitor.demo, "payload_stream", lambda s: [b"p"])
    assert demo_payloads(MonitorConfig(), 1000, 250.0) == ("demo config", [b"p"])
    assert asked == {"features": ("age",), "models": ("m1", "m2"), "rate": 250.0,
                     "oldest": pd.Timestamp("2026-01-05", tz="UTC")}  # fmt: skip
