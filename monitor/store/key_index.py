"""Which (model_id, record_id) keys the file holds: deduplication without a join.

:class:`KeyHashes` answers "certainly new" for most keys of a batch; the writer checks
only the others against ``discharges``. :func:`conflicting_rows` tells a redelivery with
other content from an identical one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _member(sorted_hashes: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Whether each of the sorted hashes ``h`` is in ``sorted_hashes``."""
    if not sorted_hashes.size:
        return np.zeros(h.shape, dtype=bool)
    i = np.minimum(np.searchsorted(sorted_hashes, h), sorted_hashes.size - 1)
    return sorted_hashes[i] == h


def _merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two sorted arrays as one sorted array, in one linear pass (no sort)."""
    return np.insert(a, np.searchsorted(a, b), b)


class KeyHashes:
    """DuckDB hashes of the stored (model_id, record_id) keys, to deduplicate without a join.

    Why: the join of a batch's keys with ``discharges`` scans the whole table, so its cost
    grows with every record stored (tens of ms per batch at a million records). A key
    whose hash is not here is certainly new; a key whose hash is here (a redelivery, a
    hash collision, a record deleted by retention) is checked against the table, so the
    result is exact. 8 bytes per stored record, rebuilt from the table at start-up and
    after retention.

    Kept as a few sorted levels, each at least four times the size of the next: a batch's
    hashes become the smallest level and a level is merged into the one above once it is
    no longer four times smaller. So a lookup searches O(log n) arrays, and a stored hash
    is copied O(log n) times in all, where merging every batch into one array would copy
    the whole set per batch.
    """

    GROWTH = 4

    def __init__(self, hashes: np.ndarray):
        self.levels: list[np.ndarray] = []
        base = np.sort(np.asarray(hashes, dtype=np.uint64))
        if base.size:
            self.levels.append(base)
        self.staged: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(level.size for level in self.levels)

    def contains(self, h: np.ndarray) -> np.ndarray:
        order = np.argsort(h)  # sorted needles: searchsorted walks each level once
        hs = np.asarray(h, dtype=np.uint64)[order]
        hit = np.zeros(hs.shape, dtype=bool)
        for level in self.levels:
            hit |= _member(level, hs)
        out = np.empty_like(hit)
        out[order] = hit
        return out

    def stage(self, h: np.ndarray) -> None:
        """Hashes of keys inserted by the open transaction (kept only if it commits)."""
        if h.size:
            self.staged.append(np.sort(np.asarray(h, dtype=np.uint64)))

    def commit(self) -> None:
        for run in self.staged:
            self.levels.append(run)
            levels = self.levels
            while len(levels) > 1 and levels[-2].size < self.GROWTH * levels[-1].size:
                top = levels.pop()
                self.levels[-1] = _merge(self.levels[-1], top)
        self.staged.clear()

    def rollback(self) -> None:
        self.staged.clear()


def conflicting_rows(
    keys: pd.DataFrame,
    content: np.ndarray,
    new_mask: np.ndarray,
    existing: np.ndarray,
    stored_hash: np.ndarray,
) -> np.ndarray:
    """Rows that repeat a (model_id, record_id) with other content.

    The reference content of a key is the stored record's (when the key was stored
    before), else the batch's first row of that key. A stored record without a hash
    (written before schema v4) cannot be compared: its repeats count as identical.
    """
    n = len(keys)
    first_pos = keys.groupby(["model_id", "record_id"], sort=False)["pos"].transform("first")
    first_pos = first_pos.to_numpy(dtype=np.int64)
    ref = content[first_pos].astype(object)
    from_store = np.zeros(n, dtype=bool)
    stored = np.full(n, None, dtype=object)
    from_store[existing] = True
    stored[existing] = stored_hash
    ref = np.where(from_store[first_pos], stored[first_pos], ref)
    known = np.array([r is not None for r in ref], dtype=bool)
    return ~new_mask & known & (ref != content)
