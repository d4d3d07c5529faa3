"""`vfr-monitor demo`, `synth` and `produce`: short runs of what a newcomer types first.

The demo smoke test runs the real service (embedded source, DuckDB file, scheduler, HTTP
server) on a smaller drifting stream and checks the story the README promises: the model
update produces a confirmed verdict flip on the updated model's sex cells and at least one
confirmed tier downgrade, the poison messages land in dead_letters, and the summary says
where the DuckDB file is. The produce test publishes to the real Kafka broker.
"""

from __future__ import annotations

import io
import json
import uuid

import duckdb
import pandas as pd
import pytest

from consumers.kafka_tools import (
    ensure_topic,
)
from monitor.cli import main
from monitor.config import MonitorConfig
from monitor.data.cohort import synth_cohort
from monitor.demo import DemoOptions, demo_config, run_demo
from monitor.stream.schema import validate_records


def _confirmed(db) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as c:
        return c.execute("SELECT * FROM events WHERE confirmed ORDER BY id").df()


def test_demo_shows_a_confirmed_flip_and_downgrade(tmp_path) -> None:
    out = io.StringIO()
    opts = DemoOptions(records=60_000, rate=12_000, axes_interval_s=1.0,
                       out_dir=str(tmp_path), live=False)  # fmt: skip
    assert run_demo(MonitorConfig(), opts, out=out) == 0
    text = out.getvalue()
    db = tmp_path / "synthetic.duckdb"
    assert f"DuckDB file: {db.resolve()}" in text
    assert "http://127.0.0.1:" in text and "/metrics" in text
    assert "held-out AUROC" in text and "vfr-monitor demo summary" in text
    ev = _confirmed(db)
    flips = ev[(ev.kind == "verdict_flip") & (ev.model_id == "los-xgb-discharge")
               & (ev.attribute == "sex") & (ev.direction == "pass_to_fail")]  # fmt: skip
    assert len(flips) >= 1, text
    assert ((ev.kind == "tier_change") & (ev.direction == "downgrade")).sum() >= 1, text
    # the control model's sex cells never see the update
    control = ev[(ev.model_id == "los-xgb-admission") & (ev.attribute == "sex")
                 & (ev.metric == "DI") & (ev.kind == "verdict_flip")]  # fmt: skip
    assert control.empty
    with duckdb.connect(str(db), read_only=True) as c:
        assert c.execute("SELECT count(*) FROM dead_letters").fetchone()[0] == 3
        jobs = set(c.execute("SELECT DISTINCT job FROM job_runs WHERE state='success'").df().job)
    assert {"axis2", "axis3", "equilense"} <= jobs
    assert "verdicts that changed and are stable now" in text
    # the run ends with the governance report written beside the DuckDB file
    reports = sorted(tmp_path.glob("report_*.html"))
    assert len(reports) == 1 and f"governance report: {reports[0].resolve()}" in text
    page = reports[0].read_text()
    assert "los-xgb-discharge" in page and "<svg" in page
    _planted_finding_is_on_the_first_screen(page, text, tmp_path)


def _planted_finding_is_on_the_first_screen(page: str, summary: str, tmp_path) -> None:
    """The board member's first screen (Chromium, 1280 x 800) says that DI by sex of the
    updated model went from pass to fail, with the groups named; the summary lists it as
    changed and stable, and lists no High variance or Catastrophic cell as stable."""
    from monitor.demo import PLANTED_CELL
    from tests.report.chromium import first_screen

    work = tmp_path / "browser"
    work.mkdir()
    vh, boxes = first_screen(page, work)
    planted = [
        b for b in boxes
        if b.attrs.get("data-kind") == "verdict_change"
        and (b.attrs["data-model"], b.attrs["data-metric"], b.attrs["data-attribute"])
        == PLANTED_CELL
    ]  # fmt: skip
    assert len(planted) == 1, [b.text for b in boxes if b.attrs.get("data-kind")]
    (b,) = planted
    assert (b.attrs["data-old"], b.attrs["data-new"]) == ("pass", "fail")
    assert b.on_first_screen(vh), (b.top, b.bottom, vh)
    assert "DI by sex of los-xgb-discharge went from pass to fail in " in b.text
    assert "Female patients are selected at " in b.text and " for Male patients" in b.text
    stable = summary.split("verdicts that changed and are stable now", 1)[1]
    stable = stable.split("cells whose verdict flipped but is not trustworthy", 1)[0]
    assert "los-xgb-discharge DI x sex: verdict pass -> fail" in stable
    for line in stable.splitlines()[1:]:
        tiers = line.split(" · tier ", 1)[1].split(";")[0] if " · tier " in line else ""
        assert not tiers.endswith(("H", "X")), line


def test_diabetes130_demo_reports_axis3_not_applicable(tmp_path) -> None:
    out = io.StringIO()
    opts = DemoOptions(dataset="diabetes130", rate=None, axes_interval_s=1.0,
                       out_dir=str(tmp_path), live=False)  # fmt: skip
    assert run_demo(MonitorConfig(), opts, out=out) == 0
    text = out.getvalue()
    assert "CC BY 4.0" in text and "Axis 3 is not applicable" in text
    assert "replay clock" in text
    with duckdb.connect(str(tmp_path / "diabetes130.duckdb"), read_only=True) as c:
        n = c.execute("SELECT count(*) FROM discharges").fetchone()[0]
        hospitals = c.execute("SELECT count(hospital_id) FROM discharges").fetchone()[0]
    assert n == 76_252 and hospitals == 0  # no invented sites


#: SHA-256 of UCI's dataset_diabetes.zip (https://doi.org/10.24432/C5230J), as downloaded.
UCI_DIABETES_SHA256 = "2cc570fc34b09ba1169d94b68c27ce3802dce7dc4ab6082bed833a6c195507a5"


def test_shipped_diabetes130_is_the_uci_file() -> None:
    import hashlib

    from monitor.data.datasets.diabetes130 import ZIP_PATH

    assert hashlib.sha256(ZIP_PATH.read_bytes()).hexdigest() == UCI_DIABETES_SHA256


def test_texas100x_demo_runs_on_a_users_file(tmp_path, capsys) -> None:
    from tests.support.texas_frames import clean_texas_frame

    assert main(["demo", "--dataset", "texas100x"]) == 2
    assert "--data" in capsys.readouterr().err
    path = tmp_path / "texas_100x.csv"
    clean_texas_frame(n=6_000).to_csv(path)
    out = io.StringIO()
    opts = DemoOptions(dataset="texas100x", data=str(path), rate=None, axes_interval_s=1.0,
                       out_dir=str(tmp_path), live=False)  # fmt: skip
    assert run_demo(MonitorConfig(), opts, out=out) == 0
    text = out.getvalue()
    assert "Texas-100X" in text and "texas100x-xgb" in text
    with duckdb.connect(str(tmp_path / "texas100x.duckdb"), read_only=True) as c:
        n, sites = c.execute(
            "SELECT count(*), count(DISTINCT hospital_id) FROM discharges"
        ).fetchone()
    from monitor.data.datasets.texas100x import load_texas100x
    from monitor.data.scorer import split_train_stream

    _, stream = split_train_stream(load_texas100x(path).frame, seed=0)
    assert n == len(stream) > 4_000 and sites == 4  # the file's own THCIC ids


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_synth_writes_the_seeded_cohort(tmp_path, suffix, capsys) -> None:
    path = tmp_path / f"cohort{suffix}"
    assert main(["synth", "--records", "3000", "--seed", "4", "--out", str(path),
                 "--scenario", "label_rate"]) == 0  # fmt: skip
    want = synth_cohort(3000, seed=4, scenario="label_rate")
    got = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path, dtype=str)
    assert list(got.columns) == list(want.columns) and len(got) == 3000
    if suffix == ".parquet":
        pd.testing.assert_frame_equal(got, want)
    else:
        assert got["record_id"].tolist() == want["record_id"].tolist()
        assert got["label"].astype(int).tolist() == want["label"].tolist()


def test_synth_and_produce_name_the_bad_flag(tmp_path, capsys) -> None:
    assert main(["synth", "--records", "10", "--out", str(tmp_path / "x.parquet"),
                 "--scenario", "group_score_shift"]) == 2  # fmt: skip
    assert "--scenario" in capsys.readouterr().err
    assert main(["synth", "--records", "10", "--out", str(tmp_path / "x.txt")]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["produce", "--records", "2000"]) == 2
    assert "--out" in capsys.readouterr().err


def test_produce_to_a_file_replays_through_run(tmp_path, capsys) -> None:
    path = tmp_path / "stream.jsonl"
    assert main(["produce", "--records", "4000", "--seed", "2", "--out", str(path),
                 "--scenario", "group_score_shift"]) == 0  # fmt: skip
    lines = path.read_bytes().splitlines()
    assert 6000 < len(lines) < 8000 and len(lines) % 2 == 0  # ~7/8 of 4000 discharges x 2
    db = tmp_path / "run.duckdb"
    # `run` monitors registered models only, and this stream replays a 2026 calendar
    cfg = tmp_path / "run.toml"
    cfg.write_text('[service.intake]\nevent_time_bounds = "none"\n'
                   '[[models]]\nid = "los-xgb-discharge"\n[[models]]\nid = "los-xgb-admission"\n')
    assert main(["run", "--config", str(cfg), "--input", str(path), "--db", str(db),
                 "--port", "0", "--until-idle", "1", "--no-scheduler"]) == 0  # fmt: skip
    with duckdb.connect(str(db), read_only=True) as c:
        assert c.execute("SELECT count(*) FROM discharges").fetchone()[0] == len(lines)
        assert c.execute("SELECT count(*) FROM dead_letters").fetchone()[0] == 0


def test_produce_publishes_valid_records_to_kafka(kafka_broker: str, tmp_path) -> None:
    from kafka import KafkaConsumer

    topic = f"produce-{uuid.uuid4().hex[:8]}"
    assert ensure_topic(kafka_broker, topic, 3) is True
    assert main(["produce", "--records", "3000", "--seed", "1", "--rate", "20000",
                 "--bootstrap", kafka_broker, "--topic", topic,
                 "--config-out", str(tmp_path / "run.toml")]) == 0  # fmt: skip
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_broker,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000,
                             group_id=f"check-{uuid.uuid4().hex[:6]}")  # fmt: skip
    try:
        values = [json.loads(m.value) for m in consumer]
    finally:
        consumer.close()
    assert len(values) > 5000
    assert {v["model_id"] for v in values} == {"los-xgb-discharge", "los-xgb-admission"}
    checked = validate_records(values, MonitorConfig())
    assert checked.rejected == []


def test_the_demo_keeps_replayed_history_from_wall_clock_retention() -> None:
    """The retention job deletes by wall-clock age; a replay of 2006 records (Texas-100X)
    lost whatever had arrived when the job first ran (a timing-dependent share). The demo's
    discharge retention covers the oldest replayed event; recent data keeps the user's."""
    opts = DemoOptions(dataset="texas100x", data=None, rate=None, axes_interval_s=1.0,
                       out_dir="unused", live=False)  # fmt: skip
    base = MonitorConfig()
    old = demo_config(base, None, opts, (), oldest_event_time=pd.Timestamp("2006-01-01", tz="UTC"))
    age = (pd.Timestamp.now(tz="UTC") - pd.Timestamp("2006-01-01", tz="UTC")).days
    assert age < old.service.retention.discharge_days <= age + 32
    recent = demo_config(base, None, opts, (), oldest_event_time=pd.Timestamp.now(tz="UTC"))
    assert recent.service.retention.discharge_days == base.service.retention.discharge_days
