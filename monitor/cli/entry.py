"""The entry point of ``vfr-monitor``: the top-level parser, the dispatch to the chosen
command's ``run``, and what each kind of failure prints and exits with.

Why the project's error types are imported only when a command failed: ``monitor.config``
loads pydantic (about three quarters of the start-up of ``vfr-monitor --help``), and a
command that needs it imports it itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from monitor import __version__
from monitor.cli.commands import COMMANDS
from monitor.cli.subcommands import add_commands, load, register_all

#: The top-level ``--help``'s description.
DESCRIPTION = "The `vfr-monitor` command line."

#: Packages whose exception messages we write ourselves: they name fields, columns and
#: row positions, never record values.
OWN_PACKAGES = frozenset({"monitor", "consumers", "batch_axes"})


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The parser of ``vfr-monitor``. ``lazy``: each command's options are added when
    argparse reaches its name (what :func:`main` uses: only that command's module is
    imported); else every command is registered now (the whole tree, to walk or check)."""
    p = argparse.ArgumentParser(prog="vfr-monitor", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"vfr-monitor {__version__}")
    add_commands(p, COMMANDS, dest="command", required=True)
    return p if lazy else register_all(p)


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


def exit_status(exc: Exception) -> int:
    """Print what ``exc`` may say and return the exit status: 2 for a configuration or
    usage mistake (its message printed), 3 when the service cannot start, else 1 (type
    only, unless the message is the project's: :func:`error_line`)."""
    from monitor.config import ConfigError, StartupError
    from monitor.config.errors import UserError

    if isinstance(exc, ConfigError):
        print(f"vfr-monitor: {exc}", file=sys.stderr)
        return 2
    if isinstance(exc, StartupError):
        print(f"vfr-monitor: cannot start: {exc}", file=sys.stderr)
        return 3
    if isinstance(exc, UserError):  # the project's own message for a mistake the user can fix
        print(f"vfr-monitor: {exc}", file=sys.stderr)
        return 2
    print(f"vfr-monitor: error: {error_line(exc)}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser(lazy=True).parse_args(argv)
    try:
        return int(load(COMMANDS[args.command]).run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return exit_status(exc)
