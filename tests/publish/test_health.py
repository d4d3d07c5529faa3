"""monitor.publish.health: a model's rolling AUROC and accuracy as published."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, roc_auc_score

from monitor.core.drift import ModelHealth
from monitor.core.privacy import SMALL_CELL
from monitor.publish.health import PublishedHealth, published_health


def _health(n: int, window: int = 200, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(np.int8)
    s = np.clip(0.3 * y + rng.uniform(0, 0.7, n), 0, 1)
    d = (s >= 0.5).astype(np.int8)
    h = ModelHealth(window=window, auroc_engine="exact")
    h.update_many(y, s, d)
    return h, y[-window:], s[-window:], d[-window:]


def test_fewer_than_eleven_records_seen_publish_nothing():
    h, *_ = _health(SMALL_CELL - 1)
    assert published_health(h) is None


def test_the_window_figures_leave_rounded_to_two_decimals():
    h, y, s, d = _health(500)
    out = published_health(h)
    assert isinstance(out, PublishedHealth)
    assert out.auroc == round(roc_auc_score(y, s), 2)
    assert out.accuracy == round(accuracy_score(y, d), 2)
