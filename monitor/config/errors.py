"""The project's own error types for a user's mistakes, and one translation of a pydantic
validation error into a message that names the field.

Every part of the configuration (the monitor's sections, ``[kafka]``, ``[embedded]``)
goes through :func:`config_error`, so a bad field is named the same way wherever it is:
``invalid configuration: field 'kafka.max_batch': ...``.

Why a base :class:`UserError` in the configuration package, below every package that
reports a user's mistake (the core raises builtins: it has no user): the command line
prints the message of an exception only when the project wrote it for a user (it names a
flag, a field, a file, a column or a row position, never a record's values); the message
of a builtin exception is withheld, because a DuckDB, Arrow or pandas message may quote
patient data. So a mistake the user can fix (a flag out of range, a missing input file)
must be raised as a ``UserError`` subclass, or the user sees only ``ValueError (details
withheld ...)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

#: A whole-model check names its field first: "<field>: <message>".
_FIELD_FIRST = re.compile(r"^([A-Za-z_][\w.]*): (.*)$", re.S)


class UserError(Exception):
    """A mistake of the user's (a flag, a setting, an input file) with a message written by
    the project that names what to fix and never quotes a record's values; the CLI prints
    it as it is (exit status 2)."""


class UsageError(UserError, ValueError):
    """A command-line argument or an input the user named is unusable: ``what`` is the flag
    or the input (``--rate``, ``embedded.path``, a file name), ``message`` what is wrong."""

    def __init__(self, what: str, message: str):
        self.what = what
        super().__init__(f"{what}: {message}")


class MissingInputError(UsageError, FileNotFoundError):
    """An input file the user named does not exist (also a FileNotFoundError, so callers
    that handle missing files keep doing so)."""


class ConfigError(UserError, ValueError):
    """A configuration problem, with the dotted path of the offending field."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"invalid configuration: field '{field}': {message}")


def _path(loc: tuple[Any, ...], data: Any) -> list[str]:
    """The dotted path of ``loc`` in ``data``: a list item is named by its ``name``
    (metrics, attributes) or its index; an index into a value that was not a list in the
    input (a comma-separated string) is dropped."""
    out: list[str] = []
    node = data
    for part in loc:
        if isinstance(part, int):
            if isinstance(node, list | tuple):
                item = node[part] if part < len(node) else None
                name = item.get("name", part) if isinstance(item, Mapping) else part
                out.append(str(name))
                node = item
            continue
        out.append(str(part))
        node = node.get(part) if isinstance(node, Mapping) else None
    return out


def config_error(
    exc: ValidationError,
    data: Mapping[str, Any],
    prefix: str = "",
    secret_fields: frozenset[str] = frozenset(),
    env_vars: Mapping[str, str] | None = None,
) -> ConfigError:
    """The first error of ``exc`` (validating ``data``) as a ConfigError naming its field.

    ``prefix``: the section ``data`` is (``"kafka"`` when a table is validated alone);
    ``secret_fields``: fields whose input never appears in a message; ``env_vars``: dotted
    field -> the environment variable that set it (named in the message).
    """
    err = exc.errors()[0]
    path = ([prefix] if prefix else []) + _path(tuple(err.get("loc", ())), data)
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    kind = err.get("type")
    if kind == "value_error" and (m := _FIELD_FIRST.match(msg)):
        path, msg = [*path, m.group(1)], m.group(2)
    field = ".".join(path) or "<root>"
    if kind == "literal_error" and path and path[-1] not in secret_fields:
        expected = (err.get("ctx") or {}).get("expected", "")
        msg = f"got {err.get('input')!r}; allowed values: {expected}"
    elif kind == "extra_forbidden":
        msg = "unknown field"
    elif kind == "missing":
        msg = "required"
    var = (env_vars or {}).get(field)
    if var:
        msg += f" (set by environment variable {var})"
    return ConfigError(field, msg)
