"""The streaming data path on a real DuckDB file, without a broker.

Every persisted evaluation must equal the core engine run offline on the same
records with the stored seed; redelivery and restarts must not change results.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from consumers.base import (
    Origin,
)
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.config.engine import engine_options
from monitor.core.outcome_split import run_split, split_tables_from_frame
from monitor.store import Store, queries
from monitor.stream.pipeline import (
    Pipeline,
)
from tests.support.outcome_streams import two_kind_payloads
from tests.support.pipeline_runs import feed, scored_payloads, stored_results
from tests.support.store_reads import events_frame

CFG = config_from_mapping(
    {
        "window": {"size": 1500, "hop_records": 400, "hop_seconds": 0},
        "axis1": {"K": 120},
        "models": [{"id": "model-00"}, {"id": "model-01"}, {"id": "model-02"}],
    }
)
#: the engine the stream runs: the configured one, one model at a time
ENGINE = engine_options(CFG, threads=1)


def test_every_evaluation_equals_the_offline_engine(tmp_path):
    store = Store(tmp_path / "m.duckdb", CFG)
    feed(Pipeline(CFG, store), scored_payloads())
    wr = stored_results(store)
    assert sorted(wr["window_end_count"].unique()) == [400, 800, 1200, 1600, 2000]
    for (model, evaluation), rows in wr.groupby(["model_id", "evaluation"]):
        end = int(rows["window_end_count"].iloc[0])
        records = store.window_records(model, end_count=end, last_n=CFG.window.size).assign(
            model_id=model
        )
        # label-free cells on every prediction (label collapsed), label-based ones on the
        # records with an outcome (issue 23): here every record came joined
        seed = int(rows["seed"].iloc[0])
        offline = run_split(*split_tables_from_frame(records, CFG), ENGINE, seed)
        got = {(r["metric"], r["attribute"]): r for r in rows["result"]}
        assert len(offline) == len(got) == 28
        for c in offline:
            stored = got[(c.metric, c.attribute)]
            for key in ("n_pass", "vfr", "dominant_verdict", "window_n", "resample_n"):
                assert stored[key] == getattr(c, key), (model, evaluation, c.metric, key)
            for key in ("value", "mean", "sd", "ci_low", "ci_high"):
                want = getattr(c, key)
                assert stored[key] == (None if want != want else want)


def test_redelivery_is_deduplicated(tmp_path):
    payloads = scored_payloads(n=900)
    once = Store(tmp_path / "once.duckdb", CFG)
    feed(Pipeline(CFG, once), payloads)
    twice = Store(tmp_path / "twice.duckdb", CFG)
    pipe = Pipeline(CFG, twice)
    feed(pipe, payloads)
    feed(pipe, payloads[:500])  # redelivered: every record already stored
    feed(pipe, payloads[300:700], batch=57)
    stored = twice.read(queries.counts)["discharges"]
    assert stored == once.read(queries.counts)["discharges"] == 1800
    pd.testing.assert_frame_equal(stored_results(once), stored_results(twice))


def test_a_failing_observer_does_not_make_a_committed_batch_fail(tmp_path):
    """A metrics bug after commit must not turn into redelivery of a committed batch."""
    payloads = scored_payloads(n=900)
    calls = []

    def broken(report):
        calls.append(report.accepted)
        raise ValueError("observer bug")

    store = Store(tmp_path / "obs.duckdb", CFG)
    pipe = Pipeline(CFG, store, on_batch=broken)
    feed(pipe, payloads)  # raises nothing
    assert pipe.observer_failures == len(calls) > 0
    assert sum(calls) == store.read(queries.counts)["discharges"] == 1800


def test_restart_gives_the_same_results_as_an_uninterrupted_run(tmp_path):
    payloads = scored_payloads(n=1500)
    ref = Store(tmp_path / "ref.duckdb", CFG)
    feed(Pipeline(CFG, ref), payloads)
    path = tmp_path / "restarted.duckdb"
    s1 = Store(path, CFG)
    feed(Pipeline(CFG, s1), payloads[:1332])
    s1.close()
    s2 = Store(path, CFG)
    pipe = Pipeline(CFG, s2)  # rebuilds windows and trackers from the file
    feed(pipe, payloads[999:])  # the source resumes from an older offset: overlap replayed
    pd.testing.assert_frame_equal(stored_results(ref), stored_results(s2))
    ev_ref = events_frame(ref).drop(columns=["created_at"])
    ev_new = events_frame(s2).drop(columns=["created_at"])
    pd.testing.assert_frame_equal(ev_ref, ev_new)


def test_a_failed_transaction_leaves_no_trace_and_the_retry_matches(tmp_path, monkeypatch):
    payloads = scored_payloads(n=900)
    ref = Store(tmp_path / "ref.duckdb", CFG)
    feed(Pipeline(CFG, ref), payloads)
    store = Store(tmp_path / "f.duckdb", CFG)
    pipe = Pipeline(CFG, store)
    feed(pipe, payloads[:666])
    # A fault we cannot cause for real on demand (disk full mid-transaction): the
    # evaluation write raises once, the transaction must roll back completely.
    original = store.write_evaluations
    calls = {"n": 0}

    def failing(*a, **k):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("simulated write failure")
        return original(*a, **k)

    monkeypatch.setattr(store, "write_evaluations", failing)
    chunk = payloads[666:999]
    with pytest.raises(OSError):
        pipe.ingest_batch(chunk, [Origin("t", 0, k) for k in range(len(chunk))])
    assert store.read(queries.counts)["discharges"] == 666
    feed(pipe, payloads, start=666)  # redelivery after the failure
    pd.testing.assert_frame_equal(stored_results(ref), stored_results(store))


def test_a_reload_that_fails_part_way_is_finished_before_the_next_batch(tmp_path, monkeypatch):
    """Out of memory while rebuilding state after a failed batch (seen with a 128 MB DuckDB
    memory limit) must not leave half-rebuilt windows that later batches are applied to."""
    payloads = scored_payloads(n=1500)
    ref = Store(tmp_path / "ref.duckdb", CFG)
    feed(Pipeline(CFG, ref), payloads)
    store = Store(tmp_path / "f.duckdb", CFG)
    pipe = Pipeline(CFG, store)
    feed(pipe, payloads[:999])
    # Faults we cannot cause on demand: the batch's write fails, then so does the first
    # read of the reload that follows.
    write, read = store.write_evaluations, store.window_records
    fail = {"write": 1, "read": 1}

    def failing_write(*a, **k):
        if fail["write"]:
            fail["write"] -= 1
            raise OSError("simulated write failure")
        return write(*a, **k)

    def failing_read(*a, **k):
        if fail["read"] and not fail["write"]:
            fail["read"] -= 1
            raise MemoryError("simulated out of memory")
        return read(*a, **k)

    monkeypatch.setattr(store, "write_evaluations", failing_write)
    monkeypatch.setattr(store, "window_records", failing_read)
    chunk = payloads[999:1332]
    with pytest.raises(MemoryError):
        pipe.ingest_batch(chunk, [Origin("t", 0, 999 + k) for k in range(len(chunk))])
    feed(pipe, payloads, start=999)  # redelivery: the reload is finished first
    pipe.close()
    assert fail == {"write": 0, "read": 0}
    pd.testing.assert_frame_equal(stored_results(ref), stored_results(store))


def test_poison_messages_go_to_dead_letters_with_reasons(tmp_path):
    store = Store(tmp_path / "p.duckdb", CFG)
    pipe = Pipeline(CFG, store)
    good = json.loads(scored_payloads(n=1, models=1)[0])
    poison = [
        b"{not json",
        b"\xff\xfe\x00garbage",
        None,
        b"",
        b"[1, 2, 3]",
        json.dumps({**good, "score": "high"}).encode(),
        json.dumps({**good, "score": 7}).encode(),
        json.dumps({**good, "race": "Martian"}).encode(),
        json.dumps({**good, "note": "free text"}).encode(),
        b'{"a": "' + b"x" * 70_000 + b'"}',
        b'{"score": NaN}',  # not JSON (RFC 8259 has no NaN token)
        json.dumps(good).encode(),
    ]
    pipe.ingest_batch(poison, [Origin("topic-a", 2, 100 + i) for i in range(len(poison))])
    rows = store.cursor().execute(
        'SELECT reason, topic, partition, "offset" FROM dead_letters ORDER BY "offset"'
    ).fetchall()
    assert [r[0] for r in rows] == [
        "invalid_json", "invalid_json", "empty_payload", "empty_payload", "not_an_object",
        "wrong_type:score", "out_of_range:score", "unknown_code:race", "unexpected_field",
        "oversized", "invalid_json",
    ]  # fmt: skip
    assert all(r[1] == "topic-a" and r[2] == 2 for r in rows)
    assert store.read(queries.counts)["discharges"] == 1


def test_the_worker_path_equals_the_in_transaction_path(tmp_path):
    payloads = scored_payloads(n=1500)
    sync_cfg = CFG.model_copy(
        update={"service": CFG.service.model_copy(update={"evaluation_worker": False})}
    )
    ref = Store(tmp_path / "sync.duckdb", sync_cfg)
    feed(Pipeline(sync_cfg, ref), payloads)
    got = Store(tmp_path / "worker.duckdb", CFG)
    feed(Pipeline(CFG, got), payloads)
    pd.testing.assert_frame_equal(stored_results(ref), stored_results(got))
    ev_ref = events_frame(ref).drop(columns=["created_at"])
    ev_got = events_frame(got).drop(columns=["created_at"])
    pd.testing.assert_frame_equal(ev_ref, ev_got)


def test_evaluations_lost_in_the_worker_are_recomputed_at_restart(tmp_path):
    payloads = scored_payloads(n=1500)
    ref = Store(tmp_path / "ref.duckdb", CFG)
    feed(Pipeline(CFG, ref), payloads)
    path = tmp_path / "killed.duckdb"
    s1 = Store(path, CFG)
    pipe = Pipeline(CFG, s1)
    for i in range(0, 1665, 333):  # no flush: the last batch's evaluations are in the worker
        chunk = payloads[i : i + 333]
        pipe.ingest_batch(chunk, [Origin("t", 0, i + k) for k in range(len(chunk))])
    assert pipe.queue.pending, "the test needs evaluations still pending at the 'kill'"
    written = s1.read(queries.counts)["window_results"]
    pipe.queue.pending.clear()  # as if the process died: they are never written
    s1.close()
    s2 = Store(path, CFG)
    assert s2.read(queries.counts)["window_results"] == written
    pipe = Pipeline(CFG, s2)  # recomputes the missing hop points from the stored records
    assert s2.read(queries.counts)["window_results"] > written
    feed(pipe, payloads[999:])
    pd.testing.assert_frame_equal(stored_results(ref), stored_results(s2))
    ev_ref = events_frame(ref).drop(columns=["created_at"])
    ev_new = events_frame(s2).drop(columns=["created_at"])
    pd.testing.assert_frame_equal(ev_ref, ev_new)


def test_stacked_worker_evaluations_equal_one_model_at_a_time():
    import pickle

    from monitor.stream.eval_worker import _axis1_many

    df = synthetic_window(1500, models=3, seed=5)
    free, tables = split_tables_from_frame(df, CFG)
    models = sorted({m for m, _ in tables})

    def mine(t, m):
        return {k: x for k, x in t.items() if k[0] == m}

    # model 0 twice (two stream positions), so the worker needs a second round
    jobs = [((mine(free, m), mine(tables, m)), 100 + i) for i, m in enumerate(models)]
    jobs.append((jobs[0][0], 999))
    got = _axis1_many(pickle.dumps(ENGINE), jobs)
    for (tab, seed), (results, _) in zip(jobs, got, strict=True):
        alone = run_split(*tab, ENGINE, seed)
        assert [r.to_dict() for r in results] == [r.to_dict() for r in alone]


def test_key_hash_hits_are_checked_against_the_table(tmp_path, monkeypatch):
    """The in-memory key hashes only say "maybe stored"; DuckDB decides. A 64-bit hash
    collision cannot be produced on demand, so every key is made to look like a hit."""
    payloads = scored_payloads(n=600)
    ref = Store(tmp_path / "ref.duckdb", CFG)
    feed(Pipeline(CFG, ref), payloads)
    store = Store(tmp_path / "hit.duckdb", CFG)
    monkeypatch.setattr(store._keys, "contains", lambda h: np.ones(h.shape, dtype=bool))
    pipe = Pipeline(CFG, store)
    feed(pipe, payloads)
    feed(pipe, payloads[:400])  # real redeliveries among the forced hits
    pipe.close()
    stored = store.read(queries.counts)["discharges"]
    assert stored == ref.read(queries.counts)["discharges"] == 1200
    pd.testing.assert_frame_equal(stored_results(ref), stored_results(store))


def test_events_record_the_decision_rule_in_force(tmp_path):
    """An intervention's thresholds change the decisions; every event says which rule held."""
    raw = CFG.model_dump()
    model = scored_payloads(n=20, models=1)[0]
    model_id = json.loads(model)["model_id"]
    raw["decision"] = {"threshold": 0.5, "per_group": {model_id: {"sex": {"1": 0.45}}}}
    shifted = config_from_mapping(raw)
    ids = set()
    for name, cfg in (("plain", CFG), ("shifted", shifted)):
        store = Store(tmp_path / f"{name}.duckdb", cfg)
        feed(Pipeline(cfg, store), scored_payloads(n=1200, models=1))
        got = store.cursor().execute("SELECT DISTINCT decision_config FROM events").fetchall()
        assert got == [(cfg.decision_id(),)]
        ids.add(cfg.decision_id())
        store.close()
    assert len(ids) == 2


def _icu_payloads(phases: list[tuple[int, bool]], model: str = "model-00") -> list[bytes]:
    """Records in phases of (count, Black patients die): every death is flagged (score 0.9)
    and no survivor is (0.1), so EOPP and EOD by race are 0 (a stable pass) whenever two
    race groups have 20 positives, and undefined while Black patients have none."""
    out, i = [], 0
    for n, black_positives in phases:
        for k in range(n):
            black = k % 2 == 0
            label = int((k // 2) % 10 < 3 and (black_positives or not black))
            rec = {
                "record_id": f"r{i:05d}", "model_id": model,
                "event_time": "2026-11-01T00:00:00Z", "hospital_id": f"h{i % 5}",
                "score": 0.9 if label else 0.1, "label": label,
                "race": "2" if black else "3", "sex": str(k % 3 % 2), "ethnicity": "1",
                "age_group": "3",
            }  # fmt: skip
            out.append(json.dumps(rec).encode())
            i += 1
    return out


def test_a_cell_going_not_evaluable_and_back_raises_no_flip(tmp_path):
    """Issue 24: EOPP by race is a stable pass, then not evaluable for two evaluations (no
    Black positives in the window), then a pass again. The old code read the undefined
    windows as a stable fail: a confirmed flip pass -> fail and back, which pages."""
    cfg = config_from_mapping(
        {
            "window": {"size": 400, "hop_records": 200, "hop_seconds": 0},
            "axis1": {"K": 60},
            "models": [{"id": "model-00"}],
        }
    )
    store = Store(tmp_path / "m.duckdb", cfg)
    feed(Pipeline(cfg, store), _icu_payloads([(400, True), (800, False), (400, True)]))
    wr = stored_results(store)
    race = wr[[r["metric"] == "EOPP" and r["attribute"] == "race" for r in wr["result"]]]
    rows = list(zip(race["window_end_count"], race["result"], strict=True))
    seen = [(int(e), r["dominant_verdict"], r["tier"]) for e, r in rows]
    verdicts = [v for _, v, _ in seen]
    assert verdicts[:1] == ["pass"] and verdicts[-1] == "pass"
    gap = [(v, t) for e, v, t in seen if 800 <= e <= 1200]
    assert gap and set(gap) == {("not_evaluable", "Not-Evaluable")}
    off = next(r for e, r in rows if e == 1000)
    assert off["vfr"] is None and off["not_evaluable_reason"].startswith("fewer than two race")
    assert off["records_needed"] == 20 and off["records_needed_groups"] == ["2"]
    events = events_frame(store)
    rate = events["metric"].isin(["EOPP", "EOD"]) & (events["attribute"] == "race")
    flips = events[rate]  # (DI and SPD by race do change: Black patients are flagged less)
    shown = ["kind", "metric", "old", "new", "confirmed"]
    assert len(events) and flips.empty, flips[shown].to_dict("records")


# ----------------------------------------------------------------------------- issue 23
def test_with_outcomes_later_every_evaluation_equals_the_offline_engine(tmp_path):
    """Predictions and outcomes interleaved: each hop's label-based cells rest on the
    outcomes that had come by that point in the stream, as the stored window at that
    position (label_pos) rebuilds it; label-free cells on every prediction."""
    store = Store(tmp_path / "m.duckdb", CFG)
    feed(Pipeline(CFG, store), two_kind_payloads(n=1000, lag=300))
    wr = stored_results(store)
    assert sorted(wr["window_end_count"].unique()) == [400, 800]
    for (model, _), rows in wr.groupby(["model_id", "evaluation"]):
        end = int(rows["window_end_count"].iloc[0])
        records = store.window_records(model, end_count=end, last_n=CFG.window.size).assign(
            model_id=model
        )
        known = int((records["label"] >= 0).sum())
        assert 0 < known < len(records)  # some outcomes had not come at the hop point
        seed = int(rows["seed"].iloc[0])
        offline = run_split(*split_tables_from_frame(records, CFG), ENGINE, seed)
        got = {(r["metric"], r["attribute"]): r for r in rows["result"]}
        for c in offline:
            stored = got[(c.metric, c.attribute)]
            assert stored["predictions"] == len(records) and stored["with_outcome"] == known
            n = len(records) if c.metric in ("DI", "SPD") else known
            assert stored["window_n"] == c.window_n == n
            for key in ("n_pass", "vfr", "dominant_verdict", "value", "sd"):
                want = getattr(c, key)
                assert stored[key] == (None if want != want else want), (c.metric, key)


def test_with_outcomes_later_batching_and_restarts_change_nothing(tmp_path):
    payloads = two_kind_payloads(n=1200, lag=300, skip=11)
    ref = Store(tmp_path / "ref.duckdb", CFG)
    feed(Pipeline(CFG, ref), payloads)
    path = tmp_path / "restarted.duckdb"
    s1 = Store(path, CFG)
    p1 = Pipeline(CFG, s1)
    feed(p1, payloads[:1111], batch=97)
    s1.close()
    s2 = Store(path, CFG)
    feed(Pipeline(CFG, s2), payloads, batch=501, start=1111)
    pd.testing.assert_frame_equal(stored_results(ref), stored_results(s2))
    q = "SELECT record_id, model_id, label, label_pos FROM discharges ORDER BY seq"
    assert ref._conn.execute(q).fetchall() == s2._conn.execute(q).fetchall()
    assert ref.read(queries.counts)["dead_letters"] == s2.read(queries.counts)["dead_letters"] == 0
