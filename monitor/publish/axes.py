"""The scheduled axes as they leave the service: Axis 2 (N*) and Axis 3 (hospital kappa),
and the one dispatch the API and the audit files use for any scheduled result.

Each result's ``to_dict`` is its stored form, exact; what leaves is what these functions
make of the typed result: a cohort of fewer than 11 records shows ``<11`` and no payload,
record counts are rounded, Axis 3's folds are one family under secondary suppression and
no note quotes an exact small count. EquiLense is :mod:`monitor.publish.equilense`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result, folds_note
from batch_axes.equilense import EquiLenseResult
from monitor.core.privacy import SMALL_CELL_LABEL, reportable
from monitor.publish.counts import published_count, published_family, published_size
from monitor.publish.equilense import published_equilense

#: What one scheduled-axis job produces for one model (monitor.store.codec).
ScheduledResult = tuple[Axis2Cell, ...] | Axis3Result | EquiLenseResult
R = TypeVar("R")


def published_axis2(cell: Axis2Cell) -> dict[str, Any]:
    """What an Axis 2 cell shows outside the service: :meth:`Axis2Cell.to_dict` with its
    cohort size rounded (docs/privacy.md: a total published exact beside rounded group
    sizes would let a complement name a withheld group)."""
    return {**cell.to_dict(), "cohort_n": published_size(cell.cohort_n)}


def published_axis3(result: Axis3Result) -> dict[str, Any]:
    """What an Axis 3 result shows outside the service (the API, the audit files).

    :meth:`Axis3Result.to_dict` is the stored form, exact. Here the folds are one family
    under the small-cell rule (:func:`~monitor.publish.counts.published_family`): a fold
    of 1-10 records, and as many more of the smallest as keep the record total minus the
    shown folds from naming it, show ``<11`` for their size, value and verdict; the other
    sizes, the record count and the excluded count are rounded, and the note quotes only
    published counts. Kappas, bands, pass and vote counts and the fold count stay exact:
    they are computed from verdicts, and a small fold has no verdict (no two groups of
    it reach the group support, so its value is undefined and it does not vote), so it
    says nothing of its patients.
    """
    out = result.to_dict()
    sizes = published_family(dict(enumerate(result.fold_sizes)))
    hidden = {i for i, n in sizes.items() if n == SMALL_CELL_LABEL}
    out["fold_sizes"] = [sizes[i] for i in range(len(result.fold_sizes))]
    out["n_records"] = published_size(result.n_records)
    out["n_excluded_missing_hospital"] = published_size(result.n_excluded_missing_hospital)
    out["note"] = published_axis3_note(result)
    for cell in out["cells"]:
        for key in ("fold_verdicts", "fold_values"):
            cell[key] = [SMALL_CELL_LABEL if i in hidden else v for i, v in enumerate(cell[key])]
    return out


def published_axis3_note(result: Axis3Result) -> str:
    """What Axis 3's fold assignment adapted, in words, its counts as published (the
    report's summary shows it where the result gives no reason)."""
    return folds_note(
        result.n_excluded_missing_hospital,
        result.n_hospitals,
        result.n_folds_requested,
        result.n_folds if result.applicable else 0,
    )


def published_axis(result: ScheduledResult) -> Any:
    """What a scheduled axis's result shows outside the service: each axis's publication
    function (the same ones the audit files use), never the stored ``to_dict``."""
    if isinstance(result, Axis3Result):
        return published_axis3(result)
    if isinstance(result, EquiLenseResult):
        return published_equilense(result)
    return [published_axis2(c) for c in result if isinstance(c, Axis2Cell)]


def published_axis_row(
    cohort_n: int | None, result: Callable[[], ScheduledResult]
) -> tuple[int | str, Any]:
    """A stored scheduled result's cohort size and payload as the API serves them: a
    cohort of fewer than 11 records shows ``<11`` and no payload (``result``, which reads
    the stored payload, is then not called); a larger one its size rounded and
    :func:`published_axis` of the result."""
    if not reportable(cohort_n):
        return SMALL_CELL_LABEL, None
    return published_count(cohort_n), published_axis(result())


def reported_axis(cohort_n: int | None, result: Callable[[], R]) -> R | None:
    """A stored scheduled result as the report may read it, typed: None when its cohort
    held fewer than 11 records (``result``, which reads the stored payload, is then not
    called), else ``result()``; the report shows it through its own summaries."""
    return result() if reportable(cohort_n) else None
