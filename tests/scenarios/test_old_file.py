"""A DuckDB file written before issue 31's refactors opens, restores and goes on with today's
code.

The file (tests/data/schema-v11-2026-12-02.duckdb.gz) was written by the service of
2026-12-02 (schema v11; how: tests/data/README.md). Today's code migrates it, reads every
stored result through the codec's typed values, restores both models as they were
published, renders the report, and evaluates new records after the old ones.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from monitor.config import config_from_mapping
from monitor.report.render import write_report
from monitor.service.app import MonitorService
from monitor.store import queries
from monitor.store.migrations import SCHEMA_VERSION
from tests.data.write_schema_v11_file import OLD_CONFIG
from tests.support.pipeline_runs import feed_service

FILE = Path(__file__).parents[1] / "data" / "schema-v11-2026-12-02.duckdb.gz"
CFG = config_from_mapping(OLD_CONFIG)


@pytest.fixture
def old_file(tmp_path) -> Path:
    path = tmp_path / "old.duckdb"
    with gzip.open(FILE, "rb") as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def _as_written(path: Path) -> dict[tuple[str, str, str], dict]:
    """Each cell's released evaluation as the old code stored it (raw JSON)."""
    with duckdb.connect(str(path), read_only=True) as c:
        assert c.execute("SELECT max(version) FROM schema_migrations").fetchall() == [(11,)]
        rows = c.execute("SELECT model_id, metric, attribute, state FROM cell_state").fetchall()
    return {(m, me, a): json.loads(s)["released"] for m, me, a, s in rows}


def test_an_old_file_opens_and_restores_what_it_published(old_file):
    before = _as_written(old_file)
    svc = MonitorService(CFG, db_path=str(old_file), start_scheduler=False)
    try:
        assert svc.store.schema_version() == SCHEMA_VERSION > 11
        assert svc.pipeline.owned_models() == ["model-a", "model-b"]
        released = {c.key: c for c in svc.released_cells()}
        assert set(released) == set(before) and len(released) == 56
        for key, cell in released.items():
            old = before[key]
            r = cell.result
            assert (r.window_n, r.n_pass, cell.tier.tier, r.dominant_verdict) == (
                old["window_n"], old["n_pass"], old["tier"], old["dominant_verdict"]
            ), key
            if old["vfr"] is not None:  # null: not evaluable (NaN), stored as JSON null
                assert r.vfr == old["vfr"], key
        cur = svc.store.cursor()
        try:
            for model in ("model-a", "model-b"):
                history = queries.cell_history(cur, model)
                assert history and all(h.model_id == model for h in history)
                assert len(queries.latest_cells(cur, model)) == 28
                assert queries.model_events(cur, model)
            assert {a.axis for a in queries.axis_history(cur, "axis2")} == {"axis2"}
            axis3 = queries.axis_history(cur, "axis3")
            assert {r.model_id for r in axis3} == {"model-a", "model-b"}
            assert len(queries.axis_releases(cur)) == 6
        finally:
            cur.close()
    finally:
        svc.close()


def test_the_report_reads_an_old_file(old_file, tmp_path):
    path, note = write_report(db=old_file, out=tmp_path / "report")
    html = path.read_text()
    assert "model-a" in html and "model-b" in html
    assert note is None


def test_an_old_file_goes_on_evaluating_after_its_last_hop(old_file):
    svc = MonitorService(CFG, db_path=str(old_file), start_scheduler=False)
    try:
        before = dict(queries.model_progress(svc.store.cursor()))
        feed_service(svc, 200, seed=14, start=1500, model="model-b")
        after = dict(queries.model_progress(svc.store.cursor()))
    finally:
        svc.close()
    assert after["model-b"] == (before["model-b"][0] + 200, before["model-b"][1] + 1)
    assert after["model-a"] == before["model-a"]
