"""EquiLense group metrics against a record-level computation and fairlearn."""

from __future__ import annotations

import numpy as np
import pytest
from fairlearn.metrics import MetricFrame, selection_rate, true_positive_rate
from hypothesis import assume, given

from batch_axes.equilense_groups import equilense_group_metrics
from monitor.core.counts import CountTable
from tests.conftest import cohorts


def _reference(g, y, d, groups, min_size):
    """Straight from the definitions, one group at a time."""

    def rate(mask, num):
        return num[mask].mean() if mask.any() else np.nan

    sr, tpr, fpr = d.mean(), rate(y == 1, d), rate(y == 0, d)
    er = (d != y).mean()
    out = {"DPD": {}, "EOD": {}, "EO": {}, "EDDI": {}}
    for k, name in enumerate(groups):
        m = g == k
        if m.sum() < min_size:
            for v in out.values():
                v[name] = None
            continue
        tpr_g, fpr_g = rate(m & (y == 1), d), rate(m & (y == 0), d)
        out["DPD"][name] = d[m].mean() - sr
        out["EOD"][name] = tpr_g - tpr
        out["EO"][name] = (abs(tpr_g - tpr) + abs(fpr_g - fpr)) / 2
        out["EDDI"][name] = abs((d[m] != y[m]).mean() - er) / max(er, 1 - er)
    return out


@given(cohorts(min_n=1))
def test_group_metrics_equal_definitions(cohort):
    groups, g, y, d, s = cohort
    res = equilense_group_metrics("m", "a", CountTable.from_records(groups, g, y, d, s))
    ref = _reference(g, y, d, groups, 10)
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
    assume(all((g == k).sum() >= 10 for k in range(len(groups))))
    assume(all(((g == k) & (y == 1)).any() for k in range(len(groups))))
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
