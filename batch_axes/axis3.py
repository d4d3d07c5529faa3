"""Axis 3 (docs/method.md section 5): do hospitals agree on a cell's verdict?

The audit cohort is split into K_hosp folds by hospital (scikit-learn's
GroupKFold: balanced fold sizes, no hospital in two folds). For each metric,
every attribute cell gets a point verdict on every fold; Fleiss' kappa over the
(attributes x folds) verdict matrix says whether the folds, as raters, agree
beyond chance. A low kappa means the verdict depends on which hospitals happen
to be audited, so the cell fails Axis 3.

Why counts instead of records: one ``np.bincount`` per attribute turns the
cohort into (hospital, group, label, decision, score bin) count arrays; a fold's
table is the sum of its hospitals' arrays and every fold of every metric is one
vectorised call of the shared metric functions. Nothing per record is copied
per fold, so 1,000,000 records x 20 folds x 28 cells costs a few bincounts.
The per-hospital arrays are :class:`~batch_axes.cohort_counts.CohortCounts`, which the
service keeps up to date between runs (:func:`axis3_from_counts`: no record is read);
their score sums are exact integers, so both ways give the same fold values to the bit.

Hospital ids may identify a site, so no result here carries them: folds are
described by their record counts only.

Example:
    >>> import numpy as np
    >>> round(fleiss_kappa_from_pass_counts(np.array([0, 20, 20, 0]), 20)[0], 12)
    1.0
    >>> landis_koch_band(0.55)
    'moderate'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from batch_axes.cohort_counts import NO_HOSPITAL, CohortCounts, group_kfold_from_sizes
from monitor.config import MIN_GROUP_SUPPORT, AttributeConfig, MetricRule
from monitor.core.metrics import METRICS, Tallies, passes
from monitor.core.numbers import as_float, float_or_none
from monitor.core.privacy import SMALL_CELL_LABEL, reportable, rounded_count
from monitor.core.results import Axis3Outcome

#: docs/method.md section 9 defaults.
DEFAULT_FOLDS = 20
DEFAULT_KAPPA_CUTOFF = 0.40


# ----------------------------------------------------------------------------- Fleiss' kappa
def fleiss_kappa(ratings: np.ndarray) -> tuple[float, bool]:
    """Fleiss' kappa of an (items x categories) matrix of rater counts, and a degenerate flag.

    From the definition, with n_i the ratings of item i (items may have different
    numbers of raters: a fold whose verdict is undefined does not vote):
    P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1)) is the share of agreeing rater pairs
    on item i, P_bar their mean over the items, p_j the share of all ratings in
    category j, P_e = sum_j p_j^2 the agreement expected by chance, and
    kappa = (P_bar - P_e) / (1 - P_e). With the same n for every item this is Fleiss
    (1971) exactly (statsmodels' ``fleiss_kappa``); with per-item n_i it is the usual
    generalisation (each item's agreement on its own raters, chance from the pooled
    ratings). Items with fewer than two ratings cannot show agreement and are left out
    (of P_bar and of p_j); none left is an error.

    When every rating falls in one category, P_e = 1 and kappa is 0/0. docs/method.md
    section 5 reports that as perfect agreement: (1.0, True). Degeneracy is
    decided on the integer column totals, not on a float P_e, so rounding can
    never turn an ordinary matrix into a degenerate one or back.
    """
    n_ij = np.asarray(ratings, dtype=np.float64)
    if n_ij.ndim != 2 or n_ij.shape[0] < 1 or n_ij.shape[1] < 1:
        raise ValueError("ratings must be a non-empty (items x categories) matrix")
    if np.any(n_ij < 0) or np.any(n_ij != np.rint(n_ij)):
        raise ValueError("ratings must be non-negative integer counts")
    n_ij = n_ij[n_ij.sum(axis=1) >= 2]
    if n_ij.shape[0] == 0:
        raise ValueError("agreement needs an item with at least two ratings")
    if np.count_nonzero(n_ij.sum(axis=0)) <= 1:
        return 1.0, True
    n_i = n_ij.sum(axis=1)
    P_i = ((n_ij * n_ij).sum(axis=1) - n_i) / (n_i * (n_i - 1.0))
    P_bar = float(P_i.mean())
    p_j = n_ij.sum(axis=0) / n_i.sum()
    P_e = float((p_j * p_j).sum())
    return (P_bar - P_e) / (1.0 - P_e), False


def fleiss_kappa_from_pass_counts(
    n_pass: np.ndarray, raters: int | np.ndarray
) -> tuple[float, bool]:
    """Fleiss' kappa for binary pass/fail items given how many of ``raters`` (one number,
    or one per item: the folds that voted on it) passed each."""
    k = np.asarray(n_pass, dtype=np.int64).reshape(-1)
    n = np.broadcast_to(np.asarray(raters, dtype=np.int64).reshape(-1), k.shape)
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("pass counts must lie between 0 and the number of raters")
    return fleiss_kappa(np.column_stack([k, n - k]))


#: The band of a kappa that is not evaluable.
NOT_EVALUABLE_BAND = "not evaluable"

#: Axis 3 has a kappa only when at least this many attribute items have two votes or more
#: and at least MIN_VOTING_FOLDS folds vote at all (docs/decisions.md, "Undefined is not
#: a verdict"): below that, agreement "beyond chance" rests on too few judgements.
MIN_VOTED_ITEMS = 2
MIN_VOTING_FOLDS = 3


def kappa_not_evaluable(votes: np.ndarray) -> str:
    """Why the kappa of a (items x folds) vote mask cannot be computed ("" if it can).

    >>> kappa_not_evaluable(np.array([[True, True, False], [False, False, False]]))
    'only 1 attribute has two or more folds that can judge it (need 2)'
    """
    per_item = votes.sum(axis=1)
    items = int((per_item >= 2).sum())
    folds = int(votes.any(axis=0).sum())
    if items < MIN_VOTED_ITEMS:
        noun = "attribute has" if items == 1 else "attributes have"
        return f"only {items} {noun} two or more folds that can judge it (need {MIN_VOTED_ITEMS})"
    if folds < MIN_VOTING_FOLDS:
        return f"only {folds} folds can judge any attribute (need {MIN_VOTING_FOLDS})"
    return ""


#: Landis and Koch (1977) bands of a kappa: (lower bound, name), ascending. A band holds
#: its upper bound (0.40 is 'fair'); 'poor' is below 0, so 0 itself is 'slight'.
LANDIS_KOCH = (
    (-1.0, "poor"),
    (0.0, "slight"),
    (0.20, "fair"),
    (0.40, "moderate"),
    (0.60, "substantial"),
    (0.80, "almost perfect"),
)


def landis_koch_band(kappa: float) -> str:
    """The Landis-Koch label of a kappa, with docs/method.md section 5's closed upper bounds."""
    if math.isnan(kappa):
        raise ValueError("kappa is NaN; an undefined kappa has no band")
    if kappa < 0:
        return "poor"
    return next(band for lower, band in reversed(LANDIS_KOCH) if kappa > lower or lower == 0)


# ----------------------------------------------------------------------------- folds
@dataclass(frozen=True, eq=False)
class HospitalFolds:
    """Which fold every record and hospital belongs to, or why Axis 3 cannot run.

    Hospitals are numbered by the rank of their id in sorted order (the order
    GroupKFold uses); the ids themselves are not kept. Records without a
    hospital id have hospital and fold -1.
    """

    applicable: bool
    reason: str  # why not applicable; "" when applicable
    note: str  # what was adapted (fewer folds, excluded records); "" when nothing
    n_folds_requested: int
    n_folds: int  # folds used; 0 when not applicable
    n_hospitals: int
    n_records: int  # records with a hospital id
    n_excluded_missing: int  # records without a hospital id
    hospital_of_record: np.ndarray  # (n,) int64 hospital rank, -1 when missing
    fold_of_hospital: np.ndarray  # (n_hospitals,) int64
    fold_of_record: np.ndarray  # (n,) int64, -1 when the record is excluded
    fold_sizes: tuple[int, ...]  # records per fold

    def to_dict(self) -> dict[str, Any]:
        """Counts only: no per-record or per-hospital arrays."""
        return {
            "applicable": self.applicable,
            "reason": self.reason,
            "note": self.note,
            "n_folds_requested": self.n_folds_requested,
            "n_folds": self.n_folds,
            "n_hospitals": self.n_hospitals,
            "n_records": self.n_records,
            "n_excluded_missing_hospital": self.n_excluded_missing,
            "fold_sizes": list(self.fold_sizes),
        }


def folds_note(n_missing: int, n_hospitals: int, n_folds_requested: int, n_folds: int) -> str:
    """What the fold assignment adapted, in words ("" when nothing); ``n_folds`` 0 when
    Axis 3 is not applicable.

    The excluded count is quoted as published (withheld below the small-cell rule, else
    rounded: as :func:`monitor.publish.counts.published_size` of a count above 0): a note
    leaves the service with the result, and an exact small count in it would name how few
    patients lack a hospital id.

    >>> print(folds_note(2, 5, 20, 5).replace("; ", chr(10)))
    <11 records without hospital_id excluded from Axis 3
    5 hospitals for 20 folds: one fold per hospital (5 folds)
    >>> folds_note(252, 30, 20, 20)
    '250 records without hospital_id excluded from Axis 3'
    """
    notes = []
    if n_missing:
        shown = rounded_count(n_missing) if reportable(n_missing) else SMALL_CELL_LABEL
        notes.append(f"{shown} records without hospital_id excluded from Axis 3")
    if 0 < n_folds < n_folds_requested:
        notes.append(
            f"{n_hospitals} hospitals for {n_folds_requested} folds: "
            f"one fold per hospital ({n_folds} folds)"
        )
    return "; ".join(notes)


def hospital_codes(hospital_ids: np.ndarray | pd.Series | Sequence[Any]) -> np.ndarray:
    """Rank of each record's hospital id among the sorted distinct ids; -1 when missing.

    Missing means None, NaN or pd.NA. The ranks follow the same sorted order as
    ``np.unique``, so GroupKFold sees the hospitals in the same order.
    ``pd.factorize`` is used because it hashes instead of sorting a million
    Python strings.
    """
    codes, _ = pd.factorize(np.asarray(hospital_ids), sort=True, use_na_sentinel=True)
    return codes.astype(np.int64, copy=False)


def hospital_folds(
    hospital_ids: np.ndarray | pd.Series | Sequence[Any], n_folds: int = DEFAULT_FOLDS
) -> HospitalFolds:
    """Assign hospitals to folds with GroupKFold, or say why Axis 3 is not applicable.

    GroupKFold (no shuffle) only looks at how many records each hospital has and
    at the sorted order of the ids, so it is called on a compact stand-in: the
    hospital ranks repeated by their record counts, already sorted. That yields
    exactly the assignment GroupKFold gives on the record ids (tested), without
    sorting a million id strings.

    * Records without a hospital id are left out of Axis 3 and counted; no
      hospital is invented for them. If no record has an id, Axis 3 is not
      applicable.
    * Fewer than two hospitals: not applicable (one rater cannot disagree).
    * Fewer hospitals than folds: one fold per hospital, and the note says so.
    """
    if n_folds < 2:
        raise ValueError("Axis 3 needs at least two folds")
    hosp = hospital_codes(hospital_ids)
    present = hosp >= 0
    n_valid = int(present.sum())
    n_missing = int(hosp.size - n_valid)
    per_hospital = np.bincount(hosp[present]) if n_valid else np.zeros(0, np.int64)
    H = int(per_hospital.size)

    def not_applicable(reason: str) -> HospitalFolds:
        return HospitalFolds(
            applicable=False,
            reason=reason,
            note=folds_note(n_missing, H, n_folds, 0),
            n_folds_requested=n_folds,
            n_folds=0,
            n_hospitals=H,
            n_records=n_valid,
            n_excluded_missing=n_missing,
            hospital_of_record=hosp,
            fold_of_hospital=np.full(H, -1, np.int64),
            fold_of_record=np.full(hosp.size, -1, np.int64),
            fold_sizes=(),
        )

    if n_valid == 0:
        reason = "no records" if hosp.size == 0 else "no record has a hospital_id"
        return not_applicable(reason)
    if H < 2:
        return not_applicable("only one hospital: cross-hospital agreement needs at least two")
    k = min(n_folds, H)

    # imported here: scikit-learn takes about a second to import, and the report and the
    # service read Axis 3's types from this module without ever assigning folds
    from sklearn.model_selection import GroupKFold

    stand_in = np.repeat(np.arange(H, dtype=np.int64), per_hospital)
    fold_of_hospital = np.full(H, -1, np.int64)
    splits = GroupKFold(n_splits=k).split(np.empty((n_valid, 0)), groups=stand_in)
    for f, (_, test) in enumerate(splits):
        fold_of_hospital[stand_in[test]] = f
    if np.any(fold_of_hospital < 0):  # GroupKFold covers every group; guard the contract
        raise RuntimeError("GroupKFold left a hospital without a fold")
    fold_of_record = np.where(present, fold_of_hospital[np.maximum(hosp, 0)], -1)
    fold_sizes = np.bincount(fold_of_hospital, weights=per_hospital, minlength=k)
    return HospitalFolds(
        applicable=True,
        reason="",
        note=folds_note(n_missing, H, n_folds, k),
        n_folds_requested=n_folds,
        n_folds=k,
        n_hospitals=H,
        n_records=n_valid,
        n_excluded_missing=n_missing,
        hospital_of_record=hosp,
        fold_of_hospital=fold_of_hospital,
        fold_of_record=fold_of_record,
        fold_sizes=tuple(int(x) for x in fold_sizes),
    )


# ----------------------------------------------------------------------------- count arrays
def label_decision_bin(
    label: np.ndarray, decision: np.ndarray, bin_idx: np.ndarray, bins: int
) -> np.ndarray:
    """Flat index of the (label, decision, score bin) part of a cell; shared by all attributes."""
    return (label * 2 + decision) * bins + bin_idx


def hospital_count_arrays(
    hosp: np.ndarray,
    group: np.ndarray,
    ldb: np.ndarray,
    score: np.ndarray,
    n_hospitals: int,
    n_groups: int,
    bins: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Records and score sums per (hospital, group, label, decision, score bin).

    Returns ``counts`` (H, G, 2, 2, B) int64 and ``score_sum`` (H, G, 2, 2, B)
    float64, from one bincount over a combined index: no record is copied per
    hospital. Every record must have a hospital (index >= 0); ``ldb`` is
    :func:`label_decision_bin` of the records, computed once for all attributes.
    """
    idx = (hosp * n_groups + group) * (4 * bins) + ldb
    size = n_hospitals * n_groups * 4 * bins
    shape = (n_hospitals, n_groups, 2, 2, bins)
    counts = np.bincount(idx, minlength=size).reshape(shape)
    score_sum = np.bincount(idx, weights=score, minlength=size).reshape(shape)
    return counts, score_sum


def fold_sums(per_hospital: np.ndarray, fold_of_hospital: np.ndarray, n_folds: int) -> np.ndarray:
    """Sum a per-hospital array (H, ...) into per-fold arrays (F, ...).

    A fold's table is the sum of its hospitals' tables. ``np.add.at`` is exact
    in the input dtype and single-threaded (a BLAS product was no faster on
    these small arrays and erratic on a busy machine).
    """
    out = np.zeros((n_folds, *per_hospital.shape[1:]), dtype=per_hospital.dtype)
    np.add.at(out, fold_of_hospital, per_hospital)
    return out


def fold_tallies(counts: np.ndarray, bin_score: np.ndarray) -> Tallies:
    """Tallies with a leading fold axis from fold counts (F, G, 2, 2, B) and score sums
    per (F, G, B) (the calibration metric reads a score sum per group and bin only)."""
    c = counts.astype(np.float64)
    return Tallies.from_confusion(c.sum(axis=-1), bin_n=c.sum(axis=3), bin_score=bin_score)


def _check_records(
    label: np.ndarray,
    decision: np.ndarray,
    score: np.ndarray,
    groups: Mapping[str, tuple[np.ndarray, int]],
    n: int,
) -> None:
    """Reject malformed inputs early: a silently wrong index would give a wrong verdict."""
    arrays = {"label": label, "decision": decision, "score": score}
    arrays.update({name: g for name, (g, _) in groups.items()})
    for name, a in arrays.items():
        if a.shape != (n,):
            raise ValueError(f"{name} must be a 1-D array of {n} records, got shape {a.shape}")
    if n == 0:
        return
    for name, a in (("label", label), ("decision", decision)):
        if a.min() < 0 or a.max() > 1:
            raise ValueError(f"{name} must be 0 or 1")
    if not np.all(np.isfinite(score)) or score.min() < 0.0 or score.max() > 1.0:
        raise ValueError("scores must be finite and in [0, 1]")
    for name, (g, k) in groups.items():
        if g.min() < 0 or g.max() >= k:
            raise ValueError(f"group index of {name!r} out of range for its {k} groups")


# ----------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Axis3Cell:
    """What Axis 3 says about one (model, metric, attribute) cell."""

    model_id: str
    metric: str
    attribute: str
    threshold: float
    direction: str
    kappa: float  # the metric's kappa, shared by its cells; NaN: not evaluable
    band: str  # Landis-Koch; "not evaluable" when kappa is NaN
    degenerate: bool  # every vote of the metric identical; kappa reported as 1.0
    fails_axis3: bool  # kappa < cutoff (False when not evaluable)
    n_pass_folds: int
    n_folds: int
    n_undefined_folds: int  # folds where the value was undefined: they do not vote
    fold_verdicts: tuple[str, ...]  # "pass"/"fail"/"undefined" per fold
    fold_values: tuple[float, ...]  # metric value per fold (NaN: undefined)
    groups_left_out: tuple[tuple[str, int], ...]  # (group code, folds where it was left out)
    #: why the cell has no kappa (too few voting folds, for the cell or the metric); ""
    kappa_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "metric": self.metric,
            "attribute": self.attribute,
            "threshold": self.threshold,
            "direction": self.direction,
            "kappa": float_or_none(self.kappa),
            "band": self.band,
            "degenerate": self.degenerate,
            "fails_axis3": self.fails_axis3,
            "n_pass_folds": self.n_pass_folds,
            "n_folds": self.n_folds,
            "n_undefined_folds": self.n_undefined_folds,
            "fold_verdicts": list(self.fold_verdicts),
            "fold_values": [float_or_none(v) for v in self.fold_values],
            "groups_left_out": dict(self.groups_left_out),
            "kappa_reason": self.kappa_reason,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Axis3Cell:
        """The inverse of :meth:`to_dict` (a fold value None -> NaN)."""
        return cls(
            model_id=str(d["model_id"]),
            metric=str(d["metric"]),
            attribute=str(d["attribute"]),
            threshold=float(d["threshold"]),
            direction=str(d["direction"]),
            kappa=as_float(d["kappa"]),
            band=str(d["band"]),
            degenerate=bool(d["degenerate"]),
            fails_axis3=bool(d["fails_axis3"]),
            n_pass_folds=int(d["n_pass_folds"]),
            n_folds=int(d["n_folds"]),
            n_undefined_folds=int(d["n_undefined_folds"]),
            fold_verdicts=tuple(str(v) for v in d.get("fold_verdicts") or ()),
            fold_values=tuple(as_float(v) for v in d.get("fold_values") or ()),
            groups_left_out=tuple(
                (str(g), int(k)) for g, k in (d.get("groups_left_out") or {}).items()
            ),
            kappa_reason=str(d.get("kappa_reason") or ""),
        )


@dataclass(frozen=True)
class MetricAgreement:
    """Fleiss' kappa of one metric over (attributes x folds)."""

    metric: str
    kappa: float
    band: str
    degenerate: bool
    fails_axis3: bool
    n_pass_folds: tuple[int, ...]  # per attribute, in configured order
    #: per attribute, the folds whose value was defined (its voters); () in rows stored
    #: before folds could abstain
    n_voting_folds: tuple[int, ...] = ()
    reason: str = ""  # why kappa is not evaluable (NaN); "" when it is

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "kappa": float_or_none(self.kappa),
            "band": self.band,
            "degenerate": self.degenerate,
            "fails_axis3": self.fails_axis3,
            "n_pass_folds": list(self.n_pass_folds),
            "n_voting_folds": list(self.n_voting_folds),
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MetricAgreement:
        """The inverse of :meth:`to_dict`."""
        return cls(
            metric=str(d["metric"]),
            kappa=as_float(d["kappa"]),
            band=str(d["band"]),
            degenerate=bool(d["degenerate"]),
            fails_axis3=bool(d["fails_axis3"]),
            n_pass_folds=tuple(int(k) for k in d.get("n_pass_folds") or ()),
            n_voting_folds=tuple(int(k) for k in d.get("n_voting_folds") or ()),
            reason=str(d.get("reason") or ""),
        )


@dataclass(frozen=True)
class Axis3Result:
    """Axis 3 for one model: per-metric agreement and per-cell results, or why it cannot run.

    When ``applicable`` is False, ``reason`` says why and there are no kappas at
    all (an invented kappa would be read as a verdict on the model).
    """

    model_id: str
    applicable: bool
    reason: str
    note: str
    kappa_cutoff: float
    n_folds_requested: int
    n_folds: int
    n_hospitals: int
    n_records: int
    n_excluded_missing_hospital: int
    fold_sizes: tuple[int, ...]
    min_group_support: int
    bins: int
    metrics: tuple[MetricAgreement, ...] = field(default=())
    cells: tuple[Axis3Cell, ...] = field(default=())

    def cell(self, metric: str, attribute: str) -> Axis3Cell:
        for c in self.cells:
            if c.metric == metric and c.attribute == attribute:
                return c
        raise KeyError((metric, attribute))

    def outcome(self, metric: str, attribute: str) -> Axis3Outcome:
        """What this result says of one cell, as the cell carries it: not applicable, no
        kappa for it (a cell this result did not judge), or its kappa and band; with the
        model's note, or why Axis 3 cannot run."""
        note = self.note or self.reason or ""
        if not self.applicable:
            return Axis3Outcome(False, note=note)
        for c in self.cells:
            if c.metric == metric and c.attribute == attribute:
                return Axis3Outcome(True, c.kappa, c.band, c.degenerate, c.kappa_reason, note)
        return Axis3Outcome(True, note=note)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: counts, verdicts and kappas only; no record values, no hospital ids."""
        return {
            "model_id": self.model_id,
            "applicable": self.applicable,
            "reason": self.reason,
            "note": self.note,
            "kappa_cutoff": self.kappa_cutoff,
            "n_folds_requested": self.n_folds_requested,
            "n_folds": self.n_folds,
            "n_hospitals": self.n_hospitals,
            "n_records": self.n_records,
            "n_excluded_missing_hospital": self.n_excluded_missing_hospital,
            "fold_sizes": list(self.fold_sizes),
            "min_group_support": self.min_group_support,
            "bins": self.bins,
            "metrics": [m.to_dict() for m in self.metrics],
            "cells": [c.to_dict() for c in self.cells],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Axis3Result:
        """The inverse of :meth:`to_dict`."""
        return cls(
            model_id=str(d["model_id"]),
            applicable=bool(d["applicable"]),
            reason=str(d.get("reason") or ""),
            note=str(d.get("note") or ""),
            kappa_cutoff=float(d["kappa_cutoff"]),
            n_folds_requested=int(d["n_folds_requested"]),
            n_folds=int(d["n_folds"]),
            n_hospitals=int(d["n_hospitals"]),
            n_records=int(d["n_records"]),
            n_excluded_missing_hospital=int(d["n_excluded_missing_hospital"]),
            fold_sizes=tuple(int(n) for n in d.get("fold_sizes") or ()),
            min_group_support=int(d["min_group_support"]),
            bins=int(d["bins"]),
            metrics=tuple(MetricAgreement.from_dict(m) for m in d.get("metrics") or ()),
            cells=tuple(Axis3Cell.from_dict(c) for c in d.get("cells") or ()),
        )


# ----------------------------------------------------------------------------- axis 3
def fold_verdicts(
    counts: np.ndarray,
    bin_score: np.ndarray,
    rules: Sequence[MetricRule],
    min_group_support: int,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """Point values and verdicts of every metric on every fold of one attribute.

    ``counts`` are fold arrays (F, G, 2, 2, B), ``bin_score`` (F, G, B). Returns
    (values per metric (F,), verdicts per metric (F,) bool, support (F, G)).
    Groups under ``min_group_support`` records in a fold are left out of that
    fold; an undefined value (NaN) is no verdict: the fold does not vote on it.
    """
    tallies = fold_tallies(counts, bin_score)
    support = tallies.group_size >= min_group_support
    values = {r.name: METRICS[r.name](tallies, support, min_group_support) for r in rules}
    verdicts = {r.name: passes(values[r.name], r.threshold, r.direction) for r in rules}
    return values, verdicts, support


def _not_applicable(
    model_id: str, folds: HospitalFolds, cutoff: float, support: int, bins: int
) -> Axis3Result:
    return Axis3Result(
        model_id=model_id,
        applicable=False,
        reason=folds.reason,
        note=folds.note,
        kappa_cutoff=cutoff,
        n_folds_requested=folds.n_folds_requested,
        n_folds=0,
        n_hospitals=folds.n_hospitals,
        n_records=folds.n_records,
        n_excluded_missing_hospital=folds.n_excluded_missing,
        fold_sizes=(),
        min_group_support=support,
        bins=bins,
    )


def _record_fold_tables(
    label: np.ndarray,
    decision: np.ndarray,
    score: np.ndarray,
    groups: Mapping[str, np.ndarray],
    attributes: Sequence[AttributeConfig],
    bins: int,
    folds: HospitalFolds,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each attribute's fold tables from records: their per-hospital counts (slot = hospital
    rank + 1, slot 0 the records without a hospital id), summed per fold."""
    y = np.asarray(label, dtype=np.int64)
    d = np.asarray(decision, dtype=np.int64)
    s = np.asarray(score, dtype=np.float64)
    g_all = {a.name: (np.asarray(groups[a.name], dtype=np.int64), len(a.codes)) for a in attributes}
    _check_records(y, d, s, g_all, folds.hospital_of_record.size)
    counts = CohortCounts(attributes, bins, with_tables=False)
    counts.add_slots(folds.hospital_of_record + 1, {k: g for k, (g, _) in g_all.items()}, y, d, s)
    fold_of_slot = np.concatenate([[-1], folds.fold_of_hospital]).astype(np.int64)
    return {a.name: counts.fold_tables(a.name, fold_of_slot, folds.n_folds) for a in attributes}


def hospital_folds_from_counts(
    counts: CohortCounts, n_folds: int
) -> tuple[HospitalFolds, np.ndarray]:
    """The fold assignment of a cohort kept as counts, and the slot of each hospital rank.

    The same decisions as :func:`hospital_folds` on the cohort's records (tested): the
    hospitals in sorted id order with their record counts, GroupKFold's greedy rule
    (:func:`group_kfold_from_sizes`), the same notes and reasons. No per-record arrays.
    """
    if n_folds < 2:
        raise ValueError("Axis 3 needs at least two folds")
    slots, per_hospital = counts.hospitals()
    n_missing = int(counts.slot_n[NO_HOSPITAL])
    n_valid = int(per_hospital.sum())
    H = int(slots.size)
    none = np.zeros(0, np.int64)
    head: dict[str, Any] = dict(
        n_folds_requested=n_folds, n_hospitals=H, n_records=n_valid,
        n_excluded_missing=n_missing, hospital_of_record=none, fold_of_record=none,
    )  # fmt: skip
    reason = ""
    if n_valid == 0:
        reason = "no records" if n_missing == 0 else "no record has a hospital_id"
    elif H < 2:
        reason = "only one hospital: cross-hospital agreement needs at least two"
    if reason:
        folds = HospitalFolds(
            applicable=False, reason=reason, note=folds_note(n_missing, H, n_folds, 0), n_folds=0,
            fold_of_hospital=np.full(H, -1, np.int64), fold_sizes=(), **head,
        )  # fmt: skip
        return folds, slots
    k = min(n_folds, H)
    fold_of_hospital = group_kfold_from_sizes(per_hospital, k)
    fold_sizes = np.bincount(fold_of_hospital, weights=per_hospital, minlength=k)
    folds = HospitalFolds(
        applicable=True, reason="", note=folds_note(n_missing, H, n_folds, k), n_folds=k,
        fold_of_hospital=fold_of_hospital, fold_sizes=tuple(int(x) for x in fold_sizes), **head,
    )  # fmt: skip
    return folds, slots


def axis3_from_counts(
    model_id: str,
    counts: CohortCounts,
    rules: Sequence[MetricRule],
    *,
    min_group_support: int = MIN_GROUP_SUPPORT,
    n_folds: int = DEFAULT_FOLDS,
    kappa_cutoff: float = DEFAULT_KAPPA_CUTOFF,
) -> Axis3Result:
    """:func:`axis3` of a cohort kept as per-hospital count tables: O(hospitals x strata),
    and the same result as :func:`axis3` on the cohort's records (tested)."""
    folds, slots = hospital_folds_from_counts(counts, n_folds)
    tables = None
    if folds.applicable:
        fold_of_slot = np.full(counts.slot_n.size, -1, np.int64)
        fold_of_slot[slots] = folds.fold_of_hospital
        tables = {
            a.name: counts.fold_tables(a.name, fold_of_slot, folds.n_folds)
            for a in counts.attributes
        }
    return axis3(
        model_id, None, None, None, None, {}, counts.attributes, rules,
        min_group_support=min_group_support, bins=counts.bins, n_folds=n_folds,
        kappa_cutoff=kappa_cutoff, folds=folds, fold_tables=tables,
    )  # fmt: skip


def axis3(
    model_id: str,
    hospital_ids: np.ndarray | pd.Series | Sequence[Any] | None,
    label: np.ndarray | None,
    decision: np.ndarray | None,
    score: np.ndarray | None,
    groups: Mapping[str, np.ndarray],
    attributes: Sequence[AttributeConfig],
    rules: Sequence[MetricRule],
    *,
    min_group_support: int = MIN_GROUP_SUPPORT,
    bins: int = 10,
    n_folds: int = DEFAULT_FOLDS,
    kappa_cutoff: float = DEFAULT_KAPPA_CUTOFF,
    folds: HospitalFolds | None = None,
    fold_tables: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> Axis3Result:
    """Cross-hospital verdict agreement of every (metric, attribute) cell of one model.

    ``groups`` maps attribute name -> group index per record (positions in the
    attribute's configured codes). ``folds`` may be passed to reuse one fold
    assignment for several models scored on the same records; otherwise it is
    computed from ``hospital_ids`` (which may then be None). ``fold_tables`` (with
    ``folds``): each attribute's fold (counts, score sums) already summed from kept
    per-hospital tables (:func:`axis3_from_counts`); the records are then not read.
    Both ways the fold tables come from :meth:`CohortCounts.fold_tables`, so the
    verdicts of a cohort are the same numbers whichever way it arrived.

    For each metric, the verdict matrix (attributes x folds) is rated with
    Fleiss' kappa (items = attributes, raters = folds); the metric's kappa is
    assigned to each of its cells, which fail Axis 3 when kappa < kappa_cutoff.
    A fold whose value for a cell is undefined does not vote on it
    (:func:`fleiss_kappa` with per-item raters); a cell that fewer than two folds
    can judge gets no kappa, and neither does any cell of a metric that too few
    folds can judge (:func:`kappa_not_evaluable`).
    """
    if folds is None:
        if hospital_ids is None:
            raise ValueError("pass hospital_ids or a precomputed fold assignment")
        folds = hospital_folds(hospital_ids, n_folds)
    if not folds.applicable:
        return _not_applicable(model_id, folds, kappa_cutoff, min_group_support, bins)
    if not attributes or not rules:
        raise ValueError("Axis 3 needs at least one attribute and one metric")
    if fold_tables is None:
        if label is None or decision is None or score is None:
            raise ValueError("pass the records (label, decision, score) or fold_tables")
        fold_tables = _record_fold_tables(label, decision, score, groups, attributes, bins, folds)

    F = folds.n_folds
    A = len(attributes)
    verdict = {r.name: np.zeros((A, F), dtype=bool) for r in rules}
    value = {r.name: np.zeros((A, F)) for r in rules}
    left_out: list[tuple[tuple[str, int], ...]] = []
    for i, a in enumerate(attributes):
        f_counts, f_scores = fold_tables[a.name]
        vals, verds, support = fold_verdicts(f_counts, f_scores, rules, min_group_support)
        for r in rules:
            value[r.name][i] = vals[r.name]
            verdict[r.name][i] = verds[r.name]
        missing = (~support).sum(axis=0)
        left_out.append(tuple((c, int(k)) for c, k in zip(a.codes, missing, strict=True) if k))

    metric_rows, cells = [], []
    for r in rules:
        votes = ~np.isnan(value[r.name])  # (A, F): a fold votes where its value is defined
        n_pass = (verdict[r.name] & votes).sum(axis=1)
        n_votes = votes.sum(axis=1)
        reason = kappa_not_evaluable(votes)
        if reason:
            kappa, degenerate, band, fails = math.nan, False, NOT_EVALUABLE_BAND, False
        else:
            kappa, degenerate = fleiss_kappa_from_pass_counts(n_pass, n_votes)
            band, fails = landis_koch_band(kappa), kappa < kappa_cutoff
        metric_rows.append(
            MetricAgreement(
                r.name,
                kappa,
                band,
                degenerate,
                fails,
                tuple(int(k) for k in n_pass),
                tuple(int(k) for k in n_votes),
                reason,
            )
        )
        for i, a in enumerate(attributes):
            own = "" if n_votes[i] >= 2 else f"{int(n_votes[i])} of {F} folds can judge it"
            cell_reason = reason or own
            cells.append(
                Axis3Cell(
                    model_id=model_id,
                    metric=r.name,
                    attribute=a.name,
                    threshold=r.threshold,
                    direction=r.direction,
                    kappa=math.nan if cell_reason else kappa,
                    band=NOT_EVALUABLE_BAND if cell_reason else band,
                    degenerate=False if cell_reason else degenerate,
                    fails_axis3=False if cell_reason else fails,
                    n_pass_folds=int(n_pass[i]),
                    n_folds=F,
                    n_undefined_folds=int(F - n_votes[i]),
                    fold_verdicts=tuple(
                        ("pass" if v else "fail") if ok else "undefined"
                        for v, ok in zip(verdict[r.name][i], votes[i], strict=True)
                    ),
                    fold_values=tuple(float(v) for v in value[r.name][i]),
                    groups_left_out=left_out[i],
                    kappa_reason=cell_reason,
                )
            )
    return Axis3Result(
        model_id=model_id,
        applicable=True,
        reason="",
        note=folds.note,
        kappa_cutoff=kappa_cutoff,
        n_folds_requested=folds.n_folds_requested,
        n_folds=F,
        n_hospitals=folds.n_hospitals,
        n_records=folds.n_records,
        n_excluded_missing_hospital=folds.n_excluded_missing,
        fold_sizes=folds.fold_sizes,
        min_group_support=min_group_support,
        bins=bins,
        metrics=tuple(metric_rows),
        cells=tuple(cells),
    )
