"""Exact binomial and multinomial variates in compiled code (numba), for the Axis 1 bootstrap.

Why this module exists: the count-level bootstrap (``monitor.core.axis1``) draws,
per (label, group) stratum and replicate, one Binomial(n, p) for the decisions
and one Multinomial(n, q_1..q_B) over the score bins: for the 336-cell grid
(K = 500) about 1.5 million binomial variates and 0.8 million normals per
evaluation, which is most of the engine's time. The calibration bootstrap must
stay exact, so the variates come from exact algorithms, compiled into one loop
per table instead of a numpy call per category with masks and temporaries:

* **Inversion** (sequential search of the cdf from 0) when n * min(p, 1-p) <= 30:
  one uniform, about n p + 1 steps.
* **BTPE** (Kachitvichyanukul & Schmeiser 1988, "Binomial random variate
  generation", CACM 31(2)) otherwise: a triangle/parallelogram/exponential-tail
  majorant and an exact acceptance test (the pmf ratio as a product near the
  mode, else a squeeze and Stirling's series). Rejection sampling is exact: the
  accepted values follow Binomial(n, p).
* p > 0.5 is drawn as n - Binomial(n, 1 - p), as in the paper.
* **Multinomial** as a chain of conditional binomials: the j-th visited category
  gets Binomial(remaining, q_j / (q_j + ... + q_last)), the last one the rest.
  This factorisation of the multinomial pmf is exact. Categories are visited from
  the least to the most likely (the largest takes the remainder without a draw);
  the chain stops when nothing remains.

numpy's ``Generator.binomial`` uses the same two algorithms, in C; what this
module saves is numpy's per-call and per-element overhead (set-up, broadcasting,
masking), not algorithmic work: on the bench grid the variates take ~20 % less
CPU than numpy's draws of the same variates (``bench axis1``: floor_s against
numpy_floor_s). Deviations from numpy's code, none of which trades exactness:

* Step 5.3's Stirling corrections: the paper (and numpy's copy, until a 2026 fix)
  adds all four; those of y! and (n - y)! enter the log ratio with a minus sign
  (here they do), and the leading coefficient is 13860 (= 166320 / 12; numpy's
  copy had 13680).
* Step 5.1 compares two products (numerator, denominator) instead of dividing once
  per factor: the same ratio, no division in the loop.
* Inversion never truncates its search at a bound (numpy stops at n p + 10 sd and
  redraws, dropping that tail): it redraws only if round-off exhausts the cdf
  before the uniform is covered (a ~1e-16 event), a rejection that keeps the law.
* BTPE's set-up is done once per (n, p) where K draws share it, and step 5.3's
  constants only when step 5.3 is reached (in a multinomial chain n changes with
  every draw, so set-up cost is paid per draw).

The uniforms and normals come from the numpy ``Generator`` passed in (numba reads
its bit generator directly; the normals are numpy's ziggurat, bit for bit), so
each table keeps its own seeded stream (``monitor.core.axis1.table_rng``): a
cell's draws do not depend on which other tables are evaluated, nor on threads.
The kernels release the GIL (``nogil=True``) so a thread pool over tables uses
both cores, and are cached on disk (``cache=True``): a process loads machine code
(~0.4 CPU-s) instead of compiling (~7 CPU-s; see ``monitor.core.axis1.compile_kernels``).

``tests/core/test_sampling.py`` checks every regime with chi-square goodness-of-fit
tests against the exact pmf and against numpy's sampler.
"""

from __future__ import annotations

import math

import numba
import numpy as np

#: Below this mean (of the smaller of p, 1 - p), inversion; above, BTPE. numpy uses 30 too.
INVERSION_MAX_MEAN = 30.0


# ----------------------------------------------------------------------------- binomial
@numba.njit(cache=True, nogil=True)
def _stirling_correction(x: float) -> float:
    """log Gamma(x) - [(x - 1/2) log x - x + log(2 pi) / 2], by its series to x^-9.

    1/(12x) - 1/(360x^3) + 1/(1260x^5) - 1/(1680x^7) + 1/(1188x^9), in Horner form on
    1/x (one division). BTPE calls it only with x > 15, where the first omitted term
    (691/(360360 x^11)) is below 1e-16.
    """
    ix = 1.0 / x
    ix2 = ix * ix
    return (
        1.0 / 12.0
        - (1.0 / 360.0 - (1.0 / 1260.0 - (1.0 / 1680.0 - ix2 / 1188.0) * ix2) * ix2) * ix2
    ) * ix


@numba.njit(cache=True, nogil=True)
def _inversion(rng: np.random.Generator, n: int, r: float) -> int:
    """Binomial(n, r) by sequential search of the cdf from 0; r <= 0.5 and n * r <= 30."""
    q = 1.0 - r
    qn = math.exp(n * math.log(q))
    ratio = r / q
    while True:
        x = 0
        px = qn
        u = rng.random()
        while u > px:
            x += 1
            if x > n:
                break  # round-off left u uncovered: reject and redraw
            u -= px
            px *= (n - x + 1) * ratio / x
        if x <= n:
            return x


#: q, nrq, m, p1, xm, xl, xr, c, laml, lamr, p2, p3, p4 (m the mode, an integer)
_BtpeSetup = tuple[
    float, float, int, float, float, float, float, float, float, float, float, float, float
]


@numba.njit(cache=True, nogil=True)
def _btpe_setup(n: int, r: float) -> _BtpeSetup:
    """BTPE step 0: the majorant's constants for (n, r). Reused across draws of one (n, r)."""
    q = 1.0 - r
    nrq = n * r * q
    fm = n * r + r
    m = math.floor(fm)
    p1 = math.floor(2.195 * math.sqrt(nrq) - 4.6 * q) + 0.5
    xm = m + 0.5
    xl = xm - p1
    xr = xm + p1
    c = 0.134 + 20.5 / (15.3 + m)
    a = (fm - xl) / (fm - xl * r)
    laml = a * (1.0 + a / 2.0)
    a = (xr - fm) / (xr * q)
    lamr = a * (1.0 + a / 2.0)
    p2 = p1 * (1.0 + 2.0 * c)
    p3 = p2 + c / laml
    p4 = p3 + c / lamr
    return (q, nrq, m, p1, xm, xl, xr, c, laml, lamr, p2, p3, p4)


@numba.njit(cache=True, nogil=True)
def _log_pmf_ratio(n: int, r: float, y: int, m: int) -> float:
    """log f(y) / f(m) of Binomial(n, r) by Stirling's formula (BTPE step 5.3).

    With xm = m + 1/2, f1 = m + 1, z = n + 1 - m, x1 = y + 1, w = n - y + 1, q = 1 - r
    and c the series correction (_stirling_correction):
      xm log(f1 / x1) + (n - m + 0.5) log(z / w) + (y - m) log(w r / (x1 q))
      + c(f1) + c(z) - c(x1) - c(w)
    The paper adds all four corrections; those of y! and (n - y)! enter the log
    ratio with a minus sign, as here. Every log is of a ratio,
    so nothing large cancels: the result is accurate to a few ulp.
    """
    f1 = m + 1.0
    z = n + 1.0 - m
    x1 = y + 1.0
    w = n - y + 1.0
    return (
        (m + 0.5) * math.log(f1 / x1)
        + (n - m + 0.5) * math.log(z / w)
        + (y - m) * math.log(w * r / (x1 * (1.0 - r)))
        + _stirling_correction(f1)
        + _stirling_correction(z)
        - _stirling_correction(x1)
        - _stirling_correction(w)
    )


@numba.njit(cache=True, nogil=True)
def _btpe(rng: np.random.Generator, n: int, r: float, setup: _BtpeSetup) -> int:
    """Binomial(n, r) by BTPE steps 1-5; r <= 0.5, n * r > 30, ``setup`` from _btpe_setup."""
    q, nrq, m, p1, xm, xl, xr, c, laml, lamr, p2, p3, p4 = setup
    while True:
        # step 1: the triangular region is accepted at once
        u = rng.random() * p4
        v = rng.random()
        if u <= p1:
            return math.floor(xm - p1 * v + u)
        if u <= p2:  # step 2: parallelograms
            x = xl + (u - p1) / c
            v = v * c + 1.0 - abs(m - x + 0.5) / p1
            if v > 1.0:
                continue
            y = math.floor(x)
        elif u <= p3:  # step 3: left exponential tail
            if v == 0.0:
                continue
            y = math.floor(xl + math.log(v) / laml)
            if y < 0:
                continue
            v = v * (u - p2) * laml
        else:  # step 4: right exponential tail
            if v == 0.0:
                continue
            y = math.floor(xr - math.log(v) / lamr)
            if y > n:
                continue
            v = v * (u - p3) * lamr
        # step 5: acceptance test, v against f(y) / f(m)
        k = abs(y - m)
        if k <= 20 or k >= nrq / 2.0 - 1:
            # step 5.1: the explicit ratio, the product over i of (r / q) (n + 1 - i) / i.
            # The paper divides once per factor; here numerator and denominator are two
            # products compared by one multiplication (the same value, no division in
            # the loop).
            num = 1.0
            den = 1.0
            if m < y:
                for i in range(m + 1, y + 1):
                    num *= r * (n + 1 - i)
                    den *= q * i
            else:
                for i in range(y + 1, m + 1):
                    num *= q * i
                    den *= r * (n + 1 - i)
            if v * den <= num:
                return y
            continue
        # step 5.2: squeeze on log(v)
        rho = (k / nrq) * ((k * (k / 3.0 + 0.625) + 0.1666666666666666) / nrq + 0.5)
        t = -k * k / (2.0 * nrq)
        alv = math.log(v)
        if alv < t - rho:
            return y
        if alv > t + rho:
            continue
        # step 5.3: the log ratio itself (rare: its constants are not part of the set-up)
        if alv <= _log_pmf_ratio(n, r, y, m):
            return y


@numba.njit(cache=True, nogil=True)
def _check_p(p: float) -> None:
    if not (0.0 <= p <= 1.0):  # also NaN
        raise ValueError("binomial: p must be in [0, 1]")


@numba.njit(cache=True, nogil=True)
def binomial(rng: np.random.Generator, n: int, p: float) -> int:
    """One exact Binomial(n, p) variate from ``rng`` (a numpy Generator); n < 0 counts as 0."""
    _check_p(p)
    if n <= 0 or p == 0.0:
        return 0
    if p == 1.0:
        return n
    r = p if p <= 0.5 else 1.0 - p
    if n * r <= INVERSION_MAX_MEAN:
        x = _inversion(rng, n, r)
    else:
        x = _btpe(rng, n, r, _btpe_setup(n, r))
    return x if p <= 0.5 else n - x


@numba.njit(cache=True, nogil=True)
def binomial_repeat(rng: np.random.Generator, n: int, p: float, out: np.ndarray) -> None:
    """``out.size`` Binomial(n, p) variates of one (n, p) into ``out``: BTPE's set-up runs once."""
    _check_p(p)
    if n <= 0 or p == 0.0:
        out[:] = 0
        return
    if p == 1.0:
        out[:] = n
        return
    r = p if p <= 0.5 else 1.0 - p
    flip = p > 0.5
    if n * r <= INVERSION_MAX_MEAN:
        for k in range(out.size):
            x = _inversion(rng, n, r)
            out[k] = n - x if flip else x
    else:
        setup = _btpe_setup(n, r)
        for k in range(out.size):
            x = _btpe(rng, n, r, setup)
            out[k] = n - x if flip else x


# ----------------------------------------------------------------------------- multinomial
@numba.njit(cache=True, nogil=True)
def conditional_probs(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(visiting order, conditional probability of each visited category) of one row.

    Order: least to most likely (ties in index order). The j-th visited category's
    conditional probability is q_j / (q_j + ... + q_last), clipped to [0, 1]
    against round-off; the last one's is 1 (it takes the remainder).
    """
    C = probs.size
    order = np.argsort(probs, kind="mergesort")
    cond = np.zeros(C)
    tail = 0.0
    for j in range(C - 1, -1, -1):
        qc = probs[order[j]]
        tail += qc
        if tail > 0.0:
            cond[j] = min(max(qc / tail, 0.0), 1.0)
    return order, cond


@numba.njit(cache=True, nogil=True)
def multinomial_repeat(
    rng: np.random.Generator, n: int, probs: np.ndarray, out: np.ndarray
) -> None:
    """``out.shape[0]`` Multinomial(n, probs) draws into ``out`` (K, C), as conditional binomials.

    The first visited category's binomial has the same (n, p) in every draw, so all K
    of them are drawn first with one BTPE set-up; the rest of each chain follows.
    ``probs`` must sum to 1 (up to round-off) when n > 0.
    """
    K, C = out.shape
    out[:] = 0
    if n <= 0:
        return
    order, cond = conditional_probs(probs)
    if C == 1:
        out[:, 0] = n
        return
    first = np.empty(K, dtype=np.int64)
    binomial_repeat(rng, n, cond[0], first)
    for k in range(K):
        out[k, order[0]] = first[k]
        remaining = n - first[k]
        for j in range(1, C - 1):
            if remaining == 0:
                break
            x = binomial(rng, remaining, cond[j])
            out[k, order[j]] = x
            remaining -= x
        out[k, order[C - 1]] = remaining


# ----------------------------------------------------------------------------- array kernels
@numba.njit(cache=True, nogil=True)
def binomial_rows(rng: np.random.Generator, n: np.ndarray, p: np.ndarray, K: int) -> np.ndarray:
    """K Binomial(n_s, p_s) variates per row s: n (S,), p (S,) -> (S, K) int64."""
    out = np.empty((n.size, K), dtype=np.int64)
    for s in range(n.size):
        binomial_repeat(rng, n[s], p[s], out[s])
    return out


@numba.njit(cache=True, nogil=True)
def multinomial_rows(
    rng: np.random.Generator, n: np.ndarray, probs: np.ndarray, K: int
) -> np.ndarray:
    """K Multinomial(n_s, probs_s) draws per row s: n (S,), probs (S, C) -> (S, K, C) int64."""
    S, C = probs.shape
    out = np.empty((S, K, C), dtype=np.int64)
    for s in range(S):
        multinomial_repeat(rng, n[s], probs[s], out[s])
    return out


@numba.njit(cache=True, nogil=True)
def standard_normal_fill(rng: np.random.Generator, out: np.ndarray) -> None:
    """Fill ``out`` with standard normal variates (numpy's ziggurat, as ported by numba).

    Why not ``rng.standard_normal(shape)``: the same variates from the same stream, but
    numba's loop is ~3x faster than numpy's array call on this machine.
    """
    flat = out.reshape(-1)
    for i in range(flat.size):
        flat[i] = rng.standard_normal()
