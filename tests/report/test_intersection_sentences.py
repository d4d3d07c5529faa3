"""The report's words for a sparse intersection (issue 24): groups evaluated and the wait."""

from __future__ import annotations

import math

from monitor.report.data import CellPoint
from monitor.report.sentences import cell_sentence


def _cell(attribute: str, note: str, wait: str, n_star: float = math.inf) -> CellPoint:
    return CellPoint(
        model_id="m", metric="DI", attribute=attribute, evaluation=3, at=None, window_n=10_000,
        threshold=0.8, direction=">=", value=0.61, vfr=0.0, ci_low=0.6, ci_high=0.62,
        dominant_verdict="fail", point_verdict="fail", tier="Caution-Required", n_star=n_star,
        support_note=note, time_to_reliable=wait,
    )  # fmt: skip


def test_an_intersection_says_how_many_groups_and_how_long_at_this_volume():
    text = cell_sentence(
        _cell("race_x_sex", "4 of 10 groups evaluated", "about 14 weeks at this volume"),
        0.1,
        50_000,
        0.4,
    )
    assert "N* not reached" in text
    assert "A reliable verdict needs about 14 weeks at this volume." in text
    assert "4 of 10 groups evaluated." in text
    later = cell_sentence(_cell("race_x_sex", "", "not within a year"), 0.1, 50_000, 0.4)
    assert "A reliable verdict is not within a year at this volume." in later


def test_an_attribute_with_every_group_evaluated_says_nothing_of_it():
    text = cell_sentence(_cell("race", "5 of 5 groups evaluated", ""), 0.1, 50_000, 0.4)
    assert "groups evaluated" not in text and "reliable verdict" not in text
    thin = _cell("race", "2 of 5 groups evaluated: rests on two groups", "")
    assert "2 of 5 groups evaluated: rests on two groups." in cell_sentence(thin, 0.1, 5e4, 0.4)
    # a reached N* has no wait, whatever the field holds
    assert "reliable verdict" not in cell_sentence(
        _cell("race_x_sex", "", "about 3 weeks at this volume", n_star=5_000), 0.1, 5e4, 0.4
    )
