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

The fold assignment (:func:`group_kfold_from_sizes`) is scikit-learn's GroupKFold
(no shuffle) computed from the per-hospital record counts instead of from one
group label per record: the same greedy rule (largest hospital first, into the
lightest fold, stable order), tested equal to GroupKFold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import AttributeConfig
from monitor.core.counts import CountTable, _words_to_float, score_bins

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
        """A copy with every record at label 0 (issue 23): the counts of the label-free
        metrics on a cohort of predictions, exact (counts summed, score sums unchanged)."""
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
