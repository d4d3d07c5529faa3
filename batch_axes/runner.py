"""Each axis run with the configuration's parameters: one place for the audit and the service.

The offline audit and the streaming service's scheduled jobs run the very same
computations on a cohort; this module is where a cohort (records as validated
frames, count tables) meets the axes, and where the axes meet the tiers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from batch_axes.audit_cell import AuditCell
from batch_axes.axis2 import Axis2Cell, axis2
from batch_axes.axis3 import Axis3Result, axis3, hospital_folds
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
from monitor.core.outcome_split import split_rules, split_tables_from_frame
from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL
from monitor.core.tables import group_index, tables_from_frame
from monitor.core.tiers import cell_tier

Tables = Mapping[tuple[str, str], CountTable]


def run_axis2(tables: Tables, config: MonitorConfig) -> list[Axis2Cell]:
    a = config.axis2
    return axis2(
        tables, config.metrics, sizes=a.sizes, R=a.R, cv_cutoff=a.cv_cutoff, n_field=a.n_field,
        min_group_support=config.axis1.min_group_support, seed=config.axis1.seed,
    )  # fmt: skip


def run_axis2_split(records: pd.DataFrame, config: MonitorConfig) -> list[Axis2Cell]:
    """Axis 2 of a cohort of predictions (issue 23): label-free metrics on every record,
    label-based ones on the records whose outcome has arrived (label -1: not yet). A
    cohort whose every outcome is in is one run, as before predictions came alone (a
    joint subsample of every cell gives each metric the same draw either way)."""
    if (records["label"].to_numpy(np.int64) >= 0).all():
        return run_axis2(tables_from_frame(records, config), config)
    free_tables, joined_tables = split_tables_from_frame(records, config)
    free, labelled = split_rules(config.metrics)
    a = config.axis2
    kw = dict(sizes=a.sizes, R=a.R, cv_cutoff=a.cv_cutoff, n_field=a.n_field,
              min_group_support=config.axis1.min_group_support, seed=config.axis1.seed)  # fmt: skip
    cells = axis2(free_tables, free, **kw) if free else []
    return cells + (axis2(joined_tables, labelled, **kw) if labelled else [])


def run_axis3_split(model_id: str, records: pd.DataFrame, config: MonitorConfig) -> Axis3Result:
    """Axis 3 of a cohort of predictions (issue 23): the label-free metrics' agreement on
    every record (label taken as 0, unused by them), the label-based metrics' on the
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
        {a.name: group_index(records[a.name].to_numpy(), a) for a in config.attributes},
        config.attributes,
        config.metrics,
        min_group_support=config.axis1.min_group_support,
        bins=config.axis1.score_bins,
        n_folds=config.axis3.folds,
        kappa_cutoff=config.axis3.kappa_cutoff,
        folds=folds,
    )


def combine_cell(
    a1: CellResult, a2: Axis2Cell | None, a3: Axis3Result | None, config: MonitorConfig
) -> AuditCell:
    """One cells.csv row: the three axes of a cell and its tier."""
    cell3 = a3.cell(a1.metric, a1.attribute) if a3 is not None and a3.applicable else None
    applicable = a3 is None or a3.applicable
    tier = cell_tier(
        a1.vfr, a2.n_star if a2 else None, cell3.kappa if cell3 else None, applicable, config
    )
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
        kappa_band=cell3.band if cell3 else (None if applicable else "not applicable"),
        kappa_degenerate=cell3.degenerate if cell3 else None,
        axis3_note=(a3.note or a3.reason or "") if a3 is not None else "",
    )


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
