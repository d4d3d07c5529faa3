"""The join of a batch's outcomes, wired: the store layer of the join, the rules of
:mod:`monitor.stream.join_rules` applied to what the store holds, inside the batch's
transaction (predictions now, outcomes later).

A batch's messages are taken in their order (the order of the topic partition that holds
their model): a new prediction may claim an outcome held for it, an outcome joins the
stored prediction, is a no-op or a dead letter, or is held. What comes out is, per model,
the joins for its window with the stream position each one counts from, so the pipeline
applies them between the hop points exactly where an uninterrupted run would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from consumers.base import Origin
from monitor.config import MonitorConfig
from monitor.store import DeadLetter, Store, queries
from monitor.stream.join_rules import (
    NS_PER_DAY,
    HeldOutcome,
    JoinCase,
    StoredRecord,
    is_expired,
    judge,
    judge_held,
    label_position,
    running_clock,
)


@dataclass
class Joins:
    """One model's joins in a batch, in the order they count (``label_pos`` ascending)."""

    seq: list[int] = field(default_factory=list)
    label: list[int] = field(default_factory=list)
    delay_ns: list[int] = field(default_factory=list)
    label_pos: list[int] = field(default_factory=list)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        order = np.argsort(np.asarray(self.label_pos, np.int64), kind="stable")
        return tuple(np.asarray(x, np.int64)[order] for x in
                     (self.seq, self.label, self.delay_ns, self.label_pos))  # type: ignore[return-value]  # four fields, four arrays  # fmt: skip


@dataclass
class JoinReport:
    """What the batch's outcomes did: joins per model, and counts by case (aggregates)."""

    joins: dict[str, Joins] = field(default_factory=dict)
    cases: dict[str, int] = field(default_factory=dict)

    def count(self, case: JoinCase | str) -> None:
        name = case.value if isinstance(case, JoinCase) else case
        self.cases[name] = self.cases.get(name, 0) + 1


@dataclass(frozen=True)
class NewPrediction:
    """A record stored by this batch: where it came, its key, sequence, position, time."""

    index: int  # payload index in the batch
    model_id: str
    record_id: str
    seq: int
    model_pos: int
    event_ns: int
    known: bool  # a joined message: its label came with it


def join_batch(
    store: Store,
    config: MonitorConfig,
    new: Sequence[NewPrediction],
    outcomes: pd.DataFrame,
    payloads: Sequence[bytes | None],
    origins: Sequence[Origin],
    arrivals_before: dict[str, int],
    clocks: dict[str, int],
    now: pd.Timestamp,
) -> tuple[JoinReport, list[DeadLetter]]:
    """Apply the batch's outcomes (``outcomes``: position = payload index) and the held
    outcomes its new predictions claim; updates ``clocks`` (each model's latest scoring
    time). Returns the joins and the dead letters to write."""
    report = JoinReport()
    dead: list[DeadLetter] = []
    held_n = store.read(queries.held_count)
    if not len(outcomes) and not held_n:
        _advance_clocks(new, clocks)
        return report, dead
    max_delay = int(config.outcomes.max_outcome_delay_days * NS_PER_DAY)
    hold = int(config.outcomes.orphan_hold_days * NS_PER_DAY)

    # the keys in play: the outcomes' and, when outcomes are held, the new predictions'
    keys = pd.DataFrame(
        {"model_id": outcomes["model_id"].to_numpy(object),
         "record_id": outcomes["record_id"].to_numpy(object)}
    )  # fmt: skip
    keys = keys.drop_duplicates().reset_index(drop=True)
    keys["i"] = np.arange(len(keys))
    found = store.stored_records(keys)
    stored: dict[tuple[str, str], tuple[int, int, int, int | None]] = {}
    key_m, key_r = keys["model_id"].to_numpy(object), keys["record_id"].to_numpy(object)
    labs = found["label"].to_numpy(np.float64)
    for i, seq, pos, ev, lab in zip(
        found["i"].to_numpy(np.int64).tolist(), found["seq"].to_numpy(np.int64).tolist(),
        found["model_pos"].to_numpy(np.int64).tolist(),
        found["event_ns"].to_numpy(np.int64).tolist(), labs.tolist(), strict=True,
    ):  # fmt: skip
        stored[(key_m[i], key_r[i])] = (seq, pos, ev, None if lab != lab else int(lab))
    # held outcomes are few (outcomes that came before their prediction): all of them
    held: dict[tuple[str, str], HeldOutcome] = {}
    held_payload: dict[tuple[str, str], bytes | None] = {}
    h: HeldOutcome | None
    if held_n:
        for r in store.held_outcomes().itertuples(index=False):
            h = HeldOutcome(str(r.model_id), str(r.record_id), int(r.label), int(r.known_ns),
                            None if pd.isna(r.topic) else str(r.topic),
                            None if pd.isna(r.partition) else int(r.partition),
                            None if pd.isna(r.offset) else int(r.offset))  # fmt: skip
            held[(h.model_id, h.record_id)] = h
            held_payload[(h.model_id, h.record_id)] = (
                bytes(r.payload) if isinstance(r.payload, bytes | bytearray | memoryview) else None
            )
    stored_held = set(held)
    new_seqs = {p.seq: p for p in new}

    # the batch's events in payload order: new predictions and outcomes
    # (position, 0, NewPrediction) or (position, 1, (outcome row, known_ns))
    events: list[tuple[int, int, Any]] = [(p.index, 0, p) for p in new]
    times_of = pd.DatetimeIndex(outcomes["event_time"]).as_unit("ns").asi8
    known_all = times_of if len(outcomes) else np.zeros(0, np.int64)
    for row, known_ns in zip(outcomes.itertuples(index=False), known_all.tolist(), strict=True):
        events.append((int(row.position), 1, (row, known_ns)))
    events.sort(key=lambda e: (e[0], e[1]))
    models = np.array([_model_of(e) for e in events], dtype=object)
    lo = np.iinfo(np.int64).min
    times = np.array([lo if e[1] else e[2].event_ns for e in events], dtype=np.int64)
    before, after = running_clock(models, times, clocks)
    seen = dict(arrivals_before)
    labels: dict[tuple[str, str], int] = {}
    released: list[tuple[str, str]] = []

    def add_join(model: str, seq: int, label: int, delay: int, pos: int) -> None:
        j = report.joins.setdefault(model, Joins())
        j.seq.append(seq)
        j.label.append(label)
        j.delay_ns.append(max(delay, 0))
        j.label_pos.append(pos)
        report.count(JoinCase.JOINED)

    def letter(reason: str, index: int | None, h: HeldOutcome | None = None) -> None:
        report.count(reason)
        if index is not None:
            o = origins[index]
            dead.append(DeadLetter(reason, payloads[index], o.topic, o.partition, o.offset))
        elif h is not None:
            pl = held_payload.get((h.model_id, h.record_id))
            dead.append(DeadLetter(reason, pl, h.topic, h.partition, h.offset))

    for (index, kind, item), clock in zip(events, before, strict=True):
        if kind == 0:  # a new prediction: it may claim a held outcome
            p = item
            seen[p.model_id] = seen.get(p.model_id, 0) + 1
            k = (p.model_id, p.record_id)
            h = held.pop(k, None)
            if h is None:
                continue
            released.append(k)
            if is_expired(h, int(clock), hold):
                letter("orphan_outcome", None, h)
                continue
            case = judge(h.label, h.known_ns, StoredRecord(p.event_ns, None), max_delay)
            if case is JoinCase.LATE:
                letter(case.value, None, h)
                continue
            labels[k] = h.label
            add_join(p.model_id, p.seq, h.label, h.known_ns - p.event_ns, p.model_pos)
            continue
        o, known_ns = item
        k = (o.model_id, o.record_id)
        label = int(o.label)
        st = stored.get(k)
        visible = st is not None and (st[0] not in new_seqs or new_seqs[st[0]].index < index)
        if k in labels and labels[k] >= 0:
            case = JoinCase.IDENTICAL if labels[k] == label else JoinCase.CONFLICTING
        elif visible:
            seq, pos, ev, lab = st  # type: ignore[misc]  # visible: st is not None
            case = judge(label, known_ns, StoredRecord(ev, lab), max_delay)
            if case is JoinCase.JOINED:
                labels[k] = label
                at = label_position(seen.get(o.model_id, 0), pos)
                add_join(o.model_id, seq, label, known_ns - ev, at)
                continue
        else:
            case = judge_held(label, held.get(k)) or JoinCase.HELD
            if case is JoinCase.HELD:
                held[k] = HeldOutcome(
                    o.model_id, o.record_id, label, known_ns,
                    origins[index].topic, origins[index].partition, origins[index].offset,
                )  # fmt: skip
                held_payload[k] = payloads[index]
                report.count(case)
                continue
        if case is JoinCase.IDENTICAL:
            report.count(case)
        else:
            letter(case.value, index)
    clocks.update(after)

    # held outcomes whose hold ran out by the end of the batch (their model's clock) are
    # dead-lettered; the batch's new ones not claimed in it are stored
    lo = np.iinfo(np.int64).min
    keep: list[HeldOutcome] = []
    expired: list[HeldOutcome] = []
    for h in held.values():
        (expired if is_expired(h, clocks.get(h.model_id, lo), hold) else keep).append(h)
    for h in expired:
        letter("orphan_outcome", None, h)
    store.release_held(
        [k for k in released if k in stored_held]
        + [(h.model_id, h.record_id) for h in expired if (h.model_id, h.record_id) in stored_held]
    )
    store.hold_outcomes(
        [(h.model_id, h.record_id, h.label, pd.Timestamp(h.known_ns, tz="UTC"), h.topic,
          h.partition, h.offset, held_payload.get((h.model_id, h.record_id)))
         for h in keep if (h.model_id, h.record_id) not in stored_held],
        now,
    )  # fmt: skip
    if report.joins:  # one statement for the batch's joins
        parts = [j.arrays() for j in report.joins.values()]
        seqs, labs, delays, poss = (np.concatenate([p[k] for p in parts]) for k in range(4))
        by_seq = dict(zip(found["seq"].tolist(), found["event_ns"].tolist(), strict=True))
        by_seq.update({s: p.event_ns for s, p in new_seqs.items()})
        scored = np.fromiter((by_seq[s] for s in seqs.tolist()), np.int64, len(seqs))
        store.write_joins(pd.DataFrame({
            "seq": seqs, "label": labs,
            "outcome_time": pd.to_datetime(scored + delays, utc=True), "label_pos": poss,
        }))  # fmt: skip
    return report, dead


def _model_of(event: tuple[int, int, Any]) -> str:
    item = event[2]
    return (item[0] if event[1] else item).model_id


def _advance_clocks(new: Sequence[NewPrediction], clocks: dict[str, int]) -> None:
    for p in new:
        if p.event_ns > clocks.get(p.model_id, np.iinfo(np.int64).min):
            clocks[p.model_id] = p.event_ns


