"""The compiled exact samplers (monitor.core.sampling) against the distributions they draw.

Chi-square goodness of fit. Each (n, p) draws M variates with a fixed seed; cells of
the support are pooled from both tails until every expected count is at least 5,
and the statistic is compared with the chi-square law (df = cells - 1). Every
test's p-value must exceed ALPHA = 1e-3 / TESTS, a Bonferroni split of a 1e-3
family-wise level over the TESTS (<= 100) goodness-of-fit tests of this file: a
correct sampler fails the file with probability below 1e-3 for a random seed, and
with the seeds fixed the outcome is repeatable. Two kinds of reference:

* the exact pmf (scipy.stats), which is what "exact" means; and
* numpy's own sampler for the same (n, p), by a two-sample homogeneity test
  (numpy's Generator.binomial is the reference implementation these kernels replace).

The tests can fail: a sampler with a planted bias (p * 1.02, and a multinomial
with one category's share off by 2 %) is rejected at the same ALPHA, with the
same M, in both the inversion and the BTPE regime.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from monitor.core import sampling

TESTS = 100
ALPHA = 1e-3 / TESTS
M = 200_000

# (n, p): inversion (n * min(p, 1-p) <= 30), BTPE, the boundary between them,
# p > 0.5 (drawn as n - Binomial(n, 1 - p)), p = 0.5, tiny p, large n.
BINOMIAL_GRID = [
    (1, 0.5),
    (7, 0.2),
    (50, 0.3),
    (100, 0.3),  # n p = 30: the last inversion case
    (101, 0.3),  # n p = 30.3: the first BTPE case
    (60, 0.5),  # p = 0.5 exactly, inversion (n p = 30)
    (80, 0.5),  # p = 0.5 exactly, BTPE
    (100, 0.8),  # p > 0.5, inversion on 1 - p
    (200, 0.8),  # p > 0.5, BTPE on 1 - p
    (3000, 0.1),  # the Axis 1 workload: BTPE with |y - m| mostly <= 20 (step 5.1)
    (917, 0.116),
    (1000, 0.975),  # p > 0.5, inversion on 1 - p = 0.025
    (1_000_000, 1e-6),  # large n, tiny mean: inversion
    (1_000_000, 0.3),  # large n: BTPE steps 5.2 and 5.3 (|y - m| > 20)
    (10_000_000, 0.45),
]


def pooled_chisquare(observed: np.ndarray, expected: np.ndarray) -> float:
    """p-value of a chi-square GoF test, cells pooled left to right until expected >= 5.

    The pooling depends on the expected counts only, so the statistic keeps its law.
    """
    o = np.asarray(observed, dtype=float)
    e = np.asarray(expected, dtype=float) * o.sum() / np.sum(expected)
    cells_o, cells_e = [], []
    acc_o = acc_e = 0.0
    for oi, ei in zip(o, e, strict=True):
        acc_o += oi
        acc_e += ei
        if acc_e >= 5:
            cells_o.append(acc_o)
            cells_e.append(acc_e)
            acc_o = acc_e = 0.0
    if cells_e:  # what is left of the right tail joins the last cell
        cells_o[-1] += acc_o
        cells_e[-1] += acc_e
    if len(cells_e) < 2:
        return 1.0
    co, ce = np.array(cells_o), np.array(cells_e)
    return float(stats.chi2.sf(((co - ce) ** 2 / ce).sum(), len(ce) - 1))


def binomial_gof(draws: np.ndarray, n: int, p: float) -> float:
    """p-value of draws against the exact Binomial(n, p) pmf, on a +-12 sd window."""
    sd = math.sqrt(n * p * (1 - p))
    lo = max(0, math.floor(n * p - 12 * sd - 5))
    hi = min(n, math.ceil(n * p + 12 * sd + 5))
    support = np.arange(lo, hi + 1)
    # the end cells hold the tails beyond the window (mass below 1e-30 for a correct sampler)
    observed = np.bincount(np.clip(draws, lo, hi) - lo, minlength=len(support))
    expected = stats.binom.pmf(support, n, p)
    expected[0] = stats.binom.cdf(lo, n, p)
    expected[-1] = stats.binom.sf(hi - 1, n, p)
    return pooled_chisquare(observed, expected)


def two_sample_gof(a: np.ndarray, b: np.ndarray) -> float:
    """p-value of a chi-square homogeneity test of two samples of integers."""
    lo = min(a.min(), b.min())
    size = max(a.max(), b.max()) - lo + 1
    ca = np.bincount(a - lo, minlength=size)
    cb = np.bincount(b - lo, minlength=size)
    # pool cells with small counts into their neighbours (left to right)
    rows, cur = [], np.zeros(2)
    for x, y in zip(ca, cb, strict=True):
        cur += (x, y)
        if cur.sum() >= 20:
            rows.append(cur.copy())
            cur[:] = 0
    if cur.sum() and rows:
        rows[-1] += cur
    table = np.array(rows).T
    if table.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(table, correction=False).pvalue)


def draw(n: int, p: float, seed: int, size: int = M) -> np.ndarray:
    return sampling.binomial_rows(np.random.default_rng(seed), np.array([n]), np.array([p]), size)[
        0
    ]


# ----------------------------------------------------------------------------- binomial
@pytest.mark.parametrize(("n", "p"), BINOMIAL_GRID)
def test_binomial_matches_the_exact_pmf(n: int, p: float) -> None:
    x = draw(n, p, seed=n + int(p * 1e6))
    assert binomial_gof(x, n, p) > ALPHA


@pytest.mark.parametrize(("n", "p"), BINOMIAL_GRID)
def test_binomial_matches_numpy(n: int, p: float) -> None:
    ours = draw(n, p, seed=1000 + n)
    theirs = np.random.default_rng(2000 + n).binomial(n, p, M)
    assert two_sample_gof(ours, theirs) > ALPHA


def test_single_binomials_with_varying_parameters_match_the_pmf() -> None:
    """``binomial`` (set-up per call, as in the multinomial chains) over mixed (n, p)."""
    rng = np.random.default_rng(5)
    cases = [(40, 0.1), (3000, 0.07), (250, 0.6)]
    n = np.array([c[0] for c in cases] * (M // 3))
    p = np.array([c[1] for c in cases] * (M // 3))
    x = sampling.binomial_rows(rng, n, p, 1)[:, 0]
    for i, (ni, pi) in enumerate(cases):
        assert binomial_gof(x[i::3], ni, pi) > ALPHA


def test_binomial_edge_cases() -> None:
    rng = np.random.default_rng(0)
    n = np.array([0, 0, 10, 10, 5, 2**40])
    p = np.array([0.0, 0.7, 0.0, 1.0, 1.0, 0.5])
    x = sampling.binomial_rows(rng, n, p, 1000)
    assert (x[0] == 0).all() and (x[1] == 0).all() and (x[2] == 0).all()
    assert (x[3] == 10).all() and (x[4] == 5).all()
    big = x[5].astype(float)  # n = 2^40: mean n/2, sd 2^19
    assert abs(big.mean() - 2**39) < 5 * 2**19 / math.sqrt(1000)
    assert abs(big.std() / 2**19 - 1) < 0.15  # sd of a sample sd, K=1000: ~2.2 %; z ~ 7


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_binomial_rejects_a_probability_outside_0_1(p: float) -> None:
    with pytest.raises(ValueError, match="p must be in"):
        sampling.binomial_rows(np.random.default_rng(0), np.array([10]), np.array([p]), 3)


def test_symmetry_p_above_one_half() -> None:
    """Binomial(n, p) = n - Binomial(n, 1 - p) in law (the p > 0.5 path)."""
    a = draw(400, 0.85, seed=31)
    b = 400 - draw(400, 0.15, seed=32)
    assert two_sample_gof(a, b) > ALPHA


def test_btpe_log_ratio_is_the_exact_log_pmf_ratio() -> None:
    """Step 5.3's Stirling bound equals log f(y)/f(m) (lgamma) to round-off.

    With the paper's signs (all four corrections added) the error would be
    2 (c(y + 1) + c(n - y + 1)) >= 1e-4 at these arguments: this test catches it.
    """
    for n, r in [(3000, 0.1), (1_000_000, 0.3), (5000, 0.45)]:
        setup = sampling._btpe_setup(n, r)
        m = int(setup[2])
        sd = math.sqrt(n * r * (1 - r))
        for y in (m - int(3 * sd), m - 21, m + 21, m + int(4 * sd)):
            exact = (
                math.lgamma(m + 1)
                + math.lgamma(n - m + 1)
                - math.lgamma(y + 1)
                - math.lgamma(n - y + 1)
                + (y - m) * math.log(r / (1 - r))
            )
            # lgamma of numbers up to ~1.4e7 carries ~1e-16 relative error: ~1e-8 absolute
            assert sampling._log_pmf_ratio(n, r, y, m) == pytest.approx(exact, abs=1e-8)


@pytest.mark.parametrize(("n", "p"), [(50, 0.3), (3000, 0.1), (1_000_000, 0.3)])
def test_a_planted_bias_is_detected(n: int, p: float) -> None:
    """The same test rejects a sampler whose p is 2 % too high: the tests can fail."""
    biased = draw(n, p * 1.02, seed=77)
    assert binomial_gof(biased, n, p) < ALPHA


# ----------------------------------------------------------------------------- multinomial
MULTINOMIAL_CASES = [
    (3000, [0.02, 0.05, 0.08, 0.1, 0.12, 0.13, 0.14, 0.13, 0.13, 0.1]),  # an Axis 1 stratum
    (120, [0.3, 0.0, 0.5, 0.2]),  # a zero share
    (25, [0.9, 0.05, 0.05]),
    (10_000, [0.5, 0.5]),
]


@pytest.mark.parametrize(("n", "q"), MULTINOMIAL_CASES)
def test_multinomial_sums_and_marginals(n: int, q: list[float]) -> None:
    probs = np.array([q])
    K = M // 2
    x = sampling.multinomial_rows(np.random.default_rng(n), np.array([n]), probs, K)[0]  # (K, C)
    assert (x.sum(axis=1) == n).all()
    assert (x[:, probs[0] == 0] == 0).all()
    for c, qc in enumerate(q):
        if 0 < qc < 1:
            assert binomial_gof(x[:, c], n, qc) > ALPHA


def test_multinomial_joint_law_on_a_small_case() -> None:
    """Every outcome of Multinomial(4, (0.2, 0.3, 0.5)) at its exact probability."""
    q = np.array([0.2, 0.3, 0.5])
    x = sampling.multinomial_rows(np.random.default_rng(8), np.array([4]), q[None, :], M)[0]
    outcomes = [(a, b, 4 - a - b) for a in range(5) for b in range(5 - a)]
    index = {o: i for i, o in enumerate(outcomes)}
    observed = np.bincount([index[tuple(r)] for r in x.tolist()], minlength=len(outcomes))
    expected = np.array([stats.multinomial.pmf(o, 4, q) for o in outcomes])
    assert pooled_chisquare(observed, expected) > ALPHA


def test_multinomial_covariance() -> None:
    """Cov(X_i, X_j) = -n q_i q_j: the categories are drawn jointly, not independently."""
    n, q = 250, np.array([0.1, 0.6, 0.3])
    K = M
    x = sampling.multinomial_rows(np.random.default_rng(3), np.array([n]), q[None], K)[0]
    cov = np.cov(x[:, 0], x[:, 1])[0, 1]
    expected = -n * q[0] * q[1]
    # sd of a sample covariance ~ sqrt((var_i var_j + cov^2) / K); z = 5
    sd = math.sqrt((n * q[0] * (1 - q[0]) * n * q[1] * (1 - q[1]) + expected**2) / K)
    assert abs(cov - expected) < 5 * sd


def test_a_planted_multinomial_bias_is_detected() -> None:
    q = np.array([0.02, 0.05, 0.08, 0.1, 0.12, 0.13, 0.14, 0.13, 0.13, 0.1])
    off = q.copy()
    off[4] *= 1.02
    off /= off.sum()
    x = sampling.multinomial_rows(np.random.default_rng(9), np.array([3000]), off[None], M // 2)
    assert binomial_gof(x[0][:, 4], 3000, q[4]) < ALPHA


def test_empty_strata_draw_nothing() -> None:
    x = sampling.multinomial_rows(
        np.random.default_rng(0), np.array([0, 5]), np.array([[0.0, 0.0], [0.0, 1.0]]), 10
    )
    assert (x[0] == 0).all() and (x[1][:, 1] == 5).all() and (x[1][:, 0] == 0).all()


# ----------------------------------------------------------------------------- streams
def test_normals_are_numpy_standard_normals_from_the_same_stream() -> None:
    out = np.empty((3, 4, 5))
    sampling.standard_normal_fill(np.random.default_rng(12), out)
    assert np.array_equal(out, np.random.default_rng(12).standard_normal((3, 4, 5)))


def test_draws_are_deterministic_per_seed_and_advance_the_generator() -> None:
    n, q = np.array([3000, 40]), np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    a = sampling.multinomial_rows(np.random.default_rng(4), n, q, 50)
    b = sampling.multinomial_rows(np.random.default_rng(4), n, q, 50)
    assert np.array_equal(a, b)
    rng = np.random.default_rng(4)
    first = sampling.multinomial_rows(rng, n, q, 50)
    second = sampling.multinomial_rows(rng, n, q, 50)
    assert np.array_equal(first, a) and not np.array_equal(first, second)
