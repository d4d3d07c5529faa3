"""``vfr-monitor bench alerts``: a demo year's DuckDB file replayed through the exporter,
the shipped alert rules (promtool) and Alertmanager's routing (amtool)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from monitor.cli.benches import bench_options
from monitor.cli.options import SIZE


def register(p: argparse.ArgumentParser) -> None:
    bench_options(p)
    p.add_argument(
        "--db", default=None, help="a demo DuckDB file (default: run the demo headless first)"
    )
    p.add_argument(
        "--records",
        type=SIZE,
        default=100_000,
        help="demo discharges, when no --db (default %(default)s)",
    )
    p.add_argument(
        "--interval",
        type=int,
        default=900,
        help="seconds between samples and rule runs, 15-3600 (default %(default)s)",
    )
    p.add_argument(
        "--gap",
        type=int,
        default=None,
        help="seconds of replay per evaluation (default: its event-time gap, cut "
        "to the rules' memory)",
    )
    p.add_argument(
        "--rules",
        nargs="+",
        default=None,
        metavar="FILE",
        help="alert rule files (default: the shipped deploy/prometheus rules)",
    )
    p.add_argument(
        "--alertmanager",
        default=None,
        metavar="FILE",
        help="Alertmanager config (default: the shipped one)",
    )


def measure(args: argparse.Namespace) -> dict[str, Any] | int:
    import tempfile
    from pathlib import Path

    from monitor.bench.alerts import ALERTMANAGER, RULE_FILES, run_alerts_bench
    from monitor.cli.benches.demo_runs import headless_demo
    from monitor.config import load_config

    cfg = load_config(args.config)
    try:
        with tempfile.TemporaryDirectory(prefix="vfr-bench-alerts-") as tmp:
            db = args.db or headless_demo(cfg, args.records, tmp)
            out = run_alerts_bench(
                db, interval_s=args.interval, gap_s=args.gap,
                rule_files=[Path(f) for f in args.rules] if args.rules else RULE_FILES,
                alertmanager=Path(args.alertmanager) if args.alertmanager else ALERTMANAGER,
            )  # fmt: skip
    except ValueError as exc:
        print(f"vfr-monitor bench alerts: {exc}", file=sys.stderr)
        return 2
    if not args.json:
        out = {k: out[k] for k in ("models", "planted", "interval_s", "evaluations")}
    return out
