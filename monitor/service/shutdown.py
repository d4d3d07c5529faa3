"""A bounded shutdown: SIGTERM or SIGINT stops the service within a grace period, or the
process leaves every thread's stack in the log and exits non-zero.

Before, a signal only set a flag that the ingest loop read between batches; a loop that
never got there (a lock-order freeze) left a process that ignored SIGTERM for good. Now:

* the signal is noticed by a thread of its own, through the interpreter's wakeup file
  descriptor (:func:`signal.set_wakeup_fd`), so it is noticed even while the main thread
  is stuck (in a lock wait or in C code) and cannot run a Python signal handler;
* that thread calls ``on_stop`` (the service stops its data routes and its readiness) and
  sets ``stop`` (the ingest loop finishes its batch, the source closes, the pipeline writes
  what is in flight: monitor.cli's ``run``);
* and arms a timer: if the process has not exited ``grace_s`` later, every thread's stack
  is logged and the process exits at once with status :data:`EXIT_STUCK`.

``SIGUSR1`` dumps every thread's stack to stderr at any time, without stopping anything
(:mod:`faulthandler`, which works even when no Python code can run): the runbook
docs/runbooks/shutdown-and-stalls.md says when to use it.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: exit status of a process that did not stop within its grace period (EX_SOFTWARE)
EXIT_STUCK = 70


def thread_stacks() -> str:
    """Every thread's current stack, named, as text (for the log)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame))
        parts.append(f"--- thread {names.get(ident, '?')} ({ident}):\n{stack}")
    return "\n".join(parts)


class ShutdownGuard:
    """Signals -> ``stop`` within ``grace_s``, else stacks to the log and exit 70.

    Install it on the main thread (Python delivers signals there). :meth:`request` does the
    same as a signal, for tests and for callers that decide to stop.
    """

    def __init__(
        self,
        stop: threading.Event,
        grace_s: float,
        *,
        on_stop: Callable[[], None] | None = None,
        exit: Callable[[int], None] = os._exit,
    ):
        self.stop = stop
        self.grace_s = float(grace_s)
        self.on_stop = on_stop
        self._exit = exit
        self._requested = threading.Event()
        self._timer: threading.Timer | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self._old_wakeup_fd: int | None = None
        self._old_handlers: dict[int, Any] = {}

    def install(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        r, w = socket.socketpair()
        r.setblocking(True)
        w.setblocking(False)
        self._wake = (r, w)
        self._old_wakeup_fd = signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
        self._old_handlers = {sig: signal.getsignal(sig) for sig in signals}
        for sig in signals:
            # the Python-level handler only sets the flag; the watcher thread does the rest
            signal.signal(sig, lambda *_: self.stop.set())
        if hasattr(signal, "SIGUSR1"):
            # the process's own stderr (file descriptor 2), also when sys.stderr has been
            # replaced by an object without one (a test's capture, a notebook)
            out = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
            try:
                faulthandler.register(signal.SIGUSR1, file=out, all_threads=True, chain=False)
            except (ValueError, OSError, AttributeError):  # no descriptor at all: no dumps
                log.warning("SIGUSR1 stack dumps unavailable: stderr has no file descriptor")
        watched = {int(s) for s in signals}
        threading.Thread(
            target=self._watch, args=(r, watched), name="vfr-signals", daemon=True
        ).start()

    def _watch(self, r: socket.socket, watched: set[int]) -> None:
        while True:
            try:
                data = r.recv(64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum in watched:
                    self.request(signal.Signals(signum).name)

    def request(self, why: str = "request") -> None:
        """Begin the shutdown (once): on_stop, stop, and the grace timer."""
        if self._requested.is_set():
            log.warning("%s: already stopping (exit within %.0f s of the first signal)",
                        why, self.grace_s)  # fmt: skip
            return
        self._requested.set()
        log.warning("%s: stopping; exiting within %.0f s ([service.shutdown] grace_s)",
                    why, self.grace_s)  # fmt: skip
        self._timer = threading.Timer(self.grace_s, self._expired)
        self._timer.name = "vfr-shutdown-timer"
        self._timer.daemon = True
        self._timer.start()
        try:
            if self.on_stop is not None:
                self.on_stop()
        except Exception as exc:
            log.error("shutdown: stopping the service failed: %s", type(exc).__name__)
        finally:
            self.stop.set()

    def _expired(self) -> None:
        log.error(
            "shutdown did not finish within %.0f s ([service.shutdown] grace_s); exiting with "
            "status %d. Every thread's stack:\n%s", self.grace_s, EXIT_STUCK, thread_stacks(),
        )  # fmt: skip
        for h in logging.getLogger().handlers:
            with contextlib.suppress(Exception):  # exiting anyway
                h.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        self._exit(EXIT_STUCK)

    def cancel(self) -> None:
        """The process is about to exit on its own: no timer (tests)."""
        if self._timer is not None:
            self._timer.cancel()

    def uninstall(self) -> None:
        """Give the signals back (the caller's ``run`` returned; an in-process caller such
        as a test goes on): the previous handlers and wakeup descriptor, no watcher. A
        shutdown already requested keeps its timer: it bounds the rest of the exit."""
        if self._wake is None:
            return
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(-1 if self._old_wakeup_fd is None else self._old_wakeup_fd)
        r, w = self._wake
        self._wake = None
        w.close()
        with contextlib.suppress(OSError):
            r.shutdown(socket.SHUT_RDWR)  # the watcher's recv returns: it ends
