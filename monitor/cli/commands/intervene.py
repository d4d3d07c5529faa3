"""``vfr-monitor intervene``: the papers' four-baseline intervention comparison (B1-B4) on
a cohort with features (docs/interventions.md)."""

from __future__ import annotations

import argparse
import sys

from monitor.cli.options import COUNT


def register(iv: argparse.ArgumentParser) -> None:
    iv.add_argument("--input", required=True, help="cohort with features (.csv/.parquet) or "
                    "'diabetes130'")  # fmt: skip
    iv.add_argument("--out", required=True, help="output directory")
    iv.add_argument("--config", default=None, help="TOML config ([input], [interventions])")
    iv.add_argument("--model", choices=["xgb", "logreg"], default="xgb")
    iv.add_argument("--seed", type=COUNT, default=0, help="split and model seed")
    iv.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    from monitor.audit.input_mapping import AuditInputError
    from monitor.audit.intervene import format_tables, run_interventions, write_report
    from monitor.config import load_config

    config = load_config(args.config)
    try:
        report = run_interventions(
            args.input, config, model=args.model, seed=args.seed,
            progress=None if args.quiet else sys.stderr,
        )  # fmt: skip
    except AuditInputError as exc:
        print(f"vfr-monitor intervene: {exc}", file=sys.stderr)
        return 2
    paths = write_report(report, args.out)
    print(format_tables(report))
    print("\nwritten: " + ", ".join(str(p) for p in paths.values()))
    return 0
