"""``vfr-monitor report``: the governance report, one self-contained HTML page, from the
service's DuckDB file or an offline audit's directory (docs/report.md)."""

from __future__ import annotations

import argparse
import sys


def register(rp: argparse.ArgumentParser) -> None:
    src = rp.add_mutually_exclusive_group(required=True)
    src.add_argument("--db", default=None, help="the service's DuckDB file (opened read-only)")
    src.add_argument("--audit-dir", default=None, help="an offline audit's output directory")
    rp.add_argument("--out", default=None, help="file or directory (default: here; versioned)")
    rp.add_argument("--model", action="append", default=None, help="only this model (repeat)")
    rp.add_argument("--since", default=None, help="first UTC day of the period (YYYY-MM-DD)")
    rp.add_argument("--until", default=None, help="last UTC day of the period (YYYY-MM-DD)")
    rp.add_argument("--compare", nargs=2, metavar=("MODEL_A", "MODEL_B"), default=None)
    rp.add_argument("--config", default=None, help="the TOML config the service ran with")
    rp.add_argument(
        "--interventions", default=None, help="add the four baselines of `intervene --out DIR`"
    )
    rp.add_argument(
        "--figure-cache", default=None,
        help="directory keeping each figure's SVG under a hash of its data: a figure whose "
        "data did not change since a report written with the same directory is not redrawn",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from monitor.config import load_config
    from monitor.report.data import ReportInputError, whole_day
    from monitor.report.render import write_report

    config = load_config(args.config) if args.config else None
    try:
        # whole UTC days only (a time of day is refused, naming the option)
        since, until = whole_day("--since", args.since), whole_day("--until", args.until)
        path, note = write_report(
            db=args.db, audit_dir=args.audit_dir, out=args.out, models=args.model, since=since,
            until=until, compare=tuple(args.compare) if args.compare else None, config=config,
            interventions=args.interventions, figure_cache=args.figure_cache,
        )  # fmt: skip
    except ReportInputError as exc:
        print(f"vfr-monitor report: {exc}", file=sys.stderr)
        return 2
    if note:
        print(f"vfr-monitor report: {note}")
    print(f"vfr-monitor report: written {path}")
    return 0
