"""The scheduled axes' results through the store's JSON and back (monitor.stream.axis_payloads):
real Axis 2, Axis 3 and EquiLense results of a small seeded cohort, written as the store
writes them (strict JSON) and read back typed, equal to what was computed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from batch_axes.axis3 import Axis3Result
from batch_axes.equilense import EquiLenseResult
from batch_axes.runner import run_axis2, run_axis3, run_equilense
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.core.jsonable import to_json
from monitor.core.tables import tables_from_frame
from monitor.stream.axis_payloads import axis_payload, axis_result, axis_results

CFG = config_from_mapping({
    "axis2": {"sizes": [200, 400], "R": 6}, "axis3": {"folds": 4},
    "equilense": {"features": ["x"], "threshold": 0.5, "min_pairs": 1},
})  # fmt: skip


@pytest.fixture(scope="module")
def cohort() -> pd.DataFrame:
    return synthetic_window(1200, models=1, seed=9).reset_index(drop=True)


def stored(payload) -> object:
    """What the store's JSON column gives back."""
    return json.loads(to_json(payload))


def test_axis2_cells_round_trip(cohort):
    cells = tuple(run_axis2(tables_from_frame(cohort, CFG), CFG))
    assert len(cells) == len(CFG.metrics) * len(CFG.grid_attributes)
    payload = axis_payload(cells)
    assert isinstance(payload, list) and len(payload) == len(cells)
    back = axis_result("axis2", stored(payload))
    assert repr(back) == repr(cells)  # repr: a NaN curve point is not equal to itself


def test_axis3_result_round_trips(cohort):
    result = run_axis3("model-00", cohort, CFG)
    assert result.cells and result.n_records == len(cohort)
    back = axis_result("axis3", stored(axis_payload(result)))
    assert isinstance(back, Axis3Result) and repr(back) == repr(result)


def test_equilense_result_round_trips(cohort):
    features = np.random.default_rng(1).uniform(size=(len(cohort), 1))
    result = run_equilense(cohort, features, ("x",), tables_from_frame(cohort, CFG), CFG)
    assert list(result.models) == ["model-00"]
    back = axis_result("equilense", stored(axis_payload(result)))
    assert isinstance(back, EquiLenseResult) and back.to_dict() == result.to_dict()


def test_many_models_and_an_unknown_axis(cohort):
    result = run_axis3("model-00", cohort, CFG)
    payloads = {"a": stored(axis_payload(result)), "b": stored(axis_payload(result))}
    got = axis_results("axis3", payloads)
    assert list(got) == ["a", "b"] and all(repr(r) == repr(result) for r in got.values())
    with pytest.raises(ValueError, match="unknown scheduled axis 'axis9'"):
        axis_result("axis9", [])
