"""The Python API (monitor.audit.frame) against the CLI, against fairlearn, and on bad input."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import (
    MetricFrame,
    demographic_parity_difference,
    demographic_parity_ratio,
    equalized_odds_difference,
    true_positive_rate,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import precision_score

from monitor.audit.frame import FrameAudit, audit_frame, frame_setup
from monitor.audit.input_mapping import AuditInputError
from monitor.cli import main
from monitor.config import MonitorConfig, load_config
from monitor.publish.cells import published_audit_cell

#: Few resamples: these tests compare values, configs and cells, not VFR precision.
FAST = MonitorConfig.model_validate({"axis1": {"K": 50}, "axis2": {"R": 4}})

#: Group names a TOML code map would need quoting or recoding for: spaces, a colon (the
#: intersection separator), a quote, a backslash, non-ASCII, a number as text.
ODD_RACES = ["African American", "Asian: East", 'Other "mixed"', "White\\Euro", "Métis"]


def _cohort(seed: int, n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    race = rng.choice(ODD_RACES, n, p=[0.3, 0.2, 0.15, 0.3, 0.05])
    sex = rng.choice(["F", "M"], n)
    lift = np.where(race == "African American", -0.4, 0.0) + np.where(sex == "F", 0.2, 0.0)
    label = (rng.random(n) < 1 / (1 + np.exp(-lift))).astype(int)
    score = 1 / (1 + np.exp(-(1.2 * label - 0.6 + lift + rng.normal(0, 1, n))))
    return pd.DataFrame(
        {
            "outcome": label,
            "p_los": score,
            "Race / ethnicity": race,
            "sex": pd.Categorical(sex, categories=["M", "F", "X"]),  # "X" never occurs
            "site": rng.integers(1, 9, n),
        }
    )


@pytest.fixture(scope="module")
def cohort() -> pd.DataFrame:
    return _cohort(1)


@pytest.fixture(scope="module")
def api_result(cohort) -> FrameAudit:
    return audit_frame(
        cohort, label="outcome", score="p_los", attributes=["Race / ethnicity", "sex"],
        hospital="site", model="los-xgb", intersections=[("Race / ethnicity", "sex")],
        config=FAST,
    )  # fmt: skip


def test_keyword_api_and_cli_give_identical_cells(api_result, cohort, tmp_path):
    cohort.to_csv(tmp_path / "cohort.csv", index=False)
    (tmp_path / "audit.toml").write_text(api_result.toml)
    toml, out = str(tmp_path / "audit.toml"), str(tmp_path / "out")
    code = main(["audit", "--input", str(tmp_path / "cohort.csv"), "--config", toml,
                 "--out", out, "--quiet"])  # fmt: skip
    assert code == 0
    cli = json.loads((tmp_path / "out" / "cells.json").read_text())
    api = [published_audit_cell(c) for c in api_result.audit.cells]
    assert len(api) == 7 * 3  # seven metrics, two attributes and their intersection
    assert cli["cells"] == json.loads(json.dumps(api))
    assert cli["notes"] == api_result.notes
    assert load_config(tmp_path / "audit.toml") == api_result.config


def test_a_hand_written_toml_gives_the_same_config_object(tmp_path):
    df = pd.DataFrame(
        {
            "y": [0, 1] * 30,
            "p": [0.3, 0.7] * 30,
            "Race": ["Black", "White", "Black", "Asian"] * 15,
            "Sex": ["Female", "Male", "Male"] * 20,
            "hosp": ["a", "b", "c"] * 20,
        }
    )
    # what a user writes for `vfr-monitor audit` on this frame as a file
    (tmp_path / "c.toml").write_text(
        """
[[attributes]]
name = "race"
groups = { Asian = "Asian", Black = "Black", White = "White" }
[[attributes]]
name = "sex"
groups = { Female = "Female", Male = "Male" }
[[intersections]]
attributes = ["race", "sex"]
[metrics.DI]
threshold = 0.9
[metrics.EOPP]
[input]
model_id = "m1"
[input.columns]
label = "y"
score = "p"
race = "Race"
sex = "Sex"
hospital_id = "hosp"
[decision]
threshold = 0.4
"""
    )
    setup = frame_setup(
        df, label="y", score="p", attributes=["Race", "Sex"], hospital="hosp", model="m1",
        threshold=0.4, metrics={"DI": 0.9, "EOPP": None}, intersections=[("Race", "Sex")],
    )  # fmt: skip
    assert setup.config == load_config(tmp_path / "c.toml")
    assert setup.config != load_config(None)  # the comparison can fail


def test_attributes_of_any_strings_keep_their_names(api_result):
    race = api_result.config.attribute("race_ethnicity")
    # not all valid codes (a colon, a quote): codes 0..k-1, names the strings, sorted
    assert list(race.groups.values()) == sorted(ODD_RACES)
    assert list(race.groups) == [str(i) for i in range(len(ODD_RACES))]
    # valid codes are kept as they are; a categorical keeps its order, unseen categories out
    assert api_result.config.attribute("sex").groups == {"M": "M", "F": "F"}
    cells = api_result.cells
    assert set(cells["attribute"]) == {"Race / ethnicity", "sex", "race_ethnicity_x_sex"}
    assert not cells["withheld"].any() and (cells["n"] == 3000).all()
    inter = api_result.config.grid_attributes[-1]
    assert "Métis x F" in inter.groups.values()


def test_values_equal_fairlearn_on_the_api_cohort(api_result, cohort):
    y, d = cohort["outcome"], (cohort["p_los"] >= 0.5).astype(int)
    got = api_result.cells.set_index(["metric", "attribute"])["value"]
    for col in ("Race / ethnicity", "sex"):
        a = cohort[col].astype(str)
        assert got["DI", col] == pytest.approx(demographic_parity_ratio(y, d, sensitive_features=a))
        assert got["SPD", col] == pytest.approx(
            demographic_parity_difference(y, d, sensitive_features=a)
        )
        assert got["EOD", col] == pytest.approx(
            equalized_odds_difference(y, d, sensitive_features=a)
        )
        tpr = MetricFrame(metrics=true_positive_rate, y_true=y, y_pred=d, sensitive_features=a)
        assert got["EOPP", col] == pytest.approx(tpr.difference())


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    names=st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1,
                max_size=12),
        min_size=2, max_size=5, unique=True,
    ),
    per_group=st.integers(60, 200),
    threshold=st.sampled_from([0.3, 0.5, 0.7]),
)  # fmt: skip
def test_values_equal_fairlearn_metricframe_for_any_group_strings(
    seed, names, per_group, threshold
):
    """Any strings (spaces, quotes, unicode, digits) as groups: the point values are
    fairlearn's, and the groups are named by the strings."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(names, per_group)
    n = len(groups)
    y = rng.integers(0, 2, n)
    p = np.clip(0.35 * y + 0.65 * rng.random(n), 0, 1)
    d = (p >= threshold).astype(int)
    df = pd.DataFrame({"y": y, "p": p, "g": groups})
    sizes = pd.DataFrame({"y": y, "d": d, "g": groups}).groupby("g")
    # every rate's denominator at least min_group_support (20): no group left out, so the
    # engine's groups are fairlearn's
    assume(sizes["y"].sum().min() >= 20 and (sizes["y"].count() - sizes["y"].sum()).min() >= 20)
    assume(sizes["d"].sum().min() >= 20)
    res = audit_frame(
        df, label="y", score="p", threshold=threshold, attributes=["g"],
        metrics=["DI", "SPD", "EOPP", "PP"], config=FAST,
    )  # fmt: skip
    got = res.cells.set_index("metric")["value"]
    assert set(res.config.attribute("g").groups.values()) == set(names)
    mf = MetricFrame(
        metrics={"tpr": true_positive_rate, "ppv": precision_score},
        y_true=y, y_pred=d, sensitive_features=groups,
    )  # fmt: skip
    assert got["DI"] == pytest.approx(demographic_parity_ratio(y, d, sensitive_features=groups))
    assert got["SPD"] == pytest.approx(
        demographic_parity_difference(y, d, sensitive_features=groups)
    )
    assert got["EOPP"] == pytest.approx(mf.difference()["tpr"])
    assert got["PP"] == pytest.approx(mf.difference()["ppv"])


def test_tier_grid_html_view_and_report(api_result, tmp_path):
    grid = api_result.tiers
    assert grid.shape == (7, 3)
    assert list(grid.columns) == ["Race / ethnicity", "sex", "race_ethnicity_x_sex"]
    assert grid.loc[("los-xgb", "DI"), "sex"] == api_result.cells.query(
        "metric == 'DI' and attribute == 'sex'"
    )["tier"].item()
    page = api_result._repr_html_()
    assert page.count("<tr>") == 1 + len(api_result.cells)
    # verdict and reliability look different: a fail is red text with a cross, a tier a badge
    fails = int((api_result.cells["verdict"] == "fail").sum())
    assert page.count("&#10007; fail") == fails > 0
    assert page.count("border-radius:8px") == len(api_result.cells)
    path = api_result.report(tmp_path)
    text = path.read_text()
    assert path.parent == tmp_path and text.startswith("<!DOCTYPE html>")
    # the report names attributes as the config does (the column "Race / ethnicity")
    assert "los-xgb" in text and "race_ethnicity_x_sex" in text


def test_the_report_from_memory_is_the_report_of_the_audit_files(tmp_path, monkeypatch):
    """FrameAudit.report reads the published audit from memory (no temporary files), and
    draws the page the audit directory gives, a withheld model and left-out counts
    included (the source's name aside)."""
    import tempfile
    from datetime import UTC, datetime

    from monitor.audit.run import write_report
    from monitor.report.render import write_report as write_html

    rng = np.random.default_rng(5)
    n = 600
    df = pd.DataFrame({
        "y": rng.integers(0, 2, n), "p": rng.random(n),
        "grp": rng.choice(["A", "B", "C"], n), "site": rng.integers(1, 5, n),
        "m": ["tiny"] * 8 + ["big"] * (n - 8),
    })  # fmt: skip
    res = audit_frame(df, label="y", score="p", attributes=["grp"], model_column="m",
                      hospital="site", config=FAST)  # fmt: skip
    audit = replace(res.audit, left_out={"no score": 3, "bad label": 40})
    at = datetime(2026, 12, 1, tzinfo=UTC)
    write_report(audit, tmp_path / "files")
    kw = {"config": res.config, "generated_at": at}
    files, _ = write_html(audit_dir=tmp_path / "files", out=tmp_path / "a.html", **kw)
    memory, _ = write_html(audit=audit.published(), out=tmp_path / "b.html", **kw)
    page = files.read_text()
    assert "tiny" in page and "no score &lt;11" in page and "bad label 40" in page
    assert page.replace(str(tmp_path / "files"), "SOURCE") == memory.read_text().replace(
        "audit_frame", "SOURCE"
    )

    def no_temporary_files(*a, **k):
        raise AssertionError("FrameAudit.report wrote temporary files")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_temporary_files)
    assert res.report(tmp_path / "c.html").read_text().startswith("<!DOCTYPE html>")


def test_decisions_alone_audit_without_calibration():
    rng = np.random.default_rng(3)
    n = 800
    df = pd.DataFrame(
        {
            "y": rng.integers(0, 2, n),
            "flag": rng.random(n) < 0.4,
            "age": rng.choice([30, 50, 70], n),
            "smoker": rng.random(n) < 0.3,
        }
    )
    res = audit_frame(df, label="y", decision="flag", attributes=["age", "smoker"], config=FAST)
    assert list(dict.fromkeys(res.cells["metric"])) == ["DI", "SPD", "EOPP", "EOD", "TI", "PP"]
    assert len(res.cells) == 6 * 2
    assert res.config.attribute("age").groups == {"30": "30", "50": "50", "70": "70"}
    assert res.config.attribute("smoker").groups == {"False": "False", "True": "True"}
    sr = df.groupby("age")["flag"].mean()
    di = res.cells.set_index(["metric", "attribute"])["value"]
    assert di["DI", "age"] == pytest.approx(sr.min() / sr.max())
    by_smoker = df.groupby("smoker")["flag"].mean()
    assert di["DI", "smoker"] == pytest.approx(by_smoker.min() / by_smoker.max())


def test_small_groups_and_small_models_are_withheld():
    rng = np.random.default_rng(4)
    n = 600
    df = pd.DataFrame(
        {
            "y": rng.integers(0, 2, n),
            "p": rng.random(n),
            "grp": ["A"] * 300 + ["B"] * 285 + ["C"] * 15,  # C: under min_group_support
            "m": ["tiny"] * 8 + ["big"] * 592,  # tiny: a model of 8 records
        }
    )
    df.loc[10:14, "grp"] = "rare"  # 5 records of "rare" (fewer than 11), all of "big"
    res = audit_frame(df, label="y", score="p", attributes=["grp"], model_column="m",
                      metrics=["DI"], config=FAST)  # fmt: skip
    cells = res.cells.set_index("model")
    tiny = cells.loc["tiny"]
    assert tiny["withheld"] and tiny["tier"] == "<11" and np.isnan(tiny["value"])
    assert pd.isna(tiny["n"])
    big = cells.loc["big"]
    # C (15 records) is named as left out; "rare" (5 records) only counted
    assert big["groups_left_out"] == "C; 1 group(s) under 11 records"
    assert "rare" not in res._repr_html_() and "rare" not in big["note"]


def _error(df, **kw) -> str:
    with pytest.raises(AuditInputError) as info:
        frame_setup(df, **{"label": "y", "score": "p", "attributes": ["race"], **kw})
    return str(info.value)


@pytest.fixture
def good() -> pd.DataFrame:
    return pd.DataFrame({"y": [0, 1] * 20, "p": [0.25, 0.75] * 20, "race": ["a", "b"] * 20})


def test_a_missing_column_says_did_you_mean(good):
    assert "no column 'Race'; did you mean 'race'?" in _error(good, attributes=["Race"])
    assert "no column 'scores' (its columns: 'y', 'p', 'race')" in _error(good, score="scores")
    assert "no column 'y'; did you mean 'yy'?" in _error(good.rename(columns={"y": "yy"}))


def test_a_non_binary_label_says_how_to_make_one(good):
    df = good.assign(y=[0, 1, 7] * 13 + [0])  # lengths of stay, say
    msg = _error(df)
    assert "label column 'y' is not binary: 13 row(s) are neither 0 nor 1" in msg
    assert ".astype(int)" in msg and "7" not in msg  # no record value quoted
    assert "values, not 0/1; derive a 0/1 column" in _error(good.assign(y=["yes", "no"] * 20))
    assert "1 row(s) have no value" in _error(good.assign(y=[np.nan] + [0.0, 1.0] * 19 + [1.0]))
    # True/False is a label
    assert frame_setup(good.assign(y=good["y"] == 1), label="y", score="p",
                       attributes=["race"]).frame["y"].dtype == np.int64  # fmt: skip


def test_a_score_outside_0_1_names_the_range_and_likely_cause(good):
    msg = _error(good.assign(p=good["p"] * 100))
    assert "40 row(s) outside [0, 1]" in msg and "percentages? divide by 100" in msg
    assert "75" not in msg  # no record value quoted
    assert "log-odds? apply scipy.special.expit" in _error(good.assign(p=good["p"] - 0.5))
    assert "no score" in _error(good.assign(p=[np.nan] + [0.5] * 39))
    assert "give score=" in _error(good, score=None)


def test_attribute_problems_say_how_to_fix(good):
    assert "fillna('Unknown')" in _error(good.assign(race=[None] + ["a", "b"] * 19 + ["a"]))
    assert "one group only" in _error(good.assign(race="a"))
    many = pd.DataFrame({"y": [0, 1] * 101, "p": 0.5, "race": range(202)})
    assert "202 distinct values" in _error(many)
    assert "name 'score' is taken" in _error(good.assign(score=good["race"]),
                                             attributes=["score"])  # fmt: skip
    assert "unknown metric 'DP'; known: DI, SPD" in _error(good, metrics=["DP"])
    assert "CAL_GAP has no default rule; give one" in _error(good, metrics=["DI", "CAL_GAP"])
    with pytest.raises(AuditInputError, match="takes a pandas DataFrame"):
        audit_frame(good.to_dict(), label="y", score="p", attributes=["race"])
