"""The streaming data path: payloads -> validation -> DuckDB -> windows -> Axis 1 -> tiers/events.

:class:`Pipeline` is the sink every source feeds (Kafka or embedded). One call of
:meth:`Pipeline.ingest_batch` is one DuckDB transaction holding the batch's new
records, its dead letters, every evaluation its records triggered (with the
cells' tracker states and events) and the models' stream positions. The source
commits its offsets only after the call returns, so a crash at any point
replays the batch, and the replay is deduplicated: at-least-once delivery with
an exactly-once effect.

Evaluation points are deterministic: a model is evaluated when its accepted
record count reaches a multiple of ``hop_records`` (a batch is split at those
boundaries), with a seed derived from (seed, model, record count). So a run that
was killed and restarted produces the same window results as one that was not.

The hop evaluations taken and not yet applied, and where their Axis 1 runs (here or in
the worker process), are :class:`~monitor.stream.evaluation_queue.EvaluationQueue`'s;
the pipeline calls it only under its lock and applies what it hands back in stream order.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result
from consumers.base import Origin
from monitor.config import MonitorConfig
from monitor.core.locks import named_lock
from monitor.core.results import CellEvaluation, EvaluationRecord
from monitor.store import DeadLetter, Store, queries
from monitor.stream.apply_evaluation import apply_evaluation
from monitor.stream.axis_cache import AxisCache
from monitor.stream.batch_report import BatchReport
from monitor.stream.evaluation_queue import EvaluationQueue, Job
from monitor.stream.intake import Intake
from monitor.stream.join_store import Joins
from monitor.stream.join_windows import JoinCursor, join_outcomes
from monitor.stream.model_state import ModelState, ModelView
from monitor.stream.ownership import Partition, PartitionOwnership
from monitor.stream.restore import missing_hop_points, rebuilt_window, restore_models
from monitor.stream.stats import PipelineStats
from monitor.stream.window import ModelWindow, RecordBatch

if TYPE_CHECKING:  # river's detectors: imported by the service that makes one
    from monitor.core.drift import DriftBook

__all__ = ["AxisCache", "BatchReport", "Pipeline", "PipelineStats"]

log = logging.getLogger(__name__)


class Pipeline:
    """The sink: decode, validate, store, window, evaluate; one transaction per batch."""

    def __init__(
        self,
        config: MonitorConfig,
        store: Store,
        *,
        on_batch: Callable[[BatchReport], None] | None = None,
        drift: DriftBook | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.config = config
        self.store = store
        self.on_batch = on_batch
        self.drift = drift
        self.clock = clock
        #: each model held in memory: its window, trackers, latest cells, counters
        self._models: dict[str, ModelState] = {}
        self.axes = AxisCache()
        #: on_batch failures after a committed batch (the batch itself is not redelivered)
        self.observer_failures = 0
        #: reports made under the lock (batches, flushes, ticks, evaluations recovered at
        #: start-up), handed to ``on_batch`` once the lock is released (see _locked)
        self._outbox: deque[BatchReport] = deque()
        #: reports of evaluations recovered at start-up, queued with the next batch's
        self._unreported: list[BatchReport] = []
        #: one observer call at a time, in the order the reports were made
        self._observer_lock = named_lock("observer")
        #: this thread's depth of holds of ``lock`` (deliveries wait for the outermost)
        self._depth = threading.local()
        #: True while the in-memory state is not a faithful copy of the store (see _reload)
        self._stale = False
        self.lock = named_lock("pipeline", reentrant=True)
        self.stats = PipelineStats()
        #: decode, validate, admit (the bulk path, else per message)
        self.intake = Intake(config, store, self.stats)
        #: each model's source partition, and the models dropped as their partition was revoked
        self._ownership = PartitionOwnership()
        #: the hop evaluations taken and not applied yet (starts the worker if configured)
        self.queue = EvaluationQueue(config, use_worker=config.service.evaluation_worker)
        self.restore()

    # ------------------------------------------------------------------ restart
    def restore(self, models: Collection[str] | None = None) -> None:
        """Rebuild the models' states and axis caches from the DuckDB file (of ``models``
        only, when given: a model whose partition came back to this instance; else of
        every model but those dropped because their partition was revoked;
        monitor.stream.restore)."""
        dropped = self._ownership.forgotten

        def wanted(model_id: str) -> bool:
            return model_id in models if models is not None else model_id not in dropped

        self._ownership.load(self.store.read(queries.model_partitions), models)
        #: each model's event-time clock (latest scoring time): holds of early outcomes
        self._clocks = self.store.read(queries.model_clocks)
        restored = restore_models(self.store, self.config, wanted)
        self._models.update(restored)
        for model_id, cells in self.store.read(queries.latest_axis_results, "axis2").items():
            if wanted(model_id):
                self.axes.set_axis2(model_id, cells)
        for model_id, result in self.store.read(queries.latest_axis_results, "axis3").items():
            if wanted(model_id):
                self.axes.set_axis3(model_id, result)
        self._recover_missing_evaluations(restored)
        last = self.store.read(queries.last_evaluation_times)
        for model_id, ms in restored.items():
            ms.resume(last.get(model_id, 0.0))

    def _recover_missing_evaluations(self, restored: dict[str, ModelState]) -> None:
        """Hop points whose records were committed but whose evaluation was not written
        (the process stopped while the worker computed it): recompute them from the
        stored records, in stream order, before anything new is ingested."""
        points = missing_hop_points(restored, self.config.window.hop_records)
        if not points:
            return
        log.info("recomputing %d hop evaluations not written before the last stop", len(points))
        jobs = [self._job_at(model_id, end) for model_id, end in points]
        now = pd.Timestamp(self.clock(), unit="s", tz="UTC")
        report = BatchReport()
        with self.store.transaction():
            items = [it for job in jobs if (it := self._apply(job, report)) is not None]
            self._write(items, sorted({j.model_id for j in jobs}), now)
        # Reported with the next batch, tick or flush: this runs inside the constructor,
        # before the owner (the service) holds a reference to the pipeline.
        self._unreported.append(report)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the pipeline's lock; on leaving this thread's outermost hold, hand the
        reports made meanwhile to the observer, outside the lock.

        The observer (the service's metrics) takes the exporter's lock, and a scrape holds
        that while reading this pipeline's state: an observer called under this lock froze
        the service for good when a partition revocation met a scrape (docs/architecture.md,
        "Threads and locks").
        """
        depth = getattr(self._depth, "n", 0)
        with self.lock:
            self._depth.n = depth + 1
            try:
                yield
            finally:
                self._depth.n = depth
        if depth == 0:
            self._deliver()

    def _report(self, report: BatchReport) -> None:
        """Queue committed work for the observer: delivered now when this thread holds no
        lock of the pipeline's, else when it releases its outermost hold."""
        self._outbox.extend(self._unreported)
        self._unreported.clear()
        self._outbox.append(report)
        if getattr(self._depth, "n", 0) == 0:
            self._deliver()

    def _deliver(self) -> None:
        """Hand the queued reports to the observer (metrics), one at a time, in order.

        The batch is committed: a failing observer must not make the source redeliver it,
        so a failure is logged by type (never values) and counted.
        """
        while self._outbox:
            with self._observer_lock:
                try:
                    report = self._outbox.popleft()
                except IndexError:
                    return
                if self.on_batch is None:
                    continue
                try:
                    self.on_batch(report)
                except Exception as exc:
                    self.observer_failures += 1
                    log.error("after-batch observer failed: %s", type(exc).__name__)

    def _job_at(self, model_id: str, end: int) -> Job:
        """The evaluation of a model's window as it was at stream position ``end``."""
        w = rebuilt_window(self.store, self.config, model_id, end, end)
        # the rebuilt window holds the records the live one held at ``end``: the release
        # rule decides as it did then, from the release points restored from the file
        job = self.queue.snapshot(
            w, self._models[model_id], pd.Timestamp(self.clock(), unit="s", tz="UTC"),
            self.store,
        )  # fmt: skip
        self.queue.compute(job, w)
        return job

    # ------------------------------------------------------------------ ingest
    @property
    def columnar(self) -> bool:
        """False: every batch takes the per-message path (the bulk path's oracle)."""
        return self.intake.columnar

    @columnar.setter
    def columnar(self, on: bool) -> None:
        self.intake.columnar = on

    def ingest_batch(self, payloads: Sequence[bytes | None], origins: Sequence[Origin]) -> None:
        """The Sink call: when it returns, the batch and its effects are durable."""
        report = BatchReport(received=len(payloads))
        stats = self.stats
        with self._locked():
            self._ensure_loaded()
            now = pd.Timestamp(self.clock(), unit="s", tz="UTC")
            batch = self.intake.check(payloads, origins, now, self._models.keys())
            self._note_partitions(batch.rows, batch.positions, origins)
            try:
                commit = contextlib.ExitStack()
                with self.store.transaction():
                    with stats.stage("store"):
                        self.store.write_source_offsets(origins)
                        self.store.write_model_partitions(self._ownership.take_changes())
                        outcome = self.store.ingest_table(batch.rows, batch.dead, now)
                        report.accepted, report.duplicates = outcome.inserted, outcome.duplicates
                        # what was dead-lettered now: a redelivered letter is not counted again
                        report.rejected = dict(outcome.rejected)
                        if outcome.conflicts is not None and outcome.conflicts.any():
                            conflicting = []
                            for i in batch.positions[outcome.conflicts]:
                                o = origins[i]
                                conflicting.append(DeadLetter(
                                    "conflicting_duplicate", payloads[i], o.topic, o.partition,
                                    o.offset))  # fmt: skip
                            for reason, k in self.store.write_dead_letters(
                                conflicting, now
                            ).items():
                                report.rejected[reason] = report.rejected.get(reason, 0) + k
                    with stats.stage("window"):
                        # new rows in batch order: their sequence numbers ascend
                        mask = outcome.new_mask
                        rows = batch.rows if mask.all() else batch.rows.filter(pa.array(mask))
                        new = RecordBatch.from_table(
                            rows, outcome.seq[mask], self.config, self.store.group_columns
                        )
                    with stats.stage("store"):
                        joined = join_outcomes(
                            self.store, self.config, batch, rows, new, mask, payloads, origins,
                            self._clocks, now,
                        )  # fmt: skip
                        for reason, k in joined.rejected.items():
                            report.rejected[reason] = report.rejected.get(reason, 0) + k
                        report.outcomes = joined.cases
                    # the evaluations submitted by earlier batches first (stream order)
                    with stats.stage("evaluate"):
                        items = self._collect(report)
                    self._advance_windows(new, rows["model_id"], now, report, items, joined.joins)
                    commit.enter_context(stats.stage("commit"))
                commit.close()
            except BaseException:
                # Nothing of the batch was committed: rebuild the in-memory state
                # (windows, trackers) from the store rather than copy it every batch.
                self._reload()
                raise
            stats.records += len(payloads)
            stats.batches += 1
        self._report(report)

    def forget_partitions(self, partitions: Collection[Partition]) -> list[str]:
        """Drop the models last seen on ``partitions`` (revoked from this instance) from
        memory, after writing their evaluations still in the worker; returns them.

        Producers key by model id, so a model lives in one partition, and the group gives
        it to one member at a time: the new owner rebuilds it from the topic, and this
        instance must stop exporting and evaluating it. Its rows stay in the DuckDB file;
        if the partition comes back, the model is restored from there (see
        :meth:`_restore_returning`).
        """
        with self._locked():
            gone = sorted(m for m in self._ownership.models_on(partitions) if m in self._models)
            if not gone:
                return []
            self.flush()
            for model_id in gone:
                self._drop(model_id)
            self._ownership.revoke(gone)
        log.info("models of revoked partitions dropped from memory: %d", len(gone))
        return gone

    def _note_partitions(
        self, rows: pa.Table, positions: np.ndarray, origins: Sequence[Origin]
    ) -> None:
        """Each model's partition (that of its last record in the batch), and the restore
        of models that come back after a revocation, before the batch is stored."""
        if not len(rows):
            return
        enc = rows.column("model_id").combine_chunks().dictionary_encode()
        names = enc.dictionary.to_pylist()
        last = np.full(len(names), -1, dtype=np.int64)
        np.maximum.at(last, enc.indices.to_numpy(zero_copy_only=False), positions)
        for name, i in zip(names, last, strict=True):
            o = origins[int(i)]
            self._ownership.note(str(name), (o.topic, o.partition))
        if self._ownership.forgotten:
            self._restore_returning({str(n) for n in names})

    def keep_partitions(self, owned: Collection[Partition]) -> list[str]:
        """The group's assignment of this member (all of it): drop the models whose
        partition is elsewhere now (a member restarted on a file that holds models the
        group has since given to another member); returns them."""
        with self._locked():
            stray = self._ownership.partitions_outside(owned)
        return self.forget_partitions(stray) if stray else []

    def owned_models(self) -> list[str]:
        """The models this instance holds in memory (all of its file's, unless revoked)."""
        with self.lock:
            return sorted(self._models)

    def _drop(self, model_id: str) -> None:
        self._models.pop(model_id, None)
        self.axes.forget(model_id)

    def _restore_returning(self, models: Collection[str]) -> None:
        """Models dropped by :meth:`forget_partitions` whose records arrive again: restore
        them from the file before the batch touches their windows."""
        back = self._ownership.returning(models)
        if back:
            self.restore(back)

    # ------------------------------------------------------------------ reads (the service's)
    # Each takes the lock and returns copies or frozen values: the service never holds
    # the lock nor sees the mutable state. They report nothing, so they take the plain lock
    # (delivering others' reports is for the calls that make them: see _locked).
    def set_axis_result(self, model_id: str, result: tuple[Axis2Cell, ...] | Axis3Result) -> None:
        """A scheduled axis' new result for a model, read by the next evaluations' tiers."""
        with self.lock:
            if isinstance(result, Axis3Result):
                self.axes.set_axis3(model_id, result)
            else:
                self.axes.set_axis2(model_id, result)

    def latest_cells(self) -> list[CellEvaluation]:
        """The latest evaluation of every cell, in (model, metric, attribute) order."""
        with self.lock:
            cells = [c for ms in self._models.values() for c in ms.latest.values()]
        return sorted(cells, key=lambda c: c.key)

    def released_cells(self) -> list[CellEvaluation]:
        """What the service shows of every cell: its last released evaluation
        (monitor.stream.publication), in (model, metric, attribute) order."""
        with self.lock:
            cells = [c for ms in self._models.values() for c in ms.publication.released_cells()]
        return sorted(cells, key=lambda c: c.key)

    def has_cell(self, model_id: str, metric: str, attribute: str) -> bool:
        """Whether this instance holds an evaluated cell (model, metric, attribute)."""
        with self.lock:
            ms = self._models.get(model_id)
            return ms is not None and (metric, attribute) in ms.latest

    def model_views(self) -> list[ModelView]:
        """Each model held in memory: window size, stream position, groups; by model id."""
        with self.lock:
            return [self._models[m].view() for m in sorted(self._models)]

    def model_view(self, model_id: str) -> ModelView | None:
        """One model's view; None when it is not held here (unknown, or revoked)."""
        with self.lock:
            ms = self._models.get(model_id)
            return None if ms is None else ms.view()

    def evaluation_total(self) -> int:
        """Numbered evaluations of the models held here, summed (grows with each hop)."""
        with self.lock:
            return sum(ms.evaluations for ms in self._models.values())

    def source_offsets(self) -> dict[tuple[str, int], int]:
        """Per (topic, partition), the offset after the last message this store holds (the
        :class:`~consumers.base.HistorySink` call a Kafka source rebuilds from)."""
        with self.lock:
            return self.store.read(queries.source_offsets)

    def _ensure_loaded(self) -> None:
        """Finish a reload that failed part-way (e.g. out of memory while restoring), so no
        batch is ever applied to half-rebuilt windows; raises if it fails again."""
        if self._stale:
            self._reload()

    def _reload(self) -> None:
        self._stale = True
        self.queue.cancel_all()
        self._models.clear()
        self._ownership.reset()
        self.restore()
        self._stale = False

    def _collect(self, report: BatchReport, wait_all: bool = False) -> list[EvaluationRecord]:
        """Apply the worker's finished evaluations, in stream order (EvaluationQueue.collect);
        returns the rows to store."""
        return self.queue.collect(lambda job: self._apply(job, report), wait_all)

    def _advance_windows(
        self,
        new: RecordBatch,
        models: pa.Array | pa.ChunkedArray,
        now: pd.Timestamp,
        report: BatchReport,
        pending: list[EvaluationRecord],
        joins: dict[str, Joins] | None = None,
    ) -> None:
        """Add the batch's new records (arrival order; ``models``: each one's model id) to
        their models' windows, splitting at hop points, with the outcomes joined where
        they count (``joins``)."""
        with self.stats.stage("window"):
            submitted, touched = self._add_to_windows(
                new, models, now, report, pending, joins or {}
            )
        with self.stats.stage("state"):
            self._write(pending, sorted(touched), now)
        self.queue.submit(submitted)  # one worker call for the batch's hop points

    def _add_to_windows(
        self,
        new: RecordBatch,
        models: pa.Array | pa.ChunkedArray,
        now: pd.Timestamp,
        report: BatchReport,
        pending: list[EvaluationRecord],
        joins: dict[str, Joins],
    ) -> tuple[list[tuple[Job, Any]], set[str]]:
        """The window updates and hop points of :meth:`_advance_windows`; returns the hop
        evaluations for the worker and the models touched.

        An outcome counts from its ``label_pos`` (monitor.stream.join_rules.label_position):
        before the evaluation at a hop point E every join with label_pos <= E is applied,
        the rest after the model's last new record of the batch."""
        hop = self.config.window.hop_records
        submitted: list[tuple[Job, Any]] = []
        touched = {item.model_id for item in pending}
        # one stable sort splits the batch by model, keeping arrival order within each
        enc = pa.chunked_array([models]) if isinstance(models, pa.Array) else models
        enc = enc.combine_chunks().dictionary_encode()
        names = enc.dictionary.to_pylist()
        todo = {m: JoinCursor(j.arrays()) for m, j in joins.items()}
        codes = enc.indices.to_numpy(zero_copy_only=False)
        order = np.argsort(codes, kind="stable")
        ends = np.cumsum(np.bincount(codes, minlength=len(names)))
        for k in sorted(range(len(names)), key=lambda j: str(names[j])):
            model_id = str(names[k])
            ms = self._models.get(model_id)
            if ms is None:
                ms = self._models[model_id] = ModelState(ModelWindow(model_id, self.config))
            w = ms.window
            start = ends[k - 1] if k else 0
            batch = new.take(order[start : ends[k]])
            known = batch.label >= 0  # model health reads records with their label
            report.new_records[model_id] = (
                (batch.label, batch.score, batch.decision) if known.all()
                else (batch.label[known], batch.score[known], batch.decision[known])
            )  # fmt: skip
            cursor = todo.pop(model_id, None)
            for _ in ms.add_to_hops(batch, hop):
                if cursor is not None:
                    ms.apply_joins(cursor, w.arrivals)
                if self.queue.use_worker:
                    job = self.queue.snapshot(w, ms, now, self.store)
                    self._evaluated_now(ms)
                    submitted.append((job, w.split_tables()))
                else:
                    item = self._evaluate(model_id, now, report)
                    if item is not None:
                        pending.append(item)
            if cursor is not None:
                ms.apply_joins(cursor, None)
            touched.add(model_id)
        for model_id, cursor in todo.items():  # outcomes only: no hop point moves
            if model_id not in self._models:  # not held here (its partition revoked)
                continue
            self._models[model_id].apply_joins(cursor, None)
            touched.add(model_id)
        return submitted, touched

    def _write(self, pending: list[EvaluationRecord], models: list[str], now: Any) -> None:
        """The evaluations and the touched models' states (ModelState.saved_row), inside the
        caller's transaction."""
        self.store.write_evaluations(pending)
        self.store.write_model_states([self._models[m].saved_row(now) for m in models])

    def flush(self) -> int:
        """Write the evaluations still being computed by the worker; returns how many."""
        with self._locked():
            self._ensure_loaded()
            if not self.queue.pending:
                if self._unreported:
                    self._report(BatchReport())
                return 0
            report = BatchReport()
            now = pd.Timestamp(self.clock(), unit="s", tz="UTC")
            try:
                with self.store.transaction():
                    items = self._collect(report, wait_all=True)
                    self._write(items, sorted({it.model_id for it in items}), now)
            except BaseException:
                self._reload()
                raise
        self._report(report)
        return len(items)

    def close(self) -> None:
        """Graceful stop: write what the worker still computes."""
        self.flush()

    def tick(self) -> int:
        """Wall-clock hops: evaluate models with new records whose last evaluation is old.

        These are interim evaluations (:attr:`EvaluationRecord.interim`): where they fall
        depends on timing, so they update the cells' latest result but not the evaluation
        numbers, the window history or the debounced verdicts and events, which therefore
        come out the same in a run that was restarted and in one that was not.
        """
        hop_s = self.config.window.hop_seconds
        if hop_s <= 0:
            # a quiet stream must not leave the worker's last evaluations unwritten
            self.flush()
            return 0
        done = 0
        report = BatchReport()
        with self._locked():
            self._ensure_loaded()
            wall = self.clock()
            due = [
                m
                for m, ms in self._models.items()
                if ms.since_eval > 0 and wall - ms.last_eval_wall >= hop_s
            ]
            if not due and not self.queue.pending:
                return 0
            # (also with nothing due: the worker's hop evaluations of a stream that went
            # quiet would otherwise wait for the next record to be written)
            now = pd.Timestamp(wall, unit="s", tz="UTC")
            try:
                with self.store.transaction():
                    # the worker's hop evaluations come first: stream order
                    pending = self._collect(report, wait_all=True)
                    models = {it.model_id for it in pending} | set(due)
                    for m in due:
                        item = self._evaluate(m, now, report, interim=True)
                        if item is not None:
                            pending.append(item)
                    self._write(pending, sorted(models), now)
                    done = len(due)
            except BaseException:
                self._reload()
                raise
        self._report(report)
        return done

    # ------------------------------------------------------------------ evaluation
    def _evaluated_now(self, ms: ModelState) -> None:
        ms.mark_evaluated(self.clock())

    def _evaluate(
        self, model_id: str, now: pd.Timestamp, report: BatchReport, interim: bool = False
    ) -> EvaluationRecord | None:
        """Axis 1, tiers and events of a model's window now, in this thread."""
        ms = self._models[model_id]
        w = ms.window
        if ms.evaluated is not None and w.arrivals <= ms.evaluated:
            self._evaluated_now(ms)
            return None  # this stream position is evaluated already
        job = self.queue.snapshot(w, ms, now, self.store)
        self._evaluated_now(ms)
        self.queue.compute(job, w)
        return self._apply(job, report, interim)

    def _apply(
        self, job: Job, report: BatchReport, interim: bool = False
    ) -> EvaluationRecord | None:
        """A computed evaluation applied to its model (monitor.stream.apply_evaluation) and
        put in the report; returns what to store (None: its position is written already)."""
        model_id = job.model_id
        applied = apply_evaluation(
            job, self._models[model_id], self.config, self.store,
            axes=self.axes, drift=self.drift, interim=interim,
        )  # fmt: skip
        if applied is None:
            return None
        report.drift.extend(applied.drift)
        report.evaluations.append((model_id, job.seconds))
        report.cells.extend(applied.record.cells)
        report.events.extend(applied.record.events)
        return applied.record
