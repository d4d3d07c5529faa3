"""Each owned model's audit cohort kept as count tables, updated from what changed.

The scheduled Axis 2 and Axis 3 used to read every model's whole cohort (the last
``cohort_days`` of event time, :func:`monitor.store.queries.window_records`) from
DuckDB on every run: about 3 us per record, most of a run. Both axes only need
count tables (:class:`~batch_axes.cohort_counts.CohortCounts`), so the book keeps
them in memory and brings them up to date at each run:

* records stored since the last run (sequence number above the book's high-water
  mark) whose event time is inside the new cohort enter;
* records already counted whose event time fell out of it (the latest event time
  moved on) leave; they are read back by event-time range, so a run reads
  O(changed records) and then sums O(hospitals x strata).

Why this gives the re-read cohort exactly: the cohort of ``window_records(days=)`` is
"a model's stored records with event time >= latest event time - days". The file
only grows (records are inserted, never updated) and the latest event time only
moves forward, so the cohort at the new mark is the old one plus the new records
inside the new bound minus the old records below it. The one exception is
retention, which deletes records: :meth:`CohortBook.retention` holds the book
while it runs and forgets every model whose cohort reached below the deletion
bound, to be rebuilt once at its next run. (The configuration requires the
discharge retention to cover the cohort, so this happens only when event times
trail the wall clock, e.g. a replay of old records.)

Predictions now, outcomes later: a prediction is stored without its label,
which an outcome sets later (the one update the file sees). The book counts a record
whose label is known in ``counts`` (label-based metrics); while any of the cohort's
predictions waits for its outcome it also keeps ``free``, every record at label 0 (the
label-free metrics, DI and SPD), and the sequence numbers of the waiting ones: at each
run those whose outcome has joined move into ``counts`` (a hash join on those numbers).
A cohort whose every outcome is in has no ``free`` and runs as before.

The reads of one update run in one read transaction: a consistent snapshot, so a
batch committed meanwhile is either wholly in or wholly out.

Where the state lives: in the service's memory, nowhere else. It is built once
per model at its first run after a start (restart included) and dropped when the
model is no longer owned (a Kafka rebalance moved its partition,
:meth:`monitor.stream.pipeline.Pipeline.owned_models`); a model that comes back
is built once again. Nothing is written to the file, so there is nothing to keep
consistent across versions.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb
import numpy as np

from batch_axes.cohort_counts import CohortCounts
from monitor.config import MonitorConfig
from monitor.core.locks import named_lock
from monitor.core.tables import grid_groups
from monitor.store import queries
from monitor.store.codec import CohortRelease


@dataclass(frozen=True)
class CohortView:
    """A model's cohort as one run sees it: a copy of its counts and its release point."""

    model_id: str
    counts: CohortCounts  # records whose outcome is known (label-based metrics)
    last_seq: int | None  # the cohort's last sequence number (its release point)
    entered: int  # records added by this update (all of them at a build)
    left: int  # records removed by this update
    built: bool  # this update built the counts from the file
    first_us: int | None = None  # earliest event time in the cohort, microseconds
    latest_us: int | None = None  # latest event time (the cohort's end)
    #: every record at label 0, while some prediction waits for its outcome (else None)
    free: CohortCounts | None = None
    joined: int = 0  # outcomes that joined a counted prediction in this update

    @property
    def every(self) -> CohortCounts:
        """The counts of every record of the cohort (labels merged while some wait)."""
        return self.counts if self.free is None else self.free

    @property
    def n(self) -> int:
        return self.every.n

    @property
    def span_days(self) -> float | None:
        """Days between the cohort's earliest and latest event time (None when empty)."""
        if self.first_us is None or self.latest_us is None or not self.n:
            return None
        return (self.latest_us - self.first_us) / 86_400e6

    def release_point(self) -> CohortRelease:
        """What :func:`monitor.stream.publication.cohort_release` records for a cohort:
        its last sequence number and group sizes per attribute."""
        sizes = self.every.group_sizes()
        return CohortRelease(self.last_seq, {a: tuple(n) for a, n in sizes.items()})


@dataclass
class _Cohort:
    counts: CohortCounts
    mark: int  # every record with seq <= mark has been considered
    latest_us: int | None  # latest event time among them, microseconds
    last_seq: int | None  # largest seq in the cohort
    first_us: int | None = None  # earliest event time in the cohort
    free: CohortCounts | None = None  # every record at label 0, while some wait
    #: sequence numbers of the counted predictions whose outcome has not come
    pending: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    joined: int = 0  # outcomes joined at the last update

    @property
    def every(self) -> CohortCounts:
        return self.counts if self.free is None else self.free

    def bound(self, days_us: int) -> int | None:
        return None if self.latest_us is None else self.latest_us - days_us


class CohortBook:
    """The owned models' cohorts as counts (see the module docstring); thread-safe."""

    def __init__(self, config: MonitorConfig):
        self.config = config
        #: (name, codes) of each configured attribute, as the cohort queries map them
        self.attributes = [(a.name, tuple(a.codes)) for a in config.attributes]
        self.days_us = round(float(config.service.axes.cohort_days) * 86_400e6)
        self._cohorts: dict[str, _Cohort] = {}
        self._lock = named_lock("cohort_book")

    # ---------------------------------------------------------------- life cycle
    def keep_only(self, models: Collection[str]) -> None:
        """Forget the models not in ``models`` (no longer owned: their memory is freed)."""
        keep = set(models)
        with self._lock:
            for m in [m for m in self._cohorts if m not in keep]:
                del self._cohorts[m]

    @contextmanager
    def retention(self, deleted_before_us: int) -> Iterator[None]:
        """Around a retention run that deletes records with event time before
        ``deleted_before_us``: no update runs meanwhile, and a model whose cohort
        reached below it is forgotten (rebuilt at its next run)."""
        with self._lock:
            try:
                yield
            finally:
                for m, st in list(self._cohorts.items()):
                    bound = st.bound(self.days_us)
                    if bound is None or bound < deleted_before_us:
                        del self._cohorts[m]

    def models(self) -> list[str]:
        with self._lock:
            return sorted(self._cohorts)

    def nbytes(self, model_id: str) -> int:
        with self._lock:
            st = self._cohorts.get(model_id)
            if st is None:
                return 0
            return st.counts.nbytes + (0 if st.free is None else st.free.nbytes) + st.pending.nbytes

    # ---------------------------------------------------------------- updates
    def update(self, cursor: duckdb.DuckDBPyConnection, model_id: str) -> CohortView:
        """Bring a model's cohort up to the file's current state and return a copy of it."""
        with self._lock:
            cursor.execute("BEGIN TRANSACTION")
            try:
                st = self._cohorts.get(model_id)
                built = st is None
                if st is None:
                    st = self._build(cursor, model_id)
                    entered, left = st.every.n, 0
                else:
                    entered, left = self._advance(cursor, model_id, st)
            finally:
                cursor.execute("COMMIT")
            self._cohorts[model_id] = st
            free = None if st.free is None or not st.pending.size else st.free.copy()
            return CohortView(
                model_id, st.counts.copy(), st.last_seq, entered, left, built,
                st.first_us, st.latest_us, free, st.joined,
            )  # fmt: skip

    def _build(self, c: duckdb.DuckDBPyConnection, model_id: str) -> _Cohort:
        mark, latest = queries.cohort_bounds(c, model_id)
        counts = CohortCounts(self.config.grid_attributes, self.config.axis1.score_bins)
        st = _Cohort(counts, mark, latest, None)
        if latest is not None:
            frame = queries.cohort_slice(
                c, self.attributes, model_id, upto_seq=mark, from_us=st.bound(self.days_us)
            )
            self._apply(st, frame, +1)
            if frame["seq"].size:
                st.last_seq = int(frame["seq"].max())
                st.first_us = int(frame["event_us"].min())
        return st

    def _advance(self, c: duckdb.DuckDBPyConnection, model_id: str, st: _Cohort) -> tuple[int, int]:
        st.joined = 0
        if st.pending.size:  # outcomes that joined counted predictions since the last run
            came = queries.cohort_joined(c, self.attributes, model_id, st.pending)
            if came["seq"].size:
                self._count(st.counts, came, +1)
                st.pending = np.setdiff1d(st.pending, came["seq"].astype(np.int64))
                st.joined = int(came["seq"].size)
        new = queries.cohort_slice(c, self.attributes, model_id, after_seq=st.mark)
        if not new["seq"].size:
            return 0, 0
        old_bound = st.bound(self.days_us)
        newest = int(new["event_us"].max())
        latest = newest if st.latest_us is None else max(st.latest_us, newest)
        bound = latest - self.days_us
        left = 0
        if old_bound is not None and bound > old_bound:
            gone = queries.cohort_slice(
                c, self.attributes, model_id, upto_seq=st.mark, from_us=old_bound,
                before_us=bound,
            )  # fmt: skip
            self._apply(st, gone, -1)
            left = int(gone["seq"].size)
            if left:  # the earliest record left, and maybe the last one: ask what remains
                st.last_seq, st.first_us = queries.cohort_extent(c, model_id, st.mark, bound)
        keep = new["event_us"] >= bound
        entering = {k: v[keep] for k, v in new.items()}
        self._apply(st, entering, +1)
        if entering["seq"].size:
            st.last_seq = int(entering["seq"].max())
            first = int(entering["event_us"].min())
            st.first_us = first if st.first_us is None else min(st.first_us, first)
        st.mark = int(new["seq"].max())
        st.latest_us = latest
        return int(entering["seq"].size), left

    def _apply(self, st: _Cohort, rows: dict[str, np.ndarray], sign: int) -> None:
        """Records entering (+1) or leaving (-1) the cohort: those with a known label in
        ``counts``; every one in ``free`` while some wait for their outcome (label -1),
        the waiting ones' sequence numbers in ``pending``. ``free`` is made, once, when the
        first waiting prediction enters: from ``counts``, whose records all had labels."""
        seq = rows["seq"].astype(np.int64)
        if not seq.size:
            return
        known = rows["label"].astype(np.int64) >= 0
        if st.free is None and not known.all():
            st.free = st.counts.merged_labels()
        if st.free is not None:
            self._count(st.free, {**rows, "label": np.zeros(seq.size, np.int64)}, sign)
        self._count(st.counts, {k: v[known] for k, v in rows.items()}, sign)
        waiting = seq[~known]
        if sign > 0:
            st.pending = np.union1d(st.pending, waiting)
        else:
            st.pending = np.setdiff1d(st.pending, waiting)

    def _count(self, counts: CohortCounts, rows: dict[str, np.ndarray], sign: int) -> None:
        """Add or remove records (columns of :func:`queries.cohort_slice`). The attributes
        are the configured list; a code outside it (index -1) is refused by the counts, as
        ``group_index`` refuses it on the re-read path."""
        if not rows["seq"].size:
            return
        stored = {a.name: rows[str(i)] for i, a in enumerate(self.config.attributes)}
        groups = grid_groups(stored, self.config)  # intersections derived, never stored
        args = (
            rows["hospital_id"].astype(object), groups, rows["label"].astype(np.int64),
            rows["decision"].astype(np.int64), rows["score"].astype(np.float64),
        )  # fmt: skip
        if sign > 0:
            counts.add(*args)
        else:
            counts.remove(*args)
