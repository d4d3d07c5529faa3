"""The hop evaluations' queue: a window taken at a hop point, computed, handed back in order.

A hop evaluation is decided in stream order but computed elsewhere: the ingest
thread takes the window's state at the hop point (:meth:`EvaluationQueue.snapshot`:
its position, seed, release decision and coverage, a :class:`Job`), and the Axis 1
bootstrap runs either here (:meth:`EvaluationQueue.compute`) or in the worker
process (:mod:`monitor.stream.eval_worker`, one call for a batch's hop points,
:meth:`EvaluationQueue.submit`). The pipeline applies the finished jobs
(trackers, tiers, events) strictly in the order they were taken
(:meth:`EvaluationQueue.collect`), so where the bootstrap ran never changes what
is written.

Locks: the queue has none of its own. Its owner, :class:`~monitor.stream.pipeline.Pipeline`,
calls it only while holding the ``pipeline`` lock (and, for :meth:`submit` and
:meth:`collect`, inside the store's transaction); the only lock taken further in
is the worker's ``eval_pool`` (monitor.core.locks: ``pipeline`` and ``store`` may
take it). Nothing here calls out to an observer.
"""

from __future__ import annotations

import pickle
import time
import zlib
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import MonitorConfig
from monitor.config.engine import engine_options
from monitor.core.cell_result import CellResult
from monitor.core.outcome_split import run_split
from monitor.core.results import EvaluationRecord, WindowPosition
from monitor.stream import eval_worker
from monitor.stream.certified import BlockSource
from monitor.stream.model_state import ModelState
from monitor.stream.publication import WindowCounts
from monitor.stream.window import ModelWindow, WindowCoverage


def evaluation_seed(seed: int, model_id: str, end_count: int) -> int:
    """The Axis 1 seed of a model's evaluation at a stream position (stable across restarts)."""
    ss = np.random.SeedSequence(seed, spawn_key=(zlib.crc32(model_id.encode()), int(end_count)))
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


@dataclass
class Job:
    """A hop evaluation taken at a stream position: the window's state, and its Axis 1."""

    model_id: str
    now: pd.Timestamp
    seed: int
    window: WindowPosition
    future: Future | None = None  # the worker's [(results, seconds)] of a batch's jobs
    index: int = 0  # this job's place in the future's list
    results: list[CellResult] | None = None  # computed in this thread
    seconds: float = 0.0
    #: the attributes whose cells this evaluation releases (decided when the window was
    #: taken, in stream order: monitor.stream.publication)
    release: frozenset[str] = frozenset()
    #: the model's release points after this evaluation's decision
    bases: dict | None = None
    #: predictions in the window, and those with an outcome (predictions now, outcomes later)
    predictions: int | None = None
    with_outcome: int | None = None
    #: the window's outcome coverage per group (monitor.stream.coverage_cells)
    coverage: WindowCoverage | None = None

    def computed(self) -> list[CellResult]:
        """The cell results; from the worker (waiting for it) when not computed here, which
        also fills :attr:`results` and :attr:`seconds`."""
        if self.results is None:
            assert self.future is not None
            self.results, self.seconds = self.future.result()[self.index]
        return self.results

    def cancel(self) -> None:
        """Not wanted any more: the worker need not compute it (if it has not started)."""
        if self.future is not None:
            self.future.cancel()


class EvaluationQueue:
    """The hop evaluations taken and not yet applied, in stream order, and where their
    Axis 1 runs (``use_worker``: the worker process, started with the queue)."""

    #: batches whose evaluations may still be in the worker before ingestion waits for them
    MAX_BACKLOG = 4

    def __init__(self, config: MonitorConfig, *, use_worker: bool):
        self.config = config
        self.use_worker = use_worker
        #: Axis 1 as configured, one model at a time (a thread pool costs more than it saves)
        self.engine = engine_options(config, threads=1)
        self._engine_bytes = pickle.dumps(self.engine)
        #: hop evaluations submitted to the worker, in stream order, not applied yet
        self.pending: list[Job] = []
        if use_worker:
            eval_worker.start()

    def snapshot(
        self, w: ModelWindow, ms: ModelState, now: pd.Timestamp, source: BlockSource | None = None
    ) -> Job:
        """A hop evaluation of window ``w`` (model state ``ms``) at its current stream
        position; a position not evaluated yet takes the model's release decision
        (``source``: the file's blocks, for the groups that enter the certified
        detectors: ModelCertified.may_enter; None: the window's groups only)."""
        seed = evaluation_seed(self.config.axis1.seed, w.model_id, w.arrivals)
        window = WindowPosition(w.kind, w.first_seq, w.last_seq, w.arrivals, seed)
        release: frozenset[str] = frozenset()
        bases = None
        if ms.evaluated is None or w.arrivals > ms.evaluated:  # not a position done already
            counts = WindowCounts.of(w, ms.publication.bases())
            certified = None
            if source is not None:
                certified = {
                    attr: ms.certified.may_enter(source, w.arrivals, attr, g.codes)
                    for attr, g in counts.groups.items()
                }
            release, bases = ms.publication.decide(counts, certified)
        return Job(
            w.model_id, now, seed, window, release=release, bases=bases, predictions=w.n,
            with_outcome=w.with_outcome, coverage=w.coverage(),
        )  # fmt: skip

    def compute(self, job: Job, w: ModelWindow) -> None:
        """Axis 1 of ``job`` in this thread, from window ``w`` as it is now."""
        t0 = time.perf_counter()
        job.results = run_split(*w.split_tables(), self.engine, job.seed)
        job.seconds = time.perf_counter() - t0

    def submit(self, jobs: list[tuple[Job, Any]]) -> None:
        """One worker call for a batch's hop evaluations (``(job, split tables)`` each,
        in stream order); they join the queue behind those already in it."""
        if not jobs:
            return
        for i, (job, _) in enumerate(jobs):
            job.index = i
        future = eval_worker.submit_many(
            self._engine_bytes, [(tables, job.seed) for job, tables in jobs]
        )
        for job, _ in jobs:
            job.future = future
            self.pending.append(job)

    def collect(
        self, apply: Callable[[Job], EvaluationRecord | None], wait_all: bool = False
    ) -> list[EvaluationRecord]:
        """Hand the finished evaluations to ``apply``, in stream order; returns what it
        gave back to store.

        Stops at the first one not finished, unless more than :attr:`MAX_BACKLOG`
        batches' worth are outstanding (then it waits for the oldest) or ``wait_all``.
        """
        items = []
        while self.pending:
            job = self.pending[0]
            if (
                not wait_all
                and job.future is not None
                and not job.future.done()
                and len({id(j.future) for j in self.pending}) <= self.MAX_BACKLOG
            ):
                break
            item = apply(job)
            if item is not None:
                items.append(item)
            self.pending.pop(0)
        return items

    def cancel_all(self) -> None:
        """Forget every pending evaluation (the in-memory state is being rebuilt)."""
        for job in self.pending:
            job.cancel()
        self.pending.clear()
