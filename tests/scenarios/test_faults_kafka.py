"""Faults through the real broker: SIGKILL at seeded points, a broker outage, a sink that
keeps failing, a full disk, hostile input.

The service runs as a real process (`vfr-monitor run`) against the session broker
(tests/support/kafka.py), or against a dedicated broker where the test stops it. Long
variants are marked ``slow`` (``pytest --runslow``).
"""

from __future__ import annotations

import json
import random
import subprocess
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
from monitor.service.app import MonitorService
from monitor.store import Store, queries
from monitor.store.codec import axis_payload
from tests.support.outcome_streams import prediction_and_outcome
from tests.support.service_process import (
    ServiceProcess,
    metric,
    metric_sum,
    paced,
    reference_run,
    stream_results,
    verdict_events,
    verdict_states,
)
from tests.support.store_reads import scalar, window_results

POISON = [b"{not json", b"\xff\xfe garbage", b"[1,2]", b'{"record_id": 5}', b"x" * 70_000, None]
POISON_REASONS = sorted(
    ["invalid_json", "invalid_json", "not_an_object", "wrong_type:record_id", "oversized",
     "empty_payload"]
)  # fmt: skip


def _records(per_model: int, models: int = 3, seed: int = 11) -> list[dict]:
    df = synthetic_window(per_model, models=models, seed=seed).drop(columns=["decision"])
    df["event_time"] = "2026-11-01T00:00:00Z"
    # interleaved by model, as a live stream would bring them
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    return df.to_dict("records")


#: the wall-clock hop of the services here (seconds)
HOP_SECONDS = 1


def _config(tmp_path: Path, bootstrap: str, topic: str, *, extra: str = "") -> Path:
    p = tmp_path / "c.toml"
    p.write_text(
        f"""
[window]
size = 800
hop_records = 200
hop_seconds = {HOP_SECONDS}
[axis1]
K = 300
[axis2]
sizes = [100, 200, 400]
R = 4
[axis3]
folds = 4
[service.intake]
unknown_models = "admit"
event_time_bounds = "none"
[service.axes]
axis2_interval_s = 2
axis3_interval_s = 3
equilense_interval_s = 3600
[service.retention]
interval_s = 1
[kafka]
bootstrap_servers = "{bootstrap}"
topics = ["{topic}"]
group_id = "g-{topic}"
max_batch = 100
# a SIGKILLed member keeps its partitions until its session times out; --until-idle sees
# only this member's partitions, so the final run must outlast the dead members' sessions
session_timeout_ms = 6000
sink_retry_backoff_ms = 100
sink_retry_backoff_max_ms = 800
{extra}
"""
    )
    return p


def _final_axes(cfg_path: Path, db: Path) -> dict:
    """Axis 2 and 3 run once more on the final cohort (deterministic seeds), and each cell's
    tier from those axes and its Axis 1 result at the last count hop.

    The last *count* hop, not the cell's latest result: a service that runs with
    ``hop_seconds`` also evaluates interim (wall-clock) windows whose stream positions depend
    on timing, and the reference run has none, so only the numbered evaluations are
    comparable between the two.
    """
    from monitor.core.results import axes_tier
    from monitor.store.codec import cell_result_from_json

    cfg = load_config(cfg_path)
    svc = MonitorService(cfg, db_path=str(db), start_scheduler=False)
    try:
        svc.job_axis2()
        svc.job_axis3()
        # compared as stored (strict JSON: a NaN is stored as null, and null equals null)
        axes = {
            axis: {m: json.loads(to_json(axis_payload(r)))
                   for m, r in svc.store.read(queries.latest_axis_results, axis).items()}
            for axis in ("axis2", "axis3")
        }  # fmt: skip
        results = window_results(svc.store)
        cells = results.groupby(["model_id", "metric", "attribute"])
        last = results.loc[cells["evaluation"].idxmax()]
        ax = svc.pipeline.axes
        tiers = {}
        for m, me, a, result in last[["model_id", "metric", "attribute", "result"]].itertuples(
            index=False
        ):
            r = cell_result_from_json(json.loads(result))
            tiers[(m, me, a)] = axes_tier(r, *ax.outcomes(m, me, a), cfg).tier.value
        return {"axes": axes, "tiers": tiers}
    finally:
        svc.store.close()


def _crash_run(tmp_path: Path, bootstrap: str, *, per_model: int, kills: int, seed: int,
               rate: float) -> dict:  # fmt: skip
    """Stream through the broker while the service is SIGKILLed ``kills`` times at seeded
    points; returns what happened at each kill."""
    rng = random.Random(seed)
    topic = f"crash-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, topic, partitions=3)
    records = _records(per_model)
    cfg = _config(tmp_path, bootstrap, topic)
    db = tmp_path / "svc.duckdb"
    stream = [*records[: len(records) // 2], *POISON, *records[len(records) // 2 :]]
    producer = threading.Thread(
        target=produce_records, args=(bootstrap, topic, paced(stream, rate)), daemon=True
    )
    producer.start()
    targets = ["ingest", "axis2", "retention", "axis3", "evaluation"]
    log: list[dict] = []
    for k in range(kills):
        svc = ServiceProcess(cfg, db)
        target = targets[k % len(targets)]
        started = time.monotonic()
        if target == "ingest":  # a seeded point while batches are being stored
            time.sleep(rng.uniform(0.5, 3.0))
        elif target == "evaluation":  # while hop evaluations are being written
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if metric_sum(svc.get("/metrics")[1], "vfr_evaluations_total") > 0:
                    break
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.2))
        else:  # inside a scheduled job: after its start line, before its end
            i = svc.wait_for_line(rf"job {target} started", timeout=20)
            time.sleep(rng.uniform(0.0, 0.05))
            if i is not None:
                done = svc.wait_for_line(rf"job {target} (succeeded|failed)", 0.0, after=i)
                target += "" if done is None else " (ended before the kill)"
            else:
                target += " (never started)"
        svc.kill()
        log.append({"target": target, "after_s": round(time.monotonic() - started, 2)})
    producer.join(timeout=600)
    svc = ServiceProcess(cfg, db, "--until-idle", "10")
    assert svc.wait(timeout=600) == 0, svc.output()
    return {"records": records, "cfg": cfg, "db": db, "topic": topic, "kills": log}


def _check_equal_to_uninterrupted(tmp_path: Path, run: dict) -> None:
    cfg = load_config(run["cfg"])
    ref = reference_run(cfg, tmp_path / "ref.duckdb", run["records"], batch=100)
    got = Store(run["db"], cfg)
    n = len(run["records"])
    # every record exactly once, every dead letter exactly once
    assert got.read(queries.counts)["discharges"] == n
    assert scalar(got, "SELECT count(DISTINCT (model_id, record_id)) FROM discharges") == n
    reasons = sorted(
        r for (r,) in got.cursor().execute("SELECT reason FROM dead_letters").fetchall()
    )
    assert reasons == POISON_REASONS
    # every numbered (count-hop) evaluation, each stream position once, equal to the
    # uninterrupted run's; verdict events and debounce states too
    pd.testing.assert_frame_equal(
        stream_results(ref, releases=False), stream_results(got, releases=False)
    )
    assert verdict_events(got) == verdict_events(ref)
    assert verdict_states(got) == verdict_states(ref)
    ref_path = ref.path
    ref.close()
    got.close()
    # tiers and axes on the final cohort: equal once both have run on it
    assert _final_axes(run["cfg"], run["db"]) == _final_axes(run["cfg"], ref_path)


def test_sigkill_at_seeded_points_then_restart_equals_uninterrupted(kafka_broker, tmp_path):
    run = _crash_run(tmp_path, kafka_broker, per_model=1000, kills=5, seed=16, rate=100)
    print("kills:", run["kills"])
    _check_equal_to_uninterrupted(tmp_path, run)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_sigkill_20_times_over_200000_events(kafka_broker, tmp_path):
    run = _crash_run(tmp_path, kafka_broker, per_model=66_667, kills=20, seed=1616, rate=3000)
    print("kills:", run["kills"])
    _check_equal_to_uninterrupted(tmp_path, run)


# ---------------------------------------------------------------------- broker outage


#: Slack on top of a configured bound for a loaded 2-core machine (a service process, a
#: broker's JVM exiting and kafka-python's IO thread noticing it all share two cores).
LOADED_MACHINE_MARGIN_S = 10.0


def _ingested(svc: ServiceProcess) -> float:
    text = svc.get("/metrics")[1]
    return metric_sum(text, "vfr_ingest_records_total")


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_broker_outage_not_ready_then_resumes_with_nothing_lost(own_kafka_broker, tmp_path):
    bootstrap, start, stop = (
        own_kafka_broker.bootstrap,
        own_kafka_broker.start,
        own_kafka_broker.stop,
    )
    topic = f"outage-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, topic, partitions=3)
    records = _records(400)  # 1,200 records
    cfg = _config(tmp_path, bootstrap, topic)
    db = tmp_path / "svc.duckdb"
    kcfg = load_config(cfg).kafka
    assert kcfg is not None
    # the readiness bound, and the reconnect backoff it caps (x1.2: kafka-python's jitter)
    # plus a group rejoin within the session timeout, each with the margin
    not_ready_within = kcfg.broker_unreachable_after_s + LOADED_MACHINE_MARGIN_S
    ready_again_within = (
        1.2 * kcfg.broker_unreachable_after_s + kcfg.session_timeout_ms / 1000
        + LOADED_MACHINE_MARGIN_S
    )  # fmt: skip
    produce_records(bootstrap, topic, records[:600])
    svc = ServiceProcess(cfg, db, "--no-scheduler")
    try:
        _wait(lambda: _ingested(svc) >= 600, 120, "the first half")
        assert svc.get("/readyz")[0] == 200

        def evaluated() -> bool:  # the first hops are written (the worker may still compile)
            text = svc.get("/metrics")[1]
            return all(
                metric(text, "vfr_last_evaluation_timestamp_seconds", model=m) is not None
                for m in ("model-00", "model-01", "model-02")
            )

        _wait(evaluated, 120, "the first evaluations")
        before = svc.get("/metrics")[1]
        stop()
        t_down = time.monotonic()
        _wait(lambda: svc.get("/readyz")[0] == 503, not_ready_within, "readyz to say not ready")
        body = svc.get("/readyz")[1]
        assert "broker unreachable" in body, body
        not_ready_after = time.monotonic() - t_down
        # the last wall-clock hop of what was fetched before the stop: a hop and the 1 s
        # tick, twice, with a margin for a loaded machine
        time.sleep(2 * (HOP_SECONDS + 1) + 2)
        during = svc.get("/metrics")[1]
        time.sleep(2)
        later = svc.get("/metrics")[1]
        # VFRMonitorStale's input does not move while nothing is evaluated: the alert fires.
        # Compared from `during` (the outage detected), not `before`: records fetched before
        # the stop may still get their wall-clock hop (hop_seconds = 1) just after it.
        evaluated_at: dict[str, float] = {}  # each model's last evaluation before the stop
        for m in ("model-00", "model-01", "model-02"):
            at = metric(before, "vfr_last_evaluation_timestamp_seconds", model=m)
            assert at is not None
            evaluated_at[m] = at
            ts = metric(during, "vfr_last_evaluation_timestamp_seconds", model=m)
            assert metric(later, "vfr_last_evaluation_timestamp_seconds", model=m) == ts
        # the lag series keeps its last known figure (nothing can be produced meanwhile):
        # never a negative or invented value
        for text in (during, later):
            lags = [metric(text, "vfr_consumer_lag_messages", partition=str(p)) for p in range(3)]
            assert all(v is None or v >= 0 for v in lags)
        assert svc.proc.poll() is None  # the service waits, it does not crash
        start()
        _wait(lambda: svc.get("/readyz")[0] == 200, ready_again_within, "readyz to recover")
        produce_records(bootstrap, topic, records[600:])
        _wait(lambda: _ingested(svc) >= 1200, 180, "the second half")
        _wait(
            lambda: metric_sum(svc.get("/metrics")[1], "vfr_consumer_lag_messages") == 0,
            60, "lag 0",
        )  # fmt: skip

        def evaluated_again() -> bool:  # the new hops are written with the next tick
            after = svc.get("/metrics")[1]
            return all(
                (metric(after, "vfr_last_evaluation_timestamp_seconds", model=m) or 0)
                > evaluated_at[m]
                for m in ("model-00", "model-01", "model-02")
            )

        _wait(evaluated_again, 60, "evaluations after the outage")
    finally:
        svc.proc.terminate()
        svc.wait(timeout=60)
    got = Store(db, load_config(cfg))
    assert got.read(queries.counts)["discharges"] == 1200
    assert scalar(got, "SELECT count(DISTINCT (model_id, record_id)) FROM discharges") == 1200
    ref = reference_run(load_config(cfg), tmp_path / "ref.duckdb", records, batch=100)
    pd.testing.assert_frame_equal(
        stream_results(ref, releases=False), stream_results(got, releases=False)
    )
    print(f"not ready {not_ready_after:.1f} s after the broker stopped")


# ---------------------------------------------------------------------- storage faults


@pytest.fixture
def small_fs(tmp_path):
    """A 48 MB tmpfs of this test (mounted as root; unmounted afterwards)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path: Path) -> None:
    """Write zeros until the file system is full (it may be full already: then the file
    cannot even be created, which is the same fault)."""
    try:
        with open(path, "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    except OSError:
        pass


def _committed(bootstrap: str, topic: str) -> int:
    from consumers.kafka_source import _kafka

    kafka = _kafka()
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(f"g-{topic}").get(f"g-{topic}", {})
        return sum(max(0, o.offset) for o in offsets.values())
    finally:
        admin.close()


def test_sink_failures_make_readyz_fail_and_nothing_is_committed_unstored(
    kafka_broker, tmp_path, small_fs
):
    """The DuckDB file's file system fills up mid-stream, twice: each
    batch fails, is retried with backoff; /readyz fails after 3 failures in a row; no
    offset is committed for what is not stored; after the fault the stream continues."""
    topic = f"sink-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, topic, partitions=3)
    records = _records(400)
    cfg = _config(tmp_path, kafka_broker, topic, extra="unready_after_sink_failures = 3")
    db = small_fs / "svc.duckdb"
    produce_records(kafka_broker, topic, records[:600])
    svc = ServiceProcess(cfg, db, "--no-scheduler")
    try:
        _wait(lambda: _ingested(svc) >= 600, 120, "the first half")
        _wait(lambda: _committed(kafka_broker, topic) == 600, 30, "offsets committed")
        # (a remount read-only is refused while DuckDB holds the file open for writing)
        for fault in ("full", "full again"):
            _fill(small_fs / "filler")
            n_before = _ingested(svc)
            produce_records(kafka_broker, topic, records[600:900] if fault == "full"
                            else records[900:])  # fmt: skip
            _wait(lambda: svc.get("/readyz")[0] == 503, 60, f"not ready ({fault})")
            assert "sink failing" in svc.get("/readyz")[1]
            assert _ingested(svc) == n_before  # nothing stored ...
            assert _committed(kafka_broker, topic) == n_before  # ... nothing committed
            assert svc.proc.poll() is None
            (small_fs / "filler").unlink(missing_ok=True)
            _wait(lambda: svc.get("/readyz")[0] == 200, 60, f"ready again ({fault})")
        _wait(lambda: _ingested(svc) >= 1200, 120, "the whole stream")
        _wait(lambda: _committed(kafka_broker, topic) == 1200, 30, "offsets committed")
    finally:
        svc.proc.terminate()
        svc.wait(timeout=60)
    out = svc.output()
    assert "Traceback" not in out
    assert "sink failed on a batch" in out  # retried, with backoff, logged by type only
    got = Store(db, load_config(cfg))
    assert scalar(got, "SELECT count(DISTINCT (model_id, record_id)) FROM discharges") == 1200
    assert got.read(queries.counts)["discharges"] == 1200
    # no partial window: every position's evaluation complete and equal to the reference
    ref = reference_run(load_config(cfg), tmp_path / "ref.duckdb", records, batch=100)
    pd.testing.assert_frame_equal(
        stream_results(ref, releases=False), stream_results(got, releases=False)
    )


# ---------------------------------------------------------------------- hostile input


def _hostile_payloads(n: int, seed: int) -> list[bytes | None]:
    """``n`` generated messages: valid records and every kind of damage, all drawn from one
    seeded generator, so the stream (and the test's counts) repeat exactly."""
    import json as _json

    base = _records(max(1, n // 6), models=3, seed=seed)
    rng = random.Random(seed)

    def junk(depth: int = 0) -> object:
        """A random JSON-ish value: scalars of every type, nested lists and objects."""
        kind = rng.randrange(7 if depth < 3 else 5)
        if kind == 0:
            return None
        if kind == 1:
            return rng.random() < 0.5
        if kind == 2:
            return rng.choice([0, -1, 2**63, -(2**70), rng.randrange(-(10**6), 10**6)])
        if kind == 3:
            return rng.choice([float("nan"), float("inf"), -0.0, 1e308, rng.random()])
        if kind == 4:
            return "".join(chr(rng.randrange(1, 0x2FFF)) for _ in range(rng.randrange(12)))
        if kind == 5:
            return [junk(depth + 1) for _ in range(rng.randrange(4))]
        return {str(rng.randrange(99)): junk(depth + 1) for _ in range(rng.randrange(4))}

    out: list[bytes | None] = []
    for i in range(n):
        rec = dict(base[i % len(base)], record_id=f"h{i}")
        kind = rng.randrange(12)
        if kind == 0:
            raw = _json.dumps(rec).encode()
            out.append(raw[: rng.randrange(len(raw))])  # truncated
        elif kind == 1:
            field = rng.choice(list(rec))
            rec[field] = (
                junk()
                if rng.random() < 0.05
                else rng.choice([[1], {"a": 1}, True, 10**40, -1, "", "\u0000"])
            )  # wrong types, huge numbers
            out.append(_json.dumps(rec, default=str).encode())
        elif kind == 2:
            rec["score"] = rng.choice(["NaN", "Infinity", "-Infinity", "1e999"])
            out.append(_json.dumps(rec).replace(f'"{rec["score"]}"', rec["score"]).encode())
        elif kind == 3:
            rec[rng.choice(["race", "sex", "ethnicity", "age_band"])] = f"code-{rng.randrange(99)}"
            out.append(_json.dumps(rec).encode())  # unknown codes
        elif kind == 4:
            doc = _json.dumps(rec)
            out.append((doc[:-1] + ', "score": 0.5, "score": 0.1}').encode())  # duplicate keys
        elif kind == 5:
            out.append(("[" * 5000 + "]" * 5000).encode())  # deep nesting
        elif kind == 6 and rng.random() < 0.05:
            # large, up to just under the broker's default message.max.bytes (about 1 MB:
            # a bigger message never reaches a consumer; the service refuses anything over
            # [service.intake] max_payload_bytes as "oversized")
            out.append(b'{"pad": "' + b"x" * rng.randrange(100_000, 900_000) + b'"}')
        elif kind == 7:
            raw = _json.dumps(rec).encode()
            k = rng.randrange(len(raw))
            out.append(raw[:k] + b"\xff\xfe\xc3" + raw[k:])  # invalid UTF-8
        elif kind == 8:
            out.append(None)  # tombstone
        else:
            out.append(_json.dumps(rec).encode())  # valid
    return out


def test_hostile_input_through_the_broker_is_stored_or_dead_lettered_once(kafka_broker, tmp_path):
    from consumers.kafka_source import KafkaSource
    from monitor.config import config_from_mapping
    from monitor.config.sources import KafkaConfig
    from monitor.stream.pipeline import Pipeline

    topic = f"hostile-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, topic, partitions=3)
    messages = _hostile_payloads(10_000, seed=16)
    produce_records(kafka_broker, topic, messages, batch_size=1024 * 1024, timeout_s=600)
    cfg = config_from_mapping(
        {"window": {"size": 800, "hop_records": 400, "hop_seconds": 0}, "axis1": {"K": 100},
         "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}}}
    )  # fmt: skip
    store = Store(tmp_path / "h.duckdb", cfg)
    reports = []
    pipe = Pipeline(cfg, store, on_batch=reports.append)
    kcfg = KafkaConfig(bootstrap_servers=(kafka_broker,), topics=(topic,),
                       group_id=f"g-{topic}", max_batch=500)  # fmt: skip
    rss: list[float] = []

    class Sampling:
        def ingest_batch(self, payloads, origins):
            pipe.ingest_batch(payloads, origins)
            from monitor.bench.soak import _rss_mb

            rss.append(_rss_mb())

    stop = threading.Event()
    with KafkaSource(kcfg, Sampling()) as source:
        handed = source.run(stop, max_messages=len(messages))
    pipe.flush()
    assert handed == len(messages)
    counts = store.read(queries.counts)
    keys = scalar(store, "SELECT count(DISTINCT (model_id, record_id)) FROM discharges")
    # every message stored (once), a duplicate of a stored key (a damaged record_id such
    # as "" repeats), or dead-lettered (once, with a reason): the counters add up
    accepted = sum(r.accepted for r in reports)
    duplicates = sum(r.duplicates for r in reports)
    rejected = sum(sum(r.rejected.values()) for r in reports)
    assert counts["discharges"] == keys == accepted
    assert counts["dead_letters"] == rejected
    assert accepted + duplicates + rejected == len(messages)
    assert duplicates < 100
    reasons = dict(store.cursor().execute(
        "SELECT reason, count(*) FROM dead_letters GROUP BY 1").fetchall())  # fmt: skip
    assert all(reasons.values()) and "" not in reasons
    for r in ("invalid_json", "empty_payload", "oversized"):
        assert reasons.get(r, 0) > 0, reasons
    dup_offsets = scalar(
        store, 'SELECT count(*) - count(DISTINCT (topic, partition, "offset")) FROM dead_letters'
    )
    assert dup_offsets == 0
    # RSS bounded: the second half of the run grows by less than 25 % over the first half
    half = len(rss) // 2
    assert max(rss[half:]) < 1.25 * max(rss[:half]), (max(rss[:half]), max(rss[half:]))
    print("hostile:", reasons, "stored", accepted, "duplicates", duplicates)


def test_sigkill_between_predictions_and_outcomes_joins_every_record_once(
    kafka_broker, tmp_path
):
    """Issue 23: predictions through the broker, SIGKILL, their outcomes (another SIGKILL at
    a seeded point among them), restart: every record joined exactly once, no dead letter,
    and every count-hop evaluation equal to an uninterrupted run of the same messages."""
    rng = random.Random(23)
    topic = f"outcomes-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, topic, partitions=3)
    records = _records(400)
    preds, outs = [], []
    for i, rec in enumerate(records):
        p, o = prediction_and_outcome(rec, i, i % 5)
        preds.append(p)
        outs.append(o)
    cfg = _config(tmp_path, kafka_broker, topic)
    db = tmp_path / "svc.duckdb"
    produce_records(kafka_broker, topic, preds)
    svc = ServiceProcess(cfg, db)
    _wait(lambda: _ingested(svc) >= len(preds), 120, "the predictions stored")
    time.sleep(rng.uniform(0.0, 0.5))  # beside the last hop evaluations
    svc.kill()
    producer = threading.Thread(
        target=produce_records, args=(kafka_broker, topic, paced(outs, 400)), daemon=True
    )
    producer.start()
    svc = ServiceProcess(cfg, db)
    time.sleep(rng.uniform(1.0, 2.5))  # a seeded point while outcomes are being joined
    svc.kill()
    producer.join(timeout=120)
    svc = ServiceProcess(cfg, db, "--until-idle", "10")
    assert svc.wait(timeout=600) == 0, svc.output()

    conf = load_config(cfg)
    ref = reference_run(conf, tmp_path / "ref.duckdb", [*preds, *outs], batch=100)
    got = Store(db, conf)
    n = len(records)
    q = "SELECT model_id, record_id, label, label_pos FROM discharges ORDER BY model_id, record_id"
    rows = got.cursor().execute(q).fetchall()
    assert len(rows) == n and len({(m, r) for m, r, _, _ in rows}) == n
    want = {(r["model_id"], r["record_id"]): r["label"] for r in records}
    assert {(m, r): y for m, r, y, _ in rows} == want  # every label, once, the right one
    assert rows == ref.cursor().execute(q).fetchall()  # and counted from the same positions
    assert got.read(queries.counts)["dead_letters"] == 0 and got.read(queries.held_count) == 0
    joined_n = scalar(got, "SELECT count(*) FROM discharges WHERE label IS NOT NULL")
    print("kill test counts:", {"records": n, "joined": joined_n, "dead_letters": 0})
    pd.testing.assert_frame_equal(
        stream_results(ref, releases=False), stream_results(got, releases=False)
    )
    assert verdict_events(got) == verdict_events(ref)
    ref.close()
    got.close()
