"""What drives a disparity: the groups at the extremes of a cell's rates, and how often.

A failing or flipping cell's value is a function of two groups' rates (the lowest and
the highest: DI, SPD, EOPP, EOD, PP) or of one (the highest ECE: CAL, CAL_GAP). The
board's question is which groups those are, and whether the same groups are at the
extremes in most resamples or only by chance in this window. This module answers it on
count tallies (:class:`monitor.core.metrics.Tallies`), no I/O:

* :func:`group_rates` - the per-group rate a metric compares (its *driver rate*);
* :func:`extreme_shares` - per group, the share of resamples in which it is (one of)
  the lowest and (one of) the highest among the groups that enter the metric; a tie
  counts for every tied group (so shares of a row can sum to more than 1);
* :func:`cell_drivers` - both, for one cell, with the disclosure rules of
  :mod:`monitor.core.privacy` applied before anything leaves: a group's rate and share
  are shown only when the group has at least SMALL_CELL records in its rate's
  denominator and is not withheld by secondary suppression among the attribute's
  groups; a withheld group is named "a small group" and shows no figure;
* :func:`subgroup_extremes` - for an attribute-level extreme group (Native American),
  the combined groups within it (Native American x Female, ...) from a count table of
  combined groups (docs/decisions.md, "What drives a disparity");
* :func:`driver_sentence` - the one sentence the report and the API carry.

Why the shares are counted only for cells that need them: the extremes cost an extra
pass over the (cells x K x groups) rates, and most cells of a healthy grid pass in
every resample (the fast path stays as it was: ``bench axis1``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numba
import numpy as np

from monitor.core.metrics import (
    Tallies,
    expected_calibration_error,
    false_positive_rate,
    positive_predictive_value,
    selection_rate,
    true_positive_rate,
)
from monitor.core.numbers import float_or_none
from monitor.core.privacy import RATE_DECIMALS, SMALL_CELL, rounded_rate, suppressed_groups

#: Metrics whose value is the largest group figure only (the lowest group does not drive it).
MAX_ONLY = frozenset({"CAL", "CAL_GAP"})

#: What each driver rate is called in a sentence: (noun, how a group "has" it).
RATE_WORDS: dict[str, str] = {
    "SR": "selection rate",
    "TPR": "true-positive rate",
    "FPR": "false-positive rate",
    "PPV": "positive predictive value",
    "benefit": "mean benefit",
    "ECE": "calibration error",
    "gap": "calibration gap",
}


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.full(np.broadcast_shapes(num.shape, den.shape), np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


_FIXED_RATES = {
    "DI": "SR", "SPD": "SR", "EOPP": "TPR", "PP": "PPV", "TI": "benefit", "CAL": "ECE",
    "CAL_GAP": "gap",
}  # fmt: skip


def _spread(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    ok = valid & ~np.isnan(values)
    lo = np.where(ok, values, np.inf).min(axis=-1)
    hi = np.where(ok, values, -np.inf).max(axis=-1)
    return np.where(ok.sum(axis=-1) >= 2, hi - lo, np.nan)


def driver_rate_names(name: str, point: Tallies, valid: np.ndarray) -> np.ndarray:
    """The rate metric ``name`` compares across groups, per leading row of ``point``
    (..., G). EOD is the larger of two gaps: its driver is the rate (TPR or FPR) whose
    gap is the larger in the point estimate, so the resamples are judged on the same
    rate as the sentence names."""
    shape = point.tp.shape[:-1]
    if name in _FIXED_RATES:
        return np.full(shape, _FIXED_RATES[name], dtype=object)
    if name == "EOD":
        t_gap = _spread(true_positive_rate(point), valid)
        f_gap = _spread(false_positive_rate(point), valid)
        return np.where(f_gap > t_gap, "FPR", "TPR").astype(object)
    raise ValueError(f"no driver rate for metric {name!r}")


def group_rates(rate: str, t: Tallies) -> np.ndarray:
    """The per-group driver rate (..., G) of tallies ``t`` (NaN: zero denominator)."""
    if rate == "SR":
        return selection_rate(t)
    if rate == "TPR":
        return true_positive_rate(t)
    if rate == "FPR":
        return false_positive_rate(t)
    if rate == "PPV":
        return positive_predictive_value(t)
    if rate == "benefit":  # b = d - y + 1: tn and tp 1, fp 2, fn 0
        return _ratio(t.tn + t.tp + 2.0 * t.fp, t.group_size)
    if rate == "ECE":
        return expected_calibration_error(t)
    if rate == "gap":
        if t.bin_n is None or t.bin_score is None:
            raise ValueError("calibration needs bin tallies")
        gap = np.abs(t.bin_score.sum(axis=-1) - t.bin_n[..., :, 1, :].sum(axis=-1))
        return _ratio(gap, t.bin_n.sum(axis=(-1, -2)))
    raise ValueError(f"unknown driver rate {rate!r}")


def rate_denominators(rate: str, t: Tallies) -> np.ndarray:
    """Records each group's driver rate rests on (the disclosure rule judges these)."""
    if rate == "TPR":
        out: np.ndarray = t.tp + t.fn
        return out
    if rate == "FPR":
        out = t.fp + t.tn
        return out
    if rate == "PPV":
        out = t.tp + t.fp
        return out
    return t.group_size


def extreme_shares(rates: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the share of rows (last-but-one axis: resamples) in which it is among the
    lowest and among the highest valid groups. ``rates`` and ``valid`` are (..., K, G);
    returns two (..., G) arrays. Rows with fewer than two valid groups count for no group.

    >>> r = np.array([[0.1, 0.5, 0.3], [0.4, 0.2, 0.2]])
    >>> lo, hi = extreme_shares(r, np.ones((2, 3), bool))
    >>> lo.tolist(), hi.tolist()
    ([0.5, 0.5, 0.5], [0.5, 0.5, 0.0])
    """
    rates, valid = np.broadcast_arrays(rates, valid)
    ok = valid & ~np.isnan(rates)
    defined = ok.sum(axis=-1, keepdims=True) >= 2
    lo = np.where(ok, rates, np.inf).min(axis=-1, keepdims=True)
    hi = np.where(ok, rates, -np.inf).max(axis=-1, keepdims=True)
    K = rates.shape[-2]
    is_lo = ok & defined & (rates == lo)
    is_hi = ok & defined & (rates == hi)
    return is_lo.sum(axis=-2) / K, is_hi.sum(axis=-2) / K


@dataclass(frozen=True, slots=True)
class Drivers:
    """The extremes of one cell as they may leave the service (privacy rules applied):
    a part of :class:`monitor.core.cell_result.CellResult`.

    ``low_group``/``high_group`` are None when withheld (``*_withheld`` True) or when
    the cell has no extremes; rates are rounded to RATE_DECIMALS; ``shares`` lists
    (group, share of resamples lowest, share highest) for the shown groups that are
    ever at an extreme; ``subgroups`` the shown combined groups within ``low_group``,
    (name, rate), from the intersection tables of the same grid that contain the
    attribute (:func:`subgroup_extremes`; none: no such table).
    """

    rate: str
    low_group: str | None
    high_group: str | None
    low_rate: float
    high_rate: float
    low_share: float
    high_share: float
    low_withheld: bool
    high_withheld: bool
    shares: tuple[tuple[str, float, float], ...]
    subgroups: tuple[tuple[str, float], ...] = ()


def size_withheld(
    groups: Sequence[str], sizes: Sequence[int] | np.ndarray, linked: frozenset[str] = frozenset()
) -> frozenset[str]:
    """Groups whose figures may not be shown whatever the rate: secondary suppression over
    the attribute's group sizes (:func:`monitor.core.privacy.suppressed_groups`) and the
    groups ``linked`` withholds (an intersection's groups withheld within its margins, as
    the published group figures withhold them: :func:`monitor.core.privacy.linked_withheld`).

    Why apart from :func:`withheld_groups`: it depends on the table only, so the engine
    computes it once per table rather than once per failing cell of every metric."""
    hidden = suppressed_groups({g: int(n) for g, n in zip(groups, sizes, strict=True)})
    return hidden | linked if linked else hidden


def withheld_groups(
    groups: Sequence[str],
    sizes: np.ndarray,
    dens: np.ndarray,
    linked: frozenset[str] = frozenset(),
) -> set[str]:
    """Groups whose figures may not be shown: :func:`size_withheld`, and any group whose
    rate rests on fewer than SMALL_CELL records."""
    hidden = set(size_withheld(groups, sizes, linked))
    hidden |= {g for g, d in zip(groups, dens, strict=True) if d < SMALL_CELL}
    return hidden


def _rounded(x: float) -> float:
    r = rounded_rate(x)
    return math.nan if r is None else float(r)


#: share -> round(share, RATE_DECIMALS), for :func:`_rounded_share` (bounded: see there).
_SHARES_ROUNDED: dict[float, float] = {}


def _rounded_share(x: float) -> float:
    """``round(x, RATE_DECIMALS)`` of a finite share of resamples, remembered.

    Why: Python's round of a float to 2 decimals costs ~0.25 us (a correctly rounded
    decimal conversion), a cell's drivers round up to a dozen shares, and a share is a
    count over K: an evaluation sees few distinct values. Only positive shares are
    remembered (0.0 and -0.0 are equal keys but round to different floats); the memo
    stops growing at 2**16 entries."""
    r = _SHARES_ROUNDED.get(x)
    if r is None:
        r = round(x, RATE_DECIMALS)
        if x > 0 and len(_SHARES_ROUNDED) < 65536:
            _SHARES_ROUNDED[x] = r
    return r


def _assemble(
    rate: str,
    groups: Sequence[str],
    rates: Sequence[float],
    ok: Sequence[bool],
    dens: Sequence[float],
    lo_sh: Sequence[float],
    hi_sh: Sequence[float],
    withheld: frozenset[str],
) -> Drivers | None:
    """One cell's Drivers from its per-group figures (plain lists), privacy applied:
    ``withheld`` (:func:`size_withheld` of its table) and any group whose rate rests on
    fewer than SMALL_CELL records (:func:`withheld_groups`).

    Why written out as it is: it runs for every failing or flipping cell of a grid
    (hundreds an evaluation, ``bench axis1``); ``min``/``max`` keep the first of equal
    rates, so the lowest and the highest group are the earliest of their ties."""
    entered = [i for i, flag in enumerate(ok) if flag and not math.isnan(rates[i])]
    if len(entered) < 2:
        return None
    lo_i = min(entered, key=rates.__getitem__)
    hi_i = max(entered, key=rates.__getitem__)
    small = [groups[i] for i, d in enumerate(dens) if d < SMALL_CELL]
    hidden = withheld.union(small) if small else withheld
    lo_g, hi_g = groups[lo_i], groups[hi_i]
    lo_hidden, hi_hidden = lo_g in hidden, hi_g in hidden
    nan = math.nan
    return Drivers(
        rate,
        None if lo_hidden else lo_g,
        None if hi_hidden else hi_g,
        nan if lo_hidden else _rounded(rates[lo_i]),
        nan if hi_hidden else _rounded(rates[hi_i]),
        nan if lo_hidden or not math.isfinite(lo_sh[lo_i]) else _rounded_share(lo_sh[lo_i]),
        nan if hi_hidden or not math.isfinite(hi_sh[hi_i]) else _rounded_share(hi_sh[hi_i]),
        lo_hidden,
        hi_hidden,
        # a share > 0 is finite: rounded as rounded_rate would, without its calls
        tuple(
            [
                (groups[i], _rounded_share(lo_sh[i]), _rounded_share(hi_sh[i]))
                for i in entered
                if (lo_sh[i] > 0 or hi_sh[i] > 0) and groups[i] not in hidden
            ]
        ),
    )


def cell_drivers(
    name: str,
    groups: Sequence[str],
    point: Tallies,
    point_valid: np.ndarray,
    boot: Tallies | None,
    boot_valid: np.ndarray | None,
    group_sizes: np.ndarray,
) -> Drivers | None:
    """The drivers of one cell: ``point`` tallies (G,) with the groups that entered the
    value, ``boot`` tallies (K, G) of its resamples with the groups that entered each
    (None: no shares), and the window's group sizes (for secondary suppression). None
    when fewer than two groups entered the value (undefined: nothing drives it).

    The plain-numpy statement of what :func:`stack_drivers` computes for a whole stack.
    """
    rate = str(driver_rate_names(name, point, point_valid))
    rates = group_rates(rate, point)
    if boot is not None and boot_valid is not None:
        lo_sh, hi_sh = extreme_shares(group_rates(rate, boot), boot_valid)
    else:
        lo_sh = hi_sh = np.full(len(groups), np.nan)
    return _assemble(
        rate, groups, rates.tolist(), np.asarray(point_valid).tolist(),
        rate_denominators(rate, point).tolist(), lo_sh.tolist(), hi_sh.tolist(),
        size_withheld(groups, np.asarray(group_sizes).tolist()),
    )  # fmt: skip


def _row(t: Tallies, r: int | np.ndarray) -> Tallies:
    """Some leading rows of a stacked Tallies (M, G, ...)."""
    pick = {f: getattr(t, f) for f in ("tn", "fp", "fn", "tp", "bin_n", "bin_score")}
    rows: dict[str, Any] = {f: None if a is None else a[r] for f, a in pick.items()}
    return Tallies(**rows)


#: Codes of the driver rates and of the denominators that decide which groups enter a
#: metric, for the compiled share counter.
_RATE_CODES = {"SR": 0, "TPR": 1, "FPR": 2, "PPV": 3, "benefit": 4, "ECE": 5, "gap": 6}
_DEN_CODES = {"EOPP": 1, "EOD": 2, "PP": 3}  # others: records (0)


@numba.njit(cache=True, nogil=True)
def _extreme_counts_kernel(
    rate: int, den_code: int, rows: np.ndarray,
    tn: np.ndarray, fp: np.ndarray, fn: np.ndarray, tp: np.ndarray,
    bin_n: np.ndarray, bin_score: np.ndarray, support: np.ndarray, ms: float,
    lo_out: np.ndarray, hi_out: np.ndarray,
) -> None:  # fmt: skip
    """Per listed row of a stack (M, K, G), how many of the K resamples have each group
    among the lowest (``lo_out``) and the highest (``hi_out``) driver rates.

    A group enters a resample when ``support`` allows it and its denominator (records,
    positives, min(positives, negatives) or flagged, by ``den_code``) reaches ``ms``, as
    :func:`monitor.core.metrics.supported_groups`; a resample with fewer than two
    entering groups counts for none. Why compiled: the same count in numpy needs a dozen
    (rows x K x G) temporaries and reductions over a short axis, which cost as much as
    the metric arithmetic of the whole grid.
    """
    K, G = tn.shape[1], tn.shape[2]
    vals = np.empty(G)
    ok = np.zeros(G, np.bool_)
    for j in range(rows.size):
        m = rows[j]
        for k in range(K):
            count = 0
            for g in range(G):
                a, b, c, d = tn[m, k, g], fp[m, k, g], fn[m, k, g], tp[m, k, g]
                n = a + b + c + d
                if den_code == 1:
                    dd = c + d
                elif den_code == 2:
                    dd = min(c + d, a + b)
                elif den_code == 3:
                    dd = b + d
                else:
                    dd = n
                if rate == 0:
                    num, den = b + d, n
                elif rate == 1:
                    num, den = d, c + d
                elif rate == 2:
                    num, den = b, a + b
                elif rate == 3:
                    num, den = d, b + d
                elif rate == 4:
                    num, den = a + d + 2.0 * b, n
                else:
                    num, tot, lab = 0.0, 0.0, 0.0
                    for bb in range(bin_score.shape[3]):
                        tot += bin_n[m, k, g, 0, bb] + bin_n[m, k, g, 1, bb]
                        if rate == 5:
                            num += abs(bin_n[m, k, g, 1, bb] - bin_score[m, k, g, bb])
                        else:
                            num += bin_score[m, k, g, bb]
                            lab += bin_n[m, k, g, 1, bb]
                    if rate == 6:
                        num = abs(num - lab)
                    den = tot
                ok[g] = support[m, g] and dd >= max(ms, 1) and den > 0
                if ok[g]:
                    vals[g] = num / den
                    count += 1
            if count < 2:
                continue
            lo, hi = np.inf, -np.inf
            for g in range(G):
                if ok[g]:
                    lo = min(lo, vals[g])
                    hi = max(hi, vals[g])
            for g in range(G):
                if ok[g]:
                    if vals[g] == lo:
                        lo_out[j, g] += 1
                    if vals[g] == hi:
                        hi_out[j, g] += 1


def stack_shares(
    name: str, rate: str, boot: Tallies, support: np.ndarray, ms: int, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`extreme_shares` of metric ``name``'s driver ``rate`` for some ``rows`` of a
    stack's resample tallies (M, K, G), with the groups that enter each resample judged
    as the metric does (``support`` (M, G), ``ms``). Returns two (len(rows), G) arrays."""
    M, K, G = boot.tn.shape
    lo = np.zeros((rows.size, G), np.int64)
    hi = np.zeros((rows.size, G), np.int64)
    with_bins = boot.bin_n is not None and boot.bin_n.shape[-1] > 0
    # with_bins: a Tallies with bin counts has its bin score sums too
    bin_n = cast(np.ndarray, boot.bin_n) if with_bins else np.zeros((M, K, G, 2, 0))
    bin_score = cast(np.ndarray, boot.bin_score) if with_bins else np.zeros((M, K, G, 0))
    if rate in ("ECE", "gap") and not with_bins:
        raise ValueError("calibration needs bin tallies")
    _extreme_counts_kernel(
        _RATE_CODES[rate], _DEN_CODES.get(name, 0), rows.astype(np.int64),
        boot.tn, boot.fp, boot.fn, boot.tp, bin_n, bin_score,
        np.ascontiguousarray(support, dtype=np.bool_), float(ms), lo, hi,
    )  # fmt: skip
    return lo / K, hi / K


def stack_drivers(
    name: str,
    groups: Sequence[str],
    point: Tallies,
    point_valid: np.ndarray,
    boot: Tallies,
    support: np.ndarray,
    ms: int,
    rows: Sequence[int],
    withheld: Sequence[frozenset[str]],
) -> dict[int, Drivers | None]:
    """:func:`cell_drivers` for some ``rows`` of a stack of M tables of one attribute
    shape: ``point`` (M, G) with the groups that entered each value, ``boot`` (M, K, G)
    with the resample support (M, G) and ``ms``, ``withheld`` (M) each table's
    :func:`size_withheld` (secondary suppression over its window's group sizes and the
    groups its model withholds across families).

    The resample shares of all rows with the same driver rate are counted in one
    compiled pass (:func:`stack_shares`), the point rates in one numpy pass; what is
    left per row is Python on G numbers.
    """
    out: dict[int, Drivers | None] = {}
    if not rows:
        return out
    idx_all = np.asarray(rows, dtype=np.int64)
    if name in _FIXED_RATES:  # one rate for every row: no per-row names to build
        by_rate = [(_FIXED_RATES[name], idx_all)]
    else:
        names = driver_rate_names(name, _row(point, idx_all), point_valid[idx_all])
        by_rate = [(rate, idx_all[names == rate]) for rate in sorted(set(names.tolist()))]
    ok = point_valid.tolist()
    for rate, idx in by_rate:
        lo, hi = stack_shares(name, rate, boot, support, ms, idx)
        # the point rates of every row (a dozen numbers: cheaper than picking rows first;
        # row by row the same arithmetic)
        rates, dens = group_rates(rate, point).tolist(), rate_denominators(rate, point).tolist()
        lo_l, hi_l = lo.tolist(), hi.tolist()
        for j, r in enumerate(idx.tolist()):
            out[r] = _assemble(
                rate, groups, rates[r], ok[r], dens[r], lo_l[j], hi_l[j], withheld[r]
            )
    return out


def needs_drivers(point_pass: bool, dominant_pass: bool, n_pass: int, K: int) -> bool:
    """A cell gets drivers when it fails (its point or dominant verdict is not a pass) or
    flips (its resamples disagree: 0 < n_pass < K). Flags rather than verdict words: the
    engine asks it of every cell."""
    return not point_pass or not dominant_pass or 0 < n_pass < K


# ----------------------------------------------------------------------------- intersections
@dataclass(frozen=True)
class Subgroup:
    """One combined group within an attribute-level group, as it may be shown."""

    group: str  # the combined group's name, e.g. "Native American x Female"
    rate: float  # rounded; NaN when withheld or not entered
    withheld: bool
    entered: bool  # its denominator reached min_support


def subgroup_extremes(
    rate: str,
    combined_groups: Sequence[str],
    combined: Tallies,
    parent_of: Sequence[int],
    parent: int,
    min_support: int,
    linked: frozenset[str] = frozenset(),
) -> tuple[list[Subgroup], str | None, str | None]:
    """For the attribute-level group ``parent`` (an index into the parent attribute's
    groups), its combined groups (those g with ``parent_of[g] == parent``) with their
    driver rates, and the shown ones with the lowest and the highest rate (None: withheld
    or fewer than one shown). ``combined`` are the point tallies (G_comb,) of the
    combined table (e.g. race x sex); disclosure: secondary suppression over all the
    combined groups' sizes, the groups ``linked`` withholds within their margins
    (:func:`withheld_groups`), and SMALL_CELL records per rate denominator.

    This answers "which sex groups within Native American have the extreme rate" from
    the counts of the intersection's own table (docs/decisions.md).
    """
    rates = group_rates(rate, combined)
    dens = rate_denominators(rate, combined)
    sizes = combined.group_size
    hidden = withheld_groups(combined_groups, sizes, dens, linked)
    members = [g for g, p in enumerate(parent_of) if p == parent]
    subs = []
    for g in members:
        name = combined_groups[g]
        entered = bool(dens[g] >= max(min_support, 1) and not math.isnan(rates[g]))
        withheld = name in hidden
        shown = entered and not withheld
        # shown: entered, so its rate is finite and rounds to a float
        shown_rate = cast(float, rounded_rate(rates[g])) if shown else math.nan
        subs.append(Subgroup(name, float(shown_rate), withheld, entered))
    shown_subs = [s for s in subs if not math.isnan(s.rate)]
    if not shown_subs:
        return subs, None, None
    lo = min(shown_subs, key=lambda s: (s.rate, s.group)).group
    hi = max(shown_subs, key=lambda s: (s.rate, s.group)).group
    return subs, lo, hi


# ----------------------------------------------------------------------------- sentence
def _label(metric: str, attribute: str) -> str:
    return f"{metric} by {attribute.replace('_', ' ')}"


def _pct(x: float) -> str:
    return "under 1 %" if 0 < x < 0.005 else f"{round(100 * x):d} %"


def group_name(code: str, labels: Mapping[str, str] | None = None) -> str:
    """A group as a sentence names it: its configured name (``labels``: code -> name,
    e.g. the attribute's ``groups``), else the code; a bare number reads "group 1", so
    that "1 patients" is never written.

    >>> group_name("1", {"1": "Female"}), group_name("1"), group_name("W")
    ('Female', 'group 1', 'W')
    """
    name = (labels or {}).get(code, code)
    return f"group {name}" if name.isdigit() else name


def _who(
    row: Mapping[str, Any], side: str, labels: Mapping[str, str] | None = None
) -> tuple[str, str, float | None, float | None]:
    """(subject, name for the share clause, rate, share) of the low or high group."""
    if row.get(f"{side}_withheld") or row.get(f"{side}_group") in (None, ""):
        return "a small group", "a small group", None, None
    code = str(row[f"{side}_group"])
    rate, share = float_or_none(row.get(f"{side}_rate")), float_or_none(row.get(f"{side}_share"))
    if labels is None:  # the API's rows: the group as its code, which its fields carry
        return f"{code} patients", code, rate, share
    g = group_name(code, labels)
    unnamed = code not in labels and g.startswith("group ")
    return (f"patients of {g}" if unnamed else f"{g} patients"), g, rate, share


def _verb(subject: str, plural: str, singular: str) -> str:
    return singular if subject == "a small group" else plural


def driver_clause(row: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> str | None:
    """The groups at the extremes of a cell's rates, as a clause with group names: e.g.
    "Female patients are selected at 0.27 against 0.44 for Male patients". None when the
    row carries no drivers. A withheld group reads "a small group" and shows no figure."""
    rate = row.get("driver_rate")
    if not isinstance(rate, str) or rate not in RATE_WORDS:
        return None
    lo_who, _, lo_rate, _ = _who(row, "low", labels)
    hi_who, _, hi_rate, _ = _who(row, "high", labels)
    word = RATE_WORDS[rate]
    if str(row["metric"]) in MAX_ONLY:
        fig = f" ({hi_rate:.2f})" if hi_rate is not None else ""
        return f"{hi_who} {_verb(hi_who, 'have', 'has')} the largest {word}{fig}"
    hi_fig = f"{hi_rate:.2f} for " if hi_rate is not None else ""
    if rate == "SR":
        lo_fig = f" at {lo_rate:.2f}" if lo_rate is not None else ""
        return f"{lo_who} {_verb(lo_who, 'are', 'is')} selected{lo_fig} against {hi_fig}{hi_who}"
    lo_fig = f" of {lo_rate:.2f}" if lo_rate is not None else ""
    return f"{lo_who} {_verb(lo_who, 'have', 'has')} a {word}{lo_fig} against {hi_fig}{hi_who}"


def driver_sentence(row: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> str | None:
    """The sentence on what drives a cell's disparity, from its (published) row: e.g. "DI
    by race fails because Native American patients are selected at 0.31 against 0.52 for
    White patients; in 71 % of resamples Native American is the lowest group." None when
    the row carries no drivers (a passing stable cell, an undefined or withheld one).
    A withheld group reads "a small group" and shows no figure. ``labels`` (code -> name
    of the row's attribute) names the groups (a code it does not name reads "patients of
    group 1"); without it (the API, whose rows carry codes) a group reads as its code."""
    clause = driver_clause(row, labels)
    if clause is None:
        return None
    metric, label = str(row["metric"]), _label(str(row["metric"]), str(row["attribute"]))
    fails = row.get("dominant_verdict") == "fail" or row.get("point_verdict") == "fail"
    lead = (
        f"{label} fails because"
        if fails
        else f"{label} passes, but its verdict flips in some resamples:"
    )
    _, lo_name, lo_rate, lo_share = _who(row, "low", labels)
    _, hi_name, _, hi_share = _who(row, "high", labels)
    s = f"{lead} {clause}"
    if metric in MAX_ONLY:
        if hi_share is not None:
            s += f"; in {_pct(hi_share)} of resamples {hi_name} is the highest group"
        return s + "."
    if lo_share is not None and hi_share is not None:
        s += (
            f"; in {_pct(lo_share)} of resamples {lo_name} is the lowest group and in "
            f"{_pct(hi_share)} {hi_name} is the highest"
        )
    elif lo_share is not None:
        s += f"; in {_pct(lo_share)} of resamples {lo_name} is the lowest group"
    elif hi_share is not None:
        s += f"; in {_pct(hi_share)} of resamples {hi_name} is the highest group"
    subs = row.get("low_subgroups")
    if lo_rate is not None and isinstance(subs, list | tuple) and subs:
        s += f"; within {lo_name}: " + ", ".join(f"{g} {r:.2f}" for g, r in subs)
    return s + "."


def with_driver(row: Mapping[str, Any]) -> dict[str, Any]:
    """A published cell row with its ``driver`` sentence (None: nothing drives it, or
    the row is withheld). Worded from the row's own published fields, so it shows
    nothing the row does not."""
    return {**row, "driver": driver_sentence(row)}
