"""``vfr-monitor view``: one API, status page and report for a fleet of instances, fed by
the results topic they publish to (docs/scaling.md)."""

from __future__ import annotations

import argparse

from monitor.cli.options import NONNEG, PORT, service_config


def register(v: argparse.ArgumentParser) -> None:
    v.add_argument("--config", default=None, help="TOML with [kafka] and results_topic")
    v.add_argument("--db", required=True, help="the view's own DuckDB file")
    v.add_argument("--port", type=PORT, default=None, help="HTTP port (0: any free port)")
    v.add_argument("--until-idle", type=NONNEG, default=None,
                   help="stop S seconds after catching up with nothing new")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    import signal

    from consumers.results_topic import read_results
    from monitor.config import ConfigError
    from monitor.service.fleet_view import FleetView, idle_stopper

    config, kafka_cfg = service_config(args)
    if kafka_cfg is None:
        raise ConfigError("kafka.bootstrap_servers", "the view reads the fleet's results topic")
    if kafka_cfg.results_topic is None:
        raise ConfigError("kafka.results_topic", "name the topic the instances publish to")
    view = FleetView(config, args.db)
    stop, on_idle = idle_stopper(view, args.until_idle)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        view.start(config.service.http.port if args.port is None else args.port)
        assert view.api is not None
        print(f"vfr-monitor view: serving /api and the report on {view.api.url}", flush=True)
        print(f"vfr-monitor view: DuckDB file {view.store.path}", flush=True)
        read_results(kafka_cfg, kafka_cfg.results_topic, view.apply, stop=stop.is_set,
                     on_idle=on_idle)  # fmt: skip
        print(f"vfr-monitor view: stopped after {view.applied} results "
              f"({view.skipped} other messages skipped)", flush=True)  # fmt: skip
    finally:
        view.close()
    return 0
