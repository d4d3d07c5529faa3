"""Each axis run with the configuration's parameters: one place for the audit and the service.

The offline audit and the streaming service's scheduled jobs run the very same
computations on a cohort; this module is where a cohort (records as validated
frames, count tables) meets the axes, and where the axes meet the tiers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from batch_axes.audit_cell import AuditCell
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
    individual_fairness_gap,
    matched_pairs,
    mppd_pairwise,
    mppd_reference,
    scale_features,
)
from monitor.config import MonitorConfig
from monitor.core.axis1 import CellResult
from monitor.core.counts import CountTable
from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL
from monitor.core.tables import attribute_groups
from monitor.core.tiers import cell_tier

Tables = Mapping[tuple[str, str], CountTable]


def run_axis2(
    tables: Tables, config: MonitorConfig, cohort_days: Mapping[str, float | None] | None = None
) -> list[Axis2Cell]:
    """Axis 2 of every cell; with ``cohort_days`` (model -> span of its cohort's event
    times in days), each cell whose N* is not reached says how long this volume needs."""
    a = config.axis2
    ms = config.axis1.min_group_support
    cells = axis2(
        tables, config.metrics, sizes=a.sizes, R=a.R, cv_cutoff=a.cv_cutoff, n_field=a.n_field,
        min_group_support=ms, seed=config.axis1.seed,
    )  # fmt: skip
    if cohort_days is None:
        return cells
    return with_time_to_reliable(cells, tables, cohort_days, a.cv_cutoff, ms)


def cohort_days(records: pd.DataFrame) -> dict[str, float | None]:
    """Per model, the span of its records' event times in days (None without times)."""
    if "event_time" not in records:
        return {}
    times = pd.to_datetime(records["event_time"], utc=True)
    span = times.groupby(records["model_id"]).agg(lambda t: (t.max() - t.min()).total_seconds())
    return {str(m): float(v) / 86_400 for m, v in span.items()}


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


def run_axis3_counts(model_id: str, counts: CohortCounts, config: MonitorConfig) -> Axis3Result:
    """Axis 3 of one model's cohort kept as per-hospital count tables: the same result as
    :func:`run_axis3` on the cohort's records."""
    return axis3_from_counts(
        model_id, counts, config.metrics, min_group_support=config.axis1.min_group_support,
        n_folds=config.axis3.folds, kappa_cutoff=config.axis3.kappa_cutoff,
    )  # fmt: skip


def combine_cell(
    a1: CellResult, a2: Axis2Cell | None, a3: Axis3Result | None, config: MonitorConfig
) -> AuditCell:
    """One cells.csv row: the three axes of a cell and its tier."""
    cell3 = a3.cell(a1.metric, a1.attribute) if a3 is not None and a3.applicable else None
    applicable = a3 is None or a3.applicable
    tier = cell_tier(
        a1.vfr, a2.n_star if a2 else None, cell3.kappa if cell3 else None, applicable, config,
        a1.not_evaluable_reason,
    )  # fmt: skip
    if not a1.evaluable:  # no kappa of its own either (docs/method.md section 2)
        cell3 = None
    return AuditCell(
        model_id=a1.model_id,
        metric=a1.metric,
        attribute=a1.attribute,
        threshold=a1.threshold,
        direction=a1.direction,
        K=a1.K,
        groups_left_out=tuple(a1.groups_left_out),
        cohort_n=a1.window_n,
        value=a1.value,
        point_verdict=a1.point_verdict,
        dominant_verdict=a1.dominant_verdict,
        vfr=a1.vfr,
        sigma=a1.sigma,
        ci_low=a1.ci_low,
        ci_high=a1.ci_high,
        n_pass=a1.n_pass,
        resample_n=a1.resample_n,
        min_denominator=a1.min_denominator,
        tier=tier,
        n_star=a2.n_star if a2 else None,
        n_star_reached=a2.reached if a2 else None,
        kappa=cell3.kappa if cell3 else None,
        kappa_band=cell3.band if cell3 else _kappa_absent(a1, applicable),
        kappa_degenerate=cell3.degenerate if cell3 else None,
        axis3_note=(a3.note or a3.reason or "") if a3 is not None else "",
        n_undefined=a1.n_undefined,
        not_evaluable_reason=a1.not_evaluable_reason,
        records_needed=a1.records_needed,
        records_needed_groups=a1.records_needed_groups,
        kappa_reason=cell3.kappa_reason if cell3 else "",
        groups_evaluated=a1.groups_evaluated,
        groups_total=a1.groups_total,
        time_to_reliable=a2.to_reliable.text if a2 and a2.to_reliable else "",
        records_to_reliable=a2.to_reliable.records_needed if a2 and a2.to_reliable else None,
    )


def _kappa_absent(a1: CellResult, applicable: bool) -> str | None:
    """The kappa band of a cell without a kappa: none yet, or why there is none."""
    if not a1.evaluable:
        return "not evaluable"
    return None if applicable else "not applicable"


def run_equilense(
    records: pd.DataFrame,
    features: np.ndarray | None,
    feature_names: Sequence[str],
    tables: Tables,
    config: MonitorConfig,
) -> EquiLenseResult:
    """EquiLense group metrics per (model, attribute) and, with features, the IF gap and MPPD
    (small-cell rule applied).

    ``features`` has one row per record of ``records`` (same order), or is None.
    """
    eq = config.equilense
    group_metrics = tuple(
        r
        for (m, a), t in tables.items()
        for r in equilense_group_metrics(m, a, t, eq.min_group_size)
    )
    head = {"threshold": eq.threshold, "scaling": eq.scaling, "features": tuple(feature_names)}
    if features is None:
        note = "no similarity features configured ([equilense] features): MPPD not run"
        return EquiLenseResult(**head, group_metrics=group_metrics, mppd_note=note)
    models: dict[str, ModelMPPD] = {}
    model_ids = records["model_id"].to_numpy(dtype=object)
    for model_id in sorted(set(model_ids)):
        rows = np.flatnonzero(model_ids == model_id)
        if len(rows) < SMALL_CELL:  # a model of fewer than 11 records: nothing but its id
            models[str(model_id)] = ModelMPPD(SMALL_CELL_LABEL, None)
            continue
        X = scale_features(features[rows], eq.scaling)
        pairs = matched_pairs(X, eq.threshold)
        p = records["score"].to_numpy(np.float64)[rows]
        per_attr = {}
        for attr in config.attributes:
            codes = records[attr.name].to_numpy(dtype=str)[rows]
            names, counts = np.unique(codes, return_counts=True)
            sizes = {str(g): int(n) for g, n in zip(names, counts, strict=True)}
            entry = AttributeMPPD(
                mppd_reference(
                    p, codes, pairs, reference=eq.reference.get(attr.name), min_pairs=eq.min_pairs
                ),
                mppd_pairwise(p, codes, pairs, min_pairs=eq.min_pairs),
            )
            per_attr[attr.name] = suppress_small_cells(entry, sizes)
        gap = suppress_small_gap(individual_fairness_gap(p, pairs, eq.min_pairs))
        models[str(model_id)] = ModelMPPD(len(rows), gap, per_attr)
    return EquiLenseResult(**head, group_metrics=group_metrics, models=models)
