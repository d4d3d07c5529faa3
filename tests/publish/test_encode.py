"""monitor.publish.encode: the one writer of published values as JSON and CSV text.

The typed path (a record published, then encoded) writes exactly what the rule writes
on the record's stored JSON row (monitor.publish.cells.published_cell, withhold,
published_event_rows: the rows tests/publish/test_cells.py checks), and a withheld
record holds no figure to write.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batch_axes.audit_cell import audit_cell_from_row
from monitor.core.cell_result import CellResult, Estimate
from monitor.core.events import CellEvent
from monitor.core.jsonable import to_json
from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL
from monitor.core.results import Axis2Outcome, Axis3Outcome, CellEvaluation, CertifiedVerdict
from monitor.core.tiers import Tier, TierResult
from monitor.publish.cells import (
    audit_cell_read,
    audit_cell_value,
    cell_value,
    event_value,
    published_cell,
    published_event_rows,
)
from monitor.publish.encode import (
    WITHHELD_TEXT,
    audit_cell_json,
    axis_row_json,
    cell_json,
    csv_row,
    encoded,
    encoded_values,
    event_json,
    withheld_row,
)
from monitor.publish.events import event_row
from monitor.publish.shown import SECONDARY, SMALL, Shown
from tests.support.exporter_state import make_cell

_certified = st.one_of(
    st.none(),
    st.builds(
        CertifiedVerdict,
        st.sampled_from(["pass", "fail", "undetermined"]),
        st.integers(0, 5000),
        st.booleans(),
        st.one_of(st.none(), st.just(("undetermined", "pass"))),
        st.one_of(st.none(), st.integers(0, 400)),
        st.one_of(st.none(), st.floats(-9, 9), st.just(math.inf)),
        st.one_of(st.none(), st.floats(-9, 9)),
    ),
)


def test_the_withheld_text_is_the_rules_label():
    assert WITHHELD_TEXT == SMALL_CELL_LABEL
    assert (encoded(Shown(3)), encoded(SMALL), encoded(SECONDARY, withheld=None)) == (
        3, "<11", None
    )
    assert encoded_values({"a": Shown(0), "b": SECONDARY}) == {"a": 0, "b": "<11"}


@given(
    st.integers(0, 300),
    _certified,
    st.one_of(st.none(), st.integers(0, 400)),
    st.sampled_from([40.0, 12.5, math.nan, math.inf]),
)
def test_a_cell_is_written_as_the_rule_writes_its_stored_row(n, certified, predictions, m):
    cell = make_cell(window_n=n, certified=certified)
    cell = replace(cell, result=replace(cell.result, min_denominator=m),
                   predictions=predictions, with_outcome=predictions)  # fmt: skip
    got = cell_json(cell_value(cell))
    want = published_cell(cell.to_dict(), n)
    assert list(got) == list(want) and to_json(got) == to_json(want)


def test_a_withheld_cell_holds_no_figure():
    """Only its identity and its columns' names: nothing a reader could show by mistake."""
    p = cell_value(make_cell(window_n=SMALL_CELL - 1, value=0.4321, vfr=0.1234))
    assert p.figures == SMALL
    assert "0.4321" not in repr(p) and "0.1234" not in repr(p)
    assert (p.identity.model_id, p.identity.metric, p.identity.K) == ("xgb", "DI", 500)
    row = cell_json(p)
    assert row["value"] == row["tier"] == row["window_n"] == WITHHELD_TEXT
    assert row["metric"] == "DI" and list(row) == list(make_cell().to_dict())


@pytest.mark.parametrize("window_n", [None, 0, SMALL_CELL - 1, SMALL_CELL, 400])
def test_an_event_is_written_as_the_rule_writes_its_row(window_n):
    event = CellEvent("verdict_flip", "m", "DI", "race", "pass", "fail", True, "pass_to_fail",
                      4, {"vfr": 0.2}, {"vfr": 0.1})  # fmt: skip
    said: list[CellEvent] = []

    def explain(e: CellEvent) -> str:
        said.append(e)
        return "DI on race flipped"

    got = event_json(event_value(event, id=3, created_at="t", decision_config="d1",
                                 window_n=window_n, explain=explain))  # fmt: skip
    row = {**event_row(event, id=3, created_at="t", decision_config="d1"),
           "explanation": "DI on race flipped"}  # fmt: skip
    (want,) = published_event_rows([row], {("m", 4): window_n})
    assert list(got) == list(want) and got == want
    assert bool(said) == (window_n is not None and window_n >= SMALL_CELL)  # said if shown


def _audit_cell(cohort_n: int, min_denominator: float) -> CellEvaluation:
    tier = TierResult(Tier.CAUTION_REQUIRED, ("axis1",), ("axis2",), ("axis3",))
    result = CellResult(
        "m", "DI", "sex", 0.8, ">=", 200, cohort_n, 503, ("9",), (),
        Estimate(0.61, "fail", 12, 0.3, "fail", math.inf, ci_low=0.55, ci_high=0.66),
        min_denominator=min_denominator, groups_evaluated=2, groups_total=3,
    )  # fmt: skip
    return CellEvaluation(result, tier, Axis2Outcome(math.inf),
                          Axis3Outcome(True, 0.4, "fair", False))  # fmt: skip


@pytest.mark.parametrize("cohort_n", [0, 4, SMALL_CELL, 503])
@pytest.mark.parametrize("min_denominator", [41.0, math.nan])
def test_an_audit_cell_read_back_from_its_file_is_the_published_cell_it_was(
    cohort_n, min_denominator
):
    cell = _audit_cell(cohort_n, min_denominator)
    published = audit_cell_value(cell)
    row = json.loads(json.dumps(audit_cell_json(published)))
    back = audit_cell_read(audit_cell_from_row(row))
    assert audit_cell_json(back) == row
    assert isinstance(back.figures, Shown) == isinstance(published.figures, Shown)
    assert back.identity == published.identity
    if isinstance(published.figures, Shown):
        assert row["cohort_n"] % 5 == 0 and row["n_star"] == "inf"
        read = audit_cell_from_row(row).result
        mine = published.figures.value.read_back().result
        assert (mine.window_n, mine.resample_n, mine.support_note) == (
            read.window_n, read.resample_n, read.support_note
        )
    else:
        assert row["value"] == row["cohort_n"] == WITHHELD_TEXT
        assert row["groups_left_out"] == "9" and row["groups_total"] == 3


def test_csv_rows_and_withheld_rows_and_axis_rows():
    assert csv_row({"a": None, "b": "<11", "c": 0}, ["c", "a"]) == {"c": 0, "a": ""}
    assert withheld_row(("id", "old"), {"id": 1}) == {"id": 1, "old": "<11"}
    assert axis_row_json(SMALL) == ("<11", None)
