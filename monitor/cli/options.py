"""What the command line's values mean: the argparse value types, and the flags and checks
several commands share (drift scenarios, delayed outcomes, an ``--out`` file's format, the
configuration of a long-running command).

Why one module: a flag that two commands take must be spelt, checked and refused the same
way in both (``demo --outcome-bias`` and ``produce --outcome-bias``), and a command module
imports this one only, never another command's module. Nothing heavy is imported at the
top: a command's ``--help`` builds its parser from this module without pandas or pydantic.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

#: Kept in sync with monitor.data.scorer.SCENARIOS by a test (importing it here would load
#: xgboost and scipy for every command).
SCENARIO_NAMES = ("demographic_shift", "hospital_case_mix", "label_rate", "group_score_shift")
DEFAULT_SCENARIO = "group_score_shift"
#: The help of ``--scenario`` where it takes a drift scenario (``demo``, ``produce``).
SCENARIO_HELP = "drift scenario ('none' for a stationary year): " + ", ".join(SCENARIO_NAMES)


def number(
    kind: Callable[[str], float], ok: Callable[[float], bool], wanted: str
) -> Callable[[str], Any]:
    """An argparse type: ``kind`` of the text, refused unless ``ok``; argparse turns the
    refusal into a usage error (exit status 2) naming the flag, before anything runs.

    >>> SIZE("3"), NONNEG("0.5")
    (3, 0.5)
    >>> SIZE("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '0' is not a whole number >= 1
    """

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
COUNT = number(int, lambda v: v >= 0, "a whole number >= 0")
#: Sizes that must be at least one (models, windows, repeats, events).
SIZE = number(int, lambda v: v >= 1, "a whole number >= 1")
#: Rates and durations where 0 means "unpaced" or "now".
NONNEG = number(float, lambda v: math.isfinite(v) and v >= 0, "a number >= 0")
#: Durations and intervals that must be positive.
POSITIVE = number(float, lambda v: math.isfinite(v) and v > 0, "a number > 0")
#: HTTP ports (0: any free port).
PORT = number(int, lambda v: 0 <= v <= 65535, "a port number 0-65535")


def sizes(text: str) -> tuple[int, ...]:
    """A comma-separated list of sizes (``1000,10000``), each a whole number >= 1.

    >>> sizes("1000, 10000")
    (1000, 10000)
    """
    return tuple(SIZE(x.strip()) for x in text.split(","))


class OwnUsageParser(argparse.ArgumentParser):
    """A subcommand's parser that refuses an option it does not know with its own usage
    line (``usage: vfr-monitor bench axis1 ...``), instead of passing it up to the top-level
    parser, whose message would not say which options the subcommand takes."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def add_outcome_flags(p: argparse.ArgumentParser) -> None:
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


def outcome_options(args: argparse.Namespace) -> tuple[str, Any]:
    """``--outcomes`` and ``--outcome-bias`` checked before anything is trained."""
    from monitor.config.errors import UsageError
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


def write_frame(frame: Any, out: str) -> None:
    """Write .parquet, .csv or .jsonl (features dicts as JSON text in CSV), chosen by the
    name given with ``--out`` (``synth``, ``produce``)."""
    from monitor.config.errors import ConfigError

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


def service_config(args: argparse.Namespace) -> tuple[Any, Any]:
    """Log lines on, the config loaded, its Kafka settings with secrets from the environment:
    the start of every long-running command (``run``, ``view``)."""
    import logging

    from monitor.config import load_config

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = load_config(args.config)  # [kafka] validated with its environment overrides
    return config, config.kafka
