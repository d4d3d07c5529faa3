"""The one lock order of a monitor process, and a checker that enforces it in tests.

Every lock a monitor process shares between threads is made here, by name
(:func:`named_lock`), and :data:`MAY_TAKE` writes down, for each, the locks a thread
holding it may take (directly or further in). It is a directed acyclic graph, so no two
threads can wait for each other through these locks:

* ``observer`` (one report of committed work at a time, :mod:`monitor.stream.pipeline`)
  -> ``pipeline`` (the observer reads a model's view), ``exporter``, ``scheduler_state``;
* ``job`` (a scheduled axis job's no-overlap lock, :mod:`monitor.service.scheduler`)
  -> ``cohort_book``, ``pipeline``, ``store``, ``scheduler_state``;
* ``cohort_book`` (the audit cohorts' count tables) -> ``store``;
* ``pipeline`` (windows, trackers, pending evaluations; held for a whole ingest
  transaction) -> ``store``, ``eval_pool``;
* ``store`` (the DuckDB file's single writer) -> ``eval_pool`` (the evaluation worker's
  handle: a batch's evaluations are submitted inside its transaction);
* ``eval_pool``, ``exporter`` (the Prometheus registry), ``source`` (kafka-python consumer
  calls), ``scheduler_state``, ``page`` (the status page) and ``figures`` (the figure
  cache) take nothing under them; ``fleet_view`` (a view's upserts) takes ``store``.

What follows from it, and what broke it before (a consumer-group rebalance meeting a scrape
froze the service for good, docs/architecture.md "Threads and locks"): nothing calls the
observer, the exporter or the source while holding the pipeline lock (reports made under it
are delivered after it is released); a scrape builds its state before it takes the
exporter's lock; rebalance callbacks, which kafka-python runs on its own IO thread, only
record what happened.

The checker: with ``VFR_LOCK_CHECK`` set in the environment (or :func:`enable_checking`
called before the locks are made), :func:`named_lock` returns a wrapper that records, per
thread, the locks held, and notes a :class:`Violation` whenever a lock is waited for that
the held ones may not take (a try-lock, ``acquire(blocking=False)``, never waits and is
not checked). Violations are kept (:func:`violations`), logged, and, when
``VFR_LOCK_CHECK`` names a file, appended to it as JSON lines, so a test can fail on a
service process's violation after the process ended. Off, a named lock is the plain
``threading`` lock: no cost.

>>> book = []  # a list of its own here; the suite's checker reads the shared one
>>> store, pipeline = CheckedLock("store", book=book), CheckedLock("pipeline", book=book)
>>> with store:
...     with pipeline:
...         pass
>>> [(v.taking, v.holding) for v in book]
[('pipeline', ('store',))]
"""

from __future__ import annotations

import json
import logging
import os
import threading
import traceback
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger(__name__)

#: The written lock order: for each lock, those a thread holding it may take next.
_DIRECT: dict[str, tuple[str, ...]] = {
    "observer": ("pipeline", "exporter", "scheduler_state"),
    "job": ("cohort_book", "pipeline", "store", "scheduler_state"),
    "cohort_book": ("store",),
    "pipeline": ("store", "eval_pool"),
    "store": ("eval_pool",),  # a batch's evaluations are submitted inside its transaction
    "eval_pool": (),
    "exporter": (),
    "source": (),
    "scheduler_state": (),
    "page": (),
    "figures": (),
    "fleet_view": ("store",),  # a fleet view applies results messages to its own file
}


def _closure(direct: dict[str, tuple[str, ...]]) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}

    def reach(name: str, path: tuple[str, ...]) -> frozenset[str]:
        if name in path:
            raise ValueError(f"the lock order has a cycle: {' -> '.join((*path, name))}")
        if name not in out:
            below: set[str] = set()
            for nxt in direct[name]:
                below |= {nxt, *reach(nxt, (*path, name))}
            out[name] = frozenset(below)
        return out[name]

    for name in direct:
        reach(name, ())
    return out


#: Each lock -> every lock that may be taken while it is held (transitively).
MAY_TAKE: dict[str, frozenset[str]] = _closure(_DIRECT)

ENV = "VFR_LOCK_CHECK"


@dataclass(frozen=True)
class Violation:
    """A lock taken out of the written order: which, while holding what, where."""

    thread: str
    taking: str
    holding: tuple[str, ...]
    stack: str

    def message(self) -> str:
        allowed_under = {h: sorted(MAY_TAKE[h]) for h in self.holding}
        return (
            f"lock order violation on thread {self.thread}: took {self.taking!r} while "
            f"holding {list(self.holding)} (may take under them: {allowed_under}; the "
            "written order is monitor.core.locks)"
        )


_state = threading.local()
_violations: list[Violation] = []
_violations_lock = threading.Lock()  # not a named lock: the checker's own book
_checking = bool(os.environ.get(ENV))


def enable_checking(on: bool = True) -> None:
    """Make locks created from now on checked (or plain again)."""
    global _checking
    _checking = on


def checking() -> bool:
    return _checking


def violations() -> list[Violation]:
    with _violations_lock:
        return list(_violations)


def reset_violations() -> None:
    with _violations_lock:
        _violations.clear()


def allowed(holding: tuple[str, ...], taking: str) -> bool:
    """Whether ``taking`` may be acquired by a thread that holds ``holding``.

    >>> allowed(("pipeline",), "store"), allowed(("store",), "pipeline")
    (True, False)
    >>> allowed(("pipeline",), "exporter"), allowed(("observer",), "exporter")
    (False, True)
    """
    return all(h == taking or taking in MAY_TAKE[h] for h in holding)


def _held() -> list[str]:
    held = getattr(_state, "held", None)
    if held is None:
        held = _state.held = []
    return held


def _note(v: Violation, book: list[Violation] | None) -> None:
    if book is not None:
        book.append(v)
        return
    with _violations_lock:
        _violations.append(v)
    log.error("%s\n%s", v.message(), v.stack)
    path = os.environ.get(ENV, "")
    if path and path not in ("1", "true", "yes"):
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(asdict(v)) + "\n")
        except OSError:
            log.error("lock checker: could not write %s", path)


class CheckedLock:
    """A ``threading`` lock that checks the written order each time it is taken."""

    def __init__(
        self, name: str, reentrant: bool = False, *, book: list[Violation] | None = None
    ):
        self.name = name
        self._book = book
        self._lock: Any = threading.RLock() if reentrant else threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        held = _held()
        # a try-lock (blocking=False) never waits, so it cannot close a cycle: not checked
        if blocking and not allowed(tuple(held), self.name):
            _note(Violation(
                threading.current_thread().name, self.name, tuple(held),
                "".join(traceback.format_stack(limit=12)[:-1]),
            ), self._book)  # fmt: skip
        ok = self._lock.acquire(blocking, timeout)
        if ok:
            held.append(self.name)
        return bool(ok)

    def release(self) -> None:
        held = _held()
        # the innermost hold of this name (an RLock is released in reverse order)
        for i in range(len(held) - 1, -1, -1):
            if held[i] == self.name:
                del held[i]
                break
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def locked(self) -> bool:
        probe = getattr(self._lock, "locked", None)
        return bool(probe()) if probe is not None else False


def named_lock(name: str, *, reentrant: bool = False) -> Any:
    """A lock of the written order (``name`` a key of :data:`MAY_TAKE`): plain
    ``threading.Lock``/``RLock``, or a :class:`CheckedLock` while checking is on."""
    if name not in MAY_TAKE:
        raise ValueError(f"lock {name!r} is not in the written lock order")
    if _checking:
        return CheckedLock(name, reentrant)
    return threading.RLock() if reentrant else threading.Lock()
