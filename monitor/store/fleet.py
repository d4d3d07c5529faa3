"""The fleet view's writer: results read from the fleet's results topic, into the view's
own file (see monitor.service.fleet_view), as functions of its connection.

Each message replaces the row its key names: a window result by (model, evaluation,
metric, attribute), an event by (kind, model, metric, attribute, evaluation, confirmed),
an axis result by (axis, model, stream position), so a result computed again by a
partition's new owner overwrites its twin. A window result published by an earlier
version gets the keys it lacks on arrival, as a file's rows do once (migration v13).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import pandas as pd

from monitor.core.jsonable import to_json
from monitor.store.migrations import upgraded_cell
from monitor.store.queries import RELEASED
from monitor.store.results_messages import ResultMessage
from monitor.store.rows import insert_frame


def apply_results(
    c: duckdb.DuckDBPyConnection,
    messages: Sequence[ResultMessage],
    new_event_id: Callable[[], int],
) -> None:
    """Write ``messages`` inside the caller's transaction; ``new_event_id`` draws the id
    of an event the file does not hold yet."""
    windows = []
    for m in messages:
        f = m.fields
        if m.kind == "window":
            windows.append((
                f["model_id"], f["evaluation"], pd.Timestamp(f["evaluated_at"]),
                f["window_kind"], None, None, f["window_end_count"], f["seed"],
                f["metric"], f["attribute"], to_json(upgraded_cell(f["result"])), f["tier"],
                f["confirmed_tier"]))  # fmt: skip
        elif m.kind == "event":
            _upsert_event(c, f, new_event_id)
        else:
            _upsert_axis(c, f)
    insert_frame(
        c, "window_results",
        ["model_id", "evaluation", "evaluated_at", "window_kind", "window_first_seq",
         "window_last_seq", "window_end_count", "seed", "metric", "attribute",
         "result", "tier", "confirmed_tier"],
        windows, json_columns={"result"}, replace=True,
    )  # fmt: skip
    models = sorted({w[0] for w in windows})
    if models:
        # what the report reads: each cell's latest released result, each model's
        # position (the view has no tracker states: '{}')
        marks = ", ".join("?" * len(models))
        c.execute(
            "INSERT OR REPLACE INTO cell_state SELECT model_id, metric, attribute, "
            "'{}'::JSON, result, evaluated_at FROM window_results "
            f"WHERE model_id IN ({marks}) AND {RELEASED} QUALIFY row_number() "
            "OVER (PARTITION BY model_id, metric, attribute ORDER BY evaluation DESC) = 1",
            models,
        )  # fmt: skip
        c.execute(
            "INSERT OR REPLACE INTO model_state (model_id, records, evaluations, "
            "old_events, updated_at, evaluated_records) SELECT model_id, "
            "max(window_end_count), max(evaluation), 0, max(evaluated_at), "
            f"max(window_end_count) FROM window_results WHERE model_id IN ({marks}) "
            "GROUP BY model_id", models,
        )  # fmt: skip


def _upsert_event(
    c: duckdb.DuckDBPyConnection, f: dict[str, Any], new_event_id: Callable[[], int]
) -> None:
    natural = [f["event_kind"], f["model_id"], f["metric"], f["attribute"], f["evaluation"],
               f["confirmed"]]  # fmt: skip
    where = ("kind = ? AND model_id = ? AND metric = ? AND attribute = ? AND evaluation = ? "
             "AND confirmed = ?")  # fmt: skip
    row = c.execute(f"SELECT id FROM events WHERE {where}", natural).fetchone()
    if row is None:
        event_id = new_event_id()
    else:
        event_id = int(row[0])
        c.execute("DELETE FROM events WHERE id = ?", [event_id])
    c.execute(
        "INSERT INTO events (id, created_at, kind, model_id, metric, attribute, old, new, "
        "confirmed, direction, evaluation, axes, decision_config, axes_before) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::JSON, ?, ?::JSON)",
        [event_id, pd.Timestamp(f["created_at"]), f["event_kind"], f["model_id"],
         f["metric"], f["attribute"], f["old"], f["new"], f["confirmed"], f["direction"],
         f["evaluation"], to_json(f["axes"]), f["decision_config"],
         to_json(f["axes_before"])],
    )  # fmt: skip


def _upsert_axis(c: duckdb.DuckDBPyConnection, f: dict[str, Any]) -> None:
    key = [f["axis"], f["model_id"], f["position"]]
    old = c.execute(
        "SELECT computed_at FROM fleet_axis_keys WHERE axis = ? AND model_id = ? "
        "AND position = ?", key,
    ).fetchone()  # fmt: skip
    if old is not None:
        c.execute(
            "DELETE FROM axis_results WHERE axis = ? AND model_id = ? AND computed_at = ?",
            [f["axis"], f["model_id"], old[0]],
        )
    at = pd.Timestamp(f["computed_at"])
    c.execute("INSERT OR REPLACE INTO fleet_axis_keys VALUES (?, ?, ?, ?)", [*key, at])
    c.execute(
        "INSERT INTO axis_results VALUES (?, ?, ?, ?, ?::JSON)",
        [f["axis"], f["model_id"], at, f["cohort_n"], to_json(f["payload"])],
    )
