"""Every read of the file's tables, as plain functions of a DuckDB connection.

One definition of each read, shared by the pipeline's restore (through the
:class:`~monitor.store.writer.Store`'s own connection), the service API and the scheduled
jobs (through a cursor of it, ``store.cursor()``), the report (through a cursor, or a
connection opened ``read_only``) and the tests. Functions return typed rows or plain
values; wording and the small-cell rule belong to the callers that show them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal, NamedTuple, overload

import duckdb
import numpy as np
import pandas as pd

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result
from monitor.core.coverage import AttributeCoverage
from monitor.core.events import CellEvent
from monitor.core.results import CellEvaluation
from monitor.store.codec import (
    AxisResult,
    CohortRelease,
    StoredCell,
    StoredModelState,
    decode_axis_result,
    decode_cell,
    decode_cohort_release,
    decode_coverage,
    decode_evaluation,
    decode_model_state,
)

#: Tables whose rows :func:`counts` counts.
COUNTED_TABLES = ("discharges", "dead_letters", "window_results", "events", "axis_results",
                  "job_runs")  # fmt: skip


# --------------------------------------------------------------------------- records


def window_records(
    c: duckdb.DuckDBPyConnection,
    attributes: Sequence[str],
    model_id: str,
    *,
    end_count: int | None = None,
    last_n: int | None = None,
    days: float | None = None,
    with_details: bool = False,
) -> pd.DataFrame:
    """The records of a model's window at a stream position, in arrival order, with one
    column per attribute in ``attributes``.

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
    cols = ", ".join(
        [f"json_extract_string(attributes, '$.{a}') AS \"{a}\"" for a in attributes]
    )
    extra = ", hospital_id, features, record_id" if with_details else ""
    # predictions now, outcomes later: a label counts from its position (label_pos): at
    # ``end_count`` an outcome that came later is not known yet. ``label`` is -1 while unknown,
    # ``delay_ns`` the outcome's delay (NULL while unknown).
    known = "label IS NOT NULL"
    if end_count is not None:
        known += f" AND label_pos <= {int(end_count)}"
    upto = (
        f"SELECT seq, model_pos, event_time, score, CAST(CASE WHEN {known} THEN label ELSE -1 "
        f"END AS TINYINT) AS label, decision, {cols}{extra}, CASE WHEN {known} THEN "
        "epoch_ns(outcome_time) - epoch_ns(event_time) END AS delay_ns "
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


def block_records(
    c: duckdb.DuckDBPyConnection,
    attributes: Sequence[str],
    model_id: str,
    after: int,
    upto: int,
) -> pd.DataFrame:
    """The records of a model's certified block (docs/method.md section 11): the stream
    positions in (``after``, ``upto``], in arrival order, with one column per attribute.

    Two kinds of rows, told apart by the boolean columns:

    * ``predicted``: the predictions of the block (``model_pos`` in the range), what the
      label-free metrics take;
    * ``joined``: the outcomes that count from a position in the range (``label_pos``, as
      :func:`window_records` counts them), with their label: what the label-based metrics
      take. A prediction scored in the block whose outcome comes later is joined in a later
      block, never in two.

    ``label`` is -1 where the outcome does not count by ``upto``; ``event_time_ns`` is the
    scoring time (the block's clock).
    """
    lo, hi = int(after), int(upto)
    cols = ", ".join(
        [f"json_extract_string(attributes, '$.{a}') AS \"{a}\"" for a in attributes]
    )
    known = f"label IS NOT NULL AND label_pos <= {hi}"
    sql = (
        f"SELECT model_pos, epoch_ns(event_time) AS event_time_ns, score, decision, "
        f"CAST(CASE WHEN {known} THEN label ELSE -1 END AS TINYINT) AS label, {cols}, "
        f"model_pos > {lo} AS predicted, "
        f"COALESCE(label IS NOT NULL AND label_pos > {lo} AND label_pos <= {hi}, false) "
        "AS joined FROM discharges WHERE model_id = ? AND model_pos <= ? AND "
        f"(model_pos > {lo} OR (label IS NOT NULL AND label_pos > {lo} AND label_pos <= {hi})) "
        "ORDER BY seq"
    )
    return c.execute(sql, [model_id, hi]).df()


def _sql_text(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _cohort_columns(attributes: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The cohort columns, each attribute as its group index: the position of the record's
    code in the attribute's configured codes, -1 when it is none of them (DuckDB maps the
    codes column-wise; the caller rejects -1 as the re-read path rejects an unknown code)."""
    cols = ", ".join(
        f"coalesce(list_position([{', '.join(_sql_text(c) for c in codes)}], "
        f'json_extract_string(attributes, {_sql_text("$." + name)})), 0) - 1 AS "{i}"'
        for i, (name, codes) in enumerate(attributes)
    )
    # label -1: a prediction whose outcome has not come (predictions now, outcomes later)
    return (
        "seq, epoch_us(event_time) AS event_us, score, coalesce(label, -1) AS label, decision, "
        f"hospital_id, {cols}"
    )


#: A microsecond count as a TIMESTAMPTZ constant (folded, so DuckDB can skip row groups).
_AT_US = "(to_timestamp(0) + to_microseconds(CAST(? AS BIGINT)))"


def cohort_bounds(c: duckdb.DuckDBPyConnection, model_id: str) -> tuple[int, int | None]:
    """(last sequence number, latest event time in microseconds) of a model's stored records;
    (0, None) for a model without records."""
    seq, us = c.execute(  # type: ignore[misc]  # one row: an aggregate query
        "SELECT coalesce(max(seq), 0), epoch_us(max(event_time)) FROM discharges "
        "WHERE model_id = ?",
        [model_id],
    ).fetchone()
    return int(seq), None if us is None else int(us)


def cohort_slice(
    c: duckdb.DuckDBPyConnection,
    attributes: Sequence[tuple[str, Sequence[str]]],
    model_id: str,
    *,
    after_seq: int = 0,
    upto_seq: int | None = None,
    from_us: int | None = None,
    before_us: int | None = None,
) -> dict[str, np.ndarray]:
    """A model's records with ``after_seq < seq <= upto_seq`` and event time in
    ``[from_us, before_us)`` (microseconds; None: unbounded), in no order: what entered or
    left an audit cohort kept as counts (monitor.service.cohort_book). Columns (numpy
    arrays; strings as objects, no pandas conversion): seq, event_us, score, label,
    decision, hospital_id and, per (name, codes) of ``attributes``, its group index
    under the attribute's position ("0", "1", ...)."""
    sql = f"SELECT {_cohort_columns(attributes)} FROM discharges WHERE model_id = ? AND seq > ?"
    params: list[Any] = [model_id, int(after_seq)]
    for cond, value in (
        (" AND seq <= ?", upto_seq),
        (f" AND event_time >= {_AT_US}", from_us),
        (f" AND event_time < {_AT_US}", before_us),
    ):
        if value is not None:
            sql += cond
            params.append(int(value))
    got = c.execute(sql, params).fetchnumpy()  # any order: they are counted
    return {k: np.asarray(v) for k, v in got.items()}


def cohort_joined(
    c: duckdb.DuckDBPyConnection,
    attributes: Sequence[tuple[str, Sequence[str]]],
    model_id: str,
    seqs: np.ndarray,
) -> dict[str, np.ndarray]:
    """The records among ``seqs`` (a cohort's predictions counted without an outcome) whose
    outcome has joined since: what moves to the label-based counts (predictions now, outcomes
    later). Cost: a hash join on the pending sequence numbers, not a scan of the cohort's
    outcomes."""
    c.register("vfr_pending_seqs", pd.DataFrame({"pending_seq": np.asarray(seqs, np.int64)}))
    try:
        got = c.execute(
            f"SELECT {_cohort_columns(attributes)} FROM discharges JOIN vfr_pending_seqs "
            "ON seq = pending_seq WHERE model_id = ? AND label IS NOT NULL",
            [model_id],
        ).fetchnumpy()
    finally:
        c.unregister("vfr_pending_seqs")
    return {k: np.asarray(v) for k, v in got.items()}


def cohort_extent(
    c: duckdb.DuckDBPyConnection, model_id: str, upto_seq: int, from_us: int
) -> tuple[int | None, int | None]:
    """(last sequence number, earliest event time in microseconds) of a model's records up to
    ``upto_seq`` with event time at or after ``from_us``: what is left of a cohort after its
    oldest records left it; (None, None) when nothing is."""
    seq, first = c.execute(  # type: ignore[misc]  # one row: an aggregate query
        f"SELECT max(seq), epoch_us(min(event_time)) FROM discharges WHERE model_id = ? "
        f"AND seq <= ? AND event_time >= {_AT_US}",
        [model_id, int(upto_seq), int(from_us)],
    ).fetchone()
    return (None if seq is None else int(seq)), (None if first is None else int(first))


def monthly_records(
    c: duckdb.DuckDBPyConnection, model_id: str, since: datetime | None = None
) -> list[tuple[str, int]]:
    """(YYYY-MM, records) of a model per calendar month of event time (UTC), oldest first."""
    sql = (
        "SELECT strftime(date_trunc('month', event_time AT TIME ZONE 'UTC'), '%Y-%m') AS mo, "
        "count(*) FROM discharges WHERE model_id = ?"
    )
    params: list[Any] = [model_id]
    if since is not None:
        sql += " AND event_time >= ?"
        params.append(since)
    return [(m, int(n)) for m, n in c.execute(sql + " GROUP BY 1 ORDER BY 1", params).fetchall()]


def daily_records(c: duckdb.DuckDBPyConnection, model_id: str) -> list[tuple[date, int]]:
    """(UTC day of event time, records) of a model, oldest first; days without records are
    absent (the report's period filters and monthly volumes are built from these)."""
    rows = c.execute(
        "SELECT CAST(event_time AT TIME ZONE 'UTC' AS DATE) AS d, count(*) FROM discharges "
        "WHERE model_id = ? GROUP BY 1 ORDER BY 1",
        [model_id],
    ).fetchall()
    return [(d, int(n)) for d, n in rows]


def latest_labels_scores(
    c: duckdb.DuckDBPyConnection, model_id: str, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """Labels and scores of a model's latest ``limit`` records, in arrival order."""
    got = c.execute(
        "SELECT label, score FROM (SELECT seq, label, score FROM discharges WHERE model_id = ? "
        f"ORDER BY seq DESC LIMIT {int(limit)}) ORDER BY seq",
        [model_id],
    ).fetchnumpy()
    return np.asarray(got["label"], dtype=np.int64), np.asarray(got["score"], dtype=np.float64)


# --------------------------------------------------------------------------- the file


def tables(c: duckdb.DuckDBPyConnection) -> set[str]:
    """Names of the file's tables."""
    return {r[0] for r in c.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def counts(c: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Rows per table of :data:`COUNTED_TABLES`."""
    return {
        t: int(c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in COUNTED_TABLES  # type: ignore[index]  # one row: an aggregate query
    }


def memory_mb(c: duckdb.DuckDBPyConnection) -> float:
    """What DuckDB accounts for (its buffer pool: data blocks, indexes), in MiB."""
    (b,) = c.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()  # type: ignore[misc]  # one row: an aggregate query
    return float(b) / 2**20


def models_with_results(c: duckdb.DuckDBPyConnection) -> list[str]:
    """Models with records or results here (a fleet view's file has results only)."""
    rows = c.execute(
        "SELECT model_id FROM discharges UNION SELECT model_id FROM window_results "
        "UNION SELECT model_id FROM axis_results ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


# --------------------------------------------------------------------------- state


def source_offsets(c: duckdb.DuckDBPyConnection) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the offset after the last message stored from it."""
    rows = c.execute("SELECT topic, partition, next_offset FROM source_offsets")
    return {(t, int(p)): int(n) for t, p, n in rows.fetchall()}


def held_count(c: duckdb.DuckDBPyConnection) -> int:
    """How many outcomes are held (waiting for their prediction)."""
    # fetchall, not fetchone: inside the writer's transaction an unfinished result keeps
    # the connection busy for the batch's next statement
    return int(c.execute("SELECT count(*) FROM held_outcomes").fetchall()[0][0])


def model_clocks(c: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Each model's event-time clock (ns): the latest scoring time or outcome time of
    its stored records and held outcomes (the clock of :mod:`monitor.stream.join_rules`)."""
    rows = c.execute(
        "SELECT model_id, max(t) FROM (SELECT model_id, epoch_ns(greatest(max(event_time), "
        "coalesce(max(outcome_time), max(event_time)))) AS t FROM discharges GROUP BY "
        "model_id UNION ALL SELECT model_id, epoch_ns(max(known_at)) FROM held_outcomes "
        "GROUP BY model_id) GROUP BY model_id"
    ).fetchall()
    return {str(m): int(t) for m, t in rows}


def model_partitions(c: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, int]]:
    """model_id -> the (topic, partition) its records come from."""
    rows = c.execute("SELECT model_id, topic, partition FROM model_partitions")
    return {m: (t, int(p)) for m, t, p in rows.fetchall()}


def model_states(c: duckdb.DuckDBPyConnection) -> dict[str, StoredModelState]:
    """model_id -> its stream counters, its release points (None before v9) and its
    certified verdicts' state (None before v12), decoded by monitor.store.codec."""
    rows = c.execute(
        "SELECT model_id, records, evaluations, old_events, evaluated_records, releases, "
        "certified FROM model_state"
    ).fetchall()
    return {m: decode_model_state(*rest) for m, *rest in rows}


def cell_states(c: duckdb.DuckDBPyConnection) -> list[StoredCell]:
    """Every cell's tracker, released and latest evaluation, in key order."""
    rows = c.execute(
        "SELECT model_id, metric, attribute, state, latest FROM cell_state ORDER BY 1, 2, 3"
    ).fetchall()
    return [decode_cell(*row) for row in rows]


def models_with_cells(c: duckdb.DuckDBPyConnection) -> list[str]:
    """Models with a cell state (what the report reports on), in name order."""
    rows = c.execute("SELECT DISTINCT model_id FROM cell_state ORDER BY 1").fetchall()
    return [r[0] for r in rows]


def latest_cells(c: duckdb.DuckDBPyConnection, model_id: str) -> list[CellEvaluation]:
    """A model's cells' released results as cell_state keeps them, typed
    (monitor.store.codec): the one saved with the state (monitor.stream.publication), else
    the latest (a file written before releases, or a fleet view's file, which keeps
    released ones only)."""
    rows = c.execute(
        "SELECT coalesce(state->'$.released', latest) FROM cell_state "
        "WHERE model_id = ? AND latest IS NOT NULL",
        [model_id],
    ).fetchall()
    return [decode_evaluation(lt) for (lt,) in rows]


def model_progress(c: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, int]]:
    """model_id -> (records accepted, evaluations made)."""
    rows = c.execute("SELECT model_id, records, evaluations FROM model_state").fetchall()
    return {m: (int(r), int(e)) for m, r, e in rows}


# --------------------------------------------------------------------------- window results


def last_evaluation_times(c: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """Each model's latest stored evaluation time, Unix seconds."""
    rows = c.execute(
        "SELECT model_id, epoch(max(evaluated_at)) FROM window_results GROUP BY 1"
    ).fetchall()
    return {m: float(t) for m, t in rows}


def evaluation_times(c: duckdb.DuckDBPyConnection) -> dict[tuple[str, int], datetime | None]:
    """(model, evaluation) -> event time of the window's last record, else evaluation time
    (a zone-aware datetime, as DuckDB returns a TIMESTAMPTZ; None when neither is known)."""
    rows = c.execute(
        "SELECT w.model_id, w.evaluation, COALESCE(any_value(d.event_time), "
        "any_value(w.evaluated_at)) FROM (SELECT DISTINCT model_id, evaluation, "
        "window_last_seq, evaluated_at FROM window_results) w "
        "LEFT JOIN discharges d ON d.seq = w.window_last_seq GROUP BY 1, 2"
    ).fetchall()
    return {(m, int(e)): t for m, e, t in rows}


#: A stored evaluation that was released (published; rows written before releases
#: existed count as released). The window history and every view read only these:
#: figures change only at a release (monitor.stream.publication, docs/privacy.md).
RELEASED = "coalesce(CAST(result->>'$.released' AS BOOLEAN), true)"


def latest_window_results(c: duckdb.DuckDBPyConnection) -> list[tuple[str, CellEvaluation]]:
    """(model, result) of each cell's latest released evaluation, typed
    (monitor.store.codec), in (model, metric, attribute) order: what a fleet view shows
    and what a restart publishes again."""
    rows = c.execute(
        f"SELECT model_id, result FROM window_results WHERE {RELEASED} QUALIFY row_number() OVER "
        "(PARTITION BY model_id, metric, attribute ORDER BY evaluation DESC) = 1 "
        "ORDER BY model_id, metric, attribute"
    ).fetchall()
    return [(m, decode_evaluation(r)) for m, r in rows]


class HistoryRow(NamedTuple):
    """One stored evaluation of a cell, the fields of its result picked by DuckDB (cheaper
    than a json.loads per row): text as stored, ``failed_axes``/``pending_axes`` JSON
    text."""

    model_id: str
    metric: str
    attribute: str
    evaluation: int
    tier: str | None
    confirmed_tier: str | None
    window_n: str | None
    threshold: str | None
    direction: str | None
    value: str | None
    vfr: str | None
    ci_low: str | None
    ci_high: str | None
    dominant_verdict: str | None
    point_verdict: str | None
    n_star: str | None
    kappa: str | None
    failed_axes: str | None
    pending_axes: str | None
    partial: str | None
    n_pass: str | None
    K: str | None
    confirmed_verdict: str | None


#: The result fields a history row picks (HistoryRow's fields after the row's own
#: columns, named as in the result). One json_extract_string of the whole list, with the
#: ``released`` flag last, parses each result once; a ``->>`` per field and RELEASED parsed
#: it 18 times, 70 % of the report's reading on the demo's file. A string comes unquoted,
#: a number, boolean or array as its JSON text, a missing field as NULL, as ``->>`` gives
#: them (``->`` gave the arrays the same text, and JSON ``null`` where this gives NULL: both
#: read as no axes).
_HISTORY_FIELDS = HistoryRow._fields[6:]

_HISTORY_SQL = f"""
SELECT model_id, metric, attribute, evaluation, tier, confirmed_tier,
       picked[1:{len(_HISTORY_FIELDS)}]
FROM (SELECT model_id, metric, attribute, evaluation, tier, confirmed_tier,
             json_extract_string(result, [{", ".join(f"'$.{f}'" for f in _HISTORY_FIELDS)},
                                          '$.released']) AS picked
      FROM window_results WHERE model_id = ?)
WHERE coalesce(CAST(picked[{len(_HISTORY_FIELDS) + 1}] AS BOOLEAN), true)
ORDER BY evaluation, metric, attribute
"""


def cell_history(c: duckdb.DuckDBPyConnection, model_id: str) -> list[HistoryRow]:
    """Every stored released evaluation of a model's cells (as RELEASED reads the flag),
    oldest first."""
    return [HistoryRow(*r[:6], *r[6]) for r in c.execute(_HISTORY_SQL, [model_id]).fetchall()]


class CoverageRow(NamedTuple):
    """The outcome coverage an attribute's label-based cells carried at one evaluation."""

    attribute: str
    evaluation: int
    #: the evaluation's window size (0 when not stored)
    window_n: int
    coverage: AttributeCoverage


def coverage_history(c: duckdb.DuckDBPyConnection, model_id: str) -> list[CoverageRow]:
    """The outcome coverage of a model's released label-based cells, oldest first, one row
    per attribute and evaluation (every label-based cell of an attribute carries the same
    figures; monitor.core.coverage), typed (monitor.store.codec)."""
    rows = c.execute(
        "SELECT attribute, evaluation, max(CAST(result->>'$.window_n' AS BIGINT)), "
        "min(CAST(result->'$.outcome_coverage' AS VARCHAR)) FROM window_results "
        f"WHERE model_id = ? AND {RELEASED} "
        "AND json_type(result->'$.outcome_coverage') = 'OBJECT' "
        "GROUP BY attribute, evaluation ORDER BY evaluation, attribute",
        [model_id],
    ).fetchall()
    return [CoverageRow(a, int(e), int(n or 0), decode_coverage(cov)) for a, e, n, cov in rows]


class WindowRow(NamedTuple):
    """One stored evaluation of a cell: the row's own columns and its result, typed."""

    evaluation: int
    #: when it was evaluated, as DuckDB prints the stored time
    evaluated_at: str
    #: the stream position the window ended at
    window_end_count: int | None
    seed: int
    result: CellEvaluation


def window_history(
    c: duckdb.DuckDBPyConnection,
    model_id: str,
    metric: str,
    attribute: str,
    limit: int = 100,
    before: int | None = None,
) -> list[WindowRow]:
    """A cell's latest released evaluations, newest first; ``before``: only older
    evaluations than that one (the next page). The API's shape of a row is made where it
    is served (monitor.service.stored_views)."""
    older = "" if before is None else " AND evaluation < ?"
    rows = c.execute(
        "SELECT evaluation, evaluated_at, window_end_count, seed, result FROM window_results "
        f"WHERE model_id = ? AND metric = ? AND attribute = ? AND {RELEASED}{older} "
        "ORDER BY evaluation DESC LIMIT ?",
        [model_id, metric, attribute, *([] if before is None else [int(before)]), int(limit)],
    ).fetchall()
    return [
        WindowRow(int(e), str(t), None if n is None else int(n), int(s), decode_evaluation(r))
        for e, t, n, s, r in rows
    ]


def evaluation_window_sizes(
    c: duckdb.DuckDBPyConnection, keys: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """(model_id, evaluation) -> the evaluation's window size, for the keys given (the
    small-cell rule of the API's events)."""
    keys = set(keys)
    if not keys:
        return {}
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


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class StoredEvent:
    """An event as stored: the event, its row id, when it was written and under which
    decision rule (``MonitorConfig.decision_id``; None in a file older than schema v3)."""

    id: int
    created_at: str
    decision_config: str | None
    event: CellEvent


_EVENT_COLUMNS = (
    "id, created_at, decision_config, kind, model_id, metric, attribute, old, new, confirmed, "
    "direction, evaluation, axes, axes_before"
)


def _stored_events(rows: Iterable[tuple[Any, ...]]) -> list[StoredEvent]:
    return [
        StoredEvent(
            int(i), str(pd.Timestamp(at)), dc,
            CellEvent(k, m, me, a, o, n, bool(cf), d, int(e),
                      json.loads(ax) if ax else {}, json.loads(bx) if bx else {}),
        )
        for i, at, dc, k, m, me, a, o, n, cf, d, e, ax, bx in rows
    ]  # fmt: skip


def events_since(
    c: duckdb.DuckDBPyConnection, limit: int = 100, since_id: int | None = None
) -> list[StoredEvent]:
    """The latest ``limit`` events, newest first; ``since_id``: only later ones."""
    sql = f"SELECT {_EVENT_COLUMNS} FROM events"
    params: list[Any] = []
    if since_id is not None:
        sql += " WHERE id > ?"
        params.append(since_id)
    sql += " ORDER BY id DESC LIMIT ?"
    params.append(int(limit))
    return _stored_events(c.execute(sql, params).fetchall())


def model_events(c: duckdb.DuckDBPyConnection, model_id: str) -> list[StoredEvent]:
    """Every stored event of a model (raw and confirmed), oldest first."""
    return _stored_events(
        c.execute(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE model_id = ? ORDER BY id", [model_id]
        ).fetchall()
    )


def confirmed_events(c: duckdb.DuckDBPyConnection) -> list[CellEvent]:
    """Every confirmed verdict flip and tier change, oldest first."""
    rows = c.execute(
        f"SELECT {_EVENT_COLUMNS} FROM events WHERE confirmed ORDER BY id"
    ).fetchall()
    return [s.event for s in _stored_events(rows)]


# --------------------------------------------------------------------------- scheduled axes


@overload
def latest_axis_results(
    c: duckdb.DuckDBPyConnection, axis: Literal["axis2"]
) -> Mapping[str, tuple[Axis2Cell, ...]]: ...
@overload
def latest_axis_results(
    c: duckdb.DuckDBPyConnection, axis: Literal["axis3"]
) -> Mapping[str, Axis3Result]: ...
@overload
def latest_axis_results(c: duckdb.DuckDBPyConnection, axis: str) -> Mapping[str, AxisResult]: ...
def latest_axis_results(c: duckdb.DuckDBPyConnection, axis: str) -> Mapping[str, AxisResult]:
    """model_id -> its latest result of one scheduled axis, typed (monitor.store.codec), in
    model order (a dict whose order does not depend on DuckDB's threads)."""
    rows = c.execute(
        "SELECT model_id, payload FROM (SELECT *, row_number() OVER (PARTITION BY model_id "
        "ORDER BY computed_at DESC) AS rn FROM axis_results WHERE axis = ?) WHERE rn = 1 "
        "ORDER BY model_id",
        [axis],
    ).fetchall()
    return {m: decode_axis_result(axis, p) for m, p in rows}


def axis_releases(c: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], CohortRelease]:
    """(axis, model) -> the cohort its latest published result rests on, typed
    (monitor.store.codec)."""
    rows = c.execute("SELECT axis, model_id, cohort FROM axis_releases").fetchall()
    return {(a, m): decode_cohort_release(x) for a, m, x in rows}


class AxisRow(NamedTuple):
    """One stored result of a scheduled axis; :attr:`result` is its payload typed
    (monitor.store.codec), decoded when read: a result withheld under the small-cell rule
    is never decoded, so one the codec cannot read does not fail a page of others."""

    axis: str
    model_id: str
    #: when it was computed, as DuckDB prints the stored time
    computed_at: str
    #: records of the cohort it was computed on (exact: the caller applies the rule)
    cohort_n: int | None
    #: the stored JSON (read it as :attr:`result`)
    payload: str

    @property
    def result(self) -> AxisResult:
        return decode_axis_result(self.axis, self.payload)


def axis_history(
    c: duckdb.DuckDBPyConnection,
    axis: str,
    model_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[AxisRow]:
    """Stored results of one scheduled axis, newest first (all models when None).

    Exact, as stored: the caller applies the small-cell rule to ``cohort_n``.
    """
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
        AxisRow(a, m, str(t), None if n is None else int(n), p)
        for a, m, t, n, p in c.execute(sql, params).fetchall()
    ]


# --------------------------------------------------------------------------- jobs, outbox


class JobRuns(NamedTuple):
    """One scheduled job's runs: how many succeeded and failed, and the last one."""

    job: str
    success: int
    failed: int
    last_state: str
    last_at: Any


def job_runs(c: duckdb.DuckDBPyConnection, since: datetime | None = None) -> list[JobRuns]:
    """Each job's runs (started at or after ``since``), by job name."""
    sql = (
        "SELECT job, count(*) FILTER (WHERE state = 'success'), "
        "count(*) FILTER (WHERE state <> 'success'), arg_max(state, started_at), "
        "max(started_at) FROM job_runs"
    )
    params: list[Any] = []
    if since is not None:
        sql += " WHERE started_at >= ?"
        params.append(since)
    rows = c.execute(sql + " GROUP BY job ORDER BY job", params).fetchall()
    return [JobRuns(j, int(s), int(f), str(st), at) for j, s, f, st, at in rows]


def outbox_batch(c: duckdb.DuckDBPyConnection, limit: int) -> list[tuple[int, str, str]]:
    """The oldest ``limit`` unpublished results, (id, key, value), in the order stored."""
    return c.execute(
        "SELECT id, key, value FROM results_outbox ORDER BY id LIMIT ?", [limit]
    ).fetchall()


def feature_matrix(texts: pd.Series, names: Sequence[str]) -> np.ndarray:
    """The ``features`` JSON of each record (one text per row, as ``window_records`` with
    details returns it) as a records x ``names`` float matrix; NaN where a feature is
    missing, null or not a number.

    Why in DuckDB: a Python ``json.loads`` per record cost ~13 us (0.3 s for the demo's
    cohort, half a minute for 1.8M records); DuckDB's vectorised ``json_extract`` on the
    frame's column (an in-memory connection: no file is touched) is several times faster.
    """
    if not names:
        return np.zeros((len(texts), 0), dtype=np.float64)
    frame = pd.DataFrame({"j": texts.astype(object).where(texts.notna(), None)})
    cols = ", ".join(
        f"TRY_CAST(json_extract_string(j, ${k + 1}) AS DOUBLE) AS f{k}" for k in range(len(names))
    )
    paths = ['$."' + str(n).replace('"', '\\"') + '"' for n in names]
    with duckdb.connect() as con:
        con.register("records_features", frame)
        got = con.execute(f"SELECT {cols} FROM records_features", paths).fetchnumpy()
    cols_out = [np.ma.asarray(got[f"f{k}"], dtype=np.float64) for k in range(len(names))]
    return np.column_stack([np.ma.filled(c, np.nan) for c in cols_out]).reshape(
        len(texts), len(names)
    )
