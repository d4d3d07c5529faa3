"""Intersections through the running service (issue 24): cells, axes and /metrics over HTTP.

A real service on 127.0.0.1 with race x sex configured: 3000 synthetic records of one
model, the scheduled Axis 2 run once, then the routes fetched from the real server.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from monitor.config import config_from_mapping
from monitor.service.app import MonitorService
from tests.support.pipeline_runs import feed_service

CFG = config_from_mapping(
    {
        "window": {"size": 4000, "hop_records": 1000, "hop_seconds": 0},
        "axis1": {"K": 100},
        "axis2": {"sizes": [500, 1000, 2000], "R": 10},
        "equilense": {"features": []},
        "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}},
        "intersections": [{"attributes": ["race", "sex"]}],
    }
)


def _get(service, path: str):
    with urllib.request.urlopen(service.api.url + path, timeout=10) as r:
        body = r.read()
        return json.loads(body) if path.startswith("/api") else body.decode()


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    path = tmp_path_factory.mktemp("inter") / "s.duckdb"
    s = MonitorService(CFG, db_path=str(path), http_port=0, start_scheduler=False)
    s.start()
    try:
        feed_service(s, 3000, seed=1)
        assert s.scheduler.run_now_blocking("axis2").state == "success"
        yield s
    finally:
        s.close()


def test_api_cells_carry_the_intersection_and_its_groups_evaluated(service):
    cells = _get(service, "/api/cells")
    inter = [c for c in cells if c["attribute"] == "race_x_sex"]
    assert len(cells) == 7 * 5 and len(inter) == 7
    for c in inter:
        assert c["groups_total"] == 10 and 2 <= c["groups_evaluated"] <= 10
        assert c["support_note"].startswith(f"{c['groups_evaluated']} of 10 groups evaluated")
    by_race = next(c for c in cells if c["attribute"] == "race" and c["metric"] == "DI")
    assert by_race["groups_total"] == 5


def test_axis2_says_how_long_a_cell_without_n_star_waits(service):
    rows = _get(service, "/api/axes?axis=axis2&model=model-00&limit=1")
    cells = rows[0]["payload"]
    assert {c["attribute"] for c in cells} >= {"race_x_sex"}
    waiting = [c for c in cells if not c["reached"]]
    assert waiting, "a 3000-record cohort reaches N* for every cell"
    for c in waiting:
        # every record of feed_service has the same event time: no arrival rate
        assert c["to_reliable"]["text"] in (
            "not estimable: the cohort spans no time",
            "not estimable: no CV below the cohort size",
            "not estimable: fewer than two groups evaluated",
        )
    assert all(c["to_reliable"] is None for c in cells if c["reached"])


def test_metrics_export_the_intersection_cells_and_groups(service):
    text = _get(service, "/metrics")
    assert 'attribute="race_x_sex"' in text
    assert 'group="3:1"' in text  # White x Female, the largest combination
