"""``vfr-monitor bench ingest``: the whole ingest pipeline against raw kafka-python
consumption of the same events, through a real broker."""

from __future__ import annotations

import argparse
from typing import Any

from monitor.cli.benches import bench_options
from monitor.cli.options import SIZE


def register(p: argparse.ArgumentParser) -> None:
    bench_options(p)
    p.add_argument(
        "--events", type=SIZE, default=1_000_000, help="events produced (default %(default)s)"
    )
    p.add_argument(
        "--max-batch",
        type=SIZE,
        default=5_000,
        help="records per poll, for the raw consumer and the pipeline alike (default %(default)s)",
    )
    p.add_argument(
        "--bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="a running broker (default: start one with deploy/kafka/kafka.sh)",
    )
    p.add_argument(
        "--no-evaluations",
        action="store_true",
        help="hop evaluations off, to time the ingest path alone",
    )
    p.add_argument(
        "--two-kinds",
        action="store_true",
        help="predictions and their outcomes as separate messages, interleaved",
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.ingest import run_ingest_bench
    from monitor.config import load_config

    return run_ingest_bench(
        events=args.events, bootstrap=args.bootstrap, max_batch=args.max_batch,
        config=None if args.config is None else load_config(args.config),
        evaluations=not args.no_evaluations, two_kinds=args.two_kinds,
    )  # fmt: skip
