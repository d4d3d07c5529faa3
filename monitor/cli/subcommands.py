"""Subcommands whose modules are imported only when chosen (the pattern of pip's
``commands`` package).

A table maps each name to its module and its one-line summary. The parser lists every name
with its summary (``vfr-monitor --help``) from the table alone; a subcommand's own parser is
an empty one until argparse reaches its name, and only then is its module imported and its
``register(parser)`` called, before the rest of the command line is parsed. So
``vfr-monitor --help`` imports no command module, and ``vfr-monitor audit ...`` imports the
audit command's module only (which imports what it runs inside ``run``).

Why at argparse's dispatch (``_SubParsersAction.__call__``) rather than by reading the
command's name out of ``sys.argv`` first: argparse decides what the name is (after options,
``--``, an invalid choice refused with the list of names), so the parser answers exactly as
one built whole would; :func:`register_all` builds it whole (tests and documentation walk
it).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = argparse._SubParsersAction


class CommandInfo(NamedTuple):
    """One line of a command table: where the command lives and what ``--help`` says of it.

    The module has ``register(parser)``, which adds the command's options to its own
    (already made) parser, and the function that runs it (``run(args) -> int`` for a
    command, ``measure(args)`` for a benchmark).
    """

    module: str
    summary: str


def load(info: CommandInfo) -> ModuleType:
    """The command's module (imported on first use; Python keeps it afterwards)."""
    return importlib.import_module(info.module)


class LazySubcommands(_SubParsers):
    """argparse's subparsers action, with each subparser filled in from its module when
    argparse dispatches to it (or when :meth:`register` is called)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.table: dict[str, CommandInfo] = {}
        self._registered: set[str] = set()

    def add_commands(
        self, table: Mapping[str, CommandInfo], *, summary_as_description: bool = False
    ) -> None:
        """One empty parser per name of ``table``, in its order, helped by its summary
        (also its description when ``summary_as_description``)."""
        for name, info in table.items():
            description = info.summary if summary_as_description else None
            self.add_parser(name, help=info.summary, description=description)
            self.table[name] = info

    def register(self, name: str) -> argparse.ArgumentParser:
        """``name``'s parser with its options, its module imported on the first call."""
        parser = self.choices[name]
        if name not in self._registered:
            load(self.table[name]).register(parser)
            self._registered.add(name)
        return parser

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        assert isinstance(values, list) and values  # argparse passes [name, *rest]
        if values[0] in self.table:  # an unknown name was refused before this is called
            self.register(values[0])
        super().__call__(parser, namespace, values, option_string)


def add_commands(
    parser: argparse.ArgumentParser,
    table: Mapping[str, CommandInfo],
    *,
    summary_as_description: bool = False,
    **kwargs: Any,
) -> LazySubcommands:
    """``parser``'s subcommands from ``table``, registered when chosen; ``kwargs`` as for
    ``add_subparsers`` (``dest``, ``required``, ``metavar``, ``parser_class``)."""
    action = parser.add_subparsers(action=LazySubcommands, **kwargs)
    assert isinstance(action, LazySubcommands)
    action.add_commands(table, summary_as_description=summary_as_description)
    return action


def register_all(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with every subcommand registered, at every depth (the whole tree, as the
    tests and the documentation checks walk it); returns ``parser``."""
    for action in parser._actions:
        if isinstance(action, LazySubcommands):
            for name in action.table:
                register_all(action.register(name))
    return parser
