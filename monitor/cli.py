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
    elif args.what == "ingest":
        from monitor.bench_ingest import run_ingest_bench

        out = run_ingest_bench(
            events=args.events, bootstrap=args.bootstrap, max_batch=args.max_batch
        )
    elif args.what == "axes":
        from monitor.bench_axes import run_axes_bench

        out = run_axes_bench(records=args.records, repeats=args.repeats, config=cfg)
    else:
        from batch_axes.mppd import run_mppd_bench

        out = run_mppd_bench(n=args.n, n_large=args.n_large)
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>18}: {v}")
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from monitor.audit import Progress, format_summary, run_audit, write_report
    from monitor.audit_input import AuditInputError

    config = load_config(args.config)
    try:
        report = run_audit(args.input, config, Progress(enabled=not args.quiet))
    except AuditInputError as exc:
        print(f"vfr-monitor audit: {exc}", file=sys.stderr)
        return 2
    paths = write_report(report, args.out)
    print(format_summary(report))
    print("\nwritten: " + ", ".join(str(p) for p in paths.values()))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from consumers.config import embedded_config, kafka_config_with_env
    from monitor.service import MonitorService, run_until_stopped

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = load_config(args.config)
    kafka_cfg = kafka_config_with_env(config.kafka)
    emb = embedded_config({**config.embedded, **({"path": args.input} if args.input else {})})
    if args.rate is not None:
        emb = emb.model_copy(update={"rate": args.rate})
    if kafka_cfg is None and emb.path is None:
        raise ConfigError("embedded.path", "no source: configure [kafka] or give --input FILE")
    service = MonitorService(
        config,
        source_name="kafka" if kafka_cfg else "embedded",
        db_path=args.db,
        http_port=args.port,
        start_scheduler=not args.no_scheduler,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if kafka_cfg is not None:
            from consumers.kafka_source import KafkaSource

            source = KafkaSource(kafka_cfg, service.pipeline)
        else:
            from consumers.embedded import EmbeddedSource

            source = EmbeddedSource.from_config(emb, service.pipeline)
        service.start()
        print(f"vfr-monitor: serving /metrics and /api on {service.api.url}", flush=True)
        print(f"vfr-monitor: DuckDB file {service.store.path}", flush=True)
        n = run_until_stopped(
            service, source, stop, max_messages=args.max_messages, until_idle_s=args.until_idle
        )
        source.close()
        print(f"vfr-monitor: stopped after {n} messages", flush=True)
    finally:
        service.close()
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from monitor.demo import run_demo

    return run_demo(load_config(args.config), records=args.records, models=args.models)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vfr-monitor", description=__doc__)
    p.add_argument("--version", action="version", version=f"vfr-monitor {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="benchmarks: fast path and baseline timed in the same run")
    b.add_argument("what", choices=["axis1", "axes", "mppd", "ingest"])
    b.add_argument("--config", default=None, help="TOML config (defaults: SPEC section 9)")
    b.add_argument("--models", type=int, default=12)
    b.add_argument("--window", type=int, default=10_000)
    b.add_argument("--repeats", type=int, default=5)
    b.add_argument("--oracle-models", type=int, default=1, help="models the oracle runs on")
    b.add_argument("--sweep", action="store_true", help="fast_s for windows 1e3..1e6")
    b.add_argument("--records", type=int, default=1_000_000, help="axes: cohort size")
    b.add_argument("--n", type=int, default=20_000, help="mppd: records for fast vs oracle")
    b.add_argument("--n-large", type=int, default=50_000, help="mppd: records, fast only")
    b.add_argument("--events", type=int, default=1_000_000, help="ingest: events")
    b.add_argument(
        "--max-batch", type=int, default=5_000,
        help="ingest: records per poll, for the raw consumer and the pipeline alike",
    )  # fmt: skip
    b.add_argument("--bootstrap", default=None, help="ingest: broker (default: start one)")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=_cmd_bench)

    a = sub.add_parser("audit", help="all axes, tiers and EquiLense on a scored cohort file")
    a.add_argument("--input", required=True, help="scored cohort, .csv or .parquet")
    a.add_argument("--config", default=None, help="TOML config (column/code mapping in [input])")
    a.add_argument("--out", required=True, help="output directory")
    a.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    a.set_defaults(func=_cmd_audit)

    r = sub.add_parser("run", help="the monitor service (Kafka, or an embedded replay)")
    r.add_argument("--config", default=None)
    r.add_argument("--db", default=None, help="DuckDB file (default: [service] db_path)")
    r.add_argument("--port", type=int, default=None, help="HTTP port (0: any free port)")
    r.add_argument("--input", default=None, help="embedded replay file (csv, parquet, jsonl)")
    r.add_argument("--rate", type=float, default=None, help="embedded replay records/s")
    r.add_argument("--max-messages", type=int, default=None)
    r.add_argument("--until-idle", type=float, default=None, help="stop after S idle seconds")
    r.add_argument("--no-scheduler", action="store_true", help="do not run the slow axes")
    r.set_defaults(func=_cmd_run)

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
