"""Messages of the fleet's results topic: one per window result, event and axis result.

Several service instances share a consumer group; each publishes what it stores to one
compacted topic (``vfr-results``), and ``vfr-monitor view`` reads that topic into one
DuckDB file for the whole fleet. Why the key is what it is: a partition that moves to a
new owner is replayed there and its results are computed again; the key names the result
by what determines it, (kind, model, metric, attribute, stream position), never by who
computed it or when, so the recomputed twin overwrites the first one (in the view, and in
the topic once compacted) instead of sitting beside it.

Keys are JSON arrays (unambiguous whatever a name holds), values JSON objects carrying the
same fields as the store's rows; the store's sequence numbers (``window_first_seq``,
``window_last_seq``, event ids) are local to one file and are left out. Values carry what
the store holds, aggregates only; the small-cell rule is applied where they are served
(the view's API and report), as for the service's own file.

>>> key, value = axis_result_message("axis2", "m1", 2000, pd.Timestamp(0, tz="UTC"), 2000, "[]")
>>> key
'["axis", "axis2", "m1", 2000]'
>>> parse_message(key, value).kind
'axis'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from monitor.core.events import CellEvent
from monitor.core.jsonable import to_json


def _key(*parts: Any) -> str:
    return json.dumps(list(parts))


def _iso(at: Any) -> str:
    return pd.Timestamp(at).isoformat()


def _with_raw(fields: dict[str, Any], name: str, raw_json: str) -> str:
    """``fields`` as JSON with ``name`` set to an already serialised JSON value."""
    head = json.dumps(fields, allow_nan=False)
    return f'{head[:-1]}, "{name}": {raw_json}}}'


def window_result_message(row: tuple[Any, ...]) -> tuple[str, str]:
    """A ``window_results`` row as the store writes it (see Store.write_evaluations)."""
    (model, evaluation, at, kind, _first, _last, end, seed, metric, attribute, result,
     tier, confirmed_tier) = row  # fmt: skip
    fields = {
        "kind": "window", "model_id": model, "evaluation": int(evaluation),
        "evaluated_at": _iso(at), "window_kind": kind,
        "window_end_count": None if end is None else int(end), "seed": int(seed),
        "metric": metric, "attribute": attribute, "tier": tier, "confirmed_tier": confirmed_tier,
    }  # fmt: skip
    return _key("window", model, metric, attribute, end), _with_raw(fields, "result", result)


def event_message(at: Any, e: CellEvent, decision_config: str) -> tuple[str, str]:
    key = _key("event", e.model_id, e.metric, e.attribute, e.evaluation, e.kind, e.confirmed)
    value = to_json({
        "kind": "event", "created_at": _iso(at), "event_kind": e.kind, "model_id": e.model_id,
        "metric": e.metric, "attribute": e.attribute, "old": e.old, "new": e.new,
        "confirmed": e.confirmed, "direction": e.direction, "evaluation": e.evaluation,
        "axes": e.axes, "axes_before": e.axes_before, "decision_config": decision_config,
    })  # fmt: skip
    return key, value


def axis_result_message(
    axis: str, model: str, position: int, at: Any, cohort_n: int, payload_json: str
) -> tuple[str, str]:
    fields = {
        "kind": "axis", "axis": axis, "model_id": model, "position": int(position),
        "computed_at": _iso(at), "cohort_n": int(cohort_n),
    }  # fmt: skip
    return _key("axis", axis, model, position), _with_raw(fields, "payload", payload_json)


@dataclass(frozen=True)
class ResultMessage:
    """A parsed message: its kind ("window", "event" or "axis"), key and fields."""

    kind: str
    key: str
    fields: dict[str, Any]


def parse_message(key: str | bytes, value: str | bytes) -> ResultMessage:
    """Raises ValueError for a message that is not one of the three kinds."""
    k = key.decode() if isinstance(key, bytes) else key
    fields = json.loads(value)
    kind = fields.get("kind") if isinstance(fields, dict) else None
    if kind not in REQUIRED or not REQUIRED[kind] <= fields.keys():
        raise ValueError("not a results message")
    return ResultMessage(kind, k, fields)


#: the fields each kind of message must carry
REQUIRED: dict[str, frozenset[str]] = {
    "window": frozenset({
        "model_id", "evaluation", "evaluated_at", "window_kind", "window_end_count", "seed",
        "metric", "attribute", "result", "tier", "confirmed_tier"}),
    "event": frozenset({
        "created_at", "event_kind", "model_id", "metric", "attribute", "old", "new",
        "confirmed", "direction", "evaluation", "axes", "axes_before", "decision_config"}),
    "axis": frozenset({"axis", "model_id", "position", "computed_at", "cohort_n", "payload"}),
}  # fmt: skip
