"""EquiLense as it leaves the service (``mppd.json``, the API's ``equilense`` axis).

:meth:`~batch_axes.equilense.EquiLenseResult.to_dict` is the stored form; the MPPD entries
are stored already under the rule by pairs and by group records
(:func:`~batch_axes.equilense.suppress_small_cells`). Here each attribute's groups are one
family under secondary suppression, sizes and pair counts are rounded and values to
:data:`~monitor.core.privacy.RATE_DECIMALS`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from batch_axes.equilense import (
    AttributeMPPD,
    EquiLenseResult,
    disparity_of_shown,
    suppress_groups,
)
from batch_axes.equilense_groups import GroupMetricResult
from batch_axes.mppd import IndividualFairnessGap
from batch_axes.mppd_sample import MPPDSampling
from monitor.core.privacy import family_withheld, rounded_count, rounded_rate
from monitor.publish.counts import published_family, published_size


def _abs_summary(values: list[float]) -> tuple[float | None, float | None]:
    """max |v| and mean |v| of the shown values (None without any).

    >>> _abs_summary([0.1, -0.3]), _abs_summary([])
    ((0.3, 0.2), (None, None))
    """
    if not values:
        return None, None
    a = np.abs(np.asarray(values))
    return float(a.max()), float(a.mean())


def published_group_metrics(result: GroupMetricResult) -> dict[str, Any]:
    """What one EquiLense metric of one (model, attribute) shows outside the service.

    The attribute's groups are one family under the small-cell rule
    (:func:`~monitor.publish.counts.published_family`): a group of 1-10 records, and as
    many more of the smallest as keep ``cohort_n`` minus the shown groups from naming
    it, show ``<11`` for their size and no value; the shown sizes are rounded to 5 and
    the values to :data:`~monitor.core.privacy.RATE_DECIMALS`. Withholding two groups'
    values also defeats the identity sum_g n_g DPD_g = 0: it then gives one equation in
    two unknown groups, and with rounded sizes and values not even that exactly.
    ``max_abs`` and ``mean_abs`` are over the shown values (a maximum over a withheld
    group would show its value).
    """
    hidden = family_withheld(result.group_n)
    by_group = {g: None if g in hidden else rounded_rate(v) for g, v in result.by_group.items()}
    max_abs, mean_abs = _abs_summary(
        [float(v) for g, v in result.by_group.items() if g not in hidden and v is not None]
    )
    return {
        **result.to_dict(),
        "by_group": by_group,
        "group_n": published_family(result.group_n),
        "max_abs": rounded_rate(max_abs),
        "mean_abs": rounded_rate(mean_abs),
    }


def published_equilense(result: EquiLenseResult) -> dict[str, Any]:
    """What an EquiLense result shows outside the service (``mppd.json``, the API).

    :meth:`EquiLenseResult.to_dict` is the stored form. Here every group metric goes
    through :func:`published_group_metrics` (secondary suppression over each attribute's
    groups, rounded sizes and values) and a model's record count is rounded. The MPPD
    entries are stored under the rule by pairs and by group records
    (:func:`~batch_axes.equilense.suppress_small_cells`); here the groups the group
    metrics withhold by secondary suppression are withheld from MPPD too, and pair counts
    are rounded: with dense matching a group's pairs are about its records times the
    reference group's, so an exact count would give a withheld group's size back.
    """
    out = result.to_dict()
    out["group_metrics"] = [published_group_metrics(r) for r in result.group_metrics]
    hidden = {(r.model_id, r.attribute): family_withheld(r.group_n) for r in result.group_metrics}
    for model_id, model in result.models.items():
        shown = out["models"][model_id]
        if isinstance(model.records, int):
            shown["records"] = published_size(model.records)
        if model.individual_fairness_gap is not None:
            shown["individual_fairness_gap"] = _rounded_gap(model.individual_fairness_gap)
        if model.sampling is not None:
            shown["sampling"] = _published_sampling(model.sampling)
        shown["mppd"] = {
            attr: _rounded_pairs(
                disparity_of_shown(suppress_groups(entry, hidden.get((model_id, attr), ())))
            ).to_dict()
            for attr, entry in model.mppd.items()
        }
    return out


def _published_sampling(s: MPPDSampling) -> dict[str, Any]:
    """How MPPD was computed, with the record counts as any published size (rounded)."""
    return replace(
        s,
        records=published_size(s.records) if isinstance(s.records, int) else s.records,
        cohort_records=(
            published_size(s.cohort_records)
            if isinstance(s.cohort_records, int) else s.cohort_records
        ),
    ).to_dict()  # fmt: skip


def _rounded(pairs: int | str) -> int | str:
    return rounded_count(pairs) if isinstance(pairs, int) else pairs


def _rounded_gap(gap: IndividualFairnessGap) -> dict[str, Any]:
    return replace(gap, pairs=_rounded(gap.pairs)).to_dict()


def _rounded_pairs(entry: AttributeMPPD) -> AttributeMPPD:
    """Every pair count of ``entry`` rounded to 5 (withheld ones stay ``<11``)."""
    ref, pw = entry.reference, entry.pairwise
    groups = tuple(replace(g, pairs=_rounded(g.pairs)) for g in ref.groups)
    pairs = tuple(tuple(_rounded(n) for n in row) for row in pw.pairs)
    return AttributeMPPD(replace(ref, groups=groups), replace(pw, pairs=pairs))
