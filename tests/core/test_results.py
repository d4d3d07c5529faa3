"""monitor.core.results: one cell with its axes and its tier, wherever it is made.

The tier assembly (:func:`axes_tier`) is the stream's and the audit's: given the same
scheduled-axis results, the stream's cell (through its AxisCache) and the audit's cell
(``cell_with_axes``) carry the same outcomes and the same tier, which is the tier rule
(``cell_tier``) of the figures as the stream read them before the cell was one type. The
stored form keeps its keys and order."""

from __future__ import annotations

import json
import math
from itertools import product

import pytest

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Cell, Axis3Result
from batch_axes.runner import cell_with_axes
from monitor.config import MonitorConfig
from monitor.core.cell_result import CellResult, Estimate, Evaluability
from monitor.core.jsonable import to_json
from monitor.core.results import Axis2Outcome, Axis3Outcome, CellEvaluation, axes_tier
from monitor.core.tiers import cell_tier
from monitor.store.codec import evaluation_from_json
from monitor.stream.axis_cache import AxisCache
from tests.support.exporter_state import make_cell

CFG = MonitorConfig()

#: The stored keys after the Axis 1 result's (``window_results.result``).
EVALUATION_KEYS = (
    "evaluation", "tier", "tier_level", "failed_axes", "pending_axes", "not_applicable_axes",
    "partial", "tier_reason", "confirmed_tier", "confirmed_verdict", "reliable_verdict",
    "n_star", "kappa", "evaluated_at", "released", "support_note", "predictions",
    "with_outcome", "outcome_coverage", "coverage_reason", "certified",
)  # fmt: skip


def _result(vfr: float, evaluable: bool) -> CellResult:
    ev = Evaluability(True) if evaluable else Evaluability(False, "race has fewer than two groups")
    est = Estimate(0.7, "fail", 300, vfr, "pass") if evaluable else Estimate(
        math.nan, "not_evaluable", 0, math.nan, "not_evaluable")  # fmt: skip
    return CellResult("m", "DI", "race", 0.8, ">=", 500, 900, 900, (), (), est, ev)


def _axis3(applicable: bool, kappa: float | None) -> Axis3Result:
    cells = () if kappa is None or not applicable else (
        Axis3Cell("m", "DI", "race", 0.8, ">=", kappa, "fair", False, kappa < 0.4, 3, 4, 0,
                  ("pass",) * 4, (0.9,) * 4, ()),)  # fmt: skip
    return Axis3Result("m", applicable, "" if applicable else "no hospital ids", "", 0.4, 4, 4,
                       4, 900, 0, (225,) * 4, 20, 10, cells=cells)  # fmt: skip


AXIS2 = [None, Axis2Cell("m", "DI", "race", 900, 400.0, True, False, ()),
         Axis2Cell("m", "DI", "race", 900, math.inf, False, True, ())]  # fmt: skip
AXIS3 = [None, _axis3(False, None), _axis3(True, None), _axis3(True, 0.2), _axis3(True, 0.7),
         _axis3(True, math.nan)]  # fmt: skip


@pytest.mark.parametrize(
    ("vfr", "evaluable", "a2", "a3"), list(product([0.02, 0.3], [True, False], AXIS2, AXIS3))
)
def test_the_stream_and_the_audit_assemble_the_same_tier_as_the_rule(vfr, evaluable, a2, a3):
    r = _result(vfr, evaluable)
    audit = cell_with_axes(r, a2, a3, CFG)
    cache = AxisCache()
    if a2 is not None:
        cache.set_axis2("m", [a2])
    if a3 is not None:
        cache.set_axis3("m", a3)
    o2, o3 = cache.outcomes("m", "DI", "race")
    assert (o2, o3) == (audit.axis2, audit.axis3)
    assert axes_tier(r, o2, o3, CFG) == audit.tier
    # the rule on the figures as the stream read them before (n_star, kappa, applicable)
    kappa = None if a3 is None else {(c.metric, c.attribute): c.kappa for c in a3.cells}.get(
        ("DI", "race"))  # fmt: skip
    applicable = True if a3 is None else a3.applicable
    rule = cell_tier(vfr if evaluable else math.nan, None if a2 is None else a2.n_star, kappa,
                     applicable, CFG, r.not_evaluable_reason)  # fmt: skip
    assert audit.tier == rule
    if kappa is not None:
        assert audit.kappa is kappa  # as Axis 3 gave it (NaN included)
    # the kappa the cell shows as its own: none without a verdict or where Axis 3 does not apply
    own = kappa if evaluable and applicable else None
    assert audit.own_kappa is own


def test_an_audit_cell_is_the_stream_cell_with_the_stream_parts_at_none():
    a = cell_with_axes(_result(0.02, True), AXIS2[1], AXIS3[4], CFG)
    assert (a.evaluation, a.evaluated_at, a.confirmed_tier, a.reliable_verdict) == (
        0, "", None, None)  # fmt: skip
    assert a.released and a.certified is None and a.outcome_coverage is None
    assert (a.model_id, a.metric, a.attribute) == a.key == ("m", "DI", "race")
    assert a.axis2 == Axis2Outcome(400.0) and a.axis3 == Axis3Outcome(True, 0.7, "fair", False)
    assert (a.n_star, a.kappa, a.tier.tier.value) == (400.0, 0.7, "Practical-Stability")


def test_the_stored_form_keeps_its_keys_and_reads_back_the_figures_it_keeps():
    cell = make_cell("m", "DI", "race", n_star=math.inf, kappa=0.55)
    row = cell.to_dict()
    assert tuple(row) == (*cell.result.to_dict(), *EVALUATION_KEYS)
    text = to_json(row)
    back = evaluation_from_json(json.loads(text))
    assert back == cell and to_json(back.to_dict()) == text
    # the stored row keeps N* and kappa of the axes: their other figures come back empty
    full = CellEvaluation(cell.result, cell.tier, Axis2Outcome(math.inf, "about 3 weeks", 4000),
                          Axis3Outcome(True, 0.55, "moderate", False, "", "five hospitals"))
    back = evaluation_from_json(json.loads(to_json(full.to_dict())))
    assert back.axis2 == Axis2Outcome(math.inf) and back.axis3 == Axis3Outcome(True, 0.55)
    assert to_json(back.to_dict()) == to_json(full.to_dict())
