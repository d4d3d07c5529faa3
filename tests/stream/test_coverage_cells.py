"""Outcome coverage beside the label-based cells, through the real service (issue 23).

The pipeline (validation, the join, DuckDB, windows, Axis 1) runs in-process on a stream
of predictions and outcomes in which half of race group 2's outcomes never come; the API
and /metrics are read over real HTTP on 127.0.0.1, and the report from the DuckDB file.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from consumers.base import Origin
from monitor.bench.outcome_lead import label_cells
from monitor.config import config_from_mapping
from monitor.core.coverage import OUTCOMES_INCOMPLETE
from monitor.report.render import render_report
from monitor.service.app import MonitorService
from tests.support.outcome_streams import prediction_and_outcome, records

CFG = config_from_mapping(
    {
        "window": {"size": 3000, "hop_records": 1000, "hop_seconds": 0},
        "axis1": {"K": 100},
        "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}},
    }
)
BIASED = ("race", "2")
LAG = 200  # an outcome comes this many messages after its prediction


def _stream(n: int, biased: bool, joined: bool = False) -> list[bytes]:
    """Predictions and outcomes (``LAG`` messages later); with ``biased`` every other
    outcome of race group 2 never comes; ``joined``: today's scored records instead."""
    recs = records(n, 1, seed=5)
    if joined:  # scored at T0 + i minutes, as the predictions below
        at = [prediction_and_outcome(r, i, 0)[0]["event_time"] for i, r in enumerate(recs)]
        return [json.dumps({**r, "event_time": t}).encode() for r, t in zip(recs, at, strict=True)]
    out: list[dict] = []
    late: list[dict | None] = []
    for i, rec in enumerate(recs):
        pred, outcome = prediction_and_outcome(rec, i, i % 5)
        lost = biased and rec[BIASED[0]] == BIASED[1] and i % 2 == 0
        late.append(None if lost else outcome)
        out.append(pred)
        if i >= LAG and late[i - LAG] is not None:
            out.append(late[i - LAG])  # type: ignore[arg-type]
    return [json.dumps(m).encode() for m in out]


def _run(tmp_path, payloads: list[bytes]) -> tuple[list[dict], str, str]:
    """(/api/cells, /metrics text, the report page) after the stream (the DuckDB file
    stays at ``tmp_path / "svc.duckdb"``)."""
    service = MonitorService(
        CFG, db_path=str(tmp_path / "svc.duckdb"), http_port=0, start_scheduler=False
    )
    service.start()
    try:
        for i in range(0, len(payloads), 500):
            chunk = payloads[i : i + 500]
            service.pipeline.ingest_batch(chunk, [Origin("t", 0, i + k) for k in range(len(chunk))])
        service.pipeline.flush()
        url = service.api.url  # type: ignore[union-attr]
        with urllib.request.urlopen(url + "/api/cells", timeout=10) as r:
            cells = json.loads(r.read())
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            metrics = r.read().decode()
        cursor = service.store.cursor()
        try:
            page = render_report(cursor, config=CFG)
        finally:
            cursor.close()
    finally:
        service.close()
    return cells, metrics, page


@pytest.fixture(scope="module")
def biased_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("biased")


@pytest.fixture(scope="module")
def biased(biased_dir):
    return _run(biased_dir, _stream(3000, biased=True))


def _cell(cells: list[dict], metric: str, attribute: str) -> dict:
    return next(c for c in cells if (c["metric"], c["attribute"]) == (metric, attribute))


def test_label_cells_of_the_biased_attribute_say_outcomes_incomplete(biased):
    cells, _, _ = biased
    eopp = _cell(cells, "EOPP", "race")
    cov = eopp["outcome_coverage"]
    groups = {g: v["coverage"] for g, v in cov["groups"].items()}
    # race 2 lost half its outcomes; the others only the last LAG predictions' outcomes
    assert groups["2"] < 0.6 < min(groups[g] for g in ("3", "4"))
    best = max(v for v in groups.values() if v is not None)
    assert cov["gap"] == pytest.approx(1 - groups["2"] / best, abs=0.011)
    assert cov["gap"] > CFG.outcomes.max_coverage_gap
    assert eopp["coverage_reason"] == OUTCOMES_INCOMPLETE
    for metric in ("EOD", "PP", "CAL", "TI"):
        assert _cell(cells, metric, "race")["coverage_reason"] == OUTCOMES_INCOMPLETE
    # label-free cells need no outcome; another attribute's coverage is comparable
    assert _cell(cells, "DI", "race")["outcome_coverage"] is None
    assert _cell(cells, "DI", "race")["coverage_reason"] == ""
    sex = _cell(cells, "EOPP", "sex")
    assert sex["outcome_coverage"]["gap"] <= CFG.outcomes.max_coverage_gap
    assert sex["coverage_reason"] == ""
    # a group of fewer than 11 predictions shows no coverage
    small = [g for g, v in cov["groups"].items() if v["coverage"] is None]
    assert small == ["0"]
    assert all(v["median_delay_days"] is not None for g, v in cov["groups"].items() if g != "0")


def test_coverage_is_exported_and_the_report_shows_it(biased):
    cells, metrics, page = biased
    cov = _cell(cells, "EOPP", "race")["outcome_coverage"]
    want = 'vfr_outcome_coverage_ratio{attribute="race",group="2",model="model-00"} '
    line = next(x for x in metrics.splitlines() if x.startswith(want))
    assert float(line.split()[-1]) == cov["groups"]["2"]["coverage"]
    assert 'vfr_outcome_coverage_incomplete{attribute="race",model="model-00"} 1.0' in metrics
    assert 'vfr_outcome_coverage_incomplete{attribute="sex",model="model-00"} 0.0' in metrics
    assert 'vfr_outcome_coverage_ratio{attribute="race",group="0"' not in metrics  # < 11
    assert 'id="fig-coverage-model-00"' in page
    assert "outcomes incomplete, coverage gap" in page


def test_a_stream_of_joined_records_carries_no_coverage(tmp_path):
    cells, metrics, page = _run(tmp_path, _stream(3000, biased=False, joined=True))
    assert cells and all(c["outcome_coverage"] is None for c in cells)
    assert "vfr_outcome_coverage_ratio{" not in metrics
    assert 'id="fig-coverage-' not in page


def test_the_bench_reads_the_label_cells_back_from_the_file(biased, biased_dir):
    """monitor.bench.outcome_lead reads what the service wrote: the same figures as the API."""
    cells, _, _ = biased
    rows = {r["cell"]: r for r in label_cells(biased_dir / "svc.duckdb", "model-00")}
    api = _cell(cells, "EOPP", "race")
    row = rows["EOPP x race"]
    assert (
        row["reason"] == OUTCOMES_INCOMPLETE
        and row["coverage_gap"] == api["outcome_coverage"]["gap"]
    )
    assert (row["predictions"], row["with_outcome"]) == (api["predictions"], api["with_outcome"])
    assert row["with_outcome"] < row["predictions"]
    assert "DI x race" not in rows  # label-free
