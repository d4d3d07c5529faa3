"""Scale-out proof on the real broker, with real processes: several `vfr-monitor run`
instances in one consumer group, one of them SIGKILLed mid-stream, a fourth joining, and
`vfr-monitor view` reading the fleet's results topic. What the view shows must equal a
single uninterrupted run of the same stream.

Settings, and why: ``session_timeout_ms = 6000`` (the broker's minimum is 6 s): a killed
member's partitions are reassigned once its session expires, so this bounds the time
nobody monitors its models, together with the new owner's rebuild from the topic. The
default 45 s suits members that pause for long garbage collections; a monitor whose
evaluations run beside the poll loop does not need it.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from consumers.kafka_tools import ensure_topic, produce_records
from monitor.bench.synthetic import synthetic_window
from monitor.config import load_config
from monitor.core.jsonable import to_json
from monitor.core.results import axes_tier
from monitor.service.app import MonitorService
from monitor.store import Store, queries
from monitor.store.codec import axis_payload, cell_result_from_json
from monitor.stream.axis_cache import AxisCache
from tests.support.service_process import (
    ServiceProcess,
    paced,
    reference_run,
    stream_results,
    verdict_events,
)
from tests.support.store_reads import window_results

MODELS = 12
PARTITIONS = 6
SESSION_TIMEOUT_S = 6.0


def _records(per_model: int) -> list[dict]:
    df = synthetic_window(per_model, models=MODELS, seed=15).drop(columns=["decision"])
    df["event_time"] = "2026-11-01T00:00:00Z"
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    return df.to_dict("records")


def _config(tmp_path: Path, bootstrap: str, topic: str) -> Path:
    p = tmp_path / "fleet.toml"
    p.write_text(
        f"""
[window]
size = 2000
hop_records = 1000
hop_seconds = 0
[axis1]
K = 200
[axis2]
sizes = [250, 500, 1000]
R = 4
[axis3]
folds = 4
[service.intake]
unknown_models = "admit"
event_time_bounds = "none"
[service.axes]
axis2_interval_s = 3
axis3_interval_s = 3
equilense_interval_s = 3600
[kafka]
bootstrap_servers = "{bootstrap}"
topics = ["{topic}"]
group_id = "g-{topic}"
results_topic = "results-{topic}"
results_partitions = 3
max_batch = 500
poll_timeout_ms = 200
session_timeout_ms = {int(SESSION_TIMEOUT_S * 1000)}
"""
    )
    return p


def _models_of(svc: ServiceProcess) -> set[str]:
    text = svc.get("/metrics")[1]
    return set(re.findall(r'vfr_window_records\{model="([^"]+)"\}', text))


def _log_times(members: dict, since: float, pattern: str) -> dict[str, float]:
    """Per captured group (a partition), seconds after ``since`` of its first log line."""
    out: dict[str, float] = {}
    for svc in members.values():
        for ts, line in list(svc.lines):
            m = re.search(pattern, line)
            if m and ts > since:
                out[m.group(1)] = min(out.get(m.group(1), 1e9), ts - since)
    return out


def _final_tiers(results: pd.DataFrame, axes: AxisCache, cfg) -> dict:
    """Each cell's tier from its Axis 1 result at the last count hop and the given axes."""
    last = results.loc[results.groupby(["model_id", "metric", "attribute"])["evaluation"].idxmax()]
    tiers = {}
    for m, me, a, result in last[["model_id", "metric", "attribute", "result"]].itertuples(
        index=False
    ):
        r = cell_result_from_json(json.loads(result))
        tiers[(m, me, a)] = axes_tier(r, *axes.outcomes(m, me, a), cfg).tier.value
    return tiers


def _axes_of(store: Store) -> tuple[dict, AxisCache]:
    axis2 = store.read(queries.latest_axis_results, "axis2")
    axis3 = store.read(queries.latest_axis_results, "axis3")
    cache = AxisCache()
    for m, cells in axis2.items():
        cache.set_axis2(m, cells)
    for m, result in axis3.items():
        cache.set_axis3(m, result)
    # compared as stored (strict JSON: a NaN is stored as null, and null equals null)
    axes = {a: {m: json.loads(to_json(axis_payload(r))) for m, r in results.items()}
            for a, results in (("axis2", axis2), ("axis3", axis3))}  # fmt: skip
    return axes, cache


def _reference(cfg_path: Path, path: Path, records: list[dict]) -> tuple[Store, dict, dict]:
    cfg = load_config(cfg_path)
    reference_run(cfg, path, records, batch=500).close()
    svc = MonitorService(cfg, db_path=str(path), start_scheduler=False)
    try:
        svc.job_axis2()
        svc.job_axis3()
    finally:
        svc.store.close()
    store = Store(path, cfg)
    axes, cache = _axes_of(store)
    return store, axes, _final_tiers(window_results(store), cache, cfg)


def _view_complete(view: ServiceProcess, models: list[str], per_model: int) -> bool:
    """Every model's last count hop and its Axis 2 and 3 on the whole cohort have arrived."""
    for m in models:
        code, body = view.get(f"/api/windows?model={m}&metric=DI&attribute=race&limit=1")
        if code != 200 or json.loads(body)[0]["window_end_count"] != per_model:
            return False
        for axis in ("axis2", "axis3"):
            code, body = view.get(f"/api/axes?axis={axis}&model={m}&limit=1")
            if code != 200 or not json.loads(body) or json.loads(body)[0]["cohort_n"] != per_model:
                return False
    return True


@pytest.mark.timeout(1200)
def test_fleet_failover_and_a_joining_instance_give_the_single_instance_results(
    kafka_broker, tmp_path
):
    per_model = 10_000  # 12 models: 120,000 events
    topic = f"fleet-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, topic, partitions=PARTITIONS)
    records = _records(per_model)
    models = sorted({r["model_id"] for r in records})
    cfg_path = _config(tmp_path, kafka_broker, topic)

    members = {name: ServiceProcess(cfg_path, tmp_path / f"{name}.duckdb") for name in "abc"}
    view = ServiceProcess(cfg_path, tmp_path / "view.duckdb", command="view")
    producer = threading.Thread(
        target=produce_records, args=(kafka_broker, topic, paced(records, 2000)), daemon=True
    )
    t0 = time.monotonic()
    producer.start()
    report: dict = {}
    try:
        # let the group settle and each member take its share, then SIGKILL one of them
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(_models_of(s) for s in members.values()):
            time.sleep(0.5)
        time.sleep(max(0.0, 15 - (time.monotonic() - t0)))
        victim = members.pop("a")
        orphans = _models_of(victim)
        assert orphans, victim.output()[-3000:]
        victim.kill()
        killed_at, killed_wall = time.monotonic(), time.time()

        # how long each of the victim's models goes unmonitored: until another member
        # exports its window again (after the session timeout and the rebuild)
        back: dict[str, float] = {}
        while set(back) != orphans and time.monotonic() - killed_at < 120:
            held = set().union(*(_models_of(s) for s in members.values()))
            for m in orphans & held:
                back.setdefault(m, time.monotonic() - killed_at)
            time.sleep(0.25)
        assert set(back) == orphans, f"not taken over: {sorted(orphans - set(back))}"
        report["series_back_s"] = {m: round(s, 1) for m, s in sorted(back.items())}
        # detection (the group reassigns the partitions), rebuild (the new owner replays
        # their history), first live evaluation (its first hop after the rebuild)
        started = _log_times(members, killed_at, r"rebuilding \S+:(\d+) from")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = _log_times(members, killed_at, r"rebuilt \S+:(\d+) up to")
            if started and set(done) >= set(started):
                break
            time.sleep(0.5)
        assert started and set(done) >= set(started), [s.output()[-2000:] for s in members.values()]
        report["failover_s"] = {
            f"partition {p}": {"detected": round(started[p], 1), "rebuilt": round(done[p], 1),
                               "rebuild": round(done[p] - started[p], 1)}
            for p in sorted(started)
        }  # fmt: skip

        # a fourth member joins mid-stream and takes partitions over
        joined_at = time.monotonic()
        members["d"] = ServiceProcess(cfg_path, tmp_path / "d.duckdb")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not _models_of(members["d"]):
            time.sleep(0.5)
        report["joiner_first_models_s"] = round(time.monotonic() - joined_at, 1)
        producer.join(timeout=600)
        assert not producer.is_alive()
        report["produced_s"] = round(time.monotonic() - t0, 1)

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not _view_complete(view, models, per_model):
            time.sleep(1.0)
        assert _view_complete(view, models, per_model), view.output()[-3000:]
        report["view_complete_s"] = round(time.monotonic() - t0, 1)
        owners = {name: sorted(_models_of(s)) for name, s in members.items()}
        report["final_owners"] = owners
        assert owners["d"], "the joining member took nothing over"
        assert sorted(m for ms in owners.values() for m in ms) == models  # each model once
    finally:
        for s in [*members.values(), view]:
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
        for s in [*members.values(), view]:
            try:
                s.wait(timeout=120)
            except Exception:
                s.kill()
    # first evaluation of each orphaned model by its new owner (replayed history included)
    first: dict[str, float] = {}
    for name in ("b", "c", "d"):
        st = Store(tmp_path / f"{name}.duckdb", load_config(cfg_path))
        rows = st.cursor().execute(
            "SELECT model_id, min(epoch(evaluated_at)) FROM window_results "
            "WHERE epoch(evaluated_at) > ? GROUP BY 1", [killed_wall],
        ).fetchall()  # fmt: skip
        st.close()
        for m, t in rows:
            if m in orphans:
                first[m] = min(first.get(m, 1e9), round(t - killed_wall, 1))
    report["first_evaluation_s"] = dict(sorted(first.items()))
    print("fleet report:", json.dumps(report, indent=1))

    cfg = load_config(cfg_path)
    ref, ref_axes, ref_tiers = _reference(cfg_path, tmp_path / "ref.duckdb", records)
    got = Store(tmp_path / "view.duckdb", cfg)
    try:
        # every numbered evaluation of every model once, equal to the single run's
        pd.testing.assert_frame_equal(stream_results(got), stream_results(ref))
        assert sorted(verdict_events(got)) == sorted(verdict_events(ref))
        # Axis 2 and 3 on the final cohort, and each cell's tier from them
        got_axes, cache = _axes_of(got)
        assert got_axes == ref_axes
        got_tiers = _final_tiers(window_results(got), cache, cfg)
        assert got_tiers == ref_tiers
        print("equal to the single run:", json.dumps({
            "window_results": len(stream_results(got)),
            "models": window_results(got)["model_id"].nunique(),
            "verdict_events": len(verdict_events(got)),
            "axis_results": {a: len(v) for a, v in got_axes.items()},
            "final_tiers": len(got_tiers),
            "tiers_by_kind": pd.Series(list(got_tiers.values())).value_counts().to_dict(),
        }))  # fmt: skip
    finally:
        got.close()
        ref.close()
    # the governance report of the fleet, from the view's file: a model that moved and one
    # the joining member took over (two, as each model costs seconds of drawing)
    from monitor.report.render import render_report

    shown = [sorted(orphans)[0], report["final_owners"]["d"][0]]
    page = render_report(tmp_path / "view.duckdb", config=cfg, models=shown)
    assert all(f"Model {m}" in page for m in shown)
    # bound: the session timeout plus the rebuild of the moved partitions (replaying at
    # most the whole stream so far), with room for a loaded 2-core machine
    for p in report["failover_s"].values():
        assert p["detected"] < SESSION_TIMEOUT_S + 10 and p["rebuilt"] < SESSION_TIMEOUT_S + 60
