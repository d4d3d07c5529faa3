"""`vfr-monitor demo`'s full year through the service: the certified pages are those of the
bench's replay of the same year (monitor.bench.detection.run_demo_pages): the planted
update pages on sex only (DI x sex included), DI by race never, the control model never.

A full demo year (175,000 messages, about 90 s on two cores): ``--runslow``.
"""

from __future__ import annotations

import io

import duckdb
import pytest

from monitor.bench.detection import run_demo_pages
from monitor.config import MonitorConfig
from monitor.demo import DemoOptions, run_demo


@pytest.mark.slow
def test_the_demo_year_pages_on_the_planted_change_only(tmp_path) -> None:
    opts = DemoOptions(rate=None, axes_interval_s=6.0, out_dir=str(tmp_path), live=False)
    out = io.StringIO()
    assert run_demo(MonitorConfig(), opts, out=out) == 0
    with duckdb.connect(str(tmp_path / "synthetic.duckdb"), read_only=True) as c:
        rows = c.execute(
            "SELECT model_id, metric, attribute, old, new, evaluation FROM events "
            "WHERE kind = 'certified_change' ORDER BY id"
        ).fetchall()
    pages = {(m, me, a, ev) for m, me, a, old, new, ev in rows if old != "undetermined"}
    planted = "los-xgb-discharge"
    assert pages == {
        (planted, "EOPP", "sex", 50), (planted, "EOD", "sex", 50),
        (planted, "DI", "sex", 58), (planted, "SPD", "sex", 59),
    }  # fmt: skip
    # the bench's replay of the same stream, blocks of hop records fed to CertifiedCells
    bench = run_demo_pages(MonitorConfig(), seed=opts.seed, scenario=opts.scenario)
    replayed = {
        (model, *p["cell"].split(" x "), p["look"])
        for model, d in bench["models"].items()
        for p in d["pages"]
    }
    assert pages == replayed
    firsts = {(m, me, a) for m, me, a, old, *_ in rows if old == "undetermined"}
    assert firsts == {
        (model, *p["cell"].split(" x "))
        for model, d in bench["models"].items()
        for p in d["first_certifications"]
    }
    assert not any(me == "DI" and a == "race" for _, me, a, _ in pages)
    assert "certified pages: 4" in out.getvalue()
