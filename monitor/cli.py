"""The `vfr-monitor` command line."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from monitor import __version__
from monitor.config import ConfigError, StartupError, load_config
from monitor.config.errors import MissingInputError, UsageError, UserError

if TYPE_CHECKING:  # imported where used: a command loads only what it runs
    from consumers.embedded import EmbeddedSource
    from consumers.kafka_source import KafkaSource

#: Kept in sync with monitor.data.scorer.SCENARIOS by a test (importing it here would load
#: xgboost and scipy for every command).
SCENARIO_NAMES = ("demographic_shift", "hospital_case_mix", "label_rate", "group_score_shift")
DEFAULT_SCENARIO = "group_score_shift"


def _bench_axis1(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.axis1 import run_axis1_bench, run_axis1_sweep

    cfg = load_config(args.config)
    if args.sweep:
        return run_axis1_sweep(
            models=args.models, K=cfg.axis1.K, N=cfg.axis1.N, repeats=args.repeats,
            windows=args.windows, config=cfg,
        )  # fmt: skip
    return run_axis1_bench(
        models=args.models, window=args.window, K=cfg.axis1.K, N=cfg.axis1.N,
        repeats=args.repeats, oracle_models=args.oracle_models, config=cfg,
    )  # fmt: skip


def _bench_ingest(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.ingest import run_ingest_bench

    return run_ingest_bench(
        events=args.events, bootstrap=args.bootstrap, max_batch=args.max_batch,
        config=None if args.config is None else load_config(args.config),
        evaluations=not args.no_evaluations, two_kinds=args.two_kinds,
    )  # fmt: skip


def _bench_axes(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.axes import run_axes_bench, run_axes_store_bench

    cfg = load_config(args.config)
    if args.from_store:
        return run_axes_store_bench(
            records_per_model=args.records_per_model, models=args.models,
            repeats=min(args.repeats, 3), config=cfg,
        )  # fmt: skip
    return run_axes_bench(records=args.records, repeats=args.repeats, config=cfg)


def _bench_alerts(args: argparse.Namespace) -> dict[str, Any] | int:
    import tempfile
    from pathlib import Path

    from monitor.bench.alerts import ALERTMANAGER, RULE_FILES, run_alerts_bench

    cfg = load_config(args.config)
    try:
        with tempfile.TemporaryDirectory(prefix="vfr-bench-alerts-") as tmp:
            db = args.db or _headless_demo(cfg, args.records, tmp)
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


def _bench_outcomes(args: argparse.Namespace) -> dict[str, Any]:
    import tempfile

    from monitor.bench.outcome_lead import run_outcome_lead

    cfg = load_config(args.config)
    with tempfile.TemporaryDirectory(prefix="vfr-bench-outcomes-") as tmp:
        return run_outcome_lead(
            # the slow axes off (hourly): verdict flips do not wait for them
            lambda mode, bias, d: _headless_demo(
                cfg, args.records, d, outcomes=mode, bias=bias, axes_s=3600.0
            ),
            args.out_dir or tmp,
            args.outcome_bias,
        )


def _bench_soak(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.soak import run_soak

    return run_soak(minutes=args.minutes, rate=args.rate, bootstrap=args.bootstrap)


def _bench_page(args: argparse.Namespace) -> dict[str, Any]:
    from pathlib import Path

    from monitor.bench.page import run_page_bench, with_before

    page_cfg, payloads = _demo_payloads(load_config(args.config), args.records, args.rate)
    out = run_page_bench(page_cfg, payloads, records=args.records, rate=args.rate,
                         clients=args.clients, repeats=args.repeats)  # fmt: skip
    if args.before:
        out = with_before(out, json.loads(Path(args.before).read_text()))
    return out


def _bench_detection(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.detection import run_detection_bench

    return run_detection_bench(
        load_config(args.config), years=args.years, today_years=args.today_years,
        delay_reps=args.delay_reps, seed=args.seed,
    )  # fmt: skip


def _bench_mppd(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.bench.mppd import run_mppd_bench, run_mppd_bound_bench

    if args.bound:
        return run_mppd_bound_bench(sizes=args.sizes, repeats=args.repeats)
    return run_mppd_bench(n=args.n, n_large=args.n_large)


def _cmd_bench(args: argparse.Namespace) -> int:
    out = args.bench(args)
    if isinstance(out, int):  # a usage error the bench reported itself
        return out
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>18}: {v}")
    return 0


def _demo_payloads(cfg: Any, records: int, rate: float) -> tuple[Any, list[bytes]]:
    """The demo's config and scored stream as payloads (two models trained on the synthetic
    year), as `vfr-monitor demo` replays them."""
    import pandas as pd

    from monitor.demo import DemoOptions, build_stream, demo_config, payload_stream

    opts = DemoOptions(records=records, rate=rate, live=False)
    stream, _ = build_stream(opts)
    demo_cfg = demo_config(
        cfg, None, opts, tuple(stream.models[0].features),
        tuple(m.model_id for m in stream.models),
        oldest_event_time=pd.to_datetime(stream.frame["event_time"], utc=True).min(),
    )  # fmt: skip
    return demo_cfg, payload_stream(stream)


def _headless_demo(
    cfg: Any,
    records: int,
    out_dir: str,
    outcomes: str = "none",
    bias: str | None = None,
    axes_s: float = 6.0,
) -> str:
    """The demo year, as fast as it goes and without a view; returns its DuckDB file."""
    import io

    from monitor.data.outcomes import parse_outcome_bias
    from monitor.demo import DemoOptions, run_demo

    opts = DemoOptions(
        records=records, rate=None, out_dir=out_dir, live=False, outcomes=outcomes,
        axes_interval_s=axes_s,
        outcome_bias=None if bias is None else parse_outcome_bias(bias),
    )  # fmt: skip
    if run_demo(cfg, opts, out=io.StringIO()) != 0:
        raise RuntimeError("the demo run failed")
    return f"{out_dir}/synthetic.duckdb"


def _cmd_audit(args: argparse.Namespace) -> int:
    from monitor.audit.input_mapping import AuditInputError
    from monitor.audit.run import Progress, format_summary, run_audit, write_report

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


def _cmd_intervene(args: argparse.Namespace) -> int:
    from monitor.audit.input_mapping import AuditInputError
    from monitor.audit.intervene import format_tables, run_interventions, write_report

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


def _cmd_report(args: argparse.Namespace) -> int:
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


def _service_config(args: argparse.Namespace) -> tuple[Any, Any]:
    """Log lines on, the config loaded, its Kafka settings with secrets from the environment:
    the start of every long-running command."""
    import logging

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = load_config(args.config)  # [kafka] validated with its environment overrides
    return config, config.kafka


def _cmd_run(args: argparse.Namespace) -> int:
    import threading

    from monitor.config.sources import embedded_config
    from monitor.service.app import MonitorService, run_until_stopped
    from monitor.service.shutdown import ShutdownGuard

    config, kafka_cfg = _service_config(args)
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


def _cmd_view(args: argparse.Namespace) -> int:
    import signal

    from consumers.results_topic import read_results
    from monitor.service.fleet_view import FleetView, idle_stopper

    config, kafka_cfg = _service_config(args)
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


def _cmd_demo(args: argparse.Namespace) -> int:
    from monitor.demo import DemoOptions, run_demo

    scenario = None if args.scenario == "none" else args.scenario
    if args.dataset != "synthetic" and args.scenario not in ("none", DEFAULT_SCENARIO):
        raise ConfigError("--scenario", "scenarios apply to the synthetic cohort only")
    outcomes, bias = _outcome_options(args)
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


def _write_frame(frame: Any, out: str) -> None:
    """Write .parquet, .csv or .jsonl (features dicts as JSON text in CSV)."""
    path = out.lower()
    if path.endswith(".parquet"):
        frame.to_parquet(out, index=False)
    elif path.endswith(".csv"):
        if "features" in frame:
            import orjson

            frame = frame.assign(features=[orjson.dumps(f).decode() for f in frame["features"]])
        frame.to_csv(out, index=False)
    elif path.endswith(".jsonl"):
        import orjson

        from monitor.data.outcomes import iter_messages

        with open(out, "wb") as f:
            for rec in iter_messages(frame):
                f.write(orjson.dumps(rec, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    else:
        raise ConfigError("--out", "file name must end in .parquet, .csv or .jsonl")


def _cmd_synth(args: argparse.Namespace) -> int:
    from monitor.data.cohort import SCENARIOS, synth_cohort

    scenario = None if args.scenario == "none" else args.scenario
    if scenario is not None and scenario not in SCENARIOS:
        raise ConfigError(
            "--scenario",
            f"{scenario!r} is not a data scenario; choose from {sorted(SCENARIOS)} (model "
            "updates such as group_score_shift act on scores: see `vfr-monitor produce`)",
        )
    frame = synth_cohort(args.records, seed=args.seed, scenario=scenario)
    _write_frame(frame, args.out)
    print(f"vfr-monitor synth: {len(frame):,} discharges -> {args.out}")
    return 0


def _outcome_options(args: argparse.Namespace) -> tuple[str, Any]:
    """``--outcomes`` and ``--outcome-bias`` checked before anything is trained."""
    from monitor.data.outcomes import parse_outcome_bias

    bias = None
    if args.outcome_bias:
        if args.outcomes != "delayed":
            raise UsageError("--outcome-bias", "needs --outcomes delayed")
        try:
            bias = parse_outcome_bias(args.outcome_bias)
        except ValueError as exc:
            raise UsageError("--outcome-bias", str(exc)) from None
    return args.outcomes, bias


def _cmd_produce(args: argparse.Namespace) -> int:
    from monitor.data.outcomes import iter_messages, message_frame
    from monitor.data.scorer import SYNTH_FEATURES, synthetic_stream

    scenario = None if args.scenario == "none" else args.scenario
    if args.bootstrap is None and args.out is None:
        raise ConfigError("--out", "without --bootstrap, give --out FILE for the stream")
    mode, bias = _outcome_options(args)
    if mode == "delayed" and args.out is not None and not args.out.lower().endswith(".jsonl"):
        raise UsageError("--out", "predictions and outcomes are written as .jsonl")
    config_out = _run_config_path(args)
    try:
        stream = synthetic_stream(args.records, args.seed, scenario, mode != "none")
        messages = message_frame(stream.frame, mode, args.seed, bias)
    except ValueError as exc:
        raise ConfigError("--scenario", str(exc)) from None
    try:  # before the stream goes out: a stream without its settings stores nothing
        config_out.write_text(_run_config(stream, SYNTH_FEATURES), encoding="utf-8")
    except OSError as exc:
        raise UsageError("--config-out", f"cannot write {config_out}: {exc.strerror}") from None
    for m in stream.models:
        print(f"vfr-monitor produce: {m.model_id} held-out AUROC {m.auroc:.3f}", file=sys.stderr)
    if args.bootstrap is None:
        _write_frame(messages, args.out)
        where = f"{args.out}"
        run = f"{_self_command()} run --input {_q(args.out)} --config {_q(config_out)}"
    else:
        from consumers.kafka_tools import ensure_topic, produce_records

        _ensure_topic_or_name_broker(ensure_topic, args.bootstrap, args.topic)
        records = _paced(iter_messages(messages), args.rate)
        produce_records(args.bootstrap, args.topic, records)  # raises unless all delivered
        where = f"{args.bootstrap} topic {args.topic}"
        run = (
            f"VFR_KAFKA_BOOTSTRAP={_q(args.bootstrap)} VFR_KAFKA_TOPIC={_q(args.topic)} "
            f"{_self_command()} run --config {_q(config_out)}"
        )
    what = "scored records"
    if mode == "delayed":
        n_out = int((messages["kind"] == "outcome").sum())
        what = f"messages ({len(stream.frame):,} predictions, {n_out:,} outcomes)"
        if bias is not None:
            what += f"; {bias.describe()}"
    print(f"vfr-monitor produce: {len(messages):,} {what} -> {where}")
    print(f"vfr-monitor produce: the settings `run` needs for them -> {config_out}")
    print(f"vfr-monitor produce: consume with: {run}")
    return 0


def _ensure_topic_or_name_broker(ensure_topic: Any, bootstrap: str, topic: str) -> None:
    """``produce --bootstrap``'s topic, or a StartupError naming the address when no broker
    answers (kafka-python's bare "Unable to bootstrap" would be withheld)."""
    from consumers.broker_check import no_broker_message
    from consumers.kafka_source import _kafka

    try:
        ensure_topic(bootstrap, topic)
    except _kafka().errors.KafkaTimeoutError:
        servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
        raise StartupError(no_broker_message(servers, "in time", "--bootstrap")) from None


def _q(text: Any) -> str:
    import shlex

    return shlex.quote(str(text))


def _self_command() -> str:
    """How to run this program again, as a shell command that works where it is printed:
    ``vfr-monitor`` when that name on PATH is this program, else its full path, else
    ``python -m monitor.cli`` with this interpreter (a venv not activated, a test)."""
    import shutil
    from pathlib import Path

    me = Path(sys.argv[0])
    if me.name == "vfr-monitor" and me.exists():
        found = shutil.which("vfr-monitor")
        if found and Path(found).resolve() == me.resolve():
            return "vfr-monitor"
        return _q(me.resolve())
    return f"{_q(sys.executable)} -m monitor.cli"


#: First line of the config `produce` writes: a file without it is never overwritten.
RUN_CONFIG_HEADER = "# Written by `vfr-monitor produce`"


def _run_config_path(args: argparse.Namespace) -> Any:
    """Where ``produce`` writes the settings ``run`` needs: ``--config-out``, else the
    stream file's name with ``.toml``, else ``<topic>.toml``. Checked before the models are
    trained: a file ``produce`` did not write is not overwritten."""
    from pathlib import Path

    if args.config_out:
        path = Path(args.config_out)
    elif args.bootstrap is None:
        path = Path(args.out).with_suffix(".toml")
    else:
        path = Path(f"{args.topic}.toml")
    if path.exists() and not path.read_text(encoding="utf-8").startswith(RUN_CONFIG_HEADER):
        raise UsageError("--config-out", f"{path} exists and was not written by produce")
    return path


def _run_config(stream: Any, features: Sequence[str]) -> str:
    """The settings that make a default ``vfr-monitor run`` store the produced stream.

    Without them the run stores nothing (issue 22, finding 6): the model registry is empty
    by default, so every record is ``unknown_model``, and the stream's 2026 calendar runs
    past the wall clock, so its last weeks are ``out_of_range:event_time``. These are the
    settings the demo applies to itself (monitor.demo.demo_config).
    """
    import math

    import pandas as pd
    import tomli_w

    oldest = stream.frame["event_time"].min()
    age_days = (pd.Timestamp.now(tz="UTC") - oldest).total_seconds() / 86_400
    body = {
        "service": {
            "intake": {"event_time_bounds": "none"},
            "retention": {"discharge_days": max(400, math.ceil(age_days) + 365)},
        },
        "equilense": {"features": list(features)},
        "models": [{"id": m.model_id} for m in stream.models],
    }
    return (
        f"{RUN_CONFIG_HEADER} for the stream it produced: what `vfr-monitor run` needs to\n"
        "# store it (merge it into your own config, or pass it as it is with --config).\n"
        "# [service.intake] event_time_bounds: the event times are the synthetic 2026 calendar,\n"
        "#   not the wall clock; [service.retention] discharge_days: retention deletes by\n"
        "#   wall-clock age, so this keeps the oldest event for a year from when this file was\n"
        "#   written.\n"
        "# [[models]]: the model registry; records of other model ids are dead-lettered.\n"
        + tomli_w.dumps(body)
    )


def _paced(records: Any, rate: float | None) -> Any:
    """Yield records at ``rate`` per second (all at once when rate is None or <= 0)."""
    import time

    if rate is None or rate <= 0:
        yield from records
        return
    start = time.monotonic()
    for k, rec in enumerate(records):
        delay = start + k / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield rec


def _number(
    kind: Callable[[str], float], ok: Callable[[float], bool], wanted: str
) -> Callable[[str], Any]:
    """An argparse type: ``kind`` of the text, refused unless ``ok``; argparse turns the
    refusal into a usage error (exit status 2) naming the flag, before anything runs."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value

    parse.__name__ = wanted  # argparse names the type in some messages
    return parse


#: Counts (records, messages, seeds): whole numbers >= 0.
COUNT = _number(int, lambda v: v >= 0, "a whole number >= 0")
#: Sizes that must be at least one (models, windows, repeats, events).
SIZE = _number(int, lambda v: v >= 1, "a whole number >= 1")
#: Rates and durations where 0 means "unpaced" or "now".
NONNEG = _number(float, lambda v: math.isfinite(v) and v >= 0, "a number >= 0")
#: Durations and intervals that must be positive.
POSITIVE = _number(float, lambda v: math.isfinite(v) and v > 0, "a number > 0")
#: HTTP ports (0: any free port).
PORT = _number(int, lambda v: 0 <= v <= 65535, "a port number 0-65535")


def _sizes(text: str) -> tuple[int, ...]:
    """A comma-separated list of sizes (``1000,10000``), each a whole number >= 1."""
    return tuple(SIZE(x.strip()) for x in text.split(","))


class _OwnUsageParser(argparse.ArgumentParser):
    """A subcommand's parser that refuses an option it does not know with its own usage
    line (``usage: vfr-monitor bench axis1 ...``), instead of passing it up to the top-level
    parser, whose message would not say which options the subcommand takes."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _add_bench_parser(sub: Any) -> None:
    """`vfr-monitor bench WHAT`: one subparser per benchmark, each with only the options it
    reads, so a misplaced option (``bench axis1 --minutes 3``) is a usage error instead of
    being silently ignored."""
    b = sub.add_parser(
        "bench",
        help="benchmarks: fast path and baseline timed in the same run",
        description="Benchmarks: each times the fast path beside its baseline in the same run "
        "and prints medians and ratios (docs/scaling.md quotes them). "
        "`vfr-monitor bench WHAT --help` lists a benchmark's options.",
    )
    what = b.add_subparsers(
        dest="what", required=True, metavar="WHAT", parser_class=_OwnUsageParser
    )
    b.set_defaults(func=_cmd_bench)

    def bench(
        name: str, run: Callable[[argparse.Namespace], Any], text: str, *, config: bool = True
    ) -> argparse.ArgumentParser:
        p = what.add_parser(name, help=text, description=text)
        p.set_defaults(bench=run)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        if config:
            p.add_argument(
                "--config",
                default=None,
                help="TOML config to bench (default: the defaults of docs/method.md section 9)",
            )
        return p

    a1 = bench(
        "axis1",
        _bench_axis1,
        "Axis 1 (VFR) on synthetic windows: the fast engine "
        "against the record-level oracle and the floor, with the configured intersections",
    )
    a1.add_argument(
        "--models", type=SIZE, default=12, help="synthetic models (default %(default)s)"
    )
    a1.add_argument(
        "--window",
        type=SIZE,
        default=10_000,
        help="records per model's window (default %(default)s; not with --sweep)",
    )
    a1.add_argument(
        "--repeats",
        type=SIZE,
        default=5,
        help="timed runs, the median reported (default %(default)s)",
    )
    a1.add_argument(
        "--oracle-models",
        type=SIZE,
        default=1,
        help="models the oracle also runs on, its VFRs compared with the engine's "
        "(default %(default)s; not with --sweep)",
    )
    a1.add_argument(
        "--sweep",
        action="store_true",
        help="time the engine alone at each of --windows: the cost must not grow with the window",
    )
    a1.add_argument(
        "--windows",
        type=_sizes,
        default=(1_000, 10_000, 100_000, 1_000_000),
        metavar="N,N,...",
        help="with --sweep: window sizes (default 1000,10000,100000,1000000)",
    )

    ax = bench(
        "axes",
        _bench_axes,
        "Axis 2 (N*) and Axis 3 (hospital kappa) on a large "
        "synthetic cohort, or with --from-store as the scheduled jobs on a DuckDB file",
    )
    ax.add_argument(
        "--records",
        type=SIZE,
        default=1_000_000,
        help="cohort size (default %(default)s; not with --from-store)",
    )
    ax.add_argument(
        "--repeats",
        type=SIZE,
        default=5,
        help="timed runs, the median reported (default %(default)s; at most 3 with --from-store)",
    )
    ax.add_argument(
        "--from-store",
        action="store_true",
        help="the jobs on a real DuckDB file: re-reading the cohorts against "
        "incremental count tables",
    )
    ax.add_argument(
        "--records-per-model",
        type=SIZE,
        default=1_000_000,
        help="with --from-store: each model's cohort (default %(default)s)",
    )
    ax.add_argument(
        "--models",
        type=SIZE,
        default=4,
        help="with --from-store: models in the file (default %(default)s)",
    )

    mp = bench(
        "mppd",
        _bench_mppd,
        "EquiLense's MPPD: the fast pair matcher against the "
        "all-pairs oracle, or with --bound exact against bounded",
        config=False,
    )
    mp.add_argument(
        "--n", type=SIZE, default=20_000, help="records for fast vs oracle (default %(default)s)"
    )
    mp.add_argument(
        "--n-large",
        type=SIZE,
        default=50_000,
        help="records for the fast matcher alone (default %(default)s)",
    )
    mp.add_argument(
        "--bound",
        action="store_true",
        help="EquiLense per model, exact against bounded (stratified sample), at each of --sizes",
    )
    mp.add_argument(
        "--sizes",
        type=_sizes,
        default=(175_000, 1_800_000),
        metavar="N,N,...",
        help="with --bound: cohort sizes (default 175000,1800000)",
    )
    mp.add_argument(
        "--repeats",
        type=SIZE,
        default=5,
        help="with --bound: runs per size, the median reported (default %(default)s)",
    )

    ig = bench(
        "ingest",
        _bench_ingest,
        "the whole ingest pipeline against raw kafka-python "
        "consumption of the same events, through a real broker",
    )
    ig.add_argument(
        "--events", type=SIZE, default=1_000_000, help="events produced (default %(default)s)"
    )
    ig.add_argument(
        "--max-batch",
        type=SIZE,
        default=5_000,
        help="records per poll, for the raw consumer and the pipeline alike (default %(default)s)",
    )
    ig.add_argument(
        "--bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="a running broker (default: start one with deploy/kafka/kafka.sh)",
    )
    ig.add_argument(
        "--no-evaluations",
        action="store_true",
        help="hop evaluations off, to time the ingest path alone",
    )
    ig.add_argument(
        "--two-kinds",
        action="store_true",
        help="predictions and their outcomes as separate messages, interleaved",
    )

    al = bench(
        "alerts",
        _bench_alerts,
        "a demo year's DuckDB file replayed through the "
        "exporter, the shipped alert rules (promtool) and Alertmanager routing (amtool)",
    )
    al.add_argument(
        "--db", default=None, help="a demo DuckDB file (default: run the demo headless first)"
    )
    al.add_argument(
        "--records",
        type=SIZE,
        default=100_000,
        help="demo discharges, when no --db (default %(default)s)",
    )
    al.add_argument(
        "--interval",
        type=int,
        default=900,
        help="seconds between samples and rule runs, 15-3600 (default %(default)s)",
    )
    al.add_argument(
        "--gap",
        type=int,
        default=None,
        help="seconds of replay per evaluation (default: its event-time gap, cut "
        "to the rules' memory)",
    )
    al.add_argument(
        "--rules",
        nargs="+",
        default=None,
        metavar="FILE",
        help="alert rule files (default: the shipped deploy/prometheus rules)",
    )
    al.add_argument(
        "--alertmanager",
        default=None,
        metavar="FILE",
        help="Alertmanager config (default: the shipped one)",
    )

    so = bench(
        "soak",
        _bench_soak,
        "steady load through a real broker with the scheduler "
        "running: memory growth, lost and duplicated records, drain time",
        config=False,
    )
    so.add_argument(
        "--minutes",
        type=POSITIVE,
        default=10.0,
        help="how long the producer runs (default %(default)s)",
    )
    so.add_argument(
        "--rate",
        type=POSITIVE,
        default=5_000.0,
        help="events per second produced (default %(default)s)",
    )
    so.add_argument(
        "--bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="a running broker (default: start one with deploy/kafka/kafka.sh)",
    )

    pg = bench(
        "page",
        _bench_page,
        "the status page's first byte under parallel readers while "
        "the demo stream runs, then the file's report timed cold and cached",
    )
    pg.add_argument(
        "--records", type=SIZE, default=100_000, help="demo discharges (default %(default)s)"
    )
    pg.add_argument(
        "--rate",
        type=POSITIVE,
        default=3_000.0,
        help="messages per second replayed (default %(default)s, the demo's)",
    )
    pg.add_argument(
        "--clients", type=SIZE, default=4, help="parallel HTTP clients (default %(default)s)"
    )
    pg.add_argument(
        "--repeats",
        type=SIZE,
        default=5,
        help="report renders timed, the median reported (default %(default)s)",
    )
    pg.add_argument(
        "--before",
        default=None,
        metavar="FILE",
        help="JSON output of a before run: adds before / after ratios",
    )

    oc = bench(
        "outcomes",
        _bench_outcomes,
        "the demo year with outcomes joined against "
        "outcomes delayed: how much earlier the planted flip is confirmed",
    )
    oc.add_argument(
        "--records",
        type=SIZE,
        default=100_000,
        help="demo discharges per run (default %(default)s)",
    )
    oc.add_argument(
        "--outcome-bias",
        default=None,
        metavar="ATTR=GROUP:SHARE",
        help="also run delayed outcomes with this bias (e.g. race=2:0.3)",
    )
    oc.add_argument(
        "--out-dir",
        default=None,
        help="keep each run's DuckDB file and report here (default: temporary)",
    )

    dt = bench(
        "detection",
        _bench_detection,
        "pages in stationary years and delay on planted threshold "
        "crossings: certified verdicts against today's rule and oracle CUSUMs",
    )
    dt.add_argument(
        "--years", type=SIZE, default=200,
        help="stationary years simulated for the certified layer (default %(default)s)",
    )  # fmt: skip
    dt.add_argument(
        "--today-years", type=COUNT, default=20,
        help="stationary years simulated for today's rule (default %(default)s)",
    )  # fmt: skip
    dt.add_argument(
        "--delay-reps", type=SIZE, default=200,
        help="runs per planted crossing for the delays (default %(default)s)",
    )  # fmt: skip
    dt.add_argument(
        "--seed", type=COUNT, default=1,
        help="seed of the populations and streams (default %(default)s)",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vfr-monitor", description=__doc__)
    p.add_argument("--version", action="version", version=f"vfr-monitor {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    _add_bench_parser(sub)

    a = sub.add_parser("audit", help="all axes, tiers and EquiLense on a scored cohort file")
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
    a.set_defaults(func=_cmd_audit)

    iv = sub.add_parser("intervene", help="the four-baseline intervention comparison (B1-B4)")
    iv.add_argument("--input", required=True, help="cohort with features (.csv/.parquet) or "
                    "'diabetes130'")  # fmt: skip
    iv.add_argument("--out", required=True, help="output directory")
    iv.add_argument("--config", default=None, help="TOML config ([input], [interventions])")
    iv.add_argument("--model", choices=["xgb", "logreg"], default="xgb")
    iv.add_argument("--seed", type=COUNT, default=0, help="split and model seed")
    iv.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    iv.set_defaults(func=_cmd_intervene)

    rp = sub.add_parser("report", help="the governance report: one self-contained HTML page")
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
    rp.set_defaults(func=_cmd_report)

    r = sub.add_parser("run", help="the monitor service (Kafka, or an embedded replay)")
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
    r.set_defaults(func=_cmd_run)

    v = sub.add_parser("view", help="one view of a fleet's results (reads the results topic)")
    v.add_argument("--config", default=None, help="TOML with [kafka] and results_topic")
    v.add_argument("--db", required=True, help="the view's own DuckDB file")
    v.add_argument("--port", type=PORT, default=None, help="HTTP port (0: any free port)")
    v.add_argument("--until-idle", type=NONNEG, default=None,
                   help="stop S seconds after catching up with nothing new")  # fmt: skip
    v.set_defaults(func=_cmd_view)

    scen_help = "drift scenario ('none' for a stationary year): " + ", ".join(SCENARIO_NAMES)
    d = sub.add_parser("demo", help="the service on a drifting scored stream, with a live view")
    d.add_argument("--config", default=None, help="TOML config (the demo shortens the cadence)")
    d.add_argument(
        "--dataset", choices=["synthetic", "diabetes130", "texas100x"], default="synthetic"
    )
    d.add_argument("--data", default=None, help="texas100x: path of your Texas-100X file")
    d.add_argument("--records", type=SIZE, default=100_000, help="synthetic: discharges drawn")
    d.add_argument("--seed", type=COUNT, default=0)
    d.add_argument(
        "--scenario", default=DEFAULT_SCENARIO, choices=[*SCENARIO_NAMES, "none"], help=scen_help
    )
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
    _outcome_flags(d)
    d.set_defaults(func=_cmd_demo)

    s = sub.add_parser("synth", help="write a seeded synthetic discharge cohort (unscored)")
    s.add_argument("--records", type=COUNT, required=True)
    s.add_argument("--seed", type=COUNT, default=0)
    s.add_argument("--out", required=True, help=".parquet, .csv or .jsonl")
    s.add_argument("--scenario", default="none", help="data scenario or 'none'")
    s.set_defaults(func=_cmd_synth)

    pr = sub.add_parser("produce", help="train XGBoost, score a synthetic stream, publish it")
    pr.add_argument("--scenario", default="none", help=scen_help)
    pr.add_argument("--rate", type=NONNEG, default=0.0, help="records/s (0: as fast as it goes)")
    pr.add_argument("--records", type=SIZE, default=100_000, help="discharges drawn")
    pr.add_argument("--seed", type=COUNT, default=0)
    pr.add_argument("--bootstrap", default=None, help="Kafka HOST:PORT (else --out FILE)")
    pr.add_argument("--topic", default="scored-discharges")
    pr.add_argument("--out", default=None, help="without Kafka: .jsonl, .parquet or .csv")
    pr.add_argument(
        "--config-out", default=None,
        help="where the settings `run` needs go (default: the --out name with .toml, or "
        "<topic>.toml)",
    )  # fmt: skip
    _outcome_flags(pr)
    pr.set_defaults(func=_cmd_produce)
    return p


def _outcome_flags(p: argparse.ArgumentParser) -> None:
    """``--outcomes`` and ``--outcome-bias`` of ``produce`` and ``demo`` (synthetic cohort)."""
    p.add_argument(
        "--outcomes", choices=["none", "joined", "delayed"], default="none",
        help="none: scored discharges as before; joined: scored at admission, sent with the "
        "outcome at discharge; delayed: a prediction at admission, its outcome at discharge",
    )  # fmt: skip
    p.add_argument(
        "--outcome-bias", default=None, metavar="ATTR=GROUP:SHARE[:missing|:delayed:DAYS]",
        help="with --outcomes delayed: a share of one group's outcomes missing or late, "
        "e.g. race=2:0.3",
    )  # fmt: skip


#: Packages whose exception messages we write ourselves: they name fields, columns and
#: row positions, never record values.
OWN_PACKAGES = frozenset({"monitor", "consumers", "batch_axes"})


def error_line(exc: BaseException) -> str:
    """What the CLI prints for an error: its type, and its message only when the message
    is ours. Never the chained cause: a DuckDB, Arrow or pandas message may quote the
    values of a record (patient data), and a traceback would print it too.

    "Ours" is judged by the exception's type, so a builtin exception is withheld even when
    the project raised it: a user's mistake must be raised as a
    :class:`~monitor.config.errors.UserError` (which :func:`main` prints before this runs).

    >>> error_line(ValueError("bad value 'MRN 123'"))
    'ValueError (details withheld: they may quote record values)'
    """
    name = type(exc).__name__
    if type(exc).__module__.split(".")[0] in OWN_PACKAGES:
        return f"{name}: {exc}"
    return f"{name} (details withheld: they may quote record values)"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"vfr-monitor: {exc}", file=sys.stderr)
        return 2
    except StartupError as exc:
        print(f"vfr-monitor: cannot start: {exc}", file=sys.stderr)
        return 3
    except UserError as exc:  # the project's own message for a mistake the user can fix
        print(f"vfr-monitor: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        print(f"vfr-monitor: error: {error_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
