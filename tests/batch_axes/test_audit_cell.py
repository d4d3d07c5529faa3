"""batch_axes.audit_cell: an audit's cell as its cells.csv / cells.json row and read back.

The row's Axis 3 columns are checked against the rule the audit wrote them by before the
cell was one type (a cell shows Axis 3's kappa, band, degeneracy and reason as its own only
when it is evaluable and Axis 3 applies; else "not evaluable", "not applicable" or nothing),
for every combination of Axis 2 and Axis 3 results; every row reads back to a cell whose
published row is the same. Real audits' files: tests/audit/test_run.py, tests/publish/
test_cells.py."""

from __future__ import annotations

import json
import math
from itertools import product

import pytest

from batch_axes.audit_cell import audit_cell_from_row, audit_row
from batch_axes.axis2 import Axis2Cell, TimeToReliable
from batch_axes.axis3 import Axis3Cell, Axis3Result
from batch_axes.runner import cell_with_axes
from monitor.audit.run import CELL_COLUMNS
from monitor.config import MonitorConfig
from monitor.core.cell_result import CellResult, Estimate, Evaluability
from monitor.publish.cells import published_audit_cell

CFG = MonitorConfig()


def _result(evaluable: bool, window_n: int = 900) -> CellResult:
    ev = Evaluability(True) if evaluable else Evaluability(
        False, "fewer than two race groups have 20 positives (1 of 5 do)", 15, ("2",))
    est = Estimate(0.7, "fail", 300, 0.3, "fail", math.inf, 0.7, 0.0, 0.6, 0.8, 2) if evaluable \
        else Estimate(math.nan, "not_evaluable", 0, math.nan, "not_evaluable")  # fmt: skip
    return CellResult("m", "EOPP", "race", 0.1, "abs<=", 500, window_n, 850, ("4",), (), est,
                      ev, 40.0, 3, 5)  # fmt: skip


def _axis3(applicable: bool, kappa: float | None) -> Axis3Result:
    cells = () if kappa is None or not applicable else (
        Axis3Cell("m", "EOPP", "race", 0.1, "abs<=", kappa,
                  "not evaluable" if math.isnan(kappa) else "fair", False, False, 3, 4, 0,
                  ("pass",) * 4, (0.9,) * 4, (), "too few folds" if math.isnan(kappa) else ""),
    )  # fmt: skip
    reason = "" if applicable else "no hospital ids"
    return Axis3Result("m", applicable, reason, "4 hospitals", 0.4, 4, 4, 4, 900, 0,
                       (225,) * 4, 20, 10, cells=cells)  # fmt: skip


AXIS2 = [None, Axis2Cell("m", "EOPP", "race", 900, 400.0, True, False, ()),
         Axis2Cell("m", "EOPP", "race", 900, math.inf, False, True, (),
                   TimeToReliable(4000, 90, 30.0, "about 4 weeks at this volume"))]  # fmt: skip
AXIS3 = [None, _axis3(False, None), _axis3(True, None), _axis3(True, 0.7),
         _axis3(True, math.nan)]  # fmt: skip


def _as_written_before(evaluable: bool, a3: Axis3Result | None) -> dict:
    """The Axis 3 columns as combine_cell wrote them (the rule, restated)."""
    cell3 = None
    if a3 is not None and a3.applicable and evaluable:
        cell3 = next((c for c in a3.cells if (c.metric, c.attribute) == ("EOPP", "race")), None)
    applicable = a3 is None or a3.applicable
    band = "not evaluable" if not evaluable else None if applicable else "not applicable"
    return {
        "kappa": None if cell3 is None or math.isnan(cell3.kappa) else cell3.kappa,
        "kappa_band": cell3.band if cell3 else band,
        "kappa_degenerate": cell3.degenerate if cell3 else None,
        "axis3_note": (a3.note or a3.reason or "") if a3 is not None else "",
        "kappa_reason": cell3.kappa_reason if cell3 else "",
    }


@pytest.mark.parametrize(("evaluable", "a2", "a3"), list(product([True, False], AXIS2, AXIS3)))
def test_the_row_shows_axis3_as_before_and_reads_back_to_the_same_row(evaluable, a2, a3):
    cell = cell_with_axes(_result(evaluable), a2, a3, CFG)
    row = audit_row(cell)
    assert tuple(row) == CELL_COLUMNS
    assert {k: row[k] for k in _as_written_before(evaluable, a3)} == _as_written_before(
        evaluable, a3)  # fmt: skip
    assert row["n_star"] == (None if a2 is None else "inf" if math.isinf(a2.n_star) else 400.0)
    assert row["n_star_reached"] == (None if a2 is None else a2.reached)
    assert row["time_to_reliable"] == ("about 4 weeks at this volume" if a2 is AXIS2[2] else "")
    assert row["records_to_reliable"] == (4000 if a2 is AXIS2[2] else None)
    assert row["evaluable"] == evaluable and row["cohort_n"] == 900
    published = published_audit_cell(cell)
    back = audit_cell_from_row(json.loads(json.dumps(published, allow_nan=False)))
    assert published_audit_cell(back) == published
    assert (back.tier, back.axis2 is None) == (cell.tier, a2 is None)


def test_a_small_cohort_leaves_its_identity_only_and_reads_back_as_it():
    cell = cell_with_axes(_result(True, window_n=8), AXIS2[1], AXIS3[3], CFG)
    published = published_audit_cell(cell)
    kept = {k for k, v in published.items() if v != "<11"}
    assert kept == {"model_id", "metric", "attribute", "threshold", "direction", "K",
                    "groups_left_out", "groups_total"}  # fmt: skip
    back = audit_cell_from_row(published)
    assert back.withheld and back.result.window_n == 0 and back.tier.tier.value == "Pending"
    assert math.isnan(back.result.value) and back.axis2 is None and back.axis3 is None
    assert published_audit_cell(back) == published
