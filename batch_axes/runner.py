"""Each axis run with the configuration's parameters: one place for the audit and the service.

The offline audit and the streaming service's scheduled jobs run the very same
computations on a cohort; this module is where a cohort (records as validated
frames, count tables) meets the axes, and where the axes meet the tiers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from batch_axes.axis2 import Axis2Cell, axis2
from batch_axes.axis3 import Axis3Result, axis3, hospital_folds
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
from monitor.core.numbers import float_or_none
from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL
from monitor.core.tables import group_index
from monitor.core.tiers import cell_tier

Tables = Mapping[tuple[str, str], CountTable]


def run_axis2(tables: Tables, config: MonitorConfig) -> list[Axis2Cell]:
    a = config.axis2
    return axis2(
        tables, config.metrics, sizes=a.sizes, R=a.R, cv_cutoff=a.cv_cutoff, n_field=a.n_field,
        min_group_support=config.axis1.min_group_support, seed=config.axis1.seed,
    )  # fmt: skip


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
) -> dict[str, Any]:
    """One cells.csv row: the three axes of a cell and its tier."""
    cell3 = a3.cell(a1.metric, a1.attribute) if a3 is not None and a3.applicable else None
    applicable = a3 is None or a3.applicable
    tier = cell_tier(
        a1.vfr, a2.n_star if a2 else None, cell3.kappa if cell3 else None, applicable, config
    )
    return {
        "model_id": a1.model_id,
        "metric": a1.metric,
        "attribute": a1.attribute,
        "value": float_or_none(a1.value),
        "point_verdict": a1.point_verdict,
        "dominant_verdict": a1.dominant_verdict,
        "vfr": a1.vfr,
        "sigma": "inf" if math.isinf(a1.sigma) else float_or_none(a1.sigma),
        "ci_low": float_or_none(a1.ci_low),
        "ci_high": float_or_none(a1.ci_high),
        "n_star": (a2.n_star if math.isfinite(a2.n_star) else "inf") if a2 else None,
        "kappa": cell3.kappa if cell3 else None,
        "kappa_band": cell3.band if cell3 else (None if applicable else "not applicable"),
        "failed_axes": "+".join(tier.failed_axes),
        "tier": tier.tier.value,
        "partial": tier.partial,
        "pending_axes": "+".join(tier.pending_axes),
        "threshold": a1.threshold,
        "direction": a1.direction,
        "n_pass": a1.n_pass,
        "K": a1.K,
        "resample_n": a1.resample_n,
        "cohort_n": a1.window_n,
        "groups_left_out": " ".join(a1.groups_left_out),
        "n_star_reached": a2.reached if a2 else None,
        "kappa_degenerate": cell3.degenerate if cell3 else None,
        "axis3_note": (a3.note or a3.reason or "") if a3 is not None else "",
        # the fewest records any rate of the value rests on (the support rule)
        "min_denominator": float_or_none(a1.min_denominator),
    }


def suppress_small_pair_counts(d: Any) -> Any:
    """Small-cell rule for MPPD output: a mean over fewer than 11 pairs is withheld.

    Why: a mean over one pair is |p_i - p_j| of two identifiable patients, a
    record-level value. Entries are recognised by their ``pairs`` field (an int
    next to ``mean``); pairwise matrices are masked cell by cell.
    """
    if isinstance(d, list):
        return [suppress_small_pair_counts(x) for x in d]
    if not isinstance(d, dict):
        return d
    out = {k: suppress_small_pair_counts(v) for k, v in d.items()}
    if isinstance(out.get("pairs"), int) and "mean" in out and out["pairs"] < SMALL_CELL:
        out["mean"] = None
        out["pairs"] = SMALL_CELL_LABEL
        if "gap_to_reference" in out:
            out["gap_to_reference"] = None
    if isinstance(out.get("means"), list) and isinstance(out.get("pairs"), list):
        out["means"] = [
            [m if n >= SMALL_CELL else None for m, n in zip(mr, nr, strict=True)]
            for mr, nr in zip(out["means"], out["pairs"], strict=True)
        ]
        out["pairs"] = [
            [n if n >= SMALL_CELL else SMALL_CELL_LABEL for n in nr] for nr in out["pairs"]
        ]
    return out


def suppress_small_groups(per_attr: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any]:
    """Small-cell rule for MPPD by group records: a group with fewer than 11 records is
    withheld however many pairs it has (its mean is a figure about fewer than 11
    patients); a pairwise cell is withheld when either group is small; the disparity is
    taken over the groups still shown.
    """
    small = {g for g, n in sizes.items() if n < SMALL_CELL}
    ref = per_attr["reference"]
    ref_small = ref.get("reference") in small
    for entry in ref["groups"]:
        if entry["group"] in small:
            entry.update(mean=None, pairs=SMALL_CELL_LABEL, gap_to_reference=None)
        elif ref_small:
            entry["gap_to_reference"] = None
    pw = per_attr["pairwise"]
    names = pw["groups"]
    for x, a in enumerate(names):
        for y, b in enumerate(names):
            if a in small or b in small:
                pw["means"][x][y] = None
                pw["pairs"][x][y] = SMALL_CELL_LABEL
    return per_attr


def _disparity_of_shown(per_attr: dict[str, Any]) -> dict[str, Any]:
    """The reference disparity recomputed over the means left after suppression."""
    ref = per_attr["reference"]
    shown = [e["mean"] for e in ref["groups"] if e["mean"] is not None]
    ref["disparity"] = max(shown) - min(shown) if len(shown) >= 2 else None
    return per_attr


def run_equilense(
    records: pd.DataFrame,
    features: np.ndarray | None,
    feature_names: Sequence[str],
    tables: Tables,
    config: MonitorConfig,
) -> dict[str, Any]:
    """EquiLense group metrics per (model, attribute) and, with features, the IF gap and MPPD.

    ``features`` has one row per record of ``records`` (same order), or is None.
    """
    eq = config.equilense
    out: dict[str, Any] = {
        "threshold": eq.threshold,
        "scaling": eq.scaling,
        "features": list(feature_names),
        "group_metrics": [
            r.to_dict()
            for (m, a), t in tables.items()
            for r in equilense_group_metrics(m, a, t, eq.min_group_size)
        ],
        "models": {},
    }
    if features is None:
        out["mppd_note"] = "no similarity features configured ([equilense] features): MPPD not run"
        return out
    model_ids = records["model_id"].to_numpy(dtype=object)
    for model_id in sorted(set(model_ids)):
        rows = np.flatnonzero(model_ids == model_id)
        X = scale_features(features[rows], eq.scaling)
        pairs = matched_pairs(X, eq.threshold)
        p = records["score"].to_numpy(np.float64)[rows]
        per_attr = {}
        group_sizes: dict[str, dict[str, int]] = {}
        for attr in config.attributes:
            codes = records[attr.name].to_numpy(dtype=str)[rows]
            names, counts = np.unique(codes, return_counts=True)
            sizes = {str(g): int(n) for g, n in zip(names, counts, strict=True)}
            per_attr[attr.name] = {
                "reference": mppd_reference(
                    p, codes, pairs, reference=eq.reference.get(attr.name), min_pairs=eq.min_pairs
                ).to_dict(),
                "pairwise": mppd_pairwise(p, codes, pairs, min_pairs=eq.min_pairs).to_dict(),
            }
            group_sizes[attr.name] = sizes
        model = suppress_small_pair_counts(
            {
                "records": len(rows),
                "individual_fairness_gap": individual_fairness_gap(
                    p, pairs, eq.min_pairs
                ).to_dict(),
                "mppd": per_attr,
            }
        )
        for name, entry in model["mppd"].items():
            _disparity_of_shown(suppress_small_groups(entry, group_sizes[name]))
        if len(rows) < SMALL_CELL:  # a model of fewer than 11 records: nothing but its id
            model = {"records": SMALL_CELL_LABEL, "individual_fairness_gap": None, "mppd": {}}
        out["models"][str(model_id)] = model
    return out
