"""``vfr-monitor bench soak``: steady load through a real broker with the scheduler running
(memory growth, lost and duplicated records, drain time). Its configuration is its own
(time compressed), so it takes no ``--config``."""

from __future__ import annotations

import argparse
from typing import Any

from monitor.cli.benches import bench_options
from monitor.cli.options import POSITIVE


def register(p: argparse.ArgumentParser) -> None:
    bench_options(p, config=False)
    p.add_argument(
        "--minutes",
        type=POSITIVE,
        default=10.0,
        help="how long the producer runs (default %(default)s)",
    )
    p.add_argument(
        "--rate",
        type=POSITIVE,
        default=5_000.0,
        help="events per second produced (default %(default)s)",
    )
    p.add_argument(
        "--bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="a running broker (default: start one with deploy/kafka/kafka.sh)",
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.soak import run_soak

    return run_soak(minutes=args.minutes, rate=args.rate, bootstrap=args.bootstrap)
