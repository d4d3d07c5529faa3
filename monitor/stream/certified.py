"""A model's certified verdicts in the stream (docs/method.md section 11).

Why here and not on the window: a certified verdict must take each record once, in
*blocks* of the records since the previous count hop (never an overlapping window), or
its false-page budget is void. The pipeline calls :meth:`ModelCertified.advance` at each
hop evaluation it applies (stream order; the recovered ones at start-up too) with the
hop's stream position; the block's counts come from memory, counted as the records and
outcomes arrived (:mod:`monitor.stream.certified_blocks`), or from the file by stream
position when memory does not hold the whole block (after a restart mid-block, a
recomputed hop, an outcome whose record left the window;
:meth:`monitor.store.Store.block_records`, the definition):

* the label-free metrics (DI, SPD) take the block's predictions (``model_pos`` in
  (previous position, position]);
* the label-based ones (EOPP, EOD, PP) take the outcomes that count from a position in
  that range (``label_pos``, the windows' own rule), with their labels: an outcome joined
  late counts in the block in which it arrived, never twice;
* the block's weight is its length in years of event time: the scoring time of the
  record at the position minus that of the previous block's last record (the first
  block: from the model's first record), as ``monitor.bench.detection.run_demo_pages``
  replays the demo.

The grid's state and the last position are written with the model's stream position
(``model_state.certified``), so a restart resumes the e-detectors where the file says
and a block is never counted twice (a hop already taken is a no-op).

A change becomes an event (kind ``certified_change``): from 'undetermined' a first
certification (a notice), pass <-> fail a page (alert VFRCertifiedVerdictChange).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from monitor.config import MonitorConfig
from monitor.core.certified_grid import CellReading, CertifiedGrid
from monitor.core.certify import cube_rate_counts
from monitor.core.events import CERTIFIED_CHANGE, CellEvent
from monitor.core.outcome_split import needs_label
from monitor.core.results import CertifiedVerdict
from monitor.publish.counts import rounded_count
from monitor.stream.certified_blocks import Block, BlockBook, BlockSource, read_block
from monitor.stream.window import RecordBatch

__all__ = ["YEAR_NS", "BlockSource", "ModelCertified", "change_direction", "is_page"]

#: one year of event time in ns (the e-detector's clock: false pages per model-year)
YEAR_NS = 365.25 * 86_400 * 1e9

CellKey = tuple[str, str]


def change_direction(old: str, new: str) -> str:
    """The event's direction: ``pass_to_fail`` / ``fail_to_pass`` (a page), or
    ``undetermined_to_pass`` / ``undetermined_to_fail`` (a first certification: a notice)."""
    return f"{old}_to_{new}"


def is_page(old: str, new: str) -> bool:
    """A certified change pages when it goes between pass and fail (module docstring)."""
    return {old, new} == {"pass", "fail"}


class ModelCertified:
    """One model's :class:`~monitor.core.certify.CertifiedGrid` fed block by block, its
    position in the stream, and each cell's latest change."""

    def __init__(self, model_id: str, config: MonitorConfig):
        self.model_id = model_id
        self.config = config
        self.grid = CertifiedGrid(
            config.metrics, {a.name: a.codes for a in config.grid_attributes},
            config.alerts.false_pages_per_year, config.axis1.min_group_support,
        )  # fmt: skip
        #: the stream position of the last block taken (0: none yet)
        self.position = 0
        #: the scoring time (ns) of the last block's last record: the next block's start
        self.end_ns: int | None = None
        #: per cell, its latest change (old, new) and the records behind it
        self.last: dict[CellKey, tuple[str, str, int]] = {}
        self._saved: str | None = None
        #: (position, replayed up to, decayed trials there) of :meth:`_trials_after`
        self._replay: tuple[int, int, dict[CellKey, np.ndarray]] | None = None
        #: the blocks after :attr:`position`, counted as their records arrive
        self.blocks = BlockBook(config)

    # ------------------------------------------------------------------ blocks
    def add_predictions(self, batch: RecordBatch, after: int) -> None:
        """New records at stream positions ``after`` + 1, ... (within one block)."""
        self.blocks.add_predictions(batch, after)

    def add_outcomes(
        self, label_pos: np.ndarray, found: np.ndarray, records: RecordBatch | None, arrivals: int
    ) -> None:
        """Outcomes the window joined now (:meth:`BlockBook.add_outcomes`)."""
        self.blocks.add_outcomes(label_pos, found, records, arrivals)

    def _block(self, source: BlockSource, after: int, upto: int, take: bool = False) -> Block:
        """The block (``after``, ``upto``]: counted in memory when whole there, else read
        from ``source`` (the file)."""
        got = self.blocks.take(after, upto) if take else self.blocks.peek(after, upto)
        return got if got is not None else read_block(
            source, self.model_id, after, upto, self.config
        )  # fmt: skip

    def advance(self, source: BlockSource, upto: int, evaluation: int) -> list[CellEvent]:
        """Take the block of stream positions (position, ``upto``] (:meth:`_block`);
        returns the certified changes as events of evaluation ``evaluation``. A position
        not beyond the last one taken is a no-op (a replayed or recovered hop)."""
        if upto <= self.position:
            return []
        return self.observe(self._block(source, self.position, upto, take=True), upto, evaluation)

    def observe(self, block: Block, upto: int, evaluation: int) -> list[CellEvent]:
        """One block (:meth:`advance`'s) into every certified cell."""
        end, start = self.end_ns, self.end_ns
        if block.first_ns is not None:  # none: every record of the block deleted by retention
            end = block.end_ns
            start = block.first_ns if start is None else start
        years = 0.0 if end is None or start is None else max(0.0, (end - start) / YEAR_NS)
        events = []
        changes = self.grid.observe_cubes(block.free, years, block.joined)
        for metric, attribute, old, new, records in changes:
            self.last[(metric, attribute)] = (old, new, records)
            events.append(
                CellEvent(
                    CERTIFIED_CHANGE, self.model_id, metric, attribute, old, new, True,
                    change_direction(old, new), evaluation,
                    axes={"records": rounded_count(records), "page": is_page(old, new)},
                )
            )  # fmt: skip
        self.position, self.end_ns = int(upto), end
        self._saved = None
        return events

    # ------------------------------------------------------------------ views
    def verdict(self, key: CellKey) -> CertifiedVerdict | None:
        """The cell's certified verdict now (None: the metric is not certifiable)."""
        cell = self.grid.cells.get(key)
        return None if cell is None else self._verdict(key, CellReading.of(cell))

    def _verdict(self, key: CellKey, reading: CellReading) -> CertifiedVerdict:
        """A cell's verdict as it goes out, from what the cell says (:class:`CellReading`)."""
        last = self.last.get(key)
        fail = ok = None
        if reading.evaluable:
            fail = None if reading.verdict == "fail" else round(reading.fail, 3)
            ok = None if reading.verdict == "pass" else round(reading.ok, 3)
        return CertifiedVerdict(
            reading.verdict, reading.records, reading.evaluable,
            None if last is None else (last[0], last[1]),
            None if last is None else last[2], fail, ok,
        )  # fmt: skip

    def may_enter(
        self, source: BlockSource, upto: int, attribute: str, codes: tuple[str, ...]
    ) -> np.ndarray:
        """Per group of ``attribute`` (in ``codes`` order): whether it enters a certified
        cell's detectors in the block that an evaluation at stream position ``upto``
        shows (the last block ending at a count hop at or before it).

        Why: the release rule leaves out a group under the small-cell rule in the window
        (it enters no window value), but the detectors weigh decayed block counts, which
        can hold more of a group than the window does (a window of a few hops, a group
        whose records stop): such a group's few new records would move the released
        evidence, so it must hold the release like any group that enters a value
        (docs/privacy.md, "Releases"). Exact and the same whatever the evaluations still
        pending when the release is decided: the groups that enter a block are those
        whose decayed trials reached the support after the block before it, replayed
        here (:meth:`_trials_after`: from the blocks counted in memory, else from the
        file) when the detectors have not taken that block yet.
        """
        hop = self.config.window.hop_records
        last = (int(upto) // hop) * hop  # the end of the block shown
        out = np.zeros(len(codes), dtype=bool)
        cells = {k: c for k, c in self.grid.cells.items() if k[1] == attribute}
        if not cells or last <= 0:
            return out
        trials = None if last <= self.position else self._trials_after(source, last - hop)
        for key, cell in cells.items():
            if trials is None:  # the block shown is taken: the groups it took
                entering = np.asarray(cell.entering, dtype=bool)
                if last < self.position:  # a start mid-hop (a file before v12): and next
                    entering = entering | np.all(cell.n >= cell.min_group_support, axis=0)
            else:
                entering = np.asarray(np.all(trials[key] >= cell.min_group_support, axis=0))
            at = {g: i for i, g in enumerate(cell.groups)}
            for j, code in enumerate(codes):
                i = at.get(code)
                out[j] |= i is not None and bool(entering[i])
        return out

    def _trials_after(self, source: BlockSource, end: int) -> dict[CellKey, np.ndarray]:
        """Each cell's decayed trials (rates x groups) after the block ending at stream
        position ``end`` (a count hop not before :attr:`position`): the state's, then the
        blocks not taken yet (:meth:`_block`) decayed as
        :meth:`~monitor.core.certify.CertifiedCell.update` does. Cached while the
        detectors stay where they are, so consecutive hops read each block once."""
        hop = self.config.window.hop_records
        cached = self._replay
        if cached is None or cached[0] != self.position or cached[1] > end:
            state = {k: np.array(c.n, dtype=np.float64) for k, c in self.grid.cells.items()}
            cached = (self.position, self.position, state)
        at, trials = cached[1], {k: v.copy() for k, v in cached[2].items()}
        while at < end:
            upto = min((at // hop + 1) * hop, end)
            block = self._block(source, at, upto)
            for (metric, attribute), cell in self.grid.cells.items():
                counts = (block.joined if needs_label(metric) else block.free).get(attribute)
                if counts is None:
                    continue
                ns = np.stack([np.asarray(cube_rate_counts(counts, r)[1], np.float64)
                               for r in cell.spec.rates])  # fmt: skip
                trials[(metric, attribute)] = cell.decay * trials[(metric, attribute)] + ns
            at = upto
        self._replay = (self.position, at, trials)
        return trials

    def verdicts(self) -> dict[CellKey, CertifiedVerdict]:
        """Every certified cell's verdict now (read from all of them in one pass)."""
        return {key: self._verdict(key, r) for key, r in self.grid.readings().items()}

    # ------------------------------------------------------------------ persistence
    def saved(self) -> str:
        """The JSON written with the model's stream position (cached between blocks)."""
        if self._saved is None:
            self._saved = orjson.dumps(
                {
                    "position": self.position, "end_ns": self.end_ns,
                    "last": {f"{m}|{a}": list(v) for (m, a), v in self.last.items()},
                    "cells": self.grid.state(),
                }
            ).decode()  # fmt: skip
        return self._saved

    def restore(self, saved: Mapping[str, Any]) -> None:
        """Load :meth:`saved` (not None; a file written before certified verdicts has
        none: the pipeline then starts the cells undetermined from the model's evaluated
        position, :meth:`start_at`)."""
        self.position = int(saved["position"])
        self.end_ns = None if saved.get("end_ns") is None else int(saved["end_ns"])
        self.last = {}
        for k, (old, new, records) in (saved.get("last") or {}).items():
            m, a = k.split("|", 1)
            if (m, a) in self.grid.cells:
                self.last[(m, a)] = (str(old), str(new), int(records))
        self.grid.restore(saved.get("cells") or {})
        self._saved = self._replay = None
        self.blocks.clear()

    def start_at(self, position: int) -> None:
        """Start from a stream position (a file written before certified verdicts)."""
        self.position = int(position)
        self._saved = self._replay = None
        self.blocks.clear()
