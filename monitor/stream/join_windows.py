"""A batch's outcomes, from its checked rows to its models' windows: the window layer of the
join (the rules are :mod:`monitor.stream.join_rules`, the store layer
:mod:`monitor.stream.join_store`).

:func:`join_outcomes` runs inside the batch's transaction, after its records are stored:
it numbers the batch's new predictions by model (their stream positions), joins the
batch's outcome messages and the held ones (:func:`monitor.stream.join_store.join_batch`)
and writes the outcomes' dead letters. What comes back, per model, are the joins with the
stream position each counts from; a :class:`JoinCursor` then applies them to the model's
window between its hop points, where an uninterrupted run would have (the label-position
rule of :mod:`monitor.stream.join_rules`).

The usual batch, scored discharges and no outcome held, costs one count here: only the
models' event-time clocks move (:func:`advance_clocks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from consumers.base import Origin
from monitor.config import MonitorConfig
from monitor.store import Store, queries
from monitor.stream.intake import CheckedBatch
from monitor.stream.join_store import Joins, NewPrediction, join_batch
from monitor.stream.window import ModelWindow, RecordBatch

_NO_OUTCOMES = pd.DataFrame(
    {"position": np.zeros(0, np.int64), "model_id": np.zeros(0, object),
     "record_id": np.zeros(0, object), "event_time": np.zeros(0, "datetime64[ns]"),
     "label": np.zeros(0, np.int8)}
)  # fmt: skip


@dataclass
class BatchJoins:
    """What joining a batch's outcomes did: per model, its joins for the window; the dead
    letters written, by reason; the outcome messages, by case
    (monitor.stream.join_rules.JoinCase)."""

    joins: dict[str, Joins] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    cases: dict[str, int] = field(default_factory=dict)


class JoinCursor:
    """One model's joins of a batch (seq, label, delay, label_pos; by label_pos), applied to
    its window up to a stream position at a time."""

    def __init__(self, arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]):
        self.seq, self.label, self.delay, self.pos = arrays
        self.done = 0

    def apply(
        self, window: ModelWindow, upto: int | None
    ) -> tuple[np.ndarray, np.ndarray, RecordBatch | None] | None:
        """Join those with label_pos <= ``upto`` (None: all the rest). Returns their
        label_pos, which of them joined a record of the window and those records
        (:meth:`ModelWindow.join`), for the certified blocks; None: nothing to join."""
        end = len(self.pos) if upto is None else int(np.searchsorted(self.pos, upto, "right"))
        if end <= self.done:
            return None
        part = slice(self.done, end)
        order = np.argsort(self.seq[part], kind="stable")
        found, records = window.join(
            self.seq[part][order], self.label[part][order], self.delay[part][order]
        )
        self.done = end
        return self.pos[part][order], found, records


def join_outcomes(
    store: Store,
    config: MonitorConfig,
    batch: CheckedBatch,
    rows: pa.Table,
    new: RecordBatch,
    mask: np.ndarray,
    payloads: Sequence[bytes | None],
    origins: Sequence[Origin],
    clocks: dict[str, int],
    now: pd.Timestamp,
) -> BatchJoins:
    """The batch's outcomes joined, inside its transaction. ``rows``/``new``: the batch's
    newly stored rows and their window batch; ``mask``: which of ``batch.rows`` were new;
    ``clocks``: each model's event-time clock, moved here."""
    outcomes = batch.outcomes
    if outcomes is None:
        outcomes = _NO_OUTCOMES
    if not len(outcomes) and not len(new):
        return BatchJoins()
    if not len(outcomes) and not store.read(queries.held_count):
        # the usual batch of scored discharges: only the models' clocks move
        advance_clocks(clocks, rows["model_id"], new.event_time)
        return BatchJoins()
    models = rows["model_id"].to_numpy(zero_copy_only=False)
    records = rows["record_id"].to_numpy(zero_copy_only=False)
    # each model's stream position before the batch, from the store (a model this
    # instance does not hold in memory has one too)
    after = store.stream_positions()
    added: dict[str, int] = {}
    for m in models:
        added[m] = added.get(m, 0) + 1
    before = {m: p - added.get(m, 0) for m, p in after.items()}
    pos, counter = np.empty(len(new), np.int64), dict(before)
    for i, m in enumerate(models):
        counter[m] = counter.get(m, 0) + 1
        pos[i] = counter[m]
    fresh = [
        NewPrediction(int(ix), str(m), str(r), int(sq), int(p), int(t), bool(y >= 0))
        for ix, m, r, sq, p, t, y in zip(
            batch.positions[mask], models, records, new.seq, pos, new.event_time, new.label,
            strict=True,
        )
    ]
    result, dead = join_batch(
        store, config, fresh, outcomes, payloads, origins, before, clocks, now
    )
    return BatchJoins(result.joins, dict(store.write_dead_letters(dead, now)), dict(result.cases))


def advance_clocks(
    clocks: dict[str, int], models: pa.ChunkedArray | pa.Array, times: np.ndarray
) -> None:
    """Each model's clock to the latest scoring time among ``times`` (column-wise)."""
    enc = pa.chunked_array([models]) if isinstance(models, pa.Array) else models
    enc = enc.combine_chunks().dictionary_encode()
    codes = enc.indices.to_numpy(zero_copy_only=False)
    latest = np.full(len(enc.dictionary), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(latest, codes, times)
    for name, t in zip(enc.dictionary.to_pylist(), latest.tolist(), strict=True):
        if t > clocks.get(name, np.iinfo(np.int64).min):
            clocks[name] = t
