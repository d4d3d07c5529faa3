"""Faults the service meets, caused for real on DuckDB files (no broker): restarts at any
point, wall-clock hops, retention before a restart, storage faults, racing ids.

The Kafka-backed faults (SIGKILL of the service process, broker outage, hostile input
through the broker) are in tests/scenarios/test_faults_kafka.py.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.store import Store, queries
from monitor.stream.pipeline import Pipeline
from tests.support.pipeline_runs import stored_results
from tests.support.store_reads import scalar

#: small windows and few resamples: verdicts flip often enough for the debounce to matter
TICKING = config_from_mapping(
    {
        "window": {"size": 300, "hop_records": 100, "hop_seconds": 10},
        "axis1": {"K": 60},
        "confirm_windows": 2,
        # the tests' synthetic models are not registered, and their times are fixed dates
        "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}},
    }
)


def _payloads(n: int, models: int = 2, seed: int = 5) -> list[bytes]:
    df = synthetic_window(n, models=models, seed=seed).drop(columns=["decision"])
    df["event_time"] = "2026-11-01T00:00:00Z"
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    return [json.dumps(r).encode() for r in df.to_dict("records")]


class _Clock:
    """The pipeline's wall clock, moved by the test (the hop_seconds cadence is wall time)."""

    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


def _confirmed(store: Store) -> list[tuple]:
    return [
        (e.kind, e.model_id, e.metric, e.attribute, e.old, e.new, e.evaluation)
        for e in queries.confirmed_events(store.cursor())
    ]


def _run(path, payloads, *, batch: int, tick_every: int, restarts: set[int]) -> Store:
    """Feed ``payloads``; tick (wall clock +11 s) after every ``tick_every``-th batch; after
    the batches in ``restarts`` drop the pipeline without closing it (what SIGKILL leaves:
    the committed transactions) and start a new one on the same file, which ticks at once.
    """
    clock = _Clock()
    store = Store(path, TICKING)
    pipe = Pipeline(TICKING, store, clock=clock)
    for k, i in enumerate(range(0, len(payloads), batch)):
        chunk = payloads[i : i + batch]
        pipe.ingest_batch(chunk, [Origin("t", 0, i + j) for j in range(len(chunk))])
        if k % tick_every == 0:
            clock.t += 11
            pipe.tick()
        if k in restarts:
            store.close()
            clock.t += 11
            store = Store(path, TICKING)
            pipe = Pipeline(TICKING, store, clock=clock)
            pipe.tick()
    clock.t += 11
    pipe.tick()
    pipe.flush()
    return store


def _computed(store: Store) -> pd.DataFrame:
    wr = stored_results(store)
    wr["result"] = [{k: v for k, v in r.items() if k != "released"} for r in wr["result"]]
    return wr


def test_restarts_and_wall_clock_hops_do_not_change_numbered_results_or_events(tmp_path):
    payloads = _payloads(1500)
    plain = _run(tmp_path / "a.duckdb", payloads, batch=70, tick_every=3, restarts=set())
    again = _run(
        tmp_path / "b.duckdb", payloads, batch=70, tick_every=1, restarts={3, 9, 10, 20, 33}
    )
    # the debounce saw enough flips for the comparison to mean something
    assert len(_confirmed(plain)) >= 2
    assert _confirmed(again) == _confirmed(plain)
    # the computed results are the same; which of them were *released* is not compared:
    # a wall-clock hop is a release point (monitor.stream.publication), so what was shown
    # depends on when the hops fell, as the cadence of any published figure does (the
    # release rule holds either way: tests/stream/test_publication.py). Without wall-clock
    # hops, a restart releases exactly as an uninterrupted run (tests/stream/test_pipeline.py).
    pd.testing.assert_frame_equal(_computed(plain), _computed(again))
    wr = stored_results(again)
    # numbered evaluations are exactly the count hops, each stream position once
    assert sorted(wr["window_end_count"].unique()) == list(range(100, 1501, 100))
    per = wr.groupby(["model_id", "window_end_count"])["evaluation"].nunique()
    assert (per == 1).all()
    for model, rows in wr.groupby("model_id"):
        assert list(rows.drop_duplicates("evaluation")["window_end_count"] // 100) == list(
            rows["evaluation"].unique()
        ), model


def test_a_restart_does_not_evaluate_an_unchanged_window_again(tmp_path):
    payloads = _payloads(470, models=1)  # 470: the last 70 records are past the last hop
    clock = _Clock()
    store = Store(tmp_path / "m.duckdb", TICKING)
    pipe = Pipeline(TICKING, store, clock=clock)
    pipe.ingest_batch(payloads, [Origin("t", 0, j) for j in range(len(payloads))])
    pipe.flush()
    clock.t += 11
    assert pipe.tick() == 1  # the interim evaluation of position 470
    latest = {c.key: c.result for c in pipe.latest_cells()}
    assert {c.result.window_n for c in pipe.latest_cells()} == {300}
    for _ in range(10):  # ten restarts, each ticking at once and later
        store.close()
        store = Store(tmp_path / "m.duckdb", TICKING)
        pipe = Pipeline(TICKING, store, clock=clock)
        assert pipe.tick() == 0
        clock.t += 11
        assert pipe.tick() == 0
        assert {c.key: c.result for c in pipe.latest_cells()} == latest
    assert store.read(queries.model_states)["model-00"].evaluated_records == 470
    # the interim evaluation is the cells' latest, not a numbered one
    assert store.read(queries.counts)["window_results"] == 4 * 28
    assert pipe.model_view("model-00").evaluations == 4
    # a record more: the next tick evaluates the changed window, once
    more = [p for p in _payloads(480, models=1) if b'"r470"' in p]
    pipe.ingest_batch(more, [Origin("t", 0, 470)])
    clock.t += 11
    assert pipe.tick() == 1
    assert pipe.tick() == 0


WORKER = config_from_mapping(
    {"window": {"size": 300, "hop_records": 100, "hop_seconds": 0}, "axis1": {"K": 60},
     "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}}}
)  # fmt: skip


def _dated(n: int, old: int, seed: int = 8) -> list[bytes]:
    """One model's ``n`` records; the first ``old`` are a year older than the rest."""
    df = synthetic_window(n, models=1, seed=seed).drop(columns=["decision"])
    df["event_time"] = ["2025-01-01T00:00:00Z"] * old + ["2026-11-01T00:00:00Z"] * (n - old)
    return [json.dumps(r).encode() for r in df.to_dict("records")]


def _ingest(pipe: Pipeline, payloads: list[bytes], start: int, stop: int) -> None:
    pipe.ingest_batch(payloads[start:stop], [Origin("t", 0, j) for j in range(start, stop)])


def test_a_hop_recomputed_after_retention_sees_the_window_it_would_have_seen(tmp_path):
    payloads = _dated(700, old=200)
    plain = Store(tmp_path / "a.duckdb", WORKER)
    pipe = Pipeline(WORKER, plain)
    _ingest(pipe, payloads, 0, 550)
    _ingest(pipe, payloads, 550, 650)  # the hop at 600 goes to the worker
    _ingest(pipe, payloads, 650, 700)  # ... and is written with this batch
    pipe.flush()

    store = Store(tmp_path / "b.duckdb", WORKER)
    pipe = Pipeline(WORKER, store)
    _ingest(pipe, payloads, 0, 550)
    pipe.flush()
    _ingest(pipe, payloads, 550, 650)
    # killed while the worker computed the hop at 600: records stored, evaluation not
    assert store.read(queries.model_states)["model-00"].evaluated_records == 500
    deleted = store.apply_retention(pd.Timestamp("2026-11-02", tz="UTC"), 365.0, 3650.0)
    assert deleted["discharges"] == 200  # positions 1-200, outside the window at 600
    store.close()
    store = Store(tmp_path / "b.duckdb", WORKER)
    pipe = Pipeline(WORKER, store)  # recomputes the hop at 600 from the stored records
    _ingest(pipe, payloads, 650, 700)
    pipe.flush()
    got, want = stored_results(store), stored_results(plain)
    assert list(got["window_end_count"].unique()) == [100, 200, 300, 400, 500, 600, 700]
    pd.testing.assert_frame_equal(got, want)
    window = store.window_records("model-00", end_count=600, last_n=300)
    assert len(window) == 300  # positions 301-600, not the next 300 survivors after 200


def test_the_model_position_migration_numbers_existing_rows_from_the_stored_count(tmp_path):
    import duckdb

    path = tmp_path / "v3.duckdb"
    store = Store(path, WORKER)
    pipe = Pipeline(WORKER, store)
    _ingest(pipe, _dated(350, old=50), 0, 350)
    pipe.flush()
    store.apply_retention(pd.Timestamp("2026-11-02", tz="UTC"), 365.0, 3650.0)
    store.close()
    with duckdb.connect(str(path)) as c:  # back to a v3 file: no positions stored
        c.execute("ALTER TABLE discharges DROP COLUMN model_pos")
        c.execute("ALTER TABLE discharges DROP COLUMN content_hash")
        c.execute("DELETE FROM schema_migrations WHERE version >= 4")
    store = Store(path, WORKER)
    pos = store.cursor().execute("SELECT model_pos FROM discharges ORDER BY seq").fetchnumpy()
    assert list(pos["model_pos"]) == list(range(51, 351))  # gap where retention deleted
    pipe = Pipeline(WORKER, store)
    _ingest(pipe, _dated(360, old=50), 350, 360)
    assert scalar(store, "SELECT max(model_pos) FROM discharges") == 360


def test_the_v8_migration_drops_the_discharge_indexes_and_deduplication_stays_exact(tmp_path):
    """A v7 file (discharges with PRIMARY KEY (seq) and UNIQUE (model_id, record_id), the
    ART indexes v8 drops) keeps every row and its order; afterwards a redelivery is still
    a duplicate and a changed redelivery still a conflict, by the key set and the check
    against the table, with no index behind them."""
    import duckdb

    path = tmp_path / "v7.duckdb"
    payloads = _dated(300, old=0)
    store = Store(path, WORKER)
    pipe = Pipeline(WORKER, store)
    _ingest(pipe, payloads, 0, 250)
    pipe.flush()
    before = store.cursor().execute("SELECT * FROM discharges ORDER BY seq").df()
    store.close()
    with duckdb.connect(str(path)) as c:  # back to v7: the table with its two indexes
        # (without v11's outcome columns, which the upgrade adds back)
        c.execute("CREATE TABLE d7 AS SELECT * EXCLUDE (outcome_time, label_pos) FROM discharges")
        c.execute("DROP TABLE discharges")
        c.execute(
            "CREATE TABLE discharges (seq BIGINT PRIMARY KEY, model_id VARCHAR NOT NULL, "
            "record_id VARCHAR NOT NULL, event_time TIMESTAMPTZ NOT NULL, received_at "
            "TIMESTAMPTZ NOT NULL, hospital_id VARCHAR, score DOUBLE NOT NULL, label TINYINT "
            "NOT NULL, decision TINYINT NOT NULL, attributes JSON NOT NULL, features JSON, "
            "model_pos BIGINT, content_hash VARCHAR, UNIQUE (model_id, record_id))"
        )
        c.execute("INSERT INTO discharges SELECT * FROM d7 ORDER BY seq DESC")  # any order
        c.execute("DROP TABLE d7")
        c.execute("DELETE FROM schema_migrations WHERE version >= 8")
        kinds = {k for (k,) in c.execute(
            "SELECT constraint_type FROM duckdb_constraints() WHERE table_name = 'discharges'"
        ).fetchall()}  # fmt: skip
        assert {"PRIMARY KEY", "UNIQUE"} <= kinds  # what the migration must remove
    store = Store(path, WORKER)
    kinds = {k for (k,) in store.cursor().execute(
        "SELECT constraint_type FROM duckdb_constraints() WHERE table_name = 'discharges'"
    ).fetchall()}  # fmt: skip
    assert kinds == {"NOT NULL"}
    after = store.cursor().execute("SELECT * FROM discharges").df()  # stored in seq order
    pd.testing.assert_frame_equal(after, before)
    pipe = Pipeline(WORKER, store)
    changed = json.loads(payloads[3])
    changed["score"] = 1.0 - changed["score"]
    batch = [*payloads[240:250], json.dumps(changed).encode(), *payloads[250:300]]
    pipe.ingest_batch(batch, [Origin("t", 0, 1000 + j) for j in range(len(batch))])
    pipe.flush()
    assert scalar(store, "SELECT count(*) FROM discharges") == 300
    assert scalar(store, "SELECT count(DISTINCT (model_id, record_id)) FROM discharges") == 300
    assert scalar(store,
        "SELECT count(*) FROM dead_letters WHERE reason = 'conflicting_duplicate'"
    ) == 1
    assert list(store.cursor().execute("SELECT seq FROM discharges ORDER BY seq").fetchnumpy()[
        "seq"]) == list(range(1, 301))  # fmt: skip


def test_a_time_window_restores_by_the_latest_event_time_not_the_last_arrival(tmp_path):
    cfg = config_from_mapping(
        {"window": {"kind": "time", "days": 10, "hop_records": 100, "hop_seconds": 0},
         "axis1": {"K": 60},
         "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}}}
    )  # fmt: skip
    df = synthetic_window(250, models=1, seed=9).drop(columns=["decision"])
    rng = np.random.default_rng(9)
    times = pd.Timestamp("2026-11-01", tz="UTC") + pd.to_timedelta(rng.uniform(0, 30, 250), "D")
    times = times.to_numpy()
    times[-1] = pd.Timestamp("2026-10-01", tz="UTC")  # the last arrival is a late record
    df["event_time"] = [pd.Timestamp(t).isoformat() for t in times]
    payloads = [json.dumps(r).encode() for r in df.to_dict("records")]
    store = Store(tmp_path / "t.duckdb", cfg)
    pipe = Pipeline(cfg, store)
    _ingest(pipe, payloads, 0, 250)
    pipe.flush()
    live = pipe._models["model-00"].window  # the window itself (no read method shows it)
    live_counts = {k: t.counts.copy() for k, t in live.table_map().items()}
    assert 0 < live.n < 250
    store.close()
    store = Store(tmp_path / "t.duckdb", cfg)
    restored = Pipeline(cfg, store)._models["model-00"].window
    assert restored.n == live.n
    for k, t in restored.table_map().items():
        np.testing.assert_array_equal(t.counts, live_counts[k])
    # a restore by the last arrival's event time would keep a different set of records
    by_arrival = pd.to_datetime(times[-1]) - pd.Timedelta(days=10)
    assert (pd.to_datetime(times) >= by_arrival).sum() != live.n


def test_job_run_ids_do_not_collide_when_an_ingest_rolls_back_meanwhile(tmp_path):
    """Scheduled jobs write job_runs on their own cursors while ingests roll back (real
    threads; the old code rewound the id counter on every rollback and reused ids)."""
    import threading

    store = Store(tmp_path / "j.duckdb", WORKER)
    errors: list[str] = []
    done = threading.Event()

    def jobs() -> None:
        cursor = store.cursor()
        try:
            for _ in range(400):
                store.write_job_run("axis2", pd.Timestamp.now(tz="UTC"), 0.1, "success", None,
                                    cursor=cursor)  # fmt: skip
        except Exception as exc:
            errors.append(type(exc).__name__)
        finally:
            cursor.close()
            done.set()

    t = threading.Thread(target=jobs)
    t.start()
    rollbacks = 0
    while not done.is_set():
        try:
            with store.transaction():
                raise RuntimeError("the batch failed")
        except RuntimeError:
            rollbacks += 1
    t.join()
    assert errors == []
    assert rollbacks > 10
    assert scalar(store, "SELECT count(DISTINCT id) FROM job_runs") == 400


def test_a_redelivered_poison_message_is_dead_lettered_once(tmp_path):
    """Killed between the DuckDB commit and the offset commit, the source redelivers the
    batch: its records are deduplicated by key, its dead letters by (topic, partition,
    offset)."""
    store = Store(tmp_path / "d.duckdb", WORKER)
    pipe = Pipeline(WORKER, store)
    batch = [b"{not json", *_dated(5, old=0)[:2], b"[1]"]
    origins = [Origin("t", 1, 40 + j) for j in range(len(batch))]
    pipe.ingest_batch(batch, origins)
    pipe.ingest_batch(batch, origins)
    pipe.ingest_batch([b"{not json"], [Origin("t", 2, 40)])  # another message, same bytes
    assert store.read(queries.counts)["dead_letters"] == 3
    assert store.read(queries.counts)["discharges"] == 2


def test_a_locked_duckdb_file_stops_start_up_with_a_clear_error(tmp_path):
    """Another process holds the file (DuckDB: one writer per file): exit code 3, one line
    naming the file, no traceback."""
    import subprocess
    import sys
    from pathlib import Path

    db = tmp_path / "held.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         f"import duckdb, time; c = duckdb.connect({str(db)!r}); print('held', flush=True); "
         "time.sleep(120)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        records = tmp_path / "in.csv"
        synthetic_window(20, models=1, seed=1).to_csv(records, index=False)
        vfr = Path(sys.executable).with_name("vfr-monitor")
        out = subprocess.run(
            [str(vfr), "run", "--db", str(db), "--input", str(records), "--port", "0",
             "--no-scheduler"], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 3, out.stderr
        assert "Traceback" not in out.stderr + out.stdout
        assert f"the DuckDB file {db} is in use by another process" in out.stderr
    finally:
        holder.kill()
        holder.wait()
