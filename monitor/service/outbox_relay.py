"""Moves stored results from the DuckDB outbox to the fleet's results topic.

The ingest transaction writes each window result, event and axis result to
``results_outbox`` beside the result itself (monitor.store), so a crash can
never leave a result stored but unpublished, or published but not stored. This thread
sends the outbox in id order and deletes what the broker acknowledged; after a crash
the rest is sent again (a repeated message has the same key and value: harmless on a
compacted topic and in the view).
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from monitor.store import Store, queries

log = logging.getLogger(__name__)


class Publisher(Protocol):
    def publish(self, messages: list[tuple[str, str]]) -> None: ...

    def close(self) -> None: ...


class OutboxRelay:
    """A daemon thread: every ``interval_s``, publish the outbox and forget what is sent."""

    def __init__(
        self, store: Store, publisher: Publisher, *, interval_s: float = 0.5,
        batch: int = 2_000, max_backoff_s: float = 30.0,
    ):  # fmt: skip
        self.store = store
        self.publisher = publisher
        self.interval_s = interval_s
        self.batch = batch
        self.max_backoff_s = max_backoff_s
        self.published = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vfr-outbox", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def drain_once(self) -> int:
        """Publish everything in the outbox now; returns how many messages were sent."""
        sent = 0
        cursor = self.store.cursor()
        try:
            while True:
                rows = queries.outbox_batch(cursor, self.batch)
                if not rows:
                    return sent
                self.publisher.publish([(k, v) for _, k, v in rows])
                self.store.outbox_done([i for i, _, _ in rows], cursor)
                sent += len(rows)
                self.published += len(rows)
        finally:
            cursor.close()

    def _run(self) -> None:
        wait = self.interval_s
        while not self._stop.wait(wait):
            try:
                self.drain_once()
                wait = self.interval_s
            except Exception as exc:  # broker away: keep the outbox, try again later
                self.failures += 1
                wait = min(max(wait * 2, 1.0), self.max_backoff_s)
                log.warning("results outbox: publish failed (%s); retrying in %.0f s",
                            type(exc).__name__, wait)  # fmt: skip

    def close(self) -> None:
        """Stop the thread, send what is left (best effort), close the producer."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        try:
            self.drain_once()
        except Exception as exc:
            log.warning("results outbox: final publish failed (%s); kept for the next start",
                        type(exc).__name__)  # fmt: skip
        self.publisher.close()
