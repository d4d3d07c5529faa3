"""/api/axes under the complement attacks of issue 21, on a real service.

One service run (module fixture): the 61-record cohort of five hospitals (folds of 31,
15, 8, 4 and 1 records, 2 records without a hospital id, a race group of 4) fed through
the pipeline, the Axis 3 and EquiLense jobs run, the answers fetched over HTTP from the
real server. The reader then does the arithmetic of tests/support/complements.py:
totals minus shown parts, and the n-weighted DPD identity. Then the rows the routes make
of the store's typed reads (windows, axes, events).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result
from consumers.base import Origin
from monitor.config import config_from_mapping
from monitor.core.jsonable import to_json
from monitor.publish.axes import published_axis
from monitor.publish.cells import published_windows
from monitor.service.app import MonitorService
from monitor.service.stored_views import axis_row, window_row
from monitor.store import queries
from monitor.store.codec import axis_payload, encode_evaluation
from tests.support.complements import (
    dpd_recovered,
    exact_counts_in,
    five_hospital_cohort,
    small_recovered,
)
from tests.support.exporter_state import make_cell
from tests.support.servers import get_json

CFG = config_from_mapping(
    {
        "axis1": {"K": 50},
        "equilense": {"features": []},
        "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}},
    }
)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    path = tmp_path_factory.mktemp("complements") / "s.duckdb"
    s = MonitorService(CFG, db_path=str(path), http_port=0, start_scheduler=False)
    s.start()
    try:
        df = five_hospital_cohort().drop(columns=["decision"])
        df["event_time"] = "2026-11-01T00:00:00Z"
        # a record without a hospital id has no hospital_id key
        rows = [{k: v for k, v in r.items() if pd.notna(v)} for r in df.to_dict("records")]
        payloads = [json.dumps(r).encode() for r in rows]
        s.pipeline.ingest_batch(payloads, [Origin("t", 0, i) for i in range(len(payloads))])
        s.pipeline.flush()
        for job in ("axis3", "equilense"):
            assert s.scheduler.run_now_blocking(job).state == "success"
        yield s
    finally:
        s.close()


def _latest(service, axis: str) -> dict:
    rows = get_json(f"{service.api.url}/api/axes?axis={axis}&model=m&limit=1")
    assert len(rows) == 1
    return rows[0]


def test_axis3_folds_and_exclusions_name_no_small_count(service):
    row = _latest(service, "axis3")
    p = row["payload"]
    folds = dict(enumerate(p["fold_sizes"]))
    assert len(folds) == 5  # the five hospitals, one fold each
    parts = {"with": p["n_records"], "without": p["n_excluded_missing_hospital"]}
    recovered = {
        # the folds' total minus the shown folds
        "folds": small_recovered(p["n_records"], folds),
        # the cohort minus the records with a hospital
        "excluded": small_recovered(row["cohort_n"], parts),
        "note": exact_counts_in(p["note"]),
    }
    assert recovered == {"folds": {}, "excluded": {}, "note": []}
    # kappa is computed from verdicts: published exact, as stored
    cursor = service.store.cursor()
    try:
        kept = queries.axis_history(cursor, "axis3", "m", 1, 0)[0].result
    finally:
        cursor.close()
    assert isinstance(kept, Axis3Result)
    # (a kappa that is not evaluable is stored NaN and published null)
    want = [None if m.kappa is None or math.isnan(m.kappa) else m.kappa for m in kept.metrics]
    assert [m["kappa"] for m in p["metrics"]] == want


def test_equilense_groups_defeat_complements_and_the_dpd_identity(service):
    row = _latest(service, "equilense")
    gm = row["payload"]["group_metrics"]
    assert {r["attribute"] for r in gm} == {"race", "sex", "ethnicity", "age_group"}
    dpd = [r for r in gm if r["metric"] == "DPD"]
    recovered = {
        "sizes": {r["attribute"]: small_recovered(row["cohort_n"], r["group_n"]) for r in gm},
        "dpd": {r["attribute"]: dpd_recovered(row["cohort_n"], r["group_n"], r["by_group"])
                for r in dpd},
    }  # fmt: skip
    assert recovered == {
        "sizes": {a: {} for a in recovered["sizes"]},
        "dpd": {a: {} for a in recovered["dpd"]},
    }


@pytest.mark.parametrize("window_n", [8, 11, 5003])
def test_a_window_row_is_its_columns_then_its_published_result(window_n):
    """The windows route's row: the stored row's columns, then the result's stored form
    (whose evaluation and evaluation time are the ones shown), under the small-cell rule
    as published_windows applies it to that JSON row."""
    cell = make_cell("m", "DI", "race", window_n=window_n)
    row = queries.WindowRow(1, "2026-11-02 00:00:00+00:00", 400, 7, cell)
    stored = json.loads(encode_evaluation(cell))
    (want,) = published_windows([{"evaluation": 1, "evaluated_at": "2026-11-02 00:00:00+00:00",
                                  "window_end_count": 400, "seed": 7, **stored}])  # fmt: skip
    got = window_row(row)
    assert list(got) == list(want) and to_json(got) == to_json(want)
    assert (got["seed"], got["value"] == "<11") == (7, window_n < 11)


def test_an_axis_row_withholds_a_small_cohorts_payload():
    cells = (Axis2Cell("m", "DI", "race", 8, 4.0, True, False, ()),)
    stored = to_json(axis_payload(cells))
    small = axis_row(queries.AxisRow("axis2", "m", "2026-11-02 00:00:00+00:00", 8, stored))
    assert small == {"axis": "axis2", "model_id": "m", "computed_at": "2026-11-02 00:00:00+00:00",
                     "cohort_n": "<11", "payload": None}  # fmt: skip
    big = axis_row(queries.AxisRow("axis2", "m", "t", 403, stored))
    assert big["cohort_n"] == 405 and big["payload"] == published_axis(cells)
    # a withheld result is not decoded: one the codec cannot read does not fail the row
    unreadable = queries.AxisRow("axis3", "m", "t", 5, '{"kappa": {"DI": 0.5}}')
    assert axis_row(unreadable)["payload"] is None
