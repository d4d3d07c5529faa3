"""``vfr-monitor bench mppd``: EquiLense's pair matcher against the all-pairs oracle, or
with ``--bound`` exact EquiLense against its bounded stratified sample."""

from __future__ import annotations

import argparse
from typing import Any

from monitor.cli.benches import bench_options
from monitor.cli.options import SIZE, sizes


def register(p: argparse.ArgumentParser) -> None:
    bench_options(p, config=False)
    p.add_argument(
        "--n", type=SIZE, default=20_000, help="records for fast vs oracle (default %(default)s)"
    )
    p.add_argument(
        "--n-large",
        type=SIZE,
        default=50_000,
        help="records for the fast matcher alone (default %(default)s)",
    )
    p.add_argument(
        "--bound",
        action="store_true",
        help="EquiLense per model, exact against bounded (stratified sample), at each of --sizes",
    )
    p.add_argument(
        "--sizes",
        type=sizes,
        default=(175_000, 1_800_000),
        metavar="N,N,...",
        help="with --bound: cohort sizes (default 175000,1800000)",
    )
    p.add_argument(
        "--repeats",
        type=SIZE,
        default=5,
        help="with --bound: runs per size, the median reported (default %(default)s)",
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.mppd import run_mppd_bench, run_mppd_bound_bench

    if args.bound:
        return run_mppd_bound_bench(sizes=args.sizes, repeats=args.repeats)
    return run_mppd_bench(n=args.n, n_large=args.n_large)
