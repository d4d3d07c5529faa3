"""The join of outcomes to predictions (issue 23): each rule of docs/decisions.md's table,
on the pure functions and through the real pipeline and DuckDB file (no broker)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from consumers.base import Origin
from monitor.config import config_from_mapping
from monitor.store import Store, queries
from monitor.stream.join_rules import (
    NS_PER_DAY,
    HeldOutcome,
    HeldOutcomes,
    JoinCase,
    StoredRecord,
    is_expired,
    judge,
    label_position,
    running_clock,
)
from monitor.stream.pipeline import Pipeline
from tests.support.outcome_streams import T0

CFG = config_from_mapping(
    {
        "window": {"size": 500, "hop_records": 1000, "hop_seconds": 0},
        "axis1": {"K": 50},
        "models": [{"id": "m"}],
        "outcomes": {"max_outcome_delay_days": 10, "orphan_hold_days": 2},
        "service": {"evaluation_worker": False},
    }
)
DAY = NS_PER_DAY


# ----------------------------------------------------------------------------- pure rules
def test_judge_cases():
    scored = 1_000 * DAY
    pending = StoredRecord(scored, None)
    assert judge(1, scored + DAY, None, 10 * DAY) is JoinCase.HELD
    assert judge(1, scored + DAY, pending, 10 * DAY) is JoinCase.JOINED
    assert judge(1, scored + 10 * DAY, pending, 10 * DAY) is JoinCase.JOINED  # at the bound
    assert judge(1, scored + 10 * DAY + 1, pending, 10 * DAY) is JoinCase.LATE
    assert judge(1, scored, StoredRecord(scored, 1), 10 * DAY) is JoinCase.IDENTICAL
    assert judge(0, scored, StoredRecord(scored, 1), 10 * DAY) is JoinCase.CONFLICTING
    # a label already there decides before lateness: a replay is a no-op whenever it comes
    assert judge(1, scored + 99 * DAY, StoredRecord(scored, 1), 10 * DAY) is JoinCase.IDENTICAL


def test_label_position_and_clock_and_held_set():
    assert label_position(arrivals_before=7, prediction_pos=3) == 8  # came after it
    assert label_position(arrivals_before=2, prediction_pos=5) == 5  # came before it: held
    before, after = running_clock(
        np.array(["a", "b", "a", "a"], dtype=object), np.array([5, 9, 3, 7]), {"a": 4}
    )
    assert before.tolist() == [4, np.iinfo(np.int64).min, 5, 5] and after == {"a": 7, "b": 9}
    held = HeldOutcomes()
    h = HeldOutcome("a", "r", 1, 100)
    held.add(h)
    assert held.get("a", "r") == h and len(held) == 1
    assert held.expired({"a": 100 + 5}, hold_ns=5) == [] and is_expired(h, 106, 5)
    assert held.remove("a", "r") == h and len(held) == 0  # add then remove: back to empty


# ----------------------------------------------------------------------------- pipeline
def _t(minutes: float = 0, days: float = 0) -> str:
    return (T0 + pd.Timedelta(minutes=minutes, days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pred(rid: str, minutes: float, score: float = 0.7, **kw) -> dict:
    return {
        "kind": "prediction", "record_id": rid, "model_id": "m", "event_time": _t(minutes),
        "hospital_id": "h1", "score": score, "race": "3", "sex": "1", "ethnicity": "1",
        "age_group": "2", **kw,
    }  # fmt: skip


def joined(rid: str, minutes: float, label: int) -> dict:
    p = pred(rid, minutes)
    p.pop("kind")
    return {**p, "label": label}


def outcome(rid: str, minutes: float, days: float, label: int) -> dict:
    return {"kind": "outcome", "record_id": rid, "model_id": "m", "label": label,
            "event_time": _t(minutes, days)}  # fmt: skip


class Feed:
    """A pipeline on a fresh file, fed message by message batches with rising offsets."""

    def __init__(self, path, config=CFG):
        self.store = Store(path, config)
        self.pipe = Pipeline(config, self.store)
        self.offset = 0
        self.reports = []
        self.pipe.on_batch = self.reports.append

    def send(self, *messages: dict) -> None:
        payloads = [json.dumps(m).encode() for m in messages]
        origins = [Origin("t", 0, self.offset + i) for i in range(len(payloads))]
        self.offset += len(payloads)
        self.pipe.ingest_batch(payloads, origins)

    def labels(self) -> dict[str, float | None]:
        rows = self.store._conn.execute("SELECT record_id, label FROM discharges").fetchall()
        return {r: lab for r, lab in rows}

    def dead(self) -> list[str]:
        c = self.store._conn
        return [r for (r,) in c.execute("SELECT reason FROM dead_letters ORDER BY id").fetchall()]

    def held(self) -> int:
        return self.store.read(queries.held_count)

    def coverage(self):
        return self.pipe.model_view("m").coverage


def test_outcome_joins_its_prediction(tmp_path):
    f = Feed(tmp_path / "a.duckdb")
    f.send(pred("r1", 0), pred("r2", 1))
    assert f.labels() == {"r1": None, "r2": None}
    f.send(outcome("r1", 0, 3, 1))
    assert f.labels() == {"r1": 1, "r2": None} and f.dead() == []
    cov = f.coverage()
    assert (cov.predictions, cov.with_outcome) == (2, 1)
    assert cov.groups["sex"]["1"].delay_days[3] == 1  # known 3 days later
    assert f.pipe._models["m"].window.with_outcome == 1


def test_identical_outcome_is_silent_and_a_different_one_is_a_conflict(tmp_path):
    f = Feed(tmp_path / "a.duckdb")
    f.send(pred("r1", 0), outcome("r1", 0, 1, 1))
    f.send(outcome("r1", 0, 2, 1))  # same label again (a replay, or a resend): nothing
    assert f.dead() == [] and f.labels() == {"r1": 1}
    f.send(outcome("r1", 0, 2, 0))
    assert f.dead() == ["conflicting_outcome"] and f.labels() == {"r1": 1}
    # a joined message (today's scored discharge) takes outcomes by the same rules
    f.send(joined("r2", 5, 0), outcome("r2", 5, 1, 0), outcome("r2", 5, 1, 1))
    assert f.dead() == ["conflicting_outcome", "conflicting_outcome"]
    assert f.reports[-1].outcomes == {"identical": 1, "conflicting_outcome": 1}


def test_outcome_before_its_prediction_is_held_then_joined(tmp_path):
    f = Feed(tmp_path / "a.duckdb")
    f.send(outcome("r1", 0, 1, 1))
    assert f.held() == 1 and f.labels() == {}
    f.send(outcome("r1", 0, 1, 1))  # an identical second one is silent
    f.send(pred("r1", 0))
    assert f.held() == 0 and f.labels() == {"r1": 1} and f.dead() == []
    # within one batch too
    f.send(outcome("r2", 10, 1, 0), pred("r2", 10))
    assert f.labels()["r2"] == 0 and f.held() == 0


def test_second_different_held_outcome_is_a_conflict(tmp_path):
    f = Feed(tmp_path / "a.duckdb")
    f.send(outcome("r1", 0, 1, 1))
    f.send(outcome("r1", 0, 1, 0))
    assert f.dead() == ["conflicting_outcome"] and f.held() == 1


def test_orphan_outcome_is_dead_lettered_after_the_hold(tmp_path):
    hold = CFG.outcomes.orphan_hold_days
    f = Feed(tmp_path / "a.duckdb")
    f.send(pred("r0", 0), outcome("x", 0, 0, 1))
    # the model's clock (latest scoring time) reaches the hold, not past it: still held
    f.send(pred("r1", 60 * 24 * hold))
    assert f.held() == 1 and f.dead() == []
    f.send(pred("r2", 60 * 24 * hold + 1))  # past it
    assert f.held() == 0 and f.dead() == ["orphan_outcome"]
    f.send(pred("x", 0))  # its prediction after all: no outcome now
    assert f.labels()["x"] is None


def test_held_outcome_expired_before_its_prediction_is_an_orphan_in_one_batch(tmp_path):
    """Whether the hold ran out is judged where the prediction is in the stream, so a
    batch boundary cannot decide it."""
    hold = CFG.outcomes.orphan_hold_days
    f = Feed(tmp_path / "a.duckdb")
    f.send(outcome("x", 0, 0, 1), pred("late", 60 * 24 * hold + 1), pred("x", 0))
    assert f.dead() == ["orphan_outcome"] and f.labels()["x"] is None


def test_late_outcome_is_dead_lettered_and_the_prediction_expires(tmp_path):
    limit = CFG.outcomes.max_outcome_delay_days
    f = Feed(tmp_path / "a.duckdb")
    f.send(pred("r1", 0), pred("r2", 1))
    f.send(outcome("r2", 1, limit, 0))  # known limit days later: at the bound, joined
    f.send(outcome("r1", 0, limit + 0.01, 1))  # a quarter of an hour more: too late
    assert f.dead() == ["late_outcome"] and f.labels()["r1"] is None
    assert f.coverage().expired == 0  # the window's clock has not passed the limit
    f.send(pred("r3", 60 * 24 * limit + 2))
    cov = f.coverage()
    assert (cov.predictions, cov.with_outcome, cov.expired) == (3, 1, 1)
    assert cov.groups["sex"]["1"].awaiting == 1  # r3, scored last


def test_outcome_validation_faults_are_dead_letters(tmp_path):
    f = Feed(tmp_path / "a.duckdb")
    f.send(
        {**outcome("r1", 0, 1, 1), "label": 2},
        {**outcome("r1", 0, 1, 1), "score": 0.5},
        {k: v for k, v in outcome("r1", 0, 1, 1).items() if k != "label"},
        {**pred("r1", 0), "label": 1},
        {**pred("r1", 0), "kind": "forecast"},
    )
    assert f.dead() == [
        "out_of_range:label", "unexpected_field", "missing:label", "unexpected_field:label",
        "invalid:kind",
    ]  # fmt: skip


def test_unmatched_predictions_are_kept_only_while_an_outcome_may_come(tmp_path):
    f = Feed(tmp_path / "a.duckdb")
    f.send(pred("open", 0), joined("done", 0, 1))
    keep = max(CFG.outcomes.max_outcome_delay_days, CFG.horizon_days)
    at = T0 + pd.Timedelta(days=keep)
    assert f.store.apply_retention(at, 400, 730)["unmatched_predictions"] == 0
    out = f.store.apply_retention(at + pd.Timedelta(days=1), 400, 730)
    assert out["unmatched_predictions"] == 1 and out["discharges"] == 0
    assert f.labels() == {"done": 1}


@pytest.mark.parametrize("batch", [1, 7, 200])
def test_the_joins_do_not_depend_on_the_batching(tmp_path, batch):
    """The same stream cut into different batches: the same labels, positions, cases."""
    msgs = []
    for i in range(60):
        msgs.append(pred(f"r{i}", i))
        if i >= 5:
            msgs.append(outcome(f"r{i - 5}", i - 5, 1, i % 2))
        if i % 9 == 0:
            msgs.append(outcome(f"e{i}", i, 0, 1))  # held before its prediction...
            msgs.append(pred(f"e{i}", i))  # ...which comes right after
    f = Feed(tmp_path / f"b{batch}.duckdb")
    for k in range(0, len(msgs), batch):
        f.send(*msgs[k : k + batch])
    got = f.store._conn.execute(
        "SELECT record_id, label, label_pos, model_pos FROM discharges ORDER BY record_id"
    ).fetchall()
    ref = Feed(tmp_path / "ref.duckdb")
    ref.send(*msgs)
    want = ref.store._conn.execute(
        "SELECT record_id, label, label_pos, model_pos FROM discharges ORDER BY record_id"
    ).fetchall()
    assert got == want and f.dead() == ref.dead() == []
