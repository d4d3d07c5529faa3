"""The status page is drawn in the background, one drawing at a time (issue 22 item 2).

Against a real service (real DuckDB file, real pipeline, the real report) served on
127.0.0.1 and read with urllib. The drawing is the real ``stored_report``, held at a gate
the test opens: that makes "a drawing takes a while" a fact of the test instead of a
guess about this machine's speed (the demo's page takes 12 s to draw).
"""

from __future__ import annotations

import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

import monitor.service.app as app_module
from monitor.config import config_from_mapping
from monitor.service.app import MonitorService
from monitor.service.page_renderer import PageRenderer
from tests.support.pipeline_runs import feed_service
from tests.support.servers import wait_for

CFG = config_from_mapping(
    {
        "window": {"size": 2000, "hop_records": 1000, "hop_seconds": 0},
        "axis1": {"K": 50},
        "models": [{"id": "model-00"}],
        "service": {"evaluation_worker": False},  # no worker process to start: quicker
    }
)
#: how long a client waits for any answer: far below a held drawing, far above a quick one
CLIENT_TIMEOUT_S = 3.0




def _get(url: str) -> tuple[int, str, float]:
    start = time.monotonic()
    with urllib.request.urlopen(url, timeout=CLIENT_TIMEOUT_S) as r:
        return r.status, r.read().decode(), time.monotonic() - start


@pytest.fixture
def held(monkeypatch):
    """The real report drawing, held until the test sets the gate; records each drawing's
    thread name."""
    gate = threading.Event()
    done = threading.Event()  # the test is over: a drawing still held is not drawn
    threads: list[str] = []
    real = app_module.stored_report

    def drawing(store, config, empty_page, *clock):  # clock: the service's, when given
        threads.append(threading.current_thread().name)
        gate.wait(timeout=60)
        return empty_page if done.is_set() else real(store, config, empty_page, *clock)

    monkeypatch.setattr(app_module, "stored_report", drawing)
    try:
        yield gate, threads, done
    finally:
        done.set()
        gate.set()


def test_parallel_requests_draw_once_in_the_background_and_probes_do_not_wait(tmp_path, held):
    gate, threads, done = held
    service = MonitorService(CFG, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                             start_scheduler=False)  # fmt: skip
    try:
        service.start()
        feed_service(service, 2000, seed=1)
        url = service.api.url
        # four browsers at once, while the drawing is held: each is answered at once
        with ThreadPoolExecutor(4) as pool:
            pages = list(pool.map(_get, [url + "/"] * 4))
        assert all(status == 200 and "being prepared" in page for status, page, _s in pages)
        # probes and /metrics do not wait for it either
        for path in ("/readyz", "/healthz", "/metrics"):
            assert _get(url + path)[0] == 200, path
        gate.set()
        _status, page, _s = wait_for(
            "the drawn page", lambda: (r := _get(url + "/")) and "model-00" in r[1] and r
        )
        assert threads == ["vfr-page"]  # one drawing, on the renderer's thread
        assert "Rendered " in page and " s ago (" in page
        # nothing new: the same page from memory, no new drawing
        assert "model-00" in _get(url + "/")[1] and len(threads) == 1
        # a new evaluation: the last page at once (its redrawing is the renderer's
        # business: test_a_stale_page_is_redrawn_no_sooner_than_the_last_drawing_took)
        gate.clear()
        feed_service(service, 1000, seed=2, start=2000)
        status, page, _s = _get(url + "/")
        assert status == 200 and "model-00" in page and "Rendered " in page
    finally:
        done.set()
        gate.set()
        service.close()


# ----------------------------------------------------------------------------- the renderer
class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _renderer(clock: _Clock, version: list[int], draws: list[int], fail: list[bool],
              gate: threading.Event | None = None):  # fmt: skip
    def draw() -> str:
        if gate is not None:
            gate.wait(timeout=10)
        draws.append(version[0])
        clock.now += 2.0  # a drawing takes 2 s
        if fail[0]:
            raise RuntimeError("boom")
        return f"<html><body class='x'><p>v{version[0]}</p></body></html>"

    return PageRenderer(draw, lambda: version[0], max_age_s=60.0, clock=clock,
                        wall_clock=lambda: 0.0)  # fmt: skip


def _until_drawings(r: PageRenderer, n: int) -> None:
    deadline = time.monotonic() + 10
    while r.drawings < n:
        assert time.monotonic() < deadline, r.drawings
        time.sleep(0.01)


def test_a_stale_page_is_redrawn_no_sooner_than_the_last_drawing_took():
    clock, version, draws, fail, gate = _Clock(), [1], [], [False], threading.Event()
    r = _renderer(clock, version, draws, fail, gate)
    assert "being prepared" in r.page()
    gate.set()
    _until_drawings(r, 1)
    assert r.page().startswith("<html><body class='x'><p class='vfr-page-age'")
    assert "<p>v1</p>" in r.page() and draws == [1]
    version[0] = 2
    # 0 s since a drawing that took 2 s: one is started, to draw once 2 s have passed
    assert r.refresh() is True
    assert r.refresh() is False and draws == [1]  # under way: no second one
    assert "<p>v1</p>" in r.page()  # meanwhile the last page
    _until_drawings(r, 2)
    assert "<p>v2</p>" in r.page() and draws == [1, 2]
    clock.now += 61.0  # too old: redrawn although nothing changed
    assert r.refresh() is True


def test_a_failed_drawing_keeps_the_last_page_and_is_retried_later():
    clock, version, draws, fail = _Clock(), [1], [], [False]
    r = _renderer(clock, version, draws, fail)
    assert r.wait_drawn(10)
    fail[0], version[0] = True, 2
    clock.now += 5.0
    assert r.refresh() is True
    _until_drawings(r, 2)
    assert "<p>v1</p>" in r.page()  # the last good page stays
    r.close()
    clock.now += 100.0
    assert r.refresh() is False  # closed: no new drawing


def test_the_page_is_answered_while_an_ingest_batch_holds_the_pipeline(tmp_path):
    """``GET /`` answers from memory while the pipeline's lock is held (an ingest batch
    holds it for its whole write; the page's version used to be read under it, and the
    first byte waited for the batch: issue 25). The lock is held for longer than the
    client waits, so a request that waits for it fails."""
    service = MonitorService(CFG, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                             start_scheduler=False)  # fmt: skip
    held, release = threading.Event(), threading.Event()

    def batch() -> None:  # holds the lock as ingest_batch does, on a thread of its own
        with service.pipeline.lock:
            held.set()
            release.wait(timeout=3 * CLIENT_TIMEOUT_S)

    holder = threading.Thread(target=batch, daemon=True)
    try:
        service.start()
        feed_service(service, 2000, seed=1)
        assert service.page.wait_drawn(60)
        holder.start()
        assert held.wait(timeout=CLIENT_TIMEOUT_S)
        status, page, took = _get(service.api.url + "/")  # raises after CLIENT_TIMEOUT_S
        assert status == 200 and "model-00" in page and took < CLIENT_TIMEOUT_S
    finally:
        release.set()
        holder.join(timeout=3 * CLIENT_TIMEOUT_S)
        service.close()


def test_new_evaluations_and_axis_runs_make_the_page_stale(tmp_path):
    """The page's version (read without the pipeline's lock) moves with each evaluation
    and each scheduled-axis run, so the page is redrawn after either."""
    service = MonitorService(CFG, db_path=str(tmp_path / "s.duckdb"), http_port=0,
                             start_scheduler=False)  # fmt: skip
    try:
        service.start()
        v0 = service.page_version
        feed_service(service, 2000, seed=1)
        v1 = service.page_version
        assert v1 - v0 == service.pipeline.evaluation_total()  # one per evaluation
        assert service.scheduler.run_now_blocking("axis3").state in ("success", "failed")
        assert service.page_version == v1 + 1
    finally:
        service.close()
