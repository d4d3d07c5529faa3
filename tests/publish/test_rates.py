"""monitor.publish.rates: the intervention audit's selection rates."""

from __future__ import annotations

import numpy as np
from hypothesis import given

from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL, family_withheld, model_withheld
from monitor.publish.rates import linked_hidden, published_rates
from tests.support.strategies import families


@given(families(min_total=SMALL_CELL))
def test_rates_withhold_the_groups_the_sizes_withhold_and_round_the_rest(sizes):
    codes = list(sizes)
    counts = np.array([sizes[c] for c in codes])
    rates = np.linspace(0.123456, 0.654321, len(codes))
    out = published_rates(codes, rates, counts)
    hidden = family_withheld(sizes)
    assert {c for c, r in out.items() if r == SMALL_CELL_LABEL} == hidden
    for c, r in zip(codes, rates, strict=True):
        if c not in hidden:
            assert out[c] == round(float(r), 2)


def test_linked_groups_are_decided_with_the_margins():
    groups = [("race", ["B", "W"], [30, 70]), ("sex", ["F", "M"], [47, 53]),
              ("race_x_sex", ["B:F", "B:M", "W:F", "W:M"], [7, 23, 40, 30])]  # fmt: skip
    hidden = linked_hidden(groups)
    assert hidden == model_withheld(
        {n: dict(zip(c, k, strict=True)) for n, c, k in groups}
    )
    rates = np.array([0.1, 0.2, 0.3, 0.4])
    out = published_rates(groups[2][1], rates, np.array(groups[2][2]), hidden["race_x_sex"])
    # "B:F" (7) is withheld; within margin "B" its sibling too, and so on up the margins
    assert out["B:F"] == out["B:M"] == SMALL_CELL_LABEL
