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
is the pipeline's (``[service] max_payload_bytes``, one setting for every source),
which dead-letters an oversized payload with the reason ``oversized``.

kafka-python is imported lazily, so the embedded-only path does not need it,
and its import-time DeprecationWarnings are silenced in one place. Without the
``crc32c`` C extension kafka-python checks record batches in pure Python,
about five times slower: a warning says so once.

Also here: :func:`produce_records` (tests, demo, benchmark),
:func:`ensure_topic` and :func:`consume_raw` (the benchmark's baseline).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import functools
import json
import logging
import math
import threading
import time
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from consumers.config import KafkaConfig
from monitor.pipeline import Origin

log = logging.getLogger(__name__)

#: Unprocessed messages per (topic, partition).
LagReport = dict[tuple[str, int], int]


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
    try:
        import crc32c  # noqa: F401
    except ImportError:
        log.warning(
            "kafka source: the crc32c package is not installed; kafka-python verifies "
            "record batches in pure Python (about 5x slower consumption)"
        )
    return kafka


class Sink(Protocol):
    """What a source feeds: the pipeline's decode -> validate -> store -> window step."""

    def ingest_batch(self, payloads: list[bytes | None], origins: list[Origin]) -> None:
        """Decode, validate, store (one DuckDB transaction) and update windows. When it
        returns, the batch is durable; if it raises, nothing of the batch was committed."""


class SinkRetriesExhaustedError(RuntimeError):
    """The sink failed ``sink_max_retries + 1`` times in a row on the same batch."""


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


def _rebalance_listener(kafka: types.ModuleType, committed: dict[Any, int]) -> Any:
    """A listener forgetting lag bookkeeping of revoked partitions (it runs inside ``poll``).

    Built here because kafka-python insists on a ConsumerRebalanceListener subclass and is
    imported lazily.
    """

    class _Listener(kafka.ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            for tp in revoked:
                committed.pop(tp, None)
            if revoked:
                log.info("kafka source: partitions revoked: %s", sorted(revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            if assigned:
                log.info("kafka source: partitions assigned: %s", sorted(assigned))

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
        "heartbeat_interval_ms": max(100, min(3_000, cfg.session_timeout_ms // 3)),
        "max_poll_interval_ms": cfg.max_poll_interval_ms,
    }


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
    ) -> None:
        kafka = _kafka()
        self._cfg = cfg
        self._sink = sink
        self._on_lag = on_lag
        self._offset_and_metadata = kafka.structs.OffsetAndMetadata
        self._kafka_error = kafka.errors.KafkaError
        self._lock = threading.RLock()
        #: next offset to process per partition, as last committed by this source
        self._committed: dict[Any, int] = {}
        self._closed = False
        self.stats = KafkaSourceStats()
        self._consumer = kafka.KafkaConsumer(**consumer_kwargs(cfg))
        listener = _rebalance_listener(kafka, self._committed)
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
        """
        cfg = self._cfg
        handed = 0
        next_idle_report = time.monotonic()
        while not stop.is_set() and not self._closed:
            if max_messages is not None and handed >= max_messages:
                break
            limit = (
                cfg.max_batch if max_messages is None else min(cfg.max_batch, max_messages - handed)
            )
            with self._lock:
                polled = self._consumer.poll(timeout_ms=cfg.poll_timeout_ms, max_records=limit)
            if not polled:
                if time.monotonic() >= next_idle_report:
                    self._report_lag()
                    next_idle_report = time.monotonic() + 1.0
                continue
            payloads, origins, first, last = self._flatten(polled)
            if self.stats.consecutive_failures:
                self.stats.redelivered += len(payloads)
            try:
                self._sink.ingest_batch(payloads, origins)
            except Exception as exc:
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
        with self._lock:
            for tp, offset in first.items():
                # A partition revoked meanwhile raises; its new owner starts from the
                # committed offset anyway.
                with contextlib.suppress(ValueError, self._kafka_error):
                    self._consumer.seek(tp, offset)
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
        # kafka-python 3: OffsetAndMetadata(offset, metadata, leader_epoch); the epoch of the
        # last record lets the broker fence a commit based on a stale leader (KIP-320).
        offsets = {
            tp: self._offset_and_metadata(offset + 1, "", epoch)
            for tp, (offset, epoch) in last.items()
        }
        try:
            with self._lock:
                self._consumer.commit(offsets, timeout_ms=self._cfg.commit_timeout_ms)
        except self._kafka_error as exc:
            # E.g. a rebalance took the partition away while the sink ran. The batch is
            # stored; whoever consumes the partition next redelivers it and the sink
            # deduplicates. A timed-out commit is superseded by the next batch's commit.
            self.stats.commit_failures += 1
            log.warning("kafka source: offset commit failed (%s): %s", type(exc).__name__, exc)
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
                if done is None or high.get(tp) is None:
                    continue
                out[(tp.topic, tp.partition)] = max(0, int(high[tp]) - int(done))
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


def _rfc3339(value: dt.datetime) -> str:
    """RFC 3339 with a zone: naive datetimes are taken as UTC (pandas' usual meaning)."""
    if value.tzinfo is None:
        return value.isoformat() + "Z"
    return value.isoformat()


def _missing(value: Any) -> bool:
    """NaN, NaT and pd.NA-like values: a key with such a value is omitted."""
    if isinstance(value, float | np.floating):
        return math.isnan(value)
    if isinstance(value, np.datetime64 | np.timedelta64):
        return bool(np.isnat(value))
    # pandas NaT / NA without importing pandas: both are singletons unequal to themselves.
    return type(value).__name__ in ("NaTType", "NAType")


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _rfc3339(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.datetime64):
        return str(np.datetime_as_string(value, unit="us")) + "Z"
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, decimal.Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _finite(value: Any) -> Any:
    """Nested non-finite floats -> null, so the output is standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


_PLAIN = frozenset({str, int, bool, type(None)})
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_json_default)


def encode_record(record: Mapping[str, Any]) -> bytes:
    """A record as compact UTF-8 JSON, the wire format of the scored-discharge topic.

    Top-level missing values (None stays null; NaN/NaT are omitted, as an empty CSV cell
    would be), datetimes become RFC 3339 strings (naive = UTC, written with "Z"), numpy
    scalars become plain numbers, nested NaN/inf become null.
    """
    clean = {}
    for key, value in record.items():
        if type(value) in _PLAIN:  # the common case, checked cheaply (producer hot path)
            clean[key] = value
            continue
        if _missing(value):
            continue
        if isinstance(value, Mapping | list | tuple):
            value = _finite(value)
        clean[key] = value
    return _ENCODER.encode(clean).encode()


# ---------------------------------------------------------------------- helpers for tests,
# the demo and the ingest benchmark


def produce_records(
    bootstrap: str,
    topic: str,
    records: Iterable[Mapping[str, Any] | bytes | None],
    *,
    partitions_key: str = "model_id",
    linger_ms: int = 20,
    batch_size: int = 512 * 1024,
    compression_type: str | None = None,
    acks: str | int = "all",
    timeout_s: float = 120.0,
) -> int:
    """Publish records as JSON (bytes and None go out as they are); returns the count.

    The key is ``record[partitions_key]`` (the model id by default) so one model's records
    stay in order within one partition; raw bytes go out without a key, None as a tombstone
    (null value) with an empty key. Big batches and a short linger make this the fast
    path for loading a topic; ``compression_type`` is "gzip" or None (lz4/zstd/snappy need
    extra packages). Raises RuntimeError if any record was not acknowledged.
    """
    kafka = _kafka()
    kwargs: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "linger_ms": linger_ms,
        "batch_size": batch_size,
        "compression_type": compression_type,
        "acks": acks,
        "max_request_size": max(1_048_576, 2 * batch_size),
    }
    if acks not in ("all", -1):
        kwargs["enable_idempotence"] = False  # idempotence requires acks=all
    producer = kafka.KafkaProducer(**kwargs)
    errors: list[BaseException] = []
    n = 0
    try:
        for rec in records:
            if rec is None:
                # kafka-python refuses a record with neither key nor value: a tombstone
                # (null value) goes out with an empty key.
                value, key = None, b""
            elif isinstance(rec, bytes | bytearray | memoryview):
                value, key = bytes(rec), None
            else:
                value = encode_record(rec)
                k = rec.get(partitions_key)
                key = None if k is None else str(k).encode()
            producer.send(topic, value=value, key=key).add_errback(errors.append)
            n += 1
        producer.flush(timeout=timeout_s)
    finally:
        producer.close(timeout=10)
    if errors:
        raise RuntimeError(f"{len(errors)} of {n} records not delivered to {topic}: {errors[0]!r}")
    return n


def ensure_topic(
    bootstrap: str, topic: str, partitions: int = 3, *, replication_factor: int = 1
) -> bool:
    """Create ``topic`` unless it exists and wait until every partition has a leader.

    Returns True if it was created. An existing topic is left as it is (its partition
    count is not changed).
    """
    kafka = _kafka()
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, client_id="vfr-monitor-admin")
    try:
        created = True
        try:
            admin.create_topics(
                {topic: {"num_partitions": partitions, "replication_factor": replication_factor}}
            )
        except kafka.errors.TopicAlreadyExistsError:
            created = False
        admin.wait_for_topics([topic], timeout_ms=30_000)
        return created
    finally:
        admin.close()


def consume_raw(
    bootstrap: str, topic: str, group_id: str, n_messages: int, max_batch: int
) -> float:
    """Seconds to consume ``n_messages`` with the source's consumer settings, doing nothing else.

    The baseline of the ingest benchmark: same group consumer, same poll size, offsets
    committed once at the end; the clock starts at the first poll (so it includes joining
    the group and the first fetch) and stops after the commit.
    """
    kafka = _kafka()
    cfg = KafkaConfig(bootstrap_servers=(bootstrap,), topics=(topic,), group_id=group_id,
                      max_batch=max_batch)  # fmt: skip
    consumer = kafka.KafkaConsumer(topic, **consumer_kwargs(cfg))
    try:
        got = 0
        start = time.perf_counter()
        deadline = time.monotonic() + 600
        while got < n_messages:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {got} of {n_messages} messages in 600 s")
            polled = consumer.poll(timeout_ms=cfg.poll_timeout_ms,
                                   max_records=min(max_batch, n_messages - got))  # fmt: skip
            got += sum(len(records) for records in polled.values())
        consumer.commit()
        return time.perf_counter() - start
    finally:
        consumer.close(autocommit=False)
