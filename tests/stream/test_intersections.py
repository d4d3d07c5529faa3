"""Intersections (issue 24): configured, derived per record, and audited as attributes.

The oracle of every intersection figure is the same figure of a plain attribute whose
code is the joined codes, written into the records one by one (string joins, no mixed
radix): what a user would get by adding a ``race_x_sex`` column to the data.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from monitor.config import ConfigError, config_from_mapping
from monitor.config.engine import engine_options
from monitor.core.counts import CountTable
from monitor.core.outcome_split import run_split, split_tables_from_frame
from monitor.core.tables import tables_from_frame
from monitor.store import Store
from monitor.stream.pipeline import Pipeline
from tests.support.pipeline_runs import feed, scored_payloads, stored_results

INTER = [{"attributes": ["race", "sex"]}, {"attributes": ["race", "sex", "age_group"]}]
CFG = config_from_mapping(
    {
        "window": {"size": 1500, "hop_records": 400, "hop_seconds": 0},
        "axis1": {"K": 120},
        "models": [{"id": "model-00"}, {"id": "model-01"}],
        "intersections": INTER,
    }
)


def _joined(frame: pd.DataFrame, parts: list[str]) -> np.ndarray:
    """Each record's intersection code, joined record by record (the oracle)."""
    return np.array([":".join(str(r[p]) for p in parts) for _, r in frame.iterrows()], object)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"attributes": ["race"]}, "two or three different configured attribute names"),
        ({"attributes": ["race", "race"]}, "two or three different configured attribute names"),
        ({"attributes": ["race", "sex", "ethnicity", "age_group"]}, "two or three"),
        ({"attributes": ["race", "zip"]}, "unknown attributes ['zip']"),
    ],
)
def test_an_intersection_naming_no_two_or_three_configured_attributes_is_refused(entry, message):
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"intersections": [entry]})
    assert "intersections.0.attributes" in str(err.value) and message in str(err.value)


def test_an_intersection_configured_twice_is_refused():
    with pytest.raises(ConfigError, match=r"intersections\.1\.attributes.*race_x_sex"):
        config_from_mapping({"intersections": [INTER[0], INTER[0]]})


def test_intersection_groups_are_the_combinations_with_readable_names():
    grid = {a.name: a for a in CFG.grid_attributes}
    assert [a.name for a in CFG.attributes] == ["race", "sex", "ethnicity", "age_group"]
    assert list(grid) == [*(a.name for a in CFG.attributes), "race_x_sex", "race_x_sex_x_age_group"]
    assert len(grid["race_x_sex"].codes) == 10 and len(grid["race_x_sex_x_age_group"].codes) == 40
    assert grid["race_x_sex"].groups["2:1"] == "Black x Female"
    assert grid["race_x_sex_x_age_group"].groups["3:0:3"] == "White x Male x Elderly (65+)"


def test_records_carry_no_intersection_field():
    """An intersection is derived, never input: a message that carries one is refused
    like any unknown field, so no record can claim a group its attributes do not make."""
    from monitor.stream.schema import validate_records

    rec = json.loads(scored_payloads(n=1, models=1)[0])
    checked = validate_records([rec, {**rec, "race_x_sex": "2:1"}], CFG)
    assert len(checked.valid) == 1 and [r.index for r in checked.rejected] == [1]


def test_intersection_tables_equal_tables_of_a_joined_code_column():
    records = pd.DataFrame([json.loads(p) for p in scored_payloads(n=1200, models=1)])
    records["decision"] = (records["score"] >= 0.5).astype(int)
    tables = tables_from_frame(records, CFG)
    for inter in CFG.intersections:
        attr = next(a for a in CFG.grid_attributes if a.name == inter.name)
        lookup = {c: i for i, c in enumerate(attr.codes)}
        g = np.array([lookup[c] for c in _joined(records, list(inter.attributes))])
        want = CountTable.from_records(
            attr.codes, g, records["label"].to_numpy(), records["decision"].to_numpy(),
            records["score"].to_numpy(), CFG.axis1.score_bins,
        )  # fmt: skip
        got = tables[("model-00", inter.name)]
        np.testing.assert_array_equal(got.counts, want.counts)
        np.testing.assert_allclose(got.score_sum, want.score_sum)


def test_streamed_intersection_cells_equal_the_offline_engine_and_survive_a_restart(tmp_path):
    """Every hop evaluates the intersection cells; the window rebuilt from the store (which
    holds no intersection column) gives the same results as an uninterrupted run."""
    payloads = scored_payloads(n=1500)
    ref = Store(tmp_path / "ref.duckdb", CFG)
    feed(Pipeline(CFG, ref), payloads)
    wr = stored_results(ref)
    rows = wr[wr["model_id"] == "model-00"].iloc[-7 * 6 :]
    end = int(rows["window_end_count"].iloc[0])
    records = ref.window_records("model-00", end_count=end, last_n=CFG.window.size)
    # DI and SPD stratify by group only (issue 23): the split engine is the offline one
    offline = run_split(
        *split_tables_from_frame(records.assign(model_id="model-00"), CFG),
        engine_options(CFG, threads=1), int(rows["seed"].iloc[0]),
    )  # fmt: skip
    got = {(r["metric"], r["attribute"]): r for r in rows["result"]}
    assert len(offline) == len(got) == 7 * 6
    for c in offline:
        stored = got[(c.metric, c.attribute)]
        for key in ("n_pass", "vfr", "window_n", "groups_evaluated", "groups_total"):
            assert stored[key] == getattr(c, key), (c.metric, c.attribute, key)
    sparse = got[("DI", "race_x_sex_x_age_group")]
    assert sparse["groups_total"] == 40 and sparse["groups_evaluated"] < 40
    assert sparse["support_note"].startswith(f"{sparse['groups_evaluated']} of 40 groups")

    path = tmp_path / "restarted.duckdb"
    s1 = Store(path, CFG)
    feed(Pipeline(CFG, s1), payloads[:1332])
    s1.close()
    s2 = Store(path, CFG)
    feed(Pipeline(CFG, s2), payloads[999:])  # windows rebuilt from the stored attributes
    pd.testing.assert_frame_equal(stored_results(ref), stored_results(s2))


def test_codes_whose_joins_collide_are_refused():
    attrs = [{"name": "a", "groups": {"1:2": "x", "1": "y"}},
             {"name": "b", "groups": {"3": "p", "2:3": "q"}}]  # fmt: skip
    with pytest.raises(ConfigError, match=r"intersections\.0\.attributes.*share a code"):
        config_from_mapping({"attributes": attrs, "intersections": [{"attributes": ["a", "b"]}]})


def test_configured_pooling_reaches_the_streamed_intersection_cells(tmp_path):
    """Issue 38's defect as a user meets it: ``[pooling]`` on a configured ``race_x_sex``.
    The groups are coded "2:1", and pooling once recovered a group's parents by splitting
    its name on " x ", while the stream never passed the pooling options at all: no
    streamed cell carried a pooled estimate. Now every poolable race_x_sex cell does, and
    it is the offline engine's (same options, same seed); attribute cells do not pool."""
    cfg = config_from_mapping(
        {
            "window": {"size": 1500, "hop_records": 500, "hop_seconds": 0},
            "axis1": {"K": 120},
            "models": [{"id": "model-00"}],
            "intersections": [{"attributes": ["race", "sex"]}],
            "pooling": {"enabled": True, "prior_strength": 100},
        }
    )
    store = Store(tmp_path / "pooled.duckdb", cfg)
    feed(Pipeline(cfg, store), scored_payloads(n=1500, models=1))
    wr = stored_results(store)
    last = wr[wr["evaluation"] == wr["evaluation"].max()]
    got = {(r["metric"], r["attribute"]): r for r in last["result"]}
    pooled = {k for k, r in got.items() if r.get("pooled_value") is not None
              and not math.isnan(float(r["pooled_value"]))}  # fmt: skip
    assert pooled == {(m, "race_x_sex") for m in ("DI", "SPD", "EOPP", "EOD", "PP")}
    end = int(last["window_end_count"].iloc[0])
    records = store.window_records("model-00", end_count=end, last_n=cfg.window.size)
    offline = run_split(
        *split_tables_from_frame(records.assign(model_id="model-00"), cfg),
        engine_options(cfg, threads=1), int(last["seed"].iloc[0]),
    )  # fmt: skip
    for c in offline:
        if (c.metric, c.attribute) in pooled:
            stored = got[(c.metric, c.attribute)]
            assert stored["pooled_value"] == c.pooled.value
            assert stored["pooled_vfr"] == c.pooled.vfr
            assert stored["pooled_strength"] == 100.0 == c.pooled.strength


def test_pooling_without_an_intersection_to_pool_is_refused():
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"pooling": {"enabled": True}})
    assert "pooling.enabled" in str(err.value) and "[[intersections]]" in str(err.value)
    with pytest.raises(ConfigError) as err:
        config_from_mapping(
            {"intersections": INTER[:1], "pooling": {"enabled": True, "attributes": ["race"]}}
        )
    assert "pooling.attributes" in str(err.value) and "race_x_sex" in str(err.value)
