"""A worker process for the hop evaluations' Axis 1 bootstrap, beside the ingest thread.

The bootstrap is a pure function of a window's count tables, the engine options
(:func:`monitor.core.engine_options.engine_options` of the configuration) and the
evaluation seed (:func:`monitor.core.axis1.run_axis1`), so it can run
anywhere: the worker receives copies of the tables (a few KB) and returns the
cell results, bit for bit what the ingest thread would have computed. Why a
process and not a thread: the bootstrap is mostly small numpy operations that
hold the GIL, and the ingest thread (Kafka decoding, validation, DuckDB) is
CPU-bound too; a process uses the second core.

The process is started with ``spawn`` (the service has Kafka and DuckDB threads,
which ``fork`` would copy mid-flight) and shared by every pipeline of the
interpreter; a broken pool is replaced on the next submit.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import pickle
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

# Only the Axis 1 engine (numpy) and its options: not batch_axes.runner, whose
# imports (pandas, scikit-learn, the slow axes) would triple the worker's memory.
from monitor.core.axis1 import compile_kernels
from monitor.core.cell_result import CellResult
from monitor.core.engine_options import EngineOptions
from monitor.core.locks import named_lock
from monitor.core.outcome_split import run_split

_pool: ProcessPoolExecutor | None = None
_pool_lock = named_lock("eval_pool")
#: in the worker: unpickled engine options by their pickled bytes
_options: dict[bytes, EngineOptions] = {}


def _watch_parent(parent: int) -> None:
    """In the worker: exit when the service process is gone (even by kill -9, which runs no
    clean-up), rather than linger as an orphan holding its memory."""

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="vfr-parent-watch", daemon=True).start()


def _warm() -> None:
    """Submitted once so that the worker's imports and its compiled Axis 1 kernels (loaded
    from numba's disk cache, or compiled if there is none) are ready before the first hop."""
    compile_kernels()


def _axis1_many(
    options_bytes: bytes, jobs: list[tuple[Any, int]]
) -> list[tuple[list[CellResult], float]]:
    """Several windows' Axis 1 (``(tables, seed)`` each), stacked in as few engine calls
    as the models allow: the per-call overhead of the small numpy operations is shared.
    A model evaluated twice goes to a later round (its table keys would collide)."""
    opts = _options.get(options_bytes)
    if opts is None:
        opts = _options[options_bytes] = pickle.loads(options_bytes)
    out: list[tuple[list[CellResult], float] | None] = [None] * len(jobs)
    todo = list(range(len(jobs)))
    while todo:
        taken: dict[str, int] = {}
        later = []
        for i in todo:
            model = next(iter(jobs[i][0][1]))[0]
            if model in taken:
                later.append(i)
            else:
                taken[model] = i
        # each job's tables: (label-free, label-based), monitor.core.outcome_split
        free = {key: t for i in taken.values() for key, t in jobs[i][0][0].items()}
        joined = {key: t for i in taken.values() for key, t in jobs[i][0][1].items()}
        seeds = {model: jobs[i][1] for model, i in taken.items()}
        t0 = time.perf_counter()
        results = run_split(free, joined, opts, seed=0, seeds=seeds)
        seconds = (time.perf_counter() - t0) / len(taken)
        by_model: dict[str, list[CellResult]] = {m: [] for m in taken}
        for r in results:
            by_model[r.model_id].append(r)
        for model, i in taken.items():
            out[i] = (by_model[model], seconds)
        todo = later
    return out  # type: ignore[return-value]  # every slot filled by the loop


def submit_many(options_bytes: bytes, jobs: list[tuple[Any, int]]) -> Future:
    """Axis 1 of several windows' tables (``options_bytes``: pickled
    :class:`~monitor.core.engine_options.EngineOptions`); the future gives
    [(cell results, seconds)]."""
    return _get_pool().submit(_axis1_many, options_bytes, jobs)


def _get_pool() -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or getattr(_pool, "_broken", False):
            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            _pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_watch_parent,
                initargs=(os.getpid(),),
            )
            _pool.submit(_warm)
        return _pool


def cpu_seconds() -> float:
    """The worker process's CPU seconds so far (0.0 when it is not running), for the
    ingest benchmark's CPU budget: its Axis 1 work runs outside the service's process."""
    with _pool_lock:
        pool = _pool
    if pool is None:
        return 0.0
    return float(pool.submit(time.process_time).result(timeout=60))


def start() -> None:
    """Start the worker process now (its imports take a moment) rather than at the first hop."""
    _get_pool()


@atexit.register
def shutdown() -> None:
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.shutdown(wait=True, cancel_futures=True)
            _pool = None
