"""Pooled (empirical-Bayes) estimates of intersection cells against the record-level oracle.

Tolerances. The point value is a deterministic function of the counts, so fast engine
and oracle agree to float rounding (1e-9). The pooled VFR of the engine and of the
oracle are independent estimates from K resamples each: with Z = 5 per comparison,
|pi_f - pi_o| <= Z * sqrt(2 pbar (1 - pbar) / K) + 2 / K for the pass shares (as in
tests/core/test_axis1.py). Seeds are fixed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import MetricRule, config_from_mapping
from monitor.config.engine import engine_options
from monitor.core.axis1 import evaluate_axis1, pooling_specs, run_axis1
from monitor.core.counts import CountTable
from monitor.core.intersections import Intersection
from monitor.core.jsonable import to_json
from monitor.core.metrics import Tallies
from monitor.core.pooling import (
    PoolingSpec,
    moment_strength,
    pooled_metric,
    shrunk_rates,
)
from monitor.reference.pooling import pooled_metric_from_records, reference_pooled_axis1
from monitor.store.codec import cell_result_from_json

Z = 5.0
POOLED_RULES = [
    MetricRule(name="DI", threshold=0.8, direction=">="),
    MetricRule(name="SPD", threshold=0.1, direction="abs<="),
    MetricRule(name="EOPP", threshold=0.1, direction="abs<="),
    MetricRule(name="EOD", threshold=0.1, direction="abs<="),
    MetricRule(name="PP", threshold=0.1, direction="abs<="),
]


def cohort(seed: int, n: int, races: int, rates: list[float]):
    """Records of a race x sex window: per record its race, sex, combined group, label,
    decision and score; ``rates`` the selection rate of each combined group."""
    rng = np.random.default_rng(seed)
    race = rng.choice(races, n, p=np.arange(1, races + 1) / sum(range(1, races + 1)))
    sex = rng.integers(0, 2, n)
    comb = race * 2 + sex
    label = rng.binomial(1, 0.4, n)
    decision = rng.binomial(1, np.asarray(rates)[comb])
    score = rng.random(n)
    groups = [f"r{r}:s{s}" for r in range(races) for s in range(2)]
    table = CountTable(groups)
    table.add(comb, label, decision, score)
    return groups, table, race, sex, comb, label, decision


def race_x_sex(races: int) -> Intersection:
    """The intersection of ``cohort``'s race and sex (race varies slowest, as comb)."""
    return Intersection(
        "race_x_sex", ("race", "sex"), (tuple(f"r{r}" for r in range(races)), ("s0", "s1"))
    )


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(150, 2_000),
    races=st.integers(2, 3),
    rates=st.lists(st.floats(0.05, 0.95), min_size=6, max_size=6),
    strength=st.one_of(st.none(), st.floats(1.0, 500.0)),
    ms=st.sampled_from([11, 20]),
)
def test_pooled_point_value_equals_oracle(seed, n, races, rates, strength, ms):
    groups, table, race, sex, comb, label, decision = cohort(seed, n, races, rates[: 2 * races])
    assert race_x_sex(races).groups == tuple(groups)
    parents = race_x_sex(races).parent_index()
    spec = PoolingSpec(parents, strength)
    point = Tallies.from_confusion(table.counts.sum(axis=-1).astype(float))
    support = table.group_counts() >= ms
    included = [g for g in range(len(groups)) if support[g]]
    for rule in POOLED_RULES:
        fast, _ = pooled_metric(rule.name, point, spec, support, ms)
        ref = pooled_metric_from_records(
            rule.name, [race, sex], parents, comb, label, decision, included, ms, strength
        )
        if math.isnan(ref):
            assert math.isnan(float(fast)), rule.name
        else:
            assert float(fast) == pytest.approx(ref, abs=1e-9), rule.name


@pytest.mark.parametrize(
    "seed,n,rates",
    [
        (1, 1_500, [0.30, 0.36, 0.45, 0.50, 0.40, 0.22]),
        (2, 600, [0.40, 0.42, 0.45, 0.47, 0.35, 0.45]),
        (3, 3_000, [0.20, 0.25, 0.22, 0.24, 0.18, 0.26]),
    ],
)
def test_pooled_bootstrap_matches_oracle(seed, n, rates):
    K = 300
    _, table, race, sex, comb, label, decision = cohort(seed, n, 3, rates)
    parents = race_x_sex(3).parent_index()
    fast = evaluate_axis1(
        {("m", "race_x_sex"): table}, POOLED_RULES, K=K, N=n, seed=seed,
        pooling={"race_x_sex": PoolingSpec(parents)},
    )  # fmt: skip
    rng = np.random.default_rng(100 + seed)
    for f, rule in zip(fast, POOLED_RULES, strict=True):
        ref = reference_pooled_axis1(
            rule.name, rule.threshold, rule.direction, [race, sex], parents, comb, label,
            decision, K=K, N=n, min_group_support=20, rng=rng,
        )  # fmt: skip
        assert f.pooled.value == pytest.approx(ref["value"], abs=1e-9)
        pf, po = f.pooled.n_pass / K, ref["n_pass"] / K
        pbar = (pf + po) / 2
        tol = Z * math.sqrt(2 * pbar * (1 - pbar) / K) + 2 / K
        assert abs(pf - po) <= tol, (rule.name, pf, po, tol)
        assert abs(f.pooled.vfr - ref["vfr"]) <= tol
        assert f.verdict_basis == "raw" and f.verdict is f.raw


def worked_example() -> dict[tuple[str, str], CountTable]:
    """docs/method.md, "Pooled estimates", worked example: (group, records, selected).

    Black women: 30 records, 9 selected (0.30); the other groups near 0.5."""
    counts = [("B:F", 30, 9), ("B:M", 200, 90), ("W:F", 400, 200), ("W:M", 400, 196)]
    table = CountTable([g for g, _, _ in counts])
    for g, (_, n, sel) in enumerate(counts):
        label = np.arange(n) % 2  # half positives, evenly over decisions
        decision = (np.arange(n) < sel).astype(int)
        table.add(np.full(n, g), label, decision, np.full(n, 0.5))
    return {("m", "race_x_sex"): table}


def pooling_config(**pooling):
    """Race (Black, White) and sex (Female, Male), their intersection, ``[pooling]``."""
    return config_from_mapping({
        "attributes": [
            {"name": "race", "groups": {"B": "Black", "W": "White"}},
            {"name": "sex", "groups": {"F": "Female", "M": "Male"}},
        ],
        "intersections": [{"attributes": ["race", "sex"]}],
        "metrics": {"DI": {"threshold": 0.8, "direction": ">="}},
        "pooling": pooling,
    })  # fmt: skip


def test_worked_example_pooling_changes_the_verdict():
    tables = worked_example()
    di = [MetricRule(name="DI", threshold=0.8, direction=">=")]
    spec = pooling_specs(tables, engine_options(pooling_config(enabled=True)))
    (cell,) = evaluate_axis1(tables, di, K=500, N=1030, seed=11, pooling=spec)
    # raw: 0.30 / 0.50 = 0.60, fails in (nearly) every resample
    assert cell.value == pytest.approx(0.6)
    assert cell.point_verdict == "fail" and cell.dominant_verdict == "fail"
    # pooled: the scatter around the logit-additive margins is no more than binomial
    # noise, so every group takes its prior mean: Black x Female 0.4358, Black x Male
    # 0.4266 (now the lowest), White x Female 0.5005 (the highest)
    assert math.isinf(cell.pooled.strength)
    assert cell.pooled.value == pytest.approx(0.4266 / 0.5005, abs=5e-4)
    assert cell.pooled.point_verdict == "pass" and cell.pooled.dominant_verdict == "pass"
    assert cell.verdict_basis == "raw"  # beside the raw one, not in its place
    # with a fixed prior of 100 records' weight the group is pulled only part of the way
    fixed = pooling_specs(
        tables, engine_options(pooling_config(enabled=True, prior_strength=100.0))
    )
    (cell100,) = evaluate_axis1(tables, di, K=500, N=1030, seed=11, pooling=fixed)
    assert cell100.pooled.value == pytest.approx(0.4045 / 0.5001, abs=5e-4)
    assert cell100.pooled.point_verdict == "pass"


def test_pooled_verdict_only_when_configured():
    tables = worked_example()
    cfg = pooling_config(enabled=True, verdict="pooled")
    (cell,) = run_axis1(tables, engine_options(cfg, threads=1), seed=3)
    assert cell.verdict_basis == "pooled"
    assert cell.verdict is cell.pooled and cell.point_verdict == "pass"
    assert cell.value == cell.pooled.value and cell.vfr == cell.pooled.vfr
    assert cell.raw.point_verdict == "fail" and cell.raw.value == pytest.approx(0.6)
    # the stored form: the pooled figures in the verdict fields, the raw ones in raw_*
    row = cell.to_dict()
    assert (row["value"], row["pooled_value"], row["verdict_basis"]) == (
        cell.pooled.value, cell.pooled.value, "pooled")
    assert (row["raw_point_verdict"], row["raw_value"]) == ("fail", cell.raw.value)
    # a JSON round trip gives the same cell, both estimates
    assert cell_result_from_json(json.loads(to_json(row))) == cell
    # off by default: the same grid has no pooled figures
    (plain,) = run_axis1(tables, engine_options(pooling_config()), seed=3)
    assert plain.verdict_basis == "raw" and plain.point_verdict == "fail"
    assert plain.pooled is None and plain.to_dict()["pooled_point_verdict"] is None


def test_only_combination_attributes_pool_and_only_binomial_metrics():
    tables = {("m", "race"): CountTable(["B", "W"]), **worked_example()}
    rules = [*POOLED_RULES[1:], MetricRule(name="TI", threshold=0.1, direction="abs<="),
             MetricRule(name="CAL", threshold=0.1, direction="<=")]  # fmt: skip
    cfg = pooling_config(enabled=True).model_copy(update={"metrics": rules})
    options = engine_options(cfg, threads=1)
    assert list(pooling_specs(tables, options)) == ["race_x_sex"]
    cells = run_axis1(tables, options, seed=1)
    pooled = {(c.attribute, c.metric) for c in cells if c.pooled is not None}
    assert pooled == {("race_x_sex", m) for m in ("SPD", "EOPP", "EOD", "PP")}


def test_no_excess_scatter_pools_fully_and_strength_follows_scatter():
    # four groups exactly at their prior mean: rho <= 0, s = inf, rates = prior
    succ = np.array([10.0, 20.0, 30.0, 40.0])
    trials = np.array([100.0, 100.0, 100.0, 100.0])
    m = np.array([0.1, 0.2, 0.3, 0.4])
    s = moment_strength(succ, trials, m, np.ones(4, bool))
    assert math.isinf(float(s))
    assert shrunk_rates(succ, trials, m, s).tolist() == pytest.approx(m.tolist())
    # large scatter: s finite and small, the rates stay near the raw ones
    succ2 = np.array([5.0, 60.0, 2.0, 90.0])
    s2 = float(moment_strength(succ2, trials, m, np.ones(4, bool)))
    assert 0 < s2 < 20
    post = shrunk_rates(succ2, trials, m, np.array(s2))
    assert np.all(np.abs(post - succ2 / trials) <= np.abs(m - succ2 / trials))


def test_pooling_applies_to_tables_built_from_a_configuration():
    """The way users meet it: a frame of records with race and sex codes, an
    ``[[intersections]]`` entry and ``[pooling]``; the tables come from the configuration
    (groups coded "2:1"). Before issue 38 the parents were split out of " x " names, so
    these tables pooled nothing, silently."""
    from monitor.bench.synthetic import synthetic_window
    from monitor.core.tables import tables_from_frame

    cfg = config_from_mapping({
        "intersections": [{"attributes": ["race", "sex"]}],
        "pooling": {"enabled": True, "prior_strength": 100},
        "models": [{"id": "model-00"}],
    })  # fmt: skip
    tables = tables_from_frame(synthetic_window(4000, models=1, seed=2), cfg)
    options = engine_options(cfg, threads=1)
    assert set(pooling_specs(tables, options)) == {"race_x_sex"}
    cells = run_axis1(tables, options, seed=5)
    pooled = {(c.metric, c.attribute) for c in cells if c.pooled is not None}
    assert pooled == {(m, "race_x_sex") for m in ("DI", "SPD", "EOPP", "EOD", "PP")}
    assert all(c.pooled.strength == 100.0 for c in cells if c.attribute == "race_x_sex"
               and c.metric in ("DI", "SPD"))  # fmt: skip
