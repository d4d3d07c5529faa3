"""The commands of ``vfr-monitor``, in the order ``vfr-monitor --help`` lists them.

Each command is one module of this package with ``register(parser)`` (its options, added
to the parser made for it here) and ``run(args) -> int`` (its exit status); it is imported
only when chosen (:mod:`monitor.cli.subcommands`). Adding a command is a new module and one
line in :data:`COMMANDS`.
"""

from __future__ import annotations

from monitor.cli.subcommands import CommandInfo

#: name -> (module, the one line ``--help`` lists).
COMMANDS: dict[str, CommandInfo] = {
    "bench": CommandInfo(
        "monitor.cli.commands.bench", "benchmarks: fast path and baseline timed in the same run"
    ),
    "audit": CommandInfo(
        "monitor.cli.commands.audit", "all axes, tiers and EquiLense on a scored cohort file"
    ),
    "intervene": CommandInfo(
        "monitor.cli.commands.intervene", "the four-baseline intervention comparison (B1-B4)"
    ),
    "report": CommandInfo(
        "monitor.cli.commands.report", "the governance report: one self-contained HTML page"
    ),
    "run": CommandInfo(
        "monitor.cli.commands.run", "the monitor service (Kafka, or an embedded replay)"
    ),
    "view": CommandInfo(
        "monitor.cli.commands.view", "one view of a fleet's results (reads the results topic)"
    ),
    "demo": CommandInfo(
        "monitor.cli.commands.demo", "the service on a drifting scored stream, with a live view"
    ),
    "synth": CommandInfo(
        "monitor.cli.commands.synth", "write a seeded synthetic discharge cohort (unscored)"
    ),
    "produce": CommandInfo(
        "monitor.cli.commands.produce", "train XGBoost, score a synthetic stream, publish it"
    ),
}
