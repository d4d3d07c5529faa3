"""Scored-discharge validation: every bad record is rejected with a reason, none crash."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.config import MonitorConfig, config_from_mapping
from monitor.stream.schema import validate_frame, validate_record, validate_records

CFG = MonitorConfig()
GOOD = {
    "record_id": "r-1",
    "model_id": "los-xgb-v3",
    "event_time": "2026-03-01T12:00:00+01:00",
    "hospital_id": "h-17",
    "score": 0.62,
    "label": 1,
    "race": "3",
    "sex": "1",
    "ethnicity": "0",
    "age_group": "2",
    "schema_version": 1,
    "features": {"age": 61.0, "n_dx": 9},
}


def test_good_record_is_typed_and_decision_derived():
    rec, reason = validate_record(GOOD, CFG)
    assert reason is None
    assert rec["decision"] == 1 and rec["label"] == 1
    assert rec["event_time"] == pd.Timestamp("2026-03-01T11:00:00Z")
    given_decision, _ = validate_record({**GOOD, "decision": 0}, CFG)
    assert given_decision["decision"] == 0  # a deployed decision wins over the threshold


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"score": 1.01}, "out_of_range:score"),
        ({"score": -0.1}, "out_of_range:score"),
        ({"score": float("nan")}, "missing:score"),  # NaN is no value, like an empty CSV cell
        ({"score": "0.5"}, "wrong_type:score"),
        ({"score": True}, "wrong_type:score"),
        ({"score": None}, "missing:score"),
        ({"label": 2}, "out_of_range:label"),
        ({"label": "1"}, "out_of_range:label"),
        ({"decision": 3}, "out_of_range:decision"),
        ({"race": "9"}, "unknown_code:race"),
        ({"race": 3.5}, "unknown_code:race"),
        ({"sex": None}, "missing:sex"),
        ({"record_id": ""}, "wrong_type:record_id"),
        ({"record_id": 17}, "wrong_type:record_id"),
        ({"model_id": "x" * 300}, "wrong_type:model_id"),
        ({"event_time": "2026-03-01"}, "invalid:event_time"),
        ({"event_time": "2026-03-01T12:00:00"}, "invalid:event_time"),  # no offset: not RFC 3339
        ({"event_time": "yesterday Z"}, "invalid:event_time"),
        ({"event_time": 1700000000}, "wrong_type:event_time"),
        ({"hospital_id": 5}, "wrong_type:hospital_id"),
        ({"features": {"age": "old"}}, "wrong_type:features"),
        ({"features": [1, 2]}, "wrong_type:features"),
        ({"features": {"x": float("inf")}}, "wrong_type:features"),
        ({"schema_version": 2}, "unsupported:schema_version"),
        ({"surname": "Doe"}, "unexpected_field"),
    ],
)
def test_bad_records_get_reasons(change, reason):
    rec, why = validate_record({**GOOD, **change}, CFG)
    assert rec is None and why == reason


def test_missing_field_and_non_objects():
    rec = dict(GOOD)
    del rec["label"]
    assert validate_record(rec, CFG) == (None, "missing:label")
    assert validate_record("not json object", CFG) == (None, "not_an_object")
    assert validate_record(None, CFG) == (None, "not_an_object")


def test_reasons_never_carry_values():
    res = validate_records([{**GOOD, "race": "SECRET-VALUE", "score": 77.0}], CFG)
    assert "SECRET" not in res.rejected[0].reason and "77" not in res.rejected[0].reason


def test_hospital_id_may_be_absent():
    rec = dict(GOOD)
    del rec["hospital_id"]
    ok, reason = validate_record(rec, CFG)
    assert reason is None and ok["hospital_id"] is None


def test_batch_keeps_positions_and_loses_nothing():
    batch = [GOOD, {**GOOD, "score": 9}, "junk", {**GOOD, "record_id": "r-2"}]
    res = validate_records(batch, CFG)
    assert res.valid["position"].tolist() == [0, 3]
    assert [(r.index, r.reason) for r in res.rejected] == [
        (1, "out_of_range:score"),
        (2, "not_an_object"),
    ]
    assert len(res.valid) + len(res.rejected) == len(batch)
    assert res.reason_counts() == {"out_of_range:score": 1, "not_an_object": 1}


def test_per_group_thresholds():
    cfg = config_from_mapping(
        {"decision": {"threshold": 0.5, "per_group": {"m": {"race": {"2": 0.3}}}}}
    )
    a, _ = validate_record({**GOOD, "model_id": "m", "race": "2", "score": 0.35}, cfg)
    b, _ = validate_record({**GOOD, "model_id": "m", "race": "3", "score": 0.35}, cfg)
    c, _ = validate_record({**GOOD, "model_id": "other", "race": "2", "score": 0.35}, cfg)
    assert (a["decision"], b["decision"], c["decision"]) == (1, 0, 0)


def test_frame_path_accepts_csv_style_columns():
    frame = pd.DataFrame(
        {
            "record_id": ["a", "b", "c"],
            "model_id": "m",
            "event_time": pd.to_datetime(["2026-01-01"] * 3, utc=True),
            "score": [0.2, 0.9, 1.2],
            "label": [0, 1, 1],
            "race": [3, 2, 7],
            "sex": [0, 1, 1],
            "ethnicity": [1, 1, 1],
            "age_group": [2, 2, 2],
        }
    )
    res = validate_frame(frame, CFG)
    assert res.valid["record_id"].tolist() == ["a", "b"]
    assert res.valid["race"].tolist() == ["3", "2"]  # integer codes read as the configured strings
    # the first fault in field order is reported: score is checked before the attributes
    assert [(r.index, r.reason) for r in res.rejected] == [(2, "out_of_range:score")]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    st.lists(st.one_of(_json, st.dictionaries(st.sampled_from(sorted(GOOD)), _json)), max_size=8)
)
def test_arbitrary_json_never_crashes_and_accounts_for_every_record(batch):
    res = validate_records(batch, CFG)
    assert len(res.valid) + len(res.rejected) == len(batch)
    assert all(
        (isinstance(r.reason, str) and ":" in r.reason)
        or r.reason in ("not_an_object", "unexpected_field")
        for r in res.rejected
    )
    assert np.all(np.isfinite(res.valid["score"])) if len(res.valid) else True
    for s in res.valid["score"]:
        assert 0 <= s <= 1 and not math.isnan(s)


# Columns whose values are all ``str`` take C-level fast paths; one value of another type
# sends the whole column through the per-value checks. The slow path is the oracle.
_STR_VARIANTS = {
    "record_id": st.sampled_from(["r-1", "", "x" * 256, "x" * 257, "é"]),
    "model_id": st.sampled_from(["m", "", "y" * 300]),
    "event_time": st.sampled_from(
        [
            "2026-03-01T12:00:00Z",
            "2026-03-01T12:00:00+01:00",
            "2026-03-01",
            "noon Z",
            "2026-03-01T12:00:00",
            "2026-13-01T00:00:00Z",
        ]
    ),
    "hospital_id": st.sampled_from(["h-1", "", "z" * 257]),
    "race": st.sampled_from(["0", "3", "9", "", " 3"]),
    "sex": st.sampled_from(["0", "1", "2"]),
}
#: every string column of this record has another type: the batch takes the slow paths
_FORCE_SLOW = {
    **GOOD, "record_id": 17, "model_id": 17, "event_time": 1_700_000_000, "hospital_id": 5,
    "race": 3.5, "sex": 1.0, "ethnicity": 0.0, "age_group": 2.0, "features": [1],
}  # fmt: skip


@given(st.lists(st.fixed_dictionaries({}, optional=_STR_VARIANTS), min_size=1, max_size=12))
def test_string_fast_paths_give_the_per_value_verdicts(changes):
    batch = [{**GOOD, **c} for c in changes]
    fast = validate_records(batch, CFG)
    slow = validate_records([*batch, _FORCE_SLOW], CFG)
    n = len(batch)
    assert [(r.index, r.reason) for r in fast.rejected] == [
        (r.index, r.reason) for r in slow.rejected if r.index < n
    ]
    assert [r.reason for r in slow.rejected if r.index == n] == ["wrong_type:record_id"]
    pd.testing.assert_frame_equal(
        fast.valid.reset_index(drop=True),
        slow.valid[slow.valid["position"] < n].reset_index(drop=True),
        check_dtype=False,
    )
