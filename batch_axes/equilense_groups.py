"""EquiLense group metrics (docs/method.md section 7): each group against the whole cohort.

Where the audit grid compares groups with each other (max - min), EquiLense
compares every group with the population: a governance report can then say
*which* group is off and by how much. All four are functions of the same count
tables as Axis 1, so they cost nothing extra to keep.

* DPD_g  = SR_g - SR
* EOD_g  = TPR_g - TPR
* EO_g   = (|TPR_g - TPR| + |FPR_g - FPR|) / 2
* EDDI_g = |ER_g - ER| / max(ER, 1 - ER), ER = error rate

The population rates are over all records of the attribute's table. A group's
value rests on its rates' denominators, as in Axis 1 (monitor.core.metrics): it gets
no value unless each has at least ``min_group_size`` records (default 10) and never
fewer than the small-cell rule's 11: records for DPD and EDDI, positives for EOD,
positives and negatives for EO.

:func:`monitor.publish.equilense.published_group_metrics` is what a result shows outside
the service.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from monitor.core.counts import CountTable
from monitor.core.metrics import (
    Tallies,
    false_positive_rate,
    rate_denominator,
    selection_rate,
    tallies_from_table,
    true_positive_rate,
)
from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL

GROUP_METRICS = ("DPD", "EOD", "EO", "EDDI")

#: The Axis 1 metric whose rates each EquiLense metric uses, so that
#: :func:`~monitor.core.metrics.rate_denominator` gives its denominators: selection rate
#: (records) for DPD, TPR (positives) for EOD, TPR and FPR for EO, the error rate
#: (records) for EDDI.
DENOMINATOR_OF = {"DPD": "SPD", "EOD": "EOPP", "EO": "EOD", "EDDI": "SPD"}


def _population(t: Tallies) -> Tallies:
    """The whole table as a single group."""
    return Tallies(*(a.sum(axis=-1, keepdims=True) for a in (t.tn, t.fp, t.fn, t.tp)))


def error_rate(t: Tallies) -> np.ndarray:
    n = t.group_size
    return np.divide(t.fp + t.fn, n, out=np.full(n.shape, np.nan), where=n > 0)


def demographic_parity_differences(t: Tallies) -> np.ndarray:
    """DPD_g = SR_g - SR per group."""
    return selection_rate(t) - selection_rate(_population(t))


def equal_opportunity_differences(t: Tallies) -> np.ndarray:
    """EOD_g = TPR_g - TPR per group (NaN without positives)."""
    return true_positive_rate(t) - true_positive_rate(_population(t))


def equalized_odds_gaps(t: Tallies) -> np.ndarray:
    """EO_g = (|TPR_g - TPR| + |FPR_g - FPR|) / 2 per group."""
    pop = _population(t)
    return (
        np.abs(true_positive_rate(t) - true_positive_rate(pop))
        + np.abs(false_positive_rate(t) - false_positive_rate(pop))
    ) / 2


def error_distribution_disparity(t: Tallies) -> np.ndarray:
    """EDDI_g = |ER_g - ER| / max(ER, 1 - ER) per group."""
    er = error_rate(_population(t))
    return np.abs(error_rate(t) - er) / np.maximum(er, 1 - er)


_FUNCS = {
    "DPD": demographic_parity_differences,
    "EOD": equal_opportunity_differences,
    "EO": equalized_odds_gaps,
    "EDDI": error_distribution_disparity,
}


@dataclass(frozen=True)
class GroupMetricResult:
    """One EquiLense metric for one (model, attribute): per-group values and summaries."""

    model_id: str
    attribute: str
    metric: str
    #: None: a denominator under min_group_size (or 11) records, or undefined
    by_group: dict[str, float | None]
    #: records per group; SMALL_CELL_LABEL for a count read back from :meth:`to_dict`,
    #: which withholds counts below SMALL_CELL
    group_n: dict[str, int | str]
    max_abs: float | None
    mean_abs: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "attribute": self.attribute,
            "metric": self.metric,
            "by_group": dict(self.by_group),
            # small-cell suppression: a count of 1-10 is stored as "<11"; an empty group
            # stays 0 (it discloses no patient, and the published form must tell it
            # from a small group, see published_group_metrics)
            "group_n": {
                g: (n if isinstance(n, int) and (n == 0 or n >= SMALL_CELL) else SMALL_CELL_LABEL)
                for g, n in self.group_n.items()
            },
            "max_abs": self.max_abs,
            "mean_abs": self.mean_abs,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GroupMetricResult:
        """The inverse of :meth:`to_dict` (a withheld count stays SMALL_CELL_LABEL)."""
        return cls(
            model_id=str(d["model_id"]),
            attribute=str(d["attribute"]),
            metric=str(d["metric"]),
            by_group=dict(d.get("by_group") or {}),
            group_n=dict(d.get("group_n") or {}),
            max_abs=d.get("max_abs"),
            mean_abs=d.get("mean_abs"),
        )


def equilense_group_metrics(
    model_id: str, attribute: str, table: CountTable, min_group_size: int = 10
) -> list[GroupMetricResult]:
    """DPD, EOD, EO and EDDI per group of one (model, attribute) table."""
    t = tallies_from_table(table)
    sizes = table.group_counts()
    # never below the small-cell rule, whatever min_group_size says
    least = max(min_group_size, SMALL_CELL)
    out = []
    for name in GROUP_METRICS:
        values = _FUNCS[name](t)
        ok = (rate_denominator(DENOMINATOR_OF[name], t) >= least) & ~np.isnan(values)
        absval = np.abs(values[ok])
        out.append(
            GroupMetricResult(
                model_id=model_id,
                attribute=attribute,
                metric=name,
                by_group={
                    g: (float(v) if o else None)
                    for g, v, o in zip(table.groups, values, ok, strict=True)
                },
                group_n={g: int(n) for g, n in zip(table.groups, sizes, strict=True)},
                max_abs=float(absval.max()) if absval.size else None,
                mean_abs=float(absval.mean()) if absval.size else None,
            )
        )
    return out
