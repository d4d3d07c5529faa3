"""Writing rows: batched inserts and small keyed updates, the writer's and the fleet
view's, as functions of the one read-write connection."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa


def insert_frame(
    c: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    json_columns: AbstractSet[str] = frozenset(),
    replace: bool = False,
) -> None:
    """Insert ``rows`` (tuples in ``columns`` order) with one statement; ``json_columns``
    hold JSON text; ``replace``: INSERT OR REPLACE (a keyed table)."""
    if not rows:
        return
    try:
        # an Arrow table from the columns: cheaper to build than a pandas frame of
        # Python objects, and DuckDB scans it without a per-value conversion
        frame: Any = pa.table(
            {k: pa.array(v) for k, v in zip(columns, zip(*rows, strict=True), strict=True)}
        )
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        frame = pd.DataFrame.from_records(list(rows), columns=list(columns))
    select = ", ".join(f'"{k}"::JSON' if k in json_columns else f'"{k}"' for k in columns)
    verb = "INSERT OR REPLACE INTO" if replace else "INSERT INTO"
    name = f"_ins_{table}"
    c.register(name, frame)
    try:
        c.execute(f"{verb} {table} SELECT {select} FROM {name}")
    finally:
        c.unregister(name)


def update_else_upsert(
    c: duckdb.DuckDBPyConnection, rows: Sequence[tuple[Any, ...]], update: str, upsert: str
) -> None:
    """Write small keyed rows (unique keys) with one UPDATE of the rows already stored,
    the usual case, and the upsert only when a key is new (fewer rows updated than
    given). Why: a DuckDB statement costs about a millisecond whatever its size, an
    upsert on a keyed table twice an UPDATE, and executemany one statement per row.
    ``{values}`` in both statements becomes the rows' VALUES placeholders."""
    values = ", ".join(["(" + ", ".join(["?"] * len(rows[0])) + ")"] * len(rows))
    params = [v for row in rows for v in row]
    (updated,) = c.execute(update.format(values=values), params).fetchone()  # type: ignore[misc]  # one row: UPDATE returns its count
    if updated < len(rows):
        c.execute(upsert.format(values=values), params)
