"""Liveness: whether the monitor is still doing its job, for ``/healthz``.

``/readyz`` answers "can it consume now?" (broker reachable, sink storing): a broker outage
makes the service not ready, and an orchestrator stops routing to it but must not restart
it, since a restart cannot bring the broker back. ``/healthz`` answers "is it stuck?", and a
failing ``/healthz`` is what makes an orchestrator restart the process. It fails when

* the ingest loop has not turned for ``stall_after_s`` (each turn is one poll, idle or
  not, or one retry of a failing batch): the loop is blocked, e.g. waiting for a lock;
* the wall-clock ticker (hops, lag reports) has not turned for ``stall_after_s``;
* or the loop turns but has stored nothing for ``stall_after_s`` while the source reports
  records waiting and the broker is reachable (an outage is readiness's business).

A frozen monitor used to keep answering 200 on both probes while it ingested nothing.

Every read and write here is of one float: no lock (``/healthz`` is answered on the event
loop and must never wait). Times are monotonic, not the service's injectable clock, which
tests move to event times.

>>> t = [0.0]
>>> live = Liveness(stall_after_s=60, clock=lambda: t[0])
>>> live.start(); t[0] = 30; live.turned(); live.ticked()
>>> live.check(waiting=5, broker_ok=True)
(True, 'ok')
>>> t[0] = 95; live.turned(); live.ticked()
>>> live.check(waiting=5, broker_ok=True)
(False, 'no records stored for 95 s while 5 wait at the source')
>>> live.check(waiting=5, broker_ok=False)  # the broker is away: readiness says so
(True, 'ok')
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Liveness:
    """The ingest loop's and the ticker's last turns, and the last stored batch."""

    def __init__(self, stall_after_s: float, clock: Callable[[], float] = time.monotonic):
        self.stall_after_s = float(stall_after_s)
        self.clock = clock
        #: None until the loop starts: a service still restoring its windows is alive
        self._started: float | None = None
        self._turn = 0.0
        self._tick = 0.0
        self._progress = 0.0

    def start(self) -> None:
        now = self.clock()
        self._started = self._turn = self._tick = self._progress = now

    def stop(self) -> None:
        """Shutting down: the loop stops turning on purpose."""
        self._started = None

    def turned(self) -> None:
        """One turn of the ingest loop (called by the source on its own thread)."""
        self._turn = self.clock()

    def ticked(self) -> None:
        """One turn of the wall-clock ticker."""
        self._tick = self.clock()

    def progressed(self) -> None:
        """A batch was stored."""
        self._progress = self.clock()

    def check(self, waiting: int, broker_ok: bool) -> tuple[bool, str]:
        """(alive, reason); ``waiting``: records the source reports waiting, summed."""
        if self._started is None:
            return True, "ok"
        now = self.clock()
        bound = self.stall_after_s
        if now - self._turn > bound:
            return False, f"ingest loop stuck: no turn for {now - self._turn:.0f} s"
        if now - self._tick > bound:
            return False, f"ticker stuck: no turn for {now - self._tick:.0f} s"
        if waiting > 0 and broker_ok and now - self._progress > bound:
            return False, (
                f"no records stored for {now - self._progress:.0f} s while {waiting} wait "
                "at the source"
            )
        return True, "ok"
