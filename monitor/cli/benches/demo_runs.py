"""The demo's year as the benchmarks that need it run it: headless into a DuckDB file
(``bench alerts``, ``bench outcomes``), or as the payloads ``vfr-monitor demo`` replays
(``bench page``)."""

from __future__ import annotations

from typing import Any


def demo_payloads(cfg: Any, records: int, rate: float) -> tuple[Any, list[bytes]]:
    """The demo's config and scored stream as payloads (two models trained on the synthetic
    year), as `vfr-monitor demo` replays them."""
    import pandas as pd

    from monitor.demo import DemoOptions, build_stream, demo_config, payload_stream

    opts = DemoOptions(records=records, rate=rate, live=False)
    stream, _ = build_stream(opts)
    demo_cfg = demo_config(
        cfg, None, opts, tuple(stream.models[0].features),
        tuple(m.model_id for m in stream.models),
        oldest_event_time=pd.to_datetime(stream.frame["event_time"], utc=True).min(),
    )  # fmt: skip
    return demo_cfg, payload_stream(stream)


def headless_demo(
    cfg: Any,
    records: int,
    out_dir: str,
    outcomes: str = "none",
    bias: str | None = None,
    axes_s: float = 6.0,
) -> str:
    """The demo year, as fast as it goes and without a view; returns its DuckDB file."""
    import io

    from monitor.data.outcomes import parse_outcome_bias
    from monitor.demo import DemoOptions, run_demo

    opts = DemoOptions(
        records=records, rate=None, out_dir=out_dir, live=False, outcomes=outcomes,
        axes_interval_s=axes_s,
        outcome_bias=None if bias is None else parse_outcome_bias(bias),
    )  # fmt: skip
    if run_demo(cfg, opts, out=io.StringIO()) != 0:
        raise RuntimeError("the demo run failed")
    return f"{out_dir}/synthetic.duckdb"
