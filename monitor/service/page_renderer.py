"""The status page at ``/``, drawn in the background, one drawing at a time.

Why: the governance report takes seconds to draw (12 s for the demo's year of two
models on a quiet 2-core machine). Drawn on the request thread, every ``GET /`` that
found the page stale drew it again, in parallel, on the worker threads the other routes
share: four browsers took four worker threads for 25 s each. Here a request never
draws: it gets the last page from memory at once, with a line saying how old it is
(or, before the first page exists, a small "being prepared" page that reloads itself),
and a stale page starts one drawing on a thread of this class, never on the server's
worker pool.

Stale means: none yet, the evaluation count moved since it was drawn, or it is older than
``max_age_s``. Drawings start on demand (a request for the page), not after every
evaluation: a page nobody reads costs nothing. A drawing does not start sooner after the
previous one than that one took (the request that found the page stale is answered at
once, and its drawing starts when that time is up), so the drawing thread is busy at
most half the time however often the page is asked for.
"""

from __future__ import annotations

import datetime as dt
import html
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from monitor.core.locks import named_lock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Drawn:
    page: str
    version: int
    #: monotonic and wall-clock times the drawing finished
    at: float
    wall: float
    duration_s: float


def _preparing(title: str, since_s: float | None) -> str:
    started = "" if since_s is None else f" (started {since_s:.0f} s ago)"
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='refresh' content='5'><title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1><p class='vfr-page-preparing'>The report is "
        f"being prepared{started}; this page reloads itself every 5 s.</p></body></html>"
    )


def _with_age(page: str, age_s: float, wall: float) -> str:
    """The page with a line saying when it was drawn, just after ``<body ...>``."""
    at = dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    note = (
        "<p class='vfr-page-age' style='font:12px sans-serif;color:#555;margin:4px 8px'>"
        f"Rendered {age_s:.0f} s ago ({at} UTC); redrawn in the background when asked for "
        "after new evaluations.</p>"
    )
    i = page.find("<body")
    j = page.find(">", i) if i >= 0 else -1
    if j < 0:
        return note + page
    return page[: j + 1] + note + page[j + 1 :]


class PageRenderer:
    """Single-flight background drawing of a page, and its last version from memory.

    ``draw`` returns the page (it may block for seconds and read the DuckDB file);
    ``version`` changes when the page would change (the evaluations seen). It is read on
    the request thread, so it must never wait: a counter, not a call that takes the
    pipeline's lock (an ingest batch holds that for its whole write; the status page's
    first byte waited behind it for seconds).
    """

    def __init__(
        self,
        draw: Callable[[], str],
        version: Callable[[], int],
        *,
        title: str = "vfr-monitor",
        max_age_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ):
        self._draw = draw
        self._version = version
        self.title = title
        self.max_age_s = max_age_s
        self.clock = clock
        self.wall_clock = wall_clock
        self._lock = named_lock("page")
        self._drawn: _Drawn | None = None
        self._thread: threading.Thread | None = None
        self._started_at: float | None = None
        #: when the last drawing ended (failed ones too) and how long it took
        self._ended_at: float | None = None
        self._last_duration_s = 0.0
        self._closed = False
        self._closing = threading.Event()
        #: drawings finished, failed ones included (tests and logs read it)
        self.drawings = 0

    def page(self) -> str:
        """What ``GET /`` answers, at once: the last page with its age, or the
        "being prepared" page; a stale page starts a drawing in the background."""
        self.refresh()
        now = self.clock()
        with self._lock:
            drawn, started = self._drawn, self._started_at
        if drawn is None:
            return _preparing(self.title, None if started is None else max(0.0, now - started))
        return _with_age(drawn.page, now - drawn.at, drawn.wall)

    def refresh(self) -> bool:
        """Start a drawing (now, or once the last one's duration has passed since it
        ended) if the page is stale and none is under way; True if one was started."""
        now = self.clock()
        version = self._version()
        with self._lock:
            if self._closed or self._thread is not None:
                return False
            d = self._drawn
            if d is not None and d.version == version and now - d.at < self.max_age_s:
                return False
            # at most half the time drawing: a drawing starts no sooner after the last
            # one ended than that one took (the thread waits for it; asked again
            # meanwhile, nothing more happens)
            delay = 0.0
            if self._ended_at is not None:
                delay = max(0.0, self._last_duration_s - (now - self._ended_at))
            self._started_at = now + delay
            self._thread = threading.Thread(
                target=self._run, args=(delay,), name="vfr-page", daemon=True
            )
            self._thread.start()
            return True

    def _run(self, delay: float) -> None:
        if delay > 0 and self._closing.wait(delay):
            with self._lock:
                self._thread, self._started_at = None, None
            return
        version = self._version()
        start = self.clock()
        page: str | None = None
        try:
            page = self._draw()
        except Exception as exc:  # the type only: the text may quote data
            log.error("status page: drawing failed: %s", type(exc).__name__)
        end = self.clock()
        with self._lock:
            if page is not None:
                self._drawn = _Drawn(page, version, end, self.wall_clock(), end - start)
            self._ended_at, self._last_duration_s = end, end - start
            self._thread, self._started_at = None, None
            self.drawings += 1

    def wait_drawn(self, timeout_s: float) -> bool:
        """Block until a page exists (starting a drawing if needed); False at the timeout."""
        deadline = time.monotonic() + timeout_s  # real time, whatever ``clock`` is
        while time.monotonic() < deadline:
            with self._lock:
                if self._drawn is not None:
                    return True
                thread = self._thread
            if thread is None:
                self.refresh()
                time.sleep(0.01)
            else:
                thread.join(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
        with self._lock:
            return self._drawn is not None

    def close(self, timeout_s: float = 60.0) -> None:
        """No new drawing; wait (bounded) for a running one, which reads the DuckDB file
        the caller is about to close."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._closing.set()
        if thread is not None:
            thread.join(timeout=timeout_s)
            if thread.is_alive():
                log.warning("status page: a drawing still runs after %.0f s", timeout_s)
