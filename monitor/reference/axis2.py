"""Record-level Axis 2 oracle: subsample records, recompute every metric (docs/method.md section 4).

O(R x N) per audit size, so for tests only. Independent of count tables and of the
hypergeometric and moment-matched draws of :mod:`batch_axes.axis2`; it shares only the
curve summary (:func:`batch_axes.axis2.make_cell`), which is what is being compared.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from batch_axes.axis2 import DEFAULT_SIZES, Axis2Cell, _rule_names, audit_sizes, make_cell
from monitor.config import MetricRule
from monitor.reference.metrics import metric_from_records


def reference_axis2_draws(
    group: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    score: np.ndarray,
    metrics: Sequence[str],
    sizes: Sequence[int],
    *,
    G: int,
    R: int,
    min_group_support: int,
    bins: int,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Record-level subsampling: metric -> (S, R) draws. O(R x N) per size: oracle only."""
    group = np.asarray(group)
    out = {m: np.full((len(sizes), R), np.nan) for m in metrics}
    for i, size in enumerate(sizes):
        for r in range(R):
            pick = rng.choice(len(group), size=int(size), replace=False)
            g = group[pick]
            present = np.bincount(g, minlength=G)
            included = [k for k in range(G) if present[k] >= min_group_support]
            for m in metrics:
                out[m][i, r] = metric_from_records(
                    m, g, label[pick], decision[pick], score[pick], included, bins,
                    min_group_support,
                )
    return out


def reference_axis2(
    model_id: str,
    attribute: str,
    groups: Sequence[str],
    group: np.ndarray,
    label: np.ndarray,
    decision: np.ndarray,
    score: np.ndarray,
    rules: Sequence[MetricRule | str],
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    R: int = 30,
    cv_cutoff: float = 0.05,
    n_field: float = 50_000,
    min_group_support: int = 20,
    bins: int = 10,
    rng: np.random.Generator,
) -> list[Axis2Cell]:
    """Axis 2 cells of one (model, attribute) by subsampling records (the test oracle).

    Draws R index sets per size with ``rng.choice(n, size, replace=False)`` and
    recomputes every metric with :func:`metric_from_records`; independent of
    count tables and of the hypergeometric and moment-matched draws.
    """
    names = _rule_names(rules)
    grid = audit_sizes(len(group), sizes).tolist()
    values = reference_axis2_draws(
        group,
        label,
        decision,
        score,
        names,
        grid,
        G=len(groups),
        R=R,
        min_group_support=min_group_support,
        bins=bins,
        rng=rng,
    )
    return [
        make_cell(
            model_id,
            m,
            attribute,
            len(group),
            grid,
            values[m].reshape(len(grid), R),
            cv_cutoff,
            n_field,
        )
        for m in names
    ]

