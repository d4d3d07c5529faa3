"""Axis 2 and Axis 3 on a cohort of predictions (issue 23): label-free metrics on every
record, label-based metrics on the records whose outcome has arrived."""

from __future__ import annotations

import numpy as np

from batch_axes.runner import run_axis2, run_axis2_split, run_axis3, run_axis3_split
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.core.outcome_split import split_rules
from monitor.core.tables import tables_from_frame

CFG = config_from_mapping({"axis2": {"sizes": [200, 400], "R": 6}, "axis3": {"folds": 4}})
FREE, LABELLED = split_rules(CFG.metrics)


def _cohort(known_share: float):
    df = synthetic_window(1500, models=1, seed=9).reset_index(drop=True)
    unknown = np.random.default_rng(2).random(len(df)) >= known_share
    pending = df.assign(label=np.where(unknown, -1, df["label"]))
    return df, pending, ~unknown


def _cells(cells):
    """By (metric, attribute), as repr: a NaN in a curve point is not equal to itself."""
    return {(c.metric, c.attribute): repr(c) for c in cells}


def test_axis2_label_free_on_every_record_label_based_on_the_joined():
    full, pending, known = _cohort(0.6)
    got = _cells(run_axis2_split(pending, CFG))
    free = _cells(run_axis2(tables_from_frame(full.assign(label=0), CFG),
                            CFG.model_copy(update={"metrics": FREE})))  # fmt: skip
    joined = _cells(run_axis2(tables_from_frame(full[known], CFG),
                              CFG.model_copy(update={"metrics": LABELLED})))  # fmt: skip
    assert set(got) == set(free) | set(joined)
    for key, cell in free.items():
        assert got[key] == cell
    for key, cell in joined.items():
        assert got[key] == cell


def test_a_cohort_with_every_outcome_is_one_run_as_before():
    full, _, _ = _cohort(1.0)
    got = run_axis2_split(full, CFG)
    assert repr(got) == repr(run_axis2(tables_from_frame(full, CFG), CFG))
    assert repr(run_axis3_split("model-00", full, CFG)) == repr(run_axis3("model-00", full, CFG))


def test_axis3_label_based_cells_on_the_joined_records():
    full, pending, known = _cohort(0.6)
    got = run_axis3_split("model-00", pending, CFG)
    joined = run_axis3("model-00", full[known], CFG.model_copy(update={"metrics": LABELLED}))
    free = run_axis3("model-00", full.assign(label=0), CFG.model_copy(update={"metrics": FREE}))
    assert got.n_records == len(full)  # the cohort figures are every prediction's
    assert {m.metric for m in got.metrics} == {r.name for r in CFG.metrics}
    assert {repr(c) for c in got.cells} == {repr(c) for c in (*free.cells, *joined.cells)}
    assert {repr(m) for m in got.metrics} == {repr(m) for m in (*free.metrics, *joined.metrics)}
