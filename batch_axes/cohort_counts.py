"""Per-hospital count tables of one model's audit cohort: what Axis 2 and Axis 3 read.

Why: Axis 2 draws its subsamples from the cohort's count tables and Axis 3 judges
each fold on the sum of its hospitals' count tables, so neither needs the records
themselves, only these counts. Kept up to date by adding the records that entered
the cohort since the last run and removing those that left it
(:mod:`monitor.service.cohort_book`), a scheduled run costs O(changed records +
hospitals x strata) instead of re-reading the whole cohort.

What is kept, per configured attribute (the list is iterated generically, so a
derived attribute is one more entry):

* ``counts`` (slots, G, 2, 2, B) int64: records per (hospital slot, group, label,
  decision, score bin) -- Axis 3's fold confusion tables and bin counts;
* the score sums per (slot, group, bin) as exact fixed-point words (the
  :class:`~monitor.core.counts.CountTable` encoding): Axis 3's calibration metric
  needs a score sum per (group, bin) only, and integer words make the sum of a
  fold the same number whatever order the records came in, so the incremental
  and the re-read path give bit-identical fold values;
* one :class:`~monitor.core.counts.CountTable` (no hospital axis, with score
  squares): Axis 2's input, exactly what ``tables_from_frame`` builds from the
  cohort's records.

Slot 0 holds the records without a hospital id (Axis 2 counts them, Axis 3 leaves
them out and says how many). Slots are never reused; a hospital whose records all
left the cohort keeps an all-zero slot and takes no part in the fold assignment.

Cohort counts form a monoid, as :class:`~monitor.core.counts.CountTable` does: ``+``
merges two cohorts' counts hospital by hospital (slots matched by hospital id), ``-``
takes a contained part out again, and the sum of the counts of two disjoint record sets
is the counts of their union, to the bit (every array is an exact integer). Why: a
network of hospitals sums its sites' counts (by secure aggregation) and runs the same
engine on the sum (:mod:`batch_axes.table_engine`). What travels is
:meth:`CohortCounts.to_vector`: one flat int64 vector in a :class:`CountsLayout` that
every site shares, read back by :meth:`CohortCounts.from_vector` bit for bit; the
per-hospital count tables a site may hold instead become cohort counts with
:meth:`CohortCounts.from_tables`.

>>> from monitor.config import AttributeConfig
>>> sex = [AttributeConfig(name="sex", groups={"0": "F", "1": "M"})]
>>> ids = np.array(["h1", "h2", None], dtype=object); g = np.array([0, 1, 1])
>>> y, d, s = np.array([1, 0, 1]), np.array([1, 0, 0]), np.array([0.9, 0.2, 0.45])
>>> a, b, both = CohortCounts(sex), CohortCounts(sex), CohortCounts(sex)
>>> a.add(ids[:2], {"sex": g[:2]}, y[:2], d[:2], s[:2])
>>> b.add(ids[2:], {"sex": g[2:]}, y[2:], d[2:], s[2:])
>>> both.add(ids, {"sex": g}, y, d, s)
>>> a + b == both, (a + b).n, (a + b - b) == a
(True, 3, True)
>>> vector, layout = both.to_vector()
>>> vector.dtype, layout.hospitals, CohortCounts.from_vector(vector, layout) == both
(dtype('int64'), ('h1', 'h2'), True)

The fold assignment (:func:`group_kfold_from_sizes`) is scikit-learn's GroupKFold
(no shuffle) computed from the per-hospital record counts instead of from one
group label per record: the same greedy rule (largest hospital first, into the
lightest fold, stable order), tested equal to GroupKFold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import AttributeConfig
from monitor.core.counts import _LO_BITS, _LO_MASK, CountTable, _words_to_float, score_bins

#: Records per bincount: word sums stay below 2**53 (CountTable's batch rule).
_MAX_BATCH = 1 << 25

#: The slot of records without a hospital id.
NO_HOSPITAL = 0


def group_kfold_from_sizes(sizes: np.ndarray, n_splits: int) -> np.ndarray:
    """The fold of each group, as ``GroupKFold(n_splits).split`` assigns it (no shuffle),
    from the groups' sizes in sorted-id order.

    GroupKFold sorts the groups by size (stable argsort, reversed) and puts each into
    the fold with the smallest total so far (``argmin``: the first on ties); this is
    that loop, on H sizes rather than on one label per record.

    >>> group_kfold_from_sizes(np.array([5, 1, 3, 3]), 2).tolist()
    [0, 0, 1, 1]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    if n_splits > sizes.size:
        raise ValueError(f"{n_splits} folds for {sizes.size} groups")
    order = np.argsort(sizes, kind="stable")[::-1]
    per_fold = np.zeros(n_splits)
    fold = np.zeros(sizes.size, dtype=np.int64)
    for g in order:
        f = int(np.argmin(per_fold))
        per_fold[f] += sizes[g]
        fold[g] = f
    return fold


def _fold_sums(rows: np.ndarray, starts: np.ndarray, n_folds: int) -> np.ndarray:
    """Sums of consecutive row blocks starting at ``starts`` (exact, in int64); a fold
    without rows (none in practice: every fold gets a hospital) sums to zeros."""
    out = np.zeros((n_folds, *rows.shape[1:]), dtype=rows.dtype)
    filled = starts < np.append(starts[1:], rows.shape[0])
    if rows.shape[0]:
        out[filled] = np.add.reduceat(rows, starts[filled], axis=0)
    return out


def _attributes_difference(
    mine: Sequence[AttributeConfig], theirs: Sequence[AttributeConfig]
) -> str:
    """What differs between two attribute lists (names, order, group codes), "" if nothing."""
    names, other = [a.name for a in mine], [a.name for a in theirs]
    if names != other:
        return f"different attributes: {names} here, {other} there"
    for a, b in zip(mine, theirs, strict=True):
        if a.codes != b.codes:
            return f"attribute {a.name!r} has different group codes: {list(a.codes)} here, " + (
                f"{list(b.codes)} there"
            )
    return ""


def _shape_difference(
    mine: tuple[Sequence[AttributeConfig], int, bool],
    theirs: tuple[Sequence[AttributeConfig], int, bool],
) -> str:
    """What differs between two (attributes, bins, with_tables), "" if nothing."""
    if attrs := _attributes_difference(mine[0], theirs[0]):
        return attrs
    if mine[1] != theirs[1]:
        return f"different score bins: {mine[1]} here, {theirs[1]} there"
    if mine[2] != theirs[2]:
        keeps = ("here", "there") if mine[2] else ("there", "here")
        return (
            f"the counts {keeps[0]} keep Axis 2's count tables (with_tables) and those "
            f"{keeps[1]} do not"
        )
    return ""


@dataclass(frozen=True)
class CountsLayout:
    """Where each integer of :meth:`CohortCounts.to_vector`'s vector belongs.

    ``hospitals`` are the ids of slots 1, 2, ... (slot 0: the records without one). Two
    sites' vectors can be summed element by element when their layouts are equal: the
    sites of a network write theirs in one shared layout (``to_vector(layout)``), whose
    hospitals are every site's.
    """

    attributes: tuple[AttributeConfig, ...]
    bins: int
    hospitals: tuple[Any, ...]
    with_tables: bool = True

    @property
    def size(self) -> int:
        """Integers in the vector: records per slot; per attribute its per-slot counts and
        score words; per attribute its count table (counts, four words) when kept."""
        S = 1 + len(self.hospitals)
        cells = [len(a.codes) * 4 * self.bins for a in self.attributes]
        per_slot = sum(c + 2 * (c // 4) for c in cells)
        return S * (1 + per_slot) + (5 * sum(cells) if self.with_tables else 0)

    def check_compatible(self, other: CountsLayout) -> None:
        """Raise ValueError naming what differs, unless vectors of the two layouts can be
        summed (everything equal, hospitals in the same order)."""
        if not isinstance(other, CountsLayout):
            raise TypeError(f"a CountsLayout is compared with a CountsLayout, not {type(other)}")
        diff = _shape_difference(
            (self.attributes, self.bins, self.with_tables),
            (other.attributes, other.bins, other.with_tables),
        )
        if not diff and self.hospitals != other.hospitals:
            diff = (
                f"different hospital slots ({len(self.hospitals)} here, {len(other.hospitals)} "
                "there, or another order): write every vector in one shared layout "
                "(CohortCounts.to_vector(layout))"
            )
        if diff:
            raise ValueError(f"count vectors of different layouts: {diff}")


class CohortCounts:
    """Count tables of one model's cohort per hospital and attribute (see module docstring).

    ``add``/``remove`` take record batches: hospital ids (None or NaN: no hospital),
    group index per attribute, 0/1 label and decision, score in [0, 1]. Removing
    records that are not in the tables raises and changes nothing.
    """

    def __init__(
        self, attributes: Sequence[AttributeConfig], bins: int = 10, *, with_tables: bool = True
    ):
        self.attributes: tuple[AttributeConfig, ...] = tuple(attributes)
        self.bins = int(bins)
        self.with_tables = with_tables
        self.slot_ids: list[Any] = [None]  # slot -> hospital id (slot 0: none)
        self._slot_of: dict[Any, int] = {}
        self.slot_n = np.zeros(1, dtype=np.int64)
        shape = {a.name: (len(a.codes), 2, 2, self.bins) for a in self.attributes}
        self.counts = {k: np.zeros((1, *s), np.int64) for k, s in shape.items()}
        self.score_hi = {k: np.zeros((1, s[0], self.bins), np.int64) for k, s in shape.items()}
        self.score_lo = {k: np.zeros((1, s[0], self.bins), np.int64) for k, s in shape.items()}
        self.tables = (
            {a.name: CountTable(a.codes, self.bins) for a in self.attributes} if with_tables else {}
        )

    # ---------------------------------------------------------------- records
    @property
    def n(self) -> int:
        """Records in the cohort (with or without a hospital id)."""
        return int(self.slot_n.sum())

    def slots(self, hospital_ids: np.ndarray | pd.Series | Sequence[Any]) -> np.ndarray:
        """Each record's slot; a hospital seen for the first time gets a new one."""
        codes, uniques = pd.factorize(np.asarray(hospital_ids, dtype=object), sort=False)
        lookup = np.empty(len(uniques), dtype=np.int64)
        for i, h in enumerate(uniques):
            s = self._slot_of.get(h)
            if s is None:
                s = self._slot_of[h] = len(self.slot_ids)
                self.slot_ids.append(h)
            lookup[i] = s
        self._grow(len(self.slot_ids))
        if not len(uniques):  # no record has a hospital id
            return np.full(len(codes), NO_HOSPITAL, dtype=np.int64)
        return np.where(codes >= 0, lookup[np.maximum(codes, 0)], NO_HOSPITAL)

    def _grow(self, n_slots: int) -> None:
        have = self.slot_n.size
        if n_slots <= have:
            return
        new = max(n_slots, 2 * have)

        def grown(a: np.ndarray) -> np.ndarray:
            out = np.zeros((new, *a.shape[1:]), dtype=a.dtype)
            out[:have] = a
            return out

        self.slot_n = grown(self.slot_n)
        for d in (self.counts, self.score_hi, self.score_lo):
            for k in d:
                d[k] = grown(d[k])

    def add(self, hospital_ids, groups: Mapping[str, np.ndarray], label, decision, score) -> None:
        """Add records that entered the cohort."""
        self._apply(self.slots(hospital_ids), groups, label, decision, score, +1)

    def remove(
        self, hospital_ids, groups: Mapping[str, np.ndarray], label, decision, score
    ) -> None:
        """Remove records that left the cohort (they must have been added)."""
        self._apply(self.slots(hospital_ids), groups, label, decision, score, -1)

    def add_slots(self, slot, groups, label, decision, score) -> None:
        """:meth:`add` with slots given (the record path: slot = hospital rank + 1)."""
        slot = np.asarray(slot, dtype=np.int64)
        if slot.size:
            top = int(slot.max()) + 1
            self.slot_ids.extend(range(len(self.slot_ids), top))
            self._grow(top)
        self._apply(slot, groups, label, decision, score, +1)

    def _apply(self, slot, groups, label, decision, score, sign: int) -> None:
        s = np.asarray(score, dtype=np.float64)
        for start in range(0, s.size, _MAX_BATCH):
            sl = slice(start, start + _MAX_BATCH)
            self._apply_batch(
                slot[sl], {k: np.asarray(g)[sl] for k, g in groups.items()},
                np.asarray(label)[sl], np.asarray(decision)[sl], s[sl], sign,
            )  # fmt: skip

    def _apply_batch(self, slot, groups, label, decision, score, sign: int) -> None:
        prepared = CountTable.prepare(label, decision, score, self.bins)
        assert prepared is not None  # batches are cut to _MAX_BATCH above
        ldb = prepared[0]  # (label, decision, bin) flat index
        hi, lo = prepared[1], prepared[2]
        b = score_bins(score, self.bins)
        S = self.slot_n.size
        d_n = np.bincount(slot, minlength=S)
        deltas: dict[str, tuple[np.ndarray, ...]] = {}
        for a in self.attributes:
            g = np.asarray(groups[a.name], dtype=np.int64)
            G = len(a.codes)
            if g.size and (g.min() < 0 or g.max() >= G):
                raise ValueError(f"group index of {a.name!r} out of range for its {G} groups")
            cell = slot * G + g
            c = np.bincount(cell * (4 * self.bins) + ldb, minlength=S * G * 4 * self.bins)
            sb = cell * self.bins + b
            w_hi = np.rint(np.bincount(sb, weights=hi, minlength=S * G * self.bins))
            w_lo = np.rint(np.bincount(sb, weights=lo, minlength=S * G * self.bins))
            deltas[a.name] = (c, w_hi.astype(np.int64), w_lo.astype(np.int64))
            if sign < 0 and np.any(self.counts[a.name].reshape(-1) < c):
                raise ValueError("removing records that are not in the cohort's tables")
        if self.with_tables:  # its counts are sums of the slots' counts checked above
            for a in self.attributes:
                self.tables[a.name].apply_prepared(groups[a.name], prepared, sign)
        self.slot_n += sign * d_n
        for k, (c, w_hi, w_lo) in deltas.items():
            self.counts[k] += sign * c.reshape(self.counts[k].shape)
            self.score_hi[k] += sign * w_hi.reshape(self.score_hi[k].shape)
            self.score_lo[k] += sign * w_lo.reshape(self.score_lo[k].shape)

    # ---------------------------------------------------------------- views
    def group_sizes(self) -> dict[str, list[int]]:
        """Records per group of each attribute (the cohort's release point, ``n``)."""
        return {k: [int(x) for x in c.sum(axis=(0, 2, 3, 4))] for k, c in self.counts.items()}

    def hospitals(self) -> tuple[np.ndarray, np.ndarray]:
        """(slot, records) of the hospitals with records in the cohort, in sorted id order
        (the order GroupKFold sees them in: ``hospital_codes`` ranks)."""
        present = [s for s in range(1, len(self.slot_ids)) if self.slot_n[s] > 0]
        present.sort(key=lambda s: self.slot_ids[s])
        slots = np.asarray(present, dtype=np.int64)
        return slots, self.slot_n[slots]

    def fold_tables(
        self, attribute: str, fold_of_slot: np.ndarray, n_folds: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(counts (F, G, 2, 2, B), score sum per (F, G, B) as float) of each fold: the sums
        of its hospitals' tables, in exact integers until the one conversion at the end."""
        f = fold_of_slot[: self.slot_n.size]
        order = np.flatnonzero(f >= 0)
        order = order[np.argsort(f[order], kind="stable")]  # the slots, fold by fold
        starts = np.searchsorted(f[order], np.arange(n_folds))
        sums = [
            _fold_sums(a[order], starts, n_folds)
            for a in (self.counts[attribute], self.score_hi[attribute], self.score_lo[attribute])
        ]
        return sums[0], _words_to_float(sums[1], sums[2])

    def merged_labels(self) -> CohortCounts:
        """A copy with every record at label 0 (predictions now, outcomes later): the counts of the
        label-free metrics on a cohort of predictions, exact (counts summed, score sums
        unchanged)."""
        out = self.copy()
        for k, c in out.counts.items():
            merged = np.zeros_like(c)
            merged[:, :, 0] = c.sum(axis=2)
            out.counts[k] = merged
        out.tables = {k: t.merged_labels() for k, t in out.tables.items()}
        return out

    def copy(self) -> CohortCounts:
        """An independent copy (what a job computes on while the book moves on)."""
        out = CohortCounts.__new__(CohortCounts)
        out.attributes, out.bins, out.with_tables = self.attributes, self.bins, self.with_tables
        out.slot_ids = list(self.slot_ids)
        out._slot_of = dict(self._slot_of)
        out.slot_n = self.slot_n.copy()
        out.counts = {k: v.copy() for k, v in self.counts.items()}
        out.score_hi = {k: v.copy() for k, v in self.score_hi.items()}
        out.score_lo = {k: v.copy() for k, v in self.score_lo.items()}
        out.tables = {k: t.copy() for k, t in self.tables.items()}
        return out

    # ---------------------------------------------------------------- monoid
    @property
    def hospital_ids(self) -> tuple[Any, ...]:
        """The hospital id of each slot from 1 on (slot 0 holds the records without one)."""
        return tuple(self.slot_ids[1:])

    def check_compatible(self, other: CohortCounts) -> None:
        """Raise ValueError naming what differs (attributes, their group codes, score bins,
        whether Axis 2's tables are kept) unless the two can be added; hospitals may
        differ (``+`` matches them by id)."""
        if not isinstance(other, CohortCounts):
            raise TypeError(f"cohort counts combine with cohort counts, not {type(other)}")
        diff = _shape_difference(
            (self.attributes, self.bins, self.with_tables),
            (other.attributes, other.bins, other.with_tables),
        )
        if diff:
            raise ValueError(f"cohort counts of different shapes: {diff}")

    def with_hospitals(self, hospitals: Sequence[Any]) -> CohortCounts:
        """A copy whose slots hold exactly ``hospitals``, in that order (slot 0 stays the
        records without an id): how a site writes its counts in a network's shared layout.
        A hospital with records here must be in ``hospitals`` (one without records, whose
        slot is all zeros, may be left out)."""
        ids = tuple(hospitals)
        index = {h: i + 1 for i, h in enumerate(ids)}
        if len(index) != len(ids) or None in index:
            raise ValueError("hospital ids of a layout are distinct and not None")
        S = len(self.slot_ids)
        mine = np.arange(S, dtype=np.int64)
        target = np.array([0, *(index.get(h, -1) for h in self.slot_ids[1:])], dtype=np.int64)
        lost = (target < 0) & (self.slot_n[:S] > 0)
        if lost.any():
            raise ValueError(
                f"{int(lost.sum())} hospital(s) with records here are not in the "
                f"{len(ids)} hospitals given"
            )
        keep = target >= 0
        out = CohortCounts(self.attributes, self.bins, with_tables=False)
        out.with_tables, out.slot_ids = self.with_tables, [None, *ids]
        out._slot_of = {h: i for i, h in index.items()}
        size = 1 + len(ids)

        def moved(a: np.ndarray) -> np.ndarray:
            b = np.zeros((size, *a.shape[1:]), dtype=a.dtype)
            b[target[keep]] = a[mine[keep]]
            return b

        out.slot_n = moved(self.slot_n)
        out.counts = {k: moved(v) for k, v in self.counts.items()}
        out.score_hi = {k: moved(v) for k, v in self.score_hi.items()}
        out.score_lo = {k: moved(v) for k, v in self.score_lo.items()}
        out.tables = {k: t.copy() for k, t in self.tables.items()}
        return out

    def _aligned(self, other: CohortCounts) -> tuple[CohortCounts, CohortCounts]:
        """Both in one layout: this one's hospitals, then the other's new ones."""
        self.check_compatible(other)
        ids = dict.fromkeys(self.slot_ids[1:])
        ids.update(dict.fromkeys(other.slot_ids[1:]))
        return self.with_hospitals(list(ids)), other.with_hospitals(list(ids))

    def _combined(self, other: CohortCounts, sign: int) -> CohortCounts:
        out, theirs = self._aligned(other)
        if sign < 0 and (
            np.any(theirs.slot_n > out.slot_n)
            or any(np.any(theirs.counts[k] > out.counts[k]) for k in out.counts)
        ):
            raise ValueError("subtracting cohort counts that are not contained in these")
        out.slot_n += sign * theirs.slot_n
        for d, e in ((out.counts, theirs.counts), (out.score_hi, theirs.score_hi),
                     (out.score_lo, theirs.score_lo)):  # fmt: skip
            for k in d:
                d[k] += sign * e[k]
        out.tables = {
            k: (t + theirs.tables[k]) if sign > 0 else (t - theirs.tables[k])
            for k, t in out.tables.items()
        }
        return out

    def __add__(self, other: CohortCounts) -> CohortCounts:
        """The counts of both cohorts, hospital slots matched by id (a hospital in one only
        keeps its counts): for disjoint record sets, the counts of their union."""
        return self._combined(other, +1)

    def __sub__(self, other: CohortCounts) -> CohortCounts:
        """The inverse of ``+``: these counts without ``other``'s, which must be a part."""
        return self._combined(other, -1)

    def __eq__(self, other: object) -> bool:
        """Equal counts per hospital id (slot order and empty slots aside), equal score
        sums (as fixed-point values, whatever their split into words) and tables."""
        if not isinstance(other, CohortCounts):
            return NotImplemented
        try:
            a, b = self._aligned(other)
        except ValueError:
            return False
        return bool(
            np.array_equal(a.slot_n, b.slot_n)
            and all(np.array_equal(a.counts[k], b.counts[k]) for k in a.counts)
            and all(
                np.array_equal(x, y)
                for k in a.counts
                for x, y in zip(
                    _canonical(a.score_hi[k], a.score_lo[k]),
                    _canonical(b.score_hi[k], b.score_lo[k]),
                    strict=True,
                )
            )
            and a.tables == b.tables
        )

    __hash__ = None  # type: ignore[assignment]  # compared by value, and mutable

    # ---------------------------------------------------------------- vector
    def layout(self) -> CountsLayout:
        """The layout of :meth:`to_vector` with this cohort's own hospital slots."""
        return CountsLayout(self.attributes, self.bins, self.hospital_ids, self.with_tables)

    def to_vector(self, layout: CountsLayout | None = None) -> tuple[np.ndarray, CountsLayout]:
        """(the counts as one flat int64 vector, its layout): records per slot, then per
        attribute its (slot, group, label, decision, bin) counts and (slot, group, bin)
        score words, then per attribute its count table's counts and four words.

        ``layout``: a shared one (a network's), whose hospitals include every hospital with
        records here; default :meth:`layout`. Read back with :meth:`from_vector`, bit for
        bit; the element-wise sum of two vectors in one layout is the vector of the two
        cohorts' sum.
        """
        layout = self.layout() if layout is None else layout
        if diff := _shape_difference(
            (self.attributes, self.bins, self.with_tables),
            (layout.attributes, layout.bins, layout.with_tables),
        ):
            raise ValueError(f"these cohort counts do not fit the layout: {diff}")
        c = self if self.hospital_ids == layout.hospitals else self.with_hospitals(layout.hospitals)
        S = len(c.slot_ids)
        parts = [c.slot_n[:S]]
        for a in c.attributes:
            parts += [c.counts[a.name][:S], c.score_hi[a.name][:S], c.score_lo[a.name][:S]]
        if c.with_tables:
            for a in c.attributes:
                t = c.tables[a.name]
                parts += [t.counts, *t.words()]
        vector = np.concatenate([p.reshape(-1) for p in parts]).astype(np.int64, copy=False)
        return vector, layout

    @classmethod
    def from_vector(cls, vector: np.ndarray, layout: CountsLayout) -> CohortCounts:
        """The cohort counts a :meth:`to_vector` vector holds (or a sum of such vectors in one
        layout); raises ValueError when the integers are not the counts of any records (a
        negative count, a slot whose attributes disagree on its records, a table that is
        not its slots' sum)."""
        v = np.asarray(vector)
        if v.ndim != 1 or not np.issubdtype(v.dtype, np.integer):
            raise TypeError("a count vector is a flat array of integers (to_vector's int64)")
        if v.size != layout.size:
            raise ValueError(f"this layout takes a vector of {layout.size} integers, not {v.size}")
        v = v.astype(np.int64, copy=False)
        S, B, at = 1 + len(layout.hospitals), layout.bins, 0

        def take(shape: tuple[int, ...]) -> np.ndarray:
            nonlocal at
            n = int(np.prod(shape))
            out = v[at : at + n].reshape(shape).copy()
            at += n
            return out

        out = cls(layout.attributes, B, with_tables=False)
        out.with_tables, out.slot_ids = layout.with_tables, [None, *layout.hospitals]
        out._slot_of = {h: i + 1 for i, h in enumerate(layout.hospitals)}
        out.slot_n = take((S,))
        for a in layout.attributes:
            G = len(a.codes)
            out.counts[a.name] = take((S, G, 2, 2, B))
            out.score_hi[a.name] = take((S, G, B))
            out.score_lo[a.name] = take((S, G, B))
        if layout.with_tables:
            for a in layout.attributes:
                shape = (len(a.codes), 2, 2, B)
                counts = take(shape)
                out.tables[a.name] = CountTable.from_words(
                    a.codes, B, counts, [take(shape) for _ in range(4)]
                )
        out._check_consistent()
        return out

    @classmethod
    def from_tables(
        cls,
        attributes: Sequence[AttributeConfig],
        per_hospital: Mapping[Any, Mapping[str, CountTable]],
    ) -> CohortCounts:
        """Cohort counts from each hospital's count table per attribute (key None: the
        records without a hospital id), all of one hospital's tables counting the same
        records: the counts that adding those records would give, exactly."""
        attrs = tuple(attributes)
        if not attrs or not per_hospital:
            raise ValueError(
                "cohort counts from tables need an attribute and a hospital's tables (an "
                "empty cohort is CohortCounts(attributes, bins))"
            )
        first = next(iter(per_hospital.values())).get(attrs[0].name)
        out = cls(attrs, first.bins if first is not None else 10)
        ids = [h for h in per_hospital if h is not None]
        out.slot_ids, out._slot_of = [None, *ids], {h: i + 1 for i, h in enumerate(ids)}
        out._grow(len(out.slot_ids))
        for h, tables in per_hospital.items():
            slot = 0 if h is None else out._slot_of[h]
            if set(tables) != {a.name for a in attrs}:
                raise ValueError(
                    f"each hospital gives one table per attribute {[a.name for a in attrs]}, "
                    f"not {sorted(tables)}"
                )
            margins = {t.counts.sum(axis=0).tobytes() for t in tables.values()}
            if len(margins) > 1:
                raise ValueError("one hospital's tables count different records")
            for a in attrs:
                t = tables[a.name]
                if t.groups != a.codes or t.bins != out.bins:
                    raise ValueError(
                        f"the table of {a.name!r} has groups {list(t.groups)} and {t.bins} "
                        f"bins, not {list(a.codes)} and {out.bins}"
                    )
                hi, lo = t.words()[:2]
                out.counts[a.name][slot] += t.counts
                out.score_hi[a.name][slot] += hi.sum(axis=(1, 2))
                out.score_lo[a.name][slot] += lo.sum(axis=(1, 2))
                out.tables[a.name] += t
            out.slot_n[slot] += int(tables[attrs[0].name].counts.sum())
        return out

    def _check_consistent(self) -> None:
        """Raise unless these integers are the counts of some set of records."""
        S = len(self.slot_ids)
        fault = ""
        if np.any(self.slot_n[:S] < 0):
            fault = "a negative record count"
        for a in self.attributes:
            c = self.counts[a.name][:S]
            words = (self.score_hi[a.name][:S], self.score_lo[a.name][:S])
            if np.any(c < 0) or any(np.any(w < 0) for w in words):
                fault = fault or f"a negative count or score sum of {a.name!r}"
            elif not np.array_equal(c.sum(axis=(1, 2, 3, 4)), self.slot_n[:S]):
                fault = fault or f"the hospitals' records differ between {a.name!r} and the total"
            elif self.with_tables and any(np.any(w < 0) for w in self.tables[a.name].words()):
                fault = fault or f"a negative score sum in the count table of {a.name!r}"
            elif self.with_tables and not _table_matches(self.tables[a.name], c, words):
                fault = fault or f"the count table of {a.name!r} is not its hospitals' sum"
        if fault:
            raise ValueError(f"these integers are not cohort counts: {fault}")

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (the hospital-id strings and dicts come on top)."""
        arrays = [self.slot_n, *self.counts.values(), *self.score_hi.values(),
                  *self.score_lo.values()]  # fmt: skip
        table_bytes = sum(
            getattr(t, name).nbytes
            for t in self.tables.values()
            for name in ("counts", "_hi", "_lo", "_sq_hi", "_sq_lo")
        )
        return int(sum(a.nbytes for a in arrays) + table_bytes)


def _canonical(hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-point words with the low word's carry moved up: one pair per value (a sum of
    words may hold the same value as another split)."""
    return hi + (lo >> _LO_BITS), lo & _LO_MASK


def _table_matches(table: CountTable, counts: np.ndarray, words: tuple[np.ndarray, ...]) -> bool:
    """Whether an attribute's count table is the sum of its hospitals' counts and score sums
    (the score sums as values: the words may split them differently)."""
    if not np.array_equal(table.counts, counts.sum(axis=0)):
        return False
    hi, lo = table.words()[:2]
    mine = _canonical(hi.sum(axis=(1, 2)), lo.sum(axis=(1, 2)))
    theirs = _canonical(words[0].sum(axis=0), words[1].sum(axis=0))
    return all(np.array_equal(x, y) for x, y in zip(mine, theirs, strict=True))
