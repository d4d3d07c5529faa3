"""``vfr-monitor bench axes``: Axis 2 and Axis 3 on a large synthetic cohort, or with
``--from-store`` as the scheduled jobs run them on a DuckDB file."""

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
        default=1_000_000,
        help="cohort size (default %(default)s; not with --from-store)",
    )
    p.add_argument(
        "--repeats",
        type=SIZE,
        default=5,
        help="timed runs, the median reported (default %(default)s; at most 3 with --from-store)",
    )
    p.add_argument(
        "--from-store",
        action="store_true",
        help="the jobs on a real DuckDB file: re-reading the cohorts against "
        "incremental count tables",
    )
    p.add_argument(
        "--records-per-model",
        type=SIZE,
        default=1_000_000,
        help="with --from-store: each model's cohort (default %(default)s)",
    )
    p.add_argument(
        "--models",
        type=SIZE,
        default=4,
        help="with --from-store: models in the file (default %(default)s)",
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.axes import run_axes_bench, run_axes_store_bench
    from monitor.config import load_config

    cfg = load_config(args.config)
    if args.from_store:
        return run_axes_store_bench(
            records_per_model=args.records_per_model, models=args.models,
            repeats=min(args.repeats, 3), config=cfg,
        )  # fmt: skip
    return run_axes_bench(records=args.records, repeats=args.repeats, config=cfg)
