"""The scheduled axes' latest results as the tier rule reads them, per model."""

from __future__ import annotations

import math

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Cell, Axis3Result
from monitor.core.results import Axis2Outcome, Axis3Outcome
from monitor.stream.axis_cache import AxisCache


def _axis3(model: str, applicable: bool, kappas: dict[tuple[str, str], float]) -> Axis3Result:
    cells = tuple(
        Axis3Cell(model, m, a, 0.8, ">=", k, "moderate", False, False, 3, 4, 0,
                  ("pass",) * 4, (0.9,) * 4, ())
        for (m, a), k in kappas.items()
    )  # fmt: skip
    return Axis3Result(
        model, applicable, "" if applicable else "one hospital", "", 0.4, 5, 5, 5, 500, 0,
        (100,) * 5, 11, 10, cells=cells,
    )  # fmt: skip


def test_each_axis_result_gives_each_cell_its_outcomes_and_forget_drops_them_all():
    cache = AxisCache()
    cache.set_axis2("m", [
        Axis2Cell("m", "DI", "race", 603, math.inf, False, True, ()),
        Axis2Cell("m", "SPD", "sex", 603, 400.0, True, False, ()),
    ])  # fmt: skip
    cache.set_axis3("m", _axis3("m", True, {("DI", "race"): 0.55}))
    cache.set_axis3("n", _axis3("n", False, {}))
    a2, a3 = cache.outcomes("m", "DI", "race")
    assert a2 == Axis2Outcome(math.inf) and not a2.reached
    assert a3 == Axis3Outcome(True, 0.55, "moderate", False, "", "")
    a2, a3 = cache.outcomes("m", "SPD", "sex")  # Axis 3 did not judge it: no kappa
    assert a2 == Axis2Outcome(400.0) and a3 == Axis3Outcome(True)
    assert cache.outcomes("n", "DI", "race") == (None, Axis3Outcome(False, note="one hospital"))
    assert cache.outcomes("o", "DI", "race") == (None, None)  # no result yet
    assert len(cache.axis2["m"]) == 2
    cache.forget("m")
    for book in (cache.axis2, cache.axis3, cache.axis2_outcomes, cache.axis3_outcomes):
        assert "m" not in book
    assert cache.outcomes("m", "DI", "race") == (None, None)
    assert cache.outcomes("n", "DI", "race")[1] == Axis3Outcome(False, note="one hospital")


def test_a_new_result_replaces_the_old_one():
    cache = AxisCache()
    cache.set_axis2("m", [Axis2Cell("m", "DI", "race", 603, 500.0, True, False, ())])
    cache.set_axis2("m", [Axis2Cell("m", "SPD", "sex", 700, 300.0, True, False, ())])
    assert cache.outcomes("m", "SPD", "sex")[0] == Axis2Outcome(300.0)
    assert cache.outcomes("m", "DI", "race")[0] is None
