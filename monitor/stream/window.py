"""Rolling windows per model, kept as count tables.

A window holds the stratum count tables of its records (one per audited attribute,
intersections included: ``MonitorConfig.grid_attributes``) and,
to be able to evict them later, a compact copy of what each record contributed
(group per attribute, label, decision, score, event time): a few tens of bytes
per record, never identifiers or features.

* count windows keep the model's last ``size`` records in arrival order;
* time windows keep records whose event time is within ``days`` of the latest
  event time seen (an event-time clock, so a replay gives the same windows as
  the live run). A record already older than that horizon when it arrives is
  stored, but does not enter the window, and is counted in ``old_events``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from monitor.config import MonitorConfig
from monitor.core.counts import CountTable
from monitor.core.tables import attribute_groups, grid_groups, group_index


@dataclass(frozen=True)
class RecordBatch:
    """Records of one model as the window keeps them (arrival order)."""

    seq: np.ndarray  # int64 arrival sequence
    event_time: np.ndarray  # int64 ns since epoch (UTC)
    groups: dict[str, np.ndarray]  # attribute -> group index
    label: np.ndarray
    decision: np.ndarray
    score: np.ndarray

    def __len__(self) -> int:
        return int(self.seq.size)

    def take(self, index: np.ndarray | slice) -> RecordBatch:
        return RecordBatch(
            self.seq[index],
            self.event_time[index],
            {a: g[index] for a, g in self.groups.items()},
            self.label[index],
            self.decision[index],
            self.score[index],
        )

    @classmethod
    def from_table(
        cls,
        table: pa.Table,
        seq: np.ndarray,
        config: MonitorConfig,
        group_columns: Sequence[str],
    ) -> RecordBatch:
        """From stored rows as an Arrow table and their sequence numbers, column by column
        (no pandas frame of Python objects on the way): the same arrays as
        :meth:`from_frame` of the same rows. ``group_columns``: the column of each of
        ``config.attributes``, in order."""
        et = table["event_time"].cast(pa.timestamp("ns", "UTC")).cast(pa.int64())
        groups = {}
        for a, name in zip(config.attributes, group_columns, strict=True):
            enc = table[name].combine_chunks().dictionary_encode()
            lookup = group_index(enc.dictionary.to_numpy(zero_copy_only=False), a)
            groups[a.name] = lookup[enc.indices.to_numpy(zero_copy_only=False)]
        return cls(
            seq=np.asarray(seq, dtype=np.int64),
            event_time=np.asarray(et.to_numpy(), dtype=np.int64),
            groups=grid_groups(groups, config),  # intersections are derived, never stored
            label=table["label"].to_numpy().astype(np.int64),
            decision=table["decision"].to_numpy().astype(np.int64),
            score=np.asarray(table["score"].to_numpy(), dtype=np.float64),
        )

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, config: MonitorConfig) -> RecordBatch:
        """From stored or validated records (seq, event_time, score, label, decision, attrs)."""
        et = pd.to_datetime(frame["event_time"], utc=True)
        return cls(
            seq=frame["seq"].to_numpy(np.int64),
            event_time=et.dt.tz_convert(None).to_numpy(dtype="datetime64[ns]").view(np.int64),
            groups=attribute_groups(frame, config),
            label=frame["label"].to_numpy(np.int64),
            decision=frame["decision"].to_numpy(np.int64),
            score=frame["score"].to_numpy(np.float64),
        )


class ModelWindow:
    """The count tables of one model's rolling window, with symmetric add and evict."""

    def __init__(self, model_id: str, config: MonitorConfig):
        self.model_id = model_id
        self.config = config
        self.kind = config.window.kind
        self.size = config.window.size
        self.horizon_ns = int(config.window.days * 86_400 * 1e9)
        bins = config.axis1.score_bins
        self.tables = {a.name: CountTable(a.codes, bins) for a in config.grid_attributes}
        self._batches: deque[RecordBatch] = deque()
        self.n = 0  # records in the window
        self.arrivals = 0  # records of this model accepted so far (the stream position)
        self.old_events = 0
        self.latest_time_ns: int | None = None

    # ------------------------------------------------------------------ add / evict
    def _apply(self, batch: RecordBatch, sign: int) -> None:
        # label, decision and score bins are the same for every attribute's table
        bins = self.config.axis1.score_bins
        prepared = CountTable.prepare(batch.label, batch.decision, batch.score, bins)
        if prepared is not None:  # every attribute's table in one bincount per array
            groups = [batch.groups[attr] for attr in self.tables]
            CountTable.apply_prepared_many(list(self.tables.values()), groups, prepared, sign)
        else:
            for attr, table in self.tables.items():
                fn = table.add if sign > 0 else table.remove
                fn(batch.groups[attr], batch.label, batch.decision, batch.score)
        self.n += sign * len(batch)

    def add(self, batch: RecordBatch) -> int:
        """Add newly stored records (arrival order); returns how many entered the window."""
        if not len(batch):
            return 0
        self.arrivals += len(batch)
        if self.kind == "time":
            latest = int(batch.event_time.max())
            if self.latest_time_ns is None or latest > self.latest_time_ns:
                self.latest_time_ns = latest
            cutoff = self.latest_time_ns - self.horizon_ns
            fresh = batch.event_time >= cutoff
            self.old_events += int((~fresh).sum())
            batch = batch.take(fresh) if not fresh.all() else batch
            if len(batch):
                self._apply(batch, +1)
                self._batches.append(batch)
            self._evict_older_than(cutoff)
            return len(batch)
        self._apply(batch, +1)
        self._batches.append(batch)
        self._evict_beyond(self.size)
        return len(batch)

    def _evict_beyond(self, size: int) -> None:
        while self.n > size:
            first = self._batches[0]
            excess = self.n - size
            if excess >= len(first):
                self._batches.popleft()
                self._apply(first, -1)
            else:
                self._apply(first.take(slice(0, excess)), -1)
                self._batches[0] = first.take(slice(excess, None))

    def _evict_older_than(self, cutoff_ns: int) -> None:
        kept: deque[RecordBatch] = deque()
        for b in self._batches:
            old = b.event_time < cutoff_ns
            if old.any():
                self._apply(b.take(old), -1)
                if not old.all():
                    kept.append(b.take(~old))
            else:
                kept.append(b)
        self._batches = kept

    # ------------------------------------------------------------------ views
    @property
    def first_seq(self) -> int | None:
        return int(self._batches[0].seq[0]) if self._batches else None

    @property
    def last_seq(self) -> int | None:
        return int(self._batches[-1].seq[-1]) if self._batches else None

    def seqs(self) -> np.ndarray:
        """Sequence numbers of the records in the window (for audits and tests)."""
        if not self._batches:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([b.seq for b in self._batches])

    def records_in_order(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The window's sequence numbers (ascending: arrival order) and each attribute's
        group index per record, for the release rule (monitor.stream.publication)."""
        if not self._batches:
            return np.zeros(0, dtype=np.int64), {a: np.zeros(0, np.int64) for a in self.tables}
        seqs = np.concatenate([b.seq for b in self._batches])
        groups = {a: np.concatenate([b.groups[a] for b in self._batches]) for a in self.tables}
        return seqs, groups

    def table_map(self) -> dict[tuple[str, str], CountTable]:
        """(model_id, attribute) -> count table, as Axis 1 takes them (copies)."""
        return {(self.model_id, a): t.copy() for a, t in self.tables.items()}
