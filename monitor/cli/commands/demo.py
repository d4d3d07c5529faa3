"""``vfr-monitor demo``: the service on a drifting scored stream (synthetic, Diabetes-130
or Texas-100X), with a live view, a summary and the report (docs/demo.md)."""

from __future__ import annotations

import argparse

from monitor.cli.options import (
    COUNT,
    DEFAULT_SCENARIO,
    NONNEG,
    PORT,
    POSITIVE,
    SCENARIO_HELP,
    SCENARIO_NAMES,
    SIZE,
    add_outcome_flags,
    outcome_options,
)


def register(d: argparse.ArgumentParser) -> None:
    d.add_argument("--config", default=None, help="TOML config (the demo shortens the cadence)")
    d.add_argument(
        "--dataset", choices=["synthetic", "diabetes130", "texas100x"], default="synthetic"
    )
    d.add_argument("--data", default=None, help="texas100x: path of your Texas-100X file")
    d.add_argument("--records", type=SIZE, default=100_000, help="synthetic: discharges drawn")
    d.add_argument("--seed", type=COUNT, default=0)
    d.add_argument(
        "--scenario", default=DEFAULT_SCENARIO, choices=[*SCENARIO_NAMES, "none"],
        help=SCENARIO_HELP,
    )  # fmt: skip
    d.add_argument(
        "--rate",
        type=NONNEG,
        default=3000.0,
        help="messages/s into the pipeline (0: as fast as it goes)",
    )
    d.add_argument("--axes-interval", type=POSITIVE, default=6.0, help="slow-axes cadence, s")
    d.add_argument("--out-dir", default="demo-output", help="where the DuckDB file goes")
    d.add_argument("--port", type=PORT, default=0, help="HTTP port on 127.0.0.1 (0: any free)")
    d.add_argument("--follow", action="store_true", help="keep serving after the replay")
    d.add_argument(
        "--view",
        choices=["auto", "live", "lines"],
        default="auto",
        help="redraw in place (live) or print progress lines",
    )
    add_outcome_flags(d)


def run(args: argparse.Namespace) -> int:
    from monitor.config import ConfigError, load_config
    from monitor.config.errors import UsageError
    from monitor.demo import DemoOptions, run_demo

    scenario = None if args.scenario == "none" else args.scenario
    if args.dataset != "synthetic" and args.scenario not in ("none", DEFAULT_SCENARIO):
        raise ConfigError("--scenario", "scenarios apply to the synthetic cohort only")
    outcomes, bias = outcome_options(args)
    if args.dataset != "synthetic" and outcomes != "none":
        raise UsageError("--outcomes", "delayed outcomes apply to the synthetic cohort only")
    opts = DemoOptions(
        dataset=args.dataset,
        data=args.data,
        records=args.records,
        seed=args.seed,
        scenario=scenario if args.dataset == "synthetic" else None,
        rate=None if args.rate <= 0 else args.rate,
        axes_interval_s=args.axes_interval,
        out_dir=args.out_dir,
        port=args.port,
        follow=args.follow,
        live=None if args.view == "auto" else args.view == "live",
        outcomes=outcomes,
        outcome_bias=bias,
    )
    return run_demo(load_config(args.config), opts)
