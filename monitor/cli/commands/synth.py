"""``vfr-monitor synth``: a seeded synthetic discharge cohort, unscored, written to a file
(docs/data.md)."""

from __future__ import annotations

import argparse

from monitor.cli.options import COUNT, write_frame


def register(s: argparse.ArgumentParser) -> None:
    s.add_argument("--records", type=COUNT, required=True)
    s.add_argument("--seed", type=COUNT, default=0)
    s.add_argument("--out", required=True, help=".parquet, .csv or .jsonl")
    s.add_argument("--scenario", default="none", help="data scenario or 'none'")


def run(args: argparse.Namespace) -> int:
    from monitor.config import ConfigError
    from monitor.data.cohort import SCENARIOS, synth_cohort

    scenario = None if args.scenario == "none" else args.scenario
    if scenario is not None and scenario not in SCENARIOS:
        raise ConfigError(
            "--scenario",
            f"{scenario!r} is not a data scenario; choose from {sorted(SCENARIOS)} (model "
            "updates such as group_score_shift act on scores: see `vfr-monitor produce`)",
        )
    frame = synth_cohort(args.records, seed=args.seed, scenario=scenario)
    write_frame(frame, args.out)
    print(f"vfr-monitor synth: {len(frame):,} discharges -> {args.out}")
    return 0
