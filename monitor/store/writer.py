"""The single writer of the service's DuckDB file: every INSERT, UPDATE and DELETE.

DuckDB allows one read-write process per file, so the service opens it once, here;
readers on other threads use cursors of this connection (``store.cursor()``) with the
functions of :mod:`monitor.store.queries`. The schema is versioned
(:mod:`monitor.store.migrations`) and upgraded when the file is opened.

Why batches and not executemany: an ingest batch of thousands of records is
inserted as one Arrow/pandas scan inside one transaction, together with its
dead letters, its evaluations and its events, so a crash leaves either all of
it or none of it (and Kafka offsets are committed only afterwards).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import math
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from consumers.base import Origin
from monitor.config import MonitorConfig, StartupError
from monitor.core.jsonable import to_json
from monitor.core.locks import named_lock
from monitor.core.results import EvaluationRecord
from monitor.store import fleet, migrations, queries
from monitor.store.codec import (
    CohortRelease,
    ModelStateRow,
    encode_cell_state,
    encode_cohort_release,
    encode_evaluation,
)
from monitor.store.key_index import KeyHashes, conflicting_rows
from monitor.store.results_messages import (
    ResultMessage,
    axis_result_message,
    event_message,
    window_result_message,
)
from monitor.store.rows import insert_frame, update_else_upsert


@dataclass(frozen=True)
class DeadLetter:
    """An invalid input: why, where it came from, and the raw payload (kept in the DB only)."""

    reason: str
    payload: bytes | None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class IngestOutcome:
    inserted: int
    duplicates: int  # identical redeliveries (silent no-ops)
    dead_letters: int
    new_mask: np.ndarray  # per valid row: True when stored now (not a duplicate)
    seq: np.ndarray  # arrival sequence number per valid row; -1 for duplicates
    #: per valid row: same (model_id, record_id) as a stored (or earlier) record, other
    #: content; the stored record is kept and the caller dead-letters this one
    conflicts: np.ndarray | None = None
    #: dead letters stored now, by reason (a redelivered one is not stored or counted again)
    rejected: dict[str, int] = field(default_factory=dict)


#: Environment variable holding the dead-letter HMAC key (hex) when the config has none.
PAYLOAD_KEY_ENV = "VFR_PAYLOAD_HASH_KEY"


def _arrow(col: pd.Series) -> pa.Array:
    """A string column (missing values as null) as an Arrow string array."""
    values = col.to_numpy(dtype=object) if col.dtype == object else col
    return pa.array(values, pa.string(), from_pandas=True)


def _connect_private(path: Path) -> duckdb.DuckDBPyConnection:
    """Open the DuckDB file readable by this user only: a directory it creates gets mode
    0700, the file 0600; the process's umask gains 077 so the WAL and DuckDB's temporary
    files are private too (they hold the same patient records)."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
    os.umask(os.umask(0o077) | 0o077)
    conn = duckdb.connect(str(path))
    if path.exists():
        os.chmod(path, 0o600)
    return conn


_F = TypeVar("_F", bound=Callable[..., Any])
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _serialised(method: _F) -> _F:
    """Run a :class:`Store` method under the store's lock.

    Why: a DuckDB connection serves one call at a time and *refuses* a second one from
    another thread (``ResourceInUseException``: "connection is busy with another call")
    instead of waiting. The pipeline's reads used to rely on the pipeline lock alone
    while the retention job, the fleet view and job-run writes held only the store lock:
    a start-up retention run beside a partition assignment's ``source_offsets`` stopped
    a restarted service. The lock is reentrant: inside a transaction it costs nothing.
    Other threads read through :meth:`Store.cursor` (a connection of their own)."""

    @functools.wraps(method)
    def locked(self: Store, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(_F, locked)


class Store:
    """The one DuckDB connection of the service, with typed helpers for each table."""

    def __init__(self, path: str | Path, config: MonitorConfig):
        self.path = Path(path)
        self.config = config
        self.attributes = [a.name for a in config.attributes]
        #: the column of each attribute in the tables :meth:`ingest_table` takes (by
        #: position: an attribute may be named like any other column)
        self.group_columns = [f"attr_{i}" for i in range(len(self.attributes))]
        #: recorded with every event: which decision rule the verdicts were about
        self._decision_id = config.decision_id()
        #: write every stored result to ``results_outbox`` too (a fleet member: see
        #: monitor.service.outbox_relay); off for a single service and for tests
        self.outbox = False
        try:
            self._conn = _connect_private(self.path)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            raise StartupError(
                f"the DuckDB file {self.path} is in use by another process (DuckDB allows "
                "one writer per file): stop that process or give another --db"
            ) from None
        # validated by the config's pattern, so it can be spliced into the statement
        self._conn.execute(f"SET memory_limit = '{config.service.store.memory_limit}'")
        self._conn.execute(
            f"SET checkpoint_threshold = '{config.service.store.checkpoint_wal}'"
        )
        self._lock = named_lock("store", reentrant=True)  # one writer transaction at a time
        migrations.migrate(self._conn)
        # job_runs ids are taken by the scheduler's threads outside any ingest transaction
        # (autocommit on their own cursors), so a rolled-back ingest must not rewind them:
        # counted up from the stored maximum once, here, and never reset
        self._next_job = self._scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM job_runs")
        self._payload_key = self._load_payload_key()
        self._reset_counters()
        self._load_keys()

    def _load_payload_key(self) -> bytes:
        """The dead-letter HMAC key: [service.dead_letters] payload_hash_key, else
        $VFR_PAYLOAD_HASH_KEY, else a random 32-byte key generated once and kept in this
        file's ``secrets`` table (so hashes of one file stay comparable across restarts)."""
        configured = self.config.service.dead_letters.payload_hash_key or os.environ.get(
            PAYLOAD_KEY_ENV, ""
        )
        if configured:
            try:
                return bytes.fromhex(configured)
            except ValueError:
                raise ValueError(f"{PAYLOAD_KEY_ENV}: not a hex key") from None
        row = self._conn.execute(
            "SELECT value FROM secrets WHERE name = 'payload_hmac_key'"
        ).fetchone()
        if row is not None:
            return bytes(row[0])
        key = secrets.token_bytes(32)
        self._conn.execute(
            "INSERT INTO secrets VALUES ('payload_hmac_key', ?)", [key]
        )
        return key

    def payload_hmac(self, payload: bytes | None) -> str | None:
        """HMAC-SHA256 of a payload under the store's key (hex); None for no payload."""
        if payload is None:
            return None
        return hmac.new(self._payload_key, bytes(payload), hashlib.sha256).hexdigest()

    def _load_keys(self) -> None:
        h = self._conn.execute("SELECT hash(model_id, record_id) AS h FROM discharges")
        self._keys = KeyHashes(h.fetchnumpy()["h"])

    def _reset_counters(self) -> None:
        """Next ids from the stored maxima (at start, and after a rolled-back transaction);
        not job_runs' (see __init__)."""
        self._next_seq = self._scalar("SELECT COALESCE(MAX(seq), 0) + 1 FROM discharges")
        self._next_dead = self._scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM dead_letters")
        self._next_event = self._scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM events")
        #: per model, the stream position of its last stored record (see MIGRATIONS v4);
        #: model_state keeps it when retention has deleted every record of a model
        self._last_pos: dict[str, int] = dict(
            self._conn.execute(
                "SELECT model_id, max(p) FROM (SELECT model_id, max(model_pos) AS p FROM "
                "discharges GROUP BY model_id UNION ALL SELECT model_id, records FROM "
                "model_state) GROUP BY model_id"
            ).fetchall()
        )

    # ------------------------------------------------------------------ plumbing
    @_serialised
    def _scalar(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._conn.execute(sql, list(params)).fetchone()[0])  # type: ignore[index]  # one row: callers pass aggregates

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for another thread (DuckDB connections are not shared across threads)."""
        return self._conn.cursor()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def transaction(self) -> _Transaction:
        """``with store.transaction():``: everything inside commits or rolls back."""
        return _Transaction(self)

    # ------------------------------------------------------------------ ingest
    def rows_table(self, valid: pa.Table) -> pa.Table:
        """The columnar path's valid rows (model_id, record_id, event_time, hospital_id,
        score, label, decision, one column per attribute, no features) as the table
        :meth:`ingest_table` takes; no data is copied."""
        n = valid.num_rows
        return pa.table(
            {
                **{c: valid[c] for c in ("model_id", "record_id", "event_time", "hospital_id",
                                         "score", "label", "decision")},
                **{g: valid[a] for g, a in zip(self.group_columns, self.attributes, strict=True)},
                "features": pa.nulls(n, pa.string()),
                "pos": pa.array(np.arange(n, dtype=np.int64)),
            }
        )  # fmt: skip

    def _content_sql(self) -> str:
        """MD5 of a row's stored content (every field but the arrival time), as DuckDB
        computes it column-wise; a conflict detector, not a security measure."""
        parts = [
            "model_id", "record_id", "CAST(epoch_us(CAST(event_time AS TIMESTAMPTZ)) AS VARCHAR)",
            "coalesce(hospital_id, '')", "CAST(score AS VARCHAR)", "CAST(label AS VARCHAR)",
            "CAST(decision AS VARCHAR)",
            *(f"coalesce({g}, '')" for g in self.group_columns),
            "coalesce(features, '')",
        ]  # fmt: skip
        return f"md5(concat_ws(chr(31), {', '.join(parts)}))"

    @_serialised
    def _per_row(self, table: pa.Table, expr: str, dtype: Any) -> np.ndarray:
        """``expr`` of each row of a batch table, in row order (scattered by ``pos``,
        cheaper than an ORDER BY)."""
        self._conn.register("_hash_rows", table)
        try:
            got = self._conn.execute(f"SELECT pos, {expr} AS v FROM _hash_rows").fetchnumpy()
        finally:
            self._conn.unregister("_hash_rows")
        out = np.empty(table.num_rows, dtype=dtype)
        out[np.asarray(got["pos"], dtype=np.int64)] = np.asarray(got["v"], dtype=dtype)
        return out

    @_serialised
    def ingest_table(
        self,
        table: pa.Table,
        dead: Sequence[DeadLetter],
        received_at: pd.Timestamp,
    ) -> IngestOutcome:
        """Store valid records (skipping (model_id, record_id) already stored or repeated
        within the batch) and dead letters, inside the caller's transaction.

        ``table``: the batch's valid rows as :meth:`rows_table` or :meth:`rows_table_from_frame`
        make them (``pos`` = row number). Both ingest paths end here, so deduplication,
        content hashes, conflicts and stream positions are one implementation.
        """
        c = self._conn
        n = table.num_rows
        new_mask = np.zeros(n, dtype=bool)
        conflicts = np.zeros(n, dtype=bool)
        seq = np.full(n, -1, dtype=np.int64)
        if n:
            # DuckDB's 64-bit hash of each key, as KeyHashes holds the stored ones
            h = self._per_row(table, "hash(model_id, record_id)", np.uint64)
            keys: pd.DataFrame | None = None

            def key_frame() -> pd.DataFrame:
                nonlocal keys
                if keys is None:
                    keys = table.select(["model_id", "record_id", "pos"]).to_pandas()
                return keys

            # first occurrence in the batch: distinct hashes are distinct keys; a repeated
            # hash (a repeated key, or a collision) is decided on the keys themselves
            first = np.ones(n, dtype=bool)
            if np.unique(h).size < n:
                first = ~key_frame().duplicated(["model_id", "record_id"], keep="first").to_numpy()
            maybe = first & self._keys.contains(h)
            existing = np.zeros(0, dtype=np.int64)
            stored_hash = np.zeros(0, dtype=object)
            if maybe.any():  # only these can be stored already: check them for real
                c.register("_maybe_keys", table.select(["model_id", "record_id", "pos"])
                           .filter(pa.array(maybe)))  # fmt: skip
                try:
                    found = c.execute(
                        "SELECT k.pos, d.content_hash FROM _maybe_keys k JOIN discharges d "
                        "ON d.model_id = k.model_id AND d.record_id = k.record_id"
                    ).fetchall()
                finally:
                    c.unregister("_maybe_keys")
                existing = np.array([p for p, _ in found], dtype=np.int64)
                stored_hash = np.array([x for _, x in found], dtype=object)
            new_mask = first.copy()
            new_mask[existing] = False
            if not new_mask.all():  # repeats: compared by content (usually no row is)
                content = self._per_row(table, self._content_sql(), object)
                conflicts = conflicting_rows(key_frame(), content, new_mask, existing, stored_hash)
            self._keys.stage(h[new_mask])
            k = int(new_mask.sum())
            seq[new_mask] = np.arange(self._next_seq, self._next_seq + k)
            if k:
                rows = table if k == n else table.filter(pa.array(new_mask))
                rows = rows.append_column("seq", pa.array(seq[new_mask]))
                # each new record's position in its model's stream, in arrival order
                enc = rows.column("model_id").combine_chunks().dictionary_encode()
                codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
                names = enc.dictionary.to_pylist()
                counts = np.bincount(codes, minlength=len(names))
                base = np.array([self._last_pos.get(str(m), 0) for m in names], dtype=np.int64)
                order = np.argsort(codes, kind="stable")
                rank = np.empty(k, dtype=np.int64)
                rank[order] = np.arange(k) - np.repeat(np.cumsum(counts) - counts, counts)
                rows = rows.append_column("model_pos", pa.array(base[codes] + rank + 1))
                # the attribute object is built by DuckDB, column-wise, not per record in Python
                attrs = ", ".join(
                    f"'{a}', {g}" for a, g in zip(self.attributes, self.group_columns, strict=True)
                )
                c.register("_batch_rows", rows)
                try:
                    c.execute(
                        "INSERT INTO discharges (seq, model_id, record_id, event_time, "
                        "received_at, hospital_id, score, label, decision, attributes, features, "
                        "model_pos, content_hash, outcome_time, label_pos) SELECT seq, model_id, "
                        "record_id, event_time, ?::TIMESTAMPTZ, hospital_id, score, "
                        # a prediction (label -1 in the batch) is stored without its label
                        "CASE WHEN label >= 0 THEN label END, decision, "
                        f"json_object({attrs}), features::JSON, model_pos, "
                        f"{self._content_sql()}, CASE WHEN label >= 0 THEN event_time END, "
                        "CASE WHEN label >= 0 THEN model_pos END FROM _batch_rows",
                        [received_at],
                    )
                finally:
                    c.unregister("_batch_rows")
                self._next_seq += k
                for m, b, added in zip(names, base, counts, strict=True):
                    self._last_pos[str(m)] = int(b + added)
        stored = self.write_dead_letters(dead, received_at)
        inserted = int(new_mask.sum())
        dup = n - inserted - int(conflicts.sum())
        return IngestOutcome(
            inserted, dup, sum(stored.values()), new_mask, seq, conflicts, rejected=stored
        )

    # ------------------------------------------------------------------ outcomes
    @_serialised
    def stored_records(self, keys: pd.DataFrame) -> pd.DataFrame:
        """For outcome keys (``i``, model_id, record_id): the stored record of each one found
        (i, seq, model_pos, event_ns = scoring time, label: NaN while unknown)."""
        empty = pd.DataFrame({"i": [], "seq": [], "model_pos": [], "event_ns": [], "label": []})
        if not len(keys):
            return empty
        c = self._conn
        c.register("_outcome_keys", keys[["i", "model_id", "record_id"]])
        try:
            return c.execute(
                "SELECT k.i, d.seq, d.model_pos, epoch_ns(d.event_time) AS event_ns, d.label "
                "FROM _outcome_keys k JOIN discharges d "
                "ON d.model_id = k.model_id AND d.record_id = k.record_id"
            ).df()
        finally:
            c.unregister("_outcome_keys")

    @_serialised
    def write_joins(self, joins: pd.DataFrame) -> None:
        """Labels of stored predictions (seq, label, outcome_time, label_pos), inside the
        caller's transaction; only a record still without its label is changed."""
        if not len(joins):
            return
        c = self._conn
        c.register("_joins", joins[["seq", "label", "outcome_time", "label_pos"]])
        # the seq range as literals: DuckDB skips the row groups outside it (rows are
        # stored in seq order), where a join alone would scan the whole table
        lo, hi = int(joins["seq"].min()), int(joins["seq"].max())
        try:
            c.execute(
                "UPDATE discharges AS d SET label = j.label::TINYINT, "
                "outcome_time = j.outcome_time::TIMESTAMPTZ, label_pos = j.label_pos "
                f"FROM _joins j WHERE d.seq BETWEEN {lo} AND {hi} AND d.seq = j.seq "
                "AND d.label IS NULL"
            )
        finally:
            c.unregister("_joins")

    @_serialised
    def held_outcomes(self) -> pd.DataFrame:
        """Every held outcome (model_id, record_id, label, known_ns, topic, partition,
        offset, payload)."""
        return self._conn.execute(
            'SELECT model_id, record_id, label, epoch_ns(known_at) AS known_ns, topic, '
            'partition, "offset", payload FROM held_outcomes'
        ).df()

    def stream_positions(self) -> dict[str, int]:
        """Each model's stream position: the position of its last stored record (a copy)."""
        return dict(self._last_pos)

    @_serialised
    def hold_outcomes(self, rows: Sequence[tuple], received_at: pd.Timestamp) -> None:
        """Outcomes without a stored prediction: (model_id, record_id, label, known_at,
        topic, partition, offset, payload), inside the caller's transaction."""
        if rows:
            # the payload only as dead letters keep it (their HMAC is then of no payload)
            keep = self.config.service.dead_letters.keep_payloads
            self._conn.executemany(
                "INSERT OR REPLACE INTO held_outcomes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(m, r, int(y), t, received_at, tp, p, o, pl if keep else None)
                 for m, r, y, t, tp, p, o, pl in rows],
            )  # fmt: skip

    @_serialised
    def release_held(self, keys: Sequence[tuple[str, str]]) -> None:
        """Forget held outcomes (joined now, or dead-lettered), inside the caller's transaction."""
        if keys:
            self._conn.executemany(
                "DELETE FROM held_outcomes WHERE model_id = ? AND record_id = ?", list(keys)
            )

    def rows_table_from_frame(self, valid: pd.DataFrame) -> pa.Table:
        """The batch's valid rows as an Arrow table (DuckDB scans its columns as they are,
        where a pandas frame of object columns costs a Python string conversion per value)."""
        n = len(valid)
        feats = valid["features"].to_numpy(dtype=object)
        if set(map(type, feats)) <= {type(None)}:  # usually: no features at all
            features = pa.nulls(n, pa.string())
        else:
            features = pa.array(
                [
                    None if f is None or (isinstance(f, float) and math.isnan(f)) else to_json(f)
                    for f in feats
                ],
                pa.string(),
            )
        return pa.table(
            {
                "model_id": _arrow(valid["model_id"]),
                "record_id": _arrow(valid["record_id"]),
                "event_time": pa.array(valid["event_time"].array),
                "hospital_id": _arrow(valid["hospital_id"]),
                "score": pa.array(valid["score"].to_numpy(dtype=np.float64)),
                "label": pa.array(valid["label"].to_numpy(dtype=np.int8)),
                "decision": pa.array(valid["decision"].to_numpy(dtype=np.int8)),
                **{f"attr_{i}": _arrow(valid[a]) for i, a in enumerate(self.attributes)},
                "features": features,
                "pos": pa.array(np.arange(n, dtype=np.int64)),
            }
        )

    @_serialised
    def write_dead_letters(
        self, dead: Sequence[DeadLetter], received_at: pd.Timestamp
    ) -> dict[str, int]:
        """Dead letters, inside the caller's transaction; returns how many were stored, by
        reason (what the rejection counters count: a redelivery is not rejected twice).

        A dead letter is keyed on its source position and payload hash: a redelivery
        (same topic, partition, offset and payload) is not stored again. Letters without
        a position are always stored. The raw payload is kept only with
        ``[service.dead_letters] keep_payloads``; otherwise only its HMAC-SHA256.
        """
        if not dead:
            return {}
        keep = self.config.service.dead_letters.keep_payloads
        frame = pd.DataFrame(
            {
                "received_at": received_at,
                "reason": [d.reason for d in dead],
                "topic": pd.array([d.topic for d in dead], dtype=object),
                "partition": pd.array([d.partition for d in dead], dtype="Int32"),
                "offset": pd.array([d.offset for d in dead], dtype="Int64"),
                "payload": [d.payload if keep else None for d in dead],
                "payload_hmac": [self.payload_hmac(d.payload) for d in dead],
            }
        )
        positioned = frame["offset"].notna().to_numpy()
        fresh = ~(frame.duplicated(["topic", "partition", "offset", "payload_hmac"]).to_numpy()
                  & positioned)  # fmt: skip
        if positioned.any():
            c = self._conn
            frame["i"] = np.arange(len(frame))
            c.register("_dead_keys", frame[positioned][["i", "topic", "partition", "offset",
                                                          "payload_hmac"]])  # fmt: skip
            seen = c.execute(
                "SELECT k.i FROM _dead_keys k JOIN dead_letters x ON x.topic IS NOT DISTINCT "
                "FROM k.topic AND x.partition = k.partition AND x.\"offset\" = k.\"offset\" "
                "AND x.payload_hmac IS NOT DISTINCT FROM k.payload_hmac"
            ).fetchnumpy()["i"]
            c.unregister("_dead_keys")
            fresh[np.asarray(seen, dtype=np.int64)] = False
            frame = frame.drop(columns="i")
        frame = frame[fresh].reset_index(drop=True)
        if not len(frame):
            return {}
        frame.insert(0, "id", np.arange(self._next_dead, self._next_dead + len(frame)))
        self._conn.register("_dead", frame)
        self._conn.execute(
            'INSERT INTO dead_letters (id, received_at, reason, topic, partition, "offset", '
            "payload, payload_hmac) SELECT * FROM _dead"
        )
        self._conn.unregister("_dead")
        self._next_dead += len(frame)
        return {str(k): int(v) for k, v in frame["reason"].value_counts(sort=False).items()}

    # ------------------------------------------------------------------ reads of the writer
    # The writer writes; every read is a monitor.store.queries function. Reads that must
    # run on the writer's own connection (its start-up restore, a read inside its
    # transaction) go through :meth:`read`; other threads call queries with a cursor.
    @_serialised
    def read(
        self,
        query: Callable[Concatenate[duckdb.DuckDBPyConnection, _P], _R],
        *args: _P.args,
        **kwargs: _P.kwargs,
    ) -> _R:
        """``query(connection, *args, **kwargs)`` on the writer's connection, under its
        lock: ``store.read(queries.model_states)``."""
        return query(self._conn, *args, **kwargs)

    @_serialised
    def window_records(
        self,
        model_id: str,
        *,
        end_count: int | None = None,
        last_n: int | None = None,
        days: float | None = None,
    ) -> pd.DataFrame:
        """:func:`queries.window_records` of this file's attributes."""
        return queries.window_records(
            self._conn, self.attributes, model_id, end_count=end_count, last_n=last_n,
            days=days,
        )  # fmt: skip

    @_serialised
    def block_records(self, model_id: str, after: int, upto: int) -> pd.DataFrame:
        """:func:`queries.block_records` of this file's attributes: the records of a
        model's certified block, stream positions (``after``, ``upto``]."""
        return queries.block_records(self._conn, self.attributes, model_id, after, upto)

    @_serialised
    def memory_mb(self) -> float:
        """What DuckDB accounts for, in MiB, read through a fresh cursor. Benchmarks call it
        on the ingest thread: a probe from another thread keeps DuckDB from releasing memory."""
        cur = self.cursor()
        try:
            return queries.memory_mb(cur)
        finally:
            cur.close()

    @_serialised
    def schema_version(self) -> int:
        return migrations.schema_version(self._conn)

    # ------------------------------------------------------------------ source positions
    @_serialised
    def write_source_offsets(self, origins: Sequence[Origin]) -> None:
        """Advance each source partition's stored-through offset past ``origins`` (every
        message of the batch: stored, duplicate or dead-lettered), inside the caller's
        transaction. Never moves an offset back (a replay of older messages)."""
        after: dict[tuple[str, int], int] = {}
        for o in origins:
            key = (o.topic, o.partition)
            if o.offset + 1 > after.get(key, -1):
                after[key] = o.offset + 1
        if not after:
            return
        update_else_upsert(
            self._conn, [(t, p, n) for (t, p), n in after.items()],
            "UPDATE source_offsets AS s SET next_offset = greatest(s.next_offset, v.n) "
            "FROM (VALUES {values}) AS v(t, p, n) WHERE s.topic = v.t AND s.partition = v.p",
            "INSERT INTO source_offsets VALUES {values} ON CONFLICT (topic, partition) "
            "DO UPDATE SET next_offset = greatest(next_offset, excluded.next_offset)",
        )

    @_serialised
    def write_model_partitions(self, changed: dict[str, tuple[str, int]]) -> None:
        """Models whose source partition is new or changed, inside the caller's transaction."""
        if changed:
            self._conn.executemany(
                "INSERT OR REPLACE INTO model_partitions VALUES (?, ?, ?)",
                [(m, t, p) for m, (t, p) in changed.items()],
            )

    @_serialised
    def _to_outbox(self, messages: Sequence[tuple[str, str]]) -> None:
        """(key, value) rows for the results topic, inside the caller's transaction."""
        if messages:
            self._conn.executemany(
                "INSERT INTO results_outbox (key, value) VALUES (?, ?)", list(messages)
            )

    def outbox_done(self, ids: Sequence[int], cursor: duckdb.DuckDBPyConnection) -> None:
        """Forget what the broker has acknowledged: exactly these ids. Not "every id up to
        the last one": ids are drawn when rows are inserted, not when they commit, so an
        ingest transaction committing meanwhile can add lower ids that were never read."""
        if ids:
            cursor.execute(
                "DELETE FROM results_outbox WHERE id IN (SELECT unnest(?::BIGINT[]))",
                [list(ids)],
            )

    # ------------------------------------------------------------------ the fleet view's file
    def apply_results(self, messages: Sequence[ResultMessage]) -> None:
        """Results read from the fleet's results topic, in one transaction
        (:func:`fleet.apply_results`)."""
        with self.transaction():
            fleet.apply_results(self._conn, messages, self._new_event_id)

    def _new_event_id(self) -> int:
        event_id = self._next_event
        self._next_event += 1
        return event_id

    # ------------------------------------------------------------------ evaluations and state
    @_serialised
    def write_evaluations(self, items: Sequence[EvaluationRecord]) -> None:
        """Axis 1 results of a batch's evaluations, the cells' latest tracker states and events,
        inside the caller's transaction.

        Written once per batch (one insert per table): per-evaluation statements cost more
        than the evaluations' rows themselves.
        """
        if not items:
            return
        # interim (wall-clock) evaluations update the cells' latest result only
        history = [it for it in items if not it.interim]
        # each cell's JSON once: it is the window result and, for the latest, cell_state's
        cell_json = {id(x): encode_evaluation(x) for it in items for x in it.cells}
        wr = [
            (
                it.model_id, it.evaluation, it.evaluated_at, it.window.kind,
                it.window.first_seq, it.window.last_seq, it.window.end_count,
                int(it.window.seed), x.result.metric, x.result.attribute, cell_json[id(x)],
                x.tier.tier.value, x.confirmed_tier,
            )
            for it in history
            for x in it.cells
        ]  # fmt: skip
        insert_frame(
            self._conn, "window_results",
            ["model_id", "evaluation", "evaluated_at", "window_kind", "window_first_seq",
             "window_last_seq", "window_end_count", "seed", "metric", "attribute", "result",
             "tier", "confirmed_tier"],
            wr, json_columns={"result"},
        )  # fmt: skip
        if self.outbox:
            self._to_outbox([window_result_message(row) for row in wr])
        latest: dict[tuple[str, str, str], tuple[Any, Any, Any]] = {}
        for it in items:  # a cell evaluated twice in one batch keeps its last state
            cells = {(x.result.metric, x.result.attribute): x for x in it.cells}
            for m, a, st in it.states:
                latest[(it.model_id, m, a)] = (st, cells.get((m, a)), it.evaluated_at)
        latest_state = [
            (model, m, a, encode_cell_state(st),
             to_json(None) if cell is None else cell_json[id(cell)], at)
            for (model, m, a), (st, cell, at) in latest.items()
        ]  # fmt: skip
        insert_frame(
            self._conn, "cell_state",
            ["model_id", "metric", "attribute", "state", "latest", "updated_at"],
            latest_state, json_columns={"state", "latest"}, replace=True,
        )  # fmt: skip
        events = [(it.evaluated_at, e) for it in history for e in it.events]
        if events:
            first = self._next_event
            insert_frame(
            self._conn,     "events",
                ["id", "created_at", "kind", "model_id", "metric", "attribute", "old", "new",
                 "confirmed", "direction", "evaluation", "axes", "decision_config",
                 "axes_before"],
                [
                    (first + i, at, e.kind, e.model_id, e.metric, e.attribute, e.old, e.new,
                     e.confirmed, e.direction, e.evaluation, to_json(e.axes), self._decision_id,
                     to_json(e.axes_before))
                    for i, (at, e) in enumerate(events)
                ],
                json_columns={"axes", "axes_before"},
            )  # fmt: skip
            self._next_event += len(events)
            if self.outbox:
                self._to_outbox(
                    [event_message(at, e, self._decision_id) for at, e in events]
                )

    @_serialised
    def write_model_states(self, rows: Sequence[ModelStateRow]) -> None:
        """The state of each model touched by a batch (:class:`ModelStateRow`: counters,
        the end count of the last written evaluation, release points and certified state,
        both as JSON text)."""
        if not rows:
            return
        # a dozen rows: one VALUES statement costs less than a pandas frame scan
        update_else_upsert(
            self._conn, rows,
            "UPDATE model_state AS s SET records = v.r, evaluations = v.e, old_events = v.o, "
            "updated_at = v.a, evaluated_records = v.d, releases = v.c, certified = v.x "
            "FROM (VALUES {values}) AS v(m, r, e, o, a, d, c, x) WHERE s.model_id = v.m",
            "INSERT OR REPLACE INTO model_state (model_id, records, evaluations, "
            "old_events, updated_at, evaluated_records, releases, certified) VALUES {values}",
        )

    # ------------------------------------------------------------------ scheduled axes
    @_serialised
    def write_axis_results(
        self,
        axis: str,
        model_id: str,
        cohort_n: int,
        payload: Any,
        at: pd.Timestamp,
        cursor: duckdb.DuckDBPyConnection | None = None,
        position: int | None = None,
    ) -> None:
        """One scheduled axis result; ``position``: the model's stream position (records
        accepted) when the job read its cohort, the result's key on the results topic."""
        c = cursor or self._conn
        payload_json = to_json(payload)
        if not self.outbox or position is None:
            c.execute(
                "INSERT INTO axis_results VALUES (?, ?, ?, ?, ?::JSON)",
                [axis, model_id, at, cohort_n, payload_json],
            )
            return
        key, value = axis_result_message(axis, model_id, position, at, cohort_n, payload_json)
        # the result and its outbox row in one transaction (this runs on a job's cursor)
        c.execute("BEGIN TRANSACTION")
        try:
            c.execute(
                "INSERT INTO axis_results VALUES (?, ?, ?, ?, ?::JSON)",
                [axis, model_id, at, cohort_n, payload_json],
            )
            c.execute("INSERT INTO results_outbox (key, value) VALUES (?, ?)", [key, value])
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    @_serialised
    def write_axis_release(
        self,
        axis: str,
        model_id: str,
        cohort: CohortRelease,
        cursor: duckdb.DuckDBPyConnection,
    ) -> None:
        """The cohort a newly published axis result rests on (queries.axis_releases)."""
        cursor.execute(
            "INSERT OR REPLACE INTO axis_releases VALUES (?, ?, ?::JSON)",
            [axis, model_id, encode_cohort_release(cohort)],
        )

    def write_job_run(
        self,
        job: str,
        started_at: pd.Timestamp,
        duration_s: float,
        state: str,
        error_kind: str | None,
        cursor: duckdb.DuckDBPyConnection | None = None,
    ) -> None:
        with self._lock:
            run_id = self._next_job
            self._next_job += 1
        c = cursor or self._conn
        c.execute(
            "INSERT INTO job_runs VALUES (?, ?, ?, ?, ?, ?)",
            [run_id, job, started_at, duration_s, state, error_kind],
        )

    # ------------------------------------------------------------------ retention
    def apply_retention(
        self, now: pd.Timestamp, discharge_days: float, result_days: float
    ) -> dict[str, int]:
        """Delete discharges and results older than their retention (by event/eval time)."""
        out = {}
        with self._lock:
            for table, column, days in (
                ("discharges", "event_time", discharge_days),
                # a dead letter may hold a payload: kept no longer than the discharges
                ("dead_letters", "received_at", min(result_days, discharge_days)),
                ("window_results", "evaluated_at", result_days),
                ("events", "created_at", result_days),
                ("axis_results", "computed_at", result_days),
                ("job_runs", "started_at", result_days),
            ):
                cutoff = now - pd.Timedelta(days=days)
                n = self._scalar(f"SELECT COUNT(*) FROM {table} WHERE {column} < ?", [cutoff])
                if n:
                    self._conn.execute(f"DELETE FROM {table} WHERE {column} < ?", [cutoff])
                out[table] = n
            # predictions now, outcomes later: a prediction still without its outcome is kept only
            # while one could arrive (max_outcome_delay_days) or while a window or the audit cohort
            # needs it
            keep = max(self.config.outcomes.max_outcome_delay_days, self.config.horizon_days)
            cutoff = now - pd.Timedelta(days=min(keep, discharge_days))
            n = self._scalar(
                "SELECT COUNT(*) FROM discharges WHERE label IS NULL AND event_time < ?", [cutoff]
            )
            if n:
                self._conn.execute(
                    "DELETE FROM discharges WHERE label IS NULL AND event_time < ?", [cutoff]
                )
            out["unmatched_predictions"] = n
            if out.get("discharges") or n:
                self._load_keys()  # forget the deleted keys
        return out

class _Transaction:
    """BEGIN/COMMIT around a block; a rollback also rewinds the id counters."""

    def __init__(self, store: Store):
        self.store = store

    def __enter__(self) -> _Transaction:
        self.store._lock.acquire()
        self.store._conn.execute("BEGIN TRANSACTION")
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                try:
                    self.store._conn.execute("COMMIT")
                except BaseException:
                    # e.g. disk full while writing the WAL: DuckDB has rolled back, so the
                    # counters (ids, model positions) must not keep what was not stored
                    self.store._reset_counters()
                    raise
                finally:
                    # even if COMMIT failed: an extra hash only costs a check, a missing one
                    # would let a duplicate in
                    self.store._keys.commit()
            else:
                self.store._keys.rollback()
                self.store._conn.execute("ROLLBACK")
                self.store._reset_counters()
        finally:
            self.store._lock.release()
