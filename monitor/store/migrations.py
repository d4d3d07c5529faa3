"""The schema of the service's DuckDB file, by version, and the upgrade of an older file.

Each entry of :data:`MIGRATIONS` upgrades the schema by one version, in one transaction;
``schema_migrations`` records what a file has, so an older file is upgraded in place at
start-up and a newer one is refused (this build cannot know what its tables mean).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import duckdb

#: The keys of a stored cell evaluation (``CellEvaluation.to_dict``) that some earlier
#: version did not write, each with the value that means what its absence meant (a NaN
#: figure is null). Decoding (monitor.store.codec) reads every key: rows of earlier
#: versions get these once, by migration v13, and a results-topic message of an earlier
#: version on arrival (:func:`upgraded_cell`); a file opened read-only without migrating
#: (``vfr-monitor report --db``) has its rows upgraded as the codec reads them.
#: ``not_applicable_axes`` is not here: its absence meant Axis 3 when the tier was
#: ``partial`` (:func:`upgraded_cell`).
CELL_KEYS_V13: dict[str, Any] = {
    "n_undefined": 0, "min_denominator": None, "evaluable": True, "not_evaluable_reason": "",
    "records_needed": None, "records_needed_groups": [], "driver_rate": None,
    "low_group": None, "high_group": None, "low_rate": None, "high_rate": None,
    "low_share": None, "high_share": None, "low_withheld": False, "high_withheld": False,
    "extreme_shares": [], "low_subgroups": [], "pooled_value": None,
    "pooled_point_verdict": None, "pooled_n_pass": None, "pooled_vfr": None,
    "pooled_dominant_verdict": None, "pooled_ci_low": None, "pooled_ci_high": None,
    "pooled_strength": None, "verdict_basis": "raw", "raw_value": None,
    "raw_point_verdict": None, "raw_n_pass": None, "raw_vfr": None,
    "raw_dominant_verdict": None, "groups_evaluated": 0, "groups_total": 0,
    "failed_axes": [], "pending_axes": [], "tier_reason": "", "confirmed_tier": None,
    "confirmed_verdict": None, "reliable_verdict": None, "n_star": None, "kappa": None,
    "evaluated_at": "", "released": True, "predictions": None, "with_outcome": None,
    "outcome_coverage": None, "certified": None,
}  # fmt: skip


#: Every key :func:`upgraded_cell` may add.
CELL_KEYS_ADDED = frozenset({*CELL_KEYS_V13, "not_applicable_axes"})


def lacks_cell_keys(d: Mapping[str, Any]) -> bool:
    """Whether a stored cell evaluation was written by a version before some of its keys
    (a row of a file not migrated to v13: one the report opens read-only; a results-topic
    message of an earlier version)."""
    return not d.keys() >= CELL_KEYS_ADDED


def upgraded_cell(d: Mapping[str, Any]) -> dict[str, Any]:
    """A stored cell evaluation with the keys its version did not write (what v13 adds to
    the rows of a file; what the codec adds to a row of a file it reads without migrating).

    >>> up = upgraded_cell({"tier": "Pending", "partial": True})
    >>> up["not_applicable_axes"], up["verdict_basis"], up["released"]
    (['axis3'], 'raw', True)
    """
    out = {**d}
    for k, v in CELL_KEYS_V13.items():
        if k not in out:
            out[k] = json.loads(json.dumps(v))  # a fresh list per row
    if "not_applicable_axes" not in out:
        out["not_applicable_axes"] = ["axis3"] if out.get("partial") else []
    return out


def _cell_json_upgrade(column: str, path: str = "$") -> str:
    """SQL: ``column`` (a cell evaluation's JSON, at ``path``) with the keys of
    :func:`upgraded_cell` its row lacks inserted (json_insert keeps what is there)."""
    expr = column
    for k, v in CELL_KEYS_V13.items():
        expr = f"json_insert({expr}, '{path}.{k}', '{json.dumps(v)}'::JSON)"
    partial = f"json_extract({column}, '{path}.partial')::VARCHAR = 'true'"
    axes = f"(CASE WHEN {partial} THEN '[\"axis3\"]' ELSE '[]' END)::JSON"
    return f"json_insert({expr}, '{path}.not_applicable_axes', {axes})"


def _cell_json_lacks(column: str, path: str = "$") -> str:
    """SQL: whether the JSON at ``path`` of ``column`` lacks a key v13 adds."""
    return " OR ".join(f"NOT json_exists({column}, '{path}.{k}')" for k in CELL_KEYS_ADDED)


def _cell_rows_v13() -> list[str]:
    """Migration v13: every stored cell evaluation with every key (:data:`CELL_KEYS_V13`),
    so decoding reads one shape: ``window_results.result``, ``cell_state.latest`` and the
    released one in ``cell_state.state``."""
    released = "json_type(state, '$.released') = 'OBJECT'"
    return [
        f"UPDATE window_results SET result = {_cell_json_upgrade('result')} "
        f"WHERE {_cell_json_lacks('result')}",
        f"UPDATE cell_state SET latest = {_cell_json_upgrade('latest')} "
        f"WHERE json_type(latest) = 'OBJECT' AND ({_cell_json_lacks('latest')})",
        f"UPDATE cell_state SET state = {_cell_json_upgrade('state', '$.released')} "
        f"WHERE {released} AND ({_cell_json_lacks('state', '$.released')})",
    ]


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
    # key_index.KeyHashes, runs before every insert, and the one writer process assigns
    # seq), while DuckDB maintained both ART indexes on every insert and commit (about
    # 2.4 us a record on a 2-core machine) and kept them in memory: the index grew with every
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
    # v9 (disclosure control): each model's release points (per attribute: the window's last
    # sequence number and group sizes when its cells were last released), written with the
    # model's stream position, so a restart releases as an uninterrupted run would
    # (monitor.stream.publication). NULL (a file written before v9): released afresh.
    ["ALTER TABLE model_state ADD COLUMN IF NOT EXISTS releases JSON"],
    # v10 (disclosure control): the cohort each scheduled axis last published a result on
    # (its last sequence number and group sizes), so a job whose cohort moved by 1-10
    # records of a group publishes nothing new, across restarts too.
    [
        """CREATE TABLE IF NOT EXISTS axis_releases (
            axis VARCHAR NOT NULL, model_id VARCHAR NOT NULL, cohort JSON NOT NULL,
            PRIMARY KEY (axis, model_id))""",
    ],
    # v11 (predictions now, outcomes later): a prediction is stored without its
    # label (NULL until its outcome joins); ``outcome_time`` is when the label became known
    # and ``label_pos`` the model's stream position from which the label counts (a window
    # rebuilt at a position sees the labels it saw live). Existing records came joined:
    # known at scoring, from their own position. ``held_outcomes``: outcomes that came
    # before their prediction, held for [outcomes] orphan_hold_days.
    [
        "ALTER TABLE discharges ALTER COLUMN label DROP NOT NULL",
        "ALTER TABLE discharges ADD COLUMN IF NOT EXISTS outcome_time TIMESTAMPTZ",
        "ALTER TABLE discharges ADD COLUMN IF NOT EXISTS label_pos BIGINT",
        "UPDATE discharges SET outcome_time = event_time, label_pos = model_pos",
        """CREATE TABLE IF NOT EXISTS held_outcomes (
            model_id VARCHAR NOT NULL, record_id VARCHAR NOT NULL, label TINYINT NOT NULL,
            known_at TIMESTAMPTZ NOT NULL, received_at TIMESTAMPTZ NOT NULL,
            topic VARCHAR, partition INTEGER, "offset" BIGINT, payload BLOB,
            PRIMARY KEY (model_id, record_id))""",
    ],
    # v12 (certified verdicts, docs/method.md section 11): each model's CertifiedGrid state
    # and the stream position of the last block it took, written with the model's stream
    # position, so a restart resumes the e-detectors without counting a block twice
    # (monitor.stream.certified). NULL (a file written before v12): the cells start
    # undetermined from the next hop.
    ["ALTER TABLE model_state ADD COLUMN IF NOT EXISTS certified JSON"],
    # v13 (one composed cell): every stored cell evaluation carries every key of its flat
    # form, so the codec decodes one shape (the keys an earlier version did not write get
    # the value their absence meant: CELL_KEYS_V13); nothing else changes.
    _cell_rows_v13(),
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(c: duckdb.DuckDBPyConnection) -> None:
    """Upgrade the file of ``c`` to :data:`SCHEMA_VERSION`, one transaction a version."""
    c.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
        "applied_at TIMESTAMPTZ DEFAULT now())"
    )
    current = int(
        c.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]  # type: ignore[index]  # one row: an aggregate query
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


def schema_version(c: duckdb.DuckDBPyConnection) -> int:
    """The schema version of the file of ``c``."""
    return int(c.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0])  # type: ignore[index]  # one row: an aggregate query
