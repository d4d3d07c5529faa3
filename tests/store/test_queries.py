"""monitor.store.queries: each read function on a small file written through the writer."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest

from batch_axes.axis2 import Axis2Cell
from consumers.base import Origin
from monitor.config import config_from_mapping
from monitor.core.coverage import AttributeCoverage, PublishedCoverage
from monitor.core.events import CellEvent
from monitor.store import Store, queries
from monitor.store.codec import encode_evaluation
from monitor.store.results_messages import event_message, parse_message
from monitor.stream.pipeline import Pipeline
from tests.support.exporter_state import make_cell
from tests.support.pipeline_runs import scored_payloads

CFG = config_from_mapping(
    {
        "window": {"size": 400, "hop_records": 200, "hop_seconds": 0},
        "axis1": {"K": 30},
        "models": [{"id": "model-00"}, {"id": "model-01"}],
    }
)
AT = pd.Timestamp("2026-11-02T00:00:00Z")
#: an Axis 2 cell as the scheduled job stores it (N* reached at 200 of the 400 records)
AXIS2 = Axis2Cell("model-00", "DI", "race", 400, 200.0, True, False, ())
EVENTS = [
    CellEvent("verdict_flip", "model-00", "DI", "race", "pass", "fail", False, "pass_to_fail",
              101, {"value": 0.7}, {"value": 0.9}),
    CellEvent("verdict_flip", "model-00", "DI", "race", "pass", "fail", True, "pass_to_fail",
              102, {"value": 0.7}, {"value": 0.9}),
]  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """800 records of two models (two count hops each, and the events they raise), an axis
    result, a job run and two more events (written as the fleet view writes them)."""
    s = Store(tmp_path_factory.mktemp("q") / "q.duckdb", CFG)
    pipe = Pipeline(CFG, s)
    payloads = scored_payloads(n=400, models=2)
    pipe.ingest_batch(payloads, [Origin("t", 0, i) for i in range(len(payloads))])
    pipe.flush()
    s.write_axis_results("axis2", "model-00", 400, [AXIS2.to_dict()], AT, position=400)
    s.write_job_run("axis2", AT, 1.5, "success", None)
    s.apply_results(
        [parse_message(*event_message(AT, e, "d1")) for e in EVENTS]
    )
    yield s
    s.close()


@pytest.fixture
def c(store):
    cur = store.cursor()
    yield cur
    cur.close()


def test_window_records_selects_by_stream_position(c, store):
    every = queries.window_records(c, store.attributes, "model-00")
    last = queries.window_records(c, store.attributes, "model-00", end_count=300, last_n=100)
    assert len(every) == 400 and list(every["seq"]) == sorted(every["seq"])
    assert len(last) == 100 and set(store.attributes) <= set(last.columns)
    detailed = queries.window_records(c, store.attributes, "model-00", with_details=True)
    assert {"hospital_id", "features", "record_id"} <= set(detailed.columns)


def test_monthly_records_and_labels_scores(c):
    assert queries.monthly_records(c, "model-00") == [("2026-11", 400)]
    label, score = queries.latest_labels_scores(c, "model-00", 50)
    assert len(label) == len(score) == 50


def test_tables_counts_memory_and_models(c):
    assert {"discharges", "window_results", "events", "cell_state"} <= queries.tables(c)
    n = queries.counts(c)
    assert set(n) == set(queries.COUNTED_TABLES)
    assert n["discharges"] == 800 and n["events"] >= 2 and n["job_runs"] == 1
    assert queries.memory_mb(c) >= 0
    assert queries.models_with_results(c) == ["model-00", "model-01"]


def test_state_reads(c, store):
    assert queries.source_offsets(c) == {("t", 0): 800}
    assert queries.model_partitions(c) == {"model-00": ("t", 0), "model-01": ("t", 0)}
    states = queries.model_states(c)
    assert states["model-00"].records == 400
    assert queries.model_progress(c)["model-00"][0] == 400
    cells = queries.cell_states(c)
    assert len(cells) == 2 * len(CFG.metrics) * len(CFG.attributes)
    assert queries.models_with_cells(c) == ["model-00", "model-01"]
    latest = queries.latest_cells(c, "model-00")
    assert {r.result.metric for r in latest} == {m.name for m in CFG.metrics}
    assert {r.result.model_id for r in latest} == {"model-00"}
    # each cell's released evaluation: the one saved with its state
    released = {
        (s.model_id, s.metric, s.attribute): s.released for s in cells if s.model_id == "model-00"
    }
    assert {r.key: r for r in latest} == released


def test_window_result_reads(c):
    assert set(queries.last_evaluation_times(c)) == {"model-00", "model-01"}
    times = queries.evaluation_times(c)
    assert {e for (m, e) in times if m == "model-00"} == {1, 2}
    latest = queries.latest_window_results(c)
    assert len(latest) == 2 * len(CFG.metrics) * len(CFG.attributes)
    # each cell's latest *released* evaluation (the first always is; the second when its
    # attribute's groups moved by 0 or 11+ records: monitor.stream.publication)
    released = {
        (m, me, a): e
        for m, me, a, e in c.execute(
            "SELECT model_id, metric, attribute, max(evaluation) FROM window_results "
            f"WHERE {queries.RELEASED} GROUP BY ALL"
        ).fetchall()
    }
    assert {r.key: r.evaluation for _, r in latest} == released
    assert all(m == r.result.model_id for m, r in latest)
    assert set(released.values()) == {1, 2}  # both kinds occur in this file
    history = queries.cell_history(c, "model-00")
    assert [h.evaluation for h in history][:1] == [1] and history[-1].evaluation == 2
    first = next(h for h in history if released[("model-00", h.metric, h.attribute)] == 2)
    page = queries.window_history(c, "model-00", first.metric, first.attribute, limit=1)
    assert [(r.evaluation, r.result.evaluation) for r in page] == [(2, 2)]
    assert page[0].result.key == ("model-00", first.metric, first.attribute)
    assert page[0].window_end_count == 400 and isinstance(page[0].seed, int)
    older = queries.window_history(c, "model-00", first.metric, first.attribute, before=2)
    assert [r.evaluation for r in older] == [1]
    sizes = queries.evaluation_window_sizes(c, [("model-00", 1), ("model-00", 9)])
    assert sizes == {("model-00", 1): 200}


def test_cell_history_picks_what_one_operator_per_field_picks(c):
    """The history's one json_extract_string of a list of fields gives every row what a
    ``->>`` per field gives (``->`` for the two arrays, whose JSON reads the same), on
    rows with failed and pending axes, booleans, numbers and missing fields."""
    fields = queries.HistoryRow._fields[6:]
    picks = ", ".join(
        f"result{'->' if f in ('failed_axes', 'pending_axes') else '->>'}'$.{f}'"
        for f in fields
    )
    old = c.execute(
        f"SELECT model_id, metric, attribute, evaluation, tier, confirmed_tier, {picks} "
        f"FROM window_results WHERE model_id = ? AND {queries.RELEASED} "
        "ORDER BY evaluation, metric, attribute",
        ["model-00"],
    ).fetchall()
    got = queries.cell_history(c, "model-00")
    arrays = [queries.HistoryRow._fields.index(f) for f in ("failed_axes", "pending_axes")]

    def read(row):  # the arrays as the report reads them: JSON null and NULL are no axes
        return [json.loads(x) or [] if k in arrays and x else x for k, x in enumerate(row)]

    assert len(got) == len(old) > 0
    assert [read(r) for r in got] == [read(r) for r in old]
    assert any(json.loads(h.failed_axes or "[]") for h in got)  # arrays occur
    assert {h.partial for h in got} <= {"true", "false", None}


def test_event_reads_are_typed(c):
    newest = queries.events_since(c, limit=1)
    assert [s.event for s in newest] == [EVENTS[1]] and newest[0].decision_config == "d1"
    assert [s.event for s in queries.events_since(c, since_id=newest[0].id - 1)] == [EVENTS[1]]
    everything = queries.events_since(c, limit=10_000)
    assert [s.event for s in queries.model_events(c, "model-00")][-2:] == EVENTS
    assert {s.id for m in ("model-00", "model-01") for s in queries.model_events(c, m)} == {
        s.id for s in everything
    }
    confirmed = queries.confirmed_events(c)
    assert confirmed[-1] == EVENTS[1]
    assert confirmed == [s.event for s in reversed(everything) if s.event.confirmed]


def test_axis_job_and_outbox_reads(c):
    assert queries.latest_axis_results(c, "axis2") == {"model-00": (AXIS2,)}
    rows = queries.axis_history(c, "axis2", "model-00")
    assert [(r.axis, r.model_id, r.cohort_n, r.result) for r in rows] == [
        ("axis2", "model-00", 400, (AXIS2,))
    ]
    assert queries.axis_history(c, "axis3") == []
    (run,) = queries.job_runs(c)
    assert (run.job, run.success, run.failed, run.last_state) == ("axis2", 1, 0, "success")
    assert queries.outbox_batch(c, 10) == []  # a single service writes no outbox


def test_feature_matrix_reads_what_a_json_loads_per_record_read():
    """The EquiLense job's features, parsed in DuckDB: the same floats as json.loads of
    each record, NaN for a missing, null or non-numeric value, in row order."""
    import json as _json

    import numpy as _np
    import pandas as _pd

    from monitor.store.queries import feature_matrix

    rng = _np.random.default_rng(0)
    rows = [{"a": float(x), "b c": int(y)} for x, y in rng.normal(size=(50, 2)) * 1e3]
    texts = [_json.dumps(r) for r in rows] + [None, '{"a": null}', '{"a": "x", "b c": 2}', "{}"]
    got = feature_matrix(_pd.Series(texts, dtype=object), ["a", "b c"])
    want = _np.array(
        [[r["a"], r["b c"]] for r in rows]
        + [[_np.nan, _np.nan], [_np.nan, _np.nan], [_np.nan, 2.0], [_np.nan, _np.nan]]
    )
    assert got.shape == (54, 2) and _np.array_equal(got, want, equal_nan=True)



def test_coverage_history_is_typed(tmp_path):
    """One typed row per attribute and evaluation of the released label-based cells'
    outcome coverage, oldest first; a label-free cell (no coverage) and an evaluation
    not released are not read."""
    cov = AttributeCoverage((PublishedCoverage("1", 0.9, 2.0), PublishedCoverage("2", 0.6, None)),
                            0.33, 0.1, "outcomes incomplete")  # fmt: skip
    s = Store(tmp_path / "cov.duckdb", CFG)
    try:
        rows = []
        for ev, metric, coverage, released in (
            (1, "EOPP", cov, True), (1, "DI", None, True), (2, "EOPP", cov, False),
            (3, "EOPP", replace(cov, gap=0.05, reason=""), True),
        ):  # fmt: skip
            cell = replace(make_cell("model-00", metric, "race", outcome_coverage=coverage),
                           evaluation=ev, released=released)  # fmt: skip
            rows.append(["model-00", ev, AT, "count", 0, 0, 200 * ev, 7, metric, "race",
                         encode_evaluation(cell)])  # fmt: skip
        s._conn.executemany(
            "INSERT INTO window_results (model_id, evaluation, evaluated_at, window_kind, "
            "window_first_seq, window_last_seq, window_end_count, seed, metric, attribute, "
            "result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::JSON)",
            rows,
        )
        got = queries.coverage_history(s.cursor(), "model-00")
    finally:
        s.close()
    assert got == [
        queries.CoverageRow("race", 1, 5000, cov),
        queries.CoverageRow("race", 3, 5000, replace(cov, gap=0.05, reason="")),
    ]
