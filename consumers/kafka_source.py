"""The Kafka source: poll, hand the batch to the sink, commit offsets only afterwards.

A kafka-python consumer in a consumer group reads raw bytes (no deserializer:
decoding is the pipeline's job, so that a poison message reaches the
dead-letter store instead of crashing the consumer). Each poll's batch is given
to :meth:`Sink.ingest_batch`, which stores it in one DuckDB transaction; only
when that returns are the offsets committed, synchronously. If the sink raises,
nothing is committed: the consumer seeks back to the batch's first offsets and
retries after a backoff, so delivery is at-least-once and the pipeline's
deduplication makes the effect exactly-once.

Every payload is handed on as it is, whatever its size or shape: the size limit
is the pipeline's (``[service.intake] max_payload_bytes``, one setting for every source),
which dead-letters an oversized payload with the reason ``oversized``.

kafka-python is imported lazily, so the embedded-only path does not need it,
and its import-time DeprecationWarnings are silenced in one place. Without the
``crc32c`` C extension kafka-python checks record batches in pure Python,
about five times slower: a warning says so once.

Producing, topic creation and the raw-read baseline are in :mod:`consumers.kafka_tools`;
the JSON encoding of records in :mod:`consumers.encoding`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import types
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from consumers.base import LagReport, Origin, Sink, SinkRetriesExhaustedError
from consumers.kafka_eof_fix import deliver_bytes_before_eof
from monitor.config.sources import KafkaConfig
from monitor.core.locks import named_lock

log = logging.getLogger(__name__)


def quiet_kafka_library_logs(level: str = "WARNING") -> None:
    """Set kafka-python's loggers ("kafka.*") to ``level`` (``[kafka] library_log_level``,
    ``VFR_KAFKA_LOG_LEVEL``), never below INFO.

    WARNING by default: at INFO kafka-python writes ~100 lines of connection and group
    chatter per run, which buries the service's own lines. Never DEBUG: at DEBUG it logs
    the raw bytes of every request and response, i.e. record payloads (patient data),
    whatever the service's log level.
    """
    wanted = logging.getLevelName(level)
    if not isinstance(wanted, int):
        wanted = logging.WARNING
    # NOTSET (0) is raised too: a later DEBUG root must not reach it
    logging.getLogger("kafka").setLevel(max(wanted, logging.INFO))


#: Unprocessed messages per (topic, partition).


@functools.cache
def _kafka() -> types.ModuleType:
    """kafka-python, imported once, quietly; warns once when crc32c is missing."""
    with warnings.catch_warnings():
        # kafka-python 3 loads its protocol schemas through the deprecated
        # importlib.resources.read_text/open_text: ~200 DeprecationWarnings at import.
        warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
        import kafka
        import kafka.errors
        import kafka.structs
    quiet_kafka_library_logs()  # every client (admin, producer, consumer): WARNING at first
    deliver_bytes_before_eof()
    try:
        import crc32c  # noqa: F401
    except ImportError:
        log.warning(
            "kafka source: the crc32c package is not installed; kafka-python verifies "
            "record batches in pure Python (about 5x slower consumption)"
        )
    return kafka


@dataclass
class KafkaSourceStats:
    """Counters for the exporter; updated only by the thread running ``run``."""

    messages: int = 0  #: handed to the sink in batches it accepted
    batches: int = 0
    null_values: int = 0  #: tombstones (value None), handed on as None
    sink_failures: int = 0  #: failed sink calls (each followed by a rewind)
    consecutive_failures: int = 0  #: of the batch being retried now; 0 when healthy
    redelivered: int = 0  #: messages polled again after a failed sink call
    commits: int = 0
    commit_failures: int = 0


def _rebalance_listener(kafka: Any, record: Callable[[str, Any], None]) -> Any:
    """The source's rebalance callbacks: they only record what the group did.

    kafka-python 3 runs them on its own IO thread (its coordinator warns that a slow one
    blocks heartbeats), not inside ``poll`` on the polling thread: work there (flushing
    the pipeline, which writes to the store and reports to the exporter) froze the service
    when it met a scrape. The polling thread acts on what was recorded after its next
    poll, before it commits (:meth:`KafkaSource._take_rebalances`).

    Built here because kafka-python insists on a ConsumerRebalanceListener subclass and is
    imported lazily.
    """

    class _Listener(kafka.ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            record("revoked", revoked)

        def on_partitions_lost(self, lost: Any) -> None:
            record("lost", lost)

        def on_partitions_assigned(self, assigned: Any) -> None:
            record("assigned", assigned)

    return _Listener()


def consumer_kwargs(cfg: KafkaConfig) -> dict[str, Any]:
    """KafkaConsumer settings shared by :class:`KafkaSource` and :func:`consume_raw`.

    Contains secrets (via ``client_kwargs``): never log it.
    """
    return {
        **cfg.client_kwargs(),
        "group_id": cfg.group_id,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_records": cfg.max_batch,
        "session_timeout_ms": cfg.session_timeout_ms,
        # The usual ratio: three heartbeats per session timeout.
        "heartbeat_interval_ms": cfg.heartbeat_interval_ms,
        # kafka-python's default cap (30 s) would keep a source away that long after the
        # broker is back; the readiness bound caps it instead.
        "reconnect_backoff_max_ms": round(cfg.broker_unreachable_after_s * 1000),
        "max_poll_interval_ms": cfg.max_poll_interval_ms,
        # a group joined before the broker's metadata holds a just-created topic is given
        # no partitions of it ("No partition metadata"), and kafka-python rejoins only when
        # its metadata is next refreshed: every 5 min by default, 5 s here (one small
        # request). Without it the test consumers of new topics waited minutes whenever
        # the join was quick (kafka-python at WARNING made it so).
        "metadata_max_age_ms": 5_000,
        # KIP-429: a rebalance moves only the partitions that change owner; the others go
        # on being consumed (no stop-the-world revoke, no rebuild of what stays)
        "partition_assignment_strategy": (_cooperative_sticky(),),
    }


def _cooperative_sticky() -> type:
    _kafka()
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

    return CooperativeStickyAssignor


class _AuthFailureSpy(logging.Handler):
    """Notes whether kafka-python logged a SASL authentication failure.

    kafka-python logs a rejected login and keeps retrying until its bootstrap times out,
    then raises a bare "Unable to bootstrap"; the logged exception object is the only
    place the reason survives. Matched by type, never by message text.
    """

    def __init__(self, error_type: type[BaseException]):
        super().__init__(logging.DEBUG)
        self.error_type = error_type
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if any(isinstance(a, self.error_type) for a in args) or (
            record.exc_info and isinstance(record.exc_info[1], self.error_type)
        ):
            self.seen = True


def open_consumer(cfg: KafkaConfig, *topics: str) -> Any:
    """A KafkaConsumer for ``cfg``; rejected credentials raise ConfigError naming the setting,
    and no broker answering within ``bootstrap_timeout_ms`` a StartupError naming the
    address and what to check (:func:`consumers.broker_check.unreachable_message`).

    Logs the settings' security warnings (SASL_PLAINTEXT with PLAIN, hostname checks off),
    and the address it is connecting to, so a wrong one is not met with silence.
    """
    from consumers.broker_check import unreachable_message
    from monitor.config import ConfigError, StartupError

    kafka = _kafka()
    quiet_kafka_library_logs(cfg.library_log_level)
    for warning in cfg.security_warnings():
        log.warning(warning)
    log.info(
        "kafka: connecting to %s (%s; giving up after %g s: kafka.bootstrap_timeout_ms)",
        ",".join(cfg.bootstrap_servers), cfg.security_protocol, cfg.bootstrap_timeout_ms / 1000,
    )  # fmt: skip
    spy = _AuthFailureSpy(kafka.errors.SaslAuthenticationFailedError)
    kafka_log = logging.getLogger("kafka")
    kafka_log.addHandler(spy)
    try:
        return kafka.KafkaConsumer(*topics, **consumer_kwargs(cfg))
    except kafka.errors.KafkaTimeoutError:  # kafka-python 3: "Unable to bootstrap"
        if not spy.seen:
            raise StartupError(unreachable_message(cfg)) from None
        raise _login_rejected(cfg, ConfigError) from None
    except kafka.errors.KafkaError:
        if not spy.seen:
            raise
        raise _login_rejected(cfg, ConfigError) from None
    finally:
        kafka_log.removeHandler(spy)


def _login_rejected(cfg: KafkaConfig, error: type[Exception]) -> Exception:
    """The ConfigError of a rejected SASL login, naming the setting to fix."""
    field = "sasl_plain_password_file" if cfg.sasl_plain_password_file else (
        "sasl_plain_password")  # fmt: skip
    return error(
        f"kafka.{field}",
        f"the broker at {','.join(cfg.bootstrap_servers)} rejected the {cfg.sasl_mechanism} "
        f"login of user {cfg.sasl_plain_username!r}: check kafka.sasl_plain_username and "
        "the password (VFR_KAFKA_SASL_PASSWORD or VFR_KAFKA_SASL_PASSWORD_FILE)",
    )


def _broker_connected_probe(consumer: Any) -> Callable[[], bool]:
    """A check, safe from any thread and never blocking, of whether ``consumer`` holds an
    established broker connection.

    kafka-python 3 runs its connections on an IO thread of its own; its connection manager
    keeps them in a dict, each with a ``connected`` flag set once the connection is up and
    its ApiVersions exchange (and any SASL login) is done. Reading that is a snapshot of a
    dict and a flag per entry: no consumer call, so it needs neither the source's lock nor
    the poll loop, either of which a consumer call blocked by the outage can hold for
    ``request_timeout_ms`` or more (``lag()``'s ``position()`` of a partition without a
    commit took ~58 s during an outage when measured), or the poll loop itself while it
    drains records fetched before the outage.
    A kafka-python without that manager falls back to its public ``connection-count``
    metric, which also counts connections still being opened.
    """
    conns = getattr(getattr(consumer, "_manager", None), "_conns", None)
    if isinstance(conns, dict):
        return lambda: any(getattr(c, "connected", False) for c in tuple(conns.values()))
    metrics = consumer.metrics(raw=True) or {}
    count = next(
        (m for name, m in metrics.items() if name.name == "connection-count"), None
    )  # fmt: skip
    log.warning("kafka source: kafka-python's connection manager not found; readiness uses "
                "its connection-count metric")  # fmt: skip
    if count is None:
        return lambda: True
    return lambda: count.value() > 0


#: How long a new source waits for its topics' partitions before joining its group anyway
#: (a service started before its producers created the topic starts that much later).
METADATA_WAIT_S = 10.0


def await_partitions(consumer: Any, topics: Sequence[str], timeout_s: float) -> list[str]:
    """Load the partition metadata of ``topics`` before the consumer joins its group; the
    topics that still have none after ``timeout_s``.

    Why: kafka-python's group leader computes the assignment from the metadata it holds at
    that moment. A consumer subscribed right after its topic was created (a fresh broker, a
    test, a first deployment) joined holding none ("No partition metadata for topic ..."
    from the sticky assignor), was assigned nothing and sat in a rebalance with no partition
    for a minute or more while its topic filled (seen in the source tests under load). A
    constructor right after ``ensure_topic`` held the topic's partitions in 0 of 10 tries
    before this wait.
    """
    deadline = time.monotonic() + timeout_s
    missing = list(topics)
    while True:
        missing = [t for t in missing if not consumer.partitions_for_topic(t)]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(0.1)


class KafkaSource:
    """Consume ``cfg.topics`` in group ``cfg.group_id`` and feed ``sink`` at least once.

    Not thread-safe except for :meth:`lag` (serialised with the poll loop by a lock) and the
    ``stop`` event; ``on_lag`` receives a fresh :meth:`lag` report after every batch (and
    about once a second while idle) from the thread running :meth:`run`.
    """

    def __init__(
        self,
        cfg: KafkaConfig,
        sink: Sink,
        *,
        on_lag: Callable[[LagReport], None] | None = None,
        horizon_days: float | None = None,
    ) -> None:
        kafka = _kafka()
        quiet_kafka_library_logs()
        self._cfg = cfg
        self._sink = sink
        self._on_lag = on_lag
        self._offset_and_metadata = kafka.structs.OffsetAndMetadata
        self._kafka_error = kafka.errors.KafkaError
        self._lock = named_lock("source", reentrant=True)
        #: next offset to process per partition, as last committed by this source
        self._committed: dict[Any, int] = {}
        self._closed = False
        self.stats = KafkaSourceStats()
        #: called at each turn of :meth:`run`'s loop, from its thread (the service's
        #: liveness: a loop that stops turning is stuck); must be cheap and never block
        self.on_turn: Callable[[], None] | None = None
        #: rebuild on assignment (see _rebuild_assigned): only for a sink that keeps history
        self._horizon_ms = (
            None if horizon_days is None or not hasattr(sink, "forget_partitions")
            else round(horizon_days * 86_400_000)
        )  # fmt: skip
        #: partitions assigned since the last poll, not yet positioned for a rebuild
        self._to_position: set[Any] = set()
        #: partition -> the group's committed offset when it was assigned, while the history
        #: before it is being replayed (nothing is committed for it until that is reached)
        self._rebuilding: dict[Any, int] = {}
        #: what the group's callbacks reported, in order, for the polling thread (appended
        #: on kafka-python's IO thread; a deque's append and popleft are thread-safe)
        self._rebalances: deque[tuple[str, frozenset[Any]]] = deque()
        #: each rebalance the polling thread acted on: (kind, partitions, thread name)
        self.rebalance_log: deque[tuple[str, tuple[tuple[str, int], ...], str]] = deque(
            maxlen=256
        )
        self._consumer = open_consumer(cfg)
        self._broker_connected = _broker_connected_probe(self._consumer)
        wait_s = min(cfg.bootstrap_timeout_ms / 1000, METADATA_WAIT_S)
        missing = await_partitions(self._consumer, cfg.topics, wait_s)
        if missing:
            log.warning(
                "kafka source: no partitions of %s on the broker after %g s; consuming "
                "them once they are created", ", ".join(missing), wait_s,
            )  # fmt: skip
        listener = _rebalance_listener(kafka, self._record_rebalance)
        self._consumer.subscribe(topics=list(cfg.topics), listener=listener)
        log.info("kafka source: %s", cfg.describe())

    # ------------------------------------------------------------------ main loop

    def run(self, stop: threading.Event, max_messages: int | None = None) -> int:
        """Feed the sink until ``stop`` is set (or ``max_messages`` were accepted).

        Returns the number of messages handed to the sink in batches it accepted (a batch
        retried after a failure counts once). A set ``stop`` is noticed between batches, so
        the current batch is always finished (stored and committed) or, during a retry
        backoff, left uncommitted for redelivery. Raises :class:`SinkRetriesExhaustedError` when
        ``sink_max_retries`` is set and exceeded.

        With ``prefetch`` the next poll runs on a helper thread while the sink stores the
        current batch (kafka-python decodes records in Python; the sink spends much of its
        time in DuckDB and Arrow, outside the GIL). Every consumer call still happens under
        one lock, one at a time; offsets are committed after the sink returns; a batch
        polled ahead but not handed over (sink failure, stop, ``max_messages``) is rewound
        (its partitions seek back to its first offsets), so nothing is skipped.
        """
        cfg = self._cfg
        handed = 0
        next_idle_report = time.monotonic()
        ahead: Future | None = None  # the next batch's poll, running beside the sink
        pool = ThreadPoolExecutor(1, thread_name_prefix="kafka-prefetch") if cfg.prefetch else None
        try:
            while not stop.is_set() and not self._closed:
                if self.on_turn is not None:
                    self.on_turn()
                if max_messages is not None and handed >= max_messages:
                    break
                try:
                    if ahead is not None:
                        polled, ahead = ahead.result(), None
                    else:
                        polled = self._poll(self._limit(max_messages, handed))
                except self._kafka_error as exc:
                    ahead = None  # a poll that raised moved no position
                    if not self._poll_failed(exc, stop):
                        break
                    continue
                if not polled:
                    if time.monotonic() >= next_idle_report:
                        self._report_lag()
                        next_idle_report = time.monotonic() + 1.0
                    continue
                payloads, origins, first, last = self._flatten(polled)
                if self.stats.consecutive_failures:
                    self.stats.redelivered += len(payloads)
                rest = self._limit(max_messages, handed + len(payloads))
                if pool is not None and rest > 0:
                    ahead = pool.submit(self._poll, rest)
                try:
                    self._sink.ingest_batch(payloads, origins)
                except Exception as exc:
                    if ahead is not None:
                        first = {**self._firsts(ahead), **first}
                        ahead = None
                    if not self._after_failure(exc, first, len(payloads), stop):
                        break
                    continue
                self.stats.consecutive_failures = 0
                self.stats.messages += len(payloads)
                self.stats.batches += 1
                handed += len(payloads)
                self._commit(last)
                self._report_lag()
            return handed
        finally:
            if ahead is not None:  # polled, never handed over: the next poll starts there
                self._seek(self._firsts(ahead))
            if pool is not None:
                pool.shutdown(wait=True)

    def _poll_failed(self, exc: Exception, stop: threading.Event) -> bool:
        """A poll raised: a retriable error (the broker away: a connection refused or lost,
        a timed-out offset look-up) is logged by type and the poll retried after one poll
        timeout, as kafka-python retries its connections; others are raised. False when
        ``stop`` was set meanwhile.

        Without this, a broker outage that caught the consumer in the middle of a request
        ended the service (``vfr-monitor: error: KafkaConnectionError``) in about one run
        in four of the outage test, where it must wait for the broker instead.
        """
        if not getattr(exc, "retriable", False):
            raise exc
        log.warning("kafka source: poll failed (%s); retrying", type(exc).__name__)
        return not stop.wait(self._cfg.poll_timeout_ms / 1000)

    def _limit(self, max_messages: int | None, handed: int) -> int:
        """Records the next poll may return."""
        cap = self._cfg.max_batch
        return cap if max_messages is None else min(cap, max_messages - handed)

    def _poll(self, limit: int) -> Mapping[Any, list[Any]]:
        """One poll (on the run thread, or ahead on the prefetch thread), then what the
        group's callbacks recorded meanwhile, then the rebuild of partitions it assigned.

        The sink is called with no lock of the source's held: forgetting a revoked
        partition's models flushes the pipeline (store writes, metrics)."""
        with self._lock:
            if self._closed:
                return {}
            polled = self._consumer.poll(timeout_ms=self._cfg.poll_timeout_ms, max_records=limit)
            actions = self._take_rebalances()
        self._tell_sink(actions)
        if self._to_position:
            held = self._sink.source_offsets()  # type: ignore[attr-defined]  # _to_position: a positioning sink
            with self._lock:
                if self._closed:
                    return {}
                polled = self._rebuild_assigned(polled, held)
        return polled

    def _firsts(self, ahead: Future) -> dict[Any, int]:
        """First offset per partition of a poll made ahead (waits for it). A poll that
        raised moved no position: nothing to rewind (the next poll meets the error)."""
        try:
            polled = ahead.result()
        except Exception:
            return {}
        return {tp: records[0].offset for tp, records in polled.items() if records}

    def _seek(self, offsets: Mapping[Any, int]) -> None:
        with self._lock:
            if self._closed:
                return
            for tp, offset in offsets.items():
                # A partition revoked meanwhile raises; its new owner starts from the
                # committed offset anyway.
                with contextlib.suppress(ValueError, self._kafka_error):
                    self._consumer.seek(tp, offset)

    # ------------------------------------------------------------------ rebalances

    def _record_rebalance(self, kind: str, partitions: Any) -> None:
        """A rebalance callback (kafka-python's IO thread): record, nothing else."""
        self._rebalances.append((kind, frozenset(partitions or ())))

    def _take_rebalances(self) -> list[tuple[str, Any]]:
        """On the polling thread, under the source's lock: the source's own bookkeeping of
        each recorded rebalance, in order; returns what the sink must be told."""
        actions: list[tuple[str, Any]] = []
        while self._rebalances:
            kind, tps = self._rebalances.popleft()
            parts = tuple(sorted((t.topic, t.partition) for t in tps))
            self.rebalance_log.append((kind, parts, threading.current_thread().name))
            if kind == "assigned":
                if tps:
                    log.info("kafka source: partitions assigned: %s", sorted(tps))
                if self._horizon_ms is not None:
                    self._to_position.update(tps)
                    # a restarted member may hold models of partitions the group gave away
                    owned = {(tp.topic, tp.partition) for tp in self._consumer.assignment()}
                    actions.append(("keep", owned))
                continue
            for tp in tps:  # revoked, or lost (evicted: the group gave them away already)
                self._committed.pop(tp, None)
                self._to_position.discard(tp)
                if self._rebuilding.pop(tp, None) is not None:
                    log.info("kafka source: rebuild of %s abandoned: partition %s", tp, kind)
            if tps:
                log.info("kafka source: partitions %s: %s", kind, sorted(tps))
                if self._horizon_ms is not None:  # their new owner rebuilds and exports them
                    actions.append(("forget", [(tp.topic, tp.partition) for tp in tps]))
        return actions

    def _tell_sink(self, actions: list[tuple[str, Any]]) -> None:
        """The sink's side of the rebalances, with no lock of the source's held."""
        for kind, arg in actions:
            if kind == "keep":
                dropped = self._sink.keep_partitions(arg)  # type: ignore[attr-defined]  # rebalances: a partitioned sink
                if dropped:
                    log.info("kafka source: %d models of partitions owned elsewhere dropped",
                             len(dropped))  # fmt: skip
            else:
                self._sink.forget_partitions(arg)  # type: ignore[attr-defined]  # as above

    def _rebuild_assigned(
        self, polled: Mapping[Any, list[Any]], held: Mapping[tuple[str, int], int]
    ) -> Mapping[Any, list[Any]]:
        """Replay what the sink lacks of each newly assigned partition, before going on.

        A partition handed over by the group (its previous owner died, or left) resumes at
        the group's committed offset, but this member's store never saw the history before
        it: its windows and audit cohorts would be computed from a fraction of the data.
        So the partition is sought back to the later of (a) the first offset within the
        horizon (``offsets_for_times(now - horizon)``) and (b) the offset after the last
        message the sink already holds (:meth:`HistorySink.source_offsets`, kept in the
        batches' own transactions). Records fetched from the committed offset in this poll
        are dropped: they are fetched again, in order, after the replay. Replayed records the
        sink already holds are deduplicated there. Until the replay reaches the committed
        offset the source reports itself not ready and commits nothing for that partition,
        so the group's offset never moves back. A member that restarts on its own
        partitions holds them up to the committed offset already: nothing is replayed.
        """
        consumer = self._consumer
        assigned = consumer.assignment()
        tps = [tp for tp in self._to_position if tp in assigned]
        self._to_position.clear()
        if not tps:
            return polled
        polled = dict(polled)
        assert self._horizon_ms is not None
        since = int(time.time() * 1000) - self._horizon_ms
        timeout = self._cfg.request_timeout_ms
        by_time = consumer.offsets_for_times({tp: since for tp in tps}, timeout_ms=timeout)
        for tp in tps:
            committed = consumer.committed(tp, timeout_ms=timeout)
            if committed is None:  # a new group: consumption starts at the reset position
                continue
            found = by_time.get(tp)
            start = committed if found is None else min(found.offset, committed)
            start = max(start, held.get((tp.topic, tp.partition), 0))
            if start >= committed:
                continue
            consumer.seek(tp, start)
            polled.pop(tp, None)
            self._rebuilding[tp] = committed
            log.info(
                "kafka source: rebuilding %s:%d from offset %d (committed %d): %d messages "
                "of history this store lacks", tp.topic, tp.partition, start, committed,
                committed - start,
            )  # fmt: skip
        return polled

    def _flatten(
        self, polled: Mapping[Any, list[Any]]
    ) -> tuple[list[bytes | None], list[Origin], dict[Any, int], dict[Any, tuple[int, int]]]:
        """One poll -> payloads, origins, first offset and (last offset, epoch) per partition."""
        payloads: list[bytes | None] = []
        origins: list[Origin] = []
        first: dict[Any, int] = {}
        last: dict[Any, tuple[int, int]] = {}
        for tp, records in polled.items():
            if not records:
                continue
            topic, partition = tp.topic, tp.partition
            for r in records:
                value = r.value
                if value is None:
                    self.stats.null_values += 1
                payloads.append(value)
                origins.append(Origin(topic, partition, r.offset))
            first[tp] = records[0].offset
            epoch = records[-1].leader_epoch
            last[tp] = (records[-1].offset, -1 if epoch is None else epoch)
        return payloads, origins, first, last

    def _after_failure(
        self, exc: Exception, first: Mapping[Any, int], n: int, stop: threading.Event
    ) -> bool:
        """Rewind to the failed batch and back off; False when ``run`` should return."""
        cfg = self._cfg
        self.stats.sink_failures += 1
        self.stats.consecutive_failures += 1
        attempt = self.stats.consecutive_failures
        self._seek(first)
        if cfg.sink_max_retries is not None and attempt > cfg.sink_max_retries:
            raise SinkRetriesExhaustedError(
                f"sink failed {attempt} times in a row on a batch of {n} messages; "
                "offsets not committed"
            ) from exc
        delay = min(cfg.sink_retry_backoff_ms * 2 ** (attempt - 1), cfg.sink_retry_backoff_max_ms)
        # Only the exception's type: its text may quote record values (a database error
        # naming a key, a conversion error naming a value), and logs carry none.
        log.warning(
            "kafka source: sink failed on a batch of %d messages (attempt %d): %s; "
            "offsets not committed, redelivering in %.1f s",
            n,
            attempt,
            type(exc).__name__,
            delay / 1000,
        )
        return not stop.wait(delay / 1000)

    def _commit(self, last: Mapping[Any, tuple[int, int]]) -> None:
        """Synchronously commit ``last + 1`` for each partition of an accepted batch."""
        # Under the lock as a whole: with prefetch, the poll running beside the sink may have
        # revoked partitions or started rebuilds (the listener's bookkeeping). A partition
        # revoked meanwhile is left out: its commit would fail, and fail the others' with it;
        # its new owner resumes at the group's offset and the sinks deduplicate.
        with self._lock:
            assigned = self._consumer.assignment()
            last = {tp: v for tp, v in last.items() if tp in assigned}
            for tp, (offset, _) in list(last.items()):
                target = self._rebuilding.get(tp)
                if target is None:
                    continue
                if offset + 1 < target:  # still replaying: the group's offset must not go back
                    last = {k: v for k, v in last.items() if k != tp}
                else:
                    del self._rebuilding[tp]
                    log.info("kafka source: rebuilt %s:%d up to offset %d", tp.topic,
                             tp.partition, target)  # fmt: skip
            if not last:
                return
            # kafka-python 3: OffsetAndMetadata(offset, metadata, leader_epoch); the epoch of
            # the last record lets the broker fence a commit based on a stale leader (KIP-320).
            offsets = {
                tp: self._offset_and_metadata(offset + 1, "", epoch)
                for tp, (offset, epoch) in last.items()
            }
            try:
                self._consumer.commit(offsets, timeout_ms=self._cfg.commit_timeout_ms)
            except self._kafka_error as exc:
                # E.g. a rebalance took the partition away while the sink ran. The batch is
                # stored; whoever consumes the partition next redelivers it and the sink
                # deduplicates. A timed-out commit is superseded by the next batch's commit.
                self.stats.commit_failures += 1
                log.warning("kafka source: offset commit failed (%s): %s", type(exc).__name__,
                            exc)  # fmt: skip
                return
        self.stats.commits += 1
        for tp, (offset, _) in last.items():
            self._committed[tp] = offset + 1

    def _report_lag(self) -> None:
        if self._on_lag is None:
            return
        try:
            self._on_lag(self.lag())
        except Exception:
            # Monitoring must not stop consumption.
            log.exception("kafka source: lag report failed")

    # ------------------------------------------------------------------ introspection

    def health(self) -> tuple[bool, str]:
        """(healthy, reason): whether the source can consume, for the service's /readyz.

        Not healthy while the consumer holds no established broker connection (read at each
        call, from any thread, without waiting for the poll loop: see
        :func:`_broker_connected_probe`), or once the sink has failed
        ``unready_after_sink_failures`` times in a row on one batch (it is still retried,
        with backoff, and nothing of it is committed).

        A broker that refuses or closes connections shows at once; one that goes silent
        when kafka-python closes the connection after ``request_timeout_ms`` without an
        answer (a fetch or a heartbeat is always in flight), hence within
        ``broker_unreachable_after_s``, which the configuration checks.
        """
        failures = self.stats.consecutive_failures
        if failures >= self._cfg.unready_after_sink_failures:
            return False, f"sink failing ({failures} attempts in a row)"
        if self._rebuilding:
            return False, f"rebuilding {len(self._rebuilding)} partition(s) from the topic"
        if not self._closed and not self._broker_connected():
            return False, "broker unreachable"
        return True, "ok"

    def broker_reachable(self) -> bool:
        """Whether the consumer holds an established broker connection (any thread, never
        blocking): the service's liveness does not count records waiting behind an outage."""
        return self._closed or bool(self._broker_connected())

    def lag(self, *, exact: bool = False) -> LagReport:
        """Unprocessed messages per assigned partition: high-water mark - next offset.

        By default the high-water mark is the one the consumer's own fetches brought back
        (``consumer.highwater``): no extra request, so it is cheap enough to report after
        every batch, but kafka-python updates it only when it starts draining that
        partition's fetched records. A partition whose fetched data still waits behind
        another partition's therefore shows the mark of its previous fetch: the figure is a
        lower bound, at most one fetch round behind. Partitions not fetched yet, and all of
        them with ``exact=True`` (one ListOffsets request; for scrapes, not per batch), ask
        the broker (``end_offsets``).

        The next offset is this source's last commit, else the consumer's position (the
        group's committed offset, or the reset position). Partitions not assigned to this
        member are absent.
        """
        with self._lock:
            if self._closed:
                return {}
            consumer = self._consumer
            assigned = list(consumer.assignment())
            high = {tp: None if exact else consumer.highwater(tp) for tp in assigned}
            unknown = [tp for tp, h in high.items() if h is None]
            if unknown:
                timeout = self._cfg.request_timeout_ms
                high.update(consumer.end_offsets(unknown, timeout_ms=timeout))
            out: LagReport = {}
            for tp in assigned:
                done = self._committed.get(tp)
                if done is None:
                    done = consumer.position(tp, timeout_ms=self._cfg.request_timeout_ms)
                end = high.get(tp)
                if done is None or end is None:
                    continue
                out[(tp.topic, tp.partition)] = max(0, int(end) - int(done))
            return out

    def close(self) -> None:
        """Leave the group without committing anything not yet accepted by the sink."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._consumer.close(autocommit=False)

    def __enter__(self) -> KafkaSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------- JSON encoding


# ---------------------------------------------------------------------- helpers for tests,
# the demo and the ingest benchmark
