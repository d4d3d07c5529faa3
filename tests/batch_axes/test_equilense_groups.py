"""EquiLense group metrics against a record-level computation and fairlearn."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame, selection_rate, true_positive_rate
from hypothesis import assume, given

from batch_axes.equilense_groups import equilense_group_metrics
from monitor.core.counts import CountTable
from monitor.core.privacy import SMALL_CELL
from tests.support.strategies import cohorts


def _reference(g, y, d, groups, min_size):
    """Straight from the definitions, one group at a time; a value only where each of its
    rates rests on ``min_size`` records (records for DPD and EDDI, positives for EOD,
    positives and negatives for EO)."""

    def rate(mask, num):
        return num[mask].mean() if mask.any() else np.nan

    sr, tpr, fpr = d.mean(), rate(y == 1, d), rate(y == 0, d)
    er = (d != y).mean()
    out = {"DPD": {}, "EOD": {}, "EO": {}, "EDDI": {}}
    for k, name in enumerate(groups):
        m = g == k
        n, pos, neg = m.sum(), (m & (y == 1)).sum(), (m & (y == 0)).sum()
        tpr_g, fpr_g = rate(m & (y == 1), d), rate(m & (y == 0), d)
        big = n >= min_size
        out["DPD"][name] = d[m].mean() - sr if big else None
        out["EOD"][name] = tpr_g - tpr if pos >= min_size else None
        out["EO"][name] = (
            (abs(tpr_g - tpr) + abs(fpr_g - fpr)) / 2 if min(pos, neg) >= min_size else None
        )
        out["EDDI"][name] = abs((d[m] != y[m]).mean() - er) / max(er, 1 - er) if big else None
    return out


@given(cohorts(min_n=1))
def test_group_metrics_equal_definitions(cohort):
    groups, g, y, d, s = cohort
    res = equilense_group_metrics("m", "a", CountTable.from_records(groups, g, y, d, s))
    ref = _reference(g, y, d, groups, SMALL_CELL)  # groups under the small-cell rule are withheld
    for r in res:
        for name in groups:
            want = ref[r.metric][name]
            got = r.by_group[name]
            if want is None or np.isnan(want):
                assert got is None
            else:
                assert got == pytest.approx(want, abs=1e-12)
        vals = [abs(v) for v in ref[r.metric].values() if v is not None and not np.isnan(v)]
        if vals:
            assert r.max_abs == pytest.approx(max(vals), abs=1e-12)
            assert r.mean_abs == pytest.approx(np.mean(vals), abs=1e-12)
        else:
            assert r.max_abs is None


@given(cohorts(min_n=1, max_groups=4))
def test_dpd_and_eod_equal_fairlearn_to_overall(cohort):
    groups, g, y, d, s = cohort
    assume(all((g == k).sum() > SMALL_CELL for k in range(len(groups))))
    # every group's TPR rests on at least 11 positives, or EquiLense withholds it
    assume(all(((g == k) & (y == 1)).sum() >= SMALL_CELL for k in range(len(groups))))
    res = {
        r.metric: r
        for r in equilense_group_metrics("m", "a", CountTable.from_records(groups, g, y, d, s))
    }
    mf = MetricFrame(
        metrics={"sr": selection_rate, "tpr": true_positive_rate},
        y_true=y,
        y_pred=d,
        sensitive_features=g,
    )
    diff = mf.difference(method="to_overall")
    assert res["DPD"].max_abs == pytest.approx(diff["sr"], abs=1e-12)
    assert res["EOD"].max_abs == pytest.approx(diff["tpr"], abs=1e-12)


def test_small_groups_are_suppressed_in_output():
    g = np.array([0] * 30 + [1] * 5)
    y = np.arange(35) % 2
    d = (np.arange(35) % 3 == 0).astype(int)
    res = equilense_group_metrics(
        "m", "a", CountTable.from_records(("a", "b"), g, y, d, np.full(35, 0.4))
    )
    out = res[0].to_dict()
    assert out["by_group"]["b"] is None and out["group_n"] == {"a": 30, "b": "<11"}


@given(cohorts(min_n=1))
def test_group_metric_results_round_trip(cohort):
    from batch_axes.equilense_groups import GroupMetricResult

    groups, g, y, d, s = cohort
    table = CountTable.from_records(groups, g, y, d, s, 10)
    for r in equilense_group_metrics("m", "race", table, 10):
        back = GroupMetricResult.from_dict(json.loads(json.dumps(r.to_dict(), allow_nan=False)))
        assert back.to_dict() == r.to_dict()
        if all(n >= 11 for n in r.group_n.values()):  # no count withheld: nothing lost
            assert back == r


def test_equilense_result_round_trips_with_its_small_cells_withheld():
    from batch_axes.equilense import EquiLenseResult
    from batch_axes.runner import run_equilense
    from monitor.config import config_from_mapping
    from monitor.core.tables import tables_from_frame

    cfg = config_from_mapping({"equilense": {"features": ["x"], "threshold": 0.5, "min_pairs": 1}})
    rng = np.random.default_rng(0)
    frames = []
    for model, n in (("m", 200), ("tiny", 6)):
        frames.append(pd.DataFrame({
            "model_id": model, "score": rng.uniform(size=n), "label": rng.integers(0, 2, n),
            "decision": rng.integers(0, 2, n), "race": (["0"] * 5 + ["3"] * n)[:n],
            "sex": (["0", "1"] * n)[:n], "ethnicity": "1", "age_group": "2",
        }))  # fmt: skip
    frame = pd.concat(frames, ignore_index=True)
    features = rng.uniform(size=(len(frame), 1))
    out = run_equilense(frame, features, ("x",), tables_from_frame(frame, cfg), cfg)
    assert isinstance(out, EquiLenseResult) and out.models["tiny"].records == "<11"
    d = json.loads(json.dumps(out.to_dict(), allow_nan=False))
    back = EquiLenseResult.from_dict(d)
    assert back.to_dict() == d
    assert back.models == out.models
    race = back.models["m"].mppd["race"]
    assert race.reference.group("0").pairs == "<11" and race.reference.disparity is None
    none = run_equilense(frame, None, (), tables_from_frame(frame, cfg), cfg)
    assert EquiLenseResult.from_dict(none.to_dict()).mppd_note == none.mppd_note


def test_rates_are_admitted_by_their_denominators():
    """Issue 21: a group of 40 records with 5 positives gets a DPD and an EDDI (records)
    but no EOD (TPR over 5 positives) and no EO (TPR and FPR); as Axis 1 does."""
    g = np.array([0] * 40 + [1] * 60)
    y = np.array([1] * 5 + [0] * 35 + [1] * 30 + [0] * 30)
    d = (np.arange(100) % 2).astype(int)
    table = CountTable.from_records(("a", "b"), g, y, d, np.full(100, 0.4))
    res = {r.metric: r.by_group for r in equilense_group_metrics("m", "race", table)}
    assert res["DPD"]["a"] is not None and res["EDDI"]["a"] is not None
    assert res["EOD"]["a"] is None and res["EO"]["a"] is None
    assert all(res[m]["b"] is not None for m in ("DPD", "EOD", "EO", "EDDI"))
