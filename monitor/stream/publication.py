"""What a model publishes: its figures as of their last release, never the live window.

The pipeline computes every evaluation exactly (verdicts, VFR, tiers and events see each
one); what leaves the service is decided here, at release points (each evaluation), by
the rule of :mod:`monitor.core.privacy`:

* a **cell** publishes its latest evaluation only when every group of its attribute that
  enters its value (now or at its last release) had 0 or at least 11 records enter or
  leave since that release; otherwise it keeps showing the last released evaluation, in
  full (value, verdict, VFR and tier together, so a reader never sees a verdict next to
  the value of another evaluation). Stored evaluations carry ``released`` so the window
  history shows releases only;
* a **group** (its records and selection rate, per attribute) is released the same way on
  its own churn, withheld at once when the small-cell rule or secondary suppression says
  so (:func:`~monitor.core.privacy.suppressed_groups`), and published rounded;
* the **window size** is released when the window's churn since its last release is 0 or
  at least 11, and published rounded.

Why a record-churn gate and not the hop alone: a hop of 1,000 records can bring one
record to a small group, and the change of that group's figures between two hops is
then that record (docs/privacy.md, "releases").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from monitor.core.events import CellEvent
from monitor.core.privacy import (
    ReleaseBook,
    reportable,
    rounded_count,
    rounded_rate,
    suppressed_groups,
)
from monitor.core.results import CellEvaluation

#: Axes of an event that are figures of the window (the rest: verdicts, tiers, VFR, N*
#: and kappa, are published exact and current, as docs/privacy.md says).
EVENT_FIGURES = frozenset({"value", "sigma"})


@dataclass(frozen=True)
class GroupCounts:
    """One attribute's groups in a window at a release point (arrays in code order)."""

    codes: tuple[str, ...]
    records: np.ndarray
    selected: np.ndarray
    #: records that entered or left each group so far (monitor.stream.window)
    churn: np.ndarray


@dataclass(frozen=True)
class WindowCounts:
    """A window's counts at a release point: what the release rule reads."""

    records: int
    churn: int
    groups: Mapping[str, GroupCounts]

    @classmethod
    def of(cls, window, churn: Mapping[str, Sequence[int]] | None = None) -> WindowCounts:
        """The counts of a :class:`~monitor.stream.window.ModelWindow` now (``churn``: its
        churn counters as stored for this position, for a window rebuilt from the file)."""
        counters = {
            a: np.asarray(churn[a] if churn is not None else c, dtype=np.int64).copy()
            for a, c in window.churn.items()
        }
        groups = {
            attr: GroupCounts(
                table.groups,
                table.group_counts().copy(),
                table.selected_counts().copy(),
                counters[attr],
            )
            for attr, table in window.tables.items()
        }
        first = next(iter(counters.values()), None)
        return cls(int(window.n), 0 if first is None else int(first.sum()), groups)


@dataclass(frozen=True)
class PublishedGroup:
    """A group's released figures: its records rounded and its selection rate rounded."""

    records: int
    selection_rate: float


@dataclass(frozen=True)
class PublishedModel:
    """What a model publishes besides its cells (None: withheld)."""

    window_records: int | None = None
    #: attribute -> group code -> released figures (withheld groups absent)
    groups: Mapping[str, Mapping[str, PublishedGroup]] = field(default_factory=dict)


def published_events(events: Sequence[CellEvent]) -> list[CellEvent]:
    """Events as they are stored and published: verdicts, tiers, VFR, N* and kappa, but not
    the window's figures (value, sigma). An event is not delayed to a release (a confirmed
    flip is an alert), so its figures could differ from the cell's last release by fewer
    than 11 records; the value is read from the cell's released evaluation instead."""

    def strip(axes: Mapping) -> dict:
        return {k: v for k, v in axes.items() if k not in EVENT_FIGURES}

    return [replace(e, axes=strip(e.axes), axes_before=strip(e.axes_before)) for e in events]


class ModelPublication:
    """The release books of one model: its cells, its groups and its window size."""

    def __init__(self) -> None:
        self.cells: ReleaseBook[tuple[str, str], CellEvaluation] = ReleaseBook()
        self.groups: ReleaseBook[tuple[str, str], PublishedGroup] = ReleaseBook()
        self.window: ReleaseBook[str, int] = ReleaseBook()
        self.model = PublishedModel()

    # ------------------------------------------------------------------ release points
    def release(
        self, counts: WindowCounts, cells: Sequence[CellEvaluation]
    ) -> list[CellEvaluation]:
        """Offer an evaluation's cells and the window's counts at its release point;
        returns the cells as they go to the store (``released`` set on each)."""
        out = [self._release_cell(counts, c) for c in cells]
        self._release_groups(counts)
        return out

    def _release_cell(self, counts: WindowCounts, cell: CellEvaluation) -> CellEvaluation:
        key = (cell.result.metric, cell.result.attribute)
        g = counts.groups.get(cell.result.attribute)
        churn = [] if g is None else list(g.churn)
        prev = self.cells.released(key)
        out = set(cell.result.groups_left_out_point)
        if prev is not None:
            out &= set(prev.result.groups_left_out_point)
        counted = None if g is None else [code not in out for code in g.codes]
        shown = self.cells.offer(key, churn, cell, counted)
        return replace(cell, released=shown is cell)

    def _release_groups(self, counts: WindowCounts) -> None:
        n = self.window.offer("window", [counts.churn], counts.records)
        groups: dict[str, dict[str, PublishedGroup]] = {}
        for attr, g in counts.groups.items():
            sizes = {code: int(x) for code, x in zip(g.codes, g.records, strict=True)}
            hidden = suppressed_groups(sizes)
            shown: dict[str, PublishedGroup] = {}
            for i, code in enumerate(g.codes):
                key = (attr, code)
                if code in hidden or not reportable(sizes[code]):
                    self.groups.withhold(key)
                    continue
                figures = PublishedGroup(
                    rounded_count(sizes[code]), rounded_rate(g.selected[i] / sizes[code]) or 0.0
                )
                released = self.groups.offer(key, [int(g.churn[i])], figures)
                if released is not None:
                    shown[code] = released
            groups[attr] = shown
        size = None if n is None or not reportable(n) else rounded_count(n)
        self.model = PublishedModel(size, groups)

    # ------------------------------------------------------------------ restart
    def hold(self, counts: WindowCounts, released: Sequence[CellEvaluation]) -> None:
        """After a restart: cells whose release was saved with their state are restored
        exactly (:meth:`restore_cell`); the others publish their last released evaluation
        (read back from the store) and release next after 11 records of churn from here.
        Groups and the window size publish nothing until 11 records of churn from here:
        they are not saved (they are only ever live figures)."""
        for cell in released:  # cells whose release was not saved (files before v9)
            key = (cell.result.metric, cell.result.attribute)
            if self.cells.release_of(key) is not None:
                continue
            g = counts.groups.get(cell.result.attribute)
            self.cells.hold(key, [] if g is None else list(g.churn), cell)
        self.window.hold("window", [counts.churn])
        for attr, g in counts.groups.items():
            for code, c in zip(g.codes, g.churn, strict=True):
                self.groups.hold((attr, code), [int(c)])
        self.model = PublishedModel()

    def restore_cell(self, key: tuple[str, str], saved: Mapping) -> None:
        """A cell's release as :meth:`cell_release` saved it (churn and cell)."""
        cell = saved.get("cell")
        self.cells.hold(
            key, saved.get("churn") or [], None if cell is None else CellEvaluation.from_dict(cell)
        )

    def cell_release(self, key: tuple[str, str]) -> dict | None:
        """A cell's last release as it is saved with the cell's state: its churn counters
        and the released evaluation, so a restart publishes the same and releases next
        exactly when an uninterrupted run would."""
        r = self.cells.release_of(key)
        if r is None:
            return None
        return {"churn": list(r.churn), "cell": None if r.figures is None else r.figures.to_dict()}

    # ------------------------------------------------------------------ reads
    def published_cells(self) -> list[CellEvaluation]:
        return sorted(self.cells.shown(), key=lambda c: c.key)
