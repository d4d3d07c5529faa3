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

Windows are on predictions (predictions now, outcomes later). A record's label is -1 until its
outcome joins (:meth:`ModelWindow.join`): ``tables`` holds the predictions with an outcome (label x
group, for the label-based metrics), ``pending`` those without (at label 0); a join moves a
record from one to the other, an eviction removes it from the one it is in. The label-free
metrics read both (:meth:`ModelWindow.prediction_tables`).
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

#: label of a record whose outcome is not known (monitor.stream.join_rules.LABEL_UNKNOWN)
_UNKNOWN = -1
_NS_PER_DAY = 86_400 * 10**9


@dataclass(frozen=True)
class RecordBatch:
    """Records of one model as the window keeps them (arrival order)."""

    seq: np.ndarray  # int64 arrival sequence
    event_time: np.ndarray  # int64 ns since epoch (UTC)
    groups: dict[str, np.ndarray]  # attribute -> group index
    label: np.ndarray  # -1: outcome not known yet
    decision: np.ndarray
    score: np.ndarray
    #: outcome delay in ns (outcome time - scoring time, at least 0); -1 while unknown
    delay: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.delay is None:  # a joined record: known at scoring
            object.__setattr__(self, "delay", np.where(self.label >= 0, 0, _UNKNOWN))

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
            self.delay[index],  # type: ignore[index]  # never None after __post_init__
        )

    @classmethod
    def concat(cls, parts: Sequence[RecordBatch]) -> RecordBatch:
        """The records of ``parts``, one after the other."""
        if len(parts) == 1:
            return parts[0]
        return RecordBatch(
            np.concatenate([p.seq for p in parts]),
            np.concatenate([p.event_time for p in parts]),
            {a: np.concatenate([p.groups[a] for p in parts]) for a in parts[0].groups},
            np.concatenate([p.label for p in parts]),
            np.concatenate([p.decision for p in parts]),
            np.concatenate([p.score for p in parts]),
            np.concatenate([p.delay for p in parts if p.delay is not None]),
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
        """From stored or validated records (seq, event_time, score, label, decision, attrs;
        ``delay_ns`` when stored: NaN while the outcome is unknown)."""
        et = pd.to_datetime(frame["event_time"], utc=True)
        # a copy: joins write labels in place, and pandas hands out a read-only view of an
        # int64 column (copy-on-write)
        label = frame["label"].to_numpy(np.int64, copy=True)
        delay = None
        if "delay_ns" in frame.columns:
            d = frame["delay_ns"].to_numpy(np.float64)
            delay = np.where(np.isnan(d) | (label < 0), _UNKNOWN, np.maximum(np.nan_to_num(d), 0))
            delay = delay.astype(np.int64)
        return cls(
            seq=frame["seq"].to_numpy(np.int64),
            event_time=et.dt.tz_convert(None).to_numpy(dtype="datetime64[ns]").view(np.int64),
            groups=attribute_groups(frame, config),
            label=label,
            decision=frame["decision"].to_numpy(np.int64),
            score=frame["score"].to_numpy(np.float64),
            delay=delay,
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
        #: predictions in the window without an outcome yet (at label 0)
        self.pending = {a.name: CountTable(a.codes, bins) for a in config.grid_attributes}
        self.max_delay_ns = int(config.outcomes.max_outcome_delay_days * _NS_PER_DAY)
        self._batches: deque[RecordBatch] = deque()
        self.n = 0  # records in the window
        self.arrivals = 0  # records of this model accepted so far (the stream position)
        self.old_events = 0
        self.latest_time_ns: int | None = None

    # ------------------------------------------------------------------ add / evict
    def _apply(self, batch: RecordBatch, sign: int) -> None:
        known = batch.label >= 0
        if known.all():
            self._apply_to(self.tables, batch, sign)
        elif not known.any():
            self._apply_to(self.pending, batch, sign, pending=True)
        else:
            self._apply_to(self.tables, batch.take(known), sign)
            self._apply_to(self.pending, batch.take(~known), sign, pending=True)
        self.n += sign * len(batch)

    def _apply_to(
        self, tables: dict[str, CountTable], batch: RecordBatch, sign: int, pending: bool = False
    ) -> None:
        # label, decision and score bins are the same for every attribute's table
        label = np.zeros(len(batch), np.int64) if pending else batch.label
        bins = self.config.axis1.score_bins
        prepared = CountTable.prepare(label, batch.decision, batch.score, bins)
        if prepared is not None:  # every attribute's table in one bincount per array
            groups = [batch.groups[attr] for attr in tables]
            CountTable.apply_prepared_many(list(tables.values()), groups, prepared, sign)
        else:
            for attr, table in tables.items():
                fn = table.add if sign > 0 else table.remove
                fn(batch.groups[attr], label, batch.decision, batch.score)

    def join(
        self, seqs: np.ndarray, labels: np.ndarray, delays: np.ndarray
    ) -> tuple[np.ndarray, RecordBatch | None]:
        """Outcomes of predictions (by sequence number, ascending): each one still in the
        window moves from ``pending`` to ``tables`` with its label. Returns which of them
        joined (a mask over ``seqs``) and the records they joined, with their labels now,
        in the order of ``seqs`` (None: none; the certified blocks count them:
        monitor.stream.certified_blocks).

        A record no longer in the window (evicted, or too old for it) is left alone: its
        label is stored and a rebuilt window at a later position has it where it belongs.
        """
        found = np.zeros(len(seqs), dtype=bool)
        if not len(seqs) or not self._batches:
            return found, None
        firsts = np.array([int(b.seq[0]) for b in self._batches], dtype=np.int64)
        where = np.searchsorted(firsts, seqs, side="right") - 1
        parts = []
        for k in np.unique(where[where >= 0]):
            b = self._batches[int(k)]
            mine = np.flatnonzero(where == k)  # the outcomes that may be in this batch
            idx = np.searchsorted(b.seq, seqs[mine])
            inside = idx < len(b)
            mine, idx = mine[inside], idx[inside]
            hit = b.seq[idx] == seqs[mine]
            mine, idx = mine[hit], idx[hit]
            fresh = b.label[idx] < 0
            mine, idx = mine[fresh], idx[fresh]
            if not len(idx):
                continue
            self._apply_to(self.pending, b.take(idx), -1, pending=True)
            b.label[idx] = labels[mine]
            b.delay[idx] = np.maximum(delays[mine], 0)  # type: ignore[index]  # never None after __post_init__
            joined = b.take(idx)
            self._apply_to(self.tables, joined, +1)
            found[mine] = True
            parts.append(joined)
        return found, RecordBatch.concat(parts) if parts else None

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
        """(model_id, attribute) -> count table of the predictions with an outcome, as
        Axis 1's label-based cells take them (copies)."""
        return {(self.model_id, a): t.copy() for a, t in self.tables.items()}

    def prediction_tables(self) -> dict[str, CountTable]:
        """Every prediction of the window per attribute, label collapsed to 0: what the
        label-free metrics and the group sizes read (new tables)."""
        return {a: t.merged_labels() + self.pending[a] for a, t in self.tables.items()}

    def split_tables(
        self,
    ) -> tuple[dict[tuple[str, str], CountTable], dict[tuple[str, str], CountTable]]:
        """(label-free tables, label-based tables) keyed as Axis 1 takes them
        (:func:`monitor.core.outcome_split.evaluate_split`)."""
        free = {(self.model_id, a): t for a, t in self.prediction_tables().items()}
        return free, self.table_map()

    @property
    def with_outcome(self) -> int:
        """Predictions in the window whose outcome has arrived."""
        return next(iter(self.tables.values())).n if self.tables else 0

    def coverage(self) -> WindowCoverage:
        """Per attribute and group: predictions, those with an outcome, those expired
        (no outcome within max_outcome_delay of the window's latest scoring time), and a
        histogram of outcome delays in whole days (last bin: that many days or more)."""
        return window_coverage(self)


@dataclass(frozen=True)
class GroupCoverage:
    """One group's outcome figures in a model's window (predictions now, outcomes later)."""

    predictions: int
    with_outcome: int
    expired: int
    #: delay_days[d] = outcomes that came d whole days after scoring (last bin: or more)
    delay_days: tuple[int, ...]

    @property
    def awaiting(self) -> int:
        """Predictions still waiting for an outcome that may come."""
        return self.predictions - self.with_outcome - self.expired

    def median_delay_days(self) -> float | None:
        """The median delay in whole days (lower median of the histogram); None: none."""
        total = sum(self.delay_days)
        if not total:
            return None
        half = (total + 1) // 2
        run = 0
        for d, c in enumerate(self.delay_days):
            run += c
            if run >= half:
                return float(d)
        return float(len(self.delay_days) - 1)


@dataclass(frozen=True)
class WindowCoverage:
    """A model window's outcome coverage: attribute -> group code -> figures."""

    predictions: int
    with_outcome: int
    expired: int
    groups: dict[str, dict[str, GroupCoverage]]


def window_coverage(w: ModelWindow) -> WindowCoverage:
    """:meth:`ModelWindow.coverage`, from the records the window holds."""
    bins = int(np.ceil(w.config.outcomes.max_outcome_delay_days)) + 1
    if not w._batches:
        empty = {a: {g: GroupCoverage(0, 0, 0, (0,) * bins) for g in t.groups}
                 for a, t in w.tables.items()}  # fmt: skip
        return WindowCoverage(0, 0, 0, empty)
    label = np.concatenate([b.label for b in w._batches])
    delay = np.concatenate([b.delay for b in w._batches])
    times = np.concatenate([b.event_time for b in w._batches])
    known = label >= 0
    expired = ~known & (int(times.max()) - times > w.max_delay_ns)
    days = np.minimum(np.maximum(delay, 0) // _NS_PER_DAY, bins - 1)
    out: dict[str, dict[str, GroupCoverage]] = {}
    for a, t in w.tables.items():
        g = np.concatenate([b.groups[a] for b in w._batches])
        G = len(t.groups)
        n = np.bincount(g, minlength=G)
        k = np.bincount(g[known], minlength=G)
        e = np.bincount(g[expired], minlength=G)
        hist = np.zeros((G, bins), np.int64)
        np.add.at(hist, (g[known], days[known]), 1)
        out[a] = {
            code: GroupCoverage(int(n[i]), int(k[i]), int(e[i]), tuple(int(x) for x in hist[i]))
            for i, code in enumerate(t.groups)
        }
    return WindowCoverage(len(label), int(known.sum()), int(expired.sum()), out)
