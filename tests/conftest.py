"""Shared test set-up: repeatable hypothesis runs and small cohort builders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Repeatable: the same examples on every run and every machine.
settings.register_profile(
    "repeatable",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("repeatable")

#: Data the tests need, copied into the repository (tests/data/README.md says from where):
#: no test reads anything outside it.
TEST_DATA = Path(__file__).resolve().parent / "data"


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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow", action="store_true", default=False,
        help="also run the long variants (tests marked slow: 200,000-event crash run, ...)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long variant, run only with --runslow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests are deselected (not skipped) unless --runslow is given."""
    if config.getoption("--runslow"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
