"""The audit engine on count tables: Axis 1, Axis 2, Axis 3 and the tiers, no record read.

Why a seam here: :func:`monitor.audit.run.run_audit` used to go from a file straight to a
report, so whoever held only counts (a network's coordinator holding the sum of its
sites' tables) had no engine to call. Now the offline audit is records -> audit tables
(:func:`~batch_axes.audit_tables.audit_tables_from_frame`) -> :func:`run_tables`, and
EquiLense's MPPD on the records when it has them; a network
calls :func:`run_tables` on the summed tables and gets the same cells as the pooled
audit, bit for bit (tests/batch_axes/test_table_engine.py).

* Axis 1: :func:`monitor.core.axis1.run_axis1` on every model's tables of the records
  with an outcome (a model that misses outcomes: :func:`monitor.core.outcome_split.run_split`,
  the label-free metrics on its label-free tables);
* Axis 2: :func:`batch_axes.runner.run_axis2` on the same tables, with each model's
  event-time span for the time to reliable;
* Axis 3: :func:`batch_axes.runner.run_axis3_counts` on each model's per-hospital counts;
* tiers: :func:`batch_axes.runner.cell_with_axes`, one cell at a time (the stream's tier
  assembly, :func:`monitor.core.results.axes_tier`).

EquiLense: its group metrics are functions of the tables and come with ``equilense=True``;
its MPPD and individual-fairness gap compare records pair by pair, so this engine leaves
them out and its result says so (``mppd_note``); the audit adds them from its records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from batch_axes.audit_tables import AuditTables
from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result
from batch_axes.equilense import EquiLenseResult
from batch_axes.runner import (
    Tables,
    cell_with_axes,
    run_axis2,
    run_axis3_counts,
    run_equilense_groups,
)
from monitor.config import MonitorConfig
from monitor.config.engine import engine_options
from monitor.core.axis1 import run_axis1
from monitor.core.cell_result import CellResult
from monitor.core.engine_options import EngineOptions
from monitor.core.outcome_split import run_split, split_rules
from monitor.core.results import CellEvaluation

_T = TypeVar("_T")

#: The note of the EquiLense result of a run on count tables.
NO_MPPD_ON_TABLES = (
    "MPPD and the individual-fairness gap compare records pair by pair: not run on count "
    "tables (the group metrics are)"
)


class Step(Protocol):
    """Runs one named step of an audit and returns its result (a progress display times
    it: :class:`monitor.audit.run.Progress`)."""

    def __call__(self, name: str, fn: Callable[[], _T], /) -> _T: ...


def _run(name: str, fn: Callable[[], _T]) -> _T:
    return fn()


@dataclass(frozen=True)
class TableAudit:
    """What the engine computed on count tables: one cell per (model, metric, attribute)
    in Axis 1's order, Axis 3's notes per model, and EquiLense's group metrics when asked
    (None otherwise)."""

    cells: list[CellEvaluation]
    notes: list[str] = field(default_factory=list)
    equilense: EquiLenseResult | None = None


def run_tables(
    tables: AuditTables,
    config: MonitorConfig,
    *,
    options: EngineOptions | None = None,
    equilense: bool = True,
    step: Step = _run,
) -> TableAudit:
    """Axis 1, Axis 2, Axis 3 and the tiers of every cell of ``tables`` as ``config`` says
    (``options``: Axis 1's, default :func:`engine_options` of ``config``); with
    ``equilense``, EquiLense's group metrics too (never MPPD: :data:`NO_MPPD_ON_TABLES`).
    ``step`` runs each axis (the audit's progress lines and timings)."""
    opts = engine_options(config) if options is None else options
    a1 = step("axis 1: verdict flip rate", lambda: _axis1(tables, opts, config.axis1.seed))
    a2 = step("axis 2: minimum audit size", lambda: _axis2(tables, config))
    a3 = step(
        "axis 3: hospital agreement",
        lambda: {m.model_id: run_axis3_counts(m.model_id, m.counts, config, m.free)
                 for m in tables},
    )  # fmt: skip
    a2_by = {(c.model_id, c.metric, c.attribute): c for c in a2}
    # small-cell rule: a model with fewer than 11 records in the cohort shows "<11" in
    # place of every figure of its cells (where they are published: published_audit_cell)
    cells = [
        cell_with_axes(
            c, a2_by.get((c.model_id, c.metric, c.attribute)), a3.get(c.model_id), config
        )
        for c in a1
    ]
    eq = None
    if equilense:
        eq = step(
            "equilense: group metrics",
            lambda: run_equilense_groups(tables.joined_tables(), config, (), NO_MPPD_ON_TABLES),
        )
    return TableAudit(cells=cells, notes=axis3_notes(a3), equilense=eq)


def axis3_notes(results: dict[str, Axis3Result]) -> list[str]:
    """One line per model whose Axis 3 could not run or was adapted, sorted."""
    return sorted({f"{m}: axis 3 {r.reason or r.note}" for m, r in results.items()
                   if r.reason or r.note})  # fmt: skip


def _partition(tables: AuditTables) -> tuple[AuditTables, AuditTables, Tables]:
    """(the models whose outcomes are all in, those missing some, the latter's label-free
    tables)."""
    whole = AuditTables(tuple(m for m in tables if m.free is None))
    split = AuditTables(tuple(m for m in tables if m.free is not None))
    free = {(m.model_id, k): t for m in split for k, t in m.label_free().tables.items()}
    return whole, split, free


def _axis1(tables: AuditTables, options: EngineOptions, seed: int) -> list[CellResult]:
    """Axis 1 of every model: one run of the models whose outcomes are all in, a split run
    (label-free metrics on every record) of those missing some; cells in model order."""
    whole, split, free = _partition(tables)
    cells = run_axis1(whole.joined_tables(), options, seed) if whole.models else []
    if not split.models:
        return cells
    cells += run_split(free, split.joined_tables(), options, seed)
    return sorted(cells, key=lambda c: c.model_id)  # stable: each model's order is kept


def _axis2(tables: AuditTables, config: MonitorConfig) -> list[Axis2Cell]:
    """Axis 2 of every model (as :func:`batch_axes.runner.run_axis2_counts`, all models in
    one run): a model missing outcomes has its label-free metrics on every record."""
    days = tables.cohort_days()
    whole, split, free = _partition(tables)
    cells = run_axis2(whole.joined_tables(), config, days) if whole.models else []
    free_rules, labelled = split_rules(config.metrics)
    if split.models and free_rules:
        cells += run_axis2(free, config, days, free_rules)
    if split.models and labelled:
        cells += run_axis2(split.joined_tables(), config, days, labelled)
    return cells
