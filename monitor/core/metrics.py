"""The fairness metrics of docs/method.md section 2 as plain functions of count tallies.

Every function takes a :class:`Tallies` whose arrays may carry any number of
leading axes (bootstrap replicates, models, ...), a boolean ``support`` mask
over groups (groups the caller leaves out) and ``min_support``, and returns an
array of the leading shape. Undefined values (fewer than two groups left) are
NaN. An undefined value is not a verdict (docs/method.md section 2, revised
2026-12-01): :func:`passes` is False there and :func:`defined` tells the callers
which values to leave out; :func:`denominator_shortfall` says what an undefined
value would need.

Support is judged on the records a rate is computed from (a departure from the
papers, see docs/decisions.md): a group's rate enters a metric only when its
*denominator* has at least ``min_support`` records: positives for TPR,
negatives for FPR, flagged records for PPV, records for selection rate, Theil
and calibration. The method's "no positives: left out" rule is the special case
``min_support = 1``. :func:`smallest_denominator` reports the weakest rate that
entered a value.

Layout of a tally (G = groups of the attribute, B = score bins):

* ``tn fp fn tp`` (..., G): records per group in each (label, decision) cell.
* ``bin_n``     (..., G, 2, B): records per group, label y, score bin.
* ``bin_score`` (..., G, B):    sum of scores per group and score bin.

Example:
    >>> import numpy as np
    >>> n = np.array([[[40, 10], [10, 40]], [[45, 5], [20, 30]]], dtype=float)
    >>> t = Tallies.from_confusion(n)
    >>> float(disparate_impact(t, np.array([True, True])))
    0.7
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numba
import numpy as np

from monitor.core.counts import CountTable
from monitor.core.method import SMALL_CELL_RECORDS

#: Tolerance for pass rules at the threshold: values within 1e-12 of it count as
#: on it. Why: the same rational value computed along two float paths (counts vs
#: records) may differ in the last bit, and a verdict must not depend on that.
VERDICT_EPS = 1e-12


@dataclass(frozen=True)
class Tallies:
    """Count-level sufficient statistics of one or many (resampled) audits.

    The four (label, decision) cells are kept as separate (..., G) arrays rather
    than one (..., G, 2, 2) array. Why: the bootstrap evaluates them millions of
    times, and elementwise arithmetic on contiguous arrays is several times
    faster than reductions over length-2 axes or strided slices.
    """

    tn: np.ndarray  # label 0, decision 0
    fp: np.ndarray  # label 0, decision 1
    fn: np.ndarray  # label 1, decision 0
    tp: np.ndarray  # label 1, decision 1
    bin_n: np.ndarray | None = None
    bin_score: np.ndarray | None = None

    @classmethod
    def from_confusion(cls, n: np.ndarray, **bins: np.ndarray | None) -> Tallies:
        """From an array (..., G, 2 labels, 2 decisions)."""
        n = np.asarray(n, dtype=np.float64)
        return cls(
            tn=np.ascontiguousarray(n[..., 0, 0]),
            fp=np.ascontiguousarray(n[..., 0, 1]),
            fn=np.ascontiguousarray(n[..., 1, 0]),
            tp=np.ascontiguousarray(n[..., 1, 1]),
            **bins,
        )

    @cached_property
    def group_size(self) -> np.ndarray:
        out: np.ndarray = (self.tn + self.fp) + (self.fn + self.tp)
        return out


def tallies_from_table(table: CountTable) -> Tallies:
    """The point-estimate tallies of a whole count table."""
    counts = table.counts.astype(np.float64)
    return Tallies.from_confusion(
        counts.sum(axis=-1),
        bin_n=counts.sum(axis=2),
        bin_score=table.score_sum.sum(axis=(1, 2)),
    )


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.full(np.broadcast_shapes(num.shape, den.shape), np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _extremes(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) over the valid groups (last axis); NaN where fewer than two are valid."""
    values, valid = np.broadcast_arrays(values, valid)
    shape, G = values.shape[:-1], values.shape[-1]
    if values.dtype == np.float64 and valid.dtype == np.bool_ and values.size > 0:
        lo, hi = np.empty(shape), np.empty(shape)
        rows = (-1, G)
        if _extremes_kernel(values.reshape(rows), valid.reshape(rows), lo.reshape(-1),
                            hi.reshape(-1)):  # fmt: skip
            return lo, hi
    return _numpy_extremes(values, valid)


@numba.njit(cache=True, nogil=True)
def _extremes_kernel(values: np.ndarray, valid: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """:func:`_numpy_extremes` of (R, G) values into lo and hi (R,), in one pass; False
    (lo and hi unfinished) where numpy's own rules could give other bits: a valid NaN, or
    valid zeros of both signs in one row (a tie whose sign np.minimum decides).

    Why compiled: per group, numpy's masked minimum and maximum over (cells x K) arrays
    and, on the point estimates' few numbers, the calls themselves cost ~3 ms of Python an
    evaluation of the bench grid (``bench axis1``). The figures are the same to the bit:
    the minimum and maximum of numbers without NaN are one of them, and equal numbers
    have the same bits unless they are zeros of both signs, which are left to numpy.
    """
    R, G = values.shape
    for r in range(R):
        a, b = np.inf, -np.inf
        count = 0
        pos_zero = neg_zero = False
        for g in range(G):
            if valid[r, g]:
                v = values[r, g]
                if v != v:
                    return False
                if v == 0.0:
                    if math.copysign(1.0, v) < 0:
                        neg_zero = True
                    else:
                        pos_zero = True
                a = min(a, v)
                b = max(b, v)
                count += 1
        if pos_zero and neg_zero:
            return False
        lo[r] = a if count >= 2 else np.nan
        hi[r] = b if count >= 2 else np.nan
    return True


def _numpy_extremes(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_extremes` in numpy (the definition; what the kernel falls back to)."""
    values, valid = np.broadcast_arrays(values, valid)
    # A loop over the (few) groups: elementwise min/max on (...) arrays is much
    # faster than a numpy reduction over a short last axis.
    lo = np.full(values.shape[:-1], np.inf)
    hi = np.full(values.shape[:-1], -np.inf)
    count = np.zeros(values.shape[:-1], dtype=np.int64)
    for g in range(values.shape[-1]):
        v, ok = values[..., g], valid[..., g]
        np.minimum(lo, v, out=lo, where=ok)
        np.maximum(hi, v, out=hi, where=ok)
        count += ok
    defined = count >= 2
    return np.where(defined, lo, np.nan), np.where(defined, hi, np.nan)


def _count_total(counts: np.ndarray) -> np.ndarray:
    """``counts.sum(axis=-1)`` of counts (integer-valued floats) or flags, column by column.

    Why: numpy's reduction over a short last axis (the groups) costs ~70 us on a stack's
    (cells x K x G) tallies, a few column additions a tenth of that. The same to the bit:
    sums of integers (below 2**53) are exact in any order; flags count as int64, as
    numpy's sum of booleans does."""
    G = counts.shape[-1]
    dtype = np.int64 if counts.dtype == np.bool_ else counts.dtype
    if G == 0:
        return np.zeros(counts.shape[:-1], dtype)
    out = counts[..., 0].astype(dtype)
    for g in range(1, G):
        out += counts[..., g]
    return out


def positives(t: Tallies) -> np.ndarray:
    """Records with label 1 per group: the TPR denominator."""
    out: np.ndarray = t.tp + t.fn
    return out


def negatives(t: Tallies) -> np.ndarray:
    """Records with label 0 per group: the FPR denominator."""
    out: np.ndarray = t.fp + t.tn
    return out


def flagged(t: Tallies) -> np.ndarray:
    """Records with decision 1 per group: the PPV denominator."""
    out: np.ndarray = t.tp + t.fp
    return out


def rate_denominator(name: str, t: Tallies) -> np.ndarray:
    """Per group, the smallest denominator of the rates metric ``name`` uses."""
    if name == "EOPP":
        return positives(t)
    if name == "EOD":
        out: np.ndarray = np.minimum(positives(t), negatives(t))
        return out
    if name == "PP":
        return flagged(t)
    return t.group_size  # DI, SPD (selection rate), TI, CAL, CAL_GAP


def supported_groups(
    name: str, t: Tallies, support: np.ndarray, min_support: float = 1
) -> np.ndarray:
    """Groups whose rates enter metric ``name``: in ``support`` and with every denominator
    at least ``min_support`` (and never zero)."""
    return support & (rate_denominator(name, t) >= max(min_support, 1))


def smallest_denominator(
    name: str, t: Tallies, support: np.ndarray, min_support: float = 1
) -> np.ndarray:
    """The smallest denominator among the groups that entered the value (NaN where the
    value is undefined: fewer than two groups)."""
    den = rate_denominator(name, t)
    valid = supported_groups(name, t, support, min_support)
    lo, _ = _extremes(den, valid)
    return lo


def _spread(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    lo, hi = _extremes(values, valid)
    out: np.ndarray = hi - lo
    return out


def selection_rate(t: Tallies) -> np.ndarray:
    """SR_g: share of records with decision 1, per group."""
    return _ratio(t.fp + t.tp, t.group_size)


def true_positive_rate(t: Tallies) -> np.ndarray:
    """TPR_g = P(d=1 | y=1, g); NaN for a group without positives."""
    return _ratio(t.tp, t.tp + t.fn)


def false_positive_rate(t: Tallies) -> np.ndarray:
    """FPR_g = P(d=1 | y=0, g); NaN for a group without negatives."""
    return _ratio(t.fp, t.fp + t.tn)


def positive_predictive_value(t: Tallies) -> np.ndarray:
    """PPV_g = P(y=1 | d=1, g); NaN for a group without predicted positives."""
    return _ratio(t.tp, t.tp + t.fp)


def disparate_impact(t: Tallies, support: np.ndarray, min_support: float = 1) -> np.ndarray:
    """min_g SR_g / max_g SR_g; 1.0 when every group's selection rate is 0."""
    lo, hi = _extremes(selection_rate(t), supported_groups("DI", t, support, min_support))
    return np.where(hi > 0, _ratio(lo, hi), np.where(np.isnan(hi), np.nan, 1.0))


def statistical_parity_difference(
    t: Tallies, support: np.ndarray, min_support: float = 1
) -> np.ndarray:
    """max_g SR_g - min_g SR_g."""
    return _spread(selection_rate(t), supported_groups("SPD", t, support, min_support))


def equal_opportunity_difference(
    t: Tallies, support: np.ndarray, min_support: float = 1
) -> np.ndarray:
    """max_g TPR_g - min_g TPR_g over groups with at least min_support positives."""
    return _spread(true_positive_rate(t), supported_groups("EOPP", t, support, min_support))


def equalized_odds_difference(
    t: Tallies, support: np.ndarray, min_support: float = 1
) -> np.ndarray:
    """max(TPR gap, FPR gap) over groups with at least min_support positives and negatives."""
    tpr, fpr = true_positive_rate(t), false_positive_rate(t)
    valid = supported_groups("EOD", t, support, min_support)
    out: np.ndarray = np.maximum(_spread(tpr, valid), _spread(fpr, valid))
    return out


def theil_index_between_groups(
    t: Tallies, support: np.ndarray, min_support: float = 1
) -> np.ndarray:
    """Between-group Theil index (GE(1)) of the benefit b = d - y + 1.

    sum_g (n_g/n)(mu_g/mu) ln(mu_g/mu) over the supported groups, with 0 ln 0 = 0.
    Undefined when mu = 0 (every record a missed positive).
    """
    support = supported_groups("TI", t, support, min_support)
    n_g = np.where(support, t.group_size, 0.0)
    # benefit 0: (y=1, d=0); 1: (y=0, d=0) and (y=1, d=1); 2: (y=0, d=1)
    benefit = t.tn + t.tp + 2.0 * t.fp
    benefit = np.where(support, benefit, 0.0)
    total_n = _count_total(n_g)[..., None]
    mu = _ratio(_count_total(benefit)[..., None], total_n)
    rel = _ratio(_ratio(benefit, n_g), mu)  # mu_g / mu
    term = np.zeros_like(rel)
    pos = support & (rel > 0)
    np.multiply(rel, np.log(np.where(pos, rel, 1.0)), out=term, where=pos)
    weights = _ratio(n_g, total_n)
    ti = np.where(support, weights * term, 0.0).sum(axis=-1)  # a float sum: numpy's own
    defined = (_count_total(support) >= 2) & (mu[..., 0] > 0)
    return np.where(defined, ti, np.nan)


def predictive_parity_difference(
    t: Tallies, support: np.ndarray, min_support: float = 1
) -> np.ndarray:
    """max_g PPV_g - min_g PPV_g over groups with at least min_support flagged records."""
    ppv = positive_predictive_value(t)
    return _spread(ppv, supported_groups("PP", t, support, min_support))


def expected_calibration_error(t: Tallies) -> np.ndarray:
    """ECE_g = sum_b (n_gb/n_g) |mean label_gb - mean score_gb|, per group.

    Equivalently sum_b |labels_gb - scores_gb| / n_g, which needs no per-bin division.
    """
    if t.bin_n is None or t.bin_score is None:
        raise ValueError("calibration needs bin tallies")
    n, score = t.bin_n, t.bin_score
    same_layout = n.shape[:-2] + n.shape[-1:] == score.shape
    if same_layout and n.flags.c_contiguous and score.flags.c_contiguous:
        gaps = np.empty(score.shape)
        records = np.empty(score.shape[:-1])
        B = score.shape[-1]
        _ece_terms_kernel(n.reshape(-1, 2, B), score.reshape(-1, B), gaps.reshape(-1, B),
                          records.reshape(-1))  # fmt: skip
        return _ratio(gaps.sum(axis=-1), records)
    # other layouts (a broadcast, a strided view): numpy's temporaries, as ever
    gap = np.abs(n[..., :, 1, :] - score).sum(axis=-1)
    return _ratio(gap, n.sum(axis=(-1, -2)))


@numba.njit(cache=True, nogil=True)
def _ece_terms_kernel(
    bin_n: np.ndarray, bin_score: np.ndarray, gaps: np.ndarray, records: np.ndarray
) -> None:
    """Per row r (a group of one tally): gaps[r, b] = |bin_n[r, 1, b] - bin_score[r, b]|
    and records[r] = the sum of bin_n[r] (the ECE's terms and denominator).

    Why compiled: in numpy the gaps cost a subtraction from a strided view and two fresh
    (cells x K x G x B) temporaries, and the records a reduction over two short axes: with
    page faults, ~3 ms for the largest stack of ``bench axis1``; this loop takes ~0.1 ms.
    The figures are the same to the bit: a subtraction and an absolute value are exactly
    rounded in any code, and ``bin_n`` holds counts, whose sums are exact integers in any
    order. The gaps' float sum over bins stays numpy's, on an array of the same layout as
    before (C order).
    """
    R, B = bin_score.shape
    for r in range(R):
        total = 0.0
        for b in range(B):
            gaps[r, b] = abs(bin_n[r, 1, b] - bin_score[r, b])
            total += bin_n[r, 0, b] + bin_n[r, 1, b]
        records[r] = total


def calibration_max_ece(t: Tallies, support: np.ndarray, min_support: float = 1) -> np.ndarray:
    """max_g ECE_g (10 equal-width bins by default)."""
    ece = expected_calibration_error(t)
    _, hi = _extremes(ece, supported_groups("CAL", t, support, min_support))
    return hi


def calibration_max_gap(t: Tallies, support: np.ndarray, min_support: float = 1) -> np.ndarray:
    """max_g |mean score_g - mean label_g| (the calibration-in-the-large variant)."""
    if t.bin_n is None or t.bin_score is None:
        raise ValueError("calibration needs bin tallies")
    gap = np.abs(t.bin_score.sum(axis=-1) - t.bin_n[..., :, 1, :].sum(axis=-1))
    valid = supported_groups("CAL_GAP", t, support, min_support)
    _, hi = _extremes(_ratio(gap, t.bin_n.sum(axis=(-1, -2))), valid)
    return hi


MetricFn = Callable[..., np.ndarray]  # (tallies, support, min_support=1) -> values

#: Metric name -> function. The engine looks metrics up here by configured name.
METRICS: dict[str, MetricFn] = {
    "DI": disparate_impact,
    "SPD": statistical_parity_difference,
    "EOPP": equal_opportunity_difference,
    "EOD": equalized_odds_difference,
    "TI": theil_index_between_groups,
    "PP": predictive_parity_difference,
    "CAL": calibration_max_ece,
    "CAL_GAP": calibration_max_gap,
}

#: Metrics that need score-bin tallies (the others need decision counts only).
NEEDS_BINS = frozenset({"CAL", "CAL_GAP"})


def defined(values: np.ndarray) -> np.ndarray:
    """Where a value is defined (not NaN): only those carry a verdict."""
    return ~np.isnan(np.asarray(values, dtype=np.float64))


def passes(values: np.ndarray, threshold: float, direction: str) -> np.ndarray:
    """The pass verdict of each value; False where the value is undefined (NaN), which is
    no verdict at all: callers count passes among the :func:`defined` values only."""
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        if direction == ">=":
            out = v >= threshold - VERDICT_EPS
        elif direction == "<=":
            out = v <= threshold + VERDICT_EPS
        elif direction == "abs<=":
            out = np.abs(v) <= threshold + VERDICT_EPS
        else:
            raise ValueError(f"unknown pass direction {direction!r}")
    return out & ~np.isnan(v)


# ----------------------------------------------------------------------------- not evaluable
#: Step to which a number of records needed is rounded up: the rounding base of published
#: counts (monitor.core.privacy.ROUNDING_BASE), so the figure names no exact count.
NEEDED_STEP = 5


def denominator_words(name: str, min_support: int) -> str:
    """What a group of metric ``name`` must hold to enter it, in words.

    >>> denominator_words("EOD", 20)
    '20 positives and 20 negatives'
    """
    if name == "EOPP":
        return f"{min_support} positives"
    if name == "EOD":
        return f"{min_support} positives and {min_support} negatives"
    if name == "PP":
        return f"{min_support} flagged records (decision 1)"
    return f"{min_support} records"


def _denominators(name: str, t: Tallies) -> list[np.ndarray]:
    """Every per-group count that must reach the support for metric ``name`` (the group's
    records always; the rate denominators of the metric)."""
    if name == "EOPP":
        return [t.group_size, positives(t)]
    if name == "EOD":
        return [t.group_size, positives(t), negatives(t)]
    if name == "PP":
        return [t.group_size, flagged(t)]
    return [t.group_size]


@dataclass(frozen=True)
class Shortfall:
    """How far one (window-level) tally is from a defined value of a metric."""

    groups: int  # groups of the attribute
    reaching: int  # groups whose every denominator reaches the support
    needed: int | None  # more records that would bring a second group in (None: not a count)
    needed_groups: tuple[int, ...]  # the groups (indices) those records would go to


def denominator_shortfall(name: str, t: Tallies, min_support: int, scale: float = 1.0) -> Shortfall:
    """Records a single window tally (arrays (G,)) lacks for metric ``name`` to be defined.

    Per group, each denominator short of ``min_support`` needs ``min_support - n`` more
    records; a denominator of 1-10 records is counted as 0 (the figure would otherwise
    give a small count back: the small-cell rule). ``needed`` is the sum over the
    fewest groups that would make two reach, rounded up to :data:`NEEDED_STEP`: an upper
    bound, never fewer than needed. ``scale`` = resample size / window size: the
    bootstrap draws ``scale`` x each stratum, so the shortfall in window records is the
    resample's shortfall / scale.

    >>> n = np.array([[[400, 100], [8, 30]], [[90, 10], [2, 3]], [[50, 0], [0, 0]]], float)
    >>> denominator_shortfall("EOPP", Tallies.from_confusion(n), 20)
    Shortfall(groups=3, reaching=1, needed=20, needed_groups=(1,))
    """
    short = np.zeros(t.group_size.shape[-1])
    for den in _denominators(name, t):
        den = np.asarray(den, dtype=np.float64)
        resampled = np.where(den < SMALL_CELL_RECORDS, 0.0, den * scale)  # 1-10: none
        lacking = den * scale < max(min_support, 1)
        short += np.where(lacking, np.maximum(min_support - resampled, 0.0) / scale, 0.0)
    G = int(short.size)
    ok = short <= 0
    reaching = int(ok.sum())
    if G < 2 or reaching >= 2:
        return Shortfall(G, reaching, None, ())
    order = [int(g) for g in np.argsort(np.where(ok, np.inf, short), kind="stable")]
    picked = tuple(order[: 2 - reaching])
    total = float(short[list(picked)].sum())
    needed = int(NEEDED_STEP * math.ceil(math.ceil(total - 1e-9) / NEEDED_STEP))
    return Shortfall(G, reaching, max(needed, NEEDED_STEP), picked)
