"""``vfr-monitor produce``: the demo's two models trained and scoring a synthetic stream,
published to Kafka or written to a file, with the settings ``run`` needs to store it
(docs/service.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from monitor.cli.options import (
    COUNT,
    NONNEG,
    SCENARIO_HELP,
    SIZE,
    add_outcome_flags,
    outcome_options,
    write_frame,
)

#: First line of the config `produce` writes: a file without it is never overwritten.
RUN_CONFIG_HEADER = "# Written by `vfr-monitor produce`"


def register(pr: argparse.ArgumentParser) -> None:
    pr.add_argument("--scenario", default="none", help=SCENARIO_HELP)
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
    add_outcome_flags(pr)


def run(args: argparse.Namespace) -> int:
    from monitor.config import ConfigError
    from monitor.config.errors import UsageError
    from monitor.data.outcomes import iter_messages, message_frame
    from monitor.data.scorer import SYNTH_FEATURES, synthetic_stream

    scenario = None if args.scenario == "none" else args.scenario
    if args.bootstrap is None and args.out is None:
        raise ConfigError("--out", "without --bootstrap, give --out FILE for the stream")
    mode, bias = outcome_options(args)
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
        write_frame(messages, args.out)
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
    from monitor.config import StartupError

    try:
        ensure_topic(bootstrap, topic)
    except _kafka().errors.KafkaTimeoutError:
        servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
        raise StartupError(no_broker_message(servers, "in time", "--bootstrap")) from None


def _q(text: Any) -> str:
    """``text`` quoted for the shell command line printed to the user.

    >>> _q("my stream.jsonl")
    "'my stream.jsonl'"
    """
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


def _run_config_path(args: argparse.Namespace) -> Any:
    """Where ``produce`` writes the settings ``run`` needs: ``--config-out``, else the
    stream file's name with ``.toml``, else ``<topic>.toml``. Checked before the models are
    trained: a file ``produce`` did not write is not overwritten."""
    from pathlib import Path

    from monitor.config.errors import UsageError

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

    Without them the run stores nothing (docs/decisions.md, "A user's mistakes and silent dead
    letters"): the model registry is empty by default, so every record is ``unknown_model``, and the
    stream's 2026 calendar runs past the wall clock, so its last weeks are
    ``out_of_range:event_time``. These are the settings the demo applies to itself
    (monitor.demo.demo_config).
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
