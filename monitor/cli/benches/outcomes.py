"""``vfr-monitor bench outcomes``: the demo year with outcomes joined against outcomes
delayed: how much earlier the planted flip is confirmed."""

from __future__ import annotations

import argparse
from typing import Any

from monitor.cli.benches import bench_options
from monitor.cli.options import SIZE


def register(p: argparse.ArgumentParser) -> None:
    bench_options(p)
    p.add_argument(
        "--records",
        type=SIZE,
        default=100_000,
        help="demo discharges per run (default %(default)s)",
    )
    p.add_argument(
        "--outcome-bias",
        default=None,
        metavar="ATTR=GROUP:SHARE",
        help="also run delayed outcomes with this bias (e.g. race=2:0.3)",
    )
    p.add_argument(
        "--out-dir",
        default=None,
        help="keep each run's DuckDB file and report here (default: temporary)",
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import tempfile

    from monitor.bench.outcome_lead import run_outcome_lead
    from monitor.cli.benches.demo_runs import headless_demo
    from monitor.config import load_config

    cfg = load_config(args.config)
    with tempfile.TemporaryDirectory(prefix="vfr-bench-outcomes-") as tmp:
        return run_outcome_lead(
            # the slow axes off (hourly): verdict flips do not wait for them
            lambda mode, bias, d: headless_demo(
                cfg, args.records, d, outcomes=mode, bias=bias, axes_s=3600.0
            ),
            args.out_dir or tmp,
            args.outcome_bias,
        )
