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

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from monitor.config import MonitorConfig
from monitor.jsonable import to_json

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
    duplicates: int
    dead_letters: int
    new_mask: np.ndarray  # per valid row: True when stored now (not a duplicate)
    seq: np.ndarray  # arrival sequence number per valid row; -1 for duplicates


def _arrow(col: pd.Series) -> pa.Array:
    """A string column (missing values as null) as an Arrow string array."""
    values = col.to_numpy(dtype=object) if col.dtype == object else col
    return pa.array(values, pa.string(), from_pandas=True)


def _member(sorted_hashes: np.ndarray, h: np.ndarray) -> np.ndarray:
    if not sorted_hashes.size:
        return np.zeros(h.shape, dtype=bool)
    i = np.minimum(np.searchsorted(sorted_hashes, h), sorted_hashes.size - 1)
    return sorted_hashes[i] == h


class _KeyHashes:
    """DuckDB hashes of the stored (model_id, record_id) keys, to deduplicate without a join.

    Why: the join of a batch's keys with ``discharges`` scans the whole table, so its cost
    grows with every record stored (tens of ms per batch at a million records). A key
    whose hash is not here is certainly new; a key whose hash is here (a redelivery, a
    hash collision, a record deleted by retention) is checked against the table, so the
    result is exact. 8 bytes per stored record, rebuilt from the table at start-up and
    after retention; a sorted base plus a few sorted runs, merged now and then.
    """

    def __init__(self, hashes: np.ndarray):
        self.base = np.sort(np.asarray(hashes, dtype=np.uint64))
        self.runs: list[np.ndarray] = []
        self.staged: list[np.ndarray] = []

    def contains(self, h: np.ndarray) -> np.ndarray:
        hit = _member(self.base, h)
        for run in self.runs:
            hit |= _member(run, h)
        return hit

    def stage(self, h: np.ndarray) -> None:
        """Hashes of keys inserted by the open transaction (kept only if it commits)."""
        self.staged.append(np.sort(h))

    def commit(self) -> None:
        self.runs.extend(self.staged)
        self.staged.clear()
        if len(self.runs) > 16:
            # timsort merges the concatenated sorted runs in about linear time
            self.base = np.sort(np.concatenate([self.base, *self.runs]), kind="stable")
            self.runs.clear()

    def rollback(self) -> None:
        self.staged.clear()


class Store:
    """The one DuckDB connection of the service, with typed helpers for each table."""

    def __init__(self, path: str | Path, config: MonitorConfig):
        self.path = Path(path)
        self.config = config
        self.attributes = [a.name for a in config.attributes]
        self._conn = duckdb.connect(str(self.path))
        # validated by the config's pattern, so it can be spliced into the statement
        self._conn.execute(f"SET memory_limit = '{config.service.duckdb_memory_limit}'")
        self._lock = threading.RLock()  # one writer transaction at a time
        self._migrate()
        self._reset_counters()
        self._load_keys()

    def _load_keys(self) -> None:
        h = self._conn.execute("SELECT hash(model_id, record_id) AS h FROM discharges")
        self._keys = _KeyHashes(h.fetchnumpy()["h"])

    def _reset_counters(self) -> None:
        """Next ids from the stored maxima (at start, and after a rolled-back transaction)."""
        self._next_seq = self._scalar("SELECT COALESCE(MAX(seq), 0) + 1 FROM discharges")
        self._next_dead = self._scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM dead_letters")
        self._next_event = self._scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM events")
        self._next_job = self._scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM job_runs")

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
        """``with store.transaction() as tx:``: everything inside commits or rolls back."""
        return _Transaction(self)

    # ------------------------------------------------------------------ ingest
    def ingest(
        self,
        tx: _Transaction,
        valid: pd.DataFrame,
        dead: Sequence[DeadLetter],
        received_at: pd.Timestamp,
    ) -> IngestOutcome:
        """Store valid records (skipping (model_id, record_id) already stored or repeated
        within the batch) and dead letters, inside the caller's transaction."""
        c = self._conn
        n = len(valid)
        new_mask = np.zeros(n, dtype=bool)
        seq = np.full(n, -1, dtype=np.int64)
        if n:
            keys = valid[["model_id", "record_id"]].copy()
            keys["pos"] = np.arange(n)
            first = ~keys.duplicated(["model_id", "record_id"], keep="first").to_numpy()
            c.register("_batch_keys", keys[first])
            hashed = c.execute("SELECT pos, hash(model_id, record_id) AS h FROM _batch_keys")
            got = hashed.fetchnumpy()
            pos = np.asarray(got["pos"], dtype=np.int64)
            h = np.asarray(got["h"], dtype=np.uint64)
            maybe = self._keys.contains(h)
            existing = np.zeros(0, dtype=np.int64)
            if maybe.any():  # only these can be stored already: check them for real
                c.register("_maybe_keys", keys.iloc[pos[maybe]])
                existing = c.execute(
                    "SELECT k.pos FROM _maybe_keys k JOIN discharges d "
                    "ON d.model_id = k.model_id AND d.record_id = k.record_id"
                ).fetchnumpy()["pos"]
                c.unregister("_maybe_keys")
            c.unregister("_batch_keys")
            new_mask = first.copy()
            new_mask[np.asarray(existing, dtype=np.int64)] = False
            self._keys.stage(h[new_mask[pos]])
            k = int(new_mask.sum())
            seq[new_mask] = np.arange(self._next_seq, self._next_seq + k)
            if k:
                rows = valid[new_mask]
                feats = rows["features"].to_numpy(dtype=object)
                if set(map(type, feats)) <= {type(None)}:  # usually: no features at all
                    features = pa.nulls(k, pa.string())
                else:
                    features = pa.array(
                        [
                            None
                            if f is None or (isinstance(f, float) and math.isnan(f))
                            else to_json(f)
                            for f in feats
                        ],
                        pa.string(),
                    )
                # An Arrow table: DuckDB scans its columns as they are, where a pandas frame
                # of object columns costs a Python string conversion per value.
                table = pa.table(
                    {
                        "seq": pa.array(seq[new_mask]),
                        "model_id": _arrow(rows["model_id"]),
                        "record_id": _arrow(rows["record_id"]),
                        "event_time": pa.array(rows["event_time"].array),
                        "hospital_id": _arrow(rows["hospital_id"]),
                        "score": pa.array(rows["score"].to_numpy(dtype=np.float64)),
                        "label": pa.array(rows["label"].to_numpy(dtype=np.int8)),
                        "decision": pa.array(rows["decision"].to_numpy(dtype=np.int8)),
                        **{f"attr_{i}": _arrow(rows[a]) for i, a in enumerate(self.attributes)},
                        "features": features,
                    }
                )
                # the attribute object is built by DuckDB, column-wise, not per record in Python
                attrs = ", ".join(f"'{a}', attr_{i}" for i, a in enumerate(self.attributes))
                c.register("_batch_rows", table)
                c.execute(
                    "INSERT INTO discharges SELECT seq, model_id, record_id, event_time, "
                    f"?::TIMESTAMPTZ, hospital_id, score, label, decision, json_object({attrs}), "
                    "features::JSON FROM _batch_rows",
                    [received_at],
                )
                c.unregister("_batch_rows")
                self._next_seq += k
        if dead:
            frame = pd.DataFrame(
                {
                    "id": np.arange(self._next_dead, self._next_dead + len(dead)),
                    "received_at": received_at,
                    "reason": [d.reason for d in dead],
                    "topic": [d.topic for d in dead],
                    "partition": pd.array([d.partition for d in dead], dtype="Int32"),
                    "offset": pd.array([d.offset for d in dead], dtype="Int64"),
                    "payload": [d.payload for d in dead],
                }
            )
            c.register("_dead", frame)
            c.execute("INSERT INTO dead_letters SELECT * FROM _dead")
            c.unregister("_dead")
            self._next_dead += len(dead)
        inserted = int(new_mask.sum())
        return IngestOutcome(inserted, n - inserted, len(dead), new_mask, seq)

    # ------------------------------------------------------------------ reads for windows/axes
    def records(
        self,
        model_id: str,
        *,
        last_n: int | None = None,
        since: pd.Timestamp | None = None,
        upto_count: int | None = None,
        cursor: duckdb.DuckDBPyConnection | None = None,
        with_details: bool = False,
    ) -> pd.DataFrame:
        """A model's stored records in arrival order, as the window/axes need them.

        ``upto_count`` keeps the model's first N records (the state at that point
        of the stream); ``last_n`` then keeps the last N of those; ``since``
        keeps records with event_time >= since.
        """
        c = cursor or self._conn
        cols = ", ".join(
            [f"json_extract_string(attributes, '$.{a}') AS \"{a}\"" for a in self.attributes]
        )
        extra = ", hospital_id, features, record_id" if with_details else ""
        sql = (
            f"SELECT seq, event_time, score, label, decision, {cols}{extra} FROM discharges "
            "WHERE model_id = ?"
        )
        params: list[Any] = [model_id]
        if since is not None:
            sql += " AND event_time >= ?"
            params.append(since)
        sql += " ORDER BY seq"
        inner = sql
        if upto_count is not None:
            inner = f"{sql} LIMIT {int(upto_count)}"
        if last_n is not None:
            inner = f"SELECT * FROM ({inner}) ORDER BY seq DESC LIMIT {int(last_n)}"
            inner = f"SELECT * FROM ({inner}) ORDER BY seq"
        return c.execute(inner, params).df()

    def models(self, cursor: duckdb.DuckDBPyConnection | None = None) -> list[str]:
        c = cursor or self._conn
        return [
            r[0]
            for r in c.execute("SELECT DISTINCT model_id FROM discharges ORDER BY 1").fetchall()
        ]

    def counts(self) -> dict[str, int]:
        out = {}
        for t in (
            "discharges",
            "dead_letters",
            "window_results",
            "events",
            "axis_results",
            "job_runs",
        ):
            out[t] = self._scalar(f"SELECT COUNT(*) FROM {t}")
        return out

    # ------------------------------------------------------------------ evaluations and state
    def write_evaluations(self, tx: _Transaction, items: Sequence[dict[str, Any]]) -> None:
        """Axis 1 results of a batch's evaluations, the cells' latest tracker states and events.

        ``items``: dicts with model_id, evaluation, window, cells, states, events,
        evaluated_at. Written once per batch (one insert per table): per-evaluation
        statements cost more than the evaluations' rows themselves.
        """
        if not items:
            return
        c = self._conn
        # each cell's JSON once: it is the window result and, for the latest, cell_state's
        cell_json = {id(x): to_json(x) for it in items for x in it["cells"]}
        wr = [
            (
                it["model_id"], it["evaluation"], it["evaluated_at"], it["window"]["kind"],
                it["window"].get("first_seq"), it["window"].get("last_seq"),
                it["window"].get("end_count"), int(it["window"]["seed"]), x["metric"],
                x["attribute"], cell_json[id(x)], x.get("tier"), x.get("confirmed_tier"),
            )
            for it in items
            for x in it["cells"]
        ]  # fmt: skip
        self._insert_frame(
            "window_results",
            ["model_id", "evaluation", "evaluated_at", "window_kind", "window_first_seq",
             "window_last_seq", "window_end_count", "seed", "metric", "attribute", "result",
             "tier", "confirmed_tier"],
            wr, json_columns={"result"},
        )  # fmt: skip
        latest: dict[tuple[str, str, str], tuple[Any, Any, Any]] = {}
        for it in items:  # a cell evaluated twice in one batch keeps its last state
            cells = {(x["metric"], x["attribute"]): x for x in it["cells"]}
            for m, a, st in it["states"]:
                latest[(it["model_id"], m, a)] = (st, cells.get((m, a)), it["evaluated_at"])
        latest_state = [
            (model, m, a, to_json(st),
             to_json(None) if cell is None else cell_json[id(cell)], at)
            for (model, m, a), (st, cell, at) in latest.items()
        ]  # fmt: skip
        self._insert_frame(
            "cell_state", ["model_id", "metric", "attribute", "state", "latest", "updated_at"],
            latest_state, json_columns={"state", "latest"}, replace=True,
        )  # fmt: skip
        events = [(it["evaluated_at"], e) for it in items for e in it["events"]]
        if events:
            first = self._next_event
            self._insert_frame(
                "events",
                ["id", "created_at", "kind", "model_id", "metric", "attribute", "old", "new",
                 "confirmed", "direction", "evaluation", "axes"],
                [
                    (first + i, at, e["kind"], e["model_id"], e["metric"], e["attribute"],
                     e["old"], e["new"], e["confirmed"], e["direction"], e["evaluation"],
                     to_json(e.get("axes", {})))
                    for i, (at, e) in enumerate(events)
                ],
                json_columns={"axes"},
            )  # fmt: skip
            self._next_event += len(events)
        del c

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
        values = ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(rows))
        self._conn.execute(
            "INSERT OR REPLACE INTO model_state (model_id, records, evaluations, old_events, "
            f"updated_at, evaluated_records) VALUES {values}",
            [v for row in rows for v in row],
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
    ) -> None:
        c = cursor or self._conn
        c.execute(
            "INSERT INTO axis_results VALUES (?, ?, ?, ?, ?::JSON)",
            [axis, model_id, at, cohort_n, to_json(payload)],
        )

    def latest_axis_results(
        self, axis: str, cursor: duckdb.DuckDBPyConnection | None = None
    ) -> dict[str, Any]:
        c = cursor or self._conn
        rows = c.execute(
            "SELECT model_id, payload FROM (SELECT *, row_number() OVER (PARTITION BY model_id "
            "ORDER BY computed_at DESC) AS rn FROM axis_results WHERE axis = ?) WHERE rn = 1",
            [axis],
        ).fetchall()
        return {m: json.loads(p) for m, p in rows}

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
    def cells_latest(self, cursor: duckdb.DuckDBPyConnection | None = None) -> list[dict[str, Any]]:
        c = cursor or self._conn
        rows = c.execute(
            "SELECT latest FROM cell_state WHERE latest IS NOT NULL "
            "ORDER BY model_id, metric, attribute"
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

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
            row["created_at"] = str(row["created_at"])
            out.append(row)
        return out

    def window_history(
        self,
        model_id: str,
        metric: str,
        attribute: str,
        limit: int = 100,
        cursor: duckdb.DuckDBPyConnection | None = None,
    ) -> list[dict[str, Any]]:
        c = cursor or self._conn
        rows = c.execute(
            "SELECT evaluation, evaluated_at, window_end_count, seed, result FROM window_results "
            "WHERE model_id = ? AND metric = ? AND attribute = ? ORDER BY evaluation DESC LIMIT ?",
            [model_id, metric, attribute, int(limit)],
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
                ("dead_letters", "received_at", result_days),
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
