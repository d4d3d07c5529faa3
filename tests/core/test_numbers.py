"""The one decoder of numbers read back from JSON, the store and the audit files."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.core.jsonable import to_jsonable
from monitor.core.numbers import as_float, float_or_none
from monitor.publish.rule import SMALL_CELL_LABEL


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_a_number_survives_json_and_back(x: float) -> None:
    """What `to_jsonable` writes, `float_or_none` reads back as the same number; NaN
    (undefined) comes back as None, the infinities keep their meaning."""
    back = float_or_none(json.loads(json.dumps(to_jsonable(x))))
    if math.isnan(x):
        assert back is None
    else:
        assert back == x


@given(st.text())
def test_a_string_that_is_no_number_is_none_never_an_error(s: str) -> None:
    try:
        expected: float | None = float(s)
    except ValueError:
        expected = None
    if expected is not None and math.isnan(expected):
        expected = None
    assert float_or_none(s) == expected


def test_withheld_counts_booleans_and_missing_values_carry_no_number() -> None:
    assert float_or_none(SMALL_CELL_LABEL) is None
    assert float_or_none(True) is None and float_or_none(None) is None
    assert float_or_none("-inf") == -math.inf and float_or_none("Infinity") == math.inf


def test_as_float_keeps_nan_for_missing_and_refuses_garbage() -> None:
    assert math.isnan(as_float(None)) and as_float("inf") == math.inf
    with pytest.raises(ValueError):
        as_float(SMALL_CELL_LABEL)
