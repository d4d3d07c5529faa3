"""Stratum count tables: the sufficient statistics of a window for one (model, attribute).

Every metric of docs/method.md section 2 is a function of how many records fall in each
(group, label, decision, score bin) cell, plus the score sum and sum of squares
per cell (for calibration). Keeping only these tables makes a window's state
O(groups x bins), independent of how many records it holds, and makes the
bootstrap O(K x strata) instead of O(K x N).

Score sums are kept in exact fixed point (integer multiples of 2**-53, split
into a high and a low int64 word) rather than as floats. Why: a rolling window
adds and removes millions of batches over months; float sums would drift and
``table + batch - batch`` would not give back ``table``. With integers it does,
bit for bit, in any order. The quantisation is below 2**-54 per score, far under
anything a metric can resolve.

Example:
    >>> import numpy as np
    >>> t = CountTable(("F", "M"))
    >>> g = np.array([0, 1, 1]); y = np.array([1, 0, 1]); d = np.array([1, 0, 0])
    >>> s = np.array([0.9, 0.2, 0.45])
    >>> t.add(g, y, d, s)
    >>> int(t.n), t.group_counts().tolist()
    (3, [1, 2])
    >>> u = t.copy(); u.remove(g[:1], y[:1], d[:1], s[:1]); int(u.n)
    2
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

#: Fixed-point resolution for score sums: a score s is stored as round(s * 2**53).
_FRAC_BITS = 53
#: The fixed-point integer is split in two words so that sums of many records fit int64.
_LO_BITS = 26
_LO_MASK = (1 << _LO_BITS) - 1
#: np.bincount accumulates in float64, exact for integer sums below 2**53: the
#: high word is < 2**27 so batches are cut to at most 2**25 records.
_MAX_BATCH = 1 << 25


def score_bins(scores: np.ndarray, bins: int) -> np.ndarray:
    """Equal-width bin index of each score on [0, 1]; a score of exactly 1 goes to the last bin."""
    b = np.floor(np.asarray(scores, dtype=np.float64) * bins).astype(np.int64)
    return np.clip(b, 0, bins - 1)


def _fixed_point_words(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q = np.rint(np.ldexp(values, _FRAC_BITS)).astype(np.int64)
    return q >> _LO_BITS, q & _LO_MASK


#: A score sum is hi * HI_SCALE + lo * LO_SCALE (powers of two: exact scalings, as
#: ``np.ldexp`` in :func:`_words_to_float`); for compiled code reading :meth:`CountTable.words`.
HI_SCALE = 2.0 ** (_LO_BITS - _FRAC_BITS)
LO_SCALE = 2.0**-_FRAC_BITS


def _words_to_float(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    return np.ldexp(hi.astype(np.float64), _LO_BITS - _FRAC_BITS) + np.ldexp(
        lo.astype(np.float64), -_FRAC_BITS
    )


class CountTable:
    """Counts per (group, label, decision, score bin) with exact score sums and squares.

    Axes of every array: group (as configured, in order), label (0, 1),
    decision (0, 1), score bin (``bins`` equal-width bins on [0, 1]).

    ``add``/``remove`` take record batches (group index, label, decision,
    score arrays); ``+`` and ``-`` merge whole tables. Both are exact inverses.
    """

    __slots__ = ("_hi", "_lo", "_sq_hi", "_sq_lo", "bins", "counts", "groups")

    def __init__(self, groups: Sequence[str], bins: int = 10):
        self.groups: tuple[str, ...] = tuple(groups)
        self.bins = int(bins)
        shape = (len(self.groups), 2, 2, self.bins)
        self.counts = np.zeros(shape, dtype=np.int64)
        self._hi = np.zeros(shape, dtype=np.int64)
        self._lo = np.zeros(shape, dtype=np.int64)
        self._sq_hi = np.zeros(shape, dtype=np.int64)
        self._sq_lo = np.zeros(shape, dtype=np.int64)

    # ---------------------------------------------------------------- records
    def _cell_index(
        self, group: ArrayLike, label: ArrayLike, decision: ArrayLike, score: np.ndarray
    ) -> np.ndarray:
        g = np.asarray(group, dtype=np.int64)
        y = np.asarray(label, dtype=np.int64)
        d = np.asarray(decision, dtype=np.int64)
        if g.size and (g.min() < 0 or g.max() >= len(self.groups)):
            raise ValueError("group index out of range for this table")
        if y.size and (y.min() < 0 or y.max() > 1 or d.min() < 0 or d.max() > 1):
            raise ValueError("label and decision must be 0 or 1")
        b = score_bins(score, self.bins)
        out: np.ndarray = ((g * 2 + y) * 2 + d) * self.bins + b
        return out

    def _apply(
        self, group: ArrayLike, label: ArrayLike, decision: ArrayLike, score: ArrayLike, sign: int
    ) -> None:
        s = np.asarray(score, dtype=np.float64)
        if s.size and (not np.all(np.isfinite(s)) or s.min() < 0.0 or s.max() > 1.0):
            raise ValueError("scores must be finite and in [0, 1]")
        for start in range(0, max(s.size, 1), _MAX_BATCH):
            sl = slice(start, start + _MAX_BATCH)
            idx = self._cell_index(
                np.asarray(group)[sl], np.asarray(label)[sl], np.asarray(decision)[sl], s[sl]
            )
            words = (*_fixed_point_words(s[sl]), *_fixed_point_words(s[sl] * s[sl]))
            self._apply_cells(idx, words, sign)

    def _apply_cells(self, idx: np.ndarray, words: tuple[np.ndarray, ...], sign: int) -> None:
        """Add (sign +1) or remove (-1) records given by cell index and score words."""
        size = self.counts.size
        deltas = [np.bincount(idx, minlength=size)]
        for w in words:
            deltas.append(np.rint(np.bincount(idx, weights=w, minlength=size)).astype(np.int64))
        arrays = (self.counts, self._hi, self._lo, self._sq_hi, self._sq_lo)
        if sign < 0 and np.any(self.counts.reshape(-1) < deltas[0]):
            raise ValueError("removing records that are not in the table")
        for arr, delta in zip(arrays, deltas, strict=True):
            arr += sign * delta.reshape(arr.shape)

    @staticmethod
    def prepare(
        label: ArrayLike, decision: ArrayLike, score: ArrayLike, bins: int
    ) -> tuple[np.ndarray, ...] | None:
        """The group-independent part of a batch's cell indices and score words, to add the
        batch to several tables (one per attribute) with :meth:`apply_prepared`; None for a
        batch too large to take in one piece (use :meth:`add`)."""
        s = np.asarray(score, dtype=np.float64)
        if s.size > _MAX_BATCH:
            return None
        if s.size and (not np.all(np.isfinite(s)) or s.min() < 0.0 or s.max() > 1.0):
            raise ValueError("scores must be finite and in [0, 1]")
        y = np.asarray(label, dtype=np.int64)
        d = np.asarray(decision, dtype=np.int64)
        if y.size and (y.min() < 0 or y.max() > 1 or d.min() < 0 or d.max() > 1):
            raise ValueError("label and decision must be 0 or 1")
        base = (y * 2 + d) * bins + score_bins(s, bins)
        return (base, *_fixed_point_words(s), *_fixed_point_words(s * s))

    def apply_prepared(self, group: ArrayLike, prepared: tuple[np.ndarray, ...], sign: int) -> None:
        """:meth:`add` (sign +1) or :meth:`remove` (-1) of a batch given by its groups and
        :meth:`prepare`; the same integers as the per-table path."""
        base, *words = prepared
        g = np.asarray(group, dtype=np.int64)
        if g.size and (g.min() < 0 or g.max() >= len(self.groups)):
            raise ValueError("group index out of range for this table")
        self._apply_cells(g * (4 * self.bins) + base, tuple(words), sign)

    @staticmethod
    def apply_prepared_many(
        tables: Sequence[CountTable],
        groups: Sequence[Any],
        prepared: tuple[np.ndarray, ...],
        sign: int,
    ) -> None:
        """:meth:`apply_prepared` of one batch to several tables (a window's attributes)
        with one ``bincount`` per array for all of them, not one per table: the cell
        indices of every table are laid end to end. The same integers as table by table
        (each cell's sum is the same sum of the same words). A removal that does not fit
        any table changes none of them."""
        base, *words = prepared
        idx, bounds, start = [], [], 0
        for t, group in zip(tables, groups, strict=True):
            g = np.asarray(group, dtype=np.int64)
            if g.size and (g.min() < 0 or g.max() >= len(t.groups)):
                raise ValueError("group index out of range for this table")
            idx.append(g * (4 * t.bins) + base + start)
            bounds.append((t, slice(start, start + t.counts.size)))
            start += t.counts.size
        cells = np.concatenate(idx) if idx else np.zeros(0, np.int64)
        deltas = [np.bincount(cells, minlength=start)]
        for w in words:
            weights = np.tile(w, len(tables))
            deltas.append(np.rint(np.bincount(cells, weights=weights, minlength=start)))
        deltas[1:] = [d.astype(np.int64) for d in deltas[1:]]
        if sign < 0 and any(np.any(t.counts.reshape(-1) < deltas[0][sl]) for t, sl in bounds):
            raise ValueError("removing records that are not in the table")
        for t, sl in bounds:
            arrays = (t.counts, t._hi, t._lo, t._sq_hi, t._sq_lo)
            for arr, delta in zip(arrays, deltas, strict=True):
                arr += sign * delta[sl].reshape(arr.shape)

    def add(
        self, group: ArrayLike, label: ArrayLike, decision: ArrayLike, score: ArrayLike
    ) -> None:
        """Add a batch of records (group indices into ``groups``, 0/1 label and decision)."""
        self._apply(group, label, decision, score, +1)

    def remove(
        self, group: ArrayLike, label: ArrayLike, decision: ArrayLike, score: ArrayLike
    ) -> None:
        """Remove a batch previously added (e.g. records evicted from a window)."""
        self._apply(group, label, decision, score, -1)

    @classmethod
    def from_records(
        cls,
        groups: Sequence[str],
        group: ArrayLike,
        label: ArrayLike,
        decision: ArrayLike,
        score: ArrayLike,
        bins: int = 10,
    ) -> CountTable:
        t = cls(groups, bins)
        t.add(group, label, decision, score)
        return t

    @classmethod
    def from_words(
        cls,
        groups: Sequence[str],
        bins: int,
        counts: ArrayLike,
        words: Sequence[ArrayLike],
    ) -> CountTable:
        """A table from its integer arrays, copied: :attr:`counts` and the four
        :meth:`words`, each of shape (groups, 2, 2, bins). The exact inverse of reading
        them (a count vector's round trip: :meth:`batch_axes.cohort_counts.CohortCounts.to_vector`).

        >>> t = CountTable.from_records(("F", "M"), [0, 1], [1, 0], [1, 0], [0.9, 0.2])
        >>> CountTable.from_words(t.groups, t.bins, t.counts, t.words()) == t
        True
        """
        t = cls(groups, bins)
        arrays = [np.asarray(counts), *(np.asarray(w) for w in words)]
        if len(arrays) != 5 or any(a.shape != t.counts.shape for a in arrays):
            raise ValueError(
                f"a count table of {len(t.groups)} groups and {t.bins} bins takes counts and "
                f"four score words of shape {t.counts.shape}"
            )
        if any(not np.issubdtype(a.dtype, np.integer) for a in arrays):
            raise TypeError("count table arrays are integers (counts and fixed-point words)")
        for name, a in zip(("counts", "_hi", "_lo", "_sq_hi", "_sq_lo"), arrays, strict=True):
            setattr(t, name, a.astype(np.int64, copy=True))
        return t

    # ---------------------------------------------------------------- merge
    def _check_compatible(self, other: CountTable) -> None:
        if not isinstance(other, CountTable):
            raise TypeError("can only combine CountTable with CountTable")
        if other.groups != self.groups or other.bins != self.bins:
            raise ValueError("tables have different groups or bins")

    def _combined(self, other: CountTable, sign: int) -> CountTable:
        self._check_compatible(other)
        if sign < 0 and np.any(other.counts > self.counts):
            raise ValueError("subtracting a table that is not contained in this one")
        out = CountTable(self.groups, self.bins)
        for name in ("counts", "_hi", "_lo", "_sq_hi", "_sq_lo"):
            setattr(out, name, getattr(self, name) + sign * getattr(other, name))
        return out

    def __add__(self, other: CountTable) -> CountTable:
        return self._combined(other, +1)

    def __sub__(self, other: CountTable) -> CountTable:
        return self._combined(other, -1)

    def __iadd__(self, other: CountTable) -> CountTable:
        self._check_compatible(other)
        for name in ("counts", "_hi", "_lo", "_sq_hi", "_sq_lo"):
            getattr(self, name).__iadd__(getattr(other, name))
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CountTable):
            return NotImplemented
        if other.groups != self.groups or other.bins != self.bins:
            return False
        # Compare the fixed-point value, not its split into words (a carry may differ).
        return bool(
            np.array_equal(self.counts, other.counts)
            and np.array_equal(self._fixed(self._hi, self._lo), self._fixed(other._hi, other._lo))
            and np.array_equal(
                self._fixed(self._sq_hi, self._sq_lo), self._fixed(other._sq_hi, other._sq_lo)
            )
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable: equal tables compare by value

    @staticmethod
    def _fixed(hi: np.ndarray, lo: np.ndarray) -> list[int]:
        return [
            (int(h) << _LO_BITS) + int(lo_) for h, lo_ in zip(hi.ravel(), lo.ravel(), strict=True)
        ]

    def copy(self) -> CountTable:
        out = CountTable(self.groups, self.bins)
        for name in ("counts", "_hi", "_lo", "_sq_hi", "_sq_lo"):
            setattr(out, name, getattr(self, name).copy())
        return out

    def merged_labels(self) -> CountTable:
        """A copy with every record moved to label 0 (predictions now, outcomes later): the table of
        a label-free metric, whose bootstrap then stratifies by group only (the label of a
        prediction may be unknown). Exact: the words are summed, not the floats."""
        out = CountTable(self.groups, self.bins)
        for name in ("counts", "_hi", "_lo", "_sq_hi", "_sq_lo"):
            a = getattr(self, name)
            m = np.zeros_like(a)
            m[:, 0] = a.sum(axis=1)
            setattr(out, name, m)
        return out

    # ---------------------------------------------------------------- views
    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def score_sum(self) -> np.ndarray:
        """Sum of scores per cell, as float64."""
        return _words_to_float(self._hi, self._lo)

    @property
    def score_sq(self) -> np.ndarray:
        """Sum of squared scores per cell, as float64."""
        return _words_to_float(self._sq_hi, self._sq_lo)

    def words(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The fixed-point words (hi, lo) of the score sums and (hi, lo) of the squares.

        Why exposed: the bootstrap's parameters (monitor.core.axis1.draw_params) are read
        by a compiled kernel in one pass, where the float views above would cost four
        array conversions a table. Read only."""
        return self._hi, self._lo, self._sq_hi, self._sq_lo

    def group_counts(self) -> np.ndarray:
        out: np.ndarray = self.counts.sum(axis=(1, 2, 3))
        return out

    def selected_counts(self) -> np.ndarray:
        """Records with decision 1 per group (the selection rate's numerator), shape (G,)."""
        out: np.ndarray = self.counts[:, :, 1, :].sum(axis=(1, 2))
        return out

    def stratum_counts(self) -> np.ndarray:
        """Records per (group, label) stratum, shape (G, 2)."""
        out: np.ndarray = self.counts.sum(axis=(2, 3))
        return out

    # ---------------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; integers only, so the round trip is exact."""
        return {
            "version": 1,
            "groups": list(self.groups),
            "bins": self.bins,
            "counts": self.counts.ravel().tolist(),
            "score_sum": self._fixed(self._hi, self._lo),
            "score_sq": self._fixed(self._sq_hi, self._sq_lo),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CountTable:
        if d.get("version") != 1:
            raise ValueError(f"unsupported count table version {d.get('version')!r}")
        t = cls(d["groups"], d["bins"])
        shape = t.counts.shape
        t.counts = np.asarray(d["counts"], dtype=np.int64).reshape(shape)
        for name_hi, name_lo, key in (
            ("_hi", "_lo", "score_sum"),
            ("_sq_hi", "_sq_lo", "score_sq"),
        ):
            vals = [int(v) for v in d[key]]
            setattr(
                t, name_hi, np.array([v >> _LO_BITS for v in vals], dtype=np.int64).reshape(shape)
            )
            setattr(
                t, name_lo, np.array([v & _LO_MASK for v in vals], dtype=np.int64).reshape(shape)
            )
        return t

    def __repr__(self) -> str:
        return f"CountTable(groups={self.groups!r}, bins={self.bins}, n={self.n})"
