"""MkDocs hook: the configuration reference, generated from the configuration model.

A page that holds the marker ``<!-- config-reference -->`` gets, in its place, one table
per TOML section of ``monitor.config.MonitorConfig`` (and per section of a section, such as
``[service.http]``): every field with its type and limits, its default and the ``#:``
comment written above it in the code. Why generated: the model is the one place the
fields, defaults and limits are defined, and a table copied from it would drift as fields
are added (a hand-kept table of defaults is checked by ``tests/test_method_doc.py`` for
the same reason). The marker
``<!-- service-moved-keys -->`` gets the table of ``[service]``'s old flat keys and their
new spelling, from the same map the configuration reads them with.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

MARKER = "<!-- config-reference -->"
#: where the table of ``[service]``'s old flat keys goes (they still load, with a message)
MOVED_MARKER = "<!-- service-moved-keys -->"

#: sections written as arrays of tables (``[[name]]``): their entry model is documented
ARRAYS = ("attributes", "metrics", "models", "intersections")


def field_comments(cls: type) -> dict[str, str]:
    """``#:`` comment lines right above each field assignment in ``cls``'s body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:  # type: ignore[attr-defined]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            comment: list[str] = []
            i = node.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#:"):
                comment.insert(0, lines[i].strip()[2:].strip())
                i -= 1
            if comment:
                found[node.target.id] = " ".join(comment)
    return found


def type_name(annotation: Any) -> str:
    """A short, readable type: ``int``, ``"count" | "time"``, ``list of str``, ``path``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [type_name(a) for a in args if a is not type(None)]
        return " \\| ".join(parts) + (" (optional)" if type(None) in args else "")
    if origin in (list, tuple):
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return "table"
    if isinstance(annotation, type):
        if issubclass(annotation, Path):
            return "path"
        if annotation.__name__ == "SecretStr":
            return "secret"
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def limits(field: Any) -> str:
    """The numeric and length bounds pydantic enforces, as ``>= 1, <= 64``."""
    words = []
    for m in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(m, attr, None)
            if value is not None:
                words.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value}")
        if getattr(m, "min_length", None):
            words.append(f"at least {m.min_length}")
        if getattr(m, "pattern", None):
            words.append("a size such as `64MB`" if "KB|MB" in m.pattern else "")
    return ", ".join(w for w in words if w)


def default_text(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, BaseModel):
        return "(table)"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple):
        value = list(value)
    try:
        text = json.dumps(value)
    except TypeError:
        text = str(value)
    return f"`{text}`"


def section_table(model: type[BaseModel], env: dict[str, str] | None = None) -> str:
    """One Markdown table: field, type and limits, default, what it is."""
    comments = field_comments(model)
    env_of = {field: var for var, field in (env or {}).items()}
    rows = ["| field | type | default | what |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        kind = type_name(field.annotation)
        bound = limits(field)
        if bound:
            kind += f"; {bound}"
        default = (
            "required"
            if field.is_required()
            else default_text(field.get_default(call_default_factory=True))
        )
        what = comments.get(name, "")
        if name in env_of:
            what = (what + " " if what else "") + f"Environment: `{env_of[name]}`."
        what = re.sub(r"\s+", " ", what).replace("|", "\\|")
        rows.append(f"| `{name}` | {kind} | {default} | {what} |")
    return "\n".join(rows)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
        for inner in typing.get_args(candidate):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


def _doc(model: type[BaseModel]) -> str:
    """The first paragraph of a model's docstring, on one line."""
    return inspect.cleandoc(model.__doc__ or "").split("\n\n")[0].replace("\n", " ")


def moved_keys() -> str:
    """The old flat keys of ``[service]`` and how each is written now (they still load)."""
    from monitor.config.service import MOVED_KEYS, new_spelling

    rows = ["| old key in `[service]` | write instead |", "|---|---|"]
    rows += [f"| `{old}` | `{new_spelling(old)}` |" for old in MOVED_KEYS]
    return "\n".join(rows)


def reference() -> str:
    """Every section of MonitorConfig, in the model's order."""
    from monitor.config import MonitorConfig
    from monitor.config.sources import KAFKA_ENV_VARS

    out = []
    scalars = []
    for name, field in MonitorConfig.model_fields.items():
        model = _model_of(field.annotation)
        if model is None:
            scalars.append(name)
            continue
        heading = f"[[{name}]]" if name in ARRAYS else f"[{name}]"
        env = KAFKA_ENV_VARS if name == "kafka" else None
        out.append(f"### `{heading}`\n\n{_doc(model)}\n\n{section_table(model, env)}\n")
        # a section's own sections ([service.http] ...), each a table of its own
        for sub, subfield in model.model_fields.items():
            inner = _model_of(subfield.annotation)
            if inner is not None and name not in ARRAYS:
                out.append(
                    f"### `[{name}.{sub}]`\n\n{_doc(inner)}\n\n{section_table(inner)}\n"
                )
    if scalars:
        comments = field_comments(MonitorConfig)
        rows = ["| field | type | default | what |", "|---|---|---|---|"]
        for name in scalars:
            field = MonitorConfig.model_fields[name]
            kind = type_name(field.annotation)
            bound = limits(field)
            default = default_text(field.get_default(call_default_factory=True))
            rows.append(
                f"| `{name}` | {kind}{'; ' + bound if bound else ''} | {default} | "
                f"{comments.get(name, '')} |"
            )
        out.insert(0, "### Top level\n\n" + "\n".join(rows) + "\n")
    return "\n".join(out)


def on_page_markdown(markdown: str, **_: object) -> str:
    if MOVED_MARKER in markdown:
        markdown = markdown.replace(MOVED_MARKER, moved_keys())
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())
