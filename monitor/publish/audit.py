"""An offline audit as it leaves: its cells, EquiLense, notes and left-out counts, typed.

``vfr-monitor audit`` writes it to ``cells.csv``, ``cells.json`` and ``mppd.json``
(:func:`cells_json`, :func:`~monitor.publish.encode.equilense_json`); the governance
report reads it either from those files (:func:`audit_read`) or, for an audit of a
DataFrame (:class:`~monitor.audit.frame.FrameAudit`), straight from memory: the same
typed values both ways, so the two pages are the same page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from batch_axes.audit_cell import audit_cell_from_row
from batch_axes.equilense import EquiLenseResult
from monitor.core.results import CellEvaluation
from monitor.publish.cells import PublishedAuditCell, audit_cell_read, audit_cell_value
from monitor.publish.counts import left_out_values
from monitor.publish.encode import JsonObject, audit_cell_json, encoded_values
from monitor.publish.equilense import PublishedEquiLense, equilense_read, equilense_value
from monitor.publish.shown import Published


@dataclass(frozen=True, slots=True)
class PublishedAudit:
    """Everything an offline audit publishes."""

    cells: tuple[PublishedAuditCell, ...]
    #: None: an audit directory without ``mppd.json``
    equilense: PublishedEquiLense | None
    #: the engine's notes, and the left-out counts in words when records were left out
    notes: tuple[str, ...]
    #: invalid records left out ([input] skip_invalid_rows), by reason
    left_out: Mapping[str, Published[int]] = field(default_factory=dict)
    #: seconds per step of the engine
    timings: Mapping[str, float] = field(default_factory=dict)


def left_out_note(left_out: Mapping[str, Published[int]]) -> str:
    """The left-out counts in words, as the governance report shows them ("" without any).

    >>> from monitor.publish.shown import SMALL, Shown
    >>> left_out_note({"no score": SMALL, "no label": Shown(120)})
    'Invalid records left out of the audit ([input] skip_invalid_rows), by reason: no score <11, no label 120.'
    """  # noqa: E501
    if not left_out:
        return ""
    counts = encoded_values(left_out)
    return (
        "Invalid records left out of the audit ([input] skip_invalid_rows), by reason: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + "."
    )


def audit_value(
    cells: Iterable[CellEvaluation],
    equilense: EquiLenseResult,
    notes: Sequence[str],
    left_out: Mapping[str, int],
    timings: Mapping[str, float],
) -> PublishedAudit:
    """An audit's results (:class:`monitor.audit.run.AuditReport`'s fields) as they
    leave: each cell and EquiLense under the small-cell rule, left-out counts of 1-10
    withheld (the files travel further than the terminal the audit ran in)."""
    withheld = left_out_values(left_out)
    note = left_out_note(withheld)
    return PublishedAudit(
        cells=tuple(audit_cell_value(c) for c in cells),
        equilense=equilense_value(equilense),
        notes=(*notes, note) if note else tuple(notes),
        left_out=withheld,
        timings=dict(timings),
    )


def cells_json(audit: PublishedAudit) -> JsonObject:
    """``cells.json``: the cells' rows, the notes, the step timings and the left-out
    counts."""
    return {
        "cells": [audit_cell_json(c) for c in audit.cells],
        "notes": list(audit.notes),
        "timings_s": dict(audit.timings),
        "left_out": encoded_values(audit.left_out),
    }


def audit_read(cells: Mapping[str, Any], mppd: Mapping[str, Any] | None) -> PublishedAudit:
    """An audit read back from its files (``cells.json``, and ``mppd.json`` when given)
    as the published audit it was. Raises ValueError, KeyError or TypeError for a file
    that is not one."""
    return PublishedAudit(
        cells=tuple(audit_cell_read(audit_cell_from_row(r)) for r in cells["cells"]),
        equilense=None if mppd is None else equilense_read(EquiLenseResult.from_dict(mppd)),
        notes=tuple(str(n) for n in cells.get("notes", [])),
    )
