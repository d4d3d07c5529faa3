"""The offline audit command end to end: real data, a multi-hospital cohort, bad input."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pandas as pd
import pytest

from monitor.bench.synthetic import synthetic_cohort
from monitor.cli import main
from monitor.core.metrics import passes
from monitor.reference.metrics import metric_from_records
from tests.support.real_data import DIABETES_CONFIG, diabetes_scored

REQUIRED = [
    "model_id", "metric", "attribute", "value", "point_verdict", "dominant_verdict", "vfr",
    "sigma", "ci_low", "ci_high", "n_star", "kappa", "kappa_band", "failed_axes", "tier",
]  # fmt: skip
TIER_ORDER = [
    "Practical-Stability",
    "Caution-Required",
    "High-Variance",
    "Catastrophic-Instability",
]
TIERS = set(TIER_ORDER)


def _read_cells(out):
    with (out / "cells.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def diabetes_audit(tmp_path_factory):
    d = tmp_path_factory.mktemp("diabetes")
    cohort = diabetes_scored()
    cohort.to_csv(d / "scored.csv", index=False)
    # a narrower similarity threshold keeps MPPD's pair count (and the test) small
    (d / "config.toml").write_text(DIABETES_CONFIG + "threshold = 0.0005\n")
    code = main(["audit", "--input", str(d / "scored.csv"), "--config", str(d / "config.toml"),
                 "--out", str(d / "out"), "--quiet"])  # fmt: skip
    return code, d / "out", cohort


def test_diabetes_audit_reports_axis3_not_applicable(diabetes_audit):
    code, out, _ = diabetes_audit
    assert code == 0
    cells = _read_cells(out)
    assert len(cells) == 7 * 3  # one model, seven metrics, three attributes
    assert list(cells[0])[: len(REQUIRED)] == REQUIRED
    for c in cells:
        assert c["kappa"] == "" and c["kappa_band"] == "not applicable"
        assert c["partial"] == "True" and "axis3" not in c["failed_axes"]
        assert c["tier"] in TIERS - {"Catastrophic-Instability"}  # two axes can fail at most
        assert 0.0 <= float(c["vfr"]) <= 0.5
        assert c["n_star"] == "inf" or float(c["n_star"]) in (1000, 2000, 5000, 10000, 25000)
        assert (
            "no record has a hospital_id" in c["axis3_note"]
            or "without hospital_id" in c["axis3_note"]
        )


def test_diabetes_point_values_match_records(diabetes_audit):
    _, out, cohort = diabetes_audit
    cells = {(c["metric"], c["attribute"]): c for c in _read_cells(out)}
    age_map = {"[0-10)": 0, "[10-20)": 0, "[20-30)": 0, "[30-40)": 0, "[40-50)": 0,
               "[50-60)": 1, "[60-70)": 1, "[70-80)": 2, "[80-90)": 2, "[90-100)": 2}  # fmt: skip
    race_codes = ["Caucasian", "AfricanAmerican", "Hispanic", "Asian", "Other", "?"]
    groups = {
        "race": cohort["race"].map({c: i for i, c in enumerate(race_codes)}).to_numpy(),
        "sex": (cohort["gender"] == "Male").astype(int).to_numpy(),
        "age_group": cohort["age"].map(age_map).to_numpy(),
    }
    y = (cohort["time_in_hospital"] > 3).astype(int).to_numpy()
    s = cohort["score"].to_numpy()
    d = (s >= 0.5).astype(int)
    for (metric, attr), c in cells.items():
        g = groups[attr]
        included = [k for k in np.unique(g) if (g == k).sum() >= 20]
        want = metric_from_records(metric, g, y, d, s, included, min_support=20)
        assert float(c["value"]) == pytest.approx(want, abs=1e-12)
        verdict = (
            "pass" if passes(np.array(want), float(c["threshold"]), c["direction"]) else "fail"
        )
        assert c["point_verdict"] == verdict


def test_diabetes_outputs_carry_no_record_level_values(diabetes_audit):
    _, out, cohort = diabetes_audit
    text = (out / "cells.json").read_text() + (out / "mppd.json").read_text()
    eq = json.loads((out / "mppd.json").read_text())
    assert eq["models"]["los-logreg"]["individual_fairness_gap"]["pairs"] > 0
    assert {g["metric"] for g in eq["group_metrics"]} == {"DPD", "EOD", "EO", "EDDI"}
    for rid in cohort["encounter_id"].astype(str).sample(50, random_state=1):
        assert f'"{rid}"' not in text
    for score in cohort["score"].sample(50, random_state=2):
        assert repr(float(score)) not in text


def _texas_like_file(path, n=60_000, seed=3):
    """A Texas-100X-shaped file: THCIC_ID, SEX_CODE, RACE, ETHNICITY, PAT_AGE, two models."""
    c = synthetic_cohort(n, models=2, seed=seed)
    frame = pd.DataFrame(
        {
            "THCIC_ID": 1000 + c.hospital,
            "SEX_CODE": np.array(["M", "F"])[c.attributes["sex"]],
            "RACE": c.attributes["race"],
            "ETHNICITY": c.attributes["ethnicity"],
            "PAT_AGE": np.array([3, 9, 14, 20])[c.attributes["age_group"]],
            "LENGTH_OF_STAY": np.where(c.label == 1, 5, 2),
            "p_xgb": c.scores[0],
            "p_lr": c.scores[1],
        }
    )
    frame.to_parquet(path)
    return frame


TEXAS_CONFIG = """
[input]
score_columns = { xgb = "p_xgb", lr = "p_lr" }
[input.columns]
hospital_id = "THCIC_ID"
sex = "SEX_CODE"
race = "RACE"
ethnicity = "ETHNICITY"
age_group = "PAT_AGE"
[input.label_from]
column = "LENGTH_OF_STAY"
greater_than = 3
[input.codes.sex]
M = "0"
F = "1"
[input.codes.age_group]
"3" = "0"
"9" = "1"
"14" = "2"
"20" = "3"
[axis2]
R = 30
"""


def test_multi_hospital_audit_with_mapped_columns(tmp_path):
    _texas_like_file(tmp_path / "cohort.parquet")
    (tmp_path / "c.toml").write_text(TEXAS_CONFIG)
    code = main(["audit", "--input", str(tmp_path / "cohort.parquet"), "--config",
                 str(tmp_path / "c.toml"), "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    assert code == 0
    cells = _read_cells(tmp_path / "out")
    assert len(cells) == 2 * 7 * 4
    assert {c["model_id"] for c in cells} == {"xgb", "lr"}
    for c in cells:
        assert c["partial"] == "False" and c["tier"] in TIERS
        kappa = float(c["kappa"])
        assert -1.0 <= kappa <= 1.0 and c["kappa_band"] != "not applicable"
        failed = [a for a in c["failed_axes"].split("+") if a]
        assert c["tier"] == TIER_ORDER[len(failed)]
        assert ("axis3" in failed) == (kappa < 0.40)
    # kappa is one number per (model, metric), shared by its attribute cells
    by_metric = {}
    for c in cells:
        by_metric.setdefault((c["model_id"], c["metric"]), set()).add(c["kappa"])
    assert all(len(v) == 1 for v in by_metric.values())


@pytest.mark.parametrize(
    ("mutate", "fragments"),
    [
        (lambda f: f.drop(columns=["RACE"]), ["missing column 'RACE'", "race"]),
        (
            lambda f: f.assign(RACE=np.where(np.arange(len(f)) % 1000 == 7, 9, f["RACE"])),
            ["column 'RACE'", "unknown code", "7, 1007, 2007"],
        ),
        (
            lambda f: f.assign(p_xgb=np.where(np.arange(len(f)) == 5, np.nan, f["p_xgb"])),
            ["p_xgb", "missing", "row(s) 5"],
        ),
        (
            lambda f: f.assign(p_lr=np.where(np.arange(len(f)) == 11, 1.5, f["p_lr"])),
            ["p_lr", "out of range", "row(s) 11"],
        ),
        (lambda f: f.iloc[:0], ["no rows"]),
    ],
)
def test_bad_input_names_column_and_rows_never_values(tmp_path, capsys, mutate, fragments):
    frame = _texas_like_file(tmp_path / "ok.parquet", n=3000)
    mutate(frame).to_parquet(tmp_path / "bad.parquet")
    (tmp_path / "c.toml").write_text(TEXAS_CONFIG)
    code = main(["audit", "--input", str(tmp_path / "bad.parquet"), "--config",
                 str(tmp_path / "c.toml"), "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    for frag in fragments:
        assert frag in err, err
    assert "1.5" not in err and "nan" not in err.lower().replace("non-numeric", "")
    assert not (tmp_path / "out").exists()


def test_empty_csv_file(tmp_path, capsys):
    (tmp_path / "empty.csv").write_text("")
    assert (
        main(["audit", "--input", str(tmp_path / "empty.csv"), "--out", str(tmp_path / "o")]) == 2
    )
    assert "empty" in capsys.readouterr().err


def test_sigma_and_ci_are_consistent(diabetes_audit):
    _, out, _ = diabetes_audit
    for c in json.loads((out / "cells.json").read_text())["cells"]:
        if c["value"] is None:
            continue
        assert c["ci_low"] <= c["ci_high"]
        assert c["sigma"] == "inf" or (c["sigma"] >= 0 and not math.isnan(c["sigma"]))


def test_small_pair_counts_are_withheld():
    from batch_axes.equilense import AttributeMPPD, suppress_small_pair_counts
    from batch_axes.mppd import GroupMPPD, MPPDPairwise, MPPDReference

    entry = AttributeMPPD(
        MPPDReference("b", 1, (GroupMPPD("a", 0.2, 3, True, 0.1),
                               GroupMPPD("b", 0.3, 40, False, 0.0)), 0.1),
        MPPDPairwise(("a", "b"), 1, ((0.1, 0.5), (0.5, None)), ((12, 2), (2, 0)),
                     ((False, False), (False, True))),
    )  # fmt: skip
    d = suppress_small_pair_counts(entry).to_dict()
    out = {"groups": d["reference"]["groups"], "pairwise": d["pairwise"]}
    assert out["groups"][0] == {
        "group": "a",
        "mean": None,
        "pairs": "<11",
        "low_support": True,
        "gap_to_reference": None,
    }
    assert out["groups"][1]["mean"] == 0.3 and out["groups"][1]["pairs"] == 40
    assert out["pairwise"]["means"] == [[0.1, None], [None, None]]
    assert out["pairwise"]["pairs"] == [[12, "<11"], ["<11", "<11"]]


def test_audit_cells_round_trip_through_cells_json(diabetes_audit):
    from batch_axes.audit_cell import audit_cell_from_row
    from monitor.publish.cells import published_audit_cell

    _, out, _ = diabetes_audit
    rows = json.loads((out / "cells.json").read_text())["cells"]
    assert rows and all(published_audit_cell(audit_cell_from_row(r)) == r for r in rows)


# ----------------------------------------------------------------------------- complements
COMPLEMENT_TOML = """
[axis1]
K = 30
[axis2]
sizes = [20, 40]
R = 3
"""


def test_audit_files_name_no_small_group_by_complement(tmp_path):
    """Issue 21: the audit files of the 61-record five-hospital cohort (a race group of 4,
    2 records without a hospital id) let no reader pin a group under 11 records: not the
    cohort size minus the shown groups, not the n-weighted DPD identity, not a note."""
    from tests.support.complements import (
        dpd_recovered,
        exact_counts_in,
        five_hospital_cohort,
        small_recovered,
    )

    five_hospital_cohort().drop(columns=["decision"]).to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "c.toml").write_text(COMPLEMENT_TOML)
    code = main(["audit", "--input", str(tmp_path / "in.csv"), "--config",
                 str(tmp_path / "c.toml"), "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    assert code == 0
    cells = _read_cells(tmp_path / "out")
    (cohort_n,) = {c["cohort_n"] for c in cells}
    # every count a row carries that could stand for the cohort: the reader takes the
    # most exact one (resample_n is the records Axis 1 resampled, the whole cohort)
    totals = {int(cohort_n)} | {int(c["resample_n"]) for c in cells}
    total = min(totals, key=lambda t: t % 5 == 0)
    mppd = json.loads((tmp_path / "out" / "mppd.json").read_text())
    gm = mppd["group_metrics"]
    notes = json.loads((tmp_path / "out" / "cells.json").read_text())["notes"]
    recovered = {
        "sizes": {r["attribute"]: small_recovered(total, r["group_n"]) for r in gm},
        "dpd": {r["attribute"]: dpd_recovered(total, r["group_n"], r["by_group"])
                for r in gm if r["metric"] == "DPD"},
        "notes": [n for c in cells for n in exact_counts_in(c["axis3_note"])]
        + [n for text in notes for n in exact_counts_in(text)],
    }  # fmt: skip
    assert recovered == {
        "sizes": {a: {} for a in recovered["sizes"]},
        "dpd": {a: {} for a in recovered["dpd"]},
        "notes": [],
    }


def test_diabetes_intersections_say_how_many_groups_they_rest_on(tmp_path):
    """Issue 24 on the shipped file: race x sex and race x age cells in cells.csv, their
    groups evaluated counted again from the scored records with pandas, and every cell
    whose N* is not reached saying how long this volume needs."""
    from monitor.audit.run import diabetes130_file, run_audit, write_report
    from monitor.config import config_from_mapping

    inter = [{"attributes": ["race", "sex"]}, {"attributes": ["race", "age_group"]}]
    cfg = diabetes130_file(config_from_mapping({"intersections": inter}), tmp_path)
    write_report(run_audit(tmp_path / "scored.csv", cfg), tmp_path / "out")
    cells = {(c["metric"], c["attribute"]): c for c in _read_cells(tmp_path / "out")}
    assert len(cells) == 7 * 5
    scored = pd.read_csv(tmp_path / "scored.csv", dtype={"age_group": str})
    scored["decision"] = (scored["score"] >= cfg.decision.threshold).astype(int)
    need = {"DI": "n", "EOPP": "pos", "EOD": "both", "PP": "flag"}
    for parts, name, total in ((["race", "sex"], "race_x_sex", 12),
                               (["race", "age_group"], "race_x_age_group", 18)):  # fmt: skip
        by = scored.groupby(parts)
        g = pd.DataFrame({"n": by.size(), "pos": by["label"].sum(),
                          "neg": by["label"].size() - by["label"].sum(),
                          "flag": by["decision"].sum()})  # fmt: skip
        g["both"] = g[["pos", "neg"]].min(axis=1)
        for metric, col in need.items():
            c = cells[(metric, name)]
            evaluated = int((g[col] >= cfg.axis1.min_group_support).sum())
            assert (int(c["groups_evaluated"]), int(c["groups_total"])) == (evaluated, total)
            assert c["support_note"].startswith(f"{evaluated} of {total} groups evaluated")
    assert cells[("EOPP", "race_x_age_group")]["groups_evaluated"] == "17"  # Asian, under 50
    for c in cells.values():
        if c["n_star"] == "inf":
            assert c["time_to_reliable"] == "not within a year" or "weeks" in c["time_to_reliable"]
            assert int(c["records_to_reliable"]) > int(c["cohort_n"]) // 2
        else:
            assert c["time_to_reliable"] == "" and c["records_to_reliable"] == ""


def test_a_pooled_audit_writes_the_pooled_estimates_of_its_intersection_cells(tmp_path):
    """Issue 38's defect as a user met it: ``vfr-monitor audit`` with a configured
    race_x_sex and ``[pooling]`` wrote 7 race_x_sex cells and none carried a pooled
    estimate. Now every poolable race_x_sex cell does, in cells.json and cells.csv, and
    reads back the same; cells of the parent attributes do not pool."""
    from batch_axes.audit_cell import audit_cell_from_row
    from monitor.audit.run import run_audit, write_report
    from monitor.bench.synthetic import synthetic_window
    from monitor.config import config_from_mapping

    cfg = config_from_mapping({
        "intersections": [{"attributes": ["race", "sex"]}],
        "pooling": {"enabled": True, "prior_strength": 100},
        "axis1": {"K": 60}, "axis2": {"R": 20},
    })  # fmt: skip
    frame = synthetic_window(3000, models=1, seed=4).drop(columns=["decision"])
    paths = write_report(run_audit(frame, cfg), tmp_path)
    rows = json.loads(paths["cells_json"].read_text())["cells"]
    pooled = {(r["metric"], r["attribute"]) for r in rows if r.get("pooled_value") is not None}
    assert pooled == {(m, "race_x_sex") for m in ("DI", "SPD", "EOPP", "EOD", "PP")}
    for r in rows:
        if (r["metric"], r["attribute"]) in pooled:
            assert r["pooled_strength"] == 100.0 and r["verdict_basis"] == "raw"
            back = audit_cell_from_row(r).result
            assert back.pooled is not None and back.pooled.value == r["pooled_value"]
            assert back.value == r["value"] or math.isnan(back.value)
    with paths["cells_csv"].open() as f:
        table = list(csv.DictReader(f))
    assert "pooled_value" in table[0]
    got = {(r["metric"], r["attribute"]) for r in table if r["pooled_value"] != ""}
    assert got == pooled
