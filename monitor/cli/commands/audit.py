"""``vfr-monitor audit``: every axis, the tiers and EquiLense on one scored cohort file,
written to a directory (docs/audit.md)."""

from __future__ import annotations

import argparse
import sys


def register(a: argparse.ArgumentParser) -> None:
    a.add_argument("--input", required=True, help="scored cohort, .csv or .parquet, or "
                   "'diabetes130' (the shipped file, scored as the demo scores it)")  # fmt: skip
    a.add_argument("--config", default=None, help="TOML config (column/code mapping in [input])")
    a.add_argument("--out", required=True, help="output directory")
    a.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    a.add_argument(
        "--skip-invalid-rows", action="store_true",
        help="audit the valid rows and count the rest by reason (default: refuse a file "
        "with invalid rows); as [input] skip_invalid_rows = true",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from monitor.audit.input_mapping import AuditInputError
    from monitor.audit.run import Progress, format_summary, run_audit, write_report
    from monitor.config import load_config

    config = load_config(args.config)
    if args.skip_invalid_rows:  # the flag turns on [input] skip_invalid_rows for this run
        config = config.model_copy(
            update={"input": config.input.model_copy(update={"skip_invalid_rows": True})}
        )
    try:
        report = run_audit(args.input, config, Progress(enabled=not args.quiet))
    except AuditInputError as exc:
        print(f"vfr-monitor audit: {exc}", file=sys.stderr)
        return 2
    paths = write_report(report, args.out)
    print(format_summary(report))
    print("\nwritten: " + ", ".join(str(p) for p in paths.values()))
    return 0
