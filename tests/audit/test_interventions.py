"""`vfr-monitor intervene` (docs/method.md section 8): splits, reweighing, B3/B4, outputs.

Small cohorts (20k synthetic records) and a reduced bootstrap (K = 100, Axis 2 on two
sizes with R = 5) keep the module fast; the statements tested do not depend on K.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.audit.intervene import (
    load_feature_cohort,
    make_part,
    plan_decisions,
    run_interventions,
)
from monitor.audit.interventions import (
    ThresholdPlan,
    kamiran_calders_weights,
    refine_thresholds,
    search_thresholds,
    split_cohort,
    vfr_cells,
    vfr_objective,
)
from monitor.cli import main
from monitor.config import load_config
from monitor.data.cohort import synth_cohort
from monitor.stream.schema import decision_thresholds

SMALL_TOML = """
[axis1]
K = 100
[axis2]
R = 5
sizes = [1000, 2000]
[interventions]
lambda_sweep = [0.0, 1.0]
"""


@pytest.fixture(scope="module")
def cohort_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 20k-record synthetic cohort (race code 0 cut to 12 records) and a small config."""
    d = tmp_path_factory.mktemp("intervene")
    frame = synth_cohort(20_000, seed=3)
    tiny = frame.index[frame["race"] == "0"]
    frame.loc[tiny[12:], "race"] = "4"  # a group too small to report in any split
    frame.to_parquet(d / "cohort.parquet", index=False)
    (d / "small.toml").write_text(SMALL_TOML)
    return d


@pytest.fixture(scope="module")
def cli_out(cohort_dir: Path) -> Path:
    out = cohort_dir / "out1"
    code = main(["intervene", "--input", str(cohort_dir / "cohort.parquet"), "--out", str(out),
                 "--config", str(cohort_dir / "small.toml"), "--quiet"])  # fmt: skip
    assert code == 0
    return out


# ----------------------------------------------------------------------------- reweighing
def test_kamiran_calders_weights_match_reweighing_by_hand() -> None:
    """AIF360 Reweighing: w(c, y) = n_c n_y / (n n_cy) = P(c) P(y) / P(c, y).

    Table (8 records): cell A has 3 positives, 1 negative; cell B 1 positive, 3 negatives.
    n = 8, n_A = n_B = 4, n_1 = n_0 = 4.
      w(A, 1) = 4*4 / (8*3) = 2/3     w(A, 0) = 4*4 / (8*1) = 2
      w(B, 1) = 4*4 / (8*1) = 2       w(B, 0) = 4*4 / (8*3) = 2/3
    lambda = 0.5: 1 + 0.5 (w - 1) -> 5/6 and 3/2.
    lambda = 3:   1 + 3 (2/3 - 1) = 0 -> clipped to 0.1;  1 + 3 (2 - 1) = 4.
    """
    cells = np.array(["A", "A", "A", "A", "B", "B", "B", "B"])
    y = np.array([1, 1, 1, 0, 1, 0, 0, 0])
    plain = [2 / 3, 2 / 3, 2 / 3, 2, 2, 2 / 3, 2 / 3, 2 / 3]
    np.testing.assert_allclose(kamiran_calders_weights(cells, y, 1.0), plain)
    half = [5 / 6, 5 / 6, 5 / 6, 1.5, 1.5, 5 / 6, 5 / 6, 5 / 6]
    np.testing.assert_allclose(kamiran_calders_weights(cells, y, 0.5), half)
    strong = [0.1, 0.1, 0.1, 4, 4, 0.1, 0.1, 0.1]
    np.testing.assert_allclose(kamiran_calders_weights(cells, y, 3.0), strong)
    np.testing.assert_allclose(kamiran_calders_weights(cells, y, 0.0), np.ones(8))
    # plain reweighing makes label and cell independent in the weighted data
    w = kamiran_calders_weights(cells, y, 1.0)
    for c in "AB":
        share = w[(cells == c) & (y == 1)].sum() / w[cells == c].sum()
        assert share == pytest.approx(w[y == 1].sum() / w.sum())


# ----------------------------------------------------------------------------- splits
def test_split_keeps_hospitals_whole_and_hits_record_shares() -> None:
    frame = synth_cohort(20_000, seed=1)
    hosp = frame["hospital_id"].to_numpy(dtype=str)
    sp = split_cohort(len(frame), (0.70, 0.15, 0.15), seed=4, hospital_ids=hosp)
    sets = [set(hosp[r]) for r in (sp.train, sp.validation, sp.audit)]
    assert sp.grouped and not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    assert sorted(np.concatenate([sp.train, sp.validation, sp.audit]).tolist()) == list(
        range(len(frame))
    )
    largest = pd.Series(hosp).value_counts().iloc[0] / len(frame)
    for rows, share in ((sp.train, 0.70), (sp.validation, 0.15), (sp.audit, 0.15)):
        assert abs(len(rows) / len(frame) - share) <= largest + 1e-9
    flat = split_cohort(1_000, (0.70, 0.15, 0.15), seed=4, labels=np.arange(1_000) % 2)
    assert not flat.grouped and (len(flat.train), len(flat.validation)) == (700, 150)


# ----------------------------------------------------------------------------- B3 and B4
@pytest.fixture(scope="module")
def validation_setup() -> tuple:
    """B1 logistic scores on a hospital-grouped validation split of a synthetic cohort."""
    from monitor.audit.intervene import fit_model, predict
    from monitor.config import MonitorConfig

    config = MonitorConfig(axis1={"K": 100})
    cohort = load_feature_cohort_frame(synth_cohort(30_000, seed=5), config)
    sp = split_cohort(len(cohort.frame), (0.7, 0.15, 0.15), 0,
                      cohort.frame["hospital_id"].to_numpy(dtype=str))  # fmt: skip
    train = make_part(cohort.frame, sp.train, cohort)
    val = make_part(cohort.frame, sp.validation, cohort)
    model = fit_model("logreg", train.X, train.labels, 0)
    return config, val, predict(model, val.X)


def load_feature_cohort_frame(frame: pd.DataFrame, config):
    from monitor.audit.intervene import map_feature_frame

    return map_feature_frame(frame, config, "synthetic")


def _engine_di(config, part, decisions, scores) -> dict[str, float]:
    cells = vfr_cells(part.labels, decisions, scores, part.groups, config)
    return {c.attribute: c.value for c in cells if c.metric == "DI"}


def test_b3_and_b4_meet_di_on_validation_and_b4_keeps_max_vfr(validation_setup) -> None:
    config, val, scores = validation_setup
    b1 = (scores >= 0.5).astype(np.int64)
    assert min(_engine_di(config, val, b1, scores).values()) < 0.80  # there is work to do
    b3 = search_thresholds(scores, val.labels, val.groups, base=0.5)
    objective = vfr_objective(val.labels, scores, val.groups, config)
    b4 = refine_thresholds(b3.plan, scores, val.labels, val.groups, objective, max_steps=40)
    vfr_max = {}
    for name, result in (("B3", b3), ("B4", b4)):
        plan = result.plan
        # decisions as the service derives them from the written thresholds
        d = plan_decisions(plan, scores, val, "model", config)
        assert np.array_equal(d, plan.decisions(scores, val.columns))
        di = _engine_di(config, val, d, scores)
        assert all(v >= 0.80 for v in di.values()), name
        # the search's incremental bookkeeping agrees with the service's resolution
        assert result.accuracy == pytest.approx(float((d == val.labels).mean()), abs=1e-12)
        assert result.di == pytest.approx(di, abs=1e-12)
        cells = vfr_cells(val.labels, d, scores, val.groups, config)
        vfr_max[name] = max(c.vfr for c in cells)
    assert b3.feasible and vfr_max["B4"] <= vfr_max["B3"]
    assert b4.objective_end[0] == vfr_max["B4"] and b4.objective_start[0] == vfr_max["B3"]
    # B4 only moves thresholds toward the unshifted one
    for attr, by_code in b4.plan.per_group().items():
        for code, t in by_code.items():
            t3 = b3.plan.thresholds[attr][code]
            assert abs(t - 0.5) <= abs(t3 - 0.5) and (t - 0.5) * (t3 - 0.5) >= 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(5, 95)),
                min_size=1, max_size=25), st.integers(0, 2**16))  # fmt: skip
def test_incremental_search_state_matches_the_service_resolution(moves, seed) -> None:
    """Oracle: after any sequence of threshold moves, the search's incremental decisions,
    positives per group and accuracy equal a from-scratch resolution by the service's
    decision_thresholds (later attributes override earlier ones)."""
    from monitor.audit.interventions import GroupCodes, _State
    from monitor.config import MonitorConfig

    config = MonitorConfig()
    rng = np.random.default_rng(seed)
    n = 400
    groups = [GroupCodes(a.name, a.codes, rng.integers(0, len(a.codes), n))
              for a in config.attributes]  # fmt: skip
    scores, labels = rng.random(n), rng.integers(0, 2, n)
    state = _State(scores, labels, groups, 0.5, min_support=1)
    for ai, gi, t in moves:
        state.apply(ai, gi % len(groups[ai].codes), t / 100)
    plan = state.plan()
    columns = {g.name: np.array(g.codes, dtype=object)[g.index] for g in groups}
    cfg = MonitorConfig(decision={"threshold": 0.5, "per_group": {"m": plan.per_group()}})
    thr = decision_thresholds(
        {**columns, "score": scores, "model_id": np.full(n, "m", dtype=object)}, cfg
    )
    expected = (scores >= thr).astype(np.int64)
    np.testing.assert_array_equal(state.decision, expected)
    np.testing.assert_array_equal(state.thr, thr)
    assert state.correct == int((expected == labels).sum())
    for g, pos in zip(groups, state.pos, strict=True):
        np.testing.assert_array_equal(pos, np.bincount(g.index, weights=expected,
                                                       minlength=len(g.codes)))  # fmt: skip


def test_threshold_selection_sees_only_validation_rows(cohort_dir: Path) -> None:
    """Perturb every audit row (labels, features, attributes): the thresholds do not move."""
    config = load_config(cohort_dir / "small.toml")
    frame = pd.read_parquet(cohort_dir / "cohort.parquet")
    hosp = frame["hospital_id"].to_numpy(dtype=str)
    sp = split_cohort(len(frame), config.interventions.split, 0, hosp)
    perturbed = frame.copy()
    rng = np.random.default_rng(0)
    a = sp.audit
    perturbed.loc[a, "label"] = 1 - perturbed.loc[a, "label"].to_numpy()
    perturbed.loc[a, "total_charges_log"] = rng.permutation(perturbed.loc[a, "total_charges_log"])
    perturbed.loc[a, "age_group"] = rng.permutation(perturbed.loc[a, "age_group"].to_numpy())
    path = cohort_dir / "perturbed.parquet"
    perturbed.to_parquet(path, index=False)
    base = run_interventions(str(cohort_dir / "cohort.parquet"), config)
    moved = run_interventions(str(path), config)
    for b in ("B3", "B4"):
        assert base.plans[b] == moved.plans[b]
    assert base.rows[0].accuracy != moved.rows[0].accuracy  # the audit rows did change
    # each baseline's result round-trips through its JSON form
    from monitor.audit.intervene import BaselineResult

    for r in base.rows:
        back = BaselineResult.from_dict(json.loads(json.dumps(r.to_dict())))
        assert back.to_dict() == r.to_dict()


# ----------------------------------------------------------------------------- outputs
def test_cli_writes_tables_and_a_decision_config_the_service_applies(cli_out: Path) -> None:
    names = {
        "table5_di.csv", "table6_audit.csv", "baselines.json", "cells.csv",
        "vfr_movement.csv", "lambda_sweep.csv", "decision_b3.toml", "decision_b4.toml",
    }  # fmt: skip
    assert names <= {p.name for p in cli_out.iterdir()}
    t6 = pd.read_csv(cli_out / "table6_audit.csv")
    assert t6["baseline"].tolist() == ["B1", "B2", "B3", "B4"]
    assert t6.loc[0, "acc_cost_pp"] == 0 and t6["cells_total"].eq(28).all()
    assert (t6.loc[2:, "auroc"] == t6.loc[0, "auroc"]).all()  # thresholds keep the ranking
    assert len(pd.read_csv(cli_out / "vfr_movement.csv")) == 28
    doc = json.loads((cli_out / "baselines.json").read_text())
    assert doc["split"]["grouped_by_hospital"] is True
    for b, key in (("b3", "b3_search"), ("b4", "b4_refinement")):
        cfg = load_config(cli_out / f"decision_{b}.toml")
        per = cfg.decision.per_group["model"]
        assert [m.id for m in cfg.models] == ["model"]  # registered, or the service drops it
        assert per == doc[key]["thresholds"] and per  # the searched thresholds, in order
        plan = ThresholdPlan(cfg.decision.threshold, tuple(a.name for a in cfg.attributes), per)
        rng = np.random.default_rng(1)
        cols = {a.name: rng.choice(list(a.codes), 5_000).astype(object) for a in cfg.attributes}
        cols["score"] = rng.random(5_000)
        cols["model_id"] = np.full(5_000, "model", dtype=object)
        thr = decision_thresholds(cols, cfg)
        np.testing.assert_array_equal(thr, plan.resolve(cols))
        assert len(np.unique(thr)) > 2  # several listed groups really apply
        other = decision_thresholds({**cols, "model_id": np.full(5_000, "x", dtype=object)}, cfg)
        assert (other == cfg.decision.threshold).all()


def test_small_groups_are_never_reported(cli_out: Path) -> None:
    doc = json.loads((cli_out / "baselines.json").read_text())
    for part in ("train", "validation", "audit"):
        assert doc["split"][part]["groups"]["race"]["0"] == "<11"
    for row in doc["baselines"]:
        assert row["selection_rate"]["race"]["0"] == "<11"


def test_split_summary_names_no_small_group_by_complement(cli_out: Path) -> None:
    """Issue 21: in baselines.json a part's size minus its shown groups of an attribute
    pins no group under 11 records (race code 0 holds 12 records over the three parts),
    and the selection rates withhold the same groups as the sizes."""
    from tests.support.complements import small_recovered

    doc = json.loads((cli_out / "baselines.json").read_text())
    recovered = {
        (part, attr): small_recovered(doc["split"][part]["records"], sizes)
        for part in ("train", "validation", "audit")
        for attr, sizes in doc["split"][part]["groups"].items()
    }
    assert recovered == {k: {} for k in recovered}
    audit = doc["split"]["audit"]["groups"]
    for row in doc["baselines"]:
        for attr, rates in row["selection_rate"].items():
            withheld = {g for g, r in rates.items() if r == "<11"}
            assert withheld == {g for g, n in audit[attr].items() if n == "<11"}, attr


def test_same_command_twice_gives_identical_files(cohort_dir: Path, cli_out: Path) -> None:
    out2 = cohort_dir / "out2"
    assert main(["intervene", "--input", str(cohort_dir / "cohort.parquet"), "--out", str(out2),
                 "--config", str(cohort_dir / "small.toml"), "--quiet"]) == 0  # fmt: skip
    for p in sorted(cli_out.iterdir()):
        assert (out2 / p.name).read_bytes() == p.read_bytes(), p.name


def test_bad_input_column_is_named(cohort_dir: Path, capsys: pytest.CaptureFixture) -> None:
    frame = pd.read_parquet(cohort_dir / "cohort.parquet").head(2_000)
    bad = cohort_dir / "bad.csv"
    frame.rename(columns={"age_group": "AGE"}).to_csv(bad, index=False)
    code = main(["intervene", "--input", str(bad), "--out", str(cohort_dir / "x"), "--quiet"])
    assert code == 2 and "'age_group'" in capsys.readouterr().err
    frame.assign(sex=np.where(np.arange(2_000) == 7, "9", frame["sex"])).to_csv(bad, index=False)
    assert main(["intervene", "--input", str(bad), "--out", str(cohort_dir / "x"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "column 'sex'" in err and "row(s) 7" in err and not (cohort_dir / "x").exists()


def test_diabetes130_has_no_hospitals_and_says_so() -> None:
    from monitor.config import MonitorConfig

    cohort = load_feature_cohort("diabetes130", MonitorConfig())
    assert not cohort.has_hospitals and "hospital_id" not in cohort.frame
    assert any("no hospital" in n for n in cohort.notes)
    assert [a.name for a in cohort.config.attributes] == ["race", "sex", "age_group"]


def test_the_governance_report_carries_the_four_baselines(cohort_dir: Path, cli_out: Path) -> None:
    """`report --interventions DIR` adds the Table 6 rows and DI per attribute to the page."""
    scored = synth_cohort(4_000, seed=5)
    scored["score"] = np.random.default_rng(5).random(len(scored))
    scored.drop(columns=["event_time"]).to_csv(cohort_dir / "scored.csv", index=False)
    audit = cohort_dir / "audit"
    assert main(["audit", "--input", str(cohort_dir / "scored.csv"), "--out", str(audit),
                 "--quiet"]) == 0  # fmt: skip
    out = cohort_dir / "reports"
    assert main(["report", "--audit-dir", str(audit), "--interventions", str(cli_out),
                 "--out", f"{out}/"]) == 0  # fmt: skip
    (page,) = out.glob("report_*.html")
    html = page.read_text()
    section = html[html.index('<section class="interventions">') :]
    doc = json.loads((cli_out / "baselines.json").read_text())
    for b in doc["baselines"]:
        assert f"<td>{b['baseline']}</td><td>{b['method']}</td><td>{b['accuracy']:.3f}" in section
    assert "no hospital in two parts" in section
    assert main(["report", "--audit-dir", str(audit), "--interventions", str(audit),
                 "--out", f"{out}/"]) == 2  # not an intervene directory: a clear error


def test_an_intersection_is_held_to_the_di_target_but_owns_no_threshold() -> None:
    """Issue 24: with race x sex configured, B3 keeps DI by race x sex at the target on
    validation, with thresholds only for the configured attributes (the service's
    per-group form). The attribute-only search leaves race x sex below it."""
    from monitor.audit.intervene import fit_model, predict
    from monitor.config import MonitorConfig

    config = MonitorConfig(axis1={"K": 100}, intersections=[{"attributes": ["race", "sex"]}])
    cohort = load_feature_cohort_frame(synth_cohort(30_000, seed=5), config)
    sp = split_cohort(len(cohort.frame), (0.7, 0.15, 0.15), 0,
                      cohort.frame["hospital_id"].to_numpy(dtype=str))  # fmt: skip
    train = make_part(cohort.frame, sp.train, cohort)
    val = make_part(cohort.frame, sp.validation, cohort)
    scores = predict(fit_model("logreg", train.X, train.labels, 0), val.X)
    assert [g.name for g in val.groups][val.owners :] == ["race_x_sex"]
    b3 = search_thresholds(scores, val.labels, val.groups, base=0.5, owners=val.owners)
    assert b3.plan.attributes == ("race", "sex", "ethnicity", "age_group")
    d = plan_decisions(b3.plan, scores, val, "model", config)  # as the service decides
    di = _engine_di(config, val, d, scores)
    assert b3.feasible and set(di) == {*b3.plan.attributes, "race_x_sex"}
    assert all(v >= 0.80 for v in di.values()), di
    assert b3.di == pytest.approx(di, abs=1e-12)
    attribute_only = search_thresholds(scores, val.labels, val.groups[: val.owners], base=0.5)
    d0 = plan_decisions(attribute_only.plan, scores, val, "model", config)
    assert _engine_di(config, val, d0, scores)["race_x_sex"] < 0.80
