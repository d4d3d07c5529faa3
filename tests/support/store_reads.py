"""Reads of a store's file for the tests, through the store's public cursor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from monitor.publish.events import event_row
from monitor.store import Store, queries


def scalar(store: Store, sql: str, params: Sequence[Any] = ()) -> int:
    """The integer a one-value query returns."""
    return int(store.cursor().execute(sql, list(params)).fetchone()[0])


def window_results(store: Store, model_id: str | None = None) -> pd.DataFrame:
    """``window_results`` as stored (all models, or one), in key order."""
    sql = "SELECT * FROM window_results"
    params: list[Any] = []
    if model_id is not None:
        sql += " WHERE model_id = ?"
        params.append(model_id)
    return store.cursor().execute(
        sql + " ORDER BY model_id, evaluation, metric, attribute", params
    ).df()


def events_frame(store: Store, limit: int = 10_000) -> pd.DataFrame:
    """The latest events as rows of their stored fields, newest first."""
    events = queries.events_since(store.cursor(), limit)
    return pd.DataFrame([
        event_row(e.event, id=e.id, created_at=e.created_at, decision_config=e.decision_config)
        for e in events
    ])  # fmt: skip
