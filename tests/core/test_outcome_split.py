"""Axis 1 on a window of predictions (issue 23): label-free cells on every prediction,
stratified by group only, checked against the record-level oracle; label-based cells on
the predictions whose outcome has arrived."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import MonitorConfig
from monitor.core.axis1 import evaluate_axis1
from monitor.core.counts import CountTable
from monitor.core.outcome_split import (
    evaluate_split,
    label_free_tables,
    needs_label,
    split_rules,
)
from monitor.reference.axis1 import reference_axis1_label_free
from tests.core.test_axis1 import assert_close_to_oracle
from tests.support.strategies import cohorts

RULES = MonitorConfig().metrics
FREE, LABELLED = split_rules(RULES)


def _split(cohort, known):
    groups, g, y, d, s = cohort
    joined = CountTable.from_records(groups, g[known], y[known], d[known], s[known])
    pending = CountTable.from_records(groups, g[~known], np.zeros((~known).sum(), np.int64),
                                      d[~known], s[~known])  # fmt: skip
    return {("m", "a"): joined}, {("m", "a"): pending}


def test_which_metrics_need_the_label():
    assert [r.name for r in FREE] == ["DI", "SPD"]
    assert all(needs_label(r.name) for r in LABELLED) and not needs_label("DI")


@settings(max_examples=20, deadline=None)
@given(
    cohort=cohorts(max_n=400, min_n=0),
    share=st.sampled_from([0.0, 0.3, 1.0]),
    seed=st.integers(0, 2**31),
)
def test_label_free_cells_match_the_group_stratified_oracle(cohort, share, seed):
    groups, g, _y, d, s = cohort
    known = np.random.default_rng(seed).random(len(g)) < share
    joined, pending = _split(cohort, known)
    K = 300
    kw = {"K": K, "N": 10_000, "min_group_support": 10}
    fast = evaluate_split(label_free_tables(joined, pending), joined, FREE, seed=seed, **kw)
    rng = np.random.default_rng(seed + 1)
    ref = reference_axis1_label_free("m", "a", groups, g, d, s, FREE, rng=rng, **kw)
    assert len(fast) == len(ref) == 2
    for f, r in zip(fast, ref, strict=True):
        assert f.window_n == len(g)  # every prediction, known label or not
        assert_close_to_oracle(f, r, K)


def test_label_based_cells_rest_on_the_records_with_an_outcome():
    rng = np.random.default_rng(7)
    n = 600
    g, y = rng.integers(0, 2, n), rng.integers(0, 2, n)
    d, s = rng.integers(0, 2, n), rng.random(n)
    known = rng.random(n) < 0.6
    cohort = (("F", "M"), g, y, d, s)
    joined, pending = _split(cohort, known)
    split = evaluate_split(label_free_tables(joined, pending), joined, RULES, K=100, seed=3)
    alone = evaluate_axis1(joined, LABELLED, K=100, seed=3)
    by_metric = {r.metric: r for r in split}
    assert [r.metric for r in split] == [r.name for r in RULES]  # one call's order
    for r in alone:
        assert by_metric[r.metric].to_dict() == r.to_dict()
        assert r.window_n == int(known.sum())
    assert by_metric["DI"].window_n == n


def test_a_joined_only_window_gives_the_same_point_values():
    """All outcomes in: the label-free values are the old ones (only the bootstrap strata
    changed, from label x group to group)."""
    rng = np.random.default_rng(11)
    n = 500
    g, y, d, s = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 2, n), rng.random(n)
    joined, pending = _split((("F", "M"), g, y, d, s), np.ones(n, bool))
    old = evaluate_axis1(joined, FREE, K=50, seed=1)
    new = evaluate_split(label_free_tables(joined, pending), joined, FREE, K=50, seed=1)
    assert [r.value for r in new] == [r.value for r in old]
