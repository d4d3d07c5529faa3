"""The ``vfr-monitor`` command line: a package of one module per command, each imported
only when chosen (the pattern of pip's ``commands`` package).

* :mod:`monitor.cli.entry`: the top-level parser, :func:`main` and the exit statuses;
* :mod:`monitor.cli.commands`: the table of commands (name -> module, summary) and one
  module per command, each with ``register(parser)`` and ``run(args) -> int``;
* :mod:`monitor.cli.benches`: the same for ``vfr-monitor bench WHAT``, one module per
  benchmark with ``register(parser)`` and ``measure(args)``;
* :mod:`monitor.cli.subcommands`: how a table becomes subcommands registered when chosen;
* :mod:`monitor.cli.options`: value types and the flags several commands share.

``vfr-monitor --help`` lists every command from the table without importing any of them.
Adding a command is one module and one line in ``COMMANDS``.
"""

from monitor.cli.entry import build_parser, error_line, main
from monitor.cli.options import DEFAULT_SCENARIO, SCENARIO_NAMES

__all__ = ["DEFAULT_SCENARIO", "SCENARIO_NAMES", "build_parser", "error_line", "main"]
