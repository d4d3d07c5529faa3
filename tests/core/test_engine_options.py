"""One reading of the configuration for every path that runs the Axis 1 engine."""

from __future__ import annotations

import pickle

from monitor.config import config_from_mapping
from monitor.config.engine import engine_options
from monitor.core.engine_options import EngineOptions

CFG = config_from_mapping(
    {
        "axis1": {"K": 80, "N": 900, "min_group_support": 15, "threads": 2},
        "intersections": [{"attributes": ["race", "sex"]}, {"attributes": ["race", "age_group"]}],
        "pooling": {"enabled": True, "attributes": ["race_x_sex"], "verdict": "pooled"},
    }
)


def test_every_setting_is_read():
    o = engine_options(CFG)
    assert (o.K, o.N, o.min_group_support, o.threads) == (80, 900, 15, 2)
    assert o.rules == tuple(CFG.metrics)
    assert list(o.intersections) == ["race_x_sex", "race_x_age_group"]
    assert o.pooled_attributes == {"race_x_sex"} and o.pooled_verdict
    assert o.prior_strength is None
    assert engine_options(CFG, threads=1).threads == 1


def test_pooling_off_pools_nothing_and_every_intersection_pools_when_none_is_listed():
    off = engine_options(CFG.model_copy(update={"pooling": CFG.pooling.model_copy(
        update={"enabled": False})}))  # fmt: skip
    assert off.pooled_attributes == frozenset() and not off.pooled_verdict
    every = engine_options(CFG.model_copy(update={"pooling": CFG.pooling.model_copy(
        update={"attributes": ()})}))  # fmt: skip
    assert every.pooled_attributes == {"race_x_sex", "race_x_age_group"}


def test_options_travel_to_the_evaluation_worker_unchanged():
    o = engine_options(CFG, threads=1)
    back = pickle.loads(pickle.dumps(o))
    assert isinstance(back, EngineOptions) and back == o
