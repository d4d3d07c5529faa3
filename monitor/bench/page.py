"""`vfr-monitor bench page`: the status page's first byte under parallel readers while the
stream runs, and the full report's render time, on the demo's data (issue 25, target 3).

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

Before/after: the module runs against whatever ``monitor`` is importable, so the same file
times an older checkout (``PYTHONPATH=<old checkout> python monitor/bench/page.py --json >
before.json``); ``--before before.json`` adds that run and the ratios (before / after) to
the output. Traffic goes to 127.0.0.1 only; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import http.client
import json
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
    *,
    records: int = 100_000,
    rate: float = 3_000.0,
    clients: int = 4,
    repeats: int = 3,
    seed: int = 0,
    timeout_s: float = 30.0,
    max_stream_s: float = 900.0,
) -> dict[str, Any]:
    """The bench (see the module docstring); returns the JSON-able figures."""
    import pandas as pd

    from consumers.embedded import EmbeddedSource
    from monitor.config import load_config
    from monitor.demo import DemoOptions, build_stream, demo_config, payload_stream
    from monitor.service.app import MonitorService, run_until_stopped

    opts = DemoOptions(records=records, rate=rate, seed=seed, live=False)
    stream, _ = build_stream(opts)
    cfg = demo_config(
        load_config(None), None, opts, tuple(stream.models[0].features),
        tuple(m.model_id for m in stream.models),
        oldest_event_time=pd.to_datetime(stream.frame["event_time"], utc=True).min(),
    )  # fmt: skip
    payloads = payload_stream(stream)
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--rate", type=float, default=3_000.0)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--before", default=None, help="JSON of an earlier run to compare with")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = run_page_bench(records=args.records, rate=args.rate, clients=args.clients,
                         repeats=args.repeats)  # fmt: skip
    if args.before:
        out = with_before(out, json.loads(Path(args.before).read_text()))
    print(json.dumps(out) if args.json else "\n".join(f"{k:>24}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
