"""``vfr-monitor bench detection``: pages in stationary years and delay on planted threshold
crossings, certified verdicts against today's rule and oracle CUSUMs."""

from __future__ import annotations

import argparse
from typing import Any

from monitor.cli.benches import bench_options
from monitor.cli.options import COUNT, SIZE


def register(p: argparse.ArgumentParser) -> None:
    bench_options(p)
    p.add_argument(
        "--years", type=SIZE, default=200,
        help="stationary years simulated for the certified layer (default %(default)s)",
    )  # fmt: skip
    p.add_argument(
        "--today-years", type=COUNT, default=20,
        help="stationary years simulated for today's rule (default %(default)s)",
    )  # fmt: skip
    p.add_argument(
        "--delay-reps", type=SIZE, default=200,
        help="runs per planted crossing for the delays (default %(default)s)",
    )  # fmt: skip
    p.add_argument(
        "--seed", type=COUNT, default=1,
        help="seed of the populations and streams (default %(default)s)",
    )  # fmt: skip


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.detection import run_detection_bench
    from monitor.config import load_config

    return run_detection_bench(
        load_config(args.config), years=args.years, today_years=args.today_years,
        delay_reps=args.delay_reps, seed=args.seed,
    )  # fmt: skip
