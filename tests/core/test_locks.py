"""The written lock order and its checker (monitor.core.locks), on real threads and locks.

tests/service/test_lock_order.py runs the service under the checker; here the checker
itself: what it records (and does not), per thread, for re-entrant and try locks, where it
writes, and that the written order is acyclic and names every lock the code makes.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.core import locks
from monitor.core.locks import MAY_TAKE, CheckedLock, Violation, allowed, named_lock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shared_book(tmp_path, monkeypatch) -> Iterator[Path]:
    """The process-wide book, for tests that record into it on purpose: yields the file
    violations are appended to (this test's own, not the suite's) and removes what the
    test recorded afterwards, so the suite's per-test check (tests/conftest.py) does not
    count these deliberate ones."""
    path = tmp_path / "violations.jsonl"
    monkeypatch.setenv(locks.ENV, str(path))
    before = len(locks.violations())
    yield path
    with locks._violations_lock:  # the checker's own book: drop what this test put there
        del locks._violations[before:]


def test_the_written_order_is_acyclic_and_transitive():
    for a, below in MAY_TAKE.items():
        assert a not in below, f"{a} may take itself through others"
        for b in below:
            assert a not in MAY_TAKE[b], f"{a} and {b} may each wait for the other"
            assert MAY_TAKE[b] <= below, f"{a} -> {b}: what {b} may take is missing"
    # the chains the module's docstring writes down
    assert {"pipeline", "store", "eval_pool"} <= MAY_TAKE["observer"]
    assert MAY_TAKE["fleet_view"] == {"store", "eval_pool"}
    assert MAY_TAKE["exporter"] == MAY_TAKE["source"] == frozenset()


def test_a_cycle_in_the_order_is_refused_with_its_path():
    with pytest.raises(ValueError, match="cycle: a -> b -> c -> a"):
        locks._closure({"a": ("b",), "b": ("c",), "c": ("a",)})


def test_every_lock_the_code_makes_is_in_the_order():
    made = set()
    for pkg in ("monitor", "consumers", "batch_axes"):
        for path in (ROOT / pkg).rglob("*.py"):
            made |= set(re.findall(r'named_lock\(\s*"(\w+)"', path.read_text()))
    assert {"store", "pipeline", "exporter", "source", "job"} <= made
    assert made <= set(MAY_TAKE), f"not in the written order: {made - set(MAY_TAKE)}"


def test_allowed():
    assert allowed((), "pipeline")
    assert allowed(("pipeline",), "pipeline")  # a re-entrant lock taken again
    assert allowed(("observer", "pipeline"), "store")
    assert not allowed(("observer", "pipeline"), "exporter")  # pipeline may not take it
    assert not allowed(("store",), "pipeline")


def test_in_order_nothing_is_recorded_and_out_of_order_is():
    book: list[Violation] = []
    observer = CheckedLock("observer", book=book)
    pipeline = CheckedLock("pipeline", book=book)
    store = CheckedLock("store", book=book)
    exporter = CheckedLock("exporter", book=book)
    with observer, pipeline, store:
        pass
    with observer, exporter:
        pass
    assert book == []

    with pipeline, exporter:  # the freeze of a rebalance meeting a scrape
        pass
    [v] = book
    assert (v.taking, v.holding, v.thread) == ("exporter", ("pipeline",), "MainThread")
    assert "test_in_order_nothing_is_recorded_and_out_of_order_is" in v.stack
    assert "took 'exporter' while holding ['pipeline']" in v.message()
    assert "monitor.core.locks" in v.message()
    assert not pipeline.locked() and not exporter.locked()


def test_a_try_lock_is_not_checked_and_a_failed_one_holds_nothing():
    book: list[Violation] = []
    store, pipeline = CheckedLock("store", book=book), CheckedLock("pipeline", book=book)
    with store:
        assert pipeline.acquire(blocking=False)  # never waits: cannot close a cycle
        pipeline.release()
    assert book == []
    other = threading.Thread(target=store.acquire)
    other.start()
    other.join()  # another thread holds store now
    assert not store.acquire(blocking=False)
    with pipeline:  # store is not held by this thread: in order
        pass
    assert book == []
    assert store.acquire(timeout=0.05) is False  # timed out (pipeline not held: in order)
    assert book == []


def test_holds_are_per_thread():
    book: list[Violation] = []
    store, pipeline = CheckedLock("store", book=book), CheckedLock("pipeline", book=book)
    done = threading.Event()

    def other() -> None:
        with pipeline:  # this thread holds nothing: in order
            done.set()

    with store:
        t = threading.Thread(target=other, name="other")
        t.start()
        t.join(5)
    assert done.is_set() and book == []


def test_a_reentrant_lock_is_released_innermost_first():
    book: list[Violation] = []
    pipeline = CheckedLock("pipeline", reentrant=True, book=book)
    store = CheckedLock("store", reentrant=True, book=book)
    # taken again under store: recorded, although this thread holds it already (the check
    # reads the order only, not what the thread holds)
    with pipeline, store, pipeline:
        pass
    assert [(v.taking, v.holding) for v in book] == [("pipeline", ("pipeline", "store"))]
    book.clear()
    with store:  # after everything was released nothing is still held
        pass
    with pipeline:
        with pipeline:
            pass
        with store:  # one pipeline hold left: still in order
            pass
    assert book == []
    assert locks._held() == []


def test_named_lock(monkeypatch):
    with pytest.raises(ValueError, match="'nope' is not in the written lock order"):
        named_lock("nope")
    monkeypatch.setattr(locks, "_checking", False)
    assert not locks.checking()
    assert type(named_lock("store")) is type(threading.Lock())
    assert type(named_lock("store", reentrant=True)) is type(threading.RLock())
    locks.enable_checking(True)
    lock = named_lock("pipeline", reentrant=True)
    assert isinstance(lock, CheckedLock) and lock.name == "pipeline"
    with lock, lock:  # re-entrant
        assert lock.locked() is False  # an RLock has no locked(): reported as False
    with named_lock("store") as got:
        assert got is True


def test_the_shared_book_is_kept_and_appended_to_the_named_file(shared_book):
    path = shared_book
    store, pipeline = CheckedLock("store"), CheckedLock("pipeline")
    t = threading.Thread(target=lambda: [store.acquire(), pipeline.acquire()], name="late")
    t.start()
    t.join(5)
    assert [(v.thread, v.taking, v.holding) for v in locks.violations()[-1:]] == [
        ("late", "pipeline", ("store",))
    ]
    [line] = path.read_text().splitlines()
    assert json.loads(line) | {"stack": ""} == {
        "thread": "late", "taking": "pipeline", "holding": ["store"], "stack": "",
    }  # fmt: skip


def test_the_shared_book_writes_no_file_when_the_switch_is_a_flag(shared_book, monkeypatch):
    path = shared_book
    monkeypatch.setenv(locks.ENV, "1")
    monkeypatch.chdir(path.parent)
    store, exporter = CheckedLock("store"), CheckedLock("exporter")
    with exporter, store:
        pass
    assert locks.violations()[-1].taking == "store"
    assert list(path.parent.iterdir()) == []
