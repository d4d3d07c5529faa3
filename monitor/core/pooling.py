"""Pooled (empirical-Bayes, beta-binomial) rates of intersection groups, on count tallies.

An intersection group such as "Black x Female" can hold a few dozen records: its raw
rate (selection rate, TPR, FPR, PPV) is noisy, and a min/max metric over many such
groups is driven by whichever is noisiest. Pooling shrinks each group's rate toward
what its parent margins predict, more so the fewer records it has:

    rate_g = (x_g + s * m_g) / (n_g + s)

with x_g successes out of n_g trials (e.g. decision 1 out of records for SR), m_g the
*prior mean* from the parent margins and s the *prior strength* (records' worth of
prior). This is the posterior mean of rate_g under rate_g ~ Beta(s m_g, s (1 - m_g)).

* **Prior mean (the parent).** :func:`logit_additive_mean`: the main-effects logistic
  model of the margins, logit m_g = sum_a logit r_a(g) - (A - 1) logit r, where r_a(g)
  is the rate of g's group in attribute a (the Black rate, the Female rate) and r the
  rate over all records. With no interaction between the attributes, every combined
  group's rate is exactly this; pooling pulls toward "no interaction", the hypothesis a
  board asks to be rejected. Rates are clipped to [1e-9, 1 - 1e-9] before the logit; a
  margin without trials falls back to r.
* **Prior strength.** Fixed (``[pooling] prior_strength``) or estimated by the method
  of moments (:func:`moment_strength`) from how much the groups' raw rates scatter
  around their prior means beyond binomial noise: with rho = 1 / (s + 1),
  E[n (p - m)^2 - m (1 - m)] = rho m (1 - m) (n - 1) per group, summed over the groups
  that enter the metric; rho is clipped to [0, 1]. No excess scatter (rho = 0) gives
  s = inf: every group takes its prior mean.
* **Bootstrap.** The margins, the prior mean and the strength are recomputed in every
  resample from that resample's counts (:func:`pooled_metric` works on (..., G)
  tallies), so the pooled VFR carries the uncertainty of the shrinkage too.
* **Support.** The groups that enter the pooled metric are those that enter the raw one
  (:func:`monitor.core.metrics.supported_groups`); every record counts in the margins.

Only metrics made of binomial rates pool: DI, SPD, EOPP, EOD, PP (:data:`POOLABLE`).
TI (a mean benefit of 0/1/2) and calibration are left raw. A departure from the papers
(docs/method.md, "Pooled estimates"). The record-level oracle is
:mod:`monitor.reference.pooling`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from monitor.core.metrics import Tallies, supported_groups

#: Metrics computed from per-group binomial rates: the ones pooling applies to.
POOLABLE = frozenset({"DI", "SPD", "EOPP", "EOD", "PP"})

#: Rates are clipped to [LOGIT_EPS, 1 - LOGIT_EPS] before a logit (a margin of 0 or 1).
LOGIT_EPS = 1e-9


@dataclass(frozen=True)
class PoolingSpec:
    """How the groups of one intersection attribute pool.

    ``parents[a, g]`` is the index of combined group g's group in parent attribute a
    (0..J_a - 1), from the configuration
    (:meth:`monitor.core.intersections.Intersection.parent_index`); ``strength`` a fixed
    prior strength (None: method of moments).
    """

    parents: np.ndarray  # (A, G) int64
    strength: float | None = None


def rate_counts(rate: str, t: Tallies) -> tuple[np.ndarray, np.ndarray]:
    """(successes, trials) per group of a binomial rate: SR, TPR, FPR or PPV."""
    if rate == "SR":
        return t.fp + t.tp, t.group_size
    if rate == "TPR":
        return t.tp, t.tp + t.fn
    if rate == "FPR":
        return t.fp, t.fp + t.tn
    if rate == "PPV":
        return t.tp, t.tp + t.fp
    raise ValueError(f"not a binomial rate: {rate!r}")


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.full(np.broadcast_shapes(num.shape, den.shape), np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def margin_rates(
    succ: np.ndarray, trials: np.ndarray, parents: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each combined group's parent-margin rates (..., A, G) and the overall rate (...).

    The margin of parent group j of attribute a pools every combined group g with
    ``parents[a, g] == j`` (NaN: no trials).
    """
    A, G = parents.shape
    out = np.empty((*succ.shape[:-1], A, G))
    for a in range(A):
        onehot = np.zeros((G, int(parents[a].max()) + 1))
        onehot[np.arange(G), parents[a]] = 1.0
        m_succ, m_trials = succ @ onehot, trials @ onehot
        out[..., a, :] = _ratio(m_succ, m_trials)[..., parents[a]]
    return out, _ratio(succ.sum(axis=-1), trials.sum(axis=-1))


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, LOGIT_EPS, 1.0 - LOGIT_EPS)
    out: np.ndarray = np.log(q) - np.log1p(-q)
    return out


def expit(z: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-z))
    return out


def logit_additive_mean(margins: np.ndarray, overall: np.ndarray) -> np.ndarray:
    """The prior mean (..., G): logit m_g = sum_a logit r_a(g) - (A - 1) logit r.

    A margin that is undefined (no trials) stands as r; with r undefined, m is NaN.

    >>> m = logit_additive_mean(np.array([[0.5, 0.2], [0.5, 0.5]]), np.array(0.5))
    >>> np.round(m, 3).tolist()
    [0.5, 0.2]
    """
    r = np.asarray(overall)[..., None, None]
    filled = np.where(np.isnan(margins), r, margins)
    A = margins.shape[-2]
    z = logit(filled).sum(axis=-2) - (A - 1) * logit(r[..., 0, :])
    return np.where(np.isnan(r[..., 0, :]), np.nan, expit(z))


def moment_strength(
    succ: np.ndarray, trials: np.ndarray, prior_mean: np.ndarray, valid: np.ndarray
) -> np.ndarray:
    """The method-of-moments prior strength s (...) over the valid groups (last axis).

    rho = sum (n (p - m)^2 - m (1 - m)) / sum m (1 - m) (n - 1), clipped to [0, 1];
    s = 1 / rho - 1 (inf when rho = 0 or nothing to estimate it from).
    """
    ok = valid & (trials > 0) & ~np.isnan(prior_mean)
    n = np.where(ok, trials, 0.0)
    p = _ratio(succ, trials)
    v = np.where(ok, prior_mean * (1.0 - prior_mean), 0.0)
    d = np.where(ok, p - prior_mean, 0.0)
    num = (n * d * d - v).sum(axis=-1)
    den = (v * (n - 1.0)).sum(axis=-1)
    rho = np.clip(_ratio(num, den), 0.0, 1.0)
    rho = np.where(np.isnan(rho), 0.0, rho)
    with np.errstate(divide="ignore"):
        return np.where(rho > 0, 1.0 / np.where(rho > 0, rho, 1.0) - 1.0, np.inf)


def shrunk_rates(
    succ: np.ndarray, trials: np.ndarray, prior_mean: np.ndarray, strength: np.ndarray
) -> np.ndarray:
    """(x + s m) / (n + s) per group; m where s is inf; the raw rate where m is NaN."""
    s = np.asarray(strength, dtype=np.float64)[..., None]
    raw = _ratio(succ, trials)
    finite = np.isfinite(s)
    s0 = np.where(finite, s, 0.0)
    post = _ratio(succ + s0 * prior_mean, trials + s0)
    post = np.where(finite, post, prior_mean)
    return np.where(np.isnan(prior_mean), raw, post)


def pooled_rates(
    rate: str, t: Tallies, spec: PoolingSpec, valid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The pooled rate (..., G) of every group and the prior strength (...) used."""
    succ, trials = rate_counts(rate, t)
    margins, overall = margin_rates(succ, trials, spec.parents)
    m = logit_additive_mean(margins, overall)
    if spec.strength is None:
        s = moment_strength(succ, trials, m, valid)
    else:
        s = np.full(succ.shape[:-1], float(spec.strength))
    return shrunk_rates(succ, trials, m, s), s


def _min_max(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = valid & ~np.isnan(values)
    defined = ok.sum(axis=-1) >= 2
    lo = np.where(ok, values, np.inf).min(axis=-1)
    hi = np.where(ok, values, -np.inf).max(axis=-1)
    return np.where(defined, lo, np.nan), np.where(defined, hi, np.nan)


def pooled_metric(
    name: str, t: Tallies, spec: PoolingSpec, support: np.ndarray, min_support: float = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Metric ``name`` (one of :data:`POOLABLE`) on pooled rates, and the prior strength
    (of the selection rate, TPR or PPV; for EOD the TPR's). Same leading shape as the
    tallies; the groups entering are those of the raw metric."""
    valid = supported_groups(name, t, support, min_support)
    valid = np.broadcast_to(valid, t.tp.shape)
    if name in ("DI", "SPD"):
        rates, s = pooled_rates("SR", t, spec, valid)
        lo, hi = _min_max(rates, valid)
        if name == "SPD":
            return hi - lo, s
        di = np.where(hi > 0, _ratio(lo, hi), np.where(np.isnan(hi), np.nan, 1.0))
        return di, s
    if name in ("EOPP", "PP"):
        rates, s = pooled_rates("TPR" if name == "EOPP" else "PPV", t, spec, valid)
        lo, hi = _min_max(rates, valid)
        return hi - lo, s
    if name == "EOD":
        tpr, s = pooled_rates("TPR", t, spec, valid)
        fpr, _ = pooled_rates("FPR", t, spec, valid)
        t_lo, t_hi = _min_max(tpr, valid)
        f_lo, f_hi = _min_max(fpr, valid)
        return np.maximum(t_hi - t_lo, f_hi - f_lo), s
    raise ValueError(f"metric {name!r} does not pool (only {sorted(POOLABLE)})")
