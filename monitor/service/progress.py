"""A progress line every few seconds while `vfr-monitor run` consumes.

Why: a running service otherwise says nothing between its start and its last line, and an
engineer cannot tell a quiet topic from a stuck consumer, or see that every record is
being dead-lettered. The line says how fast messages arrive, what became of them and how
far behind the consumer is::

    vfr-monitor: progress: 120,000 messages (2,340/s), stored 118,000, dead letters 2,000
    (unknown_model 2,000), lag 4,500

Only process-wide counts (no model, group or record figure), as the line ``run`` ends
with (:class:`monitor.stream.dead_letter_watch.IngestTally`). ``[service]
progress_interval_s`` (``run --progress-interval``) sets the interval; 0 turns it off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from monitor.stream.dead_letter_watch import IngestTally


def progress_line(tally: IngestTally, lag: Mapping[int, int] | None, rate: float | None) -> str:
    """The line, from the tally, the lag per partition (None: the source has none) and the
    messages per second since the last line (None: the first line).

    >>> t = IngestTally()
    >>> t.add(accepted=90, duplicates=0, rejected={"unknown_model": 10})
    >>> progress_line(t, {0: 5, 1: 0}, 20.0).removeprefix("vfr-monitor: progress: ")
    '100 messages (20/s), stored 90, dead letters 10 (unknown_model 10), lag 5'
    """
    dead = sum(tally.dead_letters.values())
    total = tally.stored + tally.duplicates + dead
    parts = [f"{total:,} messages" + ("" if rate is None else f" ({rate:,.0f}/s)")]
    parts.append(f"stored {tally.stored:,}")
    if tally.duplicates:
        parts.append(f"duplicates {tally.duplicates:,}")
    reasons = ", ".join(f"{r} {n:,}" for r, n in tally.dead_letters.most_common(3))
    more = len(tally.dead_letters) - 3
    if more > 0:
        reasons += f", {more} other reasons"
    parts.append(f"dead letters {dead:,}" + (f" ({reasons})" if reasons else ""))
    parts.append("lag -" if not lag else f"lag {sum(lag.values()):,}")
    return "vfr-monitor: progress: " + ", ".join(parts)


class ProgressReporter:
    """Prints :func:`progress_line` every ``interval_s`` on a daemon thread until stopped.

    ``lag``: the latest lag per partition (read, never computed here: the service's ticker
    already asks the source once a second).
    """

    def __init__(
        self,
        tally: IngestTally,
        lag: Callable[[], Mapping[int, int]],
        interval_s: float,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.tally, self.lag, self.interval_s = tally, lag, interval_s
        self.out, self.clock = out, clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: tuple[float, int] | None = None

    def _total(self) -> int:
        return self.tally.stored + self.tally.duplicates + sum(self.tally.dead_letters.values())

    def line(self) -> str:
        """The next line (and the rate since the previous one)."""
        now, total = self.clock(), self._total()
        rate = None
        if self._last is not None and now > self._last[0]:
            rate = (total - self._last[1]) / (now - self._last[0])
        self._last = (now, total)
        return progress_line(self.tally, dict(self.lag()), rate)

    def start(self) -> None:
        """Start printing (nothing when the interval is 0)."""
        if self.interval_s <= 0 or self._thread is not None:
            return
        self.line()  # the baseline of the first rate

        def loop() -> None:
            while not self._stop.wait(self.interval_s):
                try:
                    print(self.line(), file=self.out, flush=True)
                except Exception:  # a progress line must never stop the service
                    continue

        self._thread = threading.Thread(target=loop, name="vfr-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
