"""A worker process for the hop evaluations' Axis 1 bootstrap, beside the ingest thread.

The bootstrap is a pure function of a window's count tables, the configuration
and the evaluation seed (:func:`monitor.axes_runner.run_axis1`), so it can run
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
import pickle
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from monitor.axes_runner import run_axis1
from monitor.axis1 import CellResult
from monitor.config import MonitorConfig

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()
#: in the worker: unpickled configurations by their pickled bytes
_configs: dict[bytes, MonitorConfig] = {}


def _warm() -> None:
    """Nothing: submitted once so that the worker's imports happen before the first hop."""


def _axis1(config_bytes: bytes, tables: Any, seed: int) -> tuple[list[CellResult], float]:
    cfg = _configs.get(config_bytes)
    if cfg is None:
        cfg = _configs[config_bytes] = pickle.loads(config_bytes)
    t0 = time.perf_counter()
    results = run_axis1(tables, cfg, seed, threads=1)
    return results, time.perf_counter() - t0


def _get_pool() -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or getattr(_pool, "_broken", False):
            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            _pool = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn")
            )
            _pool.submit(_warm)
        return _pool


def start() -> None:
    """Start the worker process now (its imports take a moment) rather than at the first hop."""
    _get_pool()


def submit(config_bytes: bytes, tables: Any, seed: int) -> Future:
    """Axis 1 of one window's tables; the future gives (cell results, seconds)."""
    return _get_pool().submit(_axis1, config_bytes, tables, seed)


@atexit.register
def shutdown() -> None:
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.shutdown(wait=True, cancel_futures=True)
            _pool = None
