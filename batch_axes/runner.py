"""Each axis run with the configuration's parameters: one place for the audit and the service.

The offline audit and the streaming service's scheduled jobs run the very same
computations on a cohort; this module is where a cohort (records as validated
frames, count tables) meets the axes, and where the axes meet the tiers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from batch_axes.axis2 import Axis2Cell, axis2, with_time_to_reliable
from batch_axes.axis3 import Axis3Result, axis3, axis3_from_counts, hospital_folds
from batch_axes.cohort_counts import CohortCounts
from batch_axes.equilense import (
    AttributeMPPD,
    EquiLenseResult,
    ModelMPPD,
    suppress_small_cells,
    suppress_small_gap,
)
from batch_axes.equilense_groups import equilense_group_metrics
from batch_axes.mppd import (
    Pairs,
    _choose_reference,
    individual_fairness_gap,
    matched_pairs,
    mppd_pairwise,
    mppd_reference,
    scale_features,
)
from batch_axes.mppd_sample import (
    MPPDSampling,
    StratifiedSample,
    bounded_sample,
    pair_weights,
    sample_keys,
    sampled_attribute,
    sampled_gap,
    strata_codes,
    with_disparity_error,
)
from monitor.config import MetricRule, MonitorConfig
from monitor.core.cell_result import CellResult
from monitor.core.counts import CountTable
from monitor.core.outcome_split import split_rules, split_tables_from_frame
from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL
from monitor.core.results import CellEvaluation, axes_tier
from monitor.core.tables import attribute_groups, tables_from_frame

Tables = Mapping[tuple[str, str], CountTable]


def run_axis2(
    tables: Tables,
    config: MonitorConfig,
    cohort_days: Mapping[str, float | None] | None = None,
    rules: Sequence[MetricRule] | None = None,
) -> list[Axis2Cell]:
    """Axis 2 of every cell (of ``rules``, default the configured metrics); with
    ``cohort_days`` (model -> span of its cohort's event times in days), each cell whose
    N* is not reached says how long this volume needs."""
    a = config.axis2
    ms = config.axis1.min_group_support
    cells = axis2(
        tables, config.metrics if rules is None else rules, sizes=a.sizes, R=a.R,
        cv_cutoff=a.cv_cutoff, n_field=a.n_field, min_group_support=ms, seed=config.axis1.seed,
    )  # fmt: skip
    if cohort_days is None:
        return cells
    return with_time_to_reliable(cells, tables, cohort_days, a.cv_cutoff, ms)


def run_axis2_counts(
    model_id: str,
    counts: CohortCounts,
    config: MonitorConfig,
    free: CohortCounts | None = None,
    span_days: float | None = None,
) -> list[Axis2Cell]:
    """Axis 2 of a cohort kept as counts (monitor.service.cohort_book): ``counts`` holds
    the records with an outcome; ``free``, while some predictions wait for theirs, every
    record at label 0 (predictions now, outcomes later: label-free metrics on it, label-based on
    ``counts``; the same cells as :func:`run_axis2_split` on the cohort's records)."""
    days = {model_id: span_days}
    joined = {(model_id, k): t for k, t in counts.tables.items()}
    if free is None:
        return run_axis2(joined, config, days)
    every = {(model_id, k): t for k, t in free.tables.items()}
    free_rules, labelled = split_rules(config.metrics)
    return run_axis2(every, config, days, free_rules) + run_axis2(joined, config, days, labelled)


def cohort_days(records: pd.DataFrame) -> dict[str, float | None]:
    """Per model, the span of its records' event times in days (None without times)."""
    if "event_time" not in records:
        return {}
    times = pd.to_datetime(records["event_time"], utc=True)
    span = times.groupby(records["model_id"]).agg(lambda t: (t.max() - t.min()).total_seconds())
    return {str(m): float(v) / 86_400 for m, v in span.items()}


def run_axis2_split(
    records: pd.DataFrame, config: MonitorConfig, days: Mapping[str, float | None] | None = None
) -> list[Axis2Cell]:
    """Axis 2 of a cohort of predictions (predictions now, outcomes later): label-free metrics on
    every record, label-based ones on the records whose outcome has arrived (label -1: not yet). A
    cohort whose every outcome is in is one run, as before predictions came alone (a
    joint subsample of every cell gives each metric the same draw either way)."""
    if (records["label"].to_numpy(np.int64) >= 0).all():
        return run_axis2(tables_from_frame(records, config), config, days)
    free_tables, joined_tables = split_tables_from_frame(records, config)
    free, labelled = split_rules(config.metrics)
    return run_axis2(free_tables, config, days, free) + run_axis2(
        joined_tables, config, days, labelled
    )


def run_axis3_split(model_id: str, records: pd.DataFrame, config: MonitorConfig) -> Axis3Result:
    """Axis 3 of a cohort of predictions (predictions now, outcomes later): the label-free metrics'
    agreement on every record (label taken as 0, unused by them), the label-based metrics' on the
    records with an outcome; the result's cohort figures are those of every record."""
    known = records["label"].to_numpy(np.int64) >= 0
    if known.all():
        return run_axis3(model_id, records, config)
    free, labelled = split_rules(config.metrics)
    base = run_axis3(model_id, records.assign(label=0), config.model_copy(update={"metrics": free}))
    if not labelled or not known.any():
        return base
    part = run_axis3(
        model_id, records[known], config.model_copy(update={"metrics": labelled})
    )
    return replace(base, metrics=base.metrics + part.metrics, cells=base.cells + part.cells)


def run_axis3(model_id: str, records: pd.DataFrame, config: MonitorConfig) -> Axis3Result:
    """Axis 3 of one model's cohort (validated records with hospital_id)."""
    folds = hospital_folds(records["hospital_id"].to_numpy(dtype=object), config.axis3.folds)
    return axis3(
        model_id,
        None,
        records["label"].to_numpy(np.int64),
        records["decision"].to_numpy(np.int64),
        records["score"].to_numpy(np.float64),
        attribute_groups(records, config),
        config.grid_attributes,
        config.metrics,
        min_group_support=config.axis1.min_group_support,
        bins=config.axis1.score_bins,
        n_folds=config.axis3.folds,
        kappa_cutoff=config.axis3.kappa_cutoff,
        folds=folds,
    )


def run_axis3_counts(
    model_id: str,
    counts: CohortCounts,
    config: MonitorConfig,
    free: CohortCounts | None = None,
) -> Axis3Result:
    """Axis 3 of one model's cohort kept as per-hospital count tables: the same result as
    :func:`run_axis3` on the cohort's records; with ``free`` (some predictions wait for
    their outcome), as :func:`run_axis3_split`: the label-free metrics on every record,
    the label-based ones on ``counts``, the records with an outcome."""
    kw: dict[str, Any] = dict(
        min_group_support=config.axis1.min_group_support, n_folds=config.axis3.folds,
        kappa_cutoff=config.axis3.kappa_cutoff,
    )  # fmt: skip
    if free is None:
        return axis3_from_counts(model_id, counts, config.metrics, **kw)
    free_rules, labelled = split_rules(config.metrics)
    base = axis3_from_counts(model_id, free, free_rules, **kw)
    if not labelled or not counts.n:
        return base
    part = axis3_from_counts(model_id, counts, labelled, **kw)
    return replace(base, metrics=base.metrics + part.metrics, cells=base.cells + part.cells)


def cell_with_axes(
    a1: CellResult, a2: Axis2Cell | None, a3: Axis3Result | None, config: MonitorConfig
) -> CellEvaluation:
    """One cell of an audit: its Axis 1 result, what Axis 2 and Axis 3 say of it (None: not
    run) and the tier they give (:func:`monitor.core.results.axes_tier`, as the stream's)."""
    o2 = None if a2 is None else a2.outcome()
    o3 = None if a3 is None else a3.outcome(a1.metric, a1.attribute)
    return CellEvaluation(a1, axes_tier(a1, o2, o3, config), o2, o3)


def run_equilense(
    records: pd.DataFrame,
    features: np.ndarray | None,
    feature_names: Sequence[str],
    tables: Tables,
    config: MonitorConfig,
) -> EquiLenseResult:
    """EquiLense group metrics per (model, attribute) and, with features, the IF gap and MPPD
    (small-cell rule applied).

    ``features`` has one row per record of ``records`` (same order), or is None. The group
    metrics come from the count tables (O(strata)); MPPD is on all of a model's records
    while they stay within ``[equilense] sample_records`` and ``sample_pairs``, else on a
    stratified sample (:mod:`batch_axes.mppd_sample`), as the result's ``sampling`` says.
    """
    eq = config.equilense
    if features is None:
        note = "no similarity features configured ([equilense] features): MPPD not run"
        return run_equilense_groups(tables, config, feature_names, note)
    models: dict[str, ModelMPPD] = {}
    model_ids = records["model_id"].to_numpy(dtype=object)
    for model_id in sorted(set(model_ids)):
        rows = np.flatnonzero(model_ids == model_id)
        if len(rows) < SMALL_CELL:  # a model of fewer than 11 records: nothing but its id
            models[str(model_id)] = ModelMPPD(SMALL_CELL_LABEL, None)
            continue
        # one model's cohort (the service's case): no copy of its frame and features
        whole = rows.size == len(records)
        # scaled on the whole cohort (docs/method.md section 7), sampled or not
        X = scale_features(features if whole else features[rows], eq.scaling)
        mine = records if whole else records.iloc[rows]
        models[str(model_id)] = _model_mppd(mine, X, config)
    return replace(run_equilense_groups(tables, config, feature_names, None), models=models)


def run_equilense_groups(
    tables: Tables, config: MonitorConfig, feature_names: Sequence[str], note: str | None
) -> EquiLenseResult:
    """EquiLense's group metrics per (model, attribute), from the count tables alone
    (O(strata)); ``note``: why there is no MPPD (no features; the table engine: no
    records), None when the caller adds it."""
    eq = config.equilense
    group_metrics = tuple(
        r
        for (m, a), t in tables.items()
        for r in equilense_group_metrics(m, a, t, eq.min_group_size)
    )
    return EquiLenseResult(
        threshold=eq.threshold, scaling=eq.scaling, features=tuple(feature_names),
        group_metrics=group_metrics, mppd_note=note,
    )  # fmt: skip


def _model_mppd(records: pd.DataFrame, X: np.ndarray, config: MonitorConfig) -> ModelMPPD:
    """One model's IF gap and MPPD per attribute: exact within the sample bounds, else
    on the bounded stratified sample."""
    eq = config.equilense
    n = len(records)
    p = records["score"].to_numpy(np.float64)
    # group labels as codes into their names: one hash pass, not a string copy per record
    factors = {
        a.name: (c, np.asarray(names, dtype=str))
        for a in config.attributes
        for c, names in [pd.factorize(records[a.name], sort=True)]
    }
    if eq.sample_records == 0:
        return _exact_mppd(p, _labels(factors), matched_pairs(X, eq.threshold), config, None)
    ids = records["record_id"].to_numpy(dtype=object) if "record_id" in records else np.arange(n)
    strata = strata_codes(records["label"].to_numpy(), [c for c, _ in factors.values()])
    bounded = bounded_sample(
        X, strata, sample_keys(ids, eq.sample_seed), threshold=eq.threshold,
        max_records=eq.sample_records, max_pairs=eq.sample_pairs, floor=eq.sample_stratum_floor,
    )  # fmt: skip
    s = bounded.sample
    how = MPPDSampling(
        method="all records" if s.is_census else "stratified sample", records=s.size,
        cohort_records=n, seed=eq.sample_seed, strata=int(s.N.size),
        max_records=eq.sample_records, max_pairs=eq.sample_pairs,
    )  # fmt: skip
    if s.is_census:  # the sample is the cohort: the exact figures
        return _exact_mppd(p, _labels(factors), bounded.pairs, config, how)
    return _sampled_mppd(s, bounded.pairs, p, factors, config, how)


def _labels(factors: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """Each record's group label per attribute, from its factorised codes."""
    return {k: names[c] for k, (c, names) in factors.items()}


def _exact_mppd(
    p: np.ndarray,
    codes: Mapping[str, np.ndarray],
    pairs: Pairs,
    config: MonitorConfig,
    how: MPPDSampling | None,
) -> ModelMPPD:
    eq = config.equilense
    per_attr = {}
    for name, c in codes.items():
        entry = AttributeMPPD(
            mppd_reference(p, c, pairs, reference=eq.reference.get(name), min_pairs=eq.min_pairs),
            mppd_pairwise(p, c, pairs, min_pairs=eq.min_pairs),
        )
        per_attr[name] = suppress_small_cells(entry, _sizes(c))
    gap = suppress_small_gap(individual_fairness_gap(p, pairs, eq.min_pairs))
    return ModelMPPD(len(p), gap, per_attr, how)


def _sampled_mppd(
    s: StratifiedSample,
    pairs: Pairs,
    p: np.ndarray,
    factors: Mapping[str, tuple[np.ndarray, np.ndarray]],
    config: MonitorConfig,
    how: MPPDSampling,
) -> ModelMPPD:
    """MPPD on the sample: weighted estimates with errors, the small-cell rule applied
    with the groups' records in the sample (the records the figures rest on)."""
    eq = config.equilense
    wij = pair_weights(s, pairs)
    ps = p[s.rows]
    per_attr = {}
    for name, (c, names) in factors.items():
        # the reference: configured, else the cohort's largest group (not the sample's)
        ref = _choose_reference(names, c, eq.reference.get(name))
        labels = names[c[s.rows]]
        attr = sampled_attribute(s, pairs, wij, ps, labels, ref, eq.min_pairs)
        entry = suppress_small_cells(AttributeMPPD(attr.reference, attr.pairwise), _sizes(labels))
        per_attr[name] = AttributeMPPD(
            with_disparity_error(entry.reference, attr, s), entry.pairwise
        )
    gap = suppress_small_gap(sampled_gap(s, pairs, wij, ps, eq.min_pairs))
    return ModelMPPD(len(p), gap, per_attr, how)


def _sizes(codes: np.ndarray) -> dict[str, int]:
    names, counts = np.unique(codes, return_counts=True)
    return {str(g): int(n) for g, n in zip(names, counts, strict=True)}
