"""The synthetic year as predictions at admission and outcomes at discharge (issue 23)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor.data.cohort import synth_cohort
from monitor.data.outcomes import (
    OUTCOME_FIELDS,
    OutcomeBias,
    delayed_messages,
    iter_messages,
    joined_messages,
    length_of_stay,
    parse_outcome_bias,
    with_admission_times,
)

SEED = 3


@pytest.fixture(scope="module")
def scored() -> pd.DataFrame:
    """A cohort with admission times, scored by a stand-in model (no XGBoost needed)."""
    df = with_admission_times(synth_cohort(4000, seed=SEED), SEED)
    df["model_id"] = "m"
    df["score"] = np.random.default_rng(SEED).random(len(df))
    return df


def test_length_of_stay_agrees_with_the_label_and_is_seeded():
    label = synth_cohort(2000, seed=SEED)["label"].to_numpy()
    los = length_of_stay(label, SEED)
    assert (los[label == 1] > 3).all() and (los[label == 0] <= 3).all()
    assert (los > 0).all() and los.max() <= 28
    assert np.array_equal(los, length_of_stay(label, SEED))


def test_each_discharge_is_a_prediction_at_admission_and_an_outcome_at_discharge(scored):
    msgs = delayed_messages(scored, SEED)
    pred, out = msgs[msgs["kind"] == "prediction"], msgs[msgs["kind"] == "outcome"]
    assert len(pred) == len(out) == len(scored)
    assert msgs["event_time"].is_monotonic_increasing  # the order a feed sends them
    p = pred.set_index("record_id")["event_time"]
    o = out.set_index("record_id")["event_time"]
    delay_days = (o - p.loc[o.index]).dt.total_seconds() / 86_400
    los = (scored["event_time"] - scored["admitted_at"]).dt.total_seconds().to_numpy() / 86_400
    assert np.allclose(np.sort(delay_days.to_numpy()), np.sort(los))
    records = list(iter_messages(msgs))
    outcome = next(r for r in records if r["kind"] == "outcome")
    prediction = next(r for r in records if r["kind"] == "prediction")
    assert set(outcome) == set(OUTCOME_FIELDS) and outcome["label"] in (0, 1)
    assert "label" not in prediction and "admitted_at" not in prediction
    assert "admitted_at" not in joined_messages(scored)


@pytest.mark.parametrize("mode", ["missing", "delayed"])
def test_a_share_of_one_groups_outcomes_is_delayed_or_missing(scored, mode):
    bias = OutcomeBias("race", "3", 0.3, mode, 20.0 if mode == "delayed" else 0.0)
    plain = delayed_messages(scored, SEED)
    msgs = delayed_messages(scored, SEED, bias)
    group = scored.set_index("record_id")["race"]

    def outcome_times(m: pd.DataFrame) -> pd.Series:
        return m[m["kind"] == "outcome"].set_index("record_id")["event_time"]

    before, after = outcome_times(plain), outcome_times(msgs)
    in_group = group.loc[before.index] == "3"
    if mode == "missing":
        kept = before.index.isin(after.index)
        share_lost = 1 - kept[in_group.to_numpy()].mean()
        assert kept[~in_group.to_numpy()].all()
    else:
        late = (after.loc[before.index] - before).dt.days.to_numpy()
        assert set(np.unique(late)) <= {0, 20}
        share_lost = (late[in_group.to_numpy()] == 20).mean()
        assert (late[~in_group.to_numpy()] == 0).all()
    assert share_lost == pytest.approx(0.3, abs=0.04)
    assert (msgs["kind"] == "prediction").sum() == len(scored)  # predictions all sent


def test_bias_flag_parses_and_refuses_nonsense():
    assert parse_outcome_bias("race=2:0.3") == OutcomeBias("race", "2", 0.3)
    assert parse_outcome_bias("sex=1:0.5:delayed:14").mode == "delayed"
    for bad in ("race=2", "race=2:1.5", "race=2:0.3:delayed", "race:2:0.3"):
        with pytest.raises(ValueError):
            parse_outcome_bias(bad)
