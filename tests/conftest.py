"""Shared test set-up: repeatable hypothesis runs, the --runslow switch, and the session's
real Kafka brokers as fixtures for every test module (started only when a test asks)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from monitor.core import locks
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

# The lock-order checker (monitor.core.locks) is on for the whole suite: in this process,
# and through the environment in every service process a test starts, which appends what
# it finds to this worker's file.
_LOCK_FILE = Path(tempfile.gettempdir()) / f"vfr-lock-check-{os.getpid()}.jsonl"
_LOCK_FILE.unlink(missing_ok=True)
os.environ[locks.ENV] = str(_LOCK_FILE)
locks.enable_checking(True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test's report carries the log of every service process it started (and
    of any still running), whatever failed: an assertion, a timeout, a teardown."""
    from tests.support.service_process import STARTED

    report = yield
    if call.when == "setup":
        item.stash[_FIRST_PROCESS] = len(STARTED)
    if report.failed:
        first = item.stash.get(_FIRST_PROCESS, len(STARTED))
        for i, svc in enumerate(STARTED):
            if i >= first or svc.proc.poll() is None:
                state = "running" if svc.proc.poll() is None else f"exit {svc.proc.returncode}"
                report.sections.append(
                    (f"service log: {svc.command} pid {svc.proc.pid} ({state})", svc.output())
                )
    return report


_FIRST_PROCESS = pytest.StashKey[int]()


@pytest.fixture(autouse=True)
def _lock_order_checked() -> Iterator[None]:
    """Fails the test when a lock was taken out of the written order while it ran (here
    or in a service process it started)."""
    before = len(locks.violations())
    size = _LOCK_FILE.stat().st_size if _LOCK_FILE.exists() else 0
    yield
    found = [f"{v.message()}\n{v.stack}" for v in locks.violations()[before:]]
    if _LOCK_FILE.exists() and _LOCK_FILE.stat().st_size > size:
        with _LOCK_FILE.open(encoding="utf-8") as f:
            f.seek(size)
            found += [f"(a service process) {line.strip()}" for line in f if line.strip()]
    if found:
        pytest.fail("lock order violations:\n" + "\n".join(found), pytrace=False)


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
