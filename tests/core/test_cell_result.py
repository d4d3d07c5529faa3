"""monitor.core.cell_result: one cell of Axis 1 composed of its parts, and its flat stored
form: the keys and order every version wrote, read back (monitor.store.codec) into the same
parts, for any combination of parts (no drivers or drivers, no pooled estimate, a pooled
one beside the raw verdict or carrying it, evaluable or not)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.core.cell_result import EVALUABLE, CellResult, Estimate, Evaluability
from monitor.core.drivers import Drivers
from monitor.core.jsonable import to_json
from monitor.store.codec import cell_result_from_json

#: The flat stored form's keys in their order (``window_results.result`` up to
#: ``groups_total``; the 2026-12-02 file of tests/data holds the same).
STORED_KEYS = (
    "model_id", "metric", "attribute", "threshold", "direction", "value", "point_verdict",
    "n_pass", "K", "vfr", "dominant_verdict", "sigma", "mean", "sd", "ci_low", "ci_high",
    "n_undefined", "window_n", "resample_n", "groups_left_out", "groups_left_out_point",
    "min_denominator", "evaluable", "not_evaluable_reason", "records_needed",
    "records_needed_groups", "driver_rate", "low_group", "high_group", "low_rate",
    "high_rate", "low_share", "high_share", "low_withheld", "high_withheld", "extreme_shares",
    "low_subgroups", "pooled_value", "pooled_point_verdict", "pooled_n_pass", "pooled_vfr",
    "pooled_dominant_verdict", "pooled_ci_low", "pooled_ci_high", "pooled_strength",
    "verdict_basis", "raw_value", "raw_point_verdict", "raw_n_pass", "raw_vfr",
    "raw_dominant_verdict", "groups_evaluated", "groups_total",
)  # fmt: skip

# NaN as the one object JSON decoding gives back (math.nan), so typed equality holds
FIGURES = st.one_of(st.just(math.nan), st.floats(-3, 3, allow_nan=False))
SPREAD = st.one_of(st.just(math.inf), FIGURES)
VERDICTS = st.sampled_from(["pass", "fail"])
#: shares of resamples and subgroup rates: always defined (undefined ones are not listed)
SHARES = st.floats(0, 1)
GROUPS = st.lists(st.sampled_from(["0", "1", "2", "2:1"]), max_size=3, unique=True).map(tuple)


@st.composite
def estimates(draw, full: bool = True, strength: bool = False) -> Estimate:
    """An estimate; ``full``: with its spread (the verdict's); ``strength``: pooled."""
    head = (draw(FIGURES), draw(VERDICTS), draw(st.integers(0, 500)), draw(FIGURES),
            draw(VERDICTS))  # fmt: skip
    pooled_strength = draw(SPREAD) if strength else math.nan
    if not full:
        ci = (draw(FIGURES), draw(FIGURES)) if strength else (math.nan, math.nan)
        return Estimate(*head, ci_low=ci[0], ci_high=ci[1], strength=pooled_strength)
    return Estimate(
        *head, draw(SPREAD), draw(FIGURES), draw(FIGURES), draw(FIGURES), draw(FIGURES),
        draw(st.integers(0, 500)), pooled_strength,
    )  # fmt: skip


DRIVERS = st.builds(
    Drivers, st.sampled_from(["SR", "TPR", "ECE"]), st.one_of(st.none(), st.just("0")),
    st.one_of(st.none(), st.just("1")), FIGURES, FIGURES, FIGURES, FIGURES, st.booleans(),
    st.booleans(), st.lists(st.tuples(st.just("1"), SHARES, SHARES), max_size=2).map(tuple),
    st.lists(st.tuples(st.just("0:1"), SHARES), max_size=2).map(tuple),
)  # fmt: skip


@st.composite
def cells(draw) -> CellResult:
    basis = draw(st.sampled_from(["none", "raw", "pooled"]))
    pooled = None if basis == "none" else draw(estimates(full=basis == "pooled", strength=True))
    raw = draw(estimates(full=basis != "pooled"))
    evaluability = draw(st.one_of(st.just(EVALUABLE), st.builds(
        Evaluability, st.just(False), st.text(max_size=12),
        st.one_of(st.none(), st.integers(5, 50)), GROUPS)))  # fmt: skip
    return CellResult(
        "m", draw(st.sampled_from(["DI", "EOPP"])), "race", 0.8, ">=", 500,
        draw(st.integers(0, 9000)), draw(st.integers(0, 9000)), draw(GROUPS), draw(GROUPS),
        raw, evaluability, draw(FIGURES), draw(st.integers(0, 5)), 5,
        draw(st.one_of(st.none(), DRIVERS)), pooled, "pooled" if basis == "pooled" else "raw",
    )  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(cells())
def test_the_stored_form_is_flat_in_its_order_and_reads_back_as_the_same_parts(cell):
    row = cell.to_dict()
    assert tuple(row) == STORED_KEYS
    text = to_json(row)
    back = cell_result_from_json(json.loads(text))
    assert back == cell
    assert to_json(back.to_dict()) == text


def test_the_verdict_fields_are_the_verdict_estimates_and_raw_keeps_its_verdict_fields():
    raw = Estimate(0.6, "fail", 20, 0.04, "fail", 3.0, 0.6, 0.05, 0.5, 0.7, 0)
    pooled = Estimate(0.85, "pass", 470, 0.06, "pass", 2.0, 0.85, 0.02, 0.8, 0.9, 1, 100.0)
    cell = CellResult("m", "DI", "race", 0.8, ">=", 500, 900, 900, (), (), raw)
    row = cell.to_dict()
    assert (row["value"], row["sigma"]) == (0.6, 3.0) and math.isnan(row["pooled_value"])
    assert row["verdict_basis"] == "raw" and row["pooled_point_verdict"] is None
    beside = replace(cell, pooled=pooled)
    row = beside.to_dict()
    assert (row["value"], row["pooled_value"], row["pooled_strength"]) == (0.6, 0.85, 100.0)
    assert row["raw_point_verdict"] is None  # raw carries the verdict: nothing under raw_*
    verdict = replace(cell, raw=raw.beside_verdict(), pooled=pooled, verdict_basis="pooled")
    row = verdict.to_dict()
    assert (row["value"], row["sigma"], row["n_undefined"], row["ci_low"]) == (0.85, 2.0, 1, 0.8)
    assert (row["raw_value"], row["raw_point_verdict"], row["raw_n_pass"]) == (0.6, "fail", 20)
    assert verdict.vfr == 0.06 and verdict.verdict is pooled and verdict.raw.ci_low != 0.5


def test_drivers_and_their_subgroups_are_one_part():
    d = Drivers("SR", "0", "1", 0.3, 0.5, 1.0, 0.7, False, False, (("0", 1.0, 0.0),))
    cell = CellResult("m", "DI", "race", 0.8, ">=", 500, 900, 900, (), (),
                      Estimate(0.6, "fail", 0, 0.0, "fail"), drivers=d)  # fmt: skip
    assert (cell.low_group, cell.driver_rate) == ("0", "SR")
    with_subs = cell.with_low_subgroups((("0:1", 0.25),))
    assert with_subs.drivers.subgroups == (("0:1", 0.25),)
    assert with_subs.to_dict()["low_subgroups"] == [["0:1", 0.25]]
    no_drivers = replace(cell, drivers=None)
    assert no_drivers.with_low_subgroups((("0:1", 0.25),)) is no_drivers
    row = no_drivers.to_dict()
    assert (row["driver_rate"], row["low_withheld"], row["extreme_shares"]) == (None, False, [])
    assert row["extreme_shares"] is not no_drivers.to_dict()["extreme_shares"]  # fresh lists
