"""EquiLense similarity matching, individual-fairness gap and MPPD (docs/method.md section 7).

Pure computation: arrays in, small frozen dataclasses out; nothing here reads or
writes anything.

Similarity
    Features are scaled to [0, 1] per column on the cohort (:func:`scale_features`),
    then two *different* records i, j are matched when the cosine distance
    ``d = 1 - cos(x_i, x_j)`` is strictly below the threshold (default 0.01). A
    record is never matched to itself; records of the same group do match, and
    identical feature vectors (d = 0) match each other.

Zero vectors
    The cosine of a zero vector is undefined (0 / 0). A record whose feature
    vector is all zeros matches nothing, not even another all-zero record.
    Min-max scaling maps a record that sits at the cohort minimum of every
    feature to the zero vector, so such records drop out of every pair count;
    that is the price of a cosine similarity and the reason the rule is stated
    here rather than hidden in a tolerance.

One predicate, two searches
    Both the fast matcher (:func:`matched_pairs`) and the all-pairs oracle
    (:func:`matched_pairs_all_pairs`) decide a pair with the same floating-point
    expression: unit vectors ``u = x / |x|`` from :func:`unit_rows`, then
    ``1.0 - sum_k u_ik * u_jk`` accumulated feature by feature in column order,
    compared with ``< threshold``. Element-wise IEEE products and sums do not
    depend on how the pairs are laid out, so a pair sitting exactly on the
    threshold is decided identically by both paths. The fast path only uses a
    neighbour index (or BLAS blocks) to find *candidates* with a slack of
    :data:`CANDIDATE_SLACK` in cosine-distance units, far wider than any rounding
    error, and then applies that exact predicate.

MPPD directions
    Pairs are unordered (i < j). MPPD reads them as directed (anchor, matched)
    contributions: each unordered pair {a, b} gives the contribution
    (anchor a, matched b) and the contribution (anchor b, matched a), both with
    value |p_a - p_b|. "For every reference record r and every record j matched
    to r" therefore counts a pair of two reference records twice (r=a, j=b and
    r=b, j=a): the reference group's own mean is unchanged by that doubling but
    its pair count is twice the number of unordered within-reference pairs. A
    reference-to-other pair counts once. The pairwise matrix uses the same
    reading for every anchor group, so its off-diagonal cells are symmetric and
    its diagonal counts are even, and the reference result equals the
    reference's row of the pairwise matrix.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, Literal

import numpy as np

Pairs = tuple[np.ndarray, np.ndarray]
"""Matched pairs as two index arrays ``(i, j)`` with ``i < j``, sorted lexicographically."""

DEFAULT_THRESHOLD = 0.01
DEFAULT_MIN_PAIRS = 30

CANDIDATE_SLACK = 1e-9
"""Extra cosine distance allowed when collecting candidates before the exact test.

Rounding in the unit vectors, in the dot products and in the tree's Euclidean
distances is of order (features x 1e-16); 1e-9 dwarfs it, so no pair that the
exact predicate accepts can be missed, while the few extra candidates it admits
are removed by the exact predicate.
"""

_BLOCK_ELEMENTS = 1 << 22  # ~32 MB of float64 per block: bounded memory, never N x N
_MAX_SLABS = 8  # k-d tree slabs along the first principal axis (see _kdtree_candidates)
_MIN_SLAB = 64  # records per slab below which cutting further is not worth a tree

Strategy = Literal["kdtree", "blocked"]


# --------------------------------------------------------------------------- scaling


def scale_features(X: Any, method: Literal["minmax", "none"] = "minmax") -> np.ndarray:
    """Scale each feature column for the cosine similarity (min-max on the cohort:
    docs/method.md section 7).

    Cosine similarity weighs features by magnitude, so an unscaled feature in
    large units (e.g. minutes of surgery) would swamp the others; min-max puts
    every feature on [0, 1] over the cohort being audited. A constant column
    carries no information about similarity and is mapped to 0 (it then adds
    nothing to any dot product). ``method="none"`` keeps the values (for
    features already on a common scale), only converting to float64.

    Raises ``ValueError`` on non-finite values: a missing feature must be
    imputed or the record excluded by the caller, not silently matched.
    """
    A = _as_feature_matrix(X)
    if method == "none":
        return A.copy()
    if method != "minmax":
        raise ValueError(f"unknown scaling method {method!r}; use 'minmax' or 'none'")
    if A.shape[0] == 0:
        return A.copy()
    lo = A.min(axis=0)
    span = A.max(axis=0) - lo
    if not np.all(np.isfinite(span)):
        raise ValueError("feature range overflows float64; rescale the feature first")
    # whole rows at a time (no column masks: they copy the matrix column by column)
    varying = span > 0
    out = (A - lo) / np.where(varying, span, 1.0)
    out[:, ~varying] = 0.0
    return out


# --------------------------------------------------------------------------- matching


def unit_rows(X: Any) -> tuple[np.ndarray, np.ndarray]:
    """Unit-length copy of every row, and which rows have a defined direction.

    Returns ``(U, valid)``: ``U[i] = X[i] / |X[i]|`` for non-zero rows and a row
    of zeros for all-zero rows, for which ``valid[i]`` is False (zero vectors
    match nothing, see the module docstring). Rows are first divided by their
    largest absolute entry so that the squared norm can neither underflow nor
    overflow. Both matchers call this one function, which is part of what
    makes their decisions bit-for-bit identical.
    """
    A = _as_feature_matrix(X)
    n, f = A.shape
    U = np.zeros((n, f), dtype=np.float64)
    if f == 0:
        return U, np.zeros(n, dtype=bool)
    peak = np.abs(A).max(axis=1)
    valid = peak > 0
    Y = A[valid] / peak[valid, None]
    norms = np.sqrt(np.einsum("ij,ij->i", Y, Y))
    U[valid] = Y / norms[:, None]
    return U, valid


def matched_pairs(
    X: Any,
    threshold: float = DEFAULT_THRESHOLD,
    *,
    strategy: Strategy = "kdtree",
    workers: int | None = None,
) -> Pairs:
    """All pairs of different records with cosine distance below ``threshold``: fast path.

    ``X`` holds the already-scaled features (see :func:`scale_features`). On
    unit vectors ``1 - cos = |u_i - u_j|^2 / 2``, so ``d < t`` is the Euclidean
    ball of radius ``sqrt(2 t)``. Candidates within that radius, widened by
    :data:`CANDIDATE_SLACK`, come from

    * ``strategy="kdtree"`` (default): SciPy k-d trees on slabs of the cohort
      (see :func:`_kdtree_candidates`), in ``workers`` threads (default: the
      CPUs this process may use). SciPy's dual-tree ``query_pairs`` returns
      each unordered pair once as an array and was 3-4 times faster here than
      scikit-learn's ``KDTree.query_radius`` (one search per record, an object
      array of neighbour lists); SciPy is already a hard dependency of
      scikit-learn.
    * ``strategy="blocked"``: upper-triangle row blocks of ``U U^T`` (BLAS),
      memory bounded per block, O(n^2) time that does not depend on how the
      data are spread; a fallback for feature sets on which a tree degrades.

    The exact predicate shared with :func:`matched_pairs_all_pairs` then
    decides every candidate. Neither strategy builds an N x N matrix.

    Returns ``(i, j)`` int arrays with ``i < j``, sorted lexicographically.
    """
    t = _check_threshold(threshold)
    U, valid = unit_rows(X)
    n = U.shape[0]
    if strategy not in ("kdtree", "blocked"):
        raise ValueError(f"unknown strategy {strategy!r}; use 'kdtree' or 'blocked'")
    threads = _available_cpus() if workers is None else int(workers)
    if threads < 1:
        raise ValueError(f"workers must be at least 1, got {workers!r}")
    rows = np.flatnonzero(valid)
    if rows.size < 2:
        return _empty_pairs()
    Uv = U[rows]
    if strategy == "kdtree":
        ci, cj = _kdtree_candidates(Uv, t, threads)
    else:
        ci, cj = _blocked_candidates(Uv, t)
    # Map back to record indices; ``rows`` is increasing, so ci < cj carries over.
    i, j = rows[ci], rows[cj]
    keep = _cosine_distance_of_pairs(np.ascontiguousarray(U.T), i, j) < t
    return _sorted_pairs(i[keep], j[keep], n)


def _cosine_distance_of_pairs(Ut: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """``1 - sum_k u_ik u_jk`` for the listed pairs, in the oracle's exact order of operations.

    ``Ut`` is the transposed unit-vector matrix (features x records). Summing
    feature by feature with element-wise products (no BLAS, no FMA) gives the
    same bits as :func:`matched_pairs_all_pairs` for the same pair.
    """
    if i.size == 0:
        return np.zeros(0, dtype=np.float64)
    acc = Ut[0][i] * Ut[0][j]
    for k in range(1, Ut.shape[0]):
        acc += Ut[k][i] * Ut[k][j]
    return 1.0 - acc


def _candidate_radius(threshold: float) -> float:
    """Euclidean radius on unit vectors that covers ``d < threshold + CANDIDATE_SLACK``."""
    return math.sqrt(2.0 * (threshold + CANDIDATE_SLACK))


def _kdtree_candidates(Uv: np.ndarray, threshold: float, workers: int) -> Pairs:
    """Candidate pairs (indices into ``Uv``, i < j) from k-d trees on slabs of the unit vectors.

    The vectors are centred and rotated onto their principal axes (an
    orthogonal map keeps every distance; clinical unit vectors sit in a narrow
    cone, so axis-aligned splits along the principal axes prune far better
    than splits along the raw features). The cohort is then cut along the
    first principal axis into slabs at least one radius wide, so a pair within
    the radius lies inside one slab or straddles one boundary:

    * pairs inside a slab come from that slab's own tree (``query_pairs``);
    * pairs across a boundary come from the two bands within one radius of
      it (``sparse_distance_matrix`` between the bands' trees).

    Every candidate pair is found exactly once. Smaller trees traverse faster
    than one large tree, and SciPy releases the GIL during both queries, so
    the slabs also run in parallel threads.
    """
    # imported here: scipy.spatial takes a quarter of a second to import, and the report
    # and the service read MPPD's types from this module without matching anyone
    from scipy.spatial import cKDTree

    radius = _candidate_radius(threshold)
    centred = Uv - Uv.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    V = centred @ vt.T
    x = V[:, 0]
    bounds = _slab_bounds(x, radius, max(1, min(_MAX_SLABS, x.size // _MIN_SLAB)))
    slab = np.searchsorted(bounds, x, side="right")
    members = [np.flatnonzero(slab == s) for s in range(bounds.size + 1)]

    def inside(idx: np.ndarray) -> Pairs:
        if idx.size < 2:
            return _empty_pairs()
        found = cKDTree(V[idx], leafsize=32).query_pairs(radius, output_type="ndarray")
        if found.size == 0:
            return _empty_pairs()
        return idx[found[:, 0]], idx[found[:, 1]]

    def across(s: int) -> Pairs:
        lower, upper = members[s], members[s + 1]
        lower = lower[x[lower] >= bounds[s] - radius]
        upper = upper[x[upper] < bounds[s] + radius]
        if lower.size == 0 or upper.size == 0:
            return _empty_pairs()
        found = cKDTree(V[lower], leafsize=32).sparse_distance_matrix(
            cKDTree(V[upper], leafsize=32), radius, output_type="ndarray"
        )
        return lower[found["i"]], upper[found["j"]]

    jobs = [partial(inside, idx) for idx in members]
    jobs += [partial(across, s) for s in range(bounds.size)]
    if workers > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(lambda job: job(), jobs))
    else:
        parts = [job() for job in jobs]
    a = np.concatenate([part[0] for part in parts]).astype(np.intp)
    b = np.concatenate([part[1] for part in parts]).astype(np.intp)
    return np.minimum(a, b), np.maximum(a, b)


def _slab_bounds(x: np.ndarray, width: float, slabs: int) -> np.ndarray:
    """Cut points along ``x`` for about ``slabs`` equal-count slabs, each at least ``width`` wide.

    A quantile closer than ``width`` to the previous cut is dropped, so every
    inner slab is at least ``width`` wide and no pair closer than ``width`` can
    skip over a slab.
    """
    cuts: list[float] = []
    for q in np.quantile(x, np.linspace(0.0, 1.0, slabs + 1)[1:-1]):
        if q > x.min() and (not cuts or q - cuts[-1] >= width):
            cuts.append(float(q))
    return np.array(cuts, dtype=np.float64)


def _blocked_candidates(Uv: np.ndarray, threshold: float) -> Pairs:
    """Candidate pairs (indices into ``Uv``, i < j) from upper-triangle blocks of ``U U^T``.

    Memory per block is bounded by ``_BLOCK_ELEMENTS`` float64 values whatever n is.
    """
    m = Uv.shape[0]
    cut = 1.0 - (threshold + CANDIDATE_SLACK)
    block = max(1, _BLOCK_ELEMENTS // m)
    found_i: list[np.ndarray] = []
    found_j: list[np.ndarray] = []
    for start in range(0, m, block):
        stop = min(m, start + block)
        dots = Uv[start:stop] @ Uv[start:].T
        a, b = np.nonzero(dots > cut)
        i, j = a + start, b + start
        keep = j > i
        found_i.append(i[keep])
        found_j.append(j[keep])
    return np.concatenate(found_i), np.concatenate(found_j)


def _available_cpus() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _sorted_pairs(i: np.ndarray, j: np.ndarray, n: int) -> Pairs:
    """Pairs in lexicographic (i, j) order, as intp arrays."""
    i = np.asarray(i, dtype=np.intp)
    j = np.asarray(j, dtype=np.intp)
    order = np.argsort(i.astype(np.int64) * max(n, 1) + j, kind="stable")
    return i[order], j[order]


def _empty_pairs() -> Pairs:
    return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class IndividualFairnessGap:
    """Mean |p_i - p_j| over matched pairs (lower is more consistent)."""

    mean: float | None  # None when there is no matched pair (or withheld)
    pairs: int | str  # SMALL_CELL_LABEL once the small-cell rule withheld the mean
    low_support: bool  # fewer than min_pairs pairs
    #: standard error of ``mean`` when it is estimated on a sample
    #: (:mod:`batch_axes.mppd_sample`); None when computed on all records
    se: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (no record-level values); ``se`` only when estimated."""
        return _without_none(asdict(self), ("se",))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IndividualFairnessGap:
        """The inverse of :meth:`to_dict`."""
        return cls(
            mean=d.get("mean"), pairs=d["pairs"], low_support=bool(d["low_support"]),
            se=d.get("se"),
        )  # fmt: skip


@dataclass(frozen=True)
class GroupMPPD:
    """MPPD of one matched group against the reference group's records."""

    group: str
    mean: float | None  # None when no reference record is matched to this group (or withheld)
    #: directed (reference record, matched record) contributions; SMALL_CELL_LABEL once
    #: the small-cell rule withheld the entry
    pairs: int | str
    low_support: bool  # pairs < min_pairs
    gap_to_reference: float | None  # mean - reference's own mean; None if either is None
    #: standard errors of ``mean`` and ``gap_to_reference`` on a sample (None: all records)
    se: float | None = None
    gap_se: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The entry; ``se`` and ``gap_se`` only when estimated on a sample (a result
        computed on all records keeps the form it always had)."""
        return _without_none(asdict(self), ("se", "gap_se"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GroupMPPD:
        """The inverse of :meth:`to_dict`."""
        return cls(
            group=str(d["group"]),
            mean=d.get("mean"),
            pairs=d["pairs"],
            low_support=bool(d["low_support"]),
            gap_to_reference=d.get("gap_to_reference"),
            se=d.get("se"),
            gap_se=d.get("gap_se"),
        )


@dataclass(frozen=True)
class MPPDReference:
    """Reference-based MPPD of one attribute (docs/method.md section 7)."""

    reference: str | None  # None only for an empty cohort without a configured reference
    min_pairs: int
    groups: tuple[GroupMPPD, ...]  # every group of the cohort, sorted by name
    disparity: float | None  # max - min of the defined means; None with fewer than two
    #: on a sample: the standard error of ``disparity`` and the (max, min) groups it is
    #: the difference of (None: computed on all records)
    disparity_se: float | None = None
    disparity_between: tuple[str, str] | None = None

    def group(self, name: str) -> GroupMPPD:
        """The entry for one group (``KeyError`` if the cohort has no such group)."""
        for entry in self.groups:
            if entry.group == name:
                return entry
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary: group names, means, pair counts and flags only."""
        return {
            "reference": self.reference,
            "min_pairs": self.min_pairs,
            "disparity": self.disparity,
            **(
                {}
                if self.disparity_between is None
                else {
                    "disparity_se": self.disparity_se,
                    "disparity_between": list(self.disparity_between),
                }
            ),
            "groups": [entry.to_dict() for entry in self.groups],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MPPDReference:
        """The inverse of :meth:`to_dict`."""
        ref = d.get("reference")
        return cls(
            reference=None if ref is None else str(ref),
            min_pairs=int(d["min_pairs"]),
            groups=tuple(GroupMPPD.from_dict(g) for g in d.get("groups") or ()),
            disparity=d.get("disparity"),
            disparity_se=d.get("disparity_se"),
            disparity_between=(
                None if d.get("disparity_between") is None
                else (str(d["disparity_between"][0]), str(d["disparity_between"][1]))
            ),
        )  # fmt: skip


@dataclass(frozen=True)
class MPPDPairwise:
    """Pairwise MPPD: row = anchor group, column = matched group (docs/method.md section 7)."""

    groups: tuple[str, ...]  # sorted group names; row and column order
    min_pairs: int
    means: tuple[tuple[float | None, ...], ...]
    pairs: tuple[tuple[int | str, ...], ...]  # SMALL_CELL_LABEL where withheld
    low_support: tuple[tuple[bool, ...], ...]

    def cell(self, anchor: str, matched: str) -> tuple[float | None, int | str, bool]:
        """``(mean, pairs, low_support)`` of one (anchor, matched) cell."""
        a, b = self.groups.index(anchor), self.groups.index(matched)
        return self.means[a][b], self.pairs[a][b], self.low_support[a][b]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary: group names, mean and count matrices, flags."""
        return {
            "groups": list(self.groups),
            "min_pairs": self.min_pairs,
            "means": [list(row) for row in self.means],
            "pairs": [list(row) for row in self.pairs],
            "low_support": [list(row) for row in self.low_support],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MPPDPairwise:
        """The inverse of :meth:`to_dict`."""
        return cls(
            groups=tuple(str(g) for g in d.get("groups") or ()),
            min_pairs=int(d["min_pairs"]),
            means=tuple(tuple(row) for row in d.get("means") or ()),
            pairs=tuple(tuple(row) for row in d.get("pairs") or ()),
            low_support=tuple(tuple(bool(x) for x in row) for row in d.get("low_support") or ()),
        )


def _without_none(d: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """``d`` without those of ``keys`` that are None (fields only a sample fills)."""
    return {k: v for k, v in d.items() if not (k in keys and v is None)}


# --------------------------------------------------------------------------- metrics (fast)


def individual_fairness_gap(
    p: Any, pairs: Pairs, min_pairs: int = DEFAULT_MIN_PAIRS
) -> IndividualFairnessGap:
    """Mean |p_i - p_j| over matched pairs: similar patients should get similar scores."""
    scores = _as_scores(p)
    i, j = _check_pairs(pairs, scores.size)
    count = int(i.size)
    mean = float(np.abs(scores[i] - scores[j]).mean()) if count else None
    return IndividualFairnessGap(mean=mean, pairs=count, low_support=count < min_pairs)


def mppd_reference(
    p: Any,
    groups: Any,
    pairs: Pairs,
    reference: str | None = None,
    min_pairs: int = DEFAULT_MIN_PAIRS,
) -> MPPDReference:
    """Reference-based MPPD, vectorised: contributions of reference records, by matched group.

    For every reference record r and every record j matched to r, |p_r - p_j|
    is credited to the group of j (directed reading: see the module docstring).
    The reference is the largest group unless given; ties go to the first name
    in sorted order, so the choice never depends on record order. A configured
    reference with no record in a non-empty cohort is a ``ValueError`` (most
    likely a wrong group code in the configuration); an empty cohort gives an
    empty result.
    """
    scores = _as_scores(p)
    labels = _as_groups(groups, scores.size)
    i, j = _check_pairs(pairs, scores.size)
    names, codes = np.unique(labels, return_inverse=True)
    if names.size == 0:
        return _empty_reference_result(reference, min_pairs)
    ref = _choose_reference(names, codes, reference)
    ref_code = int(np.searchsorted(names, ref))
    diff = np.abs(scores[i] - scores[j])
    gi, gj = codes[i], codes[j]
    from_i, from_j = gi == ref_code, gj == ref_code
    matched = np.concatenate([gj[from_i], gi[from_j]])
    values = np.concatenate([diff[from_i], diff[from_j]])
    sums = np.bincount(matched, weights=values, minlength=names.size)
    counts = np.bincount(matched, minlength=names.size)
    name_list = [str(x) for x in names]
    return _reference_result(
        ref,
        name_list,
        {g: float(s) for g, s in zip(name_list, sums, strict=True)},
        {g: int(c) for g, c in zip(name_list, counts, strict=True)},
        min_pairs,
    )


def mppd_pairwise(
    p: Any, groups: Any, pairs: Pairs, min_pairs: int = DEFAULT_MIN_PAIRS
) -> MPPDPairwise:
    """Pairwise MPPD, vectorised: every group in turn as the anchor (docs/method.md section 7).

    Cell (G, H) is the mean |p_a - p_b| over directed contributions with the
    anchor a in G and the matched record b in H. Avoids privileging any one
    group as "the fair one", and shows disparities between minority groups.
    """
    scores = _as_scores(p)
    labels = _as_groups(groups, scores.size)
    i, j = _check_pairs(pairs, scores.size)
    names, codes = np.unique(labels, return_inverse=True)
    k = names.size
    diff = np.abs(scores[i] - scores[j])
    gi, gj = codes[i], codes[j]
    cells = np.concatenate([gi * k + gj, gj * k + gi])
    values = np.concatenate([diff, diff])
    sums = np.bincount(cells, weights=values, minlength=k * k)
    counts = np.bincount(cells, minlength=k * k)
    name_list = [str(x) for x in names]
    cell_sums: dict[tuple[str, str], float] = {}
    cell_counts: dict[tuple[str, str], int] = {}
    for x, a in enumerate(name_list):
        for y, b in enumerate(name_list):
            cell_sums[(a, b)] = float(sums[x * k + y])
            cell_counts[(a, b)] = int(counts[x * k + y])
    return _pairwise_result(name_list, cell_sums, cell_counts, min_pairs)


# --------------------------------------------------------------------------- shared finishing


def _reference_result(
    ref: str | None,
    names: Sequence[str],
    sums: dict[str, float],
    counts: dict[str, int],
    min_pairs: int,
) -> MPPDReference:
    """Means, flags, gaps and the headline from per-group sums and counts."""
    means = {g: (sums[g] / counts[g] if counts[g] else None) for g in names}
    ref_mean = means.get(ref) if ref is not None else None
    entries = tuple(
        GroupMPPD(
            group=g,
            mean=means[g],
            pairs=counts[g],
            low_support=counts[g] < min_pairs,
            gap_to_reference=(
                m - ref_mean if (m := means[g]) is not None and ref_mean is not None else None
            ),
        )
        for g in names
    )
    defined = [m for m in means.values() if m is not None]
    disparity = max(defined) - min(defined) if len(defined) >= 2 else None
    return MPPDReference(reference=ref, min_pairs=min_pairs, groups=entries, disparity=disparity)


def _empty_reference_result(reference: str | None, min_pairs: int) -> MPPDReference:
    """An empty cohort has no groups, hence nothing to compare: an empty result, not an error."""
    ref = str(reference) if reference is not None else None
    return MPPDReference(reference=ref, min_pairs=min_pairs, groups=(), disparity=None)


def _pairwise_result(
    names: Sequence[str],
    sums: dict[tuple[str, str], float],
    counts: dict[tuple[str, str], int],
    min_pairs: int,
) -> MPPDPairwise:
    """The three matrices from per-cell sums and counts."""
    count_rows = tuple(tuple(int(counts.get((a, b), 0)) for b in names) for a in names)
    mean_rows = tuple(
        tuple((sums[(a, b)] / c) if (c := count_rows[x][y]) else None for y, b in enumerate(names))
        for x, a in enumerate(names)
    )
    flag_rows = tuple(tuple(c < min_pairs for c in row) for row in count_rows)
    return MPPDPairwise(
        groups=tuple(names),
        min_pairs=min_pairs,
        means=mean_rows,
        pairs=count_rows,
        low_support=flag_rows,
    )


def _choose_reference(names: np.ndarray, codes: np.ndarray, reference: str | None) -> str:
    """The configured reference, or the largest group (ties: first name in sorted order)."""
    if reference is not None:
        ref = str(reference)
        if ref not in set(names.tolist()):
            raise ValueError(f"reference group {ref!r} has no record in this cohort")
        return ref
    sizes = np.bincount(codes, minlength=names.size)
    return str(names[int(np.argmax(sizes))])  # argmax returns the first maximum


def _neighbour_lists(pairs: Pairs, n: int) -> list[list[int]]:
    """Every record's matched records, each unordered pair listed from both ends."""
    i, j = _check_pairs(pairs, n)
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(i.tolist(), j.tolist(), strict=True):
        neighbours[a].append(b)
        neighbours[b].append(a)
    return neighbours


# --------------------------------------------------------------------------- validation


def _as_feature_matrix(X: Any) -> np.ndarray:
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"features must be a 2-D (records x features) array, got {A.ndim}-D")
    if not np.all(np.isfinite(A)):
        raise ValueError("features must be finite; impute or drop missing values first")
    return A


def _as_scores(p: Any) -> np.ndarray:
    scores = np.asarray(p, dtype=np.float64)
    if scores.ndim != 1:
        raise ValueError("scores must be a 1-D array")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    return scores


def _as_groups(groups: Any, n: int) -> np.ndarray:
    """Group labels as strings (result keys are strings, so labels compare as strings)."""
    labels = np.asarray(groups).astype(str)
    if labels.shape != (n,):
        raise ValueError(f"groups must be a 1-D array of {n} labels, got shape {labels.shape}")
    return labels


def _check_pairs(pairs: Pairs, n: int) -> Pairs:
    i = np.asarray(pairs[0])
    j = np.asarray(pairs[1])
    if i.shape != j.shape or i.ndim != 1:
        raise ValueError("pairs must be two 1-D index arrays of equal length")
    if i.size and not (np.issubdtype(i.dtype, np.integer) and np.issubdtype(j.dtype, np.integer)):
        raise ValueError("pair indices must be integers")
    i = i.astype(np.intp, copy=False)
    j = j.astype(np.intp, copy=False)
    if i.size and (min(i.min(), j.min()) < 0 or max(i.max(), j.max()) >= n):
        raise ValueError("pair index out of range")
    if np.any(i == j):
        raise ValueError("a record cannot be matched to itself")
    return i, j


def _check_threshold(threshold: float) -> float:
    t = float(threshold)
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"threshold must be a finite positive cosine distance, got {threshold!r}")
    return t
