"""The DuckDB file: the service's only store, owned by one writer process.

DuckDB allows one read-write process per file, so every reader (the HTTP API,
scheduled jobs) goes through this object, using cursors of the one connection.
The schema is versioned; :data:`MIGRATIONS` upgrades an older file in place.

Why batches and not executemany: an ingest batch of thousands of records is
inserted as one Arrow/pandas scan inside one transaction, together with its
dead letters, its evaluations and its events, so a crash leaves either all of
it or none of it (and Kafka offsets are committed only afterwards).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from consumers.base import Origin
from monitor.config import MonitorConfig, StartupError
from monitor.core.events import CellEvent
from monitor.core.explain import Cutoffs, explain_event
from monitor.core.jsonable import to_json
from monitor.core.results import EvaluationRecord
from monitor.stream.results_messages import (
    ResultMessage,
    axis_result_message,
    event_message,
    window_result_message,
)

#: Each entry upgrades the schema to the version at its index + 1.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE IF NOT EXISTS discharges (
            seq BIGINT PRIMARY KEY,
            model_id VARCHAR NOT NULL,
            record_id VARCHAR NOT NULL,
            event_time TIMESTAMPTZ NOT NULL,
            received_at TIMESTAMPTZ NOT NULL,
            hospital_id VARCHAR,
            score DOUBLE NOT NULL,
            label TINYINT NOT NULL,
            decision TINYINT NOT NULL,
            attributes JSON NOT NULL,
            features JSON,
            UNIQUE (model_id, record_id))""",
        """CREATE TABLE IF NOT EXISTS dead_letters (
            id BIGINT PRIMARY KEY,
            received_at TIMESTAMPTZ NOT NULL,
            reason VARCHAR NOT NULL,
            topic VARCHAR, partition INTEGER, "offset" BIGINT,
            payload BLOB)""",
        """CREATE TABLE IF NOT EXISTS window_results (
            model_id VARCHAR NOT NULL, evaluation BIGINT NOT NULL,
            evaluated_at TIMESTAMPTZ NOT NULL, window_kind VARCHAR NOT NULL,
            window_first_seq BIGINT, window_last_seq BIGINT, window_end_count BIGINT,
            seed UBIGINT NOT NULL, metric VARCHAR NOT NULL, attribute VARCHAR NOT NULL,
            result JSON NOT NULL, tier VARCHAR, confirmed_tier VARCHAR,
            PRIMARY KEY (model_id, evaluation, metric, attribute))""",
        """CREATE TABLE IF NOT EXISTS cell_state (
            model_id VARCHAR, metric VARCHAR, attribute VARCHAR, state JSON NOT NULL,
            latest JSON, updated_at TIMESTAMPTZ, PRIMARY KEY (model_id, metric, attribute))""",
        """CREATE TABLE IF NOT EXISTS model_state (
            model_id VARCHAR PRIMARY KEY, records BIGINT NOT NULL, evaluations BIGINT NOT NULL,
            old_events BIGINT NOT NULL, updated_at TIMESTAMPTZ)""",
        """CREATE TABLE IF NOT EXISTS events (
            id BIGINT PRIMARY KEY, created_at TIMESTAMPTZ NOT NULL, kind VARCHAR NOT NULL,
            model_id VARCHAR, metric VARCHAR, attribute VARCHAR, old VARCHAR, new VARCHAR,
            confirmed BOOLEAN, direction VARCHAR, evaluation BIGINT, axes JSON)""",
        """CREATE TABLE IF NOT EXISTS axis_results (
            axis VARCHAR NOT NULL, model_id VARCHAR NOT NULL, computed_at TIMESTAMPTZ NOT NULL,
            cohort_n BIGINT, payload JSON NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS job_runs (
            id BIGINT PRIMARY KEY, job VARCHAR NOT NULL, started_at TIMESTAMPTZ NOT NULL,
            duration_s DOUBLE, state VARCHAR NOT NULL, error_kind VARCHAR)""",
    ],
    # v2: the stream position of each model's last *written* evaluation. Evaluations run
    # beside ingestion and are written a batch later; a hop point between this and
    # ``records`` is recomputed from the stored records at start-up. NULL (a file written
    # before v2, when evaluations were synchronous): every hop point up to ``records``.
    ["ALTER TABLE model_state ADD COLUMN IF NOT EXISTS evaluated_records BIGINT"],
    # v3: which decision rule ([decision], by MonitorConfig.decision_id) was in force, and
    # the axes before the change (the explanation of an event compares them with ``axes``)
    [
        "ALTER TABLE events ADD COLUMN IF NOT EXISTS decision_config VARCHAR",
        "ALTER TABLE events ADD COLUMN IF NOT EXISTS axes_before JSON",
    ],
    # v4: each record's position in its model's stream (1, 2, ...: the model's accepted-record
    # count when it arrived). Windows at a stream position are selected by it, so records
    # deleted by retention do not shift a recomputed window. Existing rows are numbered in
    # arrival order, the last one at the model's stored record count.
    [
        "ALTER TABLE discharges ADD COLUMN IF NOT EXISTS model_pos BIGINT",
        """UPDATE discharges SET model_pos = p.pos FROM (
            SELECT d.seq, row_number() OVER (PARTITION BY d.model_id ORDER BY d.seq)
                + GREATEST(COALESCE(ms.records, 0)
                    - count(*) OVER (PARTITION BY d.model_id), 0) AS pos
            FROM discharges d LEFT JOIN model_state ms USING (model_id)) p
        WHERE discharges.seq = p.seq""",
    ],
    # v5 (privacy): a content hash per record, so a redelivery that differs from the stored
    # record is told apart from an identical one (NULL: stored before v4, not comparable);
    # a keyed hash of each dead letter's payload (the payload itself only when configured);
    # the generated HMAC key when none is configured.
    [
        "ALTER TABLE discharges ADD COLUMN IF NOT EXISTS content_hash VARCHAR",
        "ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS payload_hmac VARCHAR",
        "CREATE TABLE IF NOT EXISTS secrets (name VARCHAR PRIMARY KEY, value BLOB NOT NULL)",
    ],
    # v6 (scale-out): per source partition, the offset after the last message stored, in the
    # batch's own transaction: a member of a consumer group that is given a partition knows
    # from which offset it lacks the partition's history (consumers.kafka_source rebuilds).
    [
        """CREATE TABLE IF NOT EXISTS source_offsets (
            topic VARCHAR NOT NULL, partition INTEGER NOT NULL, next_offset BIGINT NOT NULL,
            PRIMARY KEY (topic, partition))""",
    ],
    # v7 (fleet view): results to publish to the compacted results topic, written in the
    # transaction that stores them (an outbox), deleted once the broker has them.
    [
        "CREATE SEQUENCE IF NOT EXISTS results_outbox_id",
        """CREATE TABLE IF NOT EXISTS results_outbox (
            id BIGINT PRIMARY KEY DEFAULT nextval('results_outbox_id'),
            key VARCHAR NOT NULL, value VARCHAR NOT NULL)""",
        # each model's source partition, so a member that restarts knows which models to
        # drop when the group takes a partition away before any new record arrives
        """CREATE TABLE IF NOT EXISTS model_partitions (
            model_id VARCHAR PRIMARY KEY, topic VARCHAR NOT NULL, partition INTEGER NOT NULL)""",
        # the fleet view's file only: which axis result a (axis, model, position) key names
        """CREATE TABLE IF NOT EXISTS fleet_axis_keys (
            axis VARCHAR, model_id VARCHAR, position BIGINT, computed_at TIMESTAMPTZ,
            PRIMARY KEY (axis, model_id, position))""",
    ],
    # v8 (ingest speed, memory): ``discharges`` without its PRIMARY KEY (seq) and UNIQUE
    # (model_id, record_id) indexes. Deduplication never relied on them (an exact check,
    # _KeyHashes, runs before every insert, and the one writer process assigns seq), while
    # DuckDB maintained both ART indexes on every insert and commit (about 2.4 us a
    # record on a 2-core machine) and kept them in memory: the index grew with every
    # record stored, outside what the window and key set need. Rebuilt in seq order.
    [
        """CREATE TABLE discharges_v8 (
            seq BIGINT NOT NULL, model_id VARCHAR NOT NULL, record_id VARCHAR NOT NULL,
            event_time TIMESTAMPTZ NOT NULL, received_at TIMESTAMPTZ NOT NULL,
            hospital_id VARCHAR, score DOUBLE NOT NULL, label TINYINT NOT NULL,
            decision TINYINT NOT NULL, attributes JSON NOT NULL, features JSON,
            model_pos BIGINT, content_hash VARCHAR)""",
        """INSERT INTO discharges_v8 SELECT seq, model_id, record_id, event_time, received_at,
            hospital_id, score, label, decision, attributes, features, model_pos, content_hash
            FROM discharges ORDER BY seq""",
        "DROP TABLE discharges",
        "ALTER TABLE discharges_v8 RENAME TO discharges",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


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


def _member(sorted_hashes: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Whether each of the sorted hashes ``h`` is in ``sorted_hashes``."""
    if not sorted_hashes.size:
        return np.zeros(h.shape, dtype=bool)
    i = np.minimum(np.searchsorted(sorted_hashes, h), sorted_hashes.size - 1)
    return sorted_hashes[i] == h


def _merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two sorted arrays as one sorted array, in one linear pass (no sort)."""
    return np.insert(a, np.searchsorted(a, b), b)


class _KeyHashes:
    """DuckDB hashes of the stored (model_id, record_id) keys, to deduplicate without a join.

    Why: the join of a batch's keys with ``discharges`` scans the whole table, so its cost
    grows with every record stored (tens of ms per batch at a million records). A key
    whose hash is not here is certainly new; a key whose hash is here (a redelivery, a
    hash collision, a record deleted by retention) is checked against the table, so the
    result is exact. 8 bytes per stored record, rebuilt from the table at start-up and
    after retention.

    Kept as a few sorted levels, each at least four times the size of the next: a batch's
    hashes become the smallest level and a level is merged into the one above once it is
    no longer four times smaller. So a lookup searches O(log n) arrays, and a stored hash
    is copied O(log n) times in all, where merging every batch into one array would copy
    the whole set per batch.
    """

    GROWTH = 4

    def __init__(self, hashes: np.ndarray):
        self.levels: list[np.ndarray] = []
        base = np.sort(np.asarray(hashes, dtype=np.uint64))
        if base.size:
            self.levels.append(base)
        self.staged: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(level.size for level in self.levels)

    def contains(self, h: np.ndarray) -> np.ndarray:
        order = np.argsort(h)  # sorted needles: searchsorted walks each level once
        hs = np.asarray(h, dtype=np.uint64)[order]
        hit = np.zeros(hs.shape, dtype=bool)
        for level in self.levels:
            hit |= _member(level, hs)
        out = np.empty_like(hit)
        out[order] = hit
        return out

    def stage(self, h: np.ndarray) -> None:
        """Hashes of keys inserted by the open transaction (kept only if it commits)."""
        if h.size:
            self.staged.append(np.sort(np.asarray(h, dtype=np.uint64)))

    def commit(self) -> None:
        for run in self.staged:
            self.levels.append(run)
            levels = self.levels
            while len(levels) > 1 and levels[-2].size < self.GROWTH * levels[-1].size:
                top = levels.pop()
                self.levels[-1] = _merge(self.levels[-1], top)
        self.staged.clear()

    def rollback(self) -> None:
        self.staged.clear()


def conflicting_rows(
    keys: pd.DataFrame,
    content: np.ndarray,
    new_mask: np.ndarray,
    existing: np.ndarray,
    stored_hash: np.ndarray,
) -> np.ndarray:
    """Rows that repeat a (model_id, record_id) with other content.

    The reference content of a key is the stored record's (when the key was stored
    before), else the batch's first row of that key. A stored record without a hash
    (written before schema v4) cannot be compared: its repeats count as identical.
    """
    n = len(keys)
    first_pos = keys.groupby(["model_id", "record_id"], sort=False)["pos"].transform("first")
    first_pos = first_pos.to_numpy(dtype=np.int64)
    ref = content[first_pos].astype(object)
    from_store = np.zeros(n, dtype=bool)
    stored = np.full(n, None, dtype=object)
    from_store[existing] = True
    stored[existing] = stored_hash
    ref = np.where(from_store[first_pos], stored[first_pos], ref)
    known = np.array([r is not None for r in ref], dtype=bool)
    return ~new_mask & known & (ref != content)


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


def latest_axis_results(c: duckdb.DuckDBPyConnection, axis: str) -> dict[str, Any]:
    """model_id -> the payload of its latest result of one scheduled axis.

    A function of a connection, not only a Store method: the report reads the same
    table through a read-only connection of its own.
    """
    rows = c.execute(
        "SELECT model_id, payload FROM (SELECT *, row_number() OVER (PARTITION BY model_id "
        "ORDER BY computed_at DESC) AS rn FROM axis_results WHERE axis = ?) WHERE rn = 1",
        [axis],
    ).fetchall()
    return {m: json.loads(p) for m, p in rows}


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
        #: monitor.stream.results_outbox); off for a single service and for tests
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
        self._conn.execute(f"SET memory_limit = '{config.service.duckdb_memory_limit}'")
        self._conn.execute(
            f"SET checkpoint_threshold = '{config.service.duckdb_checkpoint_wal}'"
        )
        self._lock = threading.RLock()  # one writer transaction at a time
        self._migrate()
        # job_runs ids are taken by the scheduler's threads outside any ingest transaction
        # (autocommit on their own cursors), so a rolled-back ingest must not rewind them:
        # counted up from the stored maximum once, here, and never reset
        self._next_job = self._scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM job_runs")
        self._payload_key = self._load_payload_key()
        self._reset_counters()
        self._load_keys()

    def _load_payload_key(self) -> bytes:
        """The dead-letter HMAC key: [service] payload_hash_key, else $VFR_PAYLOAD_HASH_KEY,
        else a random 32-byte key generated once and kept in this file's ``secrets`` table
        (so hashes of one file stay comparable across restarts)."""
        configured = self.config.service.payload_hash_key or os.environ.get(PAYLOAD_KEY_ENV, "")
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
        self._keys = _KeyHashes(h.fetchnumpy()["h"])

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
    def _scalar(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._conn.execute(sql, list(params)).fetchone()[0])

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for another thread (DuckDB connections are not shared across threads)."""
        return self._conn.cursor()

    def _migrate(self) -> None:
        c = self._conn
        c.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
            "applied_at TIMESTAMPTZ DEFAULT now())"
        )
        current = int(
            c.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
        )
        if current > SCHEMA_VERSION:
            raise RuntimeError(
                f"database schema version {current} is newer than this build ({SCHEMA_VERSION})"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            c.execute("BEGIN")
            for stmt in MIGRATIONS[version - 1]:
                c.execute(stmt)
            c.execute("INSERT INTO schema_migrations (version) VALUES (?)", [version])
            c.execute("COMMIT")

    def schema_version(self) -> int:
        return self._scalar("SELECT MAX(version) FROM schema_migrations")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def transaction(self) -> _Transaction:
        """``with store.transaction():``: everything inside commits or rolls back."""
        return _Transaction(self)

    # ------------------------------------------------------------------ ingest
    def ingest(
        self,
        valid: pd.DataFrame,
        dead: Sequence[DeadLetter],
        received_at: pd.Timestamp,
    ) -> IngestOutcome:
        """:meth:`ingest_table` of a frame of valid records (the per-message path's)."""
        return self.ingest_table(self.rows_table_from_frame(valid), dead, received_at)

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
            # DuckDB's 64-bit hash of each key, as _KeyHashes holds the stored ones
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
                        "model_pos, content_hash) SELECT seq, model_id, record_id, event_time, "
                        "?::TIMESTAMPTZ, hospital_id, score, label, decision, "
                        f"json_object({attrs}), features::JSON, model_pos, "
                        f"{self._content_sql()} FROM _batch_rows",
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

    def write_dead_letters(
        self, dead: Sequence[DeadLetter], received_at: pd.Timestamp
    ) -> dict[str, int]:
        """Dead letters, inside the caller's transaction; returns how many were stored, by
        reason (what the rejection counters count: a redelivery is not rejected twice).

        A dead letter is keyed on its source position and payload hash: a redelivery
        (same topic, partition, offset and payload) is not stored again. Letters without
        a position are always stored. The raw payload is kept only with
        ``[service] keep_rejected_payloads``; otherwise only its HMAC-SHA256.
        """
        if not dead:
            return {}
        keep = self.config.service.keep_rejected_payloads
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


    # ------------------------------------------------------------------ reads for windows/axes
    def window_records(
        self,
        model_id: str,
        *,
        end_count: int | None = None,
        last_n: int | None = None,
        days: float | None = None,
        cursor: duckdb.DuckDBPyConnection | None = None,
        with_details: bool = False,
    ) -> pd.DataFrame:
        """The records of a model's window at a stream position, in arrival order.

        The one definition of "which records form the window" for the restart (the
        window now), the recovery of a missed hop (the window at ``end_count``) and the
        scheduled axes' cohort (the last ``days`` of event time):

        * ``end_count``: the stream position, i.e. the model's records at positions up to
          ``end_count`` (default: all stored);
        * ``last_n``: of those, the ones at the last ``last_n`` positions (a count window);

        Positions are ``model_pos``, not a count of the surviving rows: records deleted by
        retention leave a gap instead of shifting the window.
        * ``days``: of those, the ones whose event time is at most ``days`` before the
          latest event time among them (a time window, or the audit cohort): the latest
          event time, not the last arrival's, as the live window keeps it.
        """
        c = cursor or self._conn
        cols = ", ".join(
            [f"json_extract_string(attributes, '$.{a}') AS \"{a}\"" for a in self.attributes]
        )
        extra = ", hospital_id, features, record_id" if with_details else ""
        upto = (
            f"SELECT seq, model_pos, event_time, score, label, decision, {cols}{extra} "
            "FROM discharges WHERE model_id = ?"
        )
        params: list[Any] = [model_id]
        if end_count is not None:
            upto += " AND model_pos <= ?"
            params.append(int(end_count))
        sql = f"WITH upto AS ({upto}) SELECT * FROM upto"
        if days is not None:
            sql += (
                " WHERE event_time >= (SELECT max(event_time) FROM upto) "
                f"- to_microseconds(CAST({round(float(days) * 86_400e6)} AS BIGINT))"
            )
        if last_n is not None:
            sql += " WHERE" if days is None else " AND"
            end = "(SELECT max(model_pos) FROM upto)" if end_count is None else int(end_count)
            sql += f" model_pos > {end} - {int(last_n)}"
        return c.execute(sql + " ORDER BY seq", params).df().drop(columns="model_pos")

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
        self._update_else_upsert(
            [(t, p, n) for (t, p), n in after.items()],
            "UPDATE source_offsets AS s SET next_offset = greatest(s.next_offset, v.n) "
            "FROM (VALUES {values}) AS v(t, p, n) WHERE s.topic = v.t AND s.partition = v.p",
            "INSERT INTO source_offsets VALUES {values} ON CONFLICT (topic, partition) "
            "DO UPDATE SET next_offset = greatest(next_offset, excluded.next_offset)",
        )

    def _update_else_upsert(
        self, rows: Sequence[tuple[Any, ...]], update: str, upsert: str
    ) -> None:
        """Write small keyed rows (unique keys) with one UPDATE of the rows already stored,
        the usual case, and the upsert only when a key is new (fewer rows updated than
        given). Why: a DuckDB statement costs about a millisecond whatever its size, an
        upsert on a keyed table twice an UPDATE, and executemany one statement per row.
        ``{values}`` in both statements becomes the rows' VALUES placeholders."""
        values = ", ".join(["(" + ", ".join(["?"] * len(rows[0])) + ")"] * len(rows))
        params = [v for row in rows for v in row]
        (updated,) = self._conn.execute(update.format(values=values), params).fetchone()
        if updated < len(rows):
            self._conn.execute(upsert.format(values=values), params)

    def write_model_partitions(self, changed: dict[str, tuple[str, int]]) -> None:
        """Models whose source partition is new or changed, inside the caller's transaction."""
        if changed:
            self._conn.executemany(
                "INSERT OR REPLACE INTO model_partitions VALUES (?, ?, ?)",
                [(m, t, p) for m, (t, p) in changed.items()],
            )

    def model_partitions(self) -> dict[str, tuple[str, int]]:
        rows = self._conn.execute("SELECT model_id, topic, partition FROM model_partitions")
        return {m: (t, int(p)) for m, t, p in rows.fetchall()}

    def _to_outbox(self, messages: Sequence[tuple[str, str]]) -> None:
        """(key, value) rows for the results topic, inside the caller's transaction."""
        if messages:
            self._conn.executemany(
                "INSERT INTO results_outbox (key, value) VALUES (?, ?)", list(messages)
            )

    def outbox_batch(
        self, limit: int, cursor: duckdb.DuckDBPyConnection
    ) -> list[tuple[int, str, str]]:
        """The oldest ``limit`` unpublished results, (id, key, value), in the order stored."""
        return cursor.execute(
            "SELECT id, key, value FROM results_outbox ORDER BY id LIMIT ?", [limit]
        ).fetchall()

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
        """Results read from the fleet's results topic, in one transaction (the view's own
        file, see monitor.service.fleet_view). Each message replaces the row its key names:
        a window result by (model, evaluation, metric, attribute), an event by (kind, model,
        metric, attribute, evaluation, confirmed), an axis result by (axis, model, stream
        position), so a result computed again by a partition's new owner overwrites its twin.
        """
        windows = []
        with self.transaction():
            for m in messages:
                f = m.fields
                if m.kind == "window":
                    windows.append((
                        f["model_id"], f["evaluation"], pd.Timestamp(f["evaluated_at"]),
                        f["window_kind"], None, None, f["window_end_count"], f["seed"],
                        f["metric"], f["attribute"], to_json(f["result"]), f["tier"],
                        f["confirmed_tier"]))  # fmt: skip
                elif m.kind == "event":
                    self._upsert_event(f)
                else:
                    self._upsert_axis(f)
            self._insert_frame(
                "window_results",
                ["model_id", "evaluation", "evaluated_at", "window_kind", "window_first_seq",
                 "window_last_seq", "window_end_count", "seed", "metric", "attribute",
                 "result", "tier", "confirmed_tier"],
                windows, json_columns={"result"}, replace=True,
            )  # fmt: skip
            models = sorted({w[0] for w in windows})
            if models:
                # what the report reads: each cell's latest result, each model's position
                # (the view has no tracker states: '{}')
                marks = ", ".join("?" * len(models))
                self._conn.execute(
                    "INSERT OR REPLACE INTO cell_state SELECT model_id, metric, attribute, "
                    "'{}'::JSON, result, evaluated_at FROM window_results "
                    f"WHERE model_id IN ({marks}) QUALIFY row_number() OVER (PARTITION BY "
                    "model_id, metric, attribute ORDER BY evaluation DESC) = 1", models,
                )  # fmt: skip
                self._conn.execute(
                    "INSERT OR REPLACE INTO model_state (model_id, records, evaluations, "
                    "old_events, updated_at, evaluated_records) SELECT model_id, "
                    "max(window_end_count), max(evaluation), 0, max(evaluated_at), "
                    f"max(window_end_count) FROM window_results WHERE model_id IN ({marks}) "
                    "GROUP BY model_id", models,
                )  # fmt: skip

    def _upsert_event(self, f: dict[str, Any]) -> None:
        c = self._conn
        natural = [f["event_kind"], f["model_id"], f["metric"], f["attribute"], f["evaluation"],
                   f["confirmed"]]  # fmt: skip
        where = ("kind = ? AND model_id = ? AND metric = ? AND attribute = ? AND evaluation = ? "
                 "AND confirmed = ?")  # fmt: skip
        row = c.execute(f"SELECT id FROM events WHERE {where}", natural).fetchone()
        if row is None:
            event_id = self._next_event
            self._next_event += 1
        else:
            event_id = int(row[0])
            c.execute("DELETE FROM events WHERE id = ?", [event_id])
        c.execute(
            "INSERT INTO events (id, created_at, kind, model_id, metric, attribute, old, new, "
            "confirmed, direction, evaluation, axes, decision_config, axes_before) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::JSON, ?, ?::JSON)",
            [event_id, pd.Timestamp(f["created_at"]), f["event_kind"], f["model_id"],
             f["metric"], f["attribute"], f["old"], f["new"], f["confirmed"], f["direction"],
             f["evaluation"], to_json(f["axes"]), f["decision_config"],
             to_json(f["axes_before"])],
        )  # fmt: skip

    def _upsert_axis(self, f: dict[str, Any]) -> None:
        c = self._conn
        key = [f["axis"], f["model_id"], f["position"]]
        old = c.execute(
            "SELECT computed_at FROM fleet_axis_keys WHERE axis = ? AND model_id = ? "
            "AND position = ?", key,
        ).fetchone()  # fmt: skip
        if old is not None:
            c.execute(
                "DELETE FROM axis_results WHERE axis = ? AND model_id = ? AND computed_at = ?",
                [f["axis"], f["model_id"], old[0]],
            )
        at = pd.Timestamp(f["computed_at"])
        c.execute("INSERT OR REPLACE INTO fleet_axis_keys VALUES (?, ?, ?, ?)", [*key, at])
        c.execute(
            "INSERT INTO axis_results VALUES (?, ?, ?, ?, ?::JSON)",
            [f["axis"], f["model_id"], at, f["cohort_n"], to_json(f["payload"])],
        )

    def memory_mb(self) -> float:
        """What DuckDB accounts for (its buffer pool: data blocks, indexes), in MiB, read
        through a fresh cursor. Benchmarks call it on the ingest thread: a probe from another
        thread keeps DuckDB from releasing memory."""
        cur = self.cursor()
        try:
            (b,) = cur.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()
        finally:
            cur.close()
        return float(b) / 2**20

    def source_offsets(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the offset after the last message stored from it."""
        rows = self._conn.execute("SELECT topic, partition, next_offset FROM source_offsets")
        return {(t, int(p)): int(n) for t, p, n in rows.fetchall()}

    def models(self, cursor: duckdb.DuckDBPyConnection | None = None) -> list[str]:
        c = cursor or self._conn
        return [
            r[0]
            for r in c.execute("SELECT DISTINCT model_id FROM discharges ORDER BY 1").fetchall()
        ]

    def models_with_results(self, cursor: duckdb.DuckDBPyConnection | None = None) -> list[str]:
        """Models with records or results here (a fleet view's file has results only)."""
        c = cursor or self._conn
        rows = c.execute(
            "SELECT model_id FROM discharges UNION SELECT model_id FROM window_results "
            "UNION SELECT model_id FROM axis_results ORDER BY 1"
        ).fetchall()
        return [r[0] for r in rows]

    def last_evaluation_times(self) -> dict[str, float]:
        """Each model's latest stored evaluation time, Unix seconds."""
        rows = self._conn.execute(
            "SELECT model_id, epoch(max(evaluated_at)) FROM window_results GROUP BY 1"
        ).fetchall()
        return {m: float(t) for m, t in rows}

    def counts(self, cursor: duckdb.DuckDBPyConnection | None = None) -> dict[str, int]:
        """Rows per table (a cursor from another thread than the writer's)."""
        c = cursor or self._conn
        tables = ("discharges", "dead_letters", "window_results", "events", "axis_results",
                  "job_runs")  # fmt: skip
        return {t: int(c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in tables}

    def confirmed_events(self, cursor: duckdb.DuckDBPyConnection | None = None) -> list[CellEvent]:
        """Every confirmed verdict flip and tier change, oldest first."""
        c = cursor or self._conn
        rows = c.execute(
            "SELECT kind, model_id, metric, attribute, old, new, confirmed, direction, "
            "evaluation, axes, axes_before FROM events WHERE confirmed ORDER BY id"
        ).fetchall()
        return [
            CellEvent(
                k, m, me, a, o, n, bool(cf), d, int(e), json.loads(ax) if ax else {},
                json.loads(bx) if bx else {},
            )
            for k, m, me, a, o, n, cf, d, e, ax, bx in rows
        ]  # fmt: skip

    # ------------------------------------------------------------------ evaluations and state
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
        cell_json = {id(x): to_json(x.to_dict()) for it in items for x in it.cells}
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
        self._insert_frame(
            "window_results",
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
            (model, m, a, to_json(st),
             to_json(None) if cell is None else cell_json[id(cell)], at)
            for (model, m, a), (st, cell, at) in latest.items()
        ]  # fmt: skip
        self._insert_frame(
            "cell_state", ["model_id", "metric", "attribute", "state", "latest", "updated_at"],
            latest_state, json_columns={"state", "latest"}, replace=True,
        )  # fmt: skip
        events = [(it.evaluated_at, e) for it in history for e in it.events]
        if events:
            first = self._next_event
            self._insert_frame(
                "events",
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

    def _insert_frame(
        self,
        table: str,
        columns: Sequence[str],
        rows: Sequence[tuple[Any, ...]],
        json_columns: set[str] = frozenset(),  # type: ignore[assignment]
        replace: bool = False,
    ) -> None:
        if not rows:
            return
        try:
            # an Arrow table from the columns: cheaper to build than a pandas frame of
            # Python objects, and DuckDB scans it without a per-value conversion
            frame: Any = pa.table(
                {c: pa.array(v) for c, v in zip(columns, zip(*rows, strict=True), strict=True)}
            )
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            frame = pd.DataFrame.from_records(list(rows), columns=list(columns))
        select = ", ".join(f'"{c}"::JSON' if c in json_columns else f'"{c}"' for c in columns)
        verb = "INSERT OR REPLACE INTO" if replace else "INSERT INTO"
        name = f"_ins_{table}"
        self._conn.register(name, frame)
        try:
            self._conn.execute(f"{verb} {table} SELECT {select} FROM {name}")
        finally:
            self._conn.unregister(name)

    def write_model_states(
        self, rows: Sequence[tuple[str, int, int, int, pd.Timestamp, int | None]]
    ) -> None:
        """(model_id, records, evaluations, old_events, at, evaluated_records) per model
        touched by a batch; evaluated_records is the end count of the last written evaluation.
        """
        if not rows:
            return
        # a dozen rows: one VALUES statement costs less than a pandas frame scan
        self._update_else_upsert(
            rows,
            "UPDATE model_state AS s SET records = v.r, evaluations = v.e, old_events = v.o, "
            "updated_at = v.a, evaluated_records = v.d "
            "FROM (VALUES {values}) AS v(m, r, e, o, a, d) WHERE s.model_id = v.m",
            "INSERT OR REPLACE INTO model_state (model_id, records, evaluations, "
            "old_events, updated_at, evaluated_records) VALUES {values}",
        )

    def model_states(self) -> dict[str, dict[str, int | None]]:
        rows = self._conn.execute(
            "SELECT model_id, records, evaluations, old_events, evaluated_records FROM model_state"
        ).fetchall()
        return {
            m: {"records": r, "evaluations": e, "old_events": o, "evaluated_records": v}
            for m, r, e, o, v in rows
        }

    def cell_states(self) -> list[tuple[str, str, str, dict[str, Any], dict[str, Any] | None]]:
        rows = self._conn.execute(
            "SELECT model_id, metric, attribute, state, latest FROM cell_state ORDER BY 1, 2, 3"
        ).fetchall()
        return [
            (m, me, a, json.loads(s), json.loads(lt) if lt else None) for m, me, a, s, lt in rows
        ]

    # ------------------------------------------------------------------ scheduled axes
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

    def latest_axis_results(
        self, axis: str, cursor: duckdb.DuckDBPyConnection | None = None
    ) -> dict[str, Any]:
        return latest_axis_results(cursor or self._conn, axis)

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

    # ------------------------------------------------------------------ API reads
    def events_since(
        self,
        limit: int = 100,
        since_id: int | None = None,
        cursor: duckdb.DuckDBPyConnection | None = None,
    ) -> list[dict[str, Any]]:
        c = cursor or self._conn
        sql = "SELECT * FROM events"
        params: list[Any] = []
        if since_id is not None:
            sql += " WHERE id > ?"
            params.append(since_id)
        sql += " ORDER BY id DESC LIMIT ?"
        params.append(int(limit))
        df = c.execute(sql, params).df()
        out = []
        for row in df.to_dict("records"):
            row["axes"] = json.loads(row["axes"]) if row["axes"] else {}
            before = row.get("axes_before")
            row["axes_before"] = json.loads(before) if isinstance(before, str) else {}
            row["created_at"] = str(row["created_at"])
            row["explanation"] = self.explain(self._event(row))
            out.append(row)
        return out

    @staticmethod
    def _event(row: dict[str, Any]) -> CellEvent:
        return CellEvent(
            row["kind"], row["model_id"], row["metric"], row["attribute"], row["old"],
            row["new"], bool(row["confirmed"]), row["direction"], int(row["evaluation"]),
            row["axes"], row["axes_before"],
        )  # fmt: skip

    def explain(self, event: CellEvent) -> str:
        """The event in one sentence, with the cutoffs of this configuration."""
        cfg = self.config
        rule = next((r for r in cfg.metrics if r.name == event.metric), None)
        return explain_event(
            event,
            Cutoffs(
                threshold=None if rule is None else rule.threshold,
                direction=None if rule is None else rule.direction,
                tau_vfr=cfg.axis1.tau_vfr,
                n_field=cfg.axis2.n_field,
                kappa_cutoff=cfg.axis3.kappa_cutoff,
            ),
        )

    def evaluation_window_sizes(
        self, events: Sequence[dict[str, Any]], cursor: duckdb.DuckDBPyConnection | None = None
    ) -> dict[tuple[str, int], int]:
        """(model_id, evaluation) -> the evaluation's window size, for the events given
        (the small-cell rule of the API's events)."""
        keys = {(e["model_id"], int(e["evaluation"])) for e in events
                if e.get("model_id") is not None and e.get("evaluation") is not None}  # fmt: skip
        if not keys:
            return {}
        c = cursor or self._conn
        frame = pd.DataFrame(sorted(keys), columns=["model_id", "evaluation"])
        c.register("_event_keys", frame)
        try:
            rows = c.execute(
                "SELECT k.model_id, k.evaluation, max(w.window_end_count), "
                "max(CAST(json_extract(w.result, '$.window_n') AS BIGINT)) "
                "FROM _event_keys k JOIN window_results w ON w.model_id = k.model_id "
                "AND w.evaluation = k.evaluation GROUP BY 1, 2"
            ).fetchall()
        finally:
            c.unregister("_event_keys")
        return {(m, int(e)): int(n) for m, e, _, n in rows if n is not None}

    def window_history(
        self,
        model_id: str,
        metric: str,
        attribute: str,
        limit: int = 100,
        cursor: duckdb.DuckDBPyConnection | None = None,
        before: int | None = None,
    ) -> list[dict[str, Any]]:
        """A cell's latest evaluations, newest first; ``before``: only older evaluations
        than that one (the next page)."""
        c = cursor or self._conn
        older = "" if before is None else " AND evaluation < ?"
        rows = c.execute(
            "SELECT evaluation, evaluated_at, window_end_count, seed, result FROM window_results "
            f"WHERE model_id = ? AND metric = ? AND attribute = ?{older} "
            "ORDER BY evaluation DESC LIMIT ?",
            [model_id, metric, attribute, *([] if before is None else [int(before)]), int(limit)],
        ).fetchall()
        return [
            {
                "evaluation": e,
                "evaluated_at": str(t),
                "window_end_count": n,
                "seed": int(s),
                **json.loads(r),
            }
            for e, t, n, s, r in rows
        ]

    def window_results_frame(self, model_id: str | None = None) -> pd.DataFrame:
        sql = "SELECT * FROM window_results"
        params: list[Any] = []
        if model_id is not None:
            sql += " WHERE model_id = ?"
            params.append(model_id)
        return self._conn.execute(
            sql + " ORDER BY model_id, evaluation, metric, attribute", params
        ).df()

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
            if out.get("discharges"):
                self._load_keys()  # forget the deleted keys
        return out

    # ------------------------------------------------------------------ API reads (pages)
    def axis_history(
        self,
        axis: str,
        model_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        cursor: duckdb.DuckDBPyConnection | None = None,
    ) -> list[dict[str, Any]]:
        """Stored results of one scheduled axis, newest first (all models when None).

        Rows as stored: the caller applies the small-cell rule to ``cohort_n``.
        """
        c = cursor or self._conn
        sql = (
            "SELECT axis, model_id, computed_at, cohort_n, payload FROM axis_results "
            "WHERE axis = ?"
        )
        params: list[Any] = [axis]
        if model_id is not None:
            sql += " AND model_id = ?"
            params.append(model_id)
        sql += " ORDER BY computed_at DESC, model_id LIMIT ? OFFSET ?"
        params += [int(limit), int(offset)]
        return [
            {"axis": a, "model_id": m, "computed_at": str(t), "cohort_n": n,
             "payload": json.loads(p)}
            for a, m, t, n, p in c.execute(sql, params).fetchall()
        ]  # fmt: skip


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
