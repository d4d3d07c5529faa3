"""Which metrics need the label, and Axis 1 on the two windows that follow (predictions now,
outcomes later).

A window holds predictions; some have their outcome, some not yet. A metric that needs
no label (DI, SPD: decisions per group) is computed on every prediction of the window,
so a shift in decisions is seen when the model scores. A metric that needs the label
(EOPP, EOD, TI, PP, CAL, CAL_GAP) is computed on the predictions whose outcome has
arrived, and its cell says how many those are.

The bootstrap of a label-free cell stratifies by group only: its table is the window's
tables with every record at label 0 (:meth:`CountTable.merged_labels`), so each group's
resample size is proportional to its share of the predictions. Why not (label x group)
as for the other cells: the label of a pending prediction is unknown, and a label-free
metric does not depend on it (docs/method.md, "Windows on predictions").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from monitor.core.axis1 import evaluate_axis1, run_axis1
from monitor.core.cell_result import CellResult
from monitor.core.counts import CountTable
from monitor.core.engine_options import EngineOptions
from monitor.core.method import MetricRule
from monitor.core.tables import GridSpec, tables_from_frame

#: metrics computed from decisions and groups only
LABEL_FREE_METRICS = frozenset({"DI", "SPD"})

Tables = Mapping[tuple[str, str], CountTable]


def needs_label(metric: str) -> bool:
    """Whether a metric needs the outcome (everything but DI and SPD)."""
    return metric not in LABEL_FREE_METRICS


def split_rules(rules: Sequence[MetricRule]) -> tuple[list[MetricRule], list[MetricRule]]:
    """(label-free rules, label-based rules), each in configured order."""
    free = [r for r in rules if not needs_label(r.name)]
    return free, [r for r in rules if needs_label(r.name)]


def label_free_tables(joined: Tables, pending: Tables) -> dict[tuple[str, str], CountTable]:
    """Every prediction's table, label collapsed: joined (labels merged) plus pending."""
    out = {}
    for key, t in joined.items():
        merged = t.merged_labels()
        p = pending.get(key)
        out[key] = merged if p is None else merged + p
    return out


def evaluate_split(
    free_tables: Tables,
    joined_tables: Tables,
    rules: Sequence[MetricRule],
    **kw: Any,
) -> list[CellResult]:
    """:func:`evaluate_axis1` with label-free rules on ``free_tables`` and label-based
    rules on ``joined_tables`` (same keys), in the order one call would give: model, rule
    (configured order), attribute (table order)."""
    return _split_calls(
        free_tables, joined_tables, rules, lambda t, r: evaluate_axis1(t, r, **kw)
    )


def run_split(
    free_tables: Tables,
    joined_tables: Tables,
    options: EngineOptions,
    seed: int,
    seeds: Mapping[str, int] | None = None,
) -> list[CellResult]:
    """:func:`evaluate_split` as ``options`` say (:func:`monitor.core.axis1.run_axis1`):
    the stream's evaluations, with intersections and pooling as configured."""
    return _split_calls(
        free_tables, joined_tables, options.rules,
        lambda t, r: run_axis1(t, options, seed, seeds=seeds, rules=r),
    )  # fmt: skip


def _split_calls(
    free_tables: Tables,
    joined_tables: Tables,
    rules: Sequence[MetricRule],
    evaluate: Callable[[Tables, list[MetricRule]], list[CellResult]],
) -> list[CellResult]:
    free, labelled = split_rules(rules)
    results: list[CellResult] = []
    if free:
        results += evaluate(free_tables, free)
    if labelled:
        results += evaluate(joined_tables, labelled)
    rank = {r.name: i for i, r in enumerate(rules)}
    attrs = {key: i for i, key in enumerate(joined_tables)}
    return sorted(
        results, key=lambda r: (r.model_id, rank[r.metric], attrs[(r.model_id, r.attribute)])
    )


def split_tables_from_frame(
    frame: pd.DataFrame, config: GridSpec
) -> tuple[dict[tuple[str, str], CountTable], dict[tuple[str, str], CountTable]]:
    """(label-free tables, label-based tables) of a frame of records whose label is -1
    while unknown: every record at label 0, and the records with their label."""
    known = frame["label"].to_numpy(np.int64) >= 0
    joined = tables_from_frame(frame[known], config)
    free = tables_from_frame(frame.assign(label=0), config)
    for key, t in free.items():  # the same keys in both, empty where no label is known
        joined.setdefault(key, CountTable(t.groups, t.bins))
    return free, {k: joined[k] for k in free}
