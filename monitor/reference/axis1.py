"""The papers' Algorithm 1, record by record: the oracle for the count-level engine.

For each of K replicates, resample records with replacement inside every
(label x group) stratum, recompute every metric on the resampled records, and
count passing verdicts. O(K x N) per (model, attribute): far too slow for a
monitor, obviously correct, and independent of count tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from monitor.config import MetricRule
from monitor.core.axis1 import (
    allocate_resample,
    evaluability,
    left_out_groups,
    resample_size,
    summarise_draws,
)
from monitor.core.cell_result import CellResult, Estimate, verdict_word
from monitor.core.counts import CountTable
from monitor.core.metrics import passes, tallies_from_table
from monitor.reference.metrics import (
    evaluated_groups_from_records,
    metric_from_records,
    smallest_denominator_from_records,
)


def reference_axis1(
    model_id: str,
    attribute: str,
    groups: Sequence[str],
    group: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    score: np.ndarray,
    rules: Sequence[MetricRule],
    *,
    K: int = 500,
    N: int = 10_000,
    min_group_support: int = 20,
    bins: int = 10,
    rng: np.random.Generator,
) -> list[CellResult]:
    """Axis 1 cells of one (model, attribute) by record-level stratified bootstrap."""
    group = np.asarray(group)
    label = np.asarray(label)
    G = len(groups)
    strata_idx = [[np.flatnonzero((group == g) & (label == y)) for y in (0, 1)] for g in range(G)]
    counts = np.array([[len(ix) for ix in row] for row in strata_idx], dtype=np.int64).reshape(G, 2)
    window_n = int(counts.sum())
    sizes = allocate_resample(counts, resample_size(window_n, N))
    included = [g for g in range(G) if sizes[g].sum() >= min_group_support]
    included_point = [g for g in range(G) if counts[g].sum() >= min_group_support]

    draws = np.full((len(rules), K), np.nan)
    for k in range(K):
        parts = [
            ix[rng.integers(0, len(ix), size=sizes[g, y])]
            for g, row in enumerate(strata_idx)
            for y, ix in enumerate(row)
            if sizes[g, y] > 0
        ]
        pick = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        for r, rule in enumerate(rules):
            draws[r, k] = metric_from_records(
                rule.name, group[pick], label[pick], decision[pick], score[pick], included, bins,
                min_group_support,
            )

    # the not-evaluable reason and shortfall are bookkeeping on counts, not the metric
    window = tallies_from_table(
        CountTable.from_records(tuple(groups), group, label, decision, score, bins)
    )
    out = []
    for r, rule in enumerate(rules):
        point = metric_from_records(
            rule.name, group, label, decision, score, included_point, bins, min_group_support
        )
        s = summarise_draws(draws[r], rule.threshold, rule.direction)
        support = np.array([g in included for g in range(G)])
        support_pt = np.array([g in included_point for g in range(G)])
        scale = float(sizes.sum()) / window_n if window_n else 1.0
        ev = evaluability(
            rule.name, attribute, groups, window, float(point), int(s["n_undefined"]), K,
            min_group_support, scale,
        )  # fmt: skip
        out.append(
            CellResult(
                model_id=model_id,
                metric=rule.name,
                attribute=attribute,
                threshold=rule.threshold,
                direction=rule.direction,
                K=K,
                window_n=window_n,
                resample_n=int(sizes.sum()),
                groups_left_out=left_out_groups(groups, support),
                groups_left_out_point=left_out_groups(groups, support_pt),
                raw=Estimate(
                    value=float(point),
                    point_verdict=verdict_word(
                        bool(passes(np.array(point), rule.threshold, rule.direction)),
                        ev.evaluable,
                    ),
                    n_pass=int(s["n_pass"]),
                    vfr=float(s["vfr"]) if ev.evaluable else float("nan"),
                    dominant_verdict=verdict_word(bool(s["dominant_pass"]), ev.evaluable),
                    sigma=float(s["sigma"]) if ev.evaluable else float("nan"),
                    mean=float(s["mean"]),
                    sd=float(s["sd"]),
                    ci_low=float(s["ci_low"]),
                    ci_high=float(s["ci_high"]),
                    n_undefined=int(s["n_undefined"]),
                ),
                evaluability=ev,
                min_denominator=smallest_denominator_from_records(
                    rule.name, group, label, decision, included_point, min_group_support
                ),
                groups_evaluated=evaluated_groups_from_records(
                    rule.name, group, label, decision, included_point, min_group_support
                ),
                groups_total=G,
            )
        )
    return out


def reference_axis1_label_free(
    model_id: str,
    attribute: str,
    groups: Sequence[str],
    group: np.ndarray,
    decision: np.ndarray,
    score: np.ndarray,
    rules: Sequence[MetricRule],
    **kw,
) -> list[CellResult]:
    """Label-free cells (DI, SPD) of a window of predictions, some without their outcome
    (predictions now, outcomes later), by record-level bootstrap stratified by group only: every
    record is put in one label class, so the strata of :func:`reference_axis1` are the groups. The
    oracle of :func:`monitor.core.outcome_split.evaluate_split`'s label-free cells."""
    zeros = np.zeros(len(np.asarray(group)), dtype=np.int64)
    return reference_axis1(model_id, attribute, groups, group, zeros, decision, score, rules, **kw)
