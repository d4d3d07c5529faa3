"""The report's block AUROC against its record-level oracle, the service's rank_auroc."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.core.drift import rank_auroc
from monitor.report.auroc import block_aurocs, block_midranks, rolling_auroc


@st.composite
def blocks(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Rows of labels with both classes and scores with many ties (few distinct values,
    both zeros, infinities) or none."""
    rows = draw(st.integers(1, 6))
    width = draw(st.integers(2, 40))
    value = st.floats(allow_nan=False, allow_infinity=True) | st.sampled_from([0.0, -0.0])
    pool = draw(st.lists(value, min_size=1, max_size=width))
    scores = np.array(
        [[draw(st.sampled_from(pool)) for _ in range(width)] for _ in range(rows)], np.float64
    )
    labels = np.array(
        [draw(st.lists(st.integers(0, 1), min_size=width, max_size=width)) for _ in range(rows)],
        np.int64,
    )
    labels[:, 0], labels[:, 1] = 0, 1  # both classes in every row
    return labels, scores


@settings(max_examples=300)
@given(blocks())
def test_block_aurocs_are_rank_aurocs_bit_for_bit(got: tuple[np.ndarray, np.ndarray]) -> None:
    labels, scores = got
    want = [rank_auroc(y, s) for y, s in zip(labels, scores, strict=True)]
    assert block_aurocs(labels, scores) == want  # == on floats: the same bits (no NaN here)


@settings(max_examples=200)
@given(blocks())
def test_block_midranks_are_scipys_average_ranks(got: tuple[np.ndarray, np.ndarray]) -> None:
    from scipy.stats import rankdata

    _, scores = got
    assert np.array_equal(block_midranks(scores), rankdata(scores, method="average", axis=1))


def test_a_block_with_a_nan_score_gets_rank_aurocs_answer() -> None:
    labels = np.array([[0, 1, 1, 0], [0, 1, 1, 0]])
    scores = np.array([[0.1, 0.9, np.nan, 0.2], [0.1, 0.9, 0.8, 0.2]])
    got = block_aurocs(labels, scores)
    assert np.isnan(got[0]) == np.isnan(rank_auroc(labels[0], scores[0])) and got[1] == 1.0


def test_rolling_auroc_is_rank_auroc_per_kept_block_at_rounded_positions() -> None:
    rng = np.random.default_rng(7)
    label = (rng.random(4321) < 0.2).astype(np.int64)
    label[1321:2321] = 0
    label[1321:1326] = 1  # 5 positives: left out
    score = np.round(rng.random(4321), 2)
    got = rolling_auroc(label, score, 1000, 10_000)
    kept = [321, 2321, 3321]  # blocks end at the last record; the first 321 are left over
    assert [p.auroc for p in got] == [
        rank_auroc(label[s : s + 1000], score[s : s + 1000]) for s in kept
    ]
    assert [p.records for p in got] == [7000, 9000, 10_000]  # 10,000 - 4,321 + end, rounded
    assert rolling_auroc(label[:999], score[:999], 1000, 999) == []
