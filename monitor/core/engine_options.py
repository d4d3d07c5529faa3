"""How the Axis 1 engine is run: its parameters, read once from the configuration
(:func:`monitor.config.engine.engine_options`).

Why one type: the offline audit, the streaming service (in process and in its evaluation
worker), the intervention audit and the benches each spelt K, N, the support rule and the
pooling options again, and the stream never passed pooling at all: a setting honoured by
one path and silently dropped by another. Every path now builds :class:`EngineOptions`
with :func:`monitor.config.engine.engine_options` and hands it to
:func:`monitor.core.axis1.run_axis1` or :func:`monitor.core.outcome_split.run_split`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from monitor.core.intersections import Intersection
from monitor.core.method import MIN_GROUP_SUPPORT, MetricRule


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
