"""What slow and idle clients cost the HTTP API: threads held and how long a trickle lasts.

``python -m monitor.bench.http_limits [--half-open 300] [--header-timeout 5]`` serves the
API in this process on a loopback port, then

1. opens N connections that send half a request line and nothing more, and reports the
   process's thread count before, while they are open, and after the header deadline;
2. trickles a request header one byte a second and reports when the server hangs up
   (bounded: it gives up after ``--trickle-max`` seconds).

Traffic goes to 127.0.0.1 only, every loop is bounded in count and time. It runs against
whatever ``monitor.service.api.serve`` is importable, so the same script measures an older
checkout for a before/after comparison.
"""

from __future__ import annotations

import argparse
import inspect
import socket
import threading
import time

from monitor.service.api import serve
from monitor.service.exporter import Exporter


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--half-open", type=int, default=300)
    p.add_argument("--header-timeout", type=float, default=5.0)
    p.add_argument("--trickle-max", type=float, default=75.0)
    args = p.parse_args(argv)
    kwargs = {}
    if "limits" in inspect.signature(serve).parameters:
        from monitor.service.api import HttpLimits

        kwargs["limits"] = HttpLimits(header_timeout_s=args.header_timeout)
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
