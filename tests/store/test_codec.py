"""monitor.store.codec: stored state JSON back to typed values, for what today's writer
writes and for what earlier versions wrote (a real DuckDB file where the store is involved),
and the scheduled axes' results: real Axis 2, Axis 3 and EquiLense results of a small seeded
cohort, written as the store writes them (strict JSON) and read back typed, equal to what
was computed."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batch_axes.axis3 import Axis3Result
from batch_axes.equilense import EquiLenseResult
from batch_axes.runner import run_axis2, run_axis3, run_equilense
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.core.coverage import AttributeCoverage, PublishedCoverage
from monitor.core.events import CellTracker
from monitor.core.jsonable import to_json
from monitor.core.tables import tables_from_frame
from monitor.core.tiers import Tier
from monitor.store import Store, queries
from monitor.store.codec import (
    CohortRelease,
    ModelStateRow,
    StoredModelState,
    axis_payload,
    axis_result,
    decode_cell,
    decode_cohort_release,
    decode_coverage,
    decode_evaluation,
    decode_model_state,
    encode_cell_state,
    encode_cohort_release,
    encode_evaluation,
    encode_releases,
)
from monitor.store.migrations import upgraded_cell
from tests.support.exporter_state import make_cell

CFG = config_from_mapping({"window": {"size": 400, "hop_records": 200, "hop_seconds": 0}})
AXES_CFG = config_from_mapping({
    "axis2": {"sizes": [200, 400], "R": 6}, "axis3": {"folds": 4},
    "equilense": {"features": ["x"], "threshold": 0.5, "min_pairs": 1},
})  # fmt: skip
AT = pd.Timestamp("2026-11-02T00:00:00Z")

VERDICTS = st.sampled_from(["pass", "fail"])
TIERS = st.sampled_from([t.value for t in Tier if t is not Tier.NOT_EVALUABLE])
#: one evaluation a tracker sees: not evaluable (None), or a verdict, tier and axes
OBSERVATIONS = st.one_of(
    st.none(),
    st.tuples(
        VERDICTS,
        TIERS,
        st.fixed_dictionaries(
            {"vfr": st.one_of(st.none(), st.floats(0, 1)), "value": st.floats(-5, 5)}
        ),
    ),
)


def observed(seq: list, confirm_windows: int) -> CellTracker:
    """A tracker after a run of evaluations (the pipeline's two calls)."""
    tracker = CellTracker("m", "DI", "race", confirm_windows=confirm_windows, tau_vfr=0.1)
    for i, obs in enumerate(seq, start=1):
        if obs is None:
            tracker.observe_not_evaluable()
        else:
            tracker.observe(i, *obs)
    return tracker


def as_json(value) -> str:
    return to_json(value)


@settings(max_examples=60, deadline=None)
@given(
    seq=st.lists(OBSERVATIONS, max_size=12),
    confirm_windows=st.integers(1, 4),
    released=st.booleans(),
    latest=st.booleans(),
)
def test_a_cell_state_round_trips(seq, confirm_windows, released, latest):
    """What the writer stores for a cell decodes to the same tracker, released and latest
    evaluation; the decoded tracker goes on observing as the original would."""
    tracker = observed(seq, confirm_windows)
    state = tracker.to_dict()
    shown = make_cell("m", "DI", "race", value=0.71) if released else None
    if shown is not None:  # as the pipeline saves it with the state (_apply)
        state["released"] = shown.to_dict()
    last = make_cell("m", "DI", "race", value=0.64) if latest else None
    stored = decode_cell(
        "m", "DI", "race", encode_cell_state(state),
        to_json(None) if last is None else to_json(last.to_dict()),
    )  # fmt: skip
    assert (stored.model_id, stored.metric, stored.attribute) == ("m", "DI", "race")
    assert as_json(stored.tracker.to_dict()) == as_json(tracker.to_dict())
    assert (stored.released is None) == (not released)
    assert (stored.latest is None) == (not latest)
    if shown is not None:
        assert as_json(stored.released.to_dict()) == as_json(shown.to_dict())
    if last is not None:
        assert as_json(stored.latest.to_dict()) == as_json(last.to_dict())
    more = (13, "fail", "High-Variance", {"vfr": 0.3})
    assert stored.tracker.observe(*more) == tracker.observe(*more)


def test_a_cell_state_as_the_first_versions_wrote_it():
    """A tracker state without the axes (before v4), the reliable verdict and a released
    evaluation, and a cell never evaluated (latest NULL): the tracker starts those afresh."""
    old = {
        "key": ["m", "SPD", "sex"],
        "verdict": {"confirm_windows": 2, "raw": "pass", "confirmed": "pass",
                    "candidate": None, "streak": 0},
        "tier": {"confirm_windows": 2, "raw": "Caution-Required", "confirmed": "Caution-Required",
                 "candidate": None, "streak": 0},
    }  # fmt: skip
    for latest in (None, "null"):
        stored = decode_cell("m", "SPD", "sex", json.dumps(old), latest)
        assert stored.released is None and stored.latest is None
        t = stored.tracker
        assert t.key == ("m", "SPD", "sex") and t.verdict.confirmed == "pass"
        assert t.last_axes == {} and t.settled_axes == {}
        assert t.reliable.confirmed is None and t.reliable.confirm_windows == 2


def test_a_cell_without_a_tracker_state_is_an_error():
    with pytest.raises(ValueError, match="no tracker state"):
        decode_cell("m", "DI", "race", "null", None)


def test_a_model_state_as_the_first_versions_wrote_it():
    """NULL evaluated records, release points and certified state (files before v9/v12):
    the position evaluated is the records accepted, and nothing is restored."""
    st_ = decode_model_state(400, 2, 3, None, None, None)
    assert st_ == StoredModelState(400, 2, 3, None, None, None)
    assert st_.evaluated == 400
    assert decode_model_state(400, 2, 3, 200, "null", "").certified is None
    assert decode_model_state(400, 2, 3, 200, None, None).evaluated == 200
    with pytest.raises(ValueError, match="not a JSON object"):
        decode_model_state(400, 2, 3, 200, "[1, 2]", None)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "c.duckdb", CFG)
    yield s
    s.close()


def test_model_states_read_back_what_the_writer_wrote(store):
    """Through a real DuckDB file: a row as today's pipeline writes it (release points and
    certified state as JSON text) and one as a file before v9 holds (both NULL)."""
    releases = {"attributes": {}, "groups": {"race": {"1": {"seq": 5, "records": [30],
                                                             "shown": [30, 0.5]}}},
                "window": None}  # fmt: skip
    certified = {"position": 400, "end_ns": None, "last": {"DI|race": ["pass", "fail", 380]},
                 "cells": {}}  # fmt: skip
    store.write_model_states([
        ModelStateRow("model-00", 400, 2, 1, AT, 400, encode_releases(releases),
                      json.dumps(certified)),
        ModelStateRow("model-01", 350, 1, 0, AT, None, None, None),
    ])  # fmt: skip
    states = queries.model_states(store.cursor())
    assert states == store.read(queries.model_states)
    assert states["model-00"] == StoredModelState(400, 2, 1, 400, releases, certified)
    assert states["model-01"] == StoredModelState(350, 1, 0, None, None, None)
    assert states["model-01"].evaluated == 350


def test_a_nan_in_a_cell_survives_the_store(store):
    """A not-evaluable latest evaluation (NaN value and VFR) stores and reads back as one."""
    cell = make_cell("model-00", "DI", "race", value=math.nan, vfr=math.nan,
                     not_evaluable="fewer than two race groups")  # fmt: skip
    tracker = CellTracker("model-00", "DI", "race")
    store._conn.execute(
        "INSERT INTO cell_state (model_id, metric, attribute, state, latest, updated_at) "
        "VALUES (?, ?, ?, ?::JSON, ?::JSON, ?)",
        ["model-00", "DI", "race", encode_cell_state(tracker.to_dict()),
         to_json(cell.to_dict()), AT],
    )  # fmt: skip
    (stored,) = store.read(queries.cell_states)
    assert stored.released is None and stored.latest is not None
    assert not stored.latest.result.evaluable and math.isnan(stored.latest.result.vfr)
    assert as_json(stored.tracker.to_dict()) == as_json(tracker.to_dict())


@pytest.fixture(scope="module")
def cohort() -> pd.DataFrame:
    return synthetic_window(1200, models=1, seed=9).reset_index(drop=True)


def stored(payload) -> object:
    """What the store's JSON column gives back."""
    return json.loads(to_json(payload))


def test_axis2_cells_round_trip(cohort):
    cells = tuple(run_axis2(tables_from_frame(cohort, AXES_CFG), AXES_CFG))
    assert len(cells) == len(AXES_CFG.metrics) * len(AXES_CFG.grid_attributes)
    payload = axis_payload(cells)
    assert isinstance(payload, list) and len(payload) == len(cells)
    back = axis_result("axis2", stored(payload))
    assert repr(back) == repr(cells)  # repr: a NaN curve point is not equal to itself


def test_axis3_result_round_trips(cohort):
    result = run_axis3("model-00", cohort, AXES_CFG)
    assert result.cells and result.n_records == len(cohort)
    back = axis_result("axis3", stored(axis_payload(result)))
    assert isinstance(back, Axis3Result) and repr(back) == repr(result)


def test_equilense_result_round_trips(cohort):
    features = np.random.default_rng(1).uniform(size=(len(cohort), 1))
    result = run_equilense(cohort, features, ("x",), tables_from_frame(cohort, AXES_CFG), AXES_CFG)
    assert list(result.models) == ["model-00"]
    back = axis_result("equilense", stored(axis_payload(result)))
    assert isinstance(back, EquiLenseResult) and back.to_dict() == result.to_dict()


def test_latest_axis_results_read_back_typed(cohort, store):
    """Through a real DuckDB file: each model's latest stored result of an axis, typed; an
    unknown axis is refused."""
    first = run_axis3("model-00", cohort.iloc[:600], AXES_CFG)
    result = run_axis3("model-00", cohort, AXES_CFG)
    later = AT + pd.Timedelta("1h")
    for model, at, r in (("a", AT, first), ("b", AT, first), ("a", later, result)):
        store.write_axis_results("axis3", model, r.n_records, axis_payload(r), at)
    got = queries.latest_axis_results(store.cursor(), "axis3")
    assert repr(got) == repr(store.read(queries.latest_axis_results, "axis3"))
    assert sorted(got) == ["a", "b"]
    assert repr(got["a"]) == repr(result) and repr(got["b"]) == repr(first)
    assert queries.latest_axis_results(store.cursor(), "axis2") == {}
    with pytest.raises(ValueError, match="unknown scheduled axis 'axis9'"):
        axis_result("axis9", [])


COVERAGE = AttributeCoverage(
    (PublishedCoverage("1", 0.91, 2.5), PublishedCoverage("2", None, None)), 0.3, 0.1,
    "outcomes incomplete",
)  # fmt: skip


@pytest.mark.parametrize(
    "cell",
    [
        make_cell("m", "DI", "race"),
        make_cell("m", "EOPP", "race", outcome_coverage=COVERAGE, n_star=math.inf),
        make_cell("m", "DI", "race", value=math.nan, vfr=math.nan,
                  not_evaluable="fewer than two race groups"),
    ],
)  # fmt: skip
def test_a_cell_evaluation_round_trips(cell):
    """typed -> stored JSON -> typed: equal (NaN compared as stored JSON), and stored again
    the same text, so what the API serves from it is what was stored."""
    text = encode_evaluation(cell)
    back = decode_evaluation(text)
    assert encode_evaluation(back) == text
    if cell.result.evaluable:  # NaN is not equal to itself: compared as JSON above
        # the reason the coverage gives is stored as the tier's (``tier_reason``)
        reason = cell.tier.reason or cell.coverage_reason
        assert back == replace(cell, tier=replace(cell.tier, reason=reason))
    assert back.outcome_coverage == cell.outcome_coverage


def test_a_cell_evaluation_as_an_earlier_version_stored_it():
    """A row without the fields added since (not applicable axes, outcome coverage,
    certified verdict), as a file not migrated holds it (the report opens files read-only),
    reads as upgraded_cell (migration v13) makes it: their defaults; an empty column is an
    error."""
    d = make_cell("m", "DI", "race", partial=True).to_dict()
    for k in ("not_applicable_axes", "outcome_coverage", "certified", "predictions"):
        del d[k]
    back = decode_evaluation(json.dumps(d))
    once = decode_evaluation(to_json(upgraded_cell(d)))  # as migration v13 leaves the row
    assert encode_evaluation(back) == encode_evaluation(once)
    assert back.tier.not_applicable_axes == ("axis3",) and back.outcome_coverage is None
    assert back.certified is None and back.predictions is None
    with pytest.raises(ValueError, match="empty"):
        decode_evaluation("null")


def test_an_outcome_coverage_round_trips():
    text = to_json(COVERAGE.to_dict())
    assert decode_coverage(text) == COVERAGE
    with pytest.raises(ValueError, match="empty"):
        decode_coverage("")


def test_a_cohort_release_round_trips():
    """typed -> stored JSON -> typed, the stored shape ``{"seq", "n"}`` as before; an empty
    cohort (no sequence number) too."""
    cohort = CohortRelease(41, {"race": (30, 0, 11), "sex": (20, 21)})
    text = encode_cohort_release(cohort)
    assert json.loads(text) == {"seq": 41, "n": {"race": [30, 0, 11], "sex": [20, 21]}}
    assert decode_cohort_release(text) == cohort and cohort.records == 41
    empty = CohortRelease(None)
    assert decode_cohort_release(encode_cohort_release(empty)) == empty
    assert empty.records == 0


def test_cohort_releases_read_back_what_the_writer_wrote(store):
    cohort = CohortRelease(7, {"race": (4, 3)})
    cursor = store.cursor()
    try:
        store.write_axis_release("equilense", "model-00", cohort, cursor)
        assert queries.axis_releases(cursor) == {("equilense", "model-00"): cohort}
    finally:
        cursor.close()
    assert store.read(queries.axis_releases) == {("equilense", "model-00"): cohort}
