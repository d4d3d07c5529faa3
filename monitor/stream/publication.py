"""What a model publishes: its figures as of their last release, never the live window.

The pipeline computes every evaluation exactly (verdicts, VFR, tiers and events see each
one); what leaves the service is decided here, at release points (each evaluation), by
the rule of :mod:`monitor.core.privacy`:

* the **cells of an attribute** publish an evaluation only when every group of that
  attribute that can enter a cell's value (:data:`min_support` records now or at the last
  release, or that enters a cell's certified detectors) differs from the last release by
  0 or at least 11 records; otherwise they keep showing the last released evaluation,
  in full (value, verdict, VFR and tier together, so
  a reader never sees a verdict beside the value of another evaluation). Stored
  evaluations carry ``released``, so the window history shows releases only;
* a **group** (records and selection rate) is released the same way on its own records,
  withheld at once when the small-cell rule or secondary suppression says so
  (:func:`~monitor.core.privacy.model_withheld`: within each attribute and, for an
  intersection, within each of its margin groups), and published rounded;
* the **window size** likewise, on the whole window, published rounded.

"Differs by" is exact: the records in one of the two windows and not in the other (the
symmetric difference). A window only adds records at its end and drops them for good, so
the records of a release still in the window now are those with a sequence number up to
the release's last one: ``|then ^ now| = n_then + n_now - 2 * kept``, where ``kept``
counts today's records of the group up to that sequence number. A record that came and
went between two releases is in neither window and counts for nothing, as it must (a
count of entries and exits would count it twice and release on it).

Why a per-group rule and not the hop alone: a hop of 1,000 records can bring one record
to a small group, and the change of that group's figures between two hops is that record
(docs/privacy.md, "Releases").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from monitor.core.privacy import (
    SMALL_CELL,
    model_withheld,
    records_changed,
    releasable,
    reportable,
    rounded_count,
    rounded_rate,
)
from monitor.core.results import CellEvaluation
from monitor.store.codec import CohortRelease


@dataclass(frozen=True)
class Base:
    """A release point: the window's last sequence number then (None: empty) and the
    records of each group (one entry: the window's size) then."""

    seq: int | None
    n: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "n": list(self.n)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Base:
        return cls(None if d.get("seq") is None else int(d["seq"]), tuple(map(int, d["n"])))


@dataclass(frozen=True)
class GroupCounts:
    """One attribute's groups in a window at a release point (arrays in code order)."""

    codes: tuple[str, ...]
    records: np.ndarray
    selected: np.ndarray


@dataclass(frozen=True)
class WindowCounts:
    """A window at a release point: its counts, and for each earlier release point still
    referenced, how many of today's records of each group were already in it then."""

    records: int
    last_seq: int | None
    groups: Mapping[str, GroupCounts]
    #: release seq -> attribute -> today's records per group with seq <= it
    kept: Mapping[int, Mapping[str, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def of(cls, window, bases: Iterable[int | None] = ()) -> WindowCounts:
        """The counts of a :class:`~monitor.stream.window.ModelWindow` now, and the
        records kept since each release point in ``bases``."""
        groups = {
            attr: GroupCounts(
                table.groups, table.group_counts().copy(), table.selected_counts().copy()
            )
            for attr, table in window.prediction_tables().items()
        }
        wanted = sorted({b for b in bases if b is not None})
        kept: dict[int, dict[str, np.ndarray]] = {}
        if wanted:
            seqs, by_attr = window.records_in_order()
            for b in wanted:
                upto = int(np.searchsorted(seqs, b, side="right"))
                kept[b] = {
                    a: np.bincount(g[:upto], minlength=len(groups[a].codes))
                    for a, g in by_attr.items()
                }
        return cls(int(window.n), window.last_seq, groups, kept)

    def differs(self, attr: str, base: Base) -> np.ndarray:
        """Per group of ``attr``: records in the base's window or today's but not both."""
        now = self.groups[attr].records
        then = np.asarray(base.n, dtype=np.int64)
        if base.seq is None or then.size != now.size:
            return then + now if then.size == now.size else now.copy()
        return records_changed(then, now, self.kept[base.seq][attr])

    def differs_total(self, base: Base) -> int:
        """Records in the base's window or today's but not both (the whole window)."""
        if base.seq is None:
            return base.n[0] + self.records
        first = next(iter(self.kept[base.seq].values()), None)
        kept = 0 if first is None else int(first.sum())
        return records_changed(base.n[0], self.records, kept)


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


class ModelPublication:
    """The release points and released figures of one model.

    ``decide`` runs when an evaluation's window is taken (stream order) and says which
    attributes' cells it releases; ``publish`` runs when the evaluation's results are in.
    ``min_support``: groups with fewer records are left out of every cell's value
    (``axis1.min_group_support``), so they hold no cell back while below it.
    """

    def __init__(self, min_support: int = SMALL_CELL) -> None:
        self.min_support = int(min_support)
        #: attribute -> its cells' last release point (moved when a window is taken)
        self.attribute_bases: dict[str, Base] = {}
        #: (metric, attribute) -> the cell's released evaluation
        self.cells: dict[tuple[str, str], CellEvaluation] = {}
        #: (attribute, group) -> (release point, released figures or None: withheld)
        self.groups: dict[tuple[str, str], tuple[Base, PublishedGroup | None]] = {}
        self.window: tuple[Base, int | None] | None = None
        self.model = PublishedModel()
        #: all of the above as of the last evaluation written (what :meth:`saved` saves:
        #: the hops taken but not written are decided again from here after a restart)
        self.written_bases: dict[str, Any] = self._state()

    # ------------------------------------------------------------------ release points
    def bases(self) -> set[int | None]:
        """The release points the next decision compares with (for WindowCounts.of)."""
        out = {b.seq for b in self.attribute_bases.values()}
        out |= {b.seq for b, _ in self.groups.values()}
        if self.window is not None:
            out.add(self.window[0].seq)
        return out

    def decide(
        self, counts: WindowCounts, certified: Mapping[str, np.ndarray] | None = None
    ) -> tuple[frozenset[str], dict[str, Any]]:
        """The attributes whose cells this evaluation releases (their release point moves
        here) and the release points after it (for :meth:`publish`); also releases the
        groups and the window size (:attr:`model`). ``certified``: per attribute, the
        groups (in code order) whose records can move a cell's certified evidence
        (:meth:`~monitor.stream.certified.ModelCertified.may_enter`): they hold the
        release like a group that enters the cells' values, whatever their size."""
        if not reportable(counts.records):
            # a window under the small-cell rule publishes its cells' identity only: shown,
            # but not a release point (there is no figure to difference against)
            self._release_groups(counts)
            return frozenset(counts.groups), self._state()
        released = set()
        for attr, g in counts.groups.items():
            base = self.attribute_bases.get(attr)
            here = Base(counts.last_seq, tuple(int(x) for x in g.records))
            if base is not None:
                then = np.asarray(base.n, dtype=np.int64)
                counted = (g.records >= self.min_support) | (
                    then >= self.min_support if then.size == g.records.size else True
                )
                if certified is not None and attr in certified:
                    counted = counted | certified[attr]
                if not releasable(int(d) for d in counts.differs(attr, base)[counted]):
                    continue
            self.attribute_bases[attr] = here
            released.add(attr)
        self._release_groups(counts)
        return frozenset(released), self._state()

    def publish(
        self,
        cells: Sequence[CellEvaluation],
        released: frozenset[str],
        bases: dict[str, Any] | None = None,
    ) -> list[CellEvaluation]:
        """The evaluation's cells as they go to the store (``released`` set on each); the
        cells of released attributes become what the model shows. ``bases``: the release
        points :meth:`decide` left for this evaluation (now the written ones)."""
        if bases is not None:
            self.written_bases = bases
        out = []
        for cell in cells:
            shown = cell.result.attribute in released
            cell = replace(cell, released=shown)
            if shown:
                self.cells[(cell.result.metric, cell.result.attribute)] = cell
            out.append(cell)
        return out

    def _release_groups(self, counts: WindowCounts) -> None:
        size = self._release_window(counts)
        groups: dict[str, dict[str, PublishedGroup]] = {}
        every = {
            attr: {code: int(x) for code, x in zip(g.codes, g.records, strict=True)}
            for attr, g in counts.groups.items()
        }
        withheld = model_withheld(every)
        for attr, g in counts.groups.items():
            sizes, hidden = every[attr], withheld[attr]
            shown: dict[str, PublishedGroup] = {}
            for i, code in enumerate(g.codes):
                key = (attr, code)
                prev = self.groups.get(key)
                here = Base(counts.last_seq, (sizes[code],))
                if code in hidden or not reportable(sizes[code]):
                    # withheld now; the release point stays, so figures shown again
                    # later differ from those last shown by 11 records or more
                    self.groups[key] = (prev[0] if prev else here, None)
                    continue
                if prev is not None:
                    base = prev[0]
                    d = self._group_differs(counts, attr, i, base)
                    if not releasable([d]):
                        if prev[1] is not None:
                            shown[code] = prev[1]
                        continue
                figures = PublishedGroup(
                    rounded_count(sizes[code]), rounded_rate(g.selected[i] / sizes[code]) or 0.0
                )
                self.groups[key] = (here, figures)
                shown[code] = figures
            groups[attr] = shown
        self.model = PublishedModel(size, groups)

    @staticmethod
    def _group_differs(counts: WindowCounts, attr: str, i: int, base: Base) -> int:
        now = int(counts.groups[attr].records[i])
        if base.seq is None:
            return base.n[0] + now
        return records_changed(base.n[0], now, int(counts.kept[base.seq][attr][i]))

    def _release_window(self, counts: WindowCounts) -> int | None:
        here = Base(counts.last_seq, (counts.records,))
        if self.window is not None and not releasable([counts.differs_total(self.window[0])]):
            return self.window[1]
        size = rounded_count(counts.records) if reportable(counts.records) else None
        self.window = (here, size)
        return size

    # ------------------------------------------------------------------ restart
    def _state(self) -> dict[str, Any]:
        """The release points and released figures now, as JSON (what :meth:`saved`
        writes once the evaluation they belong to is written)."""
        groups: dict[str, dict[str, Any]] = {}
        for (attr, code), (base, figures) in self.groups.items():
            shown = None if figures is None else [figures.records, figures.selection_rate]
            groups.setdefault(attr, {})[code] = {**base.to_dict(), "shown": shown}
        window = None
        if self.window is not None:
            window = {**self.window[0].to_dict(), "shown": self.window[1]}
        return {
            "attributes": {a: b.to_dict() for a, b in self.attribute_bases.items()},
            "groups": groups,
            "window": window,
        }

    def saved(self) -> dict[str, Any]:
        """The release points and released figures as of the last evaluation written,
        saved with the model's stream position: a restart publishes the same and releases
        next exactly when an uninterrupted run would."""
        return self.written_bases

    def restore(
        self,
        saved: Mapping[str, Any] | None,
        cells: Sequence[CellEvaluation],
        counts: WindowCounts,
    ) -> None:
        """After a restart: release points and released figures as saved, and the cells'
        released evaluations (``cells``, read back from the store). A file written before
        they were saved: every release point here, and groups and window size withheld
        until they differ from now by 11 records or more (what was shown is not known)."""
        for cell in cells:
            self.cells[(cell.result.metric, cell.result.attribute)] = cell
        if saved is not None:
            for attr, d in (saved.get("attributes") or {}).items():
                self.attribute_bases[attr] = Base.from_dict(d)
            for attr, by_code in (saved.get("groups") or {}).items():
                for code, d in by_code.items():
                    shown = d.get("shown")
                    figures = None if shown is None else PublishedGroup(int(shown[0]), shown[1])
                    self.groups[(attr, code)] = (Base.from_dict(d), figures)
            w = saved.get("window")
            if w is not None:
                self.window = (Base.from_dict(w), w.get("shown"))
        else:
            for attr, g in counts.groups.items():
                self.attribute_bases[attr] = Base(counts.last_seq, tuple(map(int, g.records)))
                for code, n in zip(g.codes, g.records, strict=True):
                    self.groups[(attr, code)] = (Base(counts.last_seq, (int(n),)), None)
            self.window = (Base(counts.last_seq, (counts.records,)), None)
        self.written_bases = self._state()
        self.model = self._published_model(counts)

    def _published_model(self, counts: WindowCounts) -> PublishedModel:
        """What the release books show now (after a restore), in code order."""
        groups: dict[str, dict[str, PublishedGroup]] = {}
        for attr, g in counts.groups.items():
            shown = {}
            for code in g.codes:
                entry = self.groups.get((attr, code))
                if entry is not None and entry[1] is not None:
                    shown[code] = entry[1]
            groups[attr] = shown
        return PublishedModel(None if self.window is None else self.window[1], groups)

    # ------------------------------------------------------------------ reads
    def released_cells(self) -> list[CellEvaluation]:
        return sorted(self.cells.values(), key=lambda c: c.key)


def cohort_release(
    previous: CohortRelease | None,
    seqs: np.ndarray,
    groups: Mapping[str, tuple[int, np.ndarray]],
) -> tuple[bool, CohortRelease]:
    """Whether a scheduled job's result on a cohort may replace the one published before
    (a job is a release of its own: docs/privacy.md), and the cohort's release point.

    ``seqs``: the cohort's sequence numbers; ``groups``: attribute -> (number of groups,
    each record's group index). A cohort, like a window, gains records at its end and loses
    them for good as the latest event time moves on, so the records in one cohort and not
    the other number ``n_then + n_now - 2 * kept`` per group, ``kept`` those of today's
    records up to the previous cohort's last sequence number.

    >>> seqs = np.arange(1, 41)
    >>> first_ok, base = cohort_release(None, seqs, {"sex": (2, seqs % 2)})
    >>> cohort_release(base, np.arange(2, 42), {"sex": (2, np.arange(2, 42) % 2)})[0]
    False
    >>> cohort_release(base, np.arange(13, 53), {"sex": (2, np.arange(13, 53) % 2)})[0]
    True
    """
    last = int(seqs.max()) if len(seqs) else None
    sizes = {a: np.bincount(g, minlength=k) for a, (k, g) in groups.items()}
    here = CohortRelease(last, {a: tuple(n.tolist()) for a, n in sizes.items()})
    if previous is None:
        return True, here
    prev_seq = previous.seq
    kept_mask = np.zeros(len(seqs), bool) if prev_seq is None else seqs <= int(prev_seq)
    for a, (k, g) in groups.items():
        then = np.asarray(previous.sizes.get(a, ()), dtype=np.int64)
        if then.size != k:
            continue  # a changed configuration: nothing published to compare with
        kept = np.bincount(g[kept_mask], minlength=k)
        if not releasable(int(d) for d in records_changed(then, sizes[a], kept)):
            return False, here
    return True, here
