"""Axis 2: the minimum reliable audit size N* of every cell, by subsampling count tables.

For one (model, attribute) audit cohort and each size N_i of a grid (only sizes
strictly below the cohort size: a subsample equal to the cohort has no variance,
docs/method.md section 10), draw R simple random subsamples of N_i records *without*
replacement, compute each metric on every subsample, and take
CV_i = sd / |mean| over the R values. N* is the smallest N_i with CV_i below the
cutoff (0.05); none gives N* = inf ("not reached below the cohort size"). A cell
fails Axis 2 when N* > N_field (docs/method.md section 4).

Why counts are enough: every metric is a function of how many subsampled records
fall in each (group, label, decision, score bin) cell of the cohort's
:class:`~monitor.core.counts.CountTable`, and a simple random subsample without
replacement of N_i records has, as its cell counts, exactly a multivariate
hypergeometric draw over the flattened (G, 2, 2, B) counts. numpy's
``multivariate_hypergeometric(method="marginals")`` draws it as a chain of
univariate hypergeometrics: O(R x cells) per size, independent of the cohort
size. (``method="count"`` materialises one item per record and costs O(N_i) per
draw: 100x slower at N_i = 100,000.) Unlike the stratified bootstrap of Axis 1,
the draw here is joint over all cells, so the group and label composition
varies between subsamples as it would in a real audit of N_i records.

The one step that is not exact is the score *sum* of the c records drawn from a
cell that holds n records with score mean mu and (population) variance var: it
is taken as Normal(c mu, c var (n - c) / (n - 1)) -- the exact mean and variance
of a without-replacement sum, with the finite-population correction, which is 0
when c == n -- and clipped to the range the bin allows, [c lo_b, c hi_b]. It
enters calibration metrics only. The record-level oracle
:func:`monitor.reference.axis2.reference_axis2` subsamples records and checks it.

Support rule: a group with fewer than ``min_group_support`` records *in the
subsample* is left out of that draw, so support varies per draw (an (R, G) mask).
Undefined draws (NaN: fewer than two groups left, zero denominators) are left
out of mean and sd and counted (``n_undefined``).

CV guard (see :func:`cv_of_draws`): more than half the R draws undefined, or
fewer than two defined, -> CV = inf (a size at which the value is mostly
undefined cannot be "reliable", however close its few defined draws are);
sd <= 1e-12 (the defined draws agree to float precision) -> CV = 0; otherwise
|mean| < 1e-12 -> CV = inf (a relative precision around 0 cannot be
established); otherwise sd / |mean|.

Random streams: each (model, attribute) table has its own stream derived from
(seed, model_id, attribute) with an extra spawn-key component, so it differs
from Axis 1's stream of the same table and a cell does not depend on which
other tables are in the call. Count draws and score-sum draws use two child
streams, so requesting a calibration metric does not change the other metrics.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from monitor.config import MIN_GROUP_SUPPORT, MetricRule
from monitor.core.axis1 import MAX_UNDEFINED_SHARE, defined_moments
from monitor.core.counts import CountTable
from monitor.core.metrics import (
    METRICS,
    NEEDS_BINS,
    Tallies,
    smallest_denominator,
    tallies_from_table,
)
from monitor.core.numbers import as_float, finite_or_none
from monitor.core.results import Axis2Outcome

#: docs/method.md section 4 size grid.
DEFAULT_SIZES: tuple[int, ...] = (1_000, 2_000, 5_000, 10_000, 25_000, 50_000, 100_000)

#: Spawn-key component that separates Axis 2 streams from Axis 1's ``table_rng``.
AXIS2_STREAM = 2

#: |mean| below this (and sd above it) gives CV = inf; sd below it gives CV = 0.
CV_EPS = 1e-12

#: numpy's "marginals" hypergeometric sampler needs the population below 10**9.
_MAX_POPULATION = 10**9

NOT_REACHED = "not reached below the cohort size"


class CurvePoint(NamedTuple):
    """One size of a cell's CV curve (a plain tuple: size, cv, mean, sd, n_undefined)."""

    size: int
    cv: float  # inf when not computable (see module docstring)
    mean: float  # NaN when no draw is defined
    sd: float  # NaN when fewer than two draws are defined
    n_undefined: int

    def to_dict(self) -> dict[str, Any]:
        """Strict JSON: an infinite cv and an undefined mean or sd are ``None`` (cv is never
        NaN and mean/sd are never infinite, so ``None`` is unambiguous per field)."""
        return {
            "size": self.size,
            "cv": finite_or_none(self.cv),
            "mean": finite_or_none(self.mean),
            "sd": finite_or_none(self.sd),
            "n_undefined": self.n_undefined,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CurvePoint:
        """The inverse of :meth:`to_dict` (cv None -> inf; mean, sd None -> NaN)."""
        cv = d.get("cv")
        return cls(
            int(d["size"]),
            math.inf if cv is None else float(cv),
            as_float(d.get("mean")),
            as_float(d.get("sd")),
            int(d.get("n_undefined", 0)),
        )


#: Beyond this many days a verdict is "not within a year" (docs/decisions.md
#: "Intersectional cells": time to a reliable verdict).
YEAR_DAYS = 365.0


@dataclass(frozen=True)
class TimeToReliable:
    """How long this volume needs to reach N*, for a cell whose N* is not reached.

    ``records_needed``: the cohort size at which the CV would fall below the cutoff,
    extrapolated from the cell's CV curve (:func:`records_for_cutoff`); ``group_needed``:
    the records its smallest evaluated group (smallest rate denominator) would hold then;
    ``days``: how long that group takes to arrive at its rate over the cohort's days. All
    None with a ``text`` saying why when no estimate is possible.
    """

    records_needed: int | None
    group_needed: int | None
    days: float | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "records_needed": self.records_needed,
            "group_needed": self.group_needed,
            "days": self.days,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TimeToReliable:
        days = d.get("days")
        return cls(
            d.get("records_needed"), d.get("group_needed"),
            None if days is None else float(days), str(d.get("text") or ""),
        )  # fmt: skip


@dataclass(frozen=True)
class Axis2Cell:
    """Everything Axis 2 says about one (model, metric, attribute) cell."""

    model_id: str
    metric: str
    attribute: str
    cohort_n: int
    n_star: float  # smallest size with CV < cutoff; math.inf when not reached
    reached: bool
    fails: bool  # n_star > n_field
    curve: tuple[CurvePoint, ...]
    #: N* not reached: how long at this volume (None: reached, or not computed)
    to_reliable: TimeToReliable | None = None

    @property
    def n_star_text(self) -> str:
        """N* for people: the size, or "not reached below the cohort size"."""
        return str(int(self.n_star)) if self.reached else NOT_REACHED

    def outcome(self) -> Axis2Outcome:
        """What this result says of its cell, as the cell carries it (its tier reads N*)."""
        t = self.to_reliable
        return Axis2Outcome(
            self.n_star, "" if t is None else t.text, None if t is None else t.records_needed
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (strict JSON: no NaN or Infinity tokens).

        ``n_star`` and a curve point's ``cv`` are ``None`` when infinite (``reached``
        says which; ``n_star_text`` spells it out); ``mean`` and ``sd`` are ``None``
        when undefined (too few defined draws). cv is never NaN and mean/sd are
        never infinite, so ``None`` is unambiguous per field.
        """
        return {
            "model_id": self.model_id,
            "metric": self.metric,
            "attribute": self.attribute,
            "cohort_n": self.cohort_n,
            "n_star": int(self.n_star) if self.reached else None,
            "n_star_text": self.n_star_text,
            "reached": self.reached,
            "fails": self.fails,
            "curve": [p.to_dict() for p in self.curve],
            "to_reliable": None if self.to_reliable is None else self.to_reliable.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Axis2Cell:
        """The inverse of :meth:`to_dict` (``n_star`` None -> inf); ``n_star_text`` is
        derived, so it is not read."""
        n_star = d.get("n_star")
        return cls(
            model_id=str(d["model_id"]),
            metric=str(d["metric"]),
            attribute=str(d["attribute"]),
            cohort_n=int(d["cohort_n"]),
            n_star=math.inf if n_star is None else float(n_star),
            reached=bool(d.get("reached", n_star is not None)),
            fails=bool(d["fails"]),
            curve=tuple(CurvePoint.from_dict(p) for p in d.get("curve") or ()),
            to_reliable=(
                TimeToReliable.from_dict(d["to_reliable"]) if d.get("to_reliable") else None
            ),
        )


# ----------------------------------------------------------------------------- streams
def axis2_rngs(
    seed: int, model_id: str, attribute: str
) -> tuple[np.random.Generator, np.random.Generator]:
    """The (count, score) random streams of one (model, attribute) table for Axis 2.

    Same derivation as Axis 1's ``table_rng`` (crc32 of the names as spawn key)
    with a leading :data:`AXIS2_STREAM` component, so the streams differ from
    Axis 1's and from each other, and are stable across runs and grids.
    """
    key = (AXIS2_STREAM, zlib.crc32(model_id.encode()), zlib.crc32(attribute.encode()))
    counts_ss, scores_ss = np.random.SeedSequence(seed, spawn_key=key).spawn(2)
    return np.random.default_rng(counts_ss), np.random.default_rng(scores_ss)


# ----------------------------------------------------------------------------- draws
def audit_sizes(cohort_n: int, sizes: Sequence[int]) -> np.ndarray:
    """The grid sizes that are evaluated: positive and strictly below the cohort size.

    >>> audit_sizes(5_000, (1_000, 2_000, 5_000, 10_000)).tolist()
    [1000, 2000]
    """
    s = np.unique(np.asarray(sizes, dtype=np.int64))
    return s[(s > 0) & (s < cohort_n)]


def hypergeometric_counts(
    counts: np.ndarray, size: int, R: int, rng: np.random.Generator
) -> np.ndarray:
    """R without-replacement subsamples of ``size`` records: cell counts (R, *counts.shape).

    Empty cells are dropped before drawing (the "marginals" sampler walks every
    category) and put back as zeros.
    """
    flat = np.asarray(counts, dtype=np.int64).reshape(-1)
    total = int(flat.sum())
    if not 0 <= size <= total:
        raise ValueError(f"subsample size {size} outside [0, {total}]")
    if total >= _MAX_POPULATION:
        raise ValueError("cohort too large for the hypergeometric sampler (>= 10**9 records)")
    out = np.zeros((R, flat.size), dtype=np.int64)
    nz = np.flatnonzero(flat)
    if nz.size:
        out[:, nz] = rng.multivariate_hypergeometric(flat[nz], size, size=R, method="marginals")
    return out.reshape((R, *np.shape(counts)))


def subsample_score_sums(
    drawn: np.ndarray,
    counts: np.ndarray,
    score_sum: np.ndarray,
    score_sq: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Score sums per (group, bin) of subsamples with cell counts ``drawn`` (..., G, 2, 2, B).

    Each (group, label, decision, bin) cell holding n records (score mean mu,
    population variance var) of which c are drawn contributes mean c mu and
    variance c var (n - c) / (n - 1) (sampling without replacement; 0 at c == n).
    Cells are independent given the counts, so means and variances add over
    label and decision; the (group, bin) sum is one normal draw, clipped to the
    bin's range [c lo_b, c hi_b]. Returns (..., G, B).
    """
    n = np.asarray(counts, dtype=np.float64)
    mu = np.divide(score_sum, n, out=np.zeros(n.shape), where=n > 0)
    var = np.maximum(np.divide(score_sq, n, out=np.zeros(n.shape), where=n > 0) - mu * mu, 0.0)
    c = drawn.astype(np.float64)
    fpc = np.divide(n - c, n - 1.0, out=np.zeros(c.shape), where=n > 1)
    mean = (c * mu).sum(axis=(-3, -2))  # over label and decision -> (..., G, B)
    variance = (c * var * fpc).sum(axis=(-3, -2))
    sums = mean + np.sqrt(variance) * rng.standard_normal(mean.shape)
    B = n.shape[-1]
    edges = np.arange(B + 1, dtype=np.float64) / B
    total = c.sum(axis=(-3, -2))
    return np.clip(sums, total * edges[:-1], total * edges[1:])


def subsample_tallies(
    table: CountTable,
    sizes: np.ndarray,
    R: int,
    rngs: tuple[np.random.Generator, np.random.Generator],
    with_bins: bool,
    min_group_support: int,
) -> tuple[Tallies, np.ndarray]:
    """Tallies of R subsamples per size, leading axes (S, R), and the (S, R, G) support mask.

    Sizes are drawn in increasing order from one stream, so adding a larger size
    to the grid (a growing cohort) leaves the draws of the smaller sizes unchanged.
    """
    counts_rng, scores_rng = rngs
    G, _, _, B = table.counts.shape
    S = len(sizes)
    drawn = np.empty((S, R, G, 2, 2, B), dtype=np.int64)
    for i, size in enumerate(sizes):
        drawn[i] = hypergeometric_counts(table.counts, int(size), R, counts_rng)
    confusion = drawn.sum(axis=-1).astype(np.float64)  # (S, R, G, 2, 2)
    support = confusion.sum(axis=(-1, -2)) >= min_group_support  # (S, R, G)
    bins: dict[str, np.ndarray] = {}
    if with_bins:
        bins["bin_n"] = drawn.sum(axis=-2).astype(np.float64)  # (S, R, G, 2, B)
        bins["bin_score"] = subsample_score_sums(
            drawn, table.counts, table.score_sum, table.score_sq, scores_rng
        )
    return Tallies.from_confusion(confusion, **bins), support


# ----------------------------------------------------------------------------- summaries
def cv_of_draws(values: np.ndarray) -> dict[str, np.ndarray]:
    """mean, sd (ddof 1), CV and undefined count of metric draws along the last axis.

    NaN draws are left out and counted. The CV guard, in order: more than
    MAX_UNDEFINED_SHARE of the draws undefined, or fewer than two defined -> inf;
    sd <= CV_EPS -> 0 (no sampling variability: every
    subsample gives the same value, e.g. SPD = 0 for a model that flags no one);
    |mean| < CV_EPS -> inf (relative precision around 0 cannot be established);
    else sd / |mean|.
    """
    v = np.asarray(values, dtype=np.float64)
    mean, sd, n_def = defined_moments(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = sd / np.abs(mean)
    cv = np.where(sd <= CV_EPS, 0.0, np.where(np.abs(mean) < CV_EPS, np.inf, ratio))
    sparse = v.shape[-1] - n_def > MAX_UNDEFINED_SHARE * v.shape[-1]
    cv = np.where((n_def < 2) | sparse, np.inf, cv)
    return {"mean": mean, "sd": sd, "cv": cv, "n_undefined": v.shape[-1] - n_def}


def minimum_reliable_size(sizes: Sequence[int], cvs: Sequence[float], cv_cutoff: float) -> float:
    """N* = the smallest size whose CV is strictly below the cutoff; inf when none is.

    The first such size counts even if a larger one is above the cutoff again
    (docs/method.md section 4; the whole curve is reported for that reason).

    >>> minimum_reliable_size([1000, 2000, 5000], [0.2, 0.04, 0.06], 0.05)
    2000.0
    >>> minimum_reliable_size([1000], [0.05], 0.05)
    inf
    """
    for size, cv in sorted(zip(sizes, cvs, strict=True)):
        if cv < cv_cutoff:
            return float(size)
    return math.inf


def make_cell(
    model_id: str,
    metric: str,
    attribute: str,
    cohort_n: int,
    sizes: Sequence[int],
    values: np.ndarray,
    cv_cutoff: float,
    n_field: float,
) -> Axis2Cell:
    """The Axis2Cell of one (model, metric, attribute) from its (S, R) metric draws."""
    s = cv_of_draws(values)
    curve = tuple(
        CurvePoint(int(size), float(cv), float(m), float(sd), int(u))
        for size, cv, m, sd, u in zip(
            sizes, s["cv"], s["mean"], s["sd"], s["n_undefined"], strict=True
        )
    )
    n_star = minimum_reliable_size([p.size for p in curve], [p.cv for p in curve], cv_cutoff)
    return Axis2Cell(
        model_id=model_id,
        metric=metric,
        attribute=attribute,
        cohort_n=int(cohort_n),
        n_star=n_star,
        reached=math.isfinite(n_star),
        fails=bool(n_star > n_field),
        curve=curve,
    )


def _rule_names(rules: Sequence[MetricRule | str]) -> list[str]:
    names = [r if isinstance(r, str) else r.name for r in rules]
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}")
    return names


# ----------------------------------------------------------------------------- grid
def axis2(
    tables: Mapping[tuple[str, str], CountTable],
    rules: Sequence[MetricRule | str],
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    R: int = 30,
    cv_cutoff: float = 0.05,
    n_field: float = 50_000,
    min_group_support: int = MIN_GROUP_SUPPORT,
    seed: int = 0,
) -> list[Axis2Cell]:
    """Axis 2 for every (model, attribute) cohort table and every metric rule.

    ``tables`` maps (model_id, attribute) to the audit cohort's count table
    (only the metric names of ``rules`` matter here). Returns one Axis2Cell per
    (model, metric, attribute), ordered by model, metric (rule order), attribute
    (table order) -- the same order as Axis 1.
    """
    if R < 2:
        raise ValueError("R must be at least 2 (a CV needs two draws)")
    names = _rule_names(rules)
    with_bins = any(n in NEEDS_BINS for n in names)
    keys = list(tables)

    draws: list[tuple[Tallies, np.ndarray, np.ndarray]] = []
    for model_id, attribute in keys:
        table = tables[(model_id, attribute)]
        grid = audit_sizes(table.n, sizes)
        rngs = axis2_rngs(seed, model_id, attribute)
        tallies, support = subsample_tallies(table, grid, R, rngs, with_bins, min_group_support)
        draws.append((tallies, support, grid))

    # One metric call per stack of tables with the same attribute shape: their
    # (size, R) draws are concatenated along the size axis (grids may differ).
    stacks: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    for i, (model_id, attribute) in enumerate(keys):
        shape = tables[(model_id, attribute)].counts.shape
        stacks[(attribute, shape[0], shape[3])].append(i)

    cells: dict[tuple[int, str], Axis2Cell] = {}
    for members in stacks.values():
        fields = ["tn", "fp", "fn", "tp"] + (["bin_n", "bin_score"] if with_bins else [])
        stacked = Tallies(
            **{f: np.concatenate([getattr(draws[i][0], f) for i in members]) for f in fields}
        )
        support = np.concatenate([draws[i][1] for i in members])
        bounds = np.cumsum([0] + [len(draws[i][2]) for i in members])
        for name in names:
            values = METRICS[name](stacked, support, min_group_support)  # (sum of S, R)
            for row, i in enumerate(members):
                model_id, attribute = keys[i]
                cells[(i, name)] = make_cell(
                    model_id,
                    name,
                    attribute,
                    tables[keys[i]].n,
                    draws[i][2].tolist(),
                    values[bounds[row] : bounds[row + 1]],
                    cv_cutoff,
                    n_field,
                )
    order = sorted(cells, key=lambda k: (keys[k[0]][0], names.index(k[1]), k[0]))
    return [cells[k] for k in order]


# ----------------------------------------------------------------------------- timing
def records_for_cutoff(curve: Sequence[CurvePoint], cohort_n: int, cv_cutoff: float) -> float:
    """The audit size at which the CV would fall below ``cv_cutoff``: NaN when the curve
    has no finite, positive CV to extrapolate from.

    A subsample of N from a cohort of N_c (without replacement) has CV close to
    c * sqrt(1/N - 1/N_c): the 1/sqrt(N) law of a mean with the finite-population
    correction (the curve of a Diabetes-130 cell follows it: the CV at 50,000 of
    76,250 records is about half the CV at 25,000, not 1/sqrt(2) of it). c is the mean
    of CV_i / sqrt(1/N_i - 1/N_c) over the evaluated sizes of at least half the largest
    one: at smaller sizes groups drop below the support rule, so the metric is over
    other groups and its CV follows another curve. An audit of N records from the
    population has CV c / sqrt(N), so N = (c / cutoff)^2.

    >>> pts = [CurvePoint(1000, 20 * (1/1000 - 1/8000) ** 0.5, 1, 1, 0)]
    >>> round(records_for_cutoff(pts, 8000, 0.05))
    160000
    """
    usable = [p for p in curve if math.isfinite(p.cv) and p.cv > 0 and p.size < cohort_n]
    if not usable:
        return math.nan
    largest = max(p.size for p in usable)
    ratios = [
        p.cv / math.sqrt(1.0 / p.size - 1.0 / cohort_n) for p in usable if 2 * p.size >= largest
    ]
    c = sum(ratios) / len(ratios)
    return (c / cv_cutoff) ** 2


def _about(days: float) -> str:
    if days > YEAR_DAYS:
        return "not within a year"
    if days < 14:
        return f"about {max(1, round(days))} days at this volume"
    return f"about {round(days / 7)} weeks at this volume"


def time_to_reliable(
    cell: Axis2Cell, smallest_group_n: float, cohort_days: float | None, cv_cutoff: float
) -> TimeToReliable:
    """:class:`TimeToReliable` of a cell whose N* is not reached.

    ``smallest_group_n``: the smallest rate denominator among the cell's evaluated groups
    in the cohort (NaN: fewer than two groups evaluated); ``cohort_days``: the span of the
    cohort's event times. The smallest group needs ``records_needed * share`` records
    (share = its records over the cohort's); it arrives at ``smallest_group_n /
    cohort_days`` a day. The days equal records_needed / the cohort's daily volume while
    the composition holds; the smallest group is named because it is the one that has
    to grow.
    """
    needed = records_for_cutoff(cell.curve, cell.cohort_n, cv_cutoff)
    if not math.isfinite(needed):
        return TimeToReliable(None, None, None, "not estimable: no CV below the cohort size")
    if not (math.isfinite(smallest_group_n) and smallest_group_n > 0):
        return TimeToReliable(None, None, None, "not estimable: fewer than two groups evaluated")
    if not cohort_days or cohort_days <= 0:
        return TimeToReliable(None, None, None, "not estimable: the cohort spans no time")
    group_needed = needed * smallest_group_n / cell.cohort_n
    days = group_needed / (smallest_group_n / cohort_days)
    return TimeToReliable(
        _two_figures(needed), _two_figures(group_needed), round(days, 1), _about(days)
    )


def _two_figures(x: float) -> int:
    """An estimate rounded to two significant figures (it is an extrapolation, and the
    smallest group's figure must not be a record count to the unit)."""
    if x < 1:
        return 1
    digits = math.floor(math.log10(x)) - 1
    return int(round(x, -digits)) if digits > 0 else round(x)


def with_time_to_reliable(
    cells: Sequence[Axis2Cell],
    tables: Mapping[tuple[str, str], CountTable],
    cohort_days: Mapping[str, float | None],
    cv_cutoff: float,
    min_group_support: int = MIN_GROUP_SUPPORT,
) -> list[Axis2Cell]:
    """The cells with :attr:`Axis2Cell.to_reliable` set where N* is not reached
    (``cohort_days``: model id -> span of its cohort in days)."""
    out = []
    for cell in cells:
        if cell.reached:
            out.append(cell)
            continue
        table = tables[(cell.model_id, cell.attribute)]
        t = tallies_from_table(table)
        support = table.group_counts() >= min_group_support
        smallest = float(smallest_denominator(cell.metric, t, support, min_group_support))
        est = time_to_reliable(cell, smallest, cohort_days.get(cell.model_id), cv_cutoff)
        out.append(replace(cell, to_reliable=est))
    return out
