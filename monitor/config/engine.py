"""The configuration's reading for the engine: what :mod:`monitor.core` runs with.

Why here: the core owns its option types (:class:`~monitor.core.engine_options.
EngineOptions`, :class:`~monitor.core.intersections.Intersection`) and imports no
configuration; the configuration, one layer up, says how its sections map onto them.

>>> from monitor.config import config_from_mapping
>>> cfg = config_from_mapping({"intersections": [{"attributes": ["race", "sex"]}],
...                            "pooling": {"enabled": True, "prior_strength": 100}})
>>> opts = engine_options(cfg)
>>> opts.K, opts.N, sorted(opts.pooled_attributes), opts.prior_strength
(500, 10000, ['race_x_sex'], 100.0)
>>> engine_options(cfg, threads=1).threads
1
"""

from __future__ import annotations

from monitor.config import MonitorConfig
from monitor.core.engine_options import EngineOptions
from monitor.core.intersections import Intersection


def engine_options(config: MonitorConfig, threads: int | None = None) -> EngineOptions:
    """The configured engine: ``[axis1]``, ``metrics``, ``[[intersections]]`` and
    ``[pooling]``; ``threads`` overrides ``axis1.threads`` (the service evaluates one
    model at a time, where a thread pool costs more than it saves)."""
    a, pc = config.axis1, config.pooling
    intersections = intersections_of(config)
    pooled: frozenset[str] = frozenset()
    if pc.enabled:
        pooled = frozenset(pc.attributes) if pc.attributes else frozenset(intersections)
    return EngineOptions(
        rules=tuple(config.metrics),
        K=a.K,
        N=a.N,
        min_group_support=a.min_group_support,
        threads=a.threads if threads is None else threads,
        intersections=intersections,
        pooled_attributes=pooled,
        prior_strength=pc.prior_strength,
        pooled_verdict=pc.enabled and pc.verdict == "pooled",
    )


def intersections_of(config: MonitorConfig) -> dict[str, Intersection]:
    """name -> :class:`Intersection` for every ``[[intersections]]`` entry of ``config``."""
    return {
        inter.name: Intersection(
            inter.name,
            tuple(inter.attributes),
            tuple(config.attribute(a).codes for a in inter.attributes),
        )
        for inter in config.intersections
    }
