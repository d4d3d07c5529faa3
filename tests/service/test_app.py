"""The service in-process: scheduled axes feed the tiers, the API and /metrics show them."""

from __future__ import annotations

import json
import math
import re
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from consumers.base import (
    Origin,
)
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.service.app import MonitorService
from monitor.store import queries
from tests.support.pipeline_runs import feed_service
from tests.support.servers import wait_for
from tests.support.store_reads import window_results

CFG = config_from_mapping(
    {
        "window": {"size": 4000, "hop_records": 1000, "hop_seconds": 0},
        "axis1": {"K": 100},
        "axis2": {"sizes": [500, 1000, 2000], "R": 10},
        "axis3": {"folds": 5},
        "equilense": {"features": []},
        "models": [{"id": "model-00"}],
    }
)




def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


@pytest.fixture
def service(tmp_path):
    s = MonitorService(CFG, db_path=str(tmp_path / "s.duckdb"), http_port=0, start_scheduler=False)
    s.start()
    yield s
    s.close()


def test_tiers_are_pending_until_the_slow_axes_ran_then_real(service):
    feed_service(service, 2000, seed=1)
    cells = json.loads(_get(service.api.url + "/api/cells")[1])
    assert len(cells) == 28 and {c["tier"] for c in cells} == {"Pending"}
    for job in ("axis2", "axis3", "equilense"):
        outcome = service.scheduler.run_now_blocking(job)
        assert outcome.state == "success", outcome
    feed_service(service, 1000, seed=2, start=2000)
    computed = service.latest_cells()
    tiers = {c.tier.tier.value for c in computed}
    assert "Pending" not in tiers and tiers <= {
        "Practical-Stability", "Caution-Required", "High-Variance", "Catastrophic-Instability"
    }  # fmt: skip
    assert all(c.kappa is not None for c in computed)  # the synthetic cohort has hospitals
    # the API shows each cell's release: evaluation 3 where its attribute's groups moved by
    # 0 or 11+ records (sex and ethnicity here: two large groups each), else evaluation 2
    cells = json.loads(_get(service.api.url + "/api/cells")[1])
    shown = {c["attribute"] for c in cells if c["evaluation"] == 3}
    assert {"sex", "ethnicity"} <= shown
    assert all(c["tier"] != "Pending" for c in cells if c["evaluation"] == 3)
    # the API's window history of one cell: newest first, with seeds
    status, body = _get(service.api.url + "/api/windows?model=model-00&metric=DI&attribute=sex")
    history = json.loads(body)
    assert status == 200 and [h["evaluation"] for h in history] == [3, 2, 1]
    # every tier change that left Pending is explained in a sentence naming the axes
    events = json.loads(_get(service.api.url + "/api/events?limit=1000")[1])
    left_pending = [e for e in events if e["kind"] == "tier_change" and e["old"] == "Pending"]
    assert left_pending
    for e in left_pending:
        assert e["explanation"].startswith(f"{e['metric']} by {e['attribute']} moved from Pending")
        assert "arrived at" in e["explanation"] and e["axes_before"]
    # the governance report, live at /, drawn from the service's own DuckDB file
    # drawn in the background (seconds): the first answers say it is being prepared
    status, page = wait_for(
        "the drawn report", lambda: b"model-00" in (r := _get(service.api.url + "/"))[1] and r
    )
    assert status == 200 and b"<svg" in page
    assert not re.search(rb"(src|href)\s*=\s*[\"']?https?:", page)  # self-contained
    # /metrics shows one tier per cell and the job runs
    families = {f.name: f for f in text_string_to_metric_families(
        _get(service.api.url + "/metrics")[1].decode())}  # fmt: skip
    tier_ones = [s for s in families["vfr_cell_tier"].samples if s.value == 1]
    assert len(tier_ones) == 28
    # each confirmed event's sentence, for the alert annotations (one series a cell and kind)
    sentences = {
        (s.labels["metric"], s.labels["attribute"], s.labels["kind"]): s.labels["explanation"]
        for s in families["vfr_cell_last_event_info"].samples
    }
    confirmed = [e for e in events if e["confirmed"]]
    assert confirmed and len(sentences) == len(
        {(e["metric"], e["attribute"], e["kind"]) for e in confirmed}
    )
    for e in confirmed:
        assert sentences[(e["metric"], e["attribute"], e["kind"])].startswith(
            f"{e['metric']} by {e['attribute']}"
        )
    samples = families["vfr_job_runs"].samples
    runs = {(s.labels["task"], s.labels["state"]): s.value for s in samples}
    assert runs[("axis2", "success")] == 1 and runs[("axis3", "success")] == 1
    assert service.ready() == (True, "ok")


def test_a_failing_job_is_contained_and_counted(service, monkeypatch):
    feed_service(service, 1000, seed=3)

    def boom(*a, **k):
        raise RuntimeError("secret record value 0.1234")

    monkeypatch.setattr("monitor.service.app.run_axis2_counts", boom)
    outcome = service.scheduler.run_now_blocking("axis2")
    assert outcome.state == "failure" and outcome.error_kind == "RuntimeError"
    text = _get(service.api.url + "/metrics")[1].decode()
    assert 'vfr_job_runs_total{state="failure",task="axis2"} 1.0' in text
    assert "0.1234" not in text
    feed_service(service, 1000, seed=4, start=1000)  # the service keeps evaluating
    assert len(json.loads(_get(service.api.url + "/api/cells")[1])) == 28


def test_restart_restores_cells_for_the_api(tmp_path):
    path = str(tmp_path / "r.duckdb")
    s = MonitorService(CFG, db_path=path, http_port=0, start_scheduler=False)
    feed_service(s, 1000, seed=5)
    before = s.cells()
    s.close()
    again = MonitorService(CFG, db_path=path, http_port=0, start_scheduler=False)
    try:

        def key(c):
            return (c["metric"], c["attribute"])

        def same(cells):  # NaN (a pooled figure not configured) equals itself here
            return [
                {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in c.items()}
                for c in sorted(cells, key=key)
            ]

        assert same(again.cells()) == same(before) and len(before) == 28
        # the last evaluation time survives too (VFRMonitorStale must see an idle model)
        text = again.exporter.render().decode()
        stamps = [ln for ln in text.splitlines()
                  if ln.startswith("vfr_last_evaluation_timestamp_seconds{")]  # fmt: skip
        assert stamps and all(float(ln.rsplit(" ", 1)[1]) > 1.7e9 for ln in stamps)
    finally:
        again.close()


def test_retention_deletes_only_what_is_past_its_age(tmp_path):
    cfg = config_from_mapping(
        {"service": {"retention": {"discharge_days": 100, "result_days": 200},
                     "axes": {"cohort_days": 90}},
         "window": {"hop_records": 1000, "hop_seconds": 0},
         "axis1": {"K": 50}, "models": [{"id": "model-00"}]}
    )  # fmt: skip
    now = [1_800_000_000.0]  # a fixed wall clock: 2027-01-15
    s = MonitorService(cfg, db_path=str(tmp_path / "ret.duckdb"), http_port=0,
                       start_scheduler=False, clock=lambda: now[0])  # fmt: skip
    try:
        feed_service(s, 1000, seed=6)  # event_time 2026-11-01: 75 days before "now"
        assert s.job_retention()["discharges"] == 0
        now[0] += 30 * 86_400  # 105 days after the events: discharges go, results stay
        deleted = s.job_retention()
        assert deleted["discharges"] == 1000 and deleted["window_results"] == 0
        counts = s.store.read(queries.counts)
        assert counts["discharges"] == 0 and counts["window_results"] == 28
    finally:
        s.close()


def test_a_slow_scheduled_job_does_not_hold_back_hop_evaluations(tmp_path):
    """Axis 2 made slow for real (R = 10,000 replicates, about 2 s here) runs in its thread
    while hops arrive: hop evaluations are written while it runs, not queued behind it."""
    import threading
    import time

    slow = CFG.model_copy(update={"axis2": CFG.axis2.model_copy(update={"R": 10_000})})
    s = MonitorService(slow, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                       start_scheduler=False)  # fmt: skip
    s.start()
    try:
        feed_service(s, 4000, seed=5)
        outcome = {}
        job = threading.Thread(
            target=lambda: outcome.update(o=s.scheduler.run_now_blocking("axis2"))
        )
        job.start()
        hops_done: list[float] = []
        start = 4000
        while job.is_alive() and start < 40_000:
            feed_service(s, 1000, seed=100 + start, start=start)  # one hop, evaluated and written
            hops_done.append(time.time())
            start += 1000
        job.join()
        o = outcome["o"]
        assert o.state == "success", o
        during = [t for t in hops_done if o.started_at < t < o.started_at + o.duration_s]
        # the job took o.duration_s; a job that held the hops back would leave `during` empty
        assert len(during) >= 2, (o.duration_s, len(hops_done))
        evaluations = window_results(s.store)["evaluation"].max()
        assert evaluations == 4 + len(hops_done)
    finally:
        s.close()


def _dominant(url):
    text = _get(url + "/metrics")[1].decode()
    return {
        s.labels["reason"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "vfr_ingest_rejection_dominant"
    }


def test_most_input_dead_lettered_for_one_reason_is_logged_once_and_exported(service, caplog):
    """Issue 22, finding 6: records of an unregistered model are refused one by one,
    silently; the service says once what is refused, how much, and what would admit it,
    and a gauge shows it while it lasts. /readyz stays ready (the service works as
    configured; an unready pod would be restarted or unrouted and the gauge lost)."""
    df = synthetic_window(1500, models=1, seed=5).drop(columns=["decision"])
    df["model_id"] = "model-99"  # not in [[models]]
    df["record_id"] = [f"u-{i}" for i in range(len(df))]
    df["event_time"] = "2026-11-01T00:00:00Z"
    payloads = [json.dumps(r).encode() for r in df.to_dict("records")]
    with caplog.at_level("WARNING", logger="monitor.service.app"):
        for lo in range(0, len(payloads), 500):
            chunk = payloads[lo : lo + 500]
            service.pipeline.ingest_batch(chunk, [Origin("t", 0, lo + i) for i in range(500)])
    warned = [r.getMessage() for r in caplog.records if "dead letters" in r.getMessage()]
    assert warned == [
        "dead letters: 1000 of the last 1000 messages were dead-lettered as unknown_model; "
        "to admit such records: register the model ids in [[models]] (or set "
        '[service.intake] unknown_models = "admit")'
    ]
    assert "model-99" not in warned[0]  # the reason and counts, not what the records hold
    assert _dominant(service.api.url) == {"unknown_model": 1.0}
    assert _get(service.api.url + "/readyz")[0] == 200
    assert (
        service.tally.summary() == "stored 0, duplicates 0, dead-lettered 1500 (unknown_model 1500)"
    )

    feed_service(service, 2000, seed=6, start=len(payloads))  # registered: stored
    assert _dominant(service.api.url) == {"unknown_model": 0.0}
    assert service.tally.stored == 2000


def test_a_start_up_run_on_a_few_records_does_not_stand_in_for_the_first_run(tmp_path):
    """The slow axes run at start-up; if records were already coming in, that run rests on
    a handful of them. When the model then reaches ``axes_first_run_records`` it still gets
    its first run at once, not at the next regular run an hour later (seen on a loaded
    machine: N* from 10 records stood until then)."""
    from monitor.store import queries

    s = MonitorService(CFG, db_path=str(tmp_path / "f.duckdb"), http_port=0)
    s.start()
    try:
        wait_for("the start-up runs", lambda: s.store.cursor().execute(
            "SELECT count(*) FROM job_runs").fetchone()[0] >= 3)  # fmt: skip
        feed_service(s, 40, seed=1)  # the start-up run, had it come a little later
        for job in ("axis2", "axis3"):
            assert s.scheduler.run_now_blocking(job).state == "success"

        def rests_on(axis: str) -> int:
            rows = queries.axis_history(s.store.cursor(), axis, "model-00", limit=1)
            return int(rows[0].cohort_n or 0) if rows else 0

        assert 0 < rests_on("axis2") < 1000 and 0 < rests_on("axis3") < 1000
        feed_service(s, 1500, seed=2, start=40)  # past axes_first_run_records (1,000)
        need = s.config.service.axes.first_run_records
        wait_for("first runs on the model's records", lambda: min(
            rests_on("axis2"), rests_on("axis3")) >= need, timeout=60)  # fmt: skip
    finally:
        s.close()
