"""/api/models, /api/axes and pagination, on a real service with a real DuckDB file.

One service run (module fixture): 3000 synthetic records of one model through the
pipeline, the three scheduled axes run twice, then 5 records of a second model (a window
under the small-cell threshold). The routes are fetched over HTTP from the real server.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pandas as pd
import pytest

from consumers.base import Origin
from monitor.config import config_from_mapping
from monitor.service.app import MonitorService
from tests.support.pipeline_runs import feed_service

CFG = config_from_mapping(
    {
        "window": {"size": 4000, "hop_records": 1000, "hop_seconds": 0},
        "axis1": {"K": 100},
        "axis2": {"sizes": [500, 1000, 2000], "R": 10},
        "axis3": {"folds": 5},
        "equilense": {"features": []},
        # unregistered test models, fixed dates
        "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}},
    }
)




def get(service, path):
    try:
        with urllib.request.urlopen(service.api.url + path, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    path = tmp_path_factory.mktemp("axes") / "s.duckdb"
    clock = [1_790_000_000.0]
    s = MonitorService(CFG, db_path=str(path), http_port=0, start_scheduler=False,
                       clock=lambda: clock[0])  # fmt: skip
    s.start()
    try:
        feed_service(s, 3000, seed=1)
        for _ in range(2):
            for job in ("axis2", "axis3", "equilense"):
                assert s.scheduler.run_now_blocking(job).state == "success"
            clock[0] += 60.0
        feed_service(s, 5, seed=9, start=3000, model="tiny")
        # a result of "tiny" as the jobs would store it, on its 5-record cohort
        at = pd.Timestamp(clock[0], unit="s", tz="UTC")
        s.store.write_axis_results("axis3", "tiny", 5, {"kappa": {"DI": 0.5}}, at)
        yield s
    finally:
        s.close()


def test_models_show_window_health_and_the_small_cell_rule(service):
    status, models = get(service, "/api/models")
    assert status == 200
    by_id = {m["model_id"]: m for m in models}
    assert set(by_id) == {"model-00", "tiny"}
    big = by_id["model-00"]
    assert big["window_records"] == 3000
    assert 0.0 <= big["rolling_auroc"] <= 1.0 and 0.0 <= big["rolling_accuracy"] <= 1.0
    assert pd.Timestamp(big["last_evaluation_at"]).year == 2026
    tiny = by_id["tiny"]
    assert tiny["window_records"] == "<11"
    assert tiny["rolling_auroc"] is None and tiny["rolling_accuracy"] is None
    # pagination: limit / offset over the sorted list
    assert get(service, "/api/models?limit=1")[1] == [big]
    assert get(service, "/api/models?limit=1&offset=1")[1] == [tiny]
    assert get(service, "/api/models?offset=2")[1] == []


def test_axis2_history_newest_first_with_curves_and_n_star(service):
    status, rows = get(service, "/api/axes?axis=axis2&model=model-00")
    assert status == 200 and len(rows) == 2
    assert rows[0]["computed_at"] > rows[1]["computed_at"]
    latest = rows[0]
    assert latest["axis"] == "axis2" and latest["model_id"] == "model-00"
    assert latest["cohort_n"] == 3000
    cells = latest["payload"]
    assert len(cells) == 28  # one curve per (metric, attribute) cell
    assert {"n_star", "metric", "attribute"} <= set(cells[0])
    # a page of one, then the next
    assert get(service, "/api/axes?axis=axis2&model=model-00&limit=1")[1] == [rows[0]]
    assert get(service, "/api/axes?axis=axis2&model=model-00&limit=1&offset=1")[1] == [rows[1]]


def test_axis3_kappa_and_equilense_mppd(service):
    status, rows = get(service, "/api/axes?axis=axis3&model=model-00&limit=1")
    assert status == 200 and len(rows) == 1
    payload = rows[0]["payload"]
    assert "kappa" in json.dumps(payload)
    status, rows = get(service, "/api/axes?axis=equilense&model=model-00&limit=1")
    assert status == 200 and len(rows) == 1
    assert "mppd" in json.dumps(rows[0]["payload"]).lower()


def test_small_cohort_results_are_withheld(service):
    status, rows = get(service, "/api/axes?axis=axis3&model=tiny")
    assert status == 200 and len(rows) == 1
    assert rows[0]["cohort_n"] == "<11" and rows[0]["payload"] is None
    # all models at once: newest first, tiny's withheld result among them
    status, rows = get(service, "/api/axes?axis=axis3")
    assert [r["model_id"] for r in rows] == ["tiny", "model-00", "model-00"]


def test_axes_errors(service):
    assert get(service, "/api/axes?axis=axis2&model=nobody") == (404, {"error": "unknown model"})
    for query, name in [("", "axis"), ("axis=axis9", "axis"), ("axis=axis2&limit=0", "limit"),
                        ("axis=axis2&offset=-1", "offset"), ("axis=axis2&model=", "model")]:
        status, body = get(service, "/api/axes?" + query)
        if name == "model":  # a blank value is "not given": every model
            assert status == 200, query
            continue
        assert (status, body) == (400, {"error": "invalid parameter", "parameter": name}), query


def test_windows_and_cells_pages(service):
    # sex: two large groups, each moved by 11+ records a hop, so every evaluation is a
    # release (race has a small group whose 1-10 record moves hold some back:
    # tests/stream/test_publication.py)
    base = "/api/windows?model=model-00&metric=DI&attribute=sex"
    status, rows = get(service, base)
    assert status == 200 and [r["evaluation"] for r in rows] == [3, 2, 1]
    assert [r["evaluation"] for r in get(service, base + "&before=3")[1]] == [2, 1]
    assert [r["evaluation"] for r in get(service, base + "&before=3&limit=1")[1]] == [2]
    assert get(service, base + "&before=1")[1] == []
    assert get(service, base + "&before=0")[0] == 400
    status, cells = get(service, "/api/cells")
    assert status == 200 and len(cells) == 28  # tiny has no evaluation yet (hop 1000)
    page = get(service, "/api/cells?limit=10&offset=20")[1]
    assert page == cells[20:30]


def test_a_not_evaluable_cell_over_http(tmp_path):
    """Issue 24 over the real API: EOPP by race with no Black positives in the window is
    served as not evaluable (reason, records needed, no VFR or tier), and Axis 3, whose
    hospital folds are all undefined for it, serves no kappa and says why."""
    from monitor.core.privacy import SMALL_CELL
    from tests.stream.test_pipeline import _icu_payloads

    cfg = config_from_mapping(
        {
            "window": {"size": 400, "hop_records": 200, "hop_seconds": 0},
            "axis1": {"K": 60},
            "axis2": {"sizes": [100, 200], "R": 10},
            "axis3": {"folds": 5},
            "equilense": {"features": []},
            "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}},
        }
    )
    s = MonitorService(cfg, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                       start_scheduler=False)  # fmt: skip
    s.start()
    try:
        payloads = _icu_payloads([(400, False)])
        s.pipeline.ingest_batch(payloads, [Origin("t", 0, i) for i in range(len(payloads))])
        s.pipeline.flush()
        assert s.scheduler.run_now_blocking("axis3").state == "success"
        status, cells = get(s, "/api/cells")
        assert status == 200
        race = next(c for c in cells if (c["metric"], c["attribute"]) == ("EOPP", "race"))
        assert race["window_n"] >= SMALL_CELL and race["evaluable"] is False
        assert (race["dominant_verdict"], race["tier"]) == ("not_evaluable", "Not-Evaluable")
        assert race["vfr"] is None and race["failed_axes"] == []
        assert race["not_evaluable_reason"].startswith("fewer than two race groups have 20")
        assert race["tier_reason"] == race["not_evaluable_reason"]
        assert (race["records_needed"], race["records_needed_groups"]) == (20, ["2"])
        status, rows = get(s, "/api/axes?axis=axis3&model=model-00&limit=1")
        cells3 = rows[0]["payload"]["cells"]
        cell = next(c for c in cells3 if (c["metric"], c["attribute"]) == ("EOPP", "race"))
        assert cell["kappa"] is None and cell["band"] == "not evaluable" and cell["kappa_reason"]
    finally:
        s.close()


def test_cells_say_what_drives_a_failing_or_flipping_cell(service):
    """Every failing or flipping cell of /api/cells carries one driver sentence that
    restates its own published fields; a stable passing one carries none."""
    status, cells = get(service, "/api/cells")
    assert status == 200
    driven = [c for c in cells if c["driver"] is not None]
    assert driven, "the synthetic model has failing cells"
    for c in cells:
        fails = "fail" in (c["point_verdict"], c["dominant_verdict"])
        flips = 0 < c["n_pass"] < c["K"]
        defined = c["value"] is not None and c["evaluable"]
        assert (c["driver"] is not None) == (defined and (fails or flips)), c
    for c in driven:
        label = f"{c['metric']} by {c['attribute'].replace('_', ' ')}"
        assert c["driver"].startswith(label)
        side = "high" if c["metric"] in ("CAL", "CAL_GAP") else "low"
        if c[f"{side}_group"] is not None:
            assert f"{c[f'{side}_group']} patients" in c["driver"]
            assert f"{c[f'{side}_rate']:.2f}" in c["driver"]
        else:  # withheld: "a small group", no figure (JSON null)
            assert c[f"{side}_withheld"] and c[f"{side}_rate"] is None
            assert "a small group" in c["driver"]
