"""``vfr-monitor run``: the monitor service, fed by Kafka or an embedded replay of a file,
serving ``/metrics``, the API and the report until stopped (docs/service.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from monitor.cli.options import NONNEG, PORT, SIZE, service_config

if TYPE_CHECKING:  # imported where used: a command loads only what it runs
    from consumers.embedded import EmbeddedSource
    from consumers.kafka_source import KafkaSource


def register(r: argparse.ArgumentParser) -> None:
    r.add_argument("--config", default=None)
    r.add_argument("--db", default=None, help="DuckDB file (default: [service.store] db_path)")
    r.add_argument("--port", type=PORT, default=None, help="HTTP port (0: any free port)")
    r.add_argument("--input", default=None, help="embedded replay file (csv, parquet, jsonl)")
    r.add_argument(
        "--rate", type=NONNEG, default=None,
        help="embedded replay records/s (0: as fast as it goes)",
    )  # fmt: skip
    r.add_argument("--max-messages", type=SIZE, default=None)
    r.add_argument("--until-idle", type=NONNEG, default=None, help="stop after S idle seconds")
    r.add_argument("--no-scheduler", action="store_true", help="do not run the slow axes")
    r.add_argument(
        "--progress-interval", type=NONNEG, default=None, metavar="S",
        help="a progress line (messages/s, stored, dead letters, lag) every S seconds; 0: "
        "none (default: [service] progress_interval_s, 10)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    import threading

    from monitor.config import ConfigError
    from monitor.config.errors import MissingInputError
    from monitor.config.sources import embedded_config
    from monitor.service.app import MonitorService, run_until_stopped
    from monitor.service.shutdown import ShutdownGuard

    config, kafka_cfg = service_config(args)
    emb = config.embedded
    flags = {"path": args.input} if args.input else {}
    if args.rate is not None:  # 0: as fast as it goes, as for `demo` and `produce`
        flags["rate"] = args.rate
    if flags:  # validated like the file's [embedded] table (a model_copy would not be)
        emb = embedded_config({**emb.model_dump(exclude_unset=True), **flags})
    if kafka_cfg is None and emb.path is None:
        raise ConfigError("embedded.path", "no source: configure [kafka] or give --input FILE")
    if kafka_cfg is None and emb.path is not None and not emb.path.is_file():
        what = "--input" if args.input else "embedded.path"
        raise MissingInputError(what, f"no such file: {emb.path}")  # before anything starts
    fleet = kafka_cfg is not None and kafka_cfg.results_topic is not None
    service = MonitorService(
        config,
        source_name="kafka" if kafka_cfg else "embedded",
        db_path=args.db,
        http_port=args.port,
        start_scheduler=not args.no_scheduler,
        results_outbox=fleet,
    )
    stop = threading.Event()
    # SIGTERM/SIGINT: stop within [service.shutdown] grace_s, or stacks to the log and exit 70
    guard = ShutdownGuard(stop, config.service.shutdown.grace_s, on_stop=service.begin_stop)
    guard.install()
    relay = None
    source: KafkaSource | EmbeddedSource
    try:
        if fleet:
            from consumers.results_topic import ResultsPublisher, ensure_results_topic
            from monitor.service.outbox_relay import OutboxRelay

            assert kafka_cfg is not None and kafka_cfg.results_topic is not None
            ensure_results_topic(kafka_cfg, kafka_cfg.results_topic, kafka_cfg.results_partitions)
            relay = OutboxRelay(service.store, ResultsPublisher(kafka_cfg, kafka_cfg.results_topic))
            service.outbox_relay = relay
            relay.start()
        if kafka_cfg is not None:
            from consumers.kafka_source import KafkaSource
            from consumers.retention import check_topic_retention

            source = KafkaSource(kafka_cfg, service.pipeline, horizon_days=config.horizon_days)
            try:  # after the consumer's login (a wrong password is named first)
                check_topic_retention(kafka_cfg, config.horizon_days)
            except Exception:
                source.close()
                raise
            service.source_health = source.health
            service.source_reachable = source.broker_reachable
        else:
            from consumers.embedded import EmbeddedSource

            source = EmbeddedSource.from_config(emb, service.pipeline)
        service.start()
        assert service.api is not None  # made with an HTTP port
        print(f"vfr-monitor: serving /metrics and /api on {service.api.url}", flush=True)
        print(f"vfr-monitor: DuckDB file {service.store.path}", flush=True)
        progress = _progress_reporter(args, config, service)  # hook: monitor.service.progress
        try:
            n = run_until_stopped(
                service, source, stop, max_messages=args.max_messages,
                until_idle_s=args.until_idle,
            )  # fmt: skip
        finally:
            progress.stop()
        source.close()
        print(f"vfr-monitor: stopped after {n} messages: {service.tally.summary()}", flush=True)
    finally:
        service.close()  # stops the outbox relay after the last evaluations are written
        guard.uninstall()
    return 0


def _progress_reporter(args: argparse.Namespace, config: Any, service: Any) -> Any:
    """The progress line of ``run`` (``--progress-interval``, else ``[service]
    progress_interval_s``; 0: none), started."""
    from monitor.service.progress import ProgressReporter

    every = config.service.progress_interval_s
    if args.progress_interval is not None:
        every = args.progress_interval
    reporter = ProgressReporter(service.tally, service.lag, every)
    reporter.start()
    return reporter
