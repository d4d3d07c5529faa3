"""Strict JSON for everything the service writes or serves (monitor.core.jsonable): what each
kind of value becomes, and that no output holds a NaN or Infinity token (read back with a
parser that refuses them). tests/core/test_numbers.py checks the numbers' way back."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from monitor.core.jsonable import dumps, to_json, to_jsonable


def strict(text: str | bytes):
    def refuse(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


class Colour(enum.Enum):
    RED = "red"
    NAN = float("nan")


def test_each_kind_of_value():
    assert to_jsonable(float("nan")) is None
    assert to_jsonable([math.inf, -math.inf]) == ["inf", "-inf"]
    assert to_jsonable(np.float32("inf")) == "inf" and to_jsonable(np.float64("nan")) is None
    assert to_jsonable(np.int64(3)) == 3 and type(to_jsonable(np.int64(3))) is int
    assert to_jsonable(np.bool_(True)) is True
    assert to_jsonable(np.array([[1.5, np.nan]])) == [[1.5, None]]
    assert to_jsonable(Colour.RED) == "red" and to_jsonable(Colour.NAN) is None
    assert to_jsonable({1: "a", ("x",): math.inf}) == {"1": "a", "('x',)": "inf"}
    assert to_jsonable(OrderedDict(b=np.float64(0.5))) == {"b": 0.5}
    assert sorted(to_jsonable({3, 1})) == [1, 3] and to_jsonable(frozenset()) == []
    assert to_jsonable((1, (2,))) == [1, [2]]
    assert to_jsonable(object) == "<class 'object'>"  # anything else: its text


def test_dumps_is_compact_bytes_and_to_json_is_text():
    value = {"n_star": math.inf, "sigma": float("nan"), "k": [1, 2]}
    assert dumps(value) == b'{"n_star":"inf","sigma":null,"k":[1,2]}'
    assert to_json(value) == '{"n_star": "inf", "sigma": null, "k": [1, 2]}'


json_like = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.text(max_size=4),
        st.floats(allow_nan=True, allow_infinity=True),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


def _expected(v):
    if isinstance(v, float):
        if math.isnan(v):
            return None
        return "inf" if v == math.inf else "-inf" if v == -math.inf else v
    if isinstance(v, dict):
        return {k: _expected(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_expected(x) for x in v]
    return v


@given(json_like)
def test_any_value_is_standard_json_and_keeps_its_meaning(value):
    assert strict(dumps(value)) == _expected(value)
    assert strict(to_json(value)) == _expected(value)
