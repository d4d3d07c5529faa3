"""A model's certified verdicts in the stream (docs/method.md section 11).

Why here and not on the window: a certified verdict must take each record once, in
*blocks* of the records since the previous count hop (never an overlapping window), or
its false-page budget is void. The pipeline calls :meth:`ModelCertified.advance` at each
hop evaluation it applies (stream order; the recovered ones at start-up too) with the
hop's stream position; the block is read from the store by stream position
(:meth:`monitor.store.Store.block_records`):

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
from typing import Any, Protocol

import numpy as np
import orjson
import pandas as pd

from monitor.config import MonitorConfig
from monitor.core.certify import CertifiedGrid, block_counts
from monitor.core.counts import CountTable
from monitor.core.events import CERTIFIED_CHANGE, CellEvent
from monitor.core.outcome_split import needs_label
from monitor.core.results import CertifiedVerdict
from monitor.core.tables import attribute_groups
from monitor.publish.counts import rounded_count

#: one year of event time in ns (the e-detector's clock: false pages per model-year)
YEAR_NS = 365.25 * 86_400 * 1e9

CellKey = tuple[str, str]


class BlockSource(Protocol):
    """What :meth:`ModelCertified.advance` reads: the store's block read."""

    def block_records(self, model_id: str, after: int, upto: int) -> pd.DataFrame: ...


def change_direction(old: str, new: str) -> str:
    """The event's direction: ``pass_to_fail`` / ``fail_to_pass`` (a page), or
    ``undetermined_to_pass`` / ``undetermined_to_fail`` (a first certification: a notice)."""
    return f"{old}_to_{new}"


def is_page(old: str, new: str) -> bool:
    """A certified change pages when it goes between pass and fail (module docstring)."""
    return {old, new} == {"pass", "fail"}


def block_tables(
    frame: pd.DataFrame, config: MonitorConfig
) -> tuple[dict[str, CountTable], dict[str, CountTable]]:
    """(label-free tables, label-based tables) of a block read by
    :meth:`~monitor.store.Store.block_records`: per grid attribute (intersections
    derived), the block's predictions at label 0 and its joined outcomes with their label."""
    bins = config.axis1.score_bins
    groups = attribute_groups(frame, config)
    label = frame["label"].to_numpy(np.int64)
    decision = frame["decision"].to_numpy(np.int64)
    score = frame["score"].to_numpy(np.float64)
    out: tuple[dict[str, CountTable], dict[str, CountTable]] = ({}, {})
    for i, column in enumerate(("predicted", "joined")):
        rows = frame[column].to_numpy(bool)
        # the label-free metrics read decisions only: their records at label 0
        y = np.zeros(int(rows.sum()), np.int64) if i == 0 else label[rows]
        for a in config.grid_attributes:
            out[i][a.name] = CountTable.from_records(
                a.codes, groups[a.name][rows], y, decision[rows], score[rows], bins
            )
    return out


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

    # ------------------------------------------------------------------ blocks
    def advance(self, source: BlockSource, upto: int, evaluation: int) -> list[CellEvent]:
        """Take the block of stream positions (position, ``upto``] from ``source``;
        returns the certified changes as events of evaluation ``evaluation``. A position
        not beyond the last one taken is a no-op (a replayed or recovered hop)."""
        if upto <= self.position:
            return []
        frame = source.block_records(self.model_id, self.position, upto)
        return self.observe(frame, upto, evaluation)

    def observe(self, frame: pd.DataFrame, upto: int, evaluation: int) -> list[CellEvent]:
        """One block (:meth:`advance`'s read) into every certified cell."""
        free, joined = block_tables(frame, self.config)
        predicted = frame["predicted"].to_numpy(bool)
        times = frame["event_time_ns"].to_numpy(np.int64)[predicted]
        end, start = self.end_ns, self.end_ns
        if len(times):  # none: every record of the block deleted by retention
            at = frame["model_pos"].to_numpy(np.int64)[predicted] == upto
            end = int(times[at][-1]) if at.any() else int(times.max())
            start = int(times[0]) if start is None else start
        years = 0.0 if end is None or start is None else max(0.0, (end - start) / YEAR_NS)
        events = []
        for metric, attribute, old, new, records in self.grid.observe(free, years, joined):
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
        if cell is None:
            return None
        last = self.last.get(key)
        evaluable = bool(cell.evaluable)
        fail = ok = None
        if evaluable:
            ev = cell.evidence()
            fail = None if cell.verdict == "fail" else round(ev["fail"], 3)
            ok = None if cell.verdict == "pass" else round(ev["pass"], 3)
        return CertifiedVerdict(
            str(cell.verdict), int(np.asarray(cell.records)), evaluable,
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
        here from the file (:meth:`_trials_after`) when the detectors have not taken
        that block yet.
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
        blocks not taken yet read from ``source`` and decayed as
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
            free, joined = block_tables(
                source.block_records(self.model_id, at, upto), self.config
            )
            for (metric, attribute), cell in self.grid.cells.items():
                table = (joined if needs_label(metric) else free).get(attribute)
                if table is None:
                    continue
                counts = block_counts(table, cell.spec)
                ns = np.stack([np.asarray(counts[r][1], np.float64) for r in cell.spec.rates])
                trials[(metric, attribute)] = cell.decay * trials[(metric, attribute)] + ns
            at = upto
        self._replay = (self.position, at, trials)
        return trials

    def verdicts(self) -> dict[CellKey, CertifiedVerdict]:
        out = {}
        for key in self.grid.cells:
            v = self.verdict(key)
            if v is not None:
                out[key] = v
        return out

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

    def start_at(self, position: int) -> None:
        """Start from a stream position (a file written before certified verdicts)."""
        self.position = int(position)
        self._saved = self._replay = None
