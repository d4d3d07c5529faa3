"""The join of outcomes to predictions (predictions now, outcomes later), as pure rules
without I/O: the domain layer of the join (the store layer is :mod:`monitor.stream.join_store`,
the window layer :mod:`monitor.stream.join_windows`).

Two kinds of message share the topic, keyed by model id (so a model's outcomes reach
the consumer-group member holding its predictions): a *prediction* (``"kind":
"prediction"``: a scored discharge without its label) and an *outcome* (``"kind":
"outcome"``: model id, record id, label, and ``event_time`` = when the label became
known). A message without ``kind`` is today's scored discharge: a prediction joined to
its outcome at once.

The rules, each a function here, with the store and the pipeline as their only callers:

* :func:`judge`: what an outcome does given what is stored for its record (joined,
  identical and silent, ``conflicting_outcome``, ``late_outcome``, or held);
* :func:`label_position`: from which stream position of its model an outcome counts in
  the label-based window (so a restart evaluates the same records at every hop);
* :class:`HeldOutcomes`: outcomes that came before their prediction, with symmetric
  add and remove, and the ones whose hold has run out (``orphan_outcome``);
* :func:`running_clock`: each model's event-time clock message by message, which
  decides holds and expiry in stream order (batch boundaries change nothing).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

#: the label of a prediction whose outcome is not known (in a RecordBatch)
LABEL_UNKNOWN = -1
NS_PER_DAY = 86_400 * 10**9

#: message kinds: a prediction, an outcome, and (no ``kind`` field) both joined
PREDICTION = "prediction"
OUTCOME = "outcome"
KINDS = (PREDICTION, OUTCOME)


class JoinCase(enum.Enum):
    """What an arriving outcome does (docs/decisions.md, "Predictions now, outcomes later")."""

    JOINED = "joined"  # the stored prediction gets its label
    IDENTICAL = "identical"  # the record has this label already: silent, like a duplicate
    CONFLICTING = "conflicting_outcome"  # the record has another label: dead letter
    LATE = "late_outcome"  # known after max_outcome_delay: the prediction expired
    HELD = "held"  # no prediction stored (yet): held for orphan_hold


@dataclass(frozen=True)
class StoredRecord:
    """What the store holds for an outcome's (model, record): the prediction's scoring
    time and its label (None: no outcome yet)."""

    event_time_ns: int
    label: int | None


def judge(label: int, known_ns: int, stored: StoredRecord | None, max_delay_ns: int) -> JoinCase:
    """The case of one outcome: ``stored`` is its record's prediction (None: none stored).

    A label already there decides first (same: silent; other: a conflict), so a replayed
    outcome is a no-op whatever its timing. Lateness is judged on the two times the
    messages carry (known minus scored), not on arrival, so it is the same in a replay.
    """
    if stored is None:
        return JoinCase.HELD
    if stored.label is not None:
        return JoinCase.IDENTICAL if stored.label == label else JoinCase.CONFLICTING
    if known_ns - stored.event_time_ns > max_delay_ns:
        return JoinCase.LATE
    return JoinCase.JOINED


def judge_held(label: int, held: HeldOutcome | None) -> JoinCase | None:
    """A second outcome for a record whose first is held: None (hold this one), identical
    (silent) or a conflict."""
    if held is None:
        return None
    return JoinCase.IDENTICAL if held.label == label else JoinCase.CONFLICTING


def label_position(arrivals_before: int, prediction_pos: int) -> int:
    """The first stream position whose evaluation counts this outcome.

    An evaluation at position E runs when the model's E-th prediction arrives, with the
    outcomes that came before it: an outcome that came after ``arrivals_before``
    predictions counts from ``arrivals_before + 1``; one claimed by its prediction on
    arrival (held orphan, or a joined message) from the prediction's own position.
    """
    return max(int(arrivals_before) + 1, int(prediction_pos))


def delay_days(known_ns: int | np.ndarray, scored_ns: int | np.ndarray) -> np.ndarray:
    """Outcome delay in whole days (floor, at least 0): the histogram's bins."""
    d = np.asarray(known_ns, dtype=np.int64) - np.asarray(scored_ns, dtype=np.int64)
    return np.maximum(d // NS_PER_DAY, 0)


@dataclass(frozen=True)
class HeldOutcome:
    """An outcome waiting for its prediction, with where it came from (its dead letter
    if the prediction never comes)."""

    model_id: str
    record_id: str
    label: int
    known_ns: int
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


class HeldOutcomes:
    """Outcomes held for their prediction, by (model, record): symmetric add and remove."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], HeldOutcome] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[HeldOutcome]:
        return iter(list(self._held.values()))

    def get(self, model_id: str, record_id: str) -> HeldOutcome | None:
        return self._held.get((model_id, record_id))

    def add(self, held: HeldOutcome) -> None:
        self._held[(held.model_id, held.record_id)] = held

    def remove(self, model_id: str, record_id: str) -> HeldOutcome | None:
        return self._held.pop((model_id, record_id), None)

    def expired(self, clocks: dict[str, int], hold_ns: int) -> list[HeldOutcome]:
        """Held outcomes whose model's clock passed their time by more than the hold."""
        return [
            h
            for h in self._held.values()
            if h.model_id in clocks and clocks[h.model_id] - h.known_ns > hold_ns
        ]


def is_expired(held: HeldOutcome, clock_ns: int, hold_ns: int) -> bool:
    """Whether a held outcome's hold had run out at clock ``clock_ns``."""
    return clock_ns - held.known_ns > hold_ns


def running_clock(
    models: np.ndarray, times_ns: np.ndarray, start: dict[str, int]
) -> tuple[np.ndarray, dict[str, int]]:
    """Each message's model clock *before* it (the latest event time of its model's earlier
    messages, from ``start``), and every model's clock after the batch.

    Why per message: whether a held outcome was still held when its prediction arrived
    must not depend on where the source cut its batches.
    """
    n = len(models)
    before = np.empty(n, dtype=np.int64)
    after = dict(start)
    lo = np.iinfo(np.int64).min
    for i in range(n):
        m = models[i]
        c = after.get(m, lo)
        before[i] = c
        t = int(times_ns[i])
        if t > c:
            after[m] = t
    return before, after
