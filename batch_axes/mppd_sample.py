"""MPPD on a seeded stratified sample, with its sampling error (target 2 s: docs/decisions.md,
"EquiLense at fleet scale").

Why a sample: matched pairs grow with the square of the cohort wherever records sit
close together (clinical features of small integers do: the demo's 24,000-record
cohort has 4.8 million pairs, 87,500 records 80 million), so the exact computation of
:mod:`batch_axes.mppd` costs hours per model at 1.8 million records. Here MPPD is
estimated on a sample whose cost is bounded by configuration (records and matched
pairs), and every estimate carries its standard error.

Design
    * **Strata**: label x the joint group of every configured attribute, so each
      attribute's groups and both labels keep their share; a stratum smaller than the
      floor is taken whole, the others get the rest in proportion to their size.
    * **Which records**: within a stratum, the records with the smallest keyed hash of
      their record id (SipHash keyed by the seed, :func:`sample_keys`). So the sample is a
      seeded simple random sample per stratum, does not depend on record order, keeps a
      record in it from run to run while its stratum's quota allows, and a smaller
      allocation is a subset of a larger one (nested: :func:`bounded_sample` sizes it
      down without matching twice).
    * **Size**: at most ``max_records``; and if a pilot (the nested first
      :data:`PILOT_RECORDS`) says the sample would have more than ``max_pairs`` matched
      pairs (pairs grow as n^2), fewer records, so that matching and aggregation cost a
      bounded time whatever the cohort size (sizes are counts, never measured seconds:
      the figure must not depend on how busy the machine was, and two owners of a model
      must compute the same figure).
    * **Estimates**: every matched sample pair (i, j) is weighted by the inverse of its
      inclusion probability (``N_h N_k / (n_h n_k)``, within one stratum
      ``N_h (N_h - 1) / (n_h (n_h - 1))``); each mean is a ratio of weighted sums
      (Hajek), consistent for the cohort's exact MPPD.
    * **Error**: a mean over pairs is a ratio of two U-statistics of order 2. Its
      linearisation (Hajek projection) gives each sampled record an influence value
      (the weighted sum of its pairs' deviations from the mean), and the stratified
      variance of a sample total of those values, with each stratum's finite-population
      correction, is the variance of the estimate (a stratum taken whole adds none).
      One pass over the pairs; no resampling, no second matching. The same influence
      values give the error of differences (gap to the reference, max - min).

Pure computation: arrays in, arrays and small dataclasses out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from batch_axes.mppd import (
    GroupMPPD,
    IndividualFairnessGap,
    MPPDPairwise,
    MPPDReference,
    Pairs,
    _pairwise_result,
    matched_pairs,
)

#: Records of the pilot that estimates how many pairs a sample would have.
PILOT_RECORDS = 2_000

#: z of the two-sided 95 % interval that ``±`` denotes wherever an error is shown.
Z95 = 1.959963984540054


# --------------------------------------------------------------------------- sampling


@dataclass(frozen=True)
class StratifiedSample:
    """Which cohort records are in the sample, and what each stands for.

    ``rows`` are indices into the cohort (increasing); ``stratum`` the stratum of each
    sampled record; ``N`` and ``n`` the cohort and sample sizes per stratum.
    """

    rows: np.ndarray
    stratum: np.ndarray
    N: np.ndarray
    n: np.ndarray

    @property
    def size(self) -> int:
        return int(self.rows.size)

    @property
    def cohort_size(self) -> int:
        return int(self.N.sum())

    @property
    def weights(self) -> np.ndarray:
        """N_h / n_h of each sampled record."""
        return (self.N / np.maximum(self.n, 1))[self.stratum]

    @property
    def is_census(self) -> bool:
        return bool(np.array_equal(self.N, self.n))


def strata_codes(labels: Any, groupings: Sequence[Any]) -> np.ndarray:
    """One stratum code per record: label x the joint group of every attribute
    (``groupings``: one array of group labels or codes per attribute)."""
    code = pd.factorize(np.asarray(labels), sort=True)[0].astype(np.int64)
    for g in groupings:
        c, names = pd.factorize(np.asarray(g), sort=True)
        code = code * max(len(names), 1) + c
    return pd.factorize(code, sort=True)[0].astype(np.int64)


def sample_keys(record_ids: Any, seed: int) -> np.ndarray:
    """A keyed 64-bit hash of each record id (SipHash, key from ``seed``): its rank in
    its stratum decides whether it is sampled."""
    ids = np.asarray(record_ids, dtype=object)
    if ids.size and not all(isinstance(x, str) for x in ids[:1]):
        ids = ids.astype(str).astype(object)
    return pd.util.hash_array(ids, hash_key=f"{int(seed) % 10**16:016d}", categorize=False)


def allocate(N: np.ndarray, target: int, floor: int) -> np.ndarray:
    """Records per stratum: a stratum of at most ``floor`` records whole, at least
    ``floor`` from every other, beyond that in proportion to size (D'Hondt:
    ``n_h = floor(N_h / d)`` for the smallest divisor ``d`` that keeps the total within
    ``target``); never more than ``N``.

    Why a divisor method: its allocations are nested (a larger target never takes a
    record from a stratum), so the sample of a smaller target is a subset of a larger
    one's and :func:`bounded_sample` can size a sample down without matching again.
    The floors are always taken, so the total exceeds ``target`` only when the floors
    alone do.
    """
    N = np.asarray(N, dtype=np.int64)
    if target >= N.sum():
        return N.copy()
    base = np.minimum(N, floor)

    def total(d: float) -> np.ndarray:
        return np.minimum(N, np.maximum(base, np.floor(N / d).astype(np.int64)))

    lo, hi = 1e-9, float(max(int(N.max()), 1)) * 2  # total(hi) = floors <= ..., total(lo) = N
    if total(hi).sum() > target:
        return total(hi)
    for _ in range(200):  # bisection on the divisor: total is non-increasing in d
        mid = (lo + hi) / 2
        if total(mid).sum() <= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= hi * 1e-15:
            break
    return total(hi)


@dataclass(frozen=True)
class StrataRanks:
    """Each record's stratum and its rank by key within it (one sort, many samples)."""

    strata: np.ndarray
    rank: np.ndarray
    N: np.ndarray


def strata_ranks(strata: np.ndarray, keys: np.ndarray) -> StrataRanks:
    """Rank of every record's key within its stratum (0 = smallest)."""
    strata = np.asarray(strata, dtype=np.int64)
    H = int(strata.max()) + 1 if strata.size else 0
    N = np.bincount(strata, minlength=H).astype(np.int64)
    # by stratum, then key: one sort of stratum bits over the key's leading bits (keys
    # equal in those bits are ~N^2 / 2^(64 - b) apart: none in practice, and stable anyway)
    b = max(1, int(H - 1).bit_length())
    combined = (strata.astype(np.uint64) << np.uint64(64 - b)) | (
        np.asarray(keys, dtype=np.uint64) >> np.uint64(b)
    )
    order = np.argsort(combined, kind="stable")
    starts = np.concatenate([[0], np.cumsum(N)[:-1]]) if H else np.zeros(0, np.int64)
    rank = np.empty(strata.size, dtype=np.int64)
    rank[order] = np.arange(strata.size) - np.repeat(starts, N)
    return StrataRanks(strata, rank, N)


def sample_from_ranks(r: StrataRanks, target: int, floor: int) -> StratifiedSample:
    """The ``allocate`` quota of each stratum, filled with its smallest keys."""
    n = allocate(r.N, target, floor)
    rows = np.flatnonzero(r.rank < n[r.strata])
    return StratifiedSample(rows=rows, stratum=r.strata[rows], N=r.N, n=n)


def stratified_sample(
    strata: np.ndarray, keys: np.ndarray, target: int, floor: int
) -> StratifiedSample:
    """The ``allocate`` quota of each stratum, filled with its smallest keys."""
    return sample_from_ranks(strata_ranks(strata, keys), target, floor)


@dataclass(frozen=True)
class BoundedSample:
    """A sample and its matched pairs (indices into the sample)."""

    sample: StratifiedSample
    pairs: Pairs


def bounded_sample(
    X: np.ndarray,
    strata: np.ndarray,
    keys: np.ndarray,
    *,
    threshold: float,
    max_records: int,
    max_pairs: int,
    floor: int,
) -> BoundedSample:
    """The largest nested sample of at most ``max_records`` records whose matched pairs
    a pilot puts at most ``max_pairs``, and its pairs (``X`` already scaled on the
    cohort).

    With the whole cohort under both bounds, the sample is the cohort (a census: exact
    figures, zero error).
    """
    N = int(strata.size)
    ranks = strata_ranks(strata, keys)
    target = min(N, int(max_records))
    pilot_n = min(target, PILOT_RECORDS)
    pilot = sample_from_ranks(ranks, pilot_n, floor)
    if pilot.size >= 2 and target > pilot.size:
        got = matched_pairs(X[pilot.rows], threshold)[0].size
        m = pilot.size
        expected = got * target * (target - 1) / (m * (m - 1))
        if expected > max_pairs:
            # pairs grow as n^2: n = m sqrt(max_pairs / got) (never below the pilot)
            target = max(m, int(m * np.sqrt(max_pairs / max(got, 1))))
    sample = sample_from_ranks(ranks, target, floor)
    pairs = matched_pairs(X[sample.rows], threshold)
    if pairs[0].size > max_pairs and sample.size > 2:
        # the pilot was optimistic: shrink to a nested subsample, keep its pairs
        smaller = sample_from_ranks(
            ranks, int(sample.size * np.sqrt(max_pairs / pairs[0].size)), floor
        )
        pos = np.full(N, -1, dtype=np.intp)
        pos[smaller.rows] = np.arange(smaller.size)
        i, j = pos[sample.rows[pairs[0]]], pos[sample.rows[pairs[1]]]
        keep = (i >= 0) & (j >= 0)
        sample, pairs = smaller, (i[keep], j[keep])
    return BoundedSample(sample, pairs)


# --------------------------------------------------------------------------- estimates


def pair_weights(sample: StratifiedSample, pairs: Pairs) -> np.ndarray:
    """1 / P(both records of the pair sampled), for every matched sample pair."""
    i, j = pairs
    hi, hj = sample.stratum[i], sample.stratum[j]
    w = sample.weights
    out = w[i] * w[j]
    same = hi == hj
    N, n = sample.N[hi[same]].astype(float), sample.n[hi[same]].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.where(n > 1, N * (N - 1) / (n * (n - 1)), 1.0)
    out[same] = exact
    return out


@dataclass(frozen=True)
class CellEstimates:
    """Weighted means over directed contributions, by cell, with what their errors need.

    ``mean[c]``, ``pairs[c]`` (sample contributions), ``weight[c]`` (estimated cohort
    contributions), ``z`` (sample records x cells): each record's linearised influence
    on ``weight[c] * (estimate - truth)``.
    """

    mean: np.ndarray
    pairs: np.ndarray
    weight: np.ndarray
    z: np.ndarray


def cell_estimates(
    sample: StratifiedSample,
    pairs: Pairs,
    values: np.ndarray,
    wij: np.ndarray,
    anchor_cells: np.ndarray,
    reverse_cells: np.ndarray,
    cells: int,
) -> CellEstimates:
    """Means of ``values`` per cell over the directed contributions of the pairs.

    Pair (i, j) gives the contribution (anchor i -> j) to cell ``anchor_cells`` and
    (anchor j -> i) to ``reverse_cells`` (-1: no cell), both with value ``values`` and
    weight ``wij``.
    """
    i, j = pairs
    cell = np.concatenate([anchor_cells, reverse_cells])
    a = np.concatenate([i, j])
    b = np.concatenate([j, i])
    v = np.concatenate([values, values])
    w = np.concatenate([wij, wij])
    use = cell >= 0
    cell, a, b, v, w = cell[use], a[use], b[use], v[use], w[use]
    sums = np.bincount(cell, weights=w * v, minlength=cells)
    weight = np.bincount(cell, weights=w, minlength=cells)
    count = np.bincount(cell, minlength=cells)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(count > 0, sums / np.where(weight > 0, weight, 1.0), np.nan)
    # influence of record r: sum over its contributions (either end) of w (v - mean),
    # scaled by 1 / w_r, times w_r again for the HT total: z_r = sum w (v - mean)
    e = w * (v - np.nan_to_num(mean)[cell])
    m = sample.size
    z = np.bincount(a * cells + cell, weights=e, minlength=m * cells)
    z += np.bincount(b * cells + cell, weights=e, minlength=m * cells)
    return CellEstimates(mean, count, weight, z.reshape(m, cells))


def stratified_variance(sample: StratifiedSample, z: np.ndarray) -> np.ndarray:
    """Variance of the sample total of ``z`` (records x columns) under stratified simple
    random sampling, with each stratum's finite-population correction."""
    if z.ndim == 1:
        z = z[:, None]
    H = sample.N.size
    h = sample.stratum
    n = sample.n.astype(float)
    f = np.where(sample.N > 0, n / np.maximum(sample.N, 1), 1.0)
    total = np.zeros((H, z.shape[1]))
    np.add.at(total, h, z)
    mean = total / np.maximum(n, 1)[:, None]
    dev = z - mean[h]
    ss = np.zeros((H, z.shape[1]))
    np.add.at(ss, h, dev * dev)
    factor = np.where(n > 1, (1 - f) * n / np.maximum(n - 1, 1), 0.0)
    return (factor[:, None] * ss).sum(axis=0)


def ratio_se(sample: StratifiedSample, z: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Standard error of each cell's mean from its influence column."""
    var = stratified_variance(sample, z)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(weight > 0, np.sqrt(var) / np.where(weight > 0, weight, 1.0), np.nan)


def difference_se(sample: StratifiedSample, est: CellEstimates, a: int, b: int) -> float | None:
    """Standard error of ``mean[a] - mean[b]`` (both defined), covariance included."""
    if not (est.weight[a] > 0 and est.weight[b] > 0):
        return None
    z = est.z[:, a] / est.weight[a] - est.z[:, b] / est.weight[b]
    return float(np.sqrt(stratified_variance(sample, z)[0]))


@dataclass(frozen=True)
class MPPDSampling:
    """How a model's MPPD was computed: on all its records, or on a stratified sample.

    ``records`` are the records MPPD used, ``cohort_records`` the model's cohort (with
    usable features); ``± `` in any text is :data:`Z95` standard errors.
    """

    method: str  # "all records" | "stratified sample"
    records: int | str
    cohort_records: int | str
    seed: int
    strata: int
    max_records: int
    max_pairs: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MPPDSampling:
        return cls(
            method=str(d["method"]),
            records=d["records"],
            cohort_records=d["cohort_records"],
            seed=int(d["seed"]),
            strata=int(d["strata"]),
            max_records=int(d["max_records"]),
            max_pairs=int(d["max_pairs"]),
        )

    @property
    def sampled(self) -> bool:
        return self.method == "stratified sample"


# --------------------------------------------------------------------------- MPPD on a sample


def sampled_gap(
    sample: StratifiedSample, pairs: Pairs, wij: np.ndarray, p: np.ndarray, min_pairs: int
) -> IndividualFairnessGap:
    """The individual-fairness gap (mean |p_i - p_j| over unordered matched pairs),
    weighted, with its standard error (``p``: scores of the sampled records)."""
    i, j = pairs
    est = cell_estimates(
        sample, pairs, np.abs(p[i] - p[j]), wij, np.zeros(i.size, np.int64),
        np.full(i.size, -1, np.int64), 1,
    )  # fmt: skip
    count = int(est.pairs[0])
    if not count:
        return IndividualFairnessGap(None, 0, True)
    se = float(ratio_se(sample, est.z, est.weight)[0])
    return IndividualFairnessGap(float(est.mean[0]), count, count < min_pairs, se=se)


@dataclass(frozen=True)
class SampledAttribute:
    """One attribute's MPPD on a sample, and the estimates its errors come from."""

    reference: MPPDReference
    pairwise: MPPDPairwise
    names: tuple[str, ...]
    estimates: CellEstimates


def sampled_attribute(
    sample: StratifiedSample,
    pairs: Pairs,
    wij: np.ndarray,
    p: np.ndarray,
    codes: np.ndarray,
    reference: str,
    min_pairs: int,
) -> SampledAttribute:
    """Reference-based and pairwise MPPD of one attribute on a sample (directed reading
    of :mod:`batch_axes.mppd`), each reference entry with its error and its gap's.

    ``reference`` is chosen on the cohort by the caller (the largest group of the
    cohort, not of the sample); ``codes`` and ``p`` are of the sampled records.
    """
    i, j = pairs
    names, g = np.unique(np.asarray(codes).astype(str), return_inverse=True)
    k = int(names.size)
    est = cell_estimates(
        sample, pairs, np.abs(p[i] - p[j]), wij, g[i] * k + g[j], g[j] * k + g[i], k * k
    )
    se = ratio_se(sample, est.z, est.weight)
    name_list = [str(x) for x in names]
    mean = [None if est.pairs[c] == 0 else float(est.mean[c]) for c in range(k * k)]
    count = [int(c) for c in est.pairs]
    cell_sums = {(a, b): (mean[x * k + y] or 0.0) * count[x * k + y]
                 for x, a in enumerate(name_list) for y, b in enumerate(name_list)}  # fmt: skip
    cell_counts = {(a, b): count[x * k + y]
                   for x, a in enumerate(name_list) for y, b in enumerate(name_list)}  # fmt: skip
    pw = _pairwise_result(name_list, cell_sums, cell_counts, min_pairs)
    # exact means (a sum over a count would round differently from the estimate)
    pw = replace(pw, means=tuple(
        tuple(mean[x * k + y] for y in range(k)) for x in range(k)
    ))  # fmt: skip
    r = name_list.index(reference)
    rr = r * k + r
    entries = []
    for y, name in enumerate(name_list):
        c = r * k + y
        m, ref_m = mean[c], mean[rr]
        gap = None if m is None or ref_m is None else m - ref_m
        entries.append(
            GroupMPPD(
                group=name, mean=m, pairs=count[c], low_support=count[c] < min_pairs,
                gap_to_reference=gap,
                se=None if m is None else float(se[c]),
                gap_se=(
                    None if gap is None else 0.0 if c == rr
                    else difference_se(sample, est, c, rr)
                ),
            )
        )  # fmt: skip
    ref = MPPDReference(reference, min_pairs, tuple(entries), None)
    return SampledAttribute(ref, pw, tuple(name_list), est)


def with_disparity_error(
    ref: MPPDReference, attr: SampledAttribute, sample: StratifiedSample
) -> MPPDReference:
    """``ref`` (after the small-cell rule) with the error of its disparity: max - min of
    the means it shows, as the difference of those two groups' estimates."""
    shown = [g for g in ref.groups if g.mean is not None]
    if len(shown) < 2:
        return replace(ref, disparity_se=None, disparity_between=None)
    hi = max(shown, key=lambda g: g.mean)  # type: ignore[arg-type, return-value]  # shown: has a mean
    lo = min(shown, key=lambda g: g.mean)  # type: ignore[arg-type, return-value]  # shown: has a mean
    k = len(attr.names)
    r = attr.names.index(str(ref.reference))
    a = r * k + attr.names.index(hi.group)
    b = r * k + attr.names.index(lo.group)
    se = difference_se(sample, attr.estimates, a, b)
    return replace(ref, disparity_se=se, disparity_between=(hi.group, lo.group))
