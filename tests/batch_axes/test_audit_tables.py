"""Audit tables (batch_axes.audit_tables): the tables of a frame, their sum, their vector.

The sum of the tables of disjoint record sets is the tables of their union, model by
model (models in one part only, missing outcomes on one side only, hospitals shared or
not), and the int64 vector carries them bit for bit, in a site's own layout or in a
network's joined one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batch_axes.audit_tables import (
    AuditTables,
    EventSpan,
    ModelTables,
    audit_tables_from_frame,
)
from batch_axes.cohort_counts import CohortCounts
from monitor.config import config_from_mapping

CONFIG = config_from_mapping({
    "attributes": [
        {"name": "race", "groups": {"0": "A", "1": "B", "2": "C"}},
        {"name": "sex", "groups": {"0": "F", "1": "M"}},
    ],
    "intersections": [{"attributes": ["race", "sex"]}],
})  # fmt: skip


def records(n: int, seed: int, models: int = 2, pending: float = 0.0) -> pd.DataFrame:
    """Validated records as the audit holds them: label -1 while the outcome is missing."""
    rng = np.random.default_rng(seed)
    hosp = np.array([f"h{h}" for h in rng.integers(0, 8, n)], dtype=object)
    hosp[rng.uniform(size=n) < 0.1] = None
    score = rng.uniform(size=n)
    label = rng.integers(0, 2, n)
    label[rng.uniform(size=n) < pending] = -1
    return pd.DataFrame({
        "model_id": rng.choice([f"m{i}" for i in range(models)], n),
        "hospital_id": hosp,
        "label": label,
        "decision": (score > 0.5).astype(np.int64),
        "score": score,
        "race": rng.integers(0, 3, n).astype(str),
        "sex": rng.integers(0, 2, n).astype(str),
        "event_time": pd.Timestamp("2026-01-01", tz="UTC")
        + pd.to_timedelta(rng.integers(0, 10**15, n), unit="ns"),
    })  # fmt: skip


def tables(frame: pd.DataFrame) -> AuditTables:
    return audit_tables_from_frame(frame, CONFIG)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 600), st.integers(0, 2**31), st.integers(1, 3), st.integers(2, 3),
    st.sampled_from([0.0, 0.3]), st.booleans(),
)  # fmt: skip
def test_the_sum_of_disjoint_parts_is_the_tables_of_their_union(n, seed, models, parts, pending,
                                                                 by_model):  # fmt: skip
    """Split at random, or so that a model is in one part only; a part may miss outcomes
    while another has them all."""
    frame = records(n, seed, models, pending)
    rng = np.random.default_rng(seed)
    if by_model:
        part_of = frame["model_id"].str[1:].astype(int).to_numpy() % parts
    else:
        part_of = rng.integers(0, parts, n)
    pieces = [tables(frame[part_of == p]) for p in range(parts)]
    total = pieces[0]
    for p in pieces[1:]:
        total = total + p
    whole = tables(frame)
    assert total == whole
    assert [m.model_id for m in total] == sorted(frame["model_id"].unique())
    for got, want in zip(total, whole, strict=True):
        assert (got.free is None) == (want.free is None)
        assert got.span == want.span
        assert got.counts.tables == want.counts.tables
    assert total.cohort_days() == whole.cohort_days()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 500), st.integers(0, 2**31), st.sampled_from([0.0, 0.4]))
def test_the_vector_round_trip_is_bit_identical(n, seed, pending):
    t = tables(records(n, seed, 2, pending))
    vector, layout = t.to_vector()
    assert vector.dtype == np.int64 and vector.size == layout.size
    back = AuditTables.from_vector(vector, layout)
    assert back == t
    again, same = back.to_vector()
    np.testing.assert_array_equal(again, vector)
    assert same == layout


def test_sites_write_in_the_joined_layout_and_their_vectors_sum_to_the_union():
    """Site B has a model A lacks and misses outcomes: in the joined layout A writes
    zeros for that model and its label-merged counts as the label-free part."""
    frame = records(3_000, seed=1, models=2, pending=0.0)
    a_rows = (frame["model_id"] == "m0") & frame["hospital_id"].isin(["h0", "h1", "h2"])
    b = frame[~a_rows].copy()
    b.loc[b.index[::7], "label"] = -1
    site_a, site_b = tables(frame[a_rows]), tables(b)
    assert [m.model_id for m in site_a] == ["m0"]
    joined = site_a.layout().union(site_b.layout())
    assert [(m.model_id, m.free) for m in joined.models] == [("m0", True), ("m1", True)]
    (va, la), (vb, lb) = site_a.to_vector(joined), site_b.to_vector(joined)
    la.check_compatible(lb)
    summed = AuditTables.from_vector(va + vb, la.union(lb))
    assert summed == tables(pd.concat([frame[a_rows], b]))
    with pytest.raises(ValueError, match="label-free counts"):
        site_b.to_vector(tables(frame[~a_rows]).layout())  # every outcome in: no such part
    with pytest.raises(ValueError, match="no place for model"):
        tables(frame).to_vector(site_a.layout())


def test_incompatible_tables_and_layouts_are_named():
    t = tables(records(200, seed=2))
    other = config_from_mapping({"attributes": [
        {"name": "race", "groups": {"0": "A", "1": "B", "2": "C", "3": "D"}},
        {"name": "sex", "groups": {"0": "F", "1": "M"}},
    ], "intersections": [{"attributes": ["race", "sex"]}]})  # fmt: skip
    u = audit_tables_from_frame(records(200, seed=3), other)
    with pytest.raises(ValueError, match=r"model 'm0': .*attribute 'race' has different group"):
        t + u
    with pytest.raises(ValueError, match=r"model 'm0': .*different"):
        t.layout().check_compatible(u.layout())
    with pytest.raises(ValueError, match="different models"):
        t.layout().check_compatible(tables(records(200, seed=2, models=1)).layout())
    with pytest.raises(ValueError, match="takes a flat vector"):
        AuditTables.from_vector(t.to_vector()[0][:-1], t.layout())


def test_spans_join_as_a_hull_in_nanoseconds():
    a = EventSpan(pd.Timestamp("2026-01-02", tz="UTC"), pd.Timestamp("2026-01-05", tz="UTC"))
    b = EventSpan(pd.Timestamp("2026-01-01T00:00:00.5", tz="UTC").as_unit("ms"),
                  pd.Timestamp("2026-01-03", tz="UTC").as_unit("s"))  # fmt: skip
    hull = a | b
    assert hull.first.unit == hull.last.unit == "ns"
    assert hull.days == (4 * 86_400 - 0.5) / 86_400


def test_a_model_is_held_once_in_order_and_models_do_not_add_across():
    m = ModelTables("b", CohortCounts(CONFIG.grid_attributes))
    with pytest.raises(ValueError, match="once, in model id order"):
        AuditTables((m, ModelTables("a", CohortCounts(CONFIG.grid_attributes))))
    with pytest.raises(ValueError, match="two models"):
        m + ModelTables("a", CohortCounts(CONFIG.grid_attributes))
