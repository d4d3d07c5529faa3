"""``vfr-monitor bench page``: the status page's first byte under parallel readers while
the demo stream runs, then the file's report timed cold and cached."""

from __future__ import annotations

import argparse
from typing import Any

from monitor.cli.benches import bench_options
from monitor.cli.options import POSITIVE, SIZE


def register(p: argparse.ArgumentParser) -> None:
    bench_options(p)
    p.add_argument(
        "--records", type=SIZE, default=100_000, help="demo discharges (default %(default)s)"
    )
    p.add_argument(
        "--rate",
        type=POSITIVE,
        default=3_000.0,
        help="messages per second replayed (default %(default)s, the demo's)",
    )
    p.add_argument(
        "--clients", type=SIZE, default=4, help="parallel HTTP clients (default %(default)s)"
    )
    p.add_argument(
        "--repeats",
        type=SIZE,
        default=5,
        help="report renders timed, the median reported (default %(default)s)",
    )
    p.add_argument(
        "--before",
        default=None,
        metavar="FILE",
        help="JSON output of a before run: adds before / after ratios",
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import json
    from pathlib import Path

    from monitor.bench.page import run_page_bench, with_before
    from monitor.cli.benches.demo_runs import demo_payloads
    from monitor.config import load_config

    page_cfg, payloads = demo_payloads(load_config(args.config), args.records, args.rate)
    out = run_page_bench(page_cfg, payloads, records=args.records, rate=args.rate,
                         clients=args.clients, repeats=args.repeats)  # fmt: skip
    if args.before:
        out = with_before(out, json.loads(Path(args.before).read_text()))
    return out
