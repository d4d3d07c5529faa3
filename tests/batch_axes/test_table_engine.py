"""The engine on count tables (batch_axes.table_engine) gives the audit's cells bit for bit:
on the tables of a frame, on the sum of several sites' tables carried as int64 vectors
(a hospital network), and against the record-level composition the audit ran before it
started from tables (tables_from_frame, Axis 3 on records, per-frame event-time spans)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import numpy as np
import pandas as pd
import pytest

from batch_axes.audit_tables import AuditTables, audit_tables_from_frame
from batch_axes.runner import (
    cell_with_axes,
    run_axis2,
    run_axis2_split,
    run_axis3,
    run_axis3_split,
)
from batch_axes.table_engine import NO_MPPD_ON_TABLES, run_tables
from monitor.audit.input_mapping import load_audit_cohort
from monitor.audit.run import run_audit
from monitor.config import MonitorConfig, config_from_mapping
from monitor.config.engine import engine_options
from monitor.core.axis1 import run_axis1
from monitor.core.outcome_split import run_split, split_tables_from_frame
from monitor.core.results import CellEvaluation
from monitor.core.tables import tables_from_frame
from tests.support.hospital_network import scored_frame, site_of

#: An intersection with pooling on (the engine's options come from the configuration),
#: a small K so the test stays quick; Axis 3 on 20 folds of 25 hospitals.
CONFIG = config_from_mapping({
    "axis1": {"K": 120, "N": 4_000},
    "axis2": {"R": 12},
    "intersections": [{"attributes": ["race", "sex"]}],
    "pooling": {"enabled": True, "prior_strength": 100},
})  # fmt: skip


def bits(x: Any) -> Any:
    """A value with every float as its eight bytes: equal means equal to the bit (NaN's
    payload and the sign of zero included)."""
    if isinstance(x, float):
        return struct.pack("<d", x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = dataclasses.fields(x)
        return (type(x).__name__, [(f.name, bits(getattr(x, f.name))) for f in fields])
    if isinstance(x, list | tuple):
        return [bits(v) for v in x]
    if isinstance(x, dict):
        return {k: bits(v) for k, v in x.items()}
    return x


def assert_same_cells(got: list[CellEvaluation], want: list[CellEvaluation]) -> None:
    assert [(c.model_id, c.metric, c.attribute) for c in got] == [
        (c.model_id, c.metric, c.attribute) for c in want
    ]
    for g, w in zip(got, want, strict=True):
        assert bits(g) == bits(w), (g.model_id, g.metric, g.attribute)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return scored_frame(6_000, seed=38)


@pytest.fixture(scope="module")
def pooled(frame: pd.DataFrame):
    return run_audit(frame, CONFIG)


def _records(frame: pd.DataFrame, config: MonitorConfig = CONFIG) -> pd.DataFrame:
    return load_audit_cohort(frame, config).records


def test_the_pooled_audit_has_what_the_comparison_needs(pooled):
    """Not a vacuous comparison: both models, the intersection, kappas from 20 folds,
    times to reliable (from the event-time spans), and more than one tier."""
    cells = pooled.cells
    assert {c.model_id for c in cells} == {"model-00", "model-01"}
    assert any(c.attribute == "race_x_sex" for c in cells)
    assert any(c.kappa is not None and np.isfinite(c.kappa) for c in cells)
    assert any(c.axis2 is not None and c.axis2.records_to_reliable is not None
               for c in cells)  # the spans were used  # fmt: skip
    assert len({c.tier.tier for c in cells}) > 1


def test_the_engine_on_the_tables_of_a_frame_is_the_audit(frame, pooled):
    got = run_tables(audit_tables_from_frame(_records(frame), CONFIG), CONFIG)
    assert_same_cells(got.cells, pooled.cells)
    assert got.notes == pooled.notes
    assert got.equilense is not None
    assert bits(got.equilense.group_metrics) == bits(pooled.equilense.group_metrics)
    assert got.equilense.mppd_note == NO_MPPD_ON_TABLES and not got.equilense.models


@pytest.mark.parametrize("sites", [2, 3])
def test_a_network_sum_of_site_vectors_is_the_pooled_audit(frame, pooled, sites):
    """Each site validates its own rows and builds its tables; the coordinator joins the
    sites' layouts, each site writes its vector in the joined layout, the vectors are
    summed element by element (what secure aggregation yields) and the engine runs on
    the sum: every cell, figure and tier is the pooled audit's, to the bit."""
    site = site_of(frame, sites)
    parts = [audit_tables_from_frame(_records(frame[site == k]), CONFIG) for k in range(sites)]
    layout = parts[0].layout()
    for p in parts[1:]:
        layout = layout.union(p.layout())
    written = [p.to_vector(layout) for p in parts]
    total = np.sum([v for v, _ in written], axis=0)
    spans = written[0][1]
    for _, lay in written[1:]:
        spans = spans.union(lay)
    summed = AuditTables.from_vector(total, spans)
    assert summed == audit_tables_from_frame(_records(frame), CONFIG)
    got = run_tables(summed, CONFIG)
    assert_same_cells(got.cells, pooled.cells)
    assert got.notes == pooled.notes


def test_the_engine_is_the_record_level_composition(frame, pooled):
    """The oracle: what run_audit ran before it started from tables (Axis 1 and Axis 2 on
    tables_from_frame, Axis 3 on each model's records, the spans of the whole frame)."""
    records = _records(frame)
    tables = tables_from_frame(records, CONFIG)
    times = pd.to_datetime(records["event_time"], utc=True)
    span = times.groupby(records["model_id"]).agg(lambda t: (t.max() - t.min()).total_seconds())
    days = {str(m): float(v) / 86_400 for m, v in span.items()}
    a1 = run_axis1(tables, engine_options(CONFIG), CONFIG.axis1.seed)
    a2 = {(c.model_id, c.metric, c.attribute): c for c in run_axis2(tables, CONFIG, days)}
    a3 = {str(m): run_axis3(str(m), sub, CONFIG) for m, sub in records.groupby("model_id")}
    want = [cell_with_axes(c, a2.get((c.model_id, c.metric, c.attribute)), a3[c.model_id],
                           CONFIG) for c in a1]  # fmt: skip
    assert_same_cells(pooled.cells, want)


def test_missing_outcomes_run_as_the_record_level_split():
    """A cohort of predictions some of whose outcomes have not come (label -1): label-free
    metrics on every record, label-based ones on the records with an outcome, as the
    record-level split paths of the stream and the scheduled axes compute them."""
    records = _records(scored_frame(4_000, seed=7, models=1))
    rng = np.random.default_rng(7)
    records["label"] = np.where(rng.uniform(size=len(records)) < 0.3, -1, records["label"])
    tables = audit_tables_from_frame(records, CONFIG)
    assert tables.models[0].free is not None
    free, joined = split_tables_from_frame(records, CONFIG)
    a1 = run_split(free, joined, engine_options(CONFIG), CONFIG.axis1.seed)
    days = tables.cohort_days()
    a2 = {(c.model_id, c.metric, c.attribute): c for c in run_axis2_split(records, CONFIG, days)}
    a3 = run_axis3_split("model-00", records, CONFIG)
    want = [cell_with_axes(c, a2.get((c.model_id, c.metric, c.attribute)), a3, CONFIG)
            for c in a1]  # fmt: skip
    assert_same_cells(run_tables(tables, CONFIG).cells, want)


def test_the_audit_times_its_steps_as_before(frame):
    """The engine runs the axes as the audit's named steps (progress lines, timings)."""
    seen: list[str] = []

    def step(name, fn):
        seen.append(name)
        return fn()

    run_tables(audit_tables_from_frame(_records(frame[:2_000]), CONFIG), CONFIG,
               equilense=False, step=step)  # fmt: skip
    assert seen == [
        "axis 1: verdict flip rate", "axis 2: minimum audit size", "axis 3: hospital agreement"
    ]
