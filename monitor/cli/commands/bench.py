"""``vfr-monitor bench WHAT``: one subcommand per benchmark, each printing its figures.

Each benchmark is a module of :mod:`monitor.cli.benches` holding its own parser (only the
options it reads, so a misplaced option such as ``bench axis1 --minutes 3`` is a usage
error rather than silently ignored) next to the code that runs it; this module lists them
and prints what the chosen one measured.
"""

from __future__ import annotations

import argparse
import json

from monitor.cli.benches import BENCHES
from monitor.cli.options import OwnUsageParser
from monitor.cli.subcommands import add_commands, load

DESCRIPTION = (
    "Benchmarks: each times the fast path beside its baseline in the same run "
    "and prints medians and ratios (docs/scaling.md quotes them). "
    "`vfr-monitor bench WHAT --help` lists a benchmark's options."
)


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    add_commands(
        parser, BENCHES, summary_as_description=True,
        dest="what", required=True, metavar="WHAT", parser_class=OwnUsageParser,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """The chosen benchmark's figures, one ``key: value`` a line (``--json``: one object)."""
    out = load(BENCHES[args.what]).measure(args)
    if isinstance(out, int):  # a usage error the bench reported itself
        return out
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>18}: {v}")
    return 0
