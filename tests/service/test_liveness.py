"""/healthz tells the truth: it fails when the ingest loop is stuck, or turns but stores
nothing while records wait at a reachable source; a broker outage is /readyz's business.

The real service (DuckDB file, HTTP server, ticker) runs here in-process. Its source is a
stand-in, and says so: a loop stuck in a call that never returns, or a source that turns
and stores nothing while reporting lag, cannot be caused on purpose with the real Kafka
source (the freeze it guards against is fixed), so these sources play those faults.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

from monitor.config import config_from_mapping
from monitor.service.app import MonitorService, run_until_stopped

STALL_S = 5.0
CFG = config_from_mapping(
    {
        "window": {"size": 600, "hop_records": 150, "hop_seconds": 0},
        "service": {"liveness": {"stall_after_s": STALL_S}, "intake": {"unknown_models": "admit"}},
    }
)


def _healthz(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _until(pred, timeout: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


class _StuckSource:
    """Stands in for a loop stuck in a call that never returns (until released)."""

    def __init__(self) -> None:
        self.on_turn = None
        self.release = threading.Event()

    def run(self, stop: threading.Event, max_messages: int | None = None) -> int:
        if self.on_turn is not None:
            self.on_turn()
        self.release.wait(60)  # blocked: no turn, whatever `stop` says
        return 0


class _IdleSource:
    """Turns every 50 ms and hands nothing over (a sink that never gets a batch)."""

    def __init__(self) -> None:
        self.on_turn = None

    def run(self, stop: threading.Event, max_messages: int | None = None) -> int:
        while not stop.wait(0.05):
            if self.on_turn is not None:
                self.on_turn()
        return 0


def _serve(tmp_path, source):
    service = MonitorService(CFG, db_path=str(tmp_path / "l.duckdb"), http_port=0,
                             start_scheduler=False)  # fmt: skip
    service.start()
    stop = threading.Event()
    runner = threading.Thread(target=run_until_stopped, args=(service, source, stop),
                              kwargs={"tick_s": 0.2}, daemon=True)  # fmt: skip
    runner.start()
    return service, stop, runner


def test_a_stuck_ingest_loop_fails_healthz_within_the_bound(tmp_path):
    source = _StuckSource()
    service, stop, runner = _serve(tmp_path, source)
    try:
        assert service.api is not None
        url = service.api.url
        assert _healthz(url) == (200, "ok\n")
        took = _until(lambda: _healthz(url)[0] == 503, STALL_S + 10)
        assert took is not None, "healthz still 200 with the loop stuck"
        assert took >= STALL_S - 1.0, f"failed after {took:.1f} s, before the bound"
        assert "ingest loop stuck" in _healthz(url)[1]
        assert service.ready() == (True, "ok")  # readiness is another question
    finally:
        source.release.set()
        stop.set()
        runner.join(10)
        service.close()


def test_records_waiting_and_nothing_stored_fail_healthz_unless_the_broker_is_away(tmp_path):
    service, stop, runner = _serve(tmp_path, _IdleSource())
    reachable = [True]
    service.source_reachable = lambda: reachable[0]
    try:
        assert service.api is not None
        url = service.api.url
        time.sleep(STALL_S + 1.0)
        assert _healthz(url)[0] == 200  # nothing waits: an idle stream is alive
        service.set_lag({("t", 0): 40})
        # status and reason from one answer: the ticker reports the idle source's own lag
        # (none) every second, so a second request may already find nothing waiting
        answers: list[tuple[int, str]] = []
        assert _until(lambda: answers.append(_healthz(url)) or answers[-1][0] == 503, 5)
        assert "40 wait at the source" in answers[-1][1]
        reachable[0] = False  # an outage: not ready, but a restart would not help
        assert _healthz(url) == (200, "ok\n")
    finally:
        stop.set()
        runner.join(10)
        service.close()


def test_a_stopping_service_is_alive_and_refuses_data_routes(tmp_path):
    service, stop, runner = _serve(tmp_path, _IdleSource())
    try:
        assert service.api is not None
        url = service.api.url
        service.begin_stop()
        assert _healthz(url) == (200, "ok\n")
        try:
            urllib.request.urlopen(url + "/metrics", timeout=5)
            raise AssertionError("/metrics answered 200 while stopping")
        except urllib.error.HTTPError as e:
            assert e.code == 503 and b"shutting down" in e.read()
        assert service.ready() == (False, "stopping")
    finally:
        stop.set()
        runner.join(10)
        service.close()
