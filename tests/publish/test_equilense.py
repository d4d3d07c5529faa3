"""monitor.publish.equilense: EquiLense group metrics and MPPD as they leave the service."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from batch_axes.equilense_groups import equilense_group_metrics
from monitor.core.counts import CountTable
from monitor.publish.axes import published_axis
from monitor.publish.equilense import published_equilense, published_group_metrics


def test_published_group_metrics_withhold_a_second_group_and_round():
    """The published form: the group of 4 and the smallest shown group withheld, sizes
    rounded to 5, values to 2 decimals, summaries over the shown groups only."""
    from tests.support.complements import dpd_recovered, small_recovered

    sizes = {"a": 4, "b": 86, "c": 646, "d": 3458}
    codes = tuple(sizes)
    g = np.repeat(np.arange(4), list(sizes.values()))
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, g.size)
    d = (rng.uniform(size=g.size) < 0.3 + 0.1 * g).astype(int)
    table = CountTable.from_records(codes, g, y, d, np.full(g.size, 0.4))
    (dpd,) = [r for r in equilense_group_metrics("m", "race", table) if r.metric == "DPD"]
    out = published_group_metrics(dpd)
    assert out["group_n"] == {"a": "<11", "b": "<11", "c": 645, "d": 3460}
    assert out["by_group"]["a"] is None and out["by_group"]["b"] is None
    assert out["by_group"]["c"] == round(dpd.by_group["c"], 2)
    assert out["max_abs"] == round(max(abs(dpd.by_group[k]) for k in "cd"), 2)
    total = 4195  # the cohort as published (rounded)
    assert small_recovered(total, out["group_n"]) == {}
    assert dpd_recovered(total, out["group_n"], out["by_group"]) == {}


def test_published_mppd_withholds_the_secondary_group_and_rounds_pairs():
    """With dense matching a group's pair count is about its records times the reference
    group's: the group the group metrics withhold by secondary suppression is withheld
    from MPPD too, and the pair counts left are rounded."""
    from batch_axes.runner import run_equilense
    from monitor.config import config_from_mapping
    from monitor.core.tables import tables_from_frame

    cfg = config_from_mapping({"equilense": {"features": ["x"], "threshold": 1.5, "min_pairs": 1}})
    rng = np.random.default_rng(2)
    race = ["0"] * 4 + ["1"] * 23 + ["3"] * 203
    n = len(race)
    frame = pd.DataFrame({
        "model_id": "m", "score": rng.uniform(size=n), "label": rng.integers(0, 2, n),
        "decision": rng.integers(0, 2, n), "race": race, "sex": (["0", "1"] * n)[:n],
        "ethnicity": "1", "age_group": "2",
    })  # fmt: skip
    out = run_equilense(frame, rng.uniform(size=(n, 1)), ("x",), tables_from_frame(frame, cfg), cfg)
    stored = out.models["m"].mppd["race"]
    assert isinstance(stored.reference.group("1").pairs, int)  # stored exact: 23 x reference
    pub = json.loads(json.dumps(published_equilense(out)))
    race_pub = pub["models"]["m"]["mppd"]["race"]
    by_group = {g["group"]: g for g in race_pub["reference"]["groups"]}
    assert by_group["1"]["pairs"] == "<11" and by_group["1"]["mean"] is None
    assert by_group["0"]["pairs"] == "<11"
    ints = [g["pairs"] for g in by_group.values() if isinstance(g["pairs"], int)]
    ints += [p for row in race_pub["pairwise"]["pairs"] for p in row if isinstance(p, int)]
    assert ints and all(p % 5 == 0 for p in ints)
    assert pub["models"]["m"]["records"] == 230
    # the API's dispatch serves the same form
    assert json.loads(json.dumps(published_axis(out))) == pub
