"""The demo's scorer (monitor.data.scorer): training split, scored stream, model-update scenario.

Why these checks: the demo's story (a model update pushes one cell through its threshold)
is only honest if the update touches exactly the model, group and period it names, the
models were trained on history only, and every scored record is valid (docs/method.md
section 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor import cli
from monitor.config import MonitorConfig, config_from_mapping
from monitor.data import cohort, scorer
from monitor.stream.schema import validate_records

SEED = 3
N = 30_000


@pytest.fixture(scope="module")
def shifted() -> scorer.ScoredStream:
    return scorer.synthetic_stream(N, SEED, "group_score_shift")


@pytest.fixture(scope="module")
def plain() -> scorer.ScoredStream:
    return scorer.synthetic_stream(N, SEED, None)


def test_cli_scenario_names_are_the_scorers() -> None:
    assert set(cli.SCENARIO_NAMES) == set(scorer.SCENARIOS)
    assert cli.DEFAULT_SCENARIO in scorer.MODEL_UPDATES


def test_training_uses_history_only_and_the_stream_is_the_rest() -> None:
    full = cohort.synth_cohort(N, seed=SEED)
    train, stream = scorer.split_train_stream(full, SEED, before=cohort.DRIFT_START)
    assert (train["event_time"] < cohort.DRIFT_START).all()
    assert set(train["record_id"]).isdisjoint(stream["record_id"])
    assert len(train) + len(stream) == N
    assert stream["event_time"].is_monotonic_increasing
    # about a quarter of the first half trains (binomial: sd about 0.4 pp at this size)
    share = len(train) / (full["event_time"] < cohort.DRIFT_START).sum()
    assert abs(share - 0.25) < 0.02


def test_every_discharge_is_scored_once_per_model_in_time_order(
    shifted: scorer.ScoredStream,
) -> None:
    f = shifted.frame
    models = list(scorer.SYNTH_MODELS)
    assert len(f) == shifted.n_discharges * len(models)
    assert f["model_id"].tolist() == models * shifted.n_discharges  # interleaved
    assert f["event_time"].is_monotonic_increasing
    assert not f.duplicated(["model_id", "record_id"]).any()


def test_auroc_is_a_sane_figure(shifted: scorer.ScoredStream) -> None:
    by_id = {m.model_id: m.auroc for m in shifted.models}
    # 100k-record runs give 0.86 / 0.75; the thresholds leave room for the smaller train set
    assert by_id["los-xgb-discharge"] > 0.8
    assert 0.68 < by_id["los-xgb-admission"] < by_id["los-xgb-discharge"]


def test_the_model_update_moves_only_its_model_group_and_period(
    shifted: scorer.ScoredStream, plain: scorer.ScoredStream
) -> None:
    a, b = shifted.frame, plain.frame
    pd.testing.assert_frame_equal(a.drop(columns="score"), b.drop(columns="score"))
    hit = (
        (a["model_id"] == "los-xgb-discharge")
        & (a["sex"] == "1")
        & (a["event_time"] > cohort.DRIFT_START)
    ).to_numpy()
    assert np.array_equal(a["score"].to_numpy()[~hit], b["score"].to_numpy()[~hit])
    assert (a["score"].to_numpy()[hit] < b["score"].to_numpy()[hit]).all()
    # after the ramp the logit shift is exactly the documented -1.0
    late = hit & (a["event_time"] >= pd.Timestamp("2026-09-01", tz="UTC")).to_numpy()
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    delta = logit(a["score"].to_numpy()[late]) - logit(b["score"].to_numpy()[late])
    np.testing.assert_allclose(delta, -1.0, atol=1e-6)
    # halfway through the ramp, half the shift
    mid = hit & (a["event_time"].dt.strftime("%Y-%m-%d") == "2026-07-31").to_numpy()
    d_mid = logit(a["score"].to_numpy()[mid]) - logit(b["score"].to_numpy()[mid])
    assert mid.any() and np.all((d_mid < -0.45) & (d_mid > -0.52))


def test_the_update_pushes_di_by_sex_through_the_four_fifths_line(
    shifted: scorer.ScoredStream,
) -> None:
    f = shifted.frame[shifted.frame["model_id"] == "los-xgb-discharge"]
    dec = (f["score"] >= 0.5).astype(int)

    def di(mask: pd.Series) -> float:
        rates = dec[mask].groupby(f.loc[mask, "sex"]).mean()
        return float(rates.min() / rates.max())

    before = di(f["event_time"] < cohort.DRIFT_START)
    after = di(f["event_time"] >= pd.Timestamp("2026-10-01", tz="UTC"))
    assert before > 0.85 and after < 0.72


def test_scored_records_are_valid_spec_records(shifted: scorer.ScoredStream) -> None:
    recs = list(scorer.iter_records(shifted.frame.iloc[:3000]))
    checked = validate_records(recs, MonitorConfig())
    assert checked.rejected == [] and len(checked.valid) == 3000


def test_same_seed_same_stream() -> None:
    a = scorer.synthetic_stream(8_000, 5, "label_rate")
    b = scorer.synthetic_stream(8_000, 5, "label_rate")
    pd.testing.assert_frame_equal(a.frame, b.frame)
    with pytest.raises(ValueError, match="unknown scenario"):
        scorer.synthetic_stream(100, 5, "nope")


def test_diabetes130_stream_has_no_sites_and_validates() -> None:
    from monitor.data.datasets.diabetes130 import load_diabetes130

    ds = load_diabetes130()
    s = scorer.dataset_stream(ds, seed=0)
    assert "hospital_id" not in s.frame.columns
    assert len(s.models) == 1 and s.models[0].auroc > 0.7
    cfg = config_from_mapping({"attributes": ds.attributes})
    checked = validate_records(list(scorer.iter_records(s.frame.iloc[:5000])), cfg)
    assert checked.rejected == []
