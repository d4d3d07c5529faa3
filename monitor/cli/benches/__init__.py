"""The benchmarks of ``vfr-monitor bench``, in the order ``vfr-monitor bench --help`` lists
them, and the options they share.

Each is one module with ``register(parser)`` (its own options) and ``measure(args)`` (its
figures as a dict, or an exit status when it refused its input itself), imported only when
chosen (:mod:`monitor.cli.subcommands`). Adding a benchmark is a new module and one line in
:data:`BENCHES`. The summary is also the benchmark's description.
"""

from __future__ import annotations

import argparse

from monitor.cli.subcommands import CommandInfo

#: name -> (module, the line ``bench --help`` lists and ``bench NAME --help`` opens with).
BENCHES: dict[str, CommandInfo] = {
    "axis1": CommandInfo(
        "monitor.cli.benches.axis1",
        "Axis 1 (VFR) on synthetic windows: the fast engine "
        "against the record-level oracle and the floor, with the configured intersections",
    ),
    "axes": CommandInfo(
        "monitor.cli.benches.axes",
        "Axis 2 (N*) and Axis 3 (hospital kappa) on a large "
        "synthetic cohort, or with --from-store as the scheduled jobs on a DuckDB file",
    ),
    "mppd": CommandInfo(
        "monitor.cli.benches.mppd",
        "EquiLense's MPPD: the fast pair matcher against the "
        "all-pairs oracle, or with --bound exact against bounded",
    ),
    "ingest": CommandInfo(
        "monitor.cli.benches.ingest",
        "the whole ingest pipeline against raw kafka-python "
        "consumption of the same events, through a real broker",
    ),
    "alerts": CommandInfo(
        "monitor.cli.benches.alerts",
        "a demo year's DuckDB file replayed through the "
        "exporter, the shipped alert rules (promtool) and Alertmanager routing (amtool)",
    ),
    "soak": CommandInfo(
        "monitor.cli.benches.soak",
        "steady load through a real broker with the scheduler "
        "running: memory growth, lost and duplicated records, drain time",
    ),
    "page": CommandInfo(
        "monitor.cli.benches.page",
        "the status page's first byte under parallel readers while "
        "the demo stream runs, then the file's report timed cold and cached",
    ),
    "outcomes": CommandInfo(
        "monitor.cli.benches.outcomes",
        "the demo year with outcomes joined against "
        "outcomes delayed: how much earlier the planted flip is confirmed",
    ),
    "detection": CommandInfo(
        "monitor.cli.benches.detection",
        "pages in stationary years and delay on planted threshold "
        "crossings: certified verdicts against today's rule and oracle CUSUMs",
    ),
}


def bench_options(p: argparse.ArgumentParser, *, config: bool = True) -> None:
    """``--json``, and ``--config`` where the benchmark reads a configuration: the first
    options of every benchmark."""
    p.add_argument("--json", action="store_true", help="print one JSON object")
    if config:
        p.add_argument(
            "--config",
            default=None,
            help="TOML config to bench (default: the defaults of docs/method.md section 9)",
        )
