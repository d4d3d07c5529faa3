"""Hypothesis strategies shared by the statistics' oracle tests, and where the test data is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import strategies as st

#: Data the tests need, copied into the repository (tests/data/README.md says from where):
#: no test reads anything outside it.
TEST_DATA = Path(__file__).resolve().parents[1] / "data"


@st.composite
def cohorts(draw, max_n: int = 300, max_groups: int = 5, min_n: int = 0):
    """A random scored cohort for one attribute: group index, label, decision, score.

    Covers empty and tiny groups, skewed base rates, a single group, all-pass and
    all-fail decisions, and scores on bin edges (ties).
    """
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(min_n, max_n))
    G = draw(st.integers(1, max_groups))
    skew = draw(st.sampled_from([0.0, 1.0, 3.0]))
    weights = rng.dirichlet(np.full(G, 1.0 / (1.0 + skew)))
    group = rng.choice(G, size=n, p=weights)
    base = rng.uniform(0, 1, size=G) ** draw(st.sampled_from([1.0, 4.0]))
    label = (rng.uniform(size=n) < base[group]).astype(np.int64)
    kind = draw(st.sampled_from(["random", "edges", "informative"]))
    if kind == "edges":
        score = rng.choice(np.linspace(0, 1, 11), size=n)
    elif kind == "informative":
        score = np.clip(0.5 * label + rng.uniform(0, 0.5, size=n), 0, 1)
    else:
        score = rng.uniform(0, 1, size=n)
    dec_kind = draw(st.sampled_from(["threshold", "all1", "all0", "random"]))
    if dec_kind == "threshold":
        decision = (score >= 0.5).astype(np.int64)
    elif dec_kind == "all1":
        decision = np.ones(n, np.int64)
    elif dec_kind == "all0":
        decision = np.zeros(n, np.int64)
    else:
        decision = (rng.uniform(size=n) < 0.4).astype(np.int64)
    groups = tuple(f"g{i}" for i in range(G))
    return groups, group, label, decision, score


def families(min_total: int = 0):
    """Size maps of one family of 1-8 groups, many of them small, some empty, totals of
    ``min_total`` records or more (the small-cell rule's secondary suppression tests)."""
    sizes = st.one_of(st.integers(0, 12), st.integers(0, 400))
    return st.dictionaries(st.sampled_from("abcdefgh"), sizes, min_size=1).filter(
        lambda d: sum(d.values()) >= min_total
    )
