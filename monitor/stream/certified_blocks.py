"""A model's certified blocks, counted in memory as its records and outcomes arrive.

A certified cell takes each record once, in *blocks* of stream positions: the block
(lo, hi] between two count hops holds (monitor.stream.certified; the definition is
:func:`monitor.store.queries.block_records`, the file's read)

* the predictions at ``model_pos`` in (lo, hi], label collapsed (the label-free metrics),
  and the block's clock: the scoring times of its first prediction and of the one at hi;
* the outcomes whose ``label_pos`` lies in (lo, hi], with their labels (the label-based
  metrics): a record stored with its label counts at its own position (the store writes
  ``label_pos = model_pos``), an outcome joined later at the position the join gave it.

Why in memory: the pipeline used to read each block back from DuckDB (and again, to
replay the blocks the detectors had not taken yet, for the release rule) and count it
from a pandas frame, about 15 ms a hop on the ingest thread (docs/decisions.md, "Ingest
path"). Every record of a block passes through the ingest thread before its hop anyway:
:meth:`BlockBook.add_predictions` takes each slice of new records
(:meth:`~monitor.stream.model_state.ModelState.add_to_hops` never crosses a hop point)
and :meth:`BlockBook.add_outcomes` each join the window applies with the record it found.
A block is only counts: per grid attribute, records by (group, label, decision), all a
certified cell reads (:func:`~monitor.core.certify.cube_rate_counts`).

A block is used only when it is whole: it holds every position of (lo, hi] from lo on and
every outcome of it found its record in memory. Otherwise the pipeline reads it from the
file as before (:func:`read_block`): after a restart mid-block (the positions before the
restart were counted by the process that stopped), for an outcome whose record the window
no longer holds (evicted, or older than a time window), for an evaluation recomputed at
start-up. The two agree count for count (tests/stream/test_certified_blocks.py compares
them on random streams). One difference is kept on purpose: a record deleted by the
retention job between its arrival and its hop's block (only a record older than the
retention when it arrives can be) is counted in memory, where the file no longer has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from monitor.config import MonitorConfig
from monitor.core.tables import attribute_groups
from monitor.stream.window import RecordBatch


class BlockSource(Protocol):
    """The file's block read (:meth:`monitor.store.Store.block_records`)."""

    def block_records(self, model_id: str, after: int, upto: int) -> pd.DataFrame: ...


@dataclass
class Block:
    """One block's counts: per grid attribute, (group, label, decision) counts of its
    predictions (label 0) and of its outcomes; the scoring time of its first prediction
    and of the one at its end (else its latest; both None: no prediction)."""

    free: dict[str, np.ndarray]
    joined: dict[str, np.ndarray]
    first_ns: int | None = None
    end_ns: int | None = None


def cube(group: np.ndarray, label: np.ndarray, decision: np.ndarray, groups: int) -> np.ndarray:
    """Records per (group, label, decision): :func:`~monitor.core.certify.outcome_cube` of
    their count table, without the score bins.

    >>> cube(np.array([0, 1, 1]), np.array([1, 0, 0]), np.array([1, 1, 0]), 2).tolist()
    [[[0, 0], [0, 1]], [[1, 1], [0, 0]]]
    """
    flat = np.bincount(group * 4 + label * 2 + decision, minlength=groups * 4)
    out: np.ndarray = flat.reshape(groups, 2, 2)
    return out


def block_from_frame(frame: pd.DataFrame, upto: int, config: MonitorConfig) -> Block:
    """A block as the file holds it, from :meth:`~monitor.store.Store.block_records`."""
    groups = attribute_groups(frame, config)
    label = frame["label"].to_numpy(np.int64)
    decision = frame["decision"].to_numpy(np.int64)
    predicted = frame["predicted"].to_numpy(bool)
    joined = frame["joined"].to_numpy(bool)
    zeros = np.zeros(int(predicted.sum()), np.int64)  # the label-free metrics: label 0
    block = Block(
        {a.name: cube(groups[a.name][predicted], zeros, decision[predicted], len(a.codes))
         for a in config.grid_attributes},
        {a.name: cube(groups[a.name][joined], label[joined], decision[joined], len(a.codes))
         for a in config.grid_attributes},
    )  # fmt: skip
    times = frame["event_time_ns"].to_numpy(np.int64)[predicted]
    if len(times):  # none: every record of the block deleted by retention
        at = frame["model_pos"].to_numpy(np.int64)[predicted] == upto
        block.first_ns = int(times[0])
        block.end_ns = int(times[at][-1]) if at.any() else int(times.max())
    return block


def read_block(
    source: BlockSource, model_id: str, after: int, upto: int, config: MonitorConfig
) -> Block:
    """The block (``after``, ``upto``] of a model read from the file."""
    return block_from_frame(source.block_records(model_id, after, upto), upto, config)


@dataclass
class _Building:
    """A block being counted: from stream position ``start`` (exclusive) to ``end``."""

    start: int
    end: int
    block: Block
    #: predictions counted so far (positions start + 1 .. start + predictions)
    predictions: int = 0
    #: False once something of the block is known to be missing here (read it from the file)
    whole: bool = True
    last_ns: int | None = field(default=None)


class BlockBook:
    """One model's blocks not taken by its certified cells yet, counted in memory."""

    def __init__(self, config: MonitorConfig):
        self.hop = config.window.hop_records
        self.groups = {a.name: len(a.codes) for a in config.grid_attributes}
        self._blocks: dict[int, _Building] = {}

    def _end(self, position: int) -> int:
        """The end of the block holding a stream position (positions start at 1)."""
        return ((int(position) - 1) // self.hop + 1) * self.hop

    def _open(self, end: int, start: int) -> _Building:
        b = self._blocks.get(end)
        if b is None:
            empty = {a: np.zeros((g, 2, 2), np.int64) for a, g in self.groups.items()}
            joined = {a: np.zeros((g, 2, 2), np.int64) for a, g in self.groups.items()}
            b = self._blocks[end] = _Building(start, end, Block(empty, joined))
        return b

    def add_predictions(self, batch: RecordBatch, after: int) -> None:
        """New records at stream positions ``after`` + 1, ... (arrival order, within one
        block); those stored with their label are outcomes of the block too."""
        if not len(batch):
            return
        b = self._open(self._end(after + 1), after)
        if after != b.start + b.predictions or after + len(batch) > b.end:
            b.whole = False  # a gap (never expected): the file knows
        b.predictions += len(batch)
        times = batch.event_time
        if b.block.first_ns is None:
            b.block.first_ns = int(times[0])
        b.last_ns = int(times[-1])
        zeros = np.zeros(len(batch), np.int64)
        known = batch.label >= 0
        every = bool(known.all())
        for a, g in self.groups.items():
            group = batch.groups[a]
            b.block.free[a] += cube(group, zeros, batch.decision, g)
            if every:
                b.block.joined[a] += cube(group, batch.label, batch.decision, g)
            elif known.any():
                b.block.joined[a] += cube(
                    group[known], batch.label[known], batch.decision[known], g
                )

    def add_outcomes(
        self,
        label_pos: np.ndarray,
        found: np.ndarray,
        records: RecordBatch | None,
        arrivals: int,
    ) -> None:
        """Outcomes joined now, each counting from its ``label_pos``; ``found``: which of
        them joined a record of the window (``records``, in the same order, with their
        label); ``arrivals``: the model's stream position now."""
        if not len(label_pos):
            return
        ends = ((np.asarray(label_pos, np.int64) - 1) // self.hop + 1) * self.hop
        for end in np.unique(ends).tolist():
            # a block not begun yet starts here: its first prediction is the next one
            b = self._open(end, min(int(arrivals), end))
            mine = ends == end
            if not found[mine].all() or int(label_pos[mine].min()) <= b.start:
                b.whole = False  # a record not in memory, or a join before this process
            if records is None:
                continue
            got = mine[found]
            if not got.any():
                continue
            label, decision = records.label[got], records.decision[got]
            for a, g in self.groups.items():
                b.block.joined[a] += cube(records.groups[a][got], label, decision, g)

    def peek(self, after: int, upto: int) -> Block | None:
        """The block (``after``, ``upto``] if it is whole here, else None (read it)."""
        b = self._blocks.get(upto)
        if b is None or not b.whole or b.start != after or b.predictions != upto - after:
            return None
        b.block.end_ns = b.last_ns
        return b.block

    def take(self, after: int, upto: int) -> Block | None:
        """:meth:`peek`, and forget every block up to ``upto`` (the detectors took it)."""
        block = self.peek(after, upto)
        for end in [e for e in self._blocks if e <= upto]:
            del self._blocks[end]
        return block

    def clear(self) -> None:
        self._blocks.clear()

    def pending(self) -> Mapping[int, bool]:
        """Each block end held, and whether it is whole (for tests and debugging)."""
        return {e: b.whole for e, b in sorted(self._blocks.items())}
