"""From records to count tables (monitor.core.tables), against a record-by-record count.

Each (model, attribute) table's counts per (group, label, decision, score bin) and its
score sums are recounted here with plain loops over the records (the oracle), on frames
hypothesis draws; an intersection's group is its parts' codes joined, as
:func:`monitor.config.intersection_groups` names them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import config_from_mapping
from monitor.core.tables import attribute_groups, grid_groups, group_index, tables_from_frame

CFG = config_from_mapping({"intersections": [{"attributes": ["race", "sex"]}]})
ATTRS = {a.name: a for a in CFG.attributes}


@st.composite
def frames(draw) -> pd.DataFrame:
    n = draw(st.integers(1, 60))
    col = {a.name: st.sampled_from(a.codes) for a in CFG.attributes}
    rows = draw(st.lists(st.fixed_dictionaries({
        "model_id": st.sampled_from(["m-a", "m-b"]),
        "label": st.integers(0, 1), "decision": st.integers(0, 1),
        "score": st.floats(0, 1, allow_nan=False), **col,
    }), min_size=n, max_size=n))  # fmt: skip
    return pd.DataFrame(rows)


def _oracle(frame: pd.DataFrame, model: str, attr_name: str, bins: int):
    attr = next(a for a in CFG.grid_attributes if a.name == attr_name)
    counts = np.zeros((len(attr.codes), 2, 2, bins), dtype=np.int64)
    sums = np.zeros(counts.shape)
    parts = attr_name.split("_x_") if attr_name not in ATTRS else [attr_name]
    for rec in frame[frame["model_id"] == model].to_dict("records"):
        code = ":".join(str(rec[p]) for p in parts)
        b = min(math.floor(rec["score"] * bins), bins - 1)
        cell = (attr.codes.index(code), rec["label"], rec["decision"], b)
        counts[cell] += 1
        sums[cell] += rec["score"]
    return counts, sums


@settings(max_examples=40)  # each example builds a frame: 40 keep the file fast
@given(frames())
def test_every_table_counts_what_the_records_hold(frame):
    tables = tables_from_frame(frame, CFG)
    models = sorted(frame["model_id"].unique())
    assert sorted(tables) == sorted((m, a.name) for m in models for a in CFG.grid_attributes)
    bins = CFG.axis1.score_bins
    for (model, attr), table in tables.items():
        counts, sums = _oracle(frame, model, attr, bins)
        np.testing.assert_array_equal(table.counts, counts)
        np.testing.assert_allclose(table.score_sum, sums, rtol=1e-12, atol=1e-12)
        assert table.n == (frame["model_id"] == model).sum()


def test_group_index_of_strings_and_of_other_types():
    race = ATTRS["race"]
    codes = list(race.codes)
    assert group_index(np.array(codes[::-1], dtype=object), race).tolist() == list(
        range(len(codes))
    )[::-1]
    # codes read as numbers (a CSV column of digits): looked up by their text
    numeric = [int(c) for c in codes if c.isdigit()]
    assert group_index(pd.Series(numeric), race).tolist() == [codes.index(str(c)) for c in numeric]
    assert group_index(np.array([], dtype=object), race).tolist() == []
    for bad in (np.array(["nope"], dtype=object), np.array([10**6], dtype=object)):
        with pytest.raises(ValueError, match="unknown group code for attribute 'race'"):
            group_index(bad, race)


def test_an_intersection_index_is_the_mixed_radix_number_of_its_parts():
    frame = pd.DataFrame({a.name: [a.codes[-1], a.codes[0]] for a in CFG.attributes})
    got = attribute_groups(frame, CFG)
    inter = CFG.grid_attributes[-1]
    assert inter.name == "race_x_sex"
    assert [inter.codes[i] for i in got["race_x_sex"]] == [
        f"{ATTRS['race'].codes[-1]}:{ATTRS['sex'].codes[-1]}",
        f"{ATTRS['race'].codes[0]}:{ATTRS['sex'].codes[0]}",
    ]
    # without intersections the configured attributes pass through unchanged
    plain = config_from_mapping({})
    groups = {a.name: np.array([0, 1]) for a in plain.attributes}
    assert grid_groups(groups, plain).keys() == groups.keys()
