"""``vfr-monitor bench axis1``: Axis 1's fast engine against the record-level oracle and its
random-number floor, or with ``--sweep`` the engine alone over window sizes."""

from __future__ import annotations

import argparse
from typing import Any

from monitor.cli.benches import bench_options
from monitor.cli.options import SIZE, sizes


def register(p: argparse.ArgumentParser) -> None:
    bench_options(p)
    p.add_argument("--models", type=SIZE, default=12, help="synthetic models (default %(default)s)")
    p.add_argument(
        "--window",
        type=SIZE,
        default=10_000,
        help="records per model's window (default %(default)s; not with --sweep)",
    )
    p.add_argument(
        "--repeats",
        type=SIZE,
        default=5,
        help="timed runs, the median reported (default %(default)s)",
    )
    p.add_argument(
        "--oracle-models",
        type=SIZE,
        default=1,
        help="models the oracle also runs on, its VFRs compared with the engine's "
        "(default %(default)s; not with --sweep)",
    )
    p.add_argument(
        "--sweep",
        action="store_true",
        help="time the engine alone at each of --windows: the cost must not grow with the window",
    )
    p.add_argument(
        "--windows",
        type=sizes,
        default=(1_000, 10_000, 100_000, 1_000_000),
        metavar="N,N,...",
        help="with --sweep: window sizes (default 1000,10000,100000,1000000)",
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.axis1 import run_axis1_bench, run_axis1_sweep
    from monitor.config import load_config

    cfg = load_config(args.config)
    if args.sweep:
        return run_axis1_sweep(
            models=args.models, K=cfg.axis1.K, N=cfg.axis1.N, repeats=args.repeats,
            windows=args.windows, config=cfg,
        )  # fmt: skip
    return run_axis1_bench(
        models=args.models, window=args.window, K=cfg.axis1.K, N=cfg.axis1.N,
        repeats=args.repeats, oracle_models=args.oracle_models, config=cfg,
    )  # fmt: skip
