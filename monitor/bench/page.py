"""`vfr-monitor bench page`: the status page's first byte under parallel readers while the
stream runs, and the full report's render time, on the demo's data (target 3 s: docs/decisions.md,
"The page in under a second").

What runs is the service, as ``vfr-monitor demo`` runs it: the demo's synthetic stream
(two XGBoost models scoring a year of discharges), the embedded source replaying it at
``rate`` messages/s into the pipeline, a real DuckDB file, the scheduled axes, and the API
on 127.0.0.1. While the stream runs, ``clients`` real HTTP clients each ask for ``/`` in
a loop (a new connection per request, as a browser's reload) and time

* the **first byte**: from sending the request to the status line and headers read
  (``http.client`` returns from ``getresponse()`` then), and
* the whole answer.

An answer is a *page* (the report, served from the last drawing) or a *preparing* page
(before the first drawing exists); both count, and are also given apart. Then the service
is closed and the finished file's **full report** is rendered ``repeats`` times
(``render_report`` on the file, as ``vfr-monitor report`` does) with the figure cache
emptied before each (cold: every figure drawn), and ``repeats`` times more with it kept
(what the status page pays when nothing changed).

Before/after: the module uses only the service's own entry points (``MonitorService``,
``run_until_stopped``, ``render_report``), so loaded by path it times an older checkout's
``monitor`` too (docs/benchmarks.md has the commands); ``--before before.json``
adds that run and the ratios (before / after) to the output. Traffic goes to 127.0.0.1
only; every loop is bounded in count and time.
"""

from __future__ import annotations

import http.client
import math
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: The fields compared with a before run (lower is better for each).
COMPARED = (
    "first_byte_p50_s",
    "first_byte_p95_s",
    "page_first_byte_p95_s",
    "answer_p95_s",
    "report_render_s",
    "report_render_cached_s",
    "live_render_median_s",
)


def quantile(values: list[float], q: float) -> float | None:
    """The q-quantile (nearest rank; None for no value)."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def _ask(port: int, timeout_s: float) -> tuple[float, float, bool] | None:
    """(first byte s, whole answer s, was the report) of one ``GET /``; None: failed."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    start = time.perf_counter()
    try:
        conn.request("GET", "/")
        r = conn.getresponse()
        first = time.perf_counter() - start
        body = r.read()
        total = time.perf_counter() - start
        return first, total, r.status == 200 and b"vfr-page-preparing" not in body
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def _reader(port: int, stop: threading.Event, out: list, failures: list, max_requests: int,
            timeout_s: float) -> None:  # fmt: skip
    for _ in range(max_requests):
        if stop.is_set():
            return
        got = _ask(port, timeout_s)
        if got is None:
            failures.append(1)
            stop.wait(0.1)
        else:
            out.append(got)


def _clear_figure_cache() -> bool:
    """Empty the report's figure cache where the code has one; False where it has none."""
    from monitor.report import figures

    cache = getattr(figures, "CACHE", None)
    if cache is None:
        return False
    cache.clear()
    return True


def time_report(db: Path, config: Any, repeats: int) -> dict[str, Any]:
    """Full renders of the file's report: cold (figure cache emptied) and cached."""
    from monitor.report.render import render_report

    cold, warm = [], []
    html = ""
    has_cache = False
    for _ in range(repeats):
        has_cache = _clear_figure_cache()
        t = time.perf_counter()
        html = render_report(db, config=config)
        cold.append(time.perf_counter() - t)
    for _ in range(repeats):
        t = time.perf_counter()
        render_report(db, config=config)
        warm.append(time.perf_counter() - t)
    return {
        "report_render_s": statistics.median(cold),
        "report_render_runs_s": [round(x, 3) for x in cold],
        "report_render_cached_s": statistics.median(warm),
        "figure_cache": has_cache,
        "html_bytes": len(html.encode()),
    }


def _timed(draw: Any, took: list[float]) -> Any:
    def run() -> Any:
        t = time.perf_counter()
        try:
            return draw()
        finally:
            took.append(time.perf_counter() - t)

    return run


def run_page_bench(
    cfg: Any,
    payloads: list[bytes],
    *,
    records: int | None = None,
    rate: float = 3_000.0,
    clients: int = 4,
    repeats: int = 3,
    timeout_s: float = 30.0,
    max_stream_s: float = 900.0,
) -> dict[str, Any]:
    """The bench (see the module docstring) on the demo's config and payloads, which the
    entry point prepares (``vfr-monitor bench page``: :mod:`monitor.demo`'s stream); returns
    the JSON-able figures. ``records``: the demo's discharges, reported as given."""
    from consumers.embedded import EmbeddedSource
    from monitor.service.app import MonitorService, run_until_stopped

    answers: list[tuple[float, float, bool]] = []
    failures: list[int] = []
    drawn: list[float] = []
    with tempfile.TemporaryDirectory(prefix="vfr-bench-page-") as d:
        db = Path(d) / "synthetic.duckdb"
        service = MonitorService(cfg, source_name="embedded", db_path=str(db), http_port=0)
        service.page._draw = _timed(service.page._draw, drawn)  # time each live drawing
        source = EmbeddedSource(payloads, service.pipeline, rate=rate, batch_size=1000)
        stop, readers_stop = threading.Event(), threading.Event()
        service.start()
        try:
            assert service.api is not None, "the service was made with an HTTP port"
            port = service.api.port
            runner = threading.Thread(target=run_until_stopped, args=(service, source, stop),
                                      daemon=True)  # fmt: skip
            readers = [
                threading.Thread(target=_reader, daemon=True,
                                 args=(port, readers_stop, answers, failures, 100_000, timeout_s))
                for _ in range(clients)
            ]  # fmt: skip
            t0 = time.perf_counter()
            runner.start()
            for r in readers:
                r.start()
            while runner.is_alive() and time.perf_counter() - t0 < max_stream_s:
                runner.join(timeout=0.5)
                if source.exhausted:
                    stop.set()
            stream_s = time.perf_counter() - t0
            readers_stop.set()
            for r in readers:
                r.join(timeout=timeout_s + 5)
        finally:
            stop.set()
            readers_stop.set()
            service.close()
        report = time_report(db, cfg, repeats)
    firsts = [a[0] for a in answers]
    pages = [a[0] for a in answers if a[2]]
    return {
        "records": records,
        "messages": len(payloads),
        "rate": rate,
        "clients": clients,
        "stream_s": round(stream_s, 2),
        "requests": len(answers),
        "failed_requests": len(failures),
        "page_answers": len(pages),
        "preparing_answers": len(answers) - len(pages),
        "first_byte_p50_s": quantile(firsts, 0.50),
        "first_byte_p95_s": quantile(firsts, 0.95),
        "first_byte_max_s": max(firsts, default=None),
        "page_first_byte_p95_s": quantile(pages, 0.95),
        "answer_p95_s": quantile([a[1] for a in answers], 0.95),
        "live_drawings": len(drawn),
        "live_render_median_s": statistics.median(drawn) if drawn else None,
        "live_render_max_s": max(drawn, default=None),
        **report,
    }


def with_before(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """``after`` with the before run and, per compared field, before / after."""
    ratios = {}
    for k in COMPARED:
        a, b = after.get(k), before.get(k)
        if isinstance(a, int | float) and isinstance(b, int | float) and a > 0:
            ratios[k] = round(b / a, 2)
    return {**after, "before": before, "ratio_before_over_after": ratios}
