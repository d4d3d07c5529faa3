"""EquiLense as it leaves the service (``mppd.json``, the API's ``equilense`` axis).

:meth:`~batch_axes.equilense.EquiLenseResult.to_dict` is the stored form; the MPPD entries
are stored already under the rule by pairs and by group records
(:func:`~batch_axes.equilense.suppress_small_cells`). Here each attribute's groups are one
family under secondary suppression, sizes and pair counts are rounded and values to
:data:`~monitor.core.privacy.RATE_DECIMALS`: :func:`equilense_value` returns the typed
:class:`PublishedEquiLense`, :func:`published_equilense` its JSON
(:mod:`monitor.publish.encode`), and :func:`equilense_read` reads a published file back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
from monitor.publish.counts import family_values, published_size, size_value
from monitor.publish.encode import JsonObject, equilense_json, group_metrics_json
from monitor.publish.shown import SMALL, Published, Shown


def _abs_summary(values: list[float]) -> tuple[float | None, float | None]:
    """max |v| and mean |v| of the shown values (None without any).

    >>> _abs_summary([0.1, -0.3]), _abs_summary([])
    ((0.3, 0.2), (None, None))
    """
    if not values:
        return None, None
    a = np.abs(np.asarray(values))
    return float(a.max()), float(a.mean())


@dataclass(frozen=True, slots=True)
class PublishedGroupMetrics:
    """One EquiLense metric of one (model, attribute) as it leaves: each group's value
    and size shown (rounded) or withheld, the summaries over the shown values."""

    model_id: str
    attribute: str
    metric: str
    by_group: dict[str, Published[float | None]]
    group_n: dict[str, Published[int]]
    max_abs: float | None
    mean_abs: float | None


def group_metrics_value(result: GroupMetricResult) -> PublishedGroupMetrics:
    """What one EquiLense metric of one (model, attribute) shows outside the service.

    The attribute's groups are one family under the small-cell rule
    (:func:`~monitor.publish.counts.family_values`): a group of 1-10 records, and as
    many more of the smallest as keep ``cohort_n`` minus the shown groups from naming
    it, are withheld, size and value; the shown sizes are rounded to 5 and the values to
    :data:`~monitor.core.privacy.RATE_DECIMALS`. Withholding two groups' values also
    defeats the identity sum_g n_g DPD_g = 0: it then gives one equation in two unknown
    groups, and with rounded sizes and values not even that exactly. ``max_abs`` and
    ``mean_abs`` are over the shown values (a maximum over a withheld group would show
    its value).
    """
    hidden = family_withheld(result.group_n)
    sizes = family_values(result.group_n, hidden)
    by_group: dict[str, Published[float | None]] = {
        g: sizes[g] if g in hidden else Shown(rounded_rate(v))  # type: ignore[misc]  # hidden: withheld
        for g, v in result.by_group.items()
    }
    max_abs, mean_abs = _abs_summary(
        [float(v) for g, v in result.by_group.items() if g not in hidden and v is not None]
    )
    return PublishedGroupMetrics(
        result.model_id, result.attribute, result.metric, by_group, sizes,
        rounded_rate(max_abs), rounded_rate(mean_abs),
    )  # fmt: skip


def published_group_metrics(result: GroupMetricResult) -> JsonObject:
    """:func:`group_metrics_value`'s JSON (a withheld group: ``<11`` for its size, null
    for its value)."""
    return group_metrics_json(group_metrics_value(result))


@dataclass(frozen=True, slots=True)
class PublishedModelMPPD:
    """One model's MPPD as it leaves: its record count published, its gap and its
    entries' pair counts rounded, the groups the group metrics withhold withheld from its
    entries too, how it was computed with its record counts rounded."""

    records: Published[int]
    individual_fairness_gap: IndividualFairnessGap | None
    mppd: dict[str, AttributeMPPD]
    sampling: MPPDSampling | None


@dataclass(frozen=True, slots=True)
class PublishedEquiLense:
    """An EquiLense result as it leaves (:class:`EquiLenseResult`'s fields, published)."""

    threshold: float
    scaling: str
    features: tuple[str, ...]
    group_metrics: tuple[PublishedGroupMetrics, ...]
    models: dict[str, PublishedModelMPPD]
    mppd_note: str | None


def equilense_value(result: EquiLenseResult) -> PublishedEquiLense:
    """What an EquiLense result shows outside the service (``mppd.json``, the API).

    Every group metric goes through :func:`group_metrics_value` (secondary suppression
    over each attribute's groups, rounded sizes and values) and a model's record count
    is rounded. The MPPD entries are stored under the rule by pairs and by group records
    (:func:`~batch_axes.equilense.suppress_small_cells`); here the groups the group
    metrics withhold by secondary suppression are withheld from MPPD too, and pair counts
    are rounded: with dense matching a group's pairs are about its records times the
    reference group's, so an exact count would give a withheld group's size back.
    """
    hidden = {(r.model_id, r.attribute): family_withheld(r.group_n) for r in result.group_metrics}
    models = {
        model_id: PublishedModelMPPD(
            records=size_value(m.records) if isinstance(m.records, int) else SMALL,
            individual_fairness_gap=_rounded_gap(m.individual_fairness_gap),
            mppd={
                attr: _rounded_pairs(
                    disparity_of_shown(suppress_groups(entry, hidden.get((model_id, attr), ())))
                )
                for attr, entry in m.mppd.items()
            },
            sampling=None if m.sampling is None else _published_sampling(m.sampling),
        )
        for model_id, m in result.models.items()
    }
    return PublishedEquiLense(
        result.threshold, result.scaling, tuple(result.features),
        tuple(group_metrics_value(r) for r in result.group_metrics), models, result.mppd_note,
    )  # fmt: skip


def published_equilense(result: EquiLenseResult) -> JsonObject:
    """:func:`equilense_value`'s JSON (``mppd.json``, the API's ``equilense`` axis)."""
    return equilense_json(equilense_value(result))


def _read_count(n: int | str) -> Published[int]:
    """A count read back from a published file: a number, or withheld (the file's text)."""
    return Shown(n) if isinstance(n, int) else SMALL


def _read_value(value: float | None, size: int | str) -> Published[float | None]:
    """A group's value read back from a published file: withheld where its size is."""
    return Shown(value) if isinstance(size, int) else SMALL


def equilense_read(result: EquiLenseResult) -> PublishedEquiLense:
    """A published ``mppd.json`` read back (``EquiLenseResult.from_dict``) as the
    published result it was: a group is withheld where its size is, as
    :func:`group_metrics_value` withholds both."""
    metrics = tuple(
        PublishedGroupMetrics(
            r.model_id,
            r.attribute,
            r.metric,
            {g: _read_value(v, r.group_n.get(g, 0)) for g, v in r.by_group.items()},
            {g: _read_count(n) for g, n in r.group_n.items()},
            r.max_abs,
            r.mean_abs,
        )
        for r in result.group_metrics
    )
    models = {
        m: PublishedModelMPPD(_read_count(e.records), e.individual_fairness_gap, e.mppd, e.sampling)
        for m, e in result.models.items()
    }
    return PublishedEquiLense(
        result.threshold, result.scaling, result.features, metrics, models, result.mppd_note
    )


def _published_sampling(s: MPPDSampling) -> MPPDSampling:
    """How MPPD was computed, with the record counts as any published size (rounded;
    :class:`MPPDSampling` holds a withheld one as the files write it, its stored form)."""
    return replace(
        s,
        records=published_size(s.records) if isinstance(s.records, int) else s.records,
        cohort_records=(
            published_size(s.cohort_records)
            if isinstance(s.cohort_records, int) else s.cohort_records
        ),
    )  # fmt: skip


def _rounded(pairs: int | str) -> int | str:
    return rounded_count(pairs) if isinstance(pairs, int) else pairs


def _rounded_gap(gap: IndividualFairnessGap | None) -> IndividualFairnessGap | None:
    return None if gap is None else replace(gap, pairs=_rounded(gap.pairs))


def _rounded_pairs(entry: AttributeMPPD) -> AttributeMPPD:
    """Every pair count of ``entry`` rounded to 5 (withheld ones stay ``<11``)."""
    ref, pw = entry.reference, entry.pairwise
    groups = tuple(replace(g, pairs=_rounded(g.pairs)) for g in ref.groups)
    pairs = tuple(tuple(_rounded(n) for n in row) for row in pw.pairs)
    return AttributeMPPD(replace(ref, groups=groups), replace(pw, pairs=pairs))
