"""`vfr-monitor audit`: the papers' batch procedure on a scored cohort file.

Every cell of every model gets Axis 1 (VFR on the whole cohort), Axis 2 (N*),
Axis 3 (hospital kappa, or "not applicable" when the file has no hospital ids)
and a reliability tier; EquiLense group metrics and MPPD are computed per
(model, attribute). Results go to ``DIR/cells.csv``, ``DIR/cells.json`` and
``DIR/mppd.json``; a summary table is printed.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from batch_axes.axis2 import Axis2Cell, axis2
from batch_axes.axis3 import Axis3Result, axis3, hospital_folds
from batch_axes.equilense_groups import SMALL_CELL, equilense_group_metrics
from batch_axes.mppd import (
    individual_fairness_gap,
    matched_pairs,
    mppd_pairwise,
    mppd_reference,
    scale_features,
)
from monitor.audit_input import AuditCohort, load_audit_cohort
from monitor.axis1 import CellResult, evaluate_axis1
from monitor.config import MonitorConfig
from monitor.tables import group_index, tables_from_frame
from monitor.tiers import axis1_fails, axis2_fails, axis3_fails, reliability_tier

#: Columns of cells.csv, in order (the first fifteen are the issue's contract).
CELL_COLUMNS = (
    "model_id", "metric", "attribute", "value", "point_verdict", "dominant_verdict", "vfr",
    "sigma", "ci_low", "ci_high", "n_star", "kappa", "kappa_band", "failed_axes", "tier",
    "partial", "pending_axes", "threshold", "direction", "n_pass", "K", "resample_n",
    "cohort_n", "groups_left_out", "n_star_reached", "kappa_degenerate", "axis3_note",
)  # fmt: skip


@dataclass
class AuditReport:
    """Everything an audit produced, ready to be written or inspected."""

    cells: list[dict[str, Any]]
    equilense: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Progress:
    """Prints a line per step with its duration, to stderr (stdout holds the summary)."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.timings: dict[str, float] = {}

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        if self.enabled:
            print(f"[audit] {name} ...", file=self.stream, flush=True)
        t0 = time.perf_counter()
        out = fn()
        self.timings[name] = round(time.perf_counter() - t0, 3)
        if self.enabled:
            print(
                f"[audit] {name} done in {self.timings[name]:.2f} s", file=self.stream, flush=True
            )
        return out


def _num(x: float | None) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return float(x)


def _axis3_by_model(cohort: AuditCohort, config: MonitorConfig) -> dict[str, Axis3Result]:
    out = {}
    records = cohort.records
    for model_id, sub in records.groupby("model_id", sort=True):
        ids = sub["hospital_id"].to_numpy(dtype=object)
        folds = hospital_folds(ids, config.axis3.folds)
        out[str(model_id)] = axis3(
            str(model_id),
            None,
            sub["label"].to_numpy(np.int64),
            sub["decision"].to_numpy(np.int64),
            sub["score"].to_numpy(np.float64),
            {a.name: group_index(sub[a.name].to_numpy(), a) for a in config.attributes},
            config.attributes,
            config.metrics,
            min_group_support=config.axis1.min_group_support,
            bins=config.axis1.score_bins,
            n_folds=config.axis3.folds,
            kappa_cutoff=config.axis3.kappa_cutoff,
            folds=folds,
        )
    return out


def combine_cell(
    a1: CellResult, a2: Axis2Cell | None, a3: Axis3Result | None, config: MonitorConfig
) -> dict[str, Any]:
    """One cells.csv row: the three axes of a cell and its tier."""
    cell3 = a3.cell(a1.metric, a1.attribute) if a3 is not None and a3.applicable else None
    if a3 is not None and not a3.applicable:
        out3 = axis3_fails(None, applicable=False)
    else:
        out3 = axis3_fails(cell3.kappa if cell3 else None, config.axis3.kappa_cutoff)
    tier = reliability_tier(
        axis1_fails(a1.vfr, config.axis1.tau_vfr),
        axis2_fails(a2.n_star if a2 else None, config.axis2.n_field),
        out3,
    )
    return {
        "model_id": a1.model_id,
        "metric": a1.metric,
        "attribute": a1.attribute,
        "value": _num(a1.value),
        "point_verdict": a1.point_verdict,
        "dominant_verdict": a1.dominant_verdict,
        "vfr": a1.vfr,
        "sigma": _num(a1.sigma) if math.isfinite(a1.sigma) or math.isnan(a1.sigma) else "inf",
        "ci_low": _num(a1.ci_low),
        "ci_high": _num(a1.ci_high),
        "n_star": (a2.n_star if math.isfinite(a2.n_star) else "inf") if a2 else None,
        "kappa": cell3.kappa if cell3 else None,
        "kappa_band": cell3.band
        if cell3
        else ("not applicable" if a3 and not a3.applicable else None),
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
        out["pairs"] = f"<{SMALL_CELL}"
        if "gap_to_reference" in out:
            out["gap_to_reference"] = None
    if isinstance(out.get("means"), list) and isinstance(out.get("pairs"), list):
        out["means"] = [
            [m if n >= SMALL_CELL else None for m, n in zip(mr, nr, strict=True)]
            for mr, nr in zip(out["means"], out["pairs"], strict=True)
        ]
        out["pairs"] = [
            [n if n >= SMALL_CELL else f"<{SMALL_CELL}" for n in nr] for nr in out["pairs"]
        ]
    return out


def _equilense(cohort: AuditCohort, tables: dict, config: MonitorConfig) -> dict[str, Any]:
    eq = config.equilense
    out: dict[str, Any] = {
        "threshold": eq.threshold,
        "scaling": eq.scaling,
        "features": list(cohort.feature_names),
        "group_metrics": [
            r.to_dict()
            for (m, a), t in tables.items()
            for r in equilense_group_metrics(m, a, t, eq.min_group_size)
        ],
        "models": {},
    }
    if cohort.features is None:
        out["mppd_note"] = "no similarity features configured ([equilense] features): MPPD not run"
        return out
    for model_id, sub in cohort.records.groupby("model_id", sort=True):
        X = scale_features(cohort.features[sub["source_row"].to_numpy()], eq.scaling)
        pairs = matched_pairs(X, eq.threshold)
        p = sub["score"].to_numpy(np.float64)
        per_attr = {}
        for attr in config.attributes:
            codes = sub[attr.name].to_numpy(dtype=str)
            per_attr[attr.name] = {
                "reference": mppd_reference(
                    p, codes, pairs, reference=eq.reference.get(attr.name), min_pairs=eq.min_pairs
                ).to_dict(),
                "pairwise": mppd_pairwise(p, codes, pairs, min_pairs=eq.min_pairs).to_dict(),
            }
        out["models"][str(model_id)] = suppress_small_pair_counts(
            {
                "records": len(sub),
                "individual_fairness_gap": individual_fairness_gap(
                    p, pairs, eq.min_pairs
                ).to_dict(),
                "mppd": per_attr,
            }
        )
    return out


def run_audit(
    path: str | Path, config: MonitorConfig, progress: Progress | None = None
) -> AuditReport:
    """Run every axis on a cohort file; raises AuditInputError on bad input."""
    prog = progress or Progress(enabled=False)
    cohort: AuditCohort = prog.step(
        "read and validate input", lambda: load_audit_cohort(path, config)
    )
    tables = prog.step("count tables", lambda: tables_from_frame(cohort.records, config))
    a1 = prog.step(
        "axis 1: verdict flip rate",
        lambda: evaluate_axis1(
            tables,
            config.metrics,
            K=config.axis1.K,
            N=config.axis1.N,
            min_group_support=config.axis1.min_group_support,
            seed=config.axis1.seed,
            threads=config.axis1.threads,
        ),
    )
    a2 = prog.step(
        "axis 2: minimum audit size",
        lambda: axis2(
            tables,
            config.metrics,
            sizes=config.axis2.sizes,
            R=config.axis2.R,
            cv_cutoff=config.axis2.cv_cutoff,
            n_field=config.axis2.n_field,
            min_group_support=config.axis1.min_group_support,
            seed=config.axis1.seed,
        ),
    )
    a3 = prog.step("axis 3: hospital agreement", lambda: _axis3_by_model(cohort, config))
    a2_by = {(c.model_id, c.metric, c.attribute): c for c in a2}
    cells = [
        combine_cell(c, a2_by.get((c.model_id, c.metric, c.attribute)), a3.get(c.model_id), config)
        for c in a1
    ]
    eq = prog.step("equilense: group metrics and MPPD", lambda: _equilense(cohort, tables, config))
    notes = sorted(
        {f"{m}: axis 3 {r.reason or r.note}" for m, r in a3.items() if r.reason or r.note}
    )
    return AuditReport(cells=cells, equilense=eq, timings=dict(prog.timings), notes=notes)


def write_report(report: AuditReport, out_dir: str | Path) -> dict[str, Path]:
    """cells.csv, cells.json and mppd.json in ``out_dir`` (created if needed)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "cells_csv": out / "cells.csv",
        "cells_json": out / "cells.json",
        "mppd": out / "mppd.json",
    }
    with paths["cells_csv"].open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CELL_COLUMNS)
        w.writeheader()
        for row in report.cells:
            w.writerow({k: ("" if row[k] is None else row[k]) for k in CELL_COLUMNS})
    paths["cells_json"].write_text(
        json.dumps(
            {"cells": report.cells, "notes": report.notes, "timings_s": report.timings}, indent=1
        )
    )
    paths["mppd"].write_text(json.dumps(report.equilense, indent=1))
    return paths


def format_summary(report: AuditReport) -> str:
    """The printed table: one line per cell, then counts per tier."""
    head = f"{'model':<14}{'metric':<8}{'attribute':<12}{'value':>8} {'verdict':>8}{'VFR':>7}"
    head += f"{'N*':>9}{'kappa':>8}  tier"
    lines = [head, "-" * len(head)]
    for c in report.cells:
        value = "undef" if c["value"] is None else f"{c['value']:.3f}"
        n_star = c["n_star"] if c["n_star"] in (None, "inf") else f"{int(c['n_star'])}"
        kappa = "n/a" if c["kappa"] is None else f"{c['kappa']:.2f}"
        tier = c["tier"] + (" (partial)" if c["partial"] else "")
        lines.append(
            f"{c['model_id'][:13]:<14}{c['metric']:<8}{c['attribute'][:11]:<12}{value:>8} "
            f"{c['dominant_verdict']:>8}{c['vfr']:>7.3f}{n_star!s:>9}{kappa:>8}  {tier}"
        )
    counts: dict[str, int] = {}
    for c in report.cells:
        counts[c["tier"]] = counts.get(c["tier"], 0) + 1
    lines.append("")
    lines.append("cells per tier: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    lines.extend(report.notes)
    return "\n".join(lines)
