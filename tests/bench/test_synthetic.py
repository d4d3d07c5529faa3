"""The seeded synthetic data of benchmarks and tests (monitor.bench.synthetic): what its
docstring promises, checked (seeded, same patients under every model, the configured
composition within its Monte Carlo error, group-dependent base rates, skewed hospitals),
and its frame-free count tables against the tables of its own frame."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from monitor.bench.synthetic import (
    _MIX,
    GROUP_NAMES,
    GROUP_SHARES,
    model_name,
    skewed_hospital_ids,
    synthetic_similarity_cohort,
    synthetic_tables,
    synthetic_window,
    with_bench_models,
)
from monitor.config import MonitorConfig, config_from_mapping
from monitor.core.tables import tables_from_frame

N = 20_000
CFG = MonitorConfig()


@pytest.fixture(scope="module")
def window():
    return synthetic_window(N, models=2, seed=3)


def test_seeded_and_the_same_patients_under_every_model(window):
    assert window.equals(synthetic_window(N, models=2, seed=3))
    assert not window["score"].equals(synthetic_window(N, models=2, seed=4)["score"])
    a, b = (window[window["model_id"] == model_name(m)].reset_index(drop=True) for m in (0, 1))
    assert len(a) == len(b) == N and a["record_id"].is_unique
    same = ["record_id", "hospital_id", "label", *(x.name for x in CFG.attributes)]
    assert a[same].equals(b[same]) and not a["score"].equals(b["score"])
    assert ((window["score"] >= 0.5).astype(int) == window["decision"]).all()
    assert window["score"].between(0, 1).all() and set(window["label"]) == {0, 1}


def test_the_composition_is_the_configured_mix_within_its_monte_carlo_error(window):
    one = window[window["model_id"] == "model-00"]
    for attr in CFG.attributes:
        mix = np.asarray(_MIX[attr.name]) / sum(_MIX[attr.name])
        share = one[attr.name].value_counts(normalize=True).reindex(attr.codes, fill_value=0)
        se = np.sqrt(mix * (1 - mix) / N)  # binomial standard error of each share
        assert (np.abs(share.to_numpy() - mix) < 5 * se).all(), (attr.name, share, mix)


def test_base_rates_depend_on_the_group_and_hospitals_are_skewed(window):
    one = window[window["model_id"] == "model-00"]
    table = np.array([[((one["race"] == c) & (one["label"] == y)).sum() for y in (0, 1)]
                      for c in CFG.attribute("race").codes])  # fmt: skip
    table = table[table.sum(axis=1) > 0]
    assert stats.chi2_contingency(table).pvalue < 1e-6  # independence refuted
    volumes = one["hospital_id"].value_counts()
    assert volumes.iloc[0] > 20 * volumes.median()  # a few large sites, many small ones


def test_tables_without_a_frame_equal_the_tables_of_the_frame():
    cfg = config_from_mapping({"intersections": [{"attributes": ["race", "sex"]}]})
    direct = synthetic_tables(3000, models=2, seed=5, config=cfg)
    framed = tables_from_frame(synthetic_window(3000, models=2, seed=5, config=cfg), cfg)
    assert direct.keys() == framed.keys() and ("model-01", "race_x_sex") in direct
    for key, table in direct.items():
        np.testing.assert_array_equal(table.counts, framed[key].counts)
        np.testing.assert_allclose(table.score_sum, framed[key].score_sum, rtol=1e-12)


def test_the_similarity_cohort():
    X, scores, groups = synthetic_similarity_cohort(5000, seed=2, features=10)
    assert X.shape == (5000, 10) and scores.shape == groups.shape == (5000,)
    assert set(groups) <= set(GROUP_NAMES) and np.isfinite(X).all()
    shares = np.array([(groups == g).mean() for g in GROUP_NAMES])
    se = np.sqrt(np.array(GROUP_SHARES) * (1 - np.array(GROUP_SHARES)) / 5000)
    assert (np.abs(shares - GROUP_SHARES) < 5 * se).all()
    # 2 % exact copies: repeated rows exist, though no two draws of continuous values meet
    assert len(np.unique(X, axis=0)) < len(X) - 50
    means = [scores[groups == g].mean() for g in GROUP_NAMES]
    assert max(means) - min(means) > 0.01  # a group offset: MPPD differs between groups
    with pytest.raises(ValueError, match="at least one feature"):
        synthetic_similarity_cohort(10, features=0)


def test_skewed_hospital_ids_and_bench_models():
    ids = skewed_hospital_ids(10_000, 50, seed=1)
    counts = np.unique(ids, return_counts=True)[1]
    assert len(ids) == 10_000 and len(counts) <= 50 and counts.max() > 5 * np.median(counts)
    cfg = with_bench_models(config_from_mapping({"models": [{"id": "model-01"}]}), 3)
    assert [m.id for m in cfg.models] == ["model-01", "model-00", "model-02"]
    assert cfg.service.intake.event_time_bounds == "none" and cfg.service.intake.max_models >= 3
