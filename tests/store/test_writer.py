"""The store's one DuckDB connection is used by one thread at a time."""

from __future__ import annotations

import threading
import time

import pandas as pd

from monitor.config import config_from_mapping
from monitor.store import Store, queries

CFG = config_from_mapping({"service": {"intake": {"unknown_models": "admit"}}})


def test_reads_beside_a_job_that_writes_under_the_store_lock_wait_instead_of_failing(tmp_path):
    """DuckDB refuses a second call on a busy connection ("connection is busy with another
    call") rather than waiting. The retention job writes under the store lock while the
    pipeline reads (source offsets on a partition assignment, model states on a reload):
    before the reads took the store lock too, this failed within milliseconds, and it
    stopped a restarted service in a fresh-clone run (ResourceInUseException)."""
    store = Store(tmp_path / "s.duckdb", CFG)
    stop = threading.Event()
    errors: list[str] = []
    writes = 0

    def retention() -> None:
        nonlocal writes
        while not stop.is_set():
            try:
                store.apply_retention(pd.Timestamp.now(tz="UTC"), 30, 30)
                writes += 1
            except Exception as exc:  # the failure this test is about
                errors.append(f"retention: {type(exc).__name__}: {exc}")
                return

    job = threading.Thread(target=retention, name="retention")
    job.start()
    reads = 0
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not errors:
            store.read(queries.source_offsets)
            store.read(queries.model_states)
            store.read(queries.counts)
            store.read(queries.held_count)
            reads += 1
    except Exception as exc:
        errors.append(f"read: {type(exc).__name__}: {exc}")
    finally:
        stop.set()
        job.join(10)
        store.close()
    assert not errors, errors
    assert reads > 10 and writes > 10, (reads, writes)  # both really ran side by side
