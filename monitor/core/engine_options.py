"""How the Axis 1 engine is run, read once from the configuration.

Why one type: the offline audit, the streaming service (in process and in its evaluation
worker), the intervention audit and the benches each spelt K, N, the support rule and the
pooling options again, and the stream never passed pooling at all: a setting honoured by
one path and silently dropped by another. Every path now builds :class:`EngineOptions`
with :func:`engine_options` and hands it to :func:`monitor.core.axis1.run_axis1` or
:func:`monitor.core.outcome_split.run_split`.

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

from collections.abc import Mapping
from dataclasses import dataclass, field

from monitor.config import MIN_GROUP_SUPPORT, MetricRule, MonitorConfig
from monitor.core.intersections import Intersection, intersections_of


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """Axis 1's parameters (docs/method.md section 3) and the opt-in pooled estimates.

    ``pooled_attributes`` are intersections (keys of ``intersections``) whose poolable
    metrics carry a pooled estimate; ``prior_strength`` None is the method of moments;
    ``pooled_verdict`` makes the pooled estimate the verdict.
    """

    rules: tuple[MetricRule, ...]
    K: int = 500
    N: int = 10_000
    min_group_support: int = MIN_GROUP_SUPPORT
    threads: int = 1
    intersections: Mapping[str, Intersection] = field(default_factory=dict)
    pooled_attributes: frozenset[str] = frozenset()
    prior_strength: float | None = None
    pooled_verdict: bool = False


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
