"""The wire encoder of scored discharges (consumers.encoding): what each kind of value
becomes, read back with the standard library's strict parser (no NaN, no Infinity)."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumers.encoding import encode_record


def strict(payload: bytes) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(payload, parse_constant=refuse)


def test_compact_ascii_and_plain_values_unchanged():
    payload = encode_record({"record_id": "r-é", "n": 3, "ok": True, "none": None})
    assert payload == b'{"record_id":"r-\\u00e9","n":3,"ok":true,"none":null}'
    assert strict(payload)["record_id"] == "r-é"


def test_missing_values_are_omitted_as_an_empty_csv_cell_would_be():
    record = {"a": float("nan"), "b": np.float32("nan"), "c": pd.NaT, "d": pd.NA,
              "e": np.datetime64("NaT"), "f": np.timedelta64("NaT"), "keep": 1.5}  # fmt: skip
    assert strict(encode_record(record)) == {"keep": 1.5}


def test_datetimes_are_rfc3339_and_naive_means_utc():
    record = {
        "naive": dt.datetime(2026, 11, 1, 8, 30),
        "aware": dt.datetime(2026, 11, 1, 8, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        "pandas": pd.Timestamp("2026-11-01T08:30:00Z"),
        "day": dt.date(2026, 11, 1),
        "numpy": np.datetime64("2026-11-01T08:30:00"),
    }
    assert strict(encode_record(record)) == {
        "naive": "2026-11-01T08:30:00Z",
        "aware": "2026-11-01T08:30:00+02:00",
        "pandas": "2026-11-01T08:30:00+00:00",
        "day": "2026-11-01",
        "numpy": "2026-11-01T08:30:00.000000Z",
    }
    for text in strict(encode_record(record)).values():
        assert pd.Timestamp(text).tzinfo is not None or len(text) == 10


def test_numpy_scalars_arrays_and_decimals_become_plain_json():
    record = {"i": np.int64(7), "f": np.float64(0.25), "b": np.bool_(True),
              "arr": np.array([1, 2]), "dec": decimal.Decimal("0.5"),
              "inf": np.float64("inf"), "ninf": np.float32("-inf")}  # fmt: skip
    assert strict(encode_record(record)) == {
        "i": 7, "f": 0.25, "b": True, "arr": [1, 2], "dec": 0.5, "inf": None, "ninf": None,
    }  # fmt: skip


def test_an_infinite_top_level_number_is_null_never_an_infinity_token():
    """Found by the round trip below: a top-level inf (a Python or np.float64 score) was
    written as the token ``Infinity``, which the service refuses as invalid JSON."""
    assert encode_record({"score": float("inf"), "x": float("-inf")}) == b'{"score":null,"x":null}'


def test_nested_non_finite_floats_become_null():
    record = {"features": {"x": float("inf"), "y": [1.0, float("nan"), (float("-inf"),)]}}
    assert strict(encode_record(record)) == {"features": {"x": None, "y": [1.0, None, [None]]}}


def test_an_unknown_type_is_refused_by_name():
    with pytest.raises(TypeError, match="not JSON serialisable: object"):
        encode_record({"x": object()})


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=5),
    st.floats(allow_nan=True, allow_infinity=True),
)  # fmt: skip


@given(st.dictionaries(st.text(max_size=5), scalars, max_size=6))
def test_any_record_of_scalars_round_trips_as_standard_json(record):
    back = strict(encode_record(record))
    expected = {
        k: (None if isinstance(v, float) and np.isinf(v) else v)
        for k, v in record.items()
        if not (isinstance(v, float) and np.isnan(v))
    }
    assert back == expected
