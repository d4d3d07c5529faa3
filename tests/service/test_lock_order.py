"""The freeze of a rebalance meeting a scrape, in-process and deterministic.

The service froze for good when a partition was revoked while evaluations were pending and
``/metrics`` was being scraped: the revocation flushed the pipeline under its lock and
reported to the exporter (exporter lock), while the scrape held the exporter's lock and
waited for the pipeline's. Here the real service (a DuckDB file, the evaluation worker, the
exporter) is revoked and restored several times while another thread renders ``/metrics``
in a loop; the lock-order checker (monitor.core.locks) records every out-of-order
acquisition, so the test fails on the old code whether or not the threads happened to
interleave into the deadlock itself.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback

import pytest

from consumers.base import Origin
from monitor.config import config_from_mapping
from monitor.core import locks
from monitor.service.app import MonitorService
from tests.support.streams import interleaved_records, model_partition

CFG = config_from_mapping(
    {
        "window": {"size": 600, "hop_records": 150, "hop_seconds": 0},
        "axis1": {"K": 60},
        "service": {
            "intake": {"unknown_models": "admit", "event_time_bounds": "none"},
            "evaluation_worker": True,
        },
    }
)  # fmt: skip


@pytest.fixture
def checked_locks():
    """Locks made during the test are checked (the suite turns the checker on in
    tests/conftest.py; also here, so this test means the same run alone); the test reads
    what they record."""
    was = locks.checking()
    locks.enable_checking(True)
    before = len(locks.violations())
    try:
        yield lambda: locks.violations()[before:]
    finally:
        locks.enable_checking(was)


def _payloads(n: int, models: int = 3, seed: int = 5) -> list[bytes]:
    return [json.dumps(r).encode() for r in interleaved_records(n // models, models, seed)]


def _stacks() -> str:
    return "\n".join(
        f"--- {t.name}\n" + "".join(traceback.format_stack(sys._current_frames()[t.ident]))
        for t in threading.enumerate()
        if t.ident in sys._current_frames()
    )


def test_a_revocation_with_evaluations_pending_during_scrapes_neither_freezes_nor_inverts(
    tmp_path, checked_locks
):
    service = MonitorService(CFG, db_path=str(tmp_path / "m.duckdb"), start_scheduler=False)
    pipe = service.pipeline
    payloads = _payloads(3000)
    scrapes: list[float] = []
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            body = service.exporter.render()
            scrapes.append(time.monotonic() - t0)
            assert b"vfr_" in body

    scraper = threading.Thread(target=scrape, name="scraper", daemon=True)
    scraper.start()
    try:
        offset, rounds, pending_at_revoke = 0, 0, 0
        for start in range(0, len(payloads), 600):
            chunk = payloads[start : start + 600]
            for i in range(0, len(chunk), 97):
                part = chunk[i : i + 97]
                pipe.ingest_batch(
                    part, [Origin("t", model_partition(p), offset + k) for k, p in enumerate(part)]
                )
                offset += len(part)
            pending_at_revoke += len(pipe.queue.pending)
            # the revocation, on a thread of its own as kafka-python's IO thread ran it
            revoker = threading.Thread(
                target=pipe.forget_partitions, args=([("t", rounds % 3)],), name="revoker",
                daemon=True,
            )
            revoker.start()
            revoker.join(30)
            assert not revoker.is_alive(), "revocation froze:\n" + _stacks()
            rounds += 1
        n_before = len(scrapes)
        deadline = time.monotonic() + 10
        while len(scrapes) == n_before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(scrapes) > n_before, "scrapes stopped answering:\n" + _stacks()
    finally:
        stop.set()
        scraper.join(10)
        stuck = [t.name for t in threading.enumerate() if t.name in ("revoker", "scraper")]
        if not stuck:  # a frozen pipeline would hold the close for ever: fail, not hang
            service.close()
    assert not stuck, f"threads still stuck: {stuck}\n" + _stacks()
    assert rounds == 5 and pending_at_revoke > 0, "no revocation met pending evaluations"
    assert len(scrapes) > rounds
    found = checked_locks()
    assert not found, "\n".join(v.message() + "\n" + v.stack for v in found)


def test_the_checker_catches_the_old_inversion():
    """The scrape of old: the exporter's lock held while the pipeline's is taken."""
    book: list[locks.Violation] = []
    exporter = locks.CheckedLock("exporter", book=book)
    pipeline = locks.CheckedLock("pipeline", book=book)
    with exporter, pipeline:
        pass
    with pipeline, exporter:  # and the revocation's report under the pipeline's lock
        pass
    assert [(v.holding, v.taking) for v in book] == [
        (("exporter",), "pipeline"), (("pipeline",), "exporter"),
    ]  # fmt: skip


def test_the_written_order_has_no_cycle():
    with pytest.raises(ValueError, match="cycle"):
        locks._closure({"a": ("b",), "b": ("a",)})
    for name, below in locks.MAY_TAKE.items():
        assert name not in below
