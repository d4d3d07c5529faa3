"""The `vfr-monitor` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from monitor import __version__
from monitor.config import ConfigError, load_config


def _cmd_bench(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    if args.what == "axis1":
        from monitor.bench_axis1 import run_axis1_bench, run_axis1_sweep

        if args.sweep:
            out = run_axis1_sweep(models=args.models, K=cfg.axis1.K, N=cfg.axis1.N, config=cfg)
        else:
            out = run_axis1_bench(
                models=args.models,
                window=args.window,
                K=cfg.axis1.K,
                N=cfg.axis1.N,
                repeats=args.repeats,
                oracle_models=args.oracle_models,
                config=cfg,
            )
    else:  # pragma: no cover - argparse restricts choices
        raise SystemExit(f"unknown benchmark {args.what!r}")
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>18}: {v}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from monitor.demo import run_demo

    return run_demo(load_config(args.config), records=args.records, models=args.models)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vfr-monitor", description=__doc__)
    p.add_argument("--version", action="version", version=f"vfr-monitor {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="benchmarks: fast path and baseline timed in the same run")
    b.add_argument("what", choices=["axis1"])
    b.add_argument("--config", default=None, help="TOML config (defaults: SPEC section 9)")
    b.add_argument("--models", type=int, default=12)
    b.add_argument("--window", type=int, default=10_000)
    b.add_argument("--repeats", type=int, default=7)
    b.add_argument("--oracle-models", type=int, default=1, help="models the oracle runs on")
    b.add_argument("--sweep", action="store_true", help="fast_s for windows 1e3..1e6")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=_cmd_bench)

    d = sub.add_parser("demo", help="audit a synthetic window and print the grid")
    d.add_argument("--config", default=None)
    d.add_argument("--records", type=int, default=20_000)
    d.add_argument("--models", type=int, default=2)
    d.set_defaults(func=_cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"vfr-monitor: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
