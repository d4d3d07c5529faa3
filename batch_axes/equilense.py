"""The EquiLense result of one cohort, and the small-cell rule that acts on it.

:func:`batch_axes.runner.run_equilense` fills an :class:`EquiLenseResult`: the group
metrics of every (model, attribute) table and, with similarity features, each model's
individual-fairness gap and MPPD per attribute. It travels typed to the store, the API
and the report; :meth:`EquiLenseResult.to_dict` is its JSON (``mppd.json``, the
``equilense`` axis payload) and :meth:`EquiLenseResult.from_dict` reads that back.

The small-cell rule is applied to the typed MPPD entries before they leave the
computation (and are stored), by their named fields: a mean over fewer than 11 pairs, and
a group of fewer than 11 records however many pairs it has, is suppressed (mean ``None``,
pairs :data:`~monitor.core.privacy.SMALL_CELL_LABEL`). What a result shows outside the
service (secondary suppression, rounded counts) is
:func:`monitor.publish.equilense.published_equilense`.

Why this part of the rule is the computation's, not :mod:`monitor.publish`'s (which this
package, below it in the layers, cannot import): it needs what the result does not keep,
the records of each group (on a sample, the sample's) and, for a sampled result, the
sample itself, to give the disparity left after withholding its standard error
(:func:`batch_axes.runner._sampled_mppd`, :func:`~batch_axes.mppd_sample.with_disparity_error`);
and the stored form is itself sent out (the results topic the fleet view reads), so it
never holds a mean over fewer than 11 pairs or records.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from batch_axes.equilense_groups import GroupMetricResult
from batch_axes.mppd import GroupMPPD, IndividualFairnessGap, MPPDPairwise, MPPDReference
from batch_axes.mppd_sample import MPPDSampling
from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL


@dataclass(frozen=True)
class AttributeMPPD:
    """MPPD of one (model, attribute): against the reference group, and group by group."""

    reference: MPPDReference
    pairwise: MPPDPairwise

    def to_dict(self) -> dict[str, Any]:
        return {"reference": self.reference.to_dict(), "pairwise": self.pairwise.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AttributeMPPD:
        return cls(MPPDReference.from_dict(d["reference"]), MPPDPairwise.from_dict(d["pairwise"]))


@dataclass(frozen=True)
class ModelMPPD:
    """One model's individual-fairness gap and MPPD per attribute.

    A model of fewer than 11 records shows nothing but its id: ``records`` is
    SMALL_CELL_LABEL, no gap, no attribute. ``sampling`` says how the figures were
    computed: on all records, or on a stratified sample (then every mean carries its
    standard error); None in results written before it existed.
    """

    records: int | str
    individual_fairness_gap: IndividualFairnessGap | None
    mppd: dict[str, AttributeMPPD] = field(default_factory=dict)
    sampling: MPPDSampling | None = None

    def to_dict(self) -> dict[str, Any]:
        gap = self.individual_fairness_gap
        return {
            "records": self.records,
            "individual_fairness_gap": None if gap is None else gap.to_dict(),
            "mppd": {name: entry.to_dict() for name, entry in self.mppd.items()},
            # absent rather than null: a model of fewer than 11 records shows its id alone
            **({} if self.sampling is None else {"sampling": self.sampling.to_dict()}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelMPPD:
        gap = d.get("individual_fairness_gap")
        sampling = d.get("sampling")
        return cls(
            records=d["records"],
            individual_fairness_gap=None if gap is None else IndividualFairnessGap.from_dict(gap),
            mppd={str(k): AttributeMPPD.from_dict(v) for k, v in (d.get("mppd") or {}).items()},
            sampling=None if sampling is None else MPPDSampling.from_dict(sampling),
        )


@dataclass(frozen=True)
class EquiLenseResult:
    """EquiLense on one cohort: group metrics of every table, MPPD of every model.

    ``mppd_note`` says why MPPD did not run (no similarity features); ``models`` is
    then empty.
    """

    threshold: float
    scaling: str
    features: tuple[str, ...]
    group_metrics: tuple[GroupMetricResult, ...]
    models: dict[str, ModelMPPD] = field(default_factory=dict)
    mppd_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "threshold": self.threshold,
            "scaling": self.scaling,
            "features": list(self.features),
            "group_metrics": [r.to_dict() for r in self.group_metrics],
            "models": {m: entry.to_dict() for m, entry in self.models.items()},
        }
        if self.mppd_note is not None:
            out["mppd_note"] = self.mppd_note
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EquiLenseResult:
        return cls(
            threshold=float(d["threshold"]),
            scaling=str(d["scaling"]),
            features=tuple(str(f) for f in d.get("features") or ()),
            group_metrics=tuple(
                GroupMetricResult.from_dict(r) for r in d.get("group_metrics") or ()
            ),
            models={str(m): ModelMPPD.from_dict(v) for m, v in (d.get("models") or {}).items()},
            mppd_note=d.get("mppd_note"),
        )


# --------------------------------------------------------------------------- small-cell rule


def _withheld(entry: GroupMPPD) -> GroupMPPD:
    return replace(
        entry, mean=None, pairs=SMALL_CELL_LABEL, gap_to_reference=None, se=None, gap_se=None
    )


def _few(pairs: int | str) -> bool:
    return isinstance(pairs, int) and pairs < SMALL_CELL


def suppress_small_gap(gap: IndividualFairnessGap) -> IndividualFairnessGap:
    """The individual-fairness gap over fewer than 11 pairs is withheld (see below)."""
    return replace(gap, mean=None, pairs=SMALL_CELL_LABEL, se=None) if _few(gap.pairs) else gap


def suppress_small_pair_counts(entry: AttributeMPPD) -> AttributeMPPD:
    """Small-cell rule for MPPD by pairs: a mean over fewer than 11 pairs is withheld.

    Why: a mean over one pair is |p_i - p_j| of two identifiable patients, a
    record-level value. Reference entries are withheld whole; the pairwise matrices
    cell by cell.
    """
    ref, pw = entry.reference, entry.pairwise
    groups = tuple(_withheld(g) if _few(g.pairs) else g for g in ref.groups)
    means = tuple(
        tuple(None if _few(n) else m for m, n in zip(mr, nr, strict=True))
        for mr, nr in zip(pw.means, pw.pairs, strict=True)
    )
    pairs = tuple(tuple(SMALL_CELL_LABEL if _few(n) else n for n in nr) for nr in pw.pairs)
    return AttributeMPPD(replace(ref, groups=groups), replace(pw, means=means, pairs=pairs))


def suppress_small_groups(entry: AttributeMPPD, sizes: Mapping[str, int]) -> AttributeMPPD:
    """Small-cell rule for MPPD by group records: a group with fewer than 11 records is
    withheld however many pairs it has (its mean is a figure about fewer than 11
    patients); a pairwise cell is withheld when either group is small; a small
    reference group leaves no gap to show.
    """
    return suppress_groups(entry, {g for g, n in sizes.items() if n < SMALL_CELL})


def suppress_groups(entry: AttributeMPPD, small: Collection[str]) -> AttributeMPPD:
    """``entry`` with the groups ``small`` withheld: their reference entries, every
    pairwise cell they are in, and the gaps to a withheld reference group."""
    ref, pw = entry.reference, entry.pairwise
    ref_small = ref.reference in small
    groups = tuple(
        _withheld(g) if g.group in small
        else replace(g, gap_to_reference=None, gap_se=None) if ref_small
        else g
        for g in ref.groups
    )  # fmt: skip
    hidden = [[a in small or b in small for b in pw.groups] for a in pw.groups]
    means = tuple(
        tuple(None if h else m for m, h in zip(mr, hr, strict=True))
        for mr, hr in zip(pw.means, hidden, strict=True)
    )
    pairs = tuple(
        tuple(SMALL_CELL_LABEL if h else n for n, h in zip(nr, hr, strict=True))
        for nr, hr in zip(pw.pairs, hidden, strict=True)
    )
    return AttributeMPPD(replace(ref, groups=groups), replace(pw, means=means, pairs=pairs))


def disparity_of_shown(entry: AttributeMPPD) -> AttributeMPPD:
    """The reference disparity recomputed over the means left after suppression.

    On a sample (``disparity_between`` set), its error stays when the same two groups
    are still the maximum and the minimum; when withholding changed them, the error of
    the new difference is bounded by the two groups' errors added in quadrature
    (their covariance, through the shared reference records, is not stored).
    """
    ref = entry.reference
    shown = [g for g in ref.groups if g.mean is not None]
    if len(shown) < 2:
        return replace(entry, reference=replace(
            ref, disparity=None, disparity_se=None, disparity_between=None
        ))  # fmt: skip
    hi = max(shown, key=lambda g: g.mean)  # type: ignore[arg-type, return-value]  # shown: has a mean
    lo = min(shown, key=lambda g: g.mean)  # type: ignore[arg-type, return-value]  # shown: has a mean
    disparity = hi.mean - lo.mean  # type: ignore[operator]  # shown: has a mean
    se, between = ref.disparity_se, ref.disparity_between
    if between is not None and between != (hi.group, lo.group):
        se = None if hi.se is None or lo.se is None else float(math.hypot(hi.se, lo.se))
        between = (hi.group, lo.group)
    return replace(entry, reference=replace(
        ref, disparity=disparity, disparity_se=se, disparity_between=between
    ))  # fmt: skip


def suppress_small_cells(entry: AttributeMPPD, sizes: Mapping[str, int]) -> AttributeMPPD:
    """Every small-cell rule of one attribute's MPPD, in order: pairs, groups, disparity."""
    return disparity_of_shown(suppress_small_groups(suppress_small_pair_counts(entry), sizes))
