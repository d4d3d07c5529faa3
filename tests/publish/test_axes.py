"""monitor.publish.axes: Axis 2 and Axis 3 results as they leave the service."""

from __future__ import annotations

import json
import math

import pytest

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import axis3
from monitor.core.numbers import float_or_none
from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL
from monitor.publish.axes import (
    published_axis,
    published_axis2,
    published_axis3,
    published_axis3_note,
    published_axis_row,
    reported_axis,
)
from tests.batch_axes.test_axis3 import ATTRS, RULES, cohort_arrays


def test_published_folds_of_a_small_cohort_of_many_hospitals_name_no_small_fold():
    """Issue 21: 20 folds over 25 hospitals of a 150-record cohort leave folds under 11
    records; what leaves (published_axis3) lets no reader pin one from the record total,
    withholds their values and verdicts, keeps the kappas exact and quotes no exact
    small count in the note."""
    from batch_axes.axis3 import Axis3Result
    from tests.support.complements import exact_counts_in, small_recovered

    ids, groups, label, decision, score = cohort_arrays(150, 25, seed=3)
    ids = ids.astype(object)
    ids[:3] = None  # 3 records without a hospital id
    res = axis3("m", ids, label, decision, score, groups, ATTRS, RULES)
    assert res.n_folds == 20 and min(res.fold_sizes) < 11  # the case the issue names
    out = json.loads(json.dumps(published_axis3(res)))
    folds = dict(enumerate(out["fold_sizes"]))
    assert small_recovered(out["n_records"], folds) == {}
    parts = {"with": out["n_records"], "without": out["n_excluded_missing_hospital"]}
    assert small_recovered(150, parts) == {} and exact_counts_in(out["note"]) == []
    hidden = {i for i, n in folds.items() if n == "<11"}
    assert {i for i, n in enumerate(res.fold_sizes) if n < 11} <= hidden
    for cell in out["cells"]:
        assert {i for i, v in enumerate(cell["fold_verdicts"]) if v == "<11"} == hidden
    assert [m["kappa"] for m in out["metrics"]] == [float_or_none(m.kappa) for m in res.metrics]
    assert res.fold_sizes == Axis3Result.from_dict(res.to_dict()).fold_sizes  # stored exact


def test_the_note_is_the_published_results_note():
    """The report's Axis 3 summary quotes published_axis3_note: the API's note, word for
    word (its counts rounded or withheld)."""
    ids, groups, label, decision, score = cohort_arrays(150, 25, seed=3)
    ids = ids.astype(object)
    ids[:3] = None
    res = axis3("m", ids, label, decision, score, groups, ATTRS, RULES)
    assert published_axis3_note(res) == published_axis3(res)["note"]
    assert published_axis3_note(res).startswith(f"{SMALL_CELL_LABEL} records without")


def axis2_cells() -> list[Axis2Cell]:
    return [
        Axis2Cell("m", "DI", "race", 603, math.inf, False, True, ()),
        Axis2Cell("m", "SPD", "sex", 12, 4000.0, True, False, ()),
    ]


def test_axis2_rounds_the_cohort_and_the_dispatch_serves_each_axis_its_own_form():
    cells = axis2_cells()
    for c in cells:
        out = published_axis2(c)
        assert out == {**c.to_dict(), "cohort_n": out["cohort_n"]}
        assert out["cohort_n"] % 5 == 0 and abs(out["cohort_n"] - c.cohort_n) <= 2
    assert published_axis(tuple(cells)) == [published_axis2(c) for c in cells]


@pytest.mark.parametrize("cohort", [None, 0, 10])
def test_a_small_cohort_shows_no_payload_and_its_payload_is_not_read(cohort):
    def unread():
        raise AssertionError("a withheld payload is not read")

    assert published_axis_row(cohort, unread) == (SMALL_CELL_LABEL, None)


def test_a_cohort_of_eleven_or_more_shows_its_published_result():
    cells = tuple(axis2_cells())
    assert published_axis_row(4003, lambda: cells) == (4005, published_axis(cells))


def test_a_stored_axis_result_is_read_only_from_eleven_records():
    def read() -> str:
        calls.append(1)
        return "result"

    calls: list[int] = []
    assert reported_axis(SMALL_CELL - 1, read) is None
    assert reported_axis(None, read) is None
    assert calls == []  # a withheld payload is not even decoded
    assert reported_axis(SMALL_CELL, read) == "result" and calls == [1]
