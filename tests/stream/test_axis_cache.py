"""The scheduled axes' latest results as the tier rule reads them, per model."""

from __future__ import annotations

import math

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Cell, Axis3Result
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


def test_each_axis_result_gives_its_lookups_and_forget_drops_them_all():
    cache = AxisCache()
    cache.set_axis2("m", [
        Axis2Cell("m", "DI", "race", 603, math.inf, False, True, ()),
        Axis2Cell("m", "SPD", "sex", 603, 400.0, True, False, ()),
    ])  # fmt: skip
    cache.set_axis3("m", _axis3("m", True, {("DI", "race"): 0.55}))
    cache.set_axis3("n", _axis3("n", False, {}))
    assert cache.n_star["m"] == {("DI", "race"): math.inf, ("SPD", "sex"): 400.0}
    assert cache.kappa["m"] == {("DI", "race"): 0.55}
    assert cache.axis3_applicable == {"m": True, "n": False}
    assert len(cache.axis2["m"]) == 2
    cache.forget("m")
    for book in (cache.axis2, cache.axis3, cache.n_star, cache.kappa, cache.axis3_applicable):
        assert "m" not in book
    assert cache.axis3_applicable == {"n": False}


def test_a_new_result_replaces_the_old_one():
    cache = AxisCache()
    cache.set_axis2("m", [Axis2Cell("m", "DI", "race", 603, 500.0, True, False, ())])
    cache.set_axis2("m", [Axis2Cell("m", "SPD", "sex", 700, 300.0, True, False, ())])
    assert cache.n_star["m"] == {("SPD", "sex"): 300.0}
