"""The scheduled axes as they leave the service: Axis 2 (N*) and Axis 3 (hospital kappa),
and the one dispatch the API and the audit files use for any scheduled result.

Each result's ``to_dict`` is its stored form, exact; what leaves is what these functions
make of the typed result: a cohort of fewer than 11 records is withheld with its payload,
record counts are rounded, Axis 3's folds are one family under secondary suppression and
no note quotes an exact small count. EquiLense is :mod:`monitor.publish.equilense`. The
``*_value`` functions return the typed records; the ``published_*`` ones their JSON
(:mod:`monitor.publish.encode`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result, folds_note
from batch_axes.equilense import EquiLenseResult
from monitor.core.privacy import reportable
from monitor.publish.counts import count_value, family_values, size_value
from monitor.publish.encode import JsonObject, axis2_json, axis3_json, axis_row_json, scheduled_json
from monitor.publish.equilense import PublishedEquiLense, equilense_value
from monitor.publish.shown import SMALL, Published, Shown, Withheld

#: What one scheduled-axis job produces for one model (monitor.store.codec).
ScheduledResult = tuple[Axis2Cell, ...] | Axis3Result | EquiLenseResult
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class PublishedAxis2:
    """An Axis 2 cell as it leaves: its figures as they are, its cohort size rounded (a
    total published exact beside rounded group sizes would let a complement name a
    withheld group; docs/privacy.md)."""

    cell: Axis2Cell
    cohort_n: Published[int]


def axis2_value(cell: Axis2Cell) -> PublishedAxis2:
    """An Axis 2 cell as it leaves the service."""
    return PublishedAxis2(cell, size_value(cell.cohort_n))


def published_axis2(cell: Axis2Cell) -> JsonObject:
    """:func:`axis2_value`'s JSON (:meth:`Axis2Cell.to_dict` with its cohort rounded)."""
    return axis2_json(axis2_value(cell))


@dataclass(frozen=True, slots=True)
class PublishedAxis3:
    """An Axis 3 result as it leaves: ``result``'s kappas, bands, pass and vote counts and
    fold count as they are (computed from verdicts: a small fold has no verdict, no two
    groups of it reach the group support, so they say nothing of its patients); its
    record counts, fold sizes and note as published here, and the verdict and value of a
    withheld fold withheld with its size."""

    result: Axis3Result
    fold_sizes: tuple[Published[int], ...]
    n_records: Published[int]
    n_excluded_missing_hospital: Published[int]
    note: str


def axis3_value(result: Axis3Result) -> PublishedAxis3:
    """What an Axis 3 result shows outside the service (the API, the audit files).

    The folds are one family under the small-cell rule
    (:func:`~monitor.publish.counts.family_values`): a fold of 1-10 records, and as many
    more of the smallest as keep the record total minus the shown folds from naming it,
    are withheld, size, value and verdict; the other sizes, the record count and the
    excluded count are rounded, and the note quotes only published counts.
    """
    sizes = family_values(dict(enumerate(result.fold_sizes)))
    return PublishedAxis3(
        result=result,
        fold_sizes=tuple(sizes[i] for i in range(len(result.fold_sizes))),
        n_records=size_value(result.n_records),
        n_excluded_missing_hospital=size_value(result.n_excluded_missing_hospital),
        note=published_axis3_note(result),
    )


def published_axis3(result: Axis3Result) -> JsonObject:
    """:func:`axis3_value`'s JSON: :meth:`Axis3Result.to_dict` (the stored form, exact)
    with its counts, fold sizes, withheld folds and note as published."""
    return axis3_json(axis3_value(result))


def published_axis3_note(result: Axis3Result) -> str:
    """What Axis 3's fold assignment adapted, in words, its counts as published (the
    report's summary shows it where the result gives no reason)."""
    return folds_note(
        result.n_excluded_missing_hospital,
        result.n_hospitals,
        result.n_folds_requested,
        result.n_folds if result.applicable else 0,
    )


#: A scheduled result as it leaves (:func:`scheduled_value`).
PublishedScheduled = tuple[PublishedAxis2, ...] | PublishedAxis3 | PublishedEquiLense


def scheduled_value(result: ScheduledResult) -> PublishedScheduled:
    """What a scheduled axis's result shows outside the service: each axis's publication
    (the same the audit files use), never the stored ``to_dict``."""
    if isinstance(result, Axis3Result):
        return axis3_value(result)
    if isinstance(result, EquiLenseResult):
        return equilense_value(result)
    return tuple(axis2_value(c) for c in result if isinstance(c, Axis2Cell))


def published_axis(result: ScheduledResult) -> Any:
    """:func:`scheduled_value`'s JSON."""
    return scheduled_json(scheduled_value(result))


@dataclass(frozen=True, slots=True)
class ShownAxisRow:
    """A stored scheduled result on a cohort of 11 records or more: its cohort size
    rounded and its result as published."""

    cohort_n: int
    result: PublishedScheduled


def axis_row_value(
    cohort_n: int | None, result: Callable[[], ScheduledResult]
) -> Shown[ShownAxisRow] | Withheld:
    """A stored scheduled result's cohort size and payload as the API serves them:
    withheld as a whole on a cohort of fewer than 11 records (``result``, which reads the
    stored payload, is then not called); else its size rounded and
    :func:`scheduled_value` of the result."""
    size = count_value(cohort_n)
    if not isinstance(size, Shown):
        return SMALL
    return Shown(ShownAxisRow(size.value, scheduled_value(result())))


def published_axis_row(
    cohort_n: int | None, result: Callable[[], ScheduledResult]
) -> tuple[int | str, Any]:
    """:func:`axis_row_value` as the API writes it: (cohort size, payload JSON); ``<11``
    and no payload when withheld."""
    return axis_row_json(axis_row_value(cohort_n, result))


def reported_axis(cohort_n: int | None, result: Callable[[], R]) -> R | None:
    """A stored scheduled result as the report may read it, typed: None when its cohort
    held fewer than 11 records (``result``, which reads the stored payload, is then not
    called), else ``result()``; the report shows it through its own summaries."""
    return result() if reportable(cohort_n) else None
