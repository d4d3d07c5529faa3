"""What slow, idle and hostile clients cost the HTTP API, measured from real clients.

``python -m monitor.bench.http_limits [--half-open 300] [--header-timeout 5]`` serves the
API in this process on a loopback port, then

1. opens N connections that send half a request line and nothing more, and reports the
   process's thread count before, while they are open, and after the header deadline;
2. trickles a request header one byte a second and reports when the server hangs up
   (bounded: it gives up after ``--trickle-max`` seconds).

``--attack`` measures one of the HTTP attacks of docs/decisions.md, "HTTP under load" instead, as
the medians (and the share of 200 answers) of /healthz, /readyz and /metrics asked every 0.2 s while
it runs:

* ``bodies``: ``--clients`` connections (default 63, one below the connection limit)
  each send ``GET /healthz`` with ``Content-Length: 100000000`` and then one body byte
  every second, reconnecting when cut, for ``--seconds``;
* ``auth``: ``--clients`` clients (each from its own loopback address) send wrong basic
  auth passwords against a bcrypt hash of cost ``--cost`` for ``--seconds``; /metrics is
  asked with the right (cached) password;
* ``page``: a real service on a fresh DuckDB file fed 2,000 synthetic records; four
  parallel ``GET /`` (the report) while the probes are asked; reports how long each
  ``GET /`` took.

Traffic goes to 127.0.0.1/8 only, every loop is bounded in count and time. It runs against
whatever ``serve`` the importable checkout has (``monitor.service.http_server``, or
``monitor.service.api`` before the server was split by job), so the same script measures
an older checkout for a before/after comparison (``PYTHONPATH=<old checkout> python
<this file> --attack bodies``).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import importlib
import inspect
import json
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.service.exporter import Exporter

try:
    from monitor.service.http_server import serve
except ImportError:  # a checkout from before the split (a before/after comparison)
    serve = importlib.import_module("monitor.service.api").serve

if TYPE_CHECKING:
    from monitor.service.app import MonitorService


class _View:
    def ready(self) -> tuple[bool, str]:
        return True, "ok"

    def cells(self) -> list[dict]:
        return []

    def events(self, limit: int, since_id: int | None) -> list[dict]:
        return []

    def windows(self, *a, **k) -> list[dict] | None:
        return None

    def models(self) -> list[dict]:
        return []

    def axes(self, *a, **k) -> list[dict] | None:
        return []

    def status_page(self) -> str:
        return "<html><body>bench</body></html>"


def half_open(port: int, n: int, hold_s: float) -> dict[str, int]:
    """Thread counts with ``n`` connections that never finish their request line."""
    before = threading.active_count()
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /metr")
        socks.append(s)
    time.sleep(1.0)
    during = threading.active_count()
    time.sleep(hold_s)
    after = threading.active_count()
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            closed += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    return {"before": before, "during": during, "after_deadline": after, "closed": closed}


def trickle(port: int, max_s: float) -> float | None:
    """Seconds until the server hangs up on a header sent one byte a second (None: never)."""
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 10_000
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    start = time.monotonic()
    try:
        for b in request:
            if time.monotonic() - start > max_s:
                return None
            try:
                s.sendall(bytes([b]))
            except OSError:
                return time.monotonic() - start
            s.settimeout(1.0)
            try:
                if s.recv(4096) == b"":
                    return time.monotonic() - start
            except TimeoutError:
                pass
            except OSError:
                return time.monotonic() - start
        return None
    finally:
        s.close()


# ----------------------------------------------------------------------------- attacks
def _get(port: int, path: str, source: str = "127.0.0.1", password: str | None = None,
         timeout: float = 30.0) -> tuple[int, float]:  # fmt: skip
    """(status, seconds) of one GET (status 0: no answer in time or connection failed)."""
    headers = {}
    if password is not None:
        token = base64.b64encode(f"bench:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                      source_address=(source, 0))  # fmt: skip
    start = time.monotonic()
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        return r.status, time.monotonic() - start
    except (OSError, http.client.HTTPException):
        return 0, time.monotonic() - start
    finally:
        conn.close()


def probe_while(port: int, busy: Callable[[], bool], password: str | None = None,
                max_s: float = 120.0) -> dict[str, list[tuple[int, float]]]:  # fmt: skip
    """/healthz, /readyz and /metrics asked one after the other every 0.2 s while ``busy()``."""
    out: dict[str, list[tuple[int, float]]] = {"/healthz": [], "/readyz": [], "/metrics": []}
    end = time.monotonic() + max_s
    while busy() and time.monotonic() < end:
        for path, got in out.items():
            got.append(_get(port, path, password=password if path == "/metrics" else None))
        time.sleep(0.2)
    return out


def summary(probes: dict[str, list[tuple[int, float]]]) -> str:
    parts = []
    for path, got in probes.items():
        if not got:
            parts.append(f"{path}: no answer")
            continue
        ok = sum(1 for status, _ in got if status == 200)
        median = statistics.median(s for _, s in got)
        worst = max(s for _, s in got)
        parts.append(
            f"{path}: median {median:.3f} s, max {worst:.3f} s, {ok}/{len(got)} answered 200"
        )
    return "; ".join(parts)


def _body_trickler(port: int, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
                s.settimeout(1.0)
                while not stop.is_set():
                    s.sendall(b"a")
                    try:
                        while s.recv(65536):
                            pass
                        break  # closed by the server
                    except TimeoutError:
                        continue
        except OSError:
            pass
        stop.wait(1.0)  # cut: come back a second later


def attack_bodies(clients: int, seconds: float) -> str:
    server = serve(Exporter("bench"), _View(), port=0)
    stop = threading.Event()
    threads = [threading.Thread(target=_body_trickler, args=(server.port, stop), daemon=True)
               for _ in range(clients)]  # fmt: skip
    try:
        for t in threads:
            t.start()
        time.sleep(2.0)  # every trickler connected and past its headers
        end = time.monotonic() + seconds
        probes = probe_while(server.port, lambda: time.monotonic() < end)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        server.close()
    return f"{clients} body tricklers for {seconds:.0f} s: " + summary(probes)


def attack_auth(clients: int, seconds: float, cost: int) -> str:
    import bcrypt

    from monitor.service.web_config import load_web_config

    password = "right horse"
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(cost)).decode()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "web.yml"
        path.write_text(f"basic_auth_users:\n  bench: '{hashed}'\n")
        server = serve(Exporter("bench"), _View(), port=0, web_config=load_web_config(path))
    stop = threading.Event()
    answers: list[int] = []

    def flood(source: str) -> None:
        for i in range(10_000):
            if stop.is_set():
                return
            answers.append(_get(server.port, "/metrics", source, f"guess {i}")[0])

    threads = [threading.Thread(target=flood, args=(f"127.0.0.{10 + i}",), daemon=True)
               for i in range(clients)]  # fmt: skip
    try:
        _get(server.port, "/metrics", password=password)  # the right one, now cached
        for t in threads:
            t.start()
        end = time.monotonic() + seconds
        probes = probe_while(server.port, lambda: time.monotonic() < end, password=password)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        server.close()
    counts = {s: answers.count(s) for s in sorted(set(answers))}
    return (f"{clients} clients with wrong passwords (cost {cost}) for {seconds:.0f} s, "
            f"answers {counts}: " + summary(probes))  # fmt: skip


def _feed(service: MonitorService, n: int) -> None:
    from consumers.base import Origin
    from monitor.bench.synthetic import synthetic_window

    df = synthetic_window(n, models=1, seed=1).drop(columns=["decision"])
    df["record_id"] = [f"b-{i}" for i in range(len(df))]
    df["event_time"] = "2026-11-01T00:00:00Z"
    payloads = [json.dumps(r).encode() for r in df.to_dict("records")]
    service.pipeline.ingest_batch(payloads, [Origin("t", 0, i) for i in range(len(payloads))])
    service.pipeline.flush()


def attack_page(browsers: int = 4) -> str:
    """``browsers`` clients ask for ``/`` (again every 0.5 s while it says "being prepared")
    until each has the report, while the probes are asked."""
    from monitor.config import config_from_mapping
    from monitor.service.app import MonitorService

    cfg = config_from_mapping({
        "window": {"size": 2000, "hop_records": 1000, "hop_seconds": 0}, "axis1": {"K": 50},
        "models": [{"id": "model-00"}], "service": {"evaluation_worker": False},
    })  # fmt: skip
    took: list[float] = []

    def browser(port: int) -> float:
        start = time.monotonic()
        for _ in range(600):  # bounded: 5 minutes of reloads
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            t = time.monotonic()
            try:
                conn.request("GET", "/")
                page = conn.getresponse().read()
            finally:
                conn.close()
            took.append(time.monotonic() - t)
            if b"model-00" in page:
                break
            time.sleep(0.5)
        return time.monotonic() - start

    with tempfile.TemporaryDirectory() as d:
        svc = MonitorService(cfg, db_path=str(Path(d) / "b.duckdb"), http_port=0,
                             start_scheduler=False)  # fmt: skip
        try:
            svc.start()
            _feed(svc, 2000)
            assert svc.api is not None, "the service was made with an HTTP port"
            port = svc.api.port
            with ThreadPoolExecutor(browsers) as pool:
                done = [pool.submit(browser, port) for _ in range(browsers)]
                time.sleep(0.2)
                probes = probe_while(port, lambda: not all(f.done() for f in done))
            until = max(f.result() for f in done)
        finally:
            svc.close()
    return (
        f"{browsers} browsers had the report after {until:.1f} s; each GET / took median "
        f"{statistics.median(took):.3f} s, max {max(took):.3f} s ({len(took)} asked); "
        "meanwhile " + summary(probes)
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--half-open", type=int, default=300)
    p.add_argument("--header-timeout", type=float, default=5.0)
    p.add_argument("--trickle-max", type=float, default=75.0)
    p.add_argument("--attack", choices=["bodies", "auth", "page"])
    p.add_argument("--clients", type=int, default=None)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--cost", type=int, default=10)
    args = p.parse_args(argv)
    if args.attack == "bodies":
        print(attack_bodies(args.clients or 63, args.seconds))
        return 0
    if args.attack == "auth":
        print(attack_auth(args.clients or 8, args.seconds, args.cost))
        return 0
    if args.attack == "page":
        print(attack_page(args.clients or 4))
        return 0
    kwargs: dict[str, Any] = {}
    if "limits" in inspect.signature(serve).parameters:
        # the limits' class beside serve, in this checkout's module of it
        limits_type = vars(inspect.getmodule(serve))["HttpLimits"]
        kwargs["limits"] = limits_type(header_timeout_s=args.header_timeout)
    server = serve(Exporter("bench"), _View(), port=0, **kwargs)
    try:
        threads = half_open(server.port, args.half_open, args.header_timeout + 2)
        print(
            f"threads with {args.half_open} half-open connections: before {threads['before']}, "
            f"while open {threads['during']}, {args.header_timeout + 3:.0f} s later "
            f"{threads['after_deadline']}; connections closed by the server: {threads['closed']}"
        )
        t = trickle(server.port, args.trickle_max)
        if t is None:
            print(f"trickled header: still connected after {args.trickle_max:.0f} s")
        else:
            print(f"trickled header: disconnected after {t:.1f} s")
    finally:
        server.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
