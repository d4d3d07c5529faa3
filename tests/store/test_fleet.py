"""The fleet view's writer (monitor.store.fleet) on a real DuckDB file, message by message.

tests/service/test_fleet_results.py checks the whole path (a pipeline's outbox applied,
shuffled and twice, gives the instance's own tables); here each upsert rule alone: what a
message replaces, which result a cell shows, what a model's position is, and which id an
event keeps.
"""

from __future__ import annotations

from typing import Any

import pytest

from monitor.config import config_from_mapping
from monitor.store import Store, queries
from monitor.store.results_messages import ResultMessage

CFG = config_from_mapping({"window": {"size": 600, "hop_records": 150, "hop_seconds": 0}})


def window(evaluation: int, end: int, vfr: float, released: bool | None = None,
           tier: str = "reliable", model: str = "m1") -> ResultMessage:  # fmt: skip
    result: dict[str, Any] = {"vfr": vfr}
    if released is not None:
        result["released"] = released
    return ResultMessage("window", "k", {
        "model_id": model, "evaluation": evaluation,
        "evaluated_at": f"2026-11-01T00:00:{evaluation:02d}+00:00", "window_kind": "sliding",
        "window_end_count": end, "seed": 7, "metric": "DI", "attribute": "race",
        "result": result, "tier": tier, "confirmed_tier": tier,
    })  # fmt: skip


def event(new: str, evaluation: int = 3, confirmed: bool = True) -> ResultMessage:
    return ResultMessage("event", "k", {
        "created_at": "2026-11-01T01:00:00+00:00", "event_kind": "tier_change",
        "model_id": "m1", "metric": "DI", "attribute": "race", "old": "reliable", "new": new,
        "confirmed": confirmed, "direction": "down", "evaluation": evaluation,
        "axes": {"axis1": new}, "axes_before": None, "decision_config": "d1",
    })  # fmt: skip


def axis(position: int, computed_at: str, cohort_n: int) -> ResultMessage:
    return ResultMessage("axis", "k", {
        "axis": "axis2", "model_id": "m1", "position": position, "computed_at": computed_at,
        "cohort_n": cohort_n, "payload": [{"n": cohort_n}],
    })  # fmt: skip


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "view.duckdb", CFG)
    yield s
    s.close()


def rows(store: Store, sql: str) -> list[tuple]:
    cur = store.cursor()
    try:
        return cur.execute(sql).fetchall()
    finally:
        cur.close()


def test_a_window_result_replaces_its_twin_and_the_cell_shows_the_latest_released(store):
    store.apply_results([window(1, 600, 1.1), window(2, 750, 1.2, released=False)])
    store.apply_results([window(1, 600, 1.3, tier="unreliable")])  # recomputed by a new owner
    got = rows(store, "SELECT evaluation, result->>'$.vfr', tier FROM window_results "
                      "ORDER BY evaluation")  # fmt: skip
    assert got == [(1, "1.3", "unreliable"), (2, "1.2", "reliable")]
    # evaluation 2 is withheld (released false): the cell shows evaluation 1
    assert rows(store, "SELECT model_id, metric, attribute, state, latest->>'$.vfr' "
                       "FROM cell_state") == [("m1", "DI", "race", "{}", "1.3")]  # fmt: skip
    # the model's position: the furthest window and evaluation seen
    assert rows(store, "SELECT records, evaluations, evaluated_records, old_events "
                       "FROM model_state WHERE model_id = 'm1'") == [(750, 2, 750, 0)]  # fmt: skip
    store.apply_results([window(3, 900, 1.4)])  # released (no flag): the cell moves on
    assert rows(store, "SELECT latest->>'$.vfr' FROM cell_state") == [("1.4",)]
    assert rows(store, "SELECT records, evaluations FROM model_state") == [(900, 3)]


def test_an_event_keeps_its_id_when_redelivered_and_a_new_one_gets_the_next(store):
    store.apply_results([event("unreliable")])
    [(first, new)] = rows(store, "SELECT id, new FROM events")
    assert new == "unreliable"
    store.apply_results([event("fragile")])  # the same event, recomputed: replaced in place
    assert rows(store, "SELECT id, new, axes->>'$.axis1', decision_config FROM events") == [
        (first, "fragile", "fragile", "d1")
    ]
    store.apply_results([event("unreliable", confirmed=False), event("x", evaluation=4)])
    ids = [i for (i,) in rows(store, "SELECT id FROM events ORDER BY id")]
    assert ids == [first, first + 1, first + 2]


def test_an_axis_result_at_the_same_position_replaces_the_earlier_one(store):
    store.apply_results([axis(600, "2026-11-02T00:00:00+00:00", 600)])
    store.apply_results([axis(600, "2026-11-03T00:00:00+00:00", 610)])  # recomputed
    store.apply_results([axis(1200, "2026-11-04T00:00:00+00:00", 1200)])  # a later one
    got = rows(store, "SELECT cohort_n, payload->>'$[0].n' FROM axis_results ORDER BY cohort_n")
    assert got == [(610, "610"), (1200, "1200")]
    assert [p for (p,) in rows(store, "SELECT position FROM fleet_axis_keys ORDER BY 1")] == [
        600, 1200,
    ]


def test_one_batch_of_mixed_kinds_is_one_transaction(store):
    bad = window(5, 900, 1.0)
    del bad.fields["seed"]  # a message the writer cannot store
    with pytest.raises(KeyError):
        store.apply_results([event("fragile"), axis(600, "2026-11-02T00:00:00+00:00", 600), bad])
    counts = store.read(queries.counts)
    assert counts["events"] == counts["axis_results"] == counts["window_results"] == 0
