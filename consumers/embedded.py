"""Embedded source: replay records in-process, the default when no Kafka is configured.

Why it encodes to JSON bytes instead of handing dicts over: the sink then runs exactly the
decode -> validate -> dead-letter path that Kafka messages take, so a record replayed from
a file is judged byte for byte like the same record arriving from a broker, and a replay
exercises the real pipeline (the demo and the tests rely on that).

Inputs: an iterable of dicts, a DataFrame, or a file path: ``.csv``, ``.parquet``/``.pq``
(each row becomes a JSON object) or ``.jsonl``/``.ndjson`` (each non-blank line is handed on
as it is, unparsed, so a broken line reaches the dead-letter store like a broken Kafka
message). Row conversion rules:

* a missing cell (NaN, None, NaT, empty CSV cell) omits the key, as a producer leaving out
  an optional field would;
* datetime columns become RFC 3339 strings in UTC with a "Z"; naive datetimes are taken as
  UTC. Text columns (e.g. CSV ``event_time``) are passed on unchanged, so a time without a
  zone is rejected by the validator rather than silently given one;
* CSV is read as text so ids and group codes keep their spelling ("01" stays "01");
  ``score``, ``label``, ``decision`` and ``schema_version`` are made numbers when they
  parse as numbers (otherwise left as text for the validator to reject), and a
  ``features`` cell holding a JSON object is parsed.

Origins are synthetic: (``topic_name``, partition 0, running offset from 0), so dead
letters of a replay point at the row position in the input.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from consumers.base import LagReport, Origin, Sink, SinkRetriesExhaustedError
from consumers.encoding import encode_record
from monitor.config.errors import ConfigError, MissingInputError, UsageError
from monitor.config.sources import EmbeddedConfig

log = logging.getLogger(__name__)

Records: TypeAlias = Iterable[Mapping[str, Any]] | pd.DataFrame | str | Path

#: CSV columns that are numbers in the schema (everything else stays text).
_CSV_NUMERIC = ("score", "label", "decision", "schema_version")
#: Batches per second aimed at when rate-limited, so a slow replay streams smoothly.
_BATCHES_PER_SECOND = 10


@dataclass
class EmbeddedSourceStats:
    """Counters for the exporter; updated only by the thread running ``run``."""

    messages: int = 0
    batches: int = 0
    sink_failures: int = 0


class EmbeddedSource:
    """Feed ``sink`` from in-process records, optionally at a fixed rate (records/s; None
    or 0: as fast as it goes, as ``--rate 0`` means on every command).

    A mistake in the arguments (a negative rate, a file that is not there) raises the
    project's own error types (:mod:`monitor.config.errors`), so the command line shows
    their message; a builtin exception's message would be withheld there.

    ``run`` may be called repeatedly: each call continues where the last stopped, and a
    batch interrupted by ``stop`` during a retry backoff is handed over again next time.
    """

    def __init__(
        self,
        records: Records,
        sink: Sink,
        *,
        rate: float | None = None,
        batch_size: int = 1000,
        topic_name: str = "embedded",
        sink_max_retries: int = 3,
        sink_retry_backoff_ms: int = 200,
    ) -> None:
        if rate is not None and not (rate >= 0 and math.isfinite(rate)):
            raise ConfigError(
                "embedded.rate", f"records per second must be >= 0 (0: unpaced), got {rate}"
            )
        if batch_size < 1:
            raise ConfigError("embedded.batch_size", f"must be >= 1, got {batch_size}")
        if isinstance(records, str | Path):
            _check_file(Path(records))  # now, not at the first batch: before anything starts
        rate = rate or None
        self._sink = sink
        self._rate = rate
        # Rate-limited: about _BATCHES_PER_SECOND batches a second rather than one burst of
        # batch_size records every batch_size / rate seconds.
        self._chunk = batch_size
        if rate is not None:
            self._chunk = max(1, min(batch_size, math.ceil(rate / _BATCHES_PER_SECOND)))
        self._topic = topic_name
        self._max_retries = sink_max_retries
        self._backoff_s = sink_retry_backoff_ms / 1000
        self._payloads: Iterator[bytes | None] = _payloads(records, self._chunk)
        self._pending: list[bytes | None] = []
        self._offset = 0
        #: True once the input is used up (``run`` then returns 0 at once).
        self.exhausted = False
        self.stats = EmbeddedSourceStats()
        #: called at each turn of :meth:`run`'s loop (the service's liveness); cheap
        self.on_turn: Callable[[], None] | None = None

    @classmethod
    def from_config(
        cls, cfg: EmbeddedConfig, sink: Sink, records: Records | None = None
    ) -> EmbeddedSource:
        """A source for ``records``, or for ``cfg.path`` when no records are given."""
        source = records if records is not None else cfg.path
        if source is None:
            raise ConfigError("embedded.path", "no records given and no file to replay")
        return cls(
            source,
            sink,
            rate=cfg.rate,
            batch_size=cfg.batch_size,
            topic_name=cfg.topic_name,
            sink_max_retries=cfg.sink_max_retries,
            sink_retry_backoff_ms=cfg.sink_retry_backoff_ms,
        )

    def run(self, stop: threading.Event, max_messages: int | None = None) -> int:
        """Replay until the input ends, ``stop`` is set or ``max_messages`` were accepted.

        Returns the number of records handed to the sink in batches it accepted. With a
        rate, the sleeps follow a monotonic schedule (record k is due at k / rate seconds
        after the start of this call), so sink time and sleep rounding do not accumulate.
        Raises :class:`SinkRetriesExhaustedError` after ``sink_max_retries`` failed retries
        of one batch.
        """
        start = time.monotonic()
        handed = 0
        while not stop.is_set():
            if self.on_turn is not None:
                self.on_turn()
            if max_messages is not None and handed >= max_messages:
                break
            limit = self._chunk if max_messages is None else min(self._chunk, max_messages - handed)
            batch = self._take(limit)
            if not batch:
                self.exhausted = True
                break
            if not self._deliver(batch, stop):
                self._pending = batch + self._pending  # hand it over again next run
                break
            handed += len(batch)
            if self._rate is not None:
                delay = start + handed / self._rate - time.monotonic()
                if delay > 0 and stop.wait(delay):
                    break
        return handed

    def _take(self, n: int) -> list[bytes | None]:
        batch = self._pending[:n]
        self._pending = self._pending[n:]
        if len(batch) < n:
            batch.extend(islice(self._payloads, n - len(batch)))
        return batch

    def _deliver(self, batch: list[bytes | None], stop: threading.Event) -> bool:
        """Hand one batch to the sink, retrying with backoff; False if stopped meanwhile."""
        origins = [Origin(self._topic, 0, self._offset + i) for i in range(len(batch))]
        attempt = 0
        while True:
            try:
                self._sink.ingest_batch(batch, origins)
                break
            except Exception as exc:
                attempt += 1
                self.stats.sink_failures += 1
                if attempt > self._max_retries:
                    raise SinkRetriesExhaustedError(
                        f"sink failed {attempt} times in a row on a batch of {len(batch)} "
                        f"replayed records (offsets {self._offset}..)"
                    ) from exc
                delay = self._backoff_s * 2 ** (attempt - 1)
                log.warning(  # the type only: an exception's text may quote record values
                    "embedded source: sink failed on a batch of %d records (attempt %d): "
                    "%s; retrying in %.1f s",
                    len(batch),
                    attempt,
                    type(exc).__name__,
                    delay,
                )
                if stop.wait(delay):
                    return False
        self._offset += len(batch)
        self.stats.messages += len(batch)
        self.stats.batches += 1
        return True

    def lag(self) -> LagReport:
        """Unknown for a replay (the input may be a generator): always empty."""
        return {}

    def close(self) -> None:
        """Nothing to release; present so the pipeline can treat both sources alike."""


# ---------------------------------------------------------------------- input -> payloads


def _payloads(records: Records, chunk: int) -> Iterator[bytes | None]:
    """Lazily encode the input, reading files and frames ``chunk`` rows at a time."""
    if isinstance(records, pd.DataFrame):
        for lo in range(0, len(records), chunk):
            yield from frame_payloads(records.iloc[lo : lo + chunk])
    elif isinstance(records, str | Path):
        yield from _file_payloads(Path(records), chunk)
    else:
        for rec in records:
            if rec is None or isinstance(rec, bytes):
                yield rec
            else:
                yield encode_record(rec)


#: File types the embedded source replays (by suffix, lower case).
FILE_TYPES = (".csv", ".parquet", ".pq", ".jsonl", ".ndjson")


def _check_file(path: Path) -> None:
    """A replay file the user named must exist and be of a type this source reads."""
    if not path.is_file():
        raise MissingInputError("embedded.path", f"no such file: {path}")
    if path.suffix.lower() not in FILE_TYPES:
        raise UsageError(
            "embedded.path", f"unsupported file type {path.suffix!r}; use .csv, .parquet or .jsonl"
        )


def _file_payloads(path: Path, chunk: int) -> Iterator[bytes | None]:
    _check_file(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        reader = pd.read_csv(
            path, dtype=str, keep_default_na=False, na_values=[""], chunksize=chunk
        )
        with reader:
            for frame in reader:
                yield from frame_payloads(_type_csv(frame))
    elif suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        with pq.ParquetFile(path) as pf:
            for rb in pf.iter_batches(batch_size=chunk):
                yield from frame_payloads(rb.to_pandas())
    elif suffix in (".jsonl", ".ndjson"):
        with path.open("rb") as fh:
            for line in fh:
                line = line.rstrip(b"\r\n")
                if line.strip():
                    yield line
    else:  # pragma: no cover (_check_file refused it)
        raise UsageError("embedded.path", f"unsupported file type {suffix!r}")


def _type_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """Text CSV cells -> numbers where the schema has numbers, JSON for ``features``."""
    out = frame.copy()
    for name in _CSV_NUMERIC:
        if name not in out.columns:
            continue
        text = out[name]
        num = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
        values = text.to_numpy(dtype=object).copy()
        for i in np.flatnonzero(~np.isnan(num)):
            v = float(num[i])
            values[i] = int(v) if name != "score" and v.is_integer() else v
        out[name] = pd.Series(values, index=out.index, dtype=object)
    if "features" in out.columns:
        out["features"] = out["features"].map(_maybe_json_object)
    return out


def _maybe_json_object(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def frame_payloads(frame: pd.DataFrame) -> list[bytes]:
    """Each row as the JSON payload a producer would send (rules in the module docstring)."""
    columns: list[tuple[str, list[Any], np.ndarray]] = []
    for name in frame.columns:
        col = frame[name]
        missing = col.isna().to_numpy()
        if isinstance(col.dtype, pd.DatetimeTZDtype):
            col = col.dt.tz_convert("UTC").dt.tz_localize(None)
        if pd.api.types.is_datetime64_dtype(col.dtype):
            values = col.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ").tolist()
        else:
            values = col.tolist()
        columns.append((str(name), values, missing))
    out = []
    for i in range(len(frame)):
        row = {name: values[i] for name, values, missing in columns if not missing[i]}
        out.append(encode_record(row))
    return out
