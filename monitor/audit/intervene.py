"""`vfr-monitor intervene`: the VFR-Audit four-baseline comparison (docs/method.md section 8).

On a cohort with features: a seeded train / validation / audit split (by hospital
when there are hospital ids), B1 the model as trained, B2 the model refitted with
intersectional Kamiran-Calders weights (and a lambda sweep), B3 per-group
thresholds chosen on validation for DI >= target on every attribute, B4 B3 refined
toward the unshifted threshold while DI holds and VFR does not worsen. Every
baseline is then measured on the audit split with the same instrument (Axis 1,
Axis 2, Axis 3 where hospitals exist, tiers). B3 and B4 are written as configs
whose ``[decision.per_group]`` the service loads unchanged.

Outputs in ``--out``: ``table5_di.csv`` and ``table6_audit.csv`` (one row per
baseline, the paper's Tables 5 and 6), ``baselines.json`` (everything, including
the split and the search paths), ``cells.csv`` (every cell of every baseline),
``vfr_movement.csv`` (per-cell VFR, B3 -> B4), ``lambda_sweep.csv`` and
``decision_b3.toml`` / ``decision_b4.toml``. No file carries a record-level value
or a figure from fewer than 11 records of a group; nothing depends on the clock,
so the same command gives the same files.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from batch_axes.audit_cell import audit_cell_from_row
from batch_axes.runner import cell_with_axes, run_axis2, run_axis3
from monitor.audit.input_mapping import AuditInputError, read_cohort_file
from monitor.audit.interventions import (
    GroupCodes,
    RefineResult,
    SearchResult,
    ThresholdPlan,
    di_passes,
    disparate_impact,
    intersection_cells,
    kamiran_calders_weights,
    refine_thresholds,
    search_thresholds,
    selection_rates,
    split_cohort,
    vfr_cells,
    vfr_objective,
)
from monitor.audit.run import CELL_COLUMNS
from monitor.config import MonitorConfig
from monitor.core.counts import CountTable
from monitor.core.results import CellEvaluation
from monitor.core.tables import grid_groups
from monitor.publish.cells import published_audit_cell
from monitor.publish.counts import published_family, published_size, rounded_rate
from monitor.publish.rates import linked_hidden, published_rates
from monitor.stream.schema import decision_thresholds

#: The built-in cohort name accepted by --input (monitor.data.datasets.diabetes130).
DIABETES130 = "diabetes130"
BASELINES = ("B1", "B2", "B3", "B4")
METHOD = {"B1": "Real-only", "B2": "Reweighing", "B3": "Threshold-shifting", "B4": "VFR-Audit"}
TIERS = ("Practical-Stability", "Caution-Required", "High-Variance",
         "Catastrophic-Instability", "Pending", "Not-Evaluable")  # fmt: skip


@dataclass(frozen=True)
class FeatureCohort:
    """A labelled cohort with model features, in the schema's codes."""

    frame: pd.DataFrame  # label, attributes, optional hospital_id, features
    features: tuple[str, ...]
    has_hospitals: bool
    source: str
    config: MonitorConfig  # the config with the cohort's attributes
    notes: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- input
def load_feature_cohort(source: str, config: MonitorConfig) -> FeatureCohort:
    """``diabetes130`` (the shipped UCI file) or a CSV/Parquet file mapped by ``[input]``."""
    if source == DIABETES130:
        from monitor.data.datasets.diabetes130 import load_diabetes130

        ds = load_diabetes130()
        data = config.model_dump()
        data["attributes"] = ds.attributes
        cfg = MonitorConfig(**data)
        return FeatureCohort(
            ds.frame, ds.features, False, f"{DIABETES130} ({ds.credit})", cfg, tuple(ds.notes)
        )
    raw = read_cohort_file(source)
    return map_feature_frame(raw, config, str(Path(source).name))


def _column(raw: pd.DataFrame, config: MonitorConfig, field: str) -> str:
    col = config.input.columns.get(field, field)
    if col not in raw.columns:
        raise AuditInputError(
            f"missing column {col!r} (schema field {field!r}); "
            f'map it with [input.columns] {field} = "<file column>"'
        )
    return col


def _rows(mask: np.ndarray) -> str:
    where = np.flatnonzero(mask)
    more = "" if len(where) <= 5 else f" and {len(where) - 5} more"
    return f"{len(where)} row(s), first at 0-based row(s) " + ", ".join(map(str, where[:5])) + more


def _as_code(x: object) -> object:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return x if x is None or isinstance(x, str) else str(x)


def map_feature_frame(raw: pd.DataFrame, config: MonitorConfig, name: str) -> FeatureCohort:
    """Map a file's label, attribute, hospital and feature columns; stop naming a bad column.

    Same ``[input]`` mapping as ``vfr-monitor audit`` (columns, codes, label_from).
    Features: ``[interventions] features``, else the synthetic cohort's features when
    the file has them all.
    """
    from monitor.data.scorer import SYNTH_FEATURES

    out = pd.DataFrame(index=raw.index)
    rule = config.input.label_from
    if rule is not None:
        if rule.column not in raw.columns:
            raise AuditInputError(f"missing column {rule.column!r} (label_from)")
        values = pd.to_numeric(raw[rule.column], errors="coerce")
        if values.isna().any():
            raise AuditInputError(
                f"column {rule.column!r}: not a number in {_rows(values.isna().to_numpy())}"
            )
        out["label"] = (values > rule.greater_than).astype(np.int64)
    else:
        col = _column(raw, config, "label")
        values = pd.to_numeric(raw[col], errors="coerce")
        bad = ~values.isin([0, 1]).to_numpy()
        if bad.any():
            raise AuditInputError(f"column {col!r}: label not 0/1 in {_rows(bad)}")
        out["label"] = values.astype(np.int64)
    for attr in config.attributes:
        col = _column(raw, config, attr.name)
        codes = raw[col].map(_as_code)
        mapping = config.input.codes.get(attr.name)
        if mapping:
            codes = codes.map(lambda c, m=mapping: m.get(c, c))
        bad = ~codes.isin(list(attr.codes)).to_numpy()
        if bad.any():
            raise AuditInputError(
                f"column {col!r}: code not configured for attribute {attr.name!r} in {_rows(bad)}"
            )
        out[attr.name] = codes.astype(object).to_numpy()
    hosp_col = config.input.columns.get("hospital_id", "hospital_id")
    has_hosp = hosp_col in raw.columns
    if has_hosp:
        ids = raw[hosp_col].map(_as_code)
        if ids.isna().any():
            raise AuditInputError(f"column {hosp_col!r}: missing hospital id in "
                                  f"{_rows(ids.isna().to_numpy())}")  # fmt: skip
        out["hospital_id"] = ids.astype(str).to_numpy()
    features = tuple(config.interventions.features)
    if not features:
        if not set(SYNTH_FEATURES) <= set(raw.columns):
            raise AuditInputError(
                "no model features: list the file's feature columns in "
                "[interventions] features = [...]"
            )
        features = SYNTH_FEATURES
    for f in features:
        if f not in raw.columns:
            raise AuditInputError(f"missing column {f!r} (model feature)")
        values = pd.to_numeric(raw[f], errors="coerce")
        bad = ~np.isfinite(values.to_numpy(dtype=np.float64))
        if bad.any():
            raise AuditInputError(f"column {f!r}: missing or non-numeric feature in {_rows(bad)}")
        out[f] = values.to_numpy(dtype=np.float64)
    notes = () if has_hosp else ("no hospital ids: split not grouped, Axis 3 not applicable",)
    return FeatureCohort(out.reset_index(drop=True), features, has_hosp, name, config, notes)


# ----------------------------------------------------------------------------- models
def fit_model(
    kind: str, X: np.ndarray, y: np.ndarray, seed: int, weight: np.ndarray | None = None
) -> Any:
    """XGBoost with the demo scorer's frozen hyper-parameters, or scaled logistic regression."""
    if kind == "xgb":
        from xgboost import XGBClassifier

        model = XGBClassifier(
            n_estimators=150, max_depth=4, learning_rate=0.1, subsample=0.9,
            tree_method="hist", n_jobs=2, random_state=seed,
        )  # fmt: skip
        model.fit(X.astype(np.float32), y, sample_weight=weight)
        return model
    if kind == "logreg":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2_000))
        model.fit(X, y, logisticregression__sample_weight=weight)
        return model
    raise ValueError(f"unknown model {kind!r}; choose xgb or logreg")


def predict(model: Any, X: np.ndarray) -> np.ndarray:
    return np.asarray(model.predict_proba(X.astype(np.float32))[:, 1], dtype=np.float64)


# ----------------------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class Part:
    """One split's records as arrays."""

    labels: np.ndarray
    columns: dict[str, np.ndarray]  # attribute -> codes (object)
    #: the configured attributes, then the ``[[intersections]]`` (grid_attributes order)
    groups: list[GroupCodes]
    hospital_id: np.ndarray | None
    X: np.ndarray
    #: how many of ``groups`` are configured attributes (they own per-group thresholds)
    owners: int = 0


def make_part(frame: pd.DataFrame, rows: np.ndarray, cohort: FeatureCohort) -> Part:
    sub = frame.iloc[rows]
    cfg = cohort.config
    columns = {a.name: sub[a.name].to_numpy(dtype=object) for a in cfg.attributes}
    index = grid_groups(
        {a.name: pd.Index(list(a.codes)).get_indexer(columns[a.name]) for a in cfg.attributes},
        cfg,
    )
    groups = [GroupCodes(a.name, a.codes, index[a.name]) for a in cfg.grid_attributes]
    hosp = sub["hospital_id"].to_numpy(dtype=object) if cohort.has_hospitals else None
    X = sub[list(cohort.features)].to_numpy(dtype=np.float64)
    return Part(
        sub["label"].to_numpy(np.int64), columns, groups, hosp, X, owners=len(cfg.attributes)
    )


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), nd)


@dataclass(frozen=True)
class BaselineResult:
    """One baseline measured on the audit split: performance, DI, the three axes, tiers.

    :meth:`to_dict` is its row of ``baselines.json`` (there without ``cells``, which go to
    ``cells.csv``); rounded as written.
    """

    baseline: str
    method: str
    accuracy: float | None
    auroc: float | None
    f1: float | None
    di: dict[str, float | None]
    di_pass: str  # "passing/attributes"
    all_di_pass: bool
    vfr_mean: float | None
    vfr_max: float | None
    cells_vfr_gt0: int
    cells_stable: int
    cells_total: int
    kappa_mean: float | None
    kappa: dict[str, float | None]
    tiers: dict[str, int]
    #: attribute -> group -> selection rate ("<11" for a group of fewer than 11 records)
    selection_rate: dict[str, dict[str, float | str | None]]
    cells: tuple[CellEvaluation, ...]
    acc_cost_pp: float | None = None  # accuracy cost against B1, in points

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["cells"] = [published_audit_cell(c) for c in self.cells]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BaselineResult:
        kw: dict[str, Any] = {f.name: d.get(f.name) for f in fields(cls)}
        kw["cells"] = tuple(audit_cell_from_row(c) for c in d.get("cells") or ())
        return cls(**kw)


def part_withheld(groups: Sequence[GroupCodes]) -> dict[str, frozenset[str]]:
    """The withheld groups of a part's attributes, an intersection's linked to its margins
    (:func:`~monitor.publish.rates.linked_hidden`): "Black" minus a shown "Black x Male"
    must not leave a withheld "Black x Female"."""
    return linked_hidden((g.name, g.codes, g.counts) for g in groups)


def evaluate(
    name: str,
    part: Part,
    scores: np.ndarray,
    decisions: np.ndarray,
    config: MonitorConfig,
    model_id: str,
) -> BaselineResult:
    """Every figure of one baseline on the audit split: performance, DI, the three axes, tiers."""
    from sklearn.metrics import f1_score, roc_auc_score

    y = part.labels
    target = config.interventions.di_target
    support = config.axis1.min_group_support
    di = {}
    rates = {}
    withheld = part_withheld(part.groups)
    for g in part.groups:
        sr = selection_rates(decisions, g)
        di[g.name] = disparate_impact(sr, g.counts >= support)
        rates[g.name] = published_rates(g.codes, sr, g.counts, withheld[g.name])
    cells1 = vfr_cells(y, decisions, scores, part.groups, config, model_id)
    bins = config.axis1.score_bins
    tables = {(model_id, g.name): CountTable.from_records(g.codes, g.index, y, decisions,
                                                           scores, bins)
              for g in part.groups}  # fmt: skip
    a2 = {(c.metric, c.attribute): c for c in run_axis2(tables, config)}
    a3 = None
    if part.hospital_id is not None:
        frame = pd.DataFrame({"label": y, "decision": decisions, "score": scores,
                              "hospital_id": part.hospital_id, **part.columns})  # fmt: skip
        a3 = run_axis3(model_id, frame, config)
    cells = [cell_with_axes(c, a2.get((c.metric, c.attribute)), a3, config) for c in cells1]
    # not-evaluable cells have no VFR or kappa: the summaries are over the evaluable ones
    vfr = np.array([c.result.vfr for c in cells if c.tier.evaluable] or [math.nan])
    kappas: dict[str, float] = {}
    for c in cells:
        k = c.own_kappa
        if k is not None and not math.isnan(k):
            kappas[c.metric] = k
    tiers = {t: sum(c.tier.tier.value == t for c in cells) for t in TIERS}
    n_pass = sum(di_passes(d, target) for d in di.values())
    auroc = roc_auc_score(y, scores) if len(np.unique(y)) == 2 else math.nan
    return BaselineResult(
        baseline=name,
        method=METHOD[name],
        accuracy=_round(float((decisions == y).mean())),
        auroc=_round(auroc),
        f1=_round(float(f1_score(y, decisions, zero_division=0))),
        di={a: _round(v) for a, v in di.items()},
        di_pass=f"{n_pass}/{len(di)}",
        all_di_pass=n_pass == len(di),
        vfr_mean=_round(float(vfr.mean())),
        vfr_max=_round(float(vfr.max())),
        cells_vfr_gt0=int((vfr > 0).sum()),
        cells_stable=int((vfr <= config.axis1.tau_vfr).sum()),
        cells_total=len(cells),
        kappa_mean=_round(float(np.mean(list(kappas.values())))) if kappas else None,
        kappa={m: _round(k) for m, k in kappas.items()},
        tiers=tiers,
        selection_rate=rates,
        cells=tuple(cells),
    )


def plan_decisions(
    plan: ThresholdPlan, scores: np.ndarray, part: Part, model_id: str, config: MonitorConfig
) -> np.ndarray:
    """Decisions the service makes from the written config: decision_thresholds itself."""
    data = config.model_dump()
    data["decision"] = {"threshold": plan.base, "per_group": {model_id: plan.per_group()}}
    cfg = MonitorConfig(**data)
    columns = {"score": scores, "model_id": np.full(len(scores), model_id, dtype=object),
               **part.columns}  # fmt: skip
    return (scores >= decision_thresholds(columns, cfg)).astype(np.int64)


# ----------------------------------------------------------------------------- the command
@dataclass
class InterventionReport:
    rows: list[BaselineResult]  # one per baseline
    sweep: list[dict[str, Any]]
    movement: list[dict[str, Any]]
    plans: dict[str, ThresholdPlan]
    summary: dict[str, Any]  # split, model, search paths, notes
    config: MonitorConfig
    model_id: str


def _say(stream: TextIO | None, text: str) -> None:
    if stream is not None:
        print(f"[intervene] {text}", file=stream, flush=True)


def _di_row(part: Part, decisions: np.ndarray, config: MonitorConfig) -> dict[str, float | None]:
    support = config.axis1.min_group_support
    return {
        g.name: _round(disparate_impact(selection_rates(decisions, g), g.counts >= support))
        for g in part.groups
    }


def run_interventions(
    source: str,
    config: MonitorConfig,
    *,
    model: str = "xgb",
    seed: int = 0,
    progress: TextIO | None = None,
) -> InterventionReport:
    """The four baselines on ``source``; raises AuditInputError on bad input."""
    cohort = load_feature_cohort(source, config)
    cfg = cohort.config
    iv = cfg.interventions
    model_id = cfg.input.model_id
    base = cfg.decision.threshold
    frame = cohort.frame
    n = len(frame)
    if n < 200:
        raise AuditInputError(f"cohort has {n} records; the split needs at least 200")
    labels = frame["label"].to_numpy(np.int64)
    hosp = frame["hospital_id"].to_numpy(dtype=str) if cohort.has_hospitals else None
    split = split_cohort(n, iv.split, seed, hosp, labels)
    parts = {k: make_part(frame, rows, cohort) for k, rows in split.parts().items()}
    train, val, audit = parts["train"], parts["validation"], parts["audit"]
    for k, p in parts.items():
        if len(np.unique(p.labels)) < 2:
            raise AuditInputError(f"the {k} split has a single label value; use more records")
    notes = list(cohort.notes)
    inter = tuple(a for a in iv.intersection if a in train.columns)
    if inter != tuple(iv.intersection):
        notes.append(f"reweighing cells use {' x '.join(inter)} (attributes of this cohort)")

    _say(progress, f"{published_size(n):,} records; split "
                   f"{[published_size(len(r)) for r in split.parts().values()]}; "
                   f"fitting {model} (B1)")  # fmt: skip
    b1 = fit_model(model, train.X, train.labels, seed)
    cells = intersection_cells(train.columns, inter)

    def reweighed(lam: float) -> Any:
        w = kamiran_calders_weights(cells, train.labels, lam, iv.weight_clip)
        return fit_model(model, train.X, train.labels, seed, w)

    _say(progress, f"fitting B2 (Kamiran-Calders, lambda = {iv.lambda_:g})")
    b2 = reweighed(iv.lambda_)
    scores = {
        "B1": (predict(b1, val.X), predict(b1, audit.X)),
        "B2": (predict(b2, val.X), predict(b2, audit.X)),
    }
    _say(progress, "B3: threshold search on the validation split")
    s_val, s_audit = scores["B1"]
    groups_kw: dict[str, Any] = dict(
        target=min(iv.di_target + iv.di_search_margin, 1.0), step=iv.threshold_step,
        min_support=cfg.axis1.min_group_support, owners=val.owners,
    )  # fmt: skip
    b3: SearchResult = search_thresholds(
        s_val, val.labels, val.groups, base=base, max_steps=iv.search_max_steps, **groups_kw
    )
    _say(progress, f"B3: {b3.steps} steps, DI target met on validation: {b3.feasible}")
    _say(progress, "B4: greedy refinement (VFR objective on the validation split)")
    objective = vfr_objective(val.labels, s_val, val.groups, cfg)
    b4: RefineResult = refine_thresholds(
        b3.plan, s_val, val.labels, val.groups, objective, max_steps=iv.refine_max_steps,
        **groups_kw,
    )  # fmt: skip
    _say(progress, f"B4: {b4.steps} moves; (max, mean) VFR on validation "
                   f"{b4.objective_start} -> {b4.objective_end}")  # fmt: skip
    plans = {"B3": b3.plan, "B4": b4.plan}
    decisions = {
        "B1": (s_audit >= base).astype(np.int64),
        "B2": (scores["B2"][1] >= base).astype(np.int64),
        "B3": plan_decisions(b3.plan, s_audit, audit, model_id, cfg),
        "B4": plan_decisions(b4.plan, s_audit, audit, model_id, cfg),
    }
    rows = []
    for b in BASELINES:
        _say(progress, f"audit split: {b} (axes 1-3, tiers)")
        s = scores["B2"][1] if b == "B2" else s_audit
        rows.append(evaluate(b, audit, s, decisions[b], cfg, model_id))
    acc1 = rows[0].accuracy
    rows = [replace(r, acc_cost_pp=_round(100.0 * (acc1 - r.accuracy), 2)) for r in rows]  # type: ignore[operator]  # audit split not empty: a number

    sweep = []
    for lam in iv.lambda_sweep:
        _say(progress, f"lambda sweep: {lam:g}")
        m = b2 if lam == iv.lambda_ else (b1 if lam == 0 else reweighed(lam))
        s = predict(m, audit.X)
        d = (s >= base).astype(np.int64)
        di = _di_row(audit, d, cfg)
        sweep.append({
            "lambda": lam, "accuracy": _round(float((d == audit.labels).mean())),
            "auroc": _round(_auroc(audit.labels, s)), "di": di,
            "di_pass": sum(di_passes(v if v is not None else math.nan, iv.di_target)
                           for v in di.values()),
        })  # fmt: skip

    by_cell = {b: {(c.metric, c.attribute): c.result for c in r.cells}
               for b, r in zip(BASELINES, rows, strict=True)}  # fmt: skip
    movement = [
        {"metric": k[0], "attribute": k[1],
         "vfr_b3": c3.vfr, "vfr_b4": by_cell["B4"][k].vfr,
         "vfr_change": round(by_cell["B4"][k].vfr - c3.vfr, 6),
         "value_b3": _round(c3.value), "value_b4": _round(by_cell["B4"][k].value),
         "verdict_b3": c3.dominant_verdict, "verdict_b4": by_cell["B4"][k].dominant_verdict}
        for k, c3 in by_cell["B3"].items()
    ]  # fmt: skip

    summary = {
        "input": cohort.source,
        "records": published_size(n),
        "model": model,
        "model_id": model_id,
        "seed": seed,
        "features": list(cohort.features),
        "split": _split_summary(split, parts, hosp),
        "decision_threshold": base,
        "reweighing": {"lambda": iv.lambda_, "cells": list(inter), "clip": list(iv.weight_clip)},
        "b3_search": {"steps": b3.steps, "feasible_on_validation": b3.feasible,
                      "validation_accuracy": _round(b3.accuracy),
                      "validation_di": {a: _round(v) for a, v in b3.di.items()},
                      "thresholds": b3.plan.per_group(), "note": b3.note},
        "b4_refinement": {"moves": b4.moves, "steps": b4.steps,
                          "validation_objective_start": list(b4.objective_start),
                          "validation_objective_end": list(b4.objective_end),
                          "validation_accuracy": _round(b4.accuracy),
                          "validation_di": {a: _round(v) for a, v in b4.di.items()},
                          "thresholds": b4.plan.per_group()},
        "notes": notes,
    }  # fmt: skip
    return InterventionReport(rows, sweep, movement, plans, summary, cfg, model_id)


def _auroc(y: np.ndarray, s: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, s)) if len(np.unique(y)) == 2 else math.nan


def _split_summary(
    split: Any, parts: Mapping[str, Part], hosp: np.ndarray | None
) -> dict[str, Any]:
    """How the cohort was split, in published counts: part sizes rounded, shares to 2
    decimals (an exact share of a published total is an exact size), and each part's
    groups of an attribute as one family under secondary suppression, so a part's size
    minus its shown groups names no withheld group."""
    total = sum(len(p.labels) for p in parts.values())
    out: dict[str, Any] = {
        "grouped_by_hospital": split.grouped,
        "how": ("whole hospitals per part (no hospital in two parts), seeded"
                if split.grouped else "no hospital ids: label-stratified random split, seeded"),
    }  # fmt: skip
    for k, rows in split.parts().items():
        p = parts[k]
        withheld = part_withheld(p.groups)
        out[k] = {
            "records": published_size(len(rows)),
            "share": rounded_rate(len(rows) / total),
            "hospitals": None if hosp is None else len(np.unique(hosp[rows])),
            "groups": {g.name: published_family({c: int(n) for c, n in zip(g.codes, g.counts,
                                                                            strict=True)},
                                                withheld[g.name])
                       for g in p.groups},
        }  # fmt: skip
    return out


# ----------------------------------------------------------------------------- writing
def table5_rows(report: InterventionReport) -> list[dict[str, Any]]:
    return [{"baseline": r.baseline, "method": r.method, **r.di, "pass": r.di_pass}
            for r in report.rows]  # fmt: skip


TABLE6_COLUMNS = (
    "baseline", "method", "accuracy", "auroc", "f1", "acc_cost_pp", "vfr_mean", "vfr_max",
    "cells_vfr_gt0", "cells_stable", "cells_total", "kappa_mean", "kappa_EOPP", "kappa_EOD",
    "di_pass", "all_di_pass", *TIERS,
)  # fmt: skip


def table6_rows(report: InterventionReport) -> list[dict[str, Any]]:
    out = []
    for r in report.rows:
        d = r.to_dict()
        row = {k: d.get(k) for k in TABLE6_COLUMNS}
        row["kappa_EOPP"] = r.kappa.get("EOPP")
        row["kappa_EOD"] = r.kappa.get("EOD")
        row.update(r.tiers)
        out.append(row)
    return out


def decision_config(report: InterventionReport, baseline: str) -> dict[str, Any]:
    """The config to monitor with: the run's config, its decisions replaced by ``baseline``'s."""
    data = report.config.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data["attributes"] = [a.model_dump(mode="json") for a in report.config.attributes]
    plan = report.plans[baseline]
    data["decision"] = {"threshold": plan.base,
                        "per_group": {report.model_id: plan.per_group()}}  # fmt: skip
    # The service dead-letters records of unregistered models (``unknown_models``), so a
    # decision file for a model it does not know would monitor nothing: register it.
    if all(m.id != report.model_id for m in report.config.models):
        data["models"] = [*data.get("models", []), {"id": report.model_id}]
    return data


def _csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})


def write_report(report: InterventionReport, out_dir: str | Path) -> dict[str, Path]:
    import tomli_w

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / v for k, v in {
        "table5": "table5_di.csv", "table6": "table6_audit.csv", "json": "baselines.json",
        "cells": "cells.csv", "movement": "vfr_movement.csv", "sweep": "lambda_sweep.csv",
        "b3": "decision_b3.toml", "b4": "decision_b4.toml"}.items()}  # fmt: skip
    attrs = [a.name for a in report.config.grid_attributes]
    _csv(paths["table5"], table5_rows(report), ["baseline", "method", *attrs, "pass"])
    _csv(paths["table6"], table6_rows(report), TABLE6_COLUMNS)
    _csv(paths["cells"],
         [{"baseline": r.baseline, **published_audit_cell(c)}
          for r in report.rows for c in r.cells],
         ["baseline", *CELL_COLUMNS])  # fmt: skip
    _csv(paths["movement"], report.movement, list(report.movement[0]) if report.movement else [])
    _csv(paths["sweep"],
         [{"lambda": s["lambda"], "accuracy": s["accuracy"], "auroc": s["auroc"], **s["di"],
           "di_pass": f"{s['di_pass']}/{len(attrs)}"} for s in report.sweep],
         ["lambda", "accuracy", "auroc", *attrs, "di_pass"])  # fmt: skip
    doc = {**report.summary, "baselines": [{k: v for k, v in r.to_dict().items() if k != "cells"}
                                           for r in report.rows],
           "lambda_sweep": report.sweep, "vfr_movement_b3_b4": report.movement}  # fmt: skip
    paths["json"].write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    for b in ("B3", "B4"):
        header = (
            f"# vfr-monitor intervene: {b} ({METHOD[b]}) decisions for model "
            f"{report.model_id!r}.\n# Load with: vfr-monitor run --config {paths[b.lower()].name}\n"
        )
        paths[b.lower()].write_text(header + tomli_w.dumps(decision_config(report, b)))
    return paths


def format_tables(report: InterventionReport) -> str:
    """The printed Tables 5 and 6."""
    attrs = [a.name for a in report.config.grid_attributes]
    lines = [
        "Table 5: DI per attribute (audit split)",
        f"{'baseline':<24}" + "".join(f"{a[:10]:>11}" for a in attrs) + f"{'pass':>7}",
    ]
    for r in report.rows:
        lines.append(
            f"{r.baseline + ' ' + r.method:<24}"
            + "".join(f"{_fmt(r.di[a]):>11}" for a in attrs)
            + f"{r.di_pass:>7}"
        )
    lines += [
        "",
        "Table 6: four-baseline audit (audit split)",
        f"{'baseline':<24}{'Acc':>8}{'AUROC':>8}{'F1':>8}{'cost pp':>8}{'VFRmean':>8}"
        f"{'VFRmax':>8}{'#flip':>6}{'stable':>7}{'kappa':>7}{'DI':>5}",
    ]
    for r in report.rows:
        lines.append(
            f"{r.baseline + ' ' + r.method:<24}{_fmt(r.accuracy):>8}{_fmt(r.auroc):>8}"
            f"{_fmt(r.f1):>8}{_fmt(r.acc_cost_pp, 2):>8}{_fmt(r.vfr_mean, 3):>8}"
            f"{_fmt(r.vfr_max, 3):>8}{r.cells_vfr_gt0:>6}"
            f"{str(r.cells_stable) + '/' + str(r.cells_total):>7}"
            f"{_fmt(r.kappa_mean, 3):>7}{r.di_pass:>5}"
        )
    split = report.summary["split"]
    lines += ["", f"split: {split['how']}; records train/validation/audit "
              f"{split['train']['records']}/{split['validation']['records']}/"
              f"{split['audit']['records']}"]  # fmt: skip
    if split["grouped_by_hospital"]:
        lines.append("hospitals train/validation/audit "
                     f"{split['train']['hospitals']}/{split['validation']['hospitals']}/"
                     f"{split['audit']['hospitals']}")  # fmt: skip
    lines.extend(report.summary["notes"])
    return "\n".join(lines)


def _fmt(x: Any, nd: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"
