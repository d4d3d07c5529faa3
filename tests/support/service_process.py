"""Helpers of the Kafka fault tests: the service as a real process, its log, its store.

Not a test module: tests/scenarios/test_faults_kafka.py and the soak benchmark's test import it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from consumers.base import Origin
from monitor.config import MonitorConfig
from monitor.store import Store, queries
from monitor.stream.pipeline import Pipeline
from tests.support.store_reads import window_results

VFR = Path(sys.executable).with_name("vfr-monitor")


#: every service process started in this test run, in order: tests/conftest.py attaches the
#: log of each one a failing test started (or that still runs) to its report
STARTED: list[ServiceProcess] = []


class ServiceProcess:
    """`vfr-monitor run` in a subprocess; its output is read by a thread into ``lines``."""

    def __init__(self, cfg: Path, db: Path, *extra: str, command: str = "run"):
        STARTED.append(self)
        self.command = command
        env = {k: v for k, v in os.environ.items() if not k.startswith("VFR_KAFKA")}
        self.proc = subprocess.Popen(
            [str(VFR), command, "--config", str(cfg), "--db", str(db), "--port", "0", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )  # fmt: skip
        self.lines: list[tuple[float, str]] = []
        self.url: str | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 90
        while self.url is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self._reader.join(5)
                raise AssertionError("service did not start:\n" + self.output())
            time.sleep(0.02)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line))
            m = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            if m and self.url is None:
                self.url = m.group(1)

    def output(self) -> str:
        return "".join(line for _, line in self.lines)

    def wait_for_line(self, pattern: str, timeout: float, after: int = 0) -> int | None:
        """Index of the first line from ``after`` on matching ``pattern``; None on timeout."""
        deadline = time.monotonic() + timeout
        i = after
        while time.monotonic() < deadline and self.proc.poll() is None:
            while i < len(self.lines):
                if re.search(pattern, self.lines[i][1]):
                    return i
                i += 1
            time.sleep(0.005)
        return None

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL
        self.proc.wait(timeout=30)
        self._reader.join(10)

    def wait(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"service (pid {self.proc.pid}) still running {timeout} s later:\n"
                + self.output()
            ) from None
        self._reader.join(10)
        return rc

    def get(self, path: str) -> tuple[int, str]:
        assert self.url is not None
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except urllib.error.URLError as e:  # not answering: say whether it is still running
            state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
            raise AssertionError(f"service {state}, {path}: {e}\n" + self.output()) from e


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of one series in a Prometheus text exposition (None when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def metric_sum(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def paced(records: Iterable[Any], rate: float) -> Iterator[Any]:
    start = time.monotonic()
    for k, rec in enumerate(records):
        delay = start + k / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield rec


def reference_run(config: MonitorConfig, path: Path, records: list[dict], batch: int) -> Store:
    """The same records through the pipeline in-process, uninterrupted, in one partition's
    order per model."""
    store = Store(path, config)
    pipe = Pipeline(config, store)
    payloads = [json.dumps(r).encode() for r in records]
    for i in range(0, len(payloads), batch):
        chunk = payloads[i : i + batch]
        pipe.ingest_batch(chunk, [Origin("ref", 0, i + k) for k in range(len(chunk))])
    pipe.flush()
    return store


#: window_results columns and result fields that depend on when the scheduled axes ran
#: (they feed the tier), not on the stream
AXIS_DEPENDENT = {
    "tier", "tier_level", "failed_axes", "pending_axes", "not_applicable_axes", "partial",
    "confirmed_tier", "n_star", "kappa", "evaluated_at",
}  # fmt: skip


def stream_results(store: Store, *, releases: bool = True) -> pd.DataFrame:
    """window_results without arrival sequence numbers (they depend on how partitions
    interleave) and without what depends on the scheduled axes' timing; ``releases``
    False: without the ``released`` flags too, for runs with wall-clock hops (each one is a
    release point, so which evaluations were released depends on when they fell)."""
    wr = window_results(store).drop(
        columns=["evaluated_at", "window_first_seq", "window_last_seq", "tier", "confirmed_tier"]
    )
    drop = AXIS_DEPENDENT if releases else {*AXIS_DEPENDENT, "released"}
    wr["result"] = [{k: v for k, v in json.loads(r).items() if k not in drop} for r in wr["result"]]
    return wr


def verdict_events(store: Store) -> list[tuple]:
    rows = store.cursor().execute(
        "SELECT kind, model_id, metric, attribute, old, new, confirmed, evaluation FROM events "
        "WHERE kind = 'verdict_flip' ORDER BY model_id, evaluation, metric, attribute, confirmed"
    ).fetchall()
    return rows


def verdict_states(store: Store) -> dict[tuple[str, str, str], Any]:
    """Each cell's verdict debounce state (the tier's depends on the axes' timing)."""
    return {
        (c.model_id, c.metric, c.attribute): c.tracker.verdict.to_dict()
        for c in store.read(queries.cell_states)
    }
