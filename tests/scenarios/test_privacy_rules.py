"""Issue 11: hostile input and patient privacy, rule by rule, on the real pipeline.

Every pipeline test runs :class:`~monitor.stream.pipeline.Pipeline` (or the whole
:class:`~monitor.service.app.MonitorService`) on a real DuckDB file. The end-to-end scan
on a real Kafka broker is tests/scenarios/test_privacy.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from consumers.base import Origin, SinkRetriesExhaustedError
from monitor.audit.run import format_summary, run_audit, write_report
from monitor.cli import error_line, main
from monitor.config import ConfigError, config_from_mapping
from monitor.core.axis1 import evaluate_axis1
from monitor.core.counts import CountTable
from monitor.core.privacy import SMALL_CELL_LABEL
from monitor.publish.cells import published_audit_cell
from monitor.reference.axis1 import reference_axis1
from monitor.service.app import MonitorService
from monitor.store import Store, queries
from monitor.store.migrations import SCHEMA_VERSION
from monitor.stream.pipeline import Pipeline
from monitor.stream.schema import validate_records

NOW = pd.Timestamp("2026-11-30T12:00:00Z")
CLOCK = NOW.timestamp()
GOOD = {
    "record_id": "r1", "model_id": "m1", "event_time": "2026-11-29T00:00:00Z",
    "hospital_id": "h1", "score": 0.7, "label": 1, "race": "3", "sex": "1",
    "ethnicity": "1", "age_group": "2",
}  # fmt: skip


def _cfg(**over):
    base = {
        "window": {"size": 500, "hop_records": 10_000, "hop_seconds": 0},
        "axis1": {"K": 50},
        "models": [{"id": "m1"}, {"id": "m2"}],
        "service": {"evaluation_worker": False},
    }
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) else v
    return config_from_mapping(base)


def _pipe(tmp_path, cfg, name="p.duckdb"):
    store = Store(tmp_path / name, cfg)
    return Pipeline(cfg, store, clock=lambda: CLOCK), store


def _send(pipe, records, start=0, raw=None):
    payloads = raw if raw is not None else [json.dumps(r).encode() for r in records]
    pipe.ingest_batch(payloads, [Origin("t", 0, start + i) for i in range(len(payloads))])


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of a Prometheus exposition (None when absent)."""
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            if smp.name == name and all(smp.labels.get(k) == v for k, v in labels.items()):
                return smp.value
    return None


def _dead(store):
    return store.cursor().execute(
        'SELECT reason, topic, partition, "offset", payload, payload_hmac FROM dead_letters '
        "ORDER BY id"
    ).fetchall()


_fresh = {"n": 0}


def _tmp_db(tmp_path_factory):
    _fresh["n"] += 1
    return tmp_path_factory.mktemp(f"h{_fresh['n']}")


# -------------------------------------------- 1. a bounded set of models
@settings(max_examples=12)
@given(
    ids=st.lists(
        st.sampled_from(["m1", "m2", "x1", "x2", "x3", "x4", "a b", "MRN-1234"]), max_size=40
    ),
    mode=st.sampled_from(["dead-letter", "admit"]),
    cap=st.integers(2, 4),
)
def test_only_registered_or_capped_models_get_state(tmp_path_factory, ids, mode, cap):
    cfg = _cfg(service={"intake": {"unknown_models": mode, "max_models": cap}})
    pipe, store = _pipe(_tmp_db(tmp_path_factory), cfg)
    records = [{**GOOD, "record_id": f"r{i}", "model_id": m} for i, m in enumerate(ids)]
    _send(pipe, records)
    reasons = [r[0] for r in _dead(store)]
    if mode == "dead-letter":
        allowed = {"m1", "m2"}
    else:  # the registry plus new ids in order of appearance, up to the cap
        allowed = {"m1", "m2"}
        for m in ids:
            if m != "a b" and len(allowed) < cap:
                allowed.add(m)
    stored = {m for (m,) in store.cursor().execute(
        "SELECT DISTINCT model_id FROM discharges").fetchall()}  # fmt: skip
    assert stored == {m for m in ids if m in allowed}
    assert set(pipe.owned_models()) == stored and len(pipe.owned_models()) <= max(cap, 2)
    want = sorted(
        "invalid:model_id" if m == "a b"
        else ("unknown_model" if mode == "dead-letter" else "too_many_models")
        for m in ids if m not in allowed
    )  # fmt: skip
    assert sorted(reasons) == want
    store.close()


def test_registry_is_checked_at_start_up():
    with pytest.raises(ConfigError) as e:
        config_from_mapping({"models": [{"id": "a b"}]})
    assert e.value.field == "models.0.id"
    with pytest.raises(ConfigError) as e:
        config_from_mapping({"models": [{"id": "m"}, {"id": "m"}]})
    assert e.value.field == "models"
    with pytest.raises(ConfigError) as e:
        config_from_mapping({"models": [{"id": f"m{i}"} for i in range(3)],
                             "service": {"intake": {"max_models": 2}}})  # fmt: skip
    assert e.value.field == "service.intake.max_models"
    with pytest.raises(ConfigError) as e:
        config_from_mapping({"service": {"intake": {"unknown_models": "maybe"}}})
    assert e.value.field == "service.intake.unknown_models"


# -------------------------------------------- 2. an odd id never reaches the exporter
def test_model_id_with_a_space_is_dead_lettered_and_never_exported(tmp_path):
    cfg = _cfg(service={"intake": {"unknown_models": "admit"}},
               window={"hop_records": 20})  # fmt: skip
    svc = MonitorService(cfg, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                         start_scheduler=False, clock=lambda: CLOCK)  # fmt: skip
    try:
        checked = validate_records([{**GOOD, "model_id": "a b"}], cfg)
        assert [r.reason for r in checked.rejected] == ["invalid:model_id"]
        recs = [{**GOOD, "record_id": f"r{i}", "model_id": "a b"} for i in range(30)]
        recs += [{**GOOD, "record_id": f"g{i}", "model_id": "m1", "sex": str(i % 2)}
                 for i in range(40)]  # fmt: skip
        _send(svc.pipeline, recs)
        assert "a b" not in svc.pipeline.owned_models()
        text = svc.exporter.render().decode()
        assert 'model="m1"' in text and "a b" not in text
        assert _sample(text, "vfr_ingest_rejected_total", reason="invalid:model_id") == 30
    finally:
        svc.close()


def test_one_failing_metrics_update_is_counted_and_the_other_models_still_export(tmp_path):
    """Finding 2: _after_batch applies each item on its own. The rolling-health update of
    one model is made to fail (a fault that valid input cannot cause, so it is injected):
    the failure is counted in vfr_observer_failures_total and the other model's health and
    evaluation counts are still published from the same batch."""
    cfg = _cfg(service={"intake": {"unknown_models": "admit"}}, window={"hop_records": 20})
    svc = MonitorService(cfg, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                         start_scheduler=False, clock=lambda: CLOCK)  # fmt: skip
    real = svc._health

    def health(model, *args):
        if model == "m1":
            raise RuntimeError("injected")
        real(model, *args)

    svc._health = health  # type: ignore[method-assign]
    try:
        recs = [{**GOOD, "record_id": f"{m}-{i}", "model_id": m, "sex": str(i % 2),
                 "label": i % 2} for m in ("m1", "m2") for i in range(40)]  # fmt: skip
        _send(svc.pipeline, recs)
        text = svc.exporter.render().decode()
        assert _sample(text, "vfr_observer_failures_total") == 1
        assert "m2" in svc.health and "m1" not in svc.health
        assert _sample(text, "vfr_evaluations_total", model="m1") == 2  # other items went on
        assert _sample(text, "vfr_evaluations_total", model="m2") == 2
    finally:
        svc.close()


# -------------------------------------------- 3. small cells withheld everywhere
def test_api_withholds_cells_windows_and_events_of_small_windows(tmp_path):
    cfg = _cfg(window={"hop_records": 5}, confirm_windows=1)
    svc = MonitorService(cfg, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                         start_scheduler=False, clock=lambda: CLOCK)  # fmt: skip
    try:
        recs = [{**GOOD, "record_id": f"r{i}", "sex": str(i % 2), "score": 0.123456789,
                 "label": i % 2} for i in range(10)]  # fmt: skip
        _send(svc.pipeline, recs)
        cells = svc.cells()
        assert cells and all(c["value"] == SMALL_CELL_LABEL for c in cells)
        assert all(c["window_n"] == SMALL_CELL_LABEL and c["tier"] == SMALL_CELL_LABEL
                   for c in cells)  # fmt: skip
        assert {c["metric"] for c in cells} == {r.name for r in cfg.metrics}  # identity stays
        rows = svc.windows("m1", "DI", "sex", 10)
        assert rows and all(r["value"] == SMALL_CELL_LABEL for r in rows)
        text = json.dumps([cells, rows])
        assert "0.123456789" not in text and "0.12345" not in text
        # 11 records: shown
        _send(svc.pipeline, [{**GOOD, "record_id": f"s{i}", "sex": str(i % 2)}
                             for i in range(5)], start=10)  # fmt: skip
        assert all(c["window_n"] == 15 for c in svc.cells())
    finally:
        svc.close()


def test_api_events_are_withheld_unless_their_window_had_11_records(tmp_path):
    """A verdict flip at a window of 80 records is shown; the same event whose evaluation's
    window size cannot be found (results past retention) is withheld. (With
    min_group_support >= 11, a window of fewer than 11 records has no defined metric, so
    no verdict flip can come from one.)"""
    cfg = _cfg(window={"hop_records": 40}, confirm_windows=1)
    svc = MonitorService(cfg, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                         start_scheduler=False, clock=lambda: CLOCK)  # fmt: skip
    try:
        _send(svc.pipeline, [{**GOOD, "record_id": f"a{i}", "sex": str(i % 2)}
                             for i in range(40)])  # fmt: skip
        _send(svc.pipeline, [{**GOOD, "record_id": f"b{i}", "sex": "1", "score": 0.1}
                             for i in range(40)], start=40)  # fmt: skip
        events = [e for e in svc.events(100, None) if e["kind"] == "verdict_flip"]
        assert events and all(e["new"] == "fail" and isinstance(e["axes"], dict)
                              for e in events)  # fmt: skip
        svc.store.cursor().execute("DELETE FROM window_results WHERE evaluation = 2")
        hidden = [e for e in svc.events(100, None) if e["kind"] == "verdict_flip"]
        assert hidden and all(e["new"] == SMALL_CELL_LABEL and e["axes"] == SMALL_CELL_LABEL
                              for e in hidden)  # fmt: skip
        assert {e["metric"] for e in hidden} == {e["metric"] for e in events}
    finally:
        svc.close()


def test_min_group_support_below_11_is_refused_naming_the_field():
    with pytest.raises(ConfigError) as e:
        config_from_mapping({"axis1": {"min_group_support": 10}})
    assert e.value.field == "axis1.min_group_support"


def test_mppd_withholds_a_group_of_fewer_than_11_records_with_many_pairs():
    from batch_axes.runner import run_equilense
    from monitor.core.tables import tables_from_frame

    cfg = config_from_mapping({"equilense": {"features": ["x"], "threshold": 0.5,
                                             "min_pairs": 1}})  # fmt: skip
    n = 200
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "model_id": "m", "score": rng.uniform(size=n), "label": rng.integers(0, 2, n),
        "decision": rng.integers(0, 2, n), "race": ["0"] * 5 + ["3"] * (n - 5),
        "sex": ["0", "1"] * (n // 2), "ethnicity": "1", "age_group": "2",
    })  # fmt: skip
    features = rng.uniform(size=(n, 1))  # wide threshold: the 5-record group has 780 pairs
    out = run_equilense(frame, features, ("x",), tables_from_frame(frame, cfg), cfg).to_dict()
    race = out["models"]["m"]["mppd"]["race"]
    small = next(e for e in race["reference"]["groups"] if e["group"] == "0")
    assert small["mean"] is None and small["pairs"] == SMALL_CELL_LABEL
    pw = race["pairwise"]
    i = pw["groups"].index("0")
    assert all(m is None for m in pw["means"][i]) and all(row[i] is None for row in pw["means"])
    assert race["reference"]["disparity"] is None  # one group left shown
    gm = [g for g in out["group_metrics"] if g["attribute"] == "race"]
    assert all(g["by_group"]["0"] is None and g["group_n"]["0"] == SMALL_CELL_LABEL for g in gm)


def test_audit_files_and_summary_withhold_a_model_of_fewer_than_11_records(tmp_path):
    rng = np.random.default_rng(1)
    rows = []
    for m, n in (("big", 300), ("tiny", 8)):
        for i in range(n):
            rows.append({"record_id": i, "model_id": m, "score": round(rng.uniform(), 3),
                         "label": int(rng.integers(0, 2)), "race": int(rng.integers(0, 5)),
                         "sex": i % 2, "ethnicity": 1, "age_group": 2})  # fmt: skip
    path = tmp_path / "in.csv"
    pd.DataFrame(rows).to_csv(path, index=False)  # record_id is a numeric column (finding 10)
    cfg = config_from_mapping({"axis1": {"K": 30}, "axis2": {"sizes": [50, 100], "R": 3}})
    report = run_audit(path, cfg)
    tiny = [published_audit_cell(c) for c in report.cells if c.model_id == "tiny"]
    assert tiny and all(c["value"] == SMALL_CELL_LABEL and c["cohort_n"] == SMALL_CELL_LABEL
                        for c in tiny)  # fmt: skip
    big = [published_audit_cell(c) for c in report.cells if c.model_id == "big"]
    assert all(c["cohort_n"] == 300 for c in big)
    paths = write_report(report, tmp_path / "out")
    text = paths["cells_csv"].read_text()
    assert "tiny" in text and ",8," not in text
    summary = format_summary(report)
    assert "tiny" in summary and SMALL_CELL_LABEL in summary


# -------------------------------------------- 4. conflicting duplicates
@settings(max_examples=12)
@given(
    plan=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from(["same", "score", "label", "race"])),
        min_size=1, max_size=25,
    ),
    split=st.integers(1, 25),
)
def test_identical_redelivery_is_silent_and_a_different_one_is_dead_lettered(
    tmp_path_factory, plan, split
):
    cfg = _cfg()
    pipe, store = _pipe(_tmp_db(tmp_path_factory), cfg)
    first: dict[int, dict] = {}
    sent = []
    for k, change in plan:
        rec = {**GOOD, "record_id": f"r{k}", "score": 0.1 + k / 10}
        if k in first and change != "same":
            rec = {**first[k], change: {"score": 0.99, "label": 0, "race": "0"}[change]}
        first.setdefault(k, rec)
        sent.append(rec)
    _send(pipe, sent[:split])
    _send(pipe, sent[split:], start=split)
    stored = dict(store.cursor().execute("SELECT record_id, score FROM discharges").fetchall())
    assert stored == {f"r{k}": first[k]["score"] for k in first}  # the first copy is kept
    conflicts = sum(1 for r in sent if r != first[int(r["record_id"][1:])])
    reasons = [r[0] for r in _dead(store)]
    assert reasons.count("conflicting_duplicate") == conflicts
    assert len(reasons) == conflicts  # identical redeliveries leave no trace
    store.close()


def test_conflicts_and_duplicates_are_both_counted(tmp_path):
    svc = MonitorService(_cfg(), db_path=str(tmp_path / "s.duckdb"), http_port=0,
                         start_scheduler=False, clock=lambda: CLOCK)  # fmt: skip
    try:
        _send(svc.pipeline, [GOOD])
        _send(svc.pipeline, [GOOD, {**GOOD, "score": 0.2}], start=1)
        text = svc.exporter.render().decode()
        assert _sample(text, "vfr_ingest_records_total", state="duplicate") == 1
        assert _sample(text, "vfr_ingest_rejected_total", reason="conflicting_duplicate") == 1
    finally:
        svc.close()


def test_store_migrates_a_v4_file_and_keeps_comparing(tmp_path):
    db = tmp_path / "old.duckdb"
    cfg = _cfg()
    Store(db, cfg).close()
    with duckdb.connect(str(db)) as c:  # pretend the record was written before v5
        c.execute("DELETE FROM schema_migrations WHERE version = 5")
    pipe, store = _pipe(tmp_path, cfg, "old.duckdb")
    assert store.schema_version() == SCHEMA_VERSION  # v5 applied again, and later ones
    _send(pipe, [GOOD])
    _send(pipe, [{**GOOD, "score": 0.2}], start=1)
    assert [r[0] for r in _dead(store)] == ["conflicting_duplicate"]


# -------------------------------------------- 5. dead letters not duplicated
def test_a_redelivered_dead_letter_is_stored_once(tmp_path):
    pipe, store = _pipe(tmp_path, _cfg())
    reports = []
    pipe.on_batch = reports.append
    batch = [b"{not json", json.dumps({**GOOD, "score": 2}).encode(), json.dumps(GOOD).encode()]
    for _ in range(3):  # the same offsets three times
        _send(pipe, None, raw=batch)
    assert sorted(r[0] for r in _dead(store)) == ["invalid_json", "out_of_range:score"]
    # ... and counted once: the rejection counters (vfr_ingest_rejected_total) follow the
    # stored dead letters, not the deliveries
    assert [r.rejected for r in reports] == [
        {"invalid_json": 1, "out_of_range:score": 1}, {}, {}
    ]
    # another payload at a used position (a different replayed file) is a new dead letter
    _send(pipe, None, raw=[b"{other"])
    assert len(_dead(store)) == 3


# -------------------------------------------- 6. event-time bounds
@settings(max_examples=20)
@given(offset_s=st.one_of(
    st.floats(-500 * 86_400, 2 * 86_400, allow_nan=False),
    st.sampled_from([-400 * 86_400 - 1, -400 * 86_400 + 1, 299, 301]),
))
def test_event_time_outside_the_wall_clock_bounds_is_dead_lettered(tmp_path_factory, offset_s):
    pipe, store = _pipe(_tmp_db(tmp_path_factory), _cfg())
    t = NOW + pd.Timedelta(seconds=offset_s)
    _send(pipe, [{**GOOD, "event_time": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}])
    inside = -400 * 86_400 <= offset_s <= 300
    reasons = [r[0] for r in _dead(store)]
    assert reasons == ([] if inside else ["out_of_range:event_time"])
    assert store.read(queries.counts)["discharges"] == int(inside)
    store.close()


def test_years_1700_and_9999_are_dead_lettered_by_default(tmp_path):
    pipe, store = _pipe(tmp_path, _cfg())
    _send(pipe, [{**GOOD, "event_time": "1700-01-01T00:00:00Z"},
                 {**GOOD, "record_id": "r2", "event_time": "9999-12-31T00:00:00Z"}])  # fmt: skip
    assert [r[0] for r in _dead(store)] == ["out_of_range:event_time"] * 2


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z",
                                  "1677-01-01T00:00:00Z", "2263-01-01T00:00:00Z"])
def test_unrepresentable_times_are_refused_even_without_bounds(tmp_path, when):
    pipe, store = _pipe(tmp_path, _cfg(service={"intake": {"event_time_bounds": "none"}}))
    _send(pipe, [{**GOOD, "event_time": when}, {**GOOD, "record_id": "old",
                                                 "event_time": "1990-01-01T00:00:00Z"}])
    assert [r[0] for r in _dead(store)] == ["out_of_range:event_time"]
    assert store.read(queries.counts)["discharges"] == 1  # 1990: accepted with the bounds off


# -------------------------------------------- 7. what dead letters keep
def test_dead_letters_keep_a_keyed_hash_not_the_payload(tmp_path, monkeypatch):
    monkeypatch.delenv("VFR_PAYLOAD_HASH_KEY", raising=False)
    key = "ab" * 32
    pipe, store = _pipe(tmp_path, _cfg(service={"dead_letters": {"payload_hash_key": key}}))
    bad = json.dumps({**GOOD, "score": "Jane Doe MRN 555"}).encode()
    _send(pipe, None, raw=[bad])
    (reason, topic, part, off, payload, digest), = _dead(store)
    assert (reason, topic, part, off, payload) == ("wrong_type:score", "t", 0, 0, None)
    assert digest == hmac.new(bytes.fromhex(key), bad, hashlib.sha256).hexdigest()
    # kept only when configured
    kept = _cfg(service={"dead_letters": {"keep_payloads": True}})
    pipe2, store2 = _pipe(tmp_path, kept, "k.duckdb")
    _send(pipe2, None, raw=[bad])
    assert _dead(store2)[0][4] == bad


def test_generated_key_is_kept_in_the_file_and_env_key_wins(tmp_path, monkeypatch):
    monkeypatch.delenv("VFR_PAYLOAD_HASH_KEY", raising=False)
    cfg = _cfg()
    s = Store(tmp_path / "a.duckdb", cfg)
    h1 = s.payload_hmac(b"x")
    s.close()
    s = Store(tmp_path / "a.duckdb", cfg)
    assert s.payload_hmac(b"x") == h1  # same key after a restart
    s.close()
    monkeypatch.setenv("VFR_PAYLOAD_HASH_KEY", "cd" * 32)
    s = Store(tmp_path / "a.duckdb", cfg)
    assert s.payload_hmac(b"x") == hmac.new(b"\xcd" * 32, b"x", hashlib.sha256).hexdigest()
    s.close()


def test_db_file_and_new_directory_are_private(tmp_path):
    path = tmp_path / "new" / "dir" / "v.duckdb"
    s = Store(path, _cfg())
    s.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


def test_dead_letters_are_kept_no_longer_than_discharges(tmp_path):
    cfg = _cfg(service={"retention": {"discharge_days": 400, "result_days": 730}})
    pipe, store = _pipe(tmp_path, cfg)
    _send(pipe, None, raw=[b"{bad"])
    out = store.apply_retention(NOW + pd.Timedelta(days=401), 400, 730)
    assert out["dead_letters"] == 1 and _dead(store) == []


def test_unconfigured_feature_keys_are_dropped(tmp_path):
    pipe, store = _pipe(tmp_path, _cfg(equilense={"features": ["age"]}))
    _send(pipe, [{**GOOD, "features": {"age": 70.0, "zip_code": 90210.0}},
                 {**GOOD, "record_id": "r2", "features": {"zip_code": 1.0}}])  # fmt: skip
    got = [r[0] for r in store.cursor().execute(
        "SELECT features::VARCHAR FROM discharges ORDER BY seq").fetchall()]  # fmt: skip
    assert [None if x is None else json.loads(x) for x in got] == [{"age": 70.0}, None]


# -------------------------------------------- 8. config cross-references
@pytest.mark.parametrize(
    "per_group, models, field",
    [
        ({"m1": {"rase": {"2": 0.4}}}, [], "decision.per_group.m1.rase"),
        ({"m1": {"race": {"9": 0.4}}}, [], "decision.per_group.m1.race"),
        ({"mX": {"race": {"2": 0.4}}}, [{"id": "m1"}], "decision.per_group.mX"),
    ],
)
def test_per_group_typos_fail_at_start_up_naming_the_field(per_group, models, field):
    with pytest.raises(ConfigError) as e:
        config_from_mapping({"decision": {"per_group": per_group}, "models": models})
    assert e.value.field == field


# -------------------------------------------- 9. booleans: one rule
@settings(max_examples=12)
@given(
    kinds=st.lists(st.sampled_from(["int", "bool", "float"]), min_size=1, max_size=12),
    field=st.sampled_from(["label", "decision"]),
)
def test_booleans_are_refused_whatever_the_batch(tmp_path_factory, kinds, field):
    pipe, store = _pipe(_tmp_db(tmp_path_factory), _cfg())
    value = {"int": 1, "bool": True, "float": 1.0}
    recs = [{**GOOD, "record_id": f"r{i}", field: value[k]} for i, k in enumerate(kinds)]
    _send(pipe, recs)
    assert [r[0] for r in _dead(store)] == [f"wrong_type:{field}"] * kinds.count("bool")
    assert store.read(queries.counts)["discharges"] == len(kinds) - kinds.count("bool")
    store.close()


# -------------------------------------------- 11. old events counted once
def test_old_events_counter_counts_each_old_record_once(tmp_path):
    cfg = _cfg(window={"kind": "time", "days": 2.0, "hop_records": 10})
    svc = MonitorService(cfg, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                         start_scheduler=False, clock=lambda: CLOCK)  # fmt: skip
    try:
        recent = [{**GOOD, "record_id": f"a{i}", "sex": str(i % 2)} for i in range(10)]
        old = [{**GOOD, "record_id": f"o{i}", "event_time": "2026-11-01T00:00:00Z"}
               for i in range(3)]  # fmt: skip
        more = [{**GOOD, "record_id": f"b{i}", "sex": str(i % 2)} for i in range(7)]
        _send(svc.pipeline, recent)
        _send(svc.pipeline, old + more, start=10)
        _send(svc.pipeline, [{**GOOD, "record_id": f"c{i}"} for i in range(10)], start=20)
        assert svc.pipeline.model_view("m1").old_events == 3
        text = svc.exporter.render().decode()
        assert _sample(text, "vfr_old_events_total", model="m1") == 3
    finally:
        svc.close()


# -------------------------------------------- 12. CLI error lines
def test_cli_prints_type_and_own_message_never_a_quoted_value(tmp_path, capsys):
    # a real DuckDB error quoting a value, chained under our own exception
    try:
        try:
            duckdb.connect().execute("SELECT CAST('MRN-5550123' AS INTEGER)")
        except duckdb.Error as exc:
            assert "MRN-5550123" in str(exc)
            raise SinkRetriesExhaustedError("sink failed 3 times in a row") from exc
    except SinkRetriesExhaustedError as exc:
        line = error_line(exc)
    assert line == "SinkRetriesExhaustedError: sink failed 3 times in a row"
    # the whole CLI path: a database file that is not one, named like a patient id
    db = tmp_path / "MRN-5550123.duckdb"
    db.write_text("MRN-5550123 Jane Doe")
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps(GOOD) + "\n")
    code = main(["run", "--db", str(db), "--input", str(inp), "--port", "0", "--no-scheduler"])
    err = capsys.readouterr().err
    assert code == 1 and "MRN-5550123" not in err and "Jane" not in err
    assert err.startswith("vfr-monitor: error: ") and "Exception" in err


# -------------------------------------------- 13. support on denominators
def _eicu_like():
    """The eICU demo case: a group of 24 stays with 2 deaths beside two large groups."""
    rng = np.random.default_rng(7)
    sizes = {0: 24, 1: 600, 2: 500}
    g = np.concatenate([np.full(n, k) for k, n in sizes.items()])
    y = np.concatenate([np.r_[np.ones(2), np.zeros(22)],
                        (rng.uniform(size=600) < 0.3), (rng.uniform(size=500) < 0.3)]).astype(int)
    d = np.where(g == 0, y, (rng.uniform(size=len(g)) < 0.2 + 0.5 * y)).astype(int)
    s = np.clip(0.5 * d + rng.uniform(0, 0.5, len(g)), 0, 1)
    return ("a", "b", "c"), g, y, d, s


def test_a_rate_from_2_records_does_not_enter_the_metric():
    groups, g, y, d, s = _eicu_like()
    table = CountTable.from_records(groups, g, y, d, s)
    rules = [r for r in _cfg().metrics if r.name in ("EOPP", "DI")]
    fast = {c.metric: c for c in evaluate_axis1({("m", "race"): table}, rules, K=200, N=10_000,
                                                min_group_support=20, seed=3)}  # fmt: skip
    ref = {c.metric: c for c in reference_axis1("m", "race", groups, g, y, d, s, rules, K=50,
                                                min_group_support=20,
                                                rng=np.random.default_rng(4))}  # fmt: skip
    # group a has 24 records (enters DI) but 2 positives (TPR from 2 records: left out)
    tpr = [d[(g == k) & (y == 1)].mean() for k in (1, 2)]
    assert fast["EOPP"].value == pytest.approx(abs(tpr[0] - tpr[1]), abs=1e-12)
    assert fast["EOPP"].value == pytest.approx(ref["EOPP"].value, abs=1e-12)
    positives = sorted(int(((g == k) & (y == 1)).sum()) for k in (1, 2))
    assert fast["EOPP"].min_denominator == ref["EOPP"].min_denominator == positives[0]
    assert fast["DI"].min_denominator == ref["DI"].min_denominator == 24
    # the papers' rule (a group enters with any positive): the 2-record TPR of 1.0 enters
    papers = evaluate_axis1({("m", "race"): table}, rules, K=50, N=10_000,
                            min_group_support=1, seed=3)  # fmt: skip
    eopp = next(c for c in papers if c.metric == "EOPP")
    assert eopp.value > fast["EOPP"].value + 0.2 and eopp.min_denominator == 2
