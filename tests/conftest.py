"""Shared test set-up: repeatable hypothesis runs, the --runslow switch, and the session's
real Kafka brokers as fixtures for every test module (started only when a test asks)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.support.kafka import (  # noqa: F401 (fixtures)
    _stoppable_broker,
    kafka_broker,
    kafka_scram_broker,
    own_kafka_broker,
)

# Repeatable: the same examples on every run and every machine.
settings.register_profile(
    "repeatable",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("repeatable")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow", action="store_true", default=False,
        help="also run the long variants (tests marked slow: 200,000-event crash run, ...)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long variant, run only with --runslow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests are deselected (not skipped) unless --runslow is given."""
    if config.getoption("--runslow"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
