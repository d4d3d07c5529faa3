"""Read-only HTTP API of the streaming service: /metrics, health, and the current state.

Served by Starlette on uvicorn in a background thread of the service (the main thread
runs the source). Why not ``http.server`` any more: it spends a thread per connection
(300 half-open connections were 183 threads) and has no deadline for a trickled header;
TLS, basic auth and connection limits belong to a server that is maintained for them.
One event loop holds every connection; the blocking reads (DuckDB, the exporter's
collector) run on a small fixed pool of worker threads.

Routes::

    GET /              the governance report of the service's DuckDB file (HTML, self-contained)
    GET /metrics       Prometheus text format of the Exporter's own registry
    GET /healthz       200 "ok" while the process serves requests
    GET /readyz        200 {"status": "ready"} or 503 {"status": "not ready", "reason": ...}
    GET /api/cells     JSON list, StateView.cells(); ?limit=1..1000 &offset=>=0 (default all)
    GET /api/events    ?limit=1..1000 (default 100) &since_id=>=0 -> StateView.events()
    GET /api/windows   ?model=&metric=&attribute= (required) &limit=1..1000 (default 100)
                       &before=>=1 (evaluations older than this one) -> StateView.windows();
                       None (unknown cell) is a 404
    GET /api/models    JSON list, StateView.models(); ?limit &offset as /api/cells
    GET /api/axes      ?axis=axis2|axis3|equilense (required) &model= &limit (default 100)
                       &offset -> StateView.axes(), newest first; unknown model is a 404

Anything else is 404, any other method 405 (``Allow: GET``). With ``api_enabled``
false every /api route is a 404.

Protection (see :mod:`monitor.service.web_config`): TLS and basic auth from the
web-config file. Authentication covers everything but /healthz and /readyz, which
orchestrator probes call without credentials and which carry no data (a fixed word,
or the service's own state such as "starting"). Limits: ``limit_concurrency``
(connections + requests; beyond it uvicorn answers 503), an idle keep-alive timeout,
and a header deadline: a request's line and headers must be complete within
``header_timeout_s`` of the connection opening (or of the previous response),
however slowly they trickle in; past it the connection is closed.

JSON and non-finite numbers (documented choice): NaN is encoded as ``null``
and +/-infinity as the strings ``"inf"`` / ``"-inf"``. Infinity means something
here (N* = inf: the audit size was never reached; sigma = inf: zero spread), so
it must stay distinguishable from "no value" (null). Output is produced with
``allow_nan=False``, so it is always strict JSON.

Errors are JSON ``{"error": ...}`` naming at most the offending parameter,
never echoing request-supplied values, never a stack trace (that goes to the
log). Nothing is printed; uvicorn's access log is off.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs

import anyio
import bcrypt
import h11
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from monitor.core.jsonable import dumps
from monitor.service.exporter import Exporter
from monitor.service.web_config import WebConfig

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_OFFSET = 10**9
#: Longest accepted model / metric / attribute value: these are configured ids.
MAX_NAME_LENGTH = 128
AXES = ("axis2", "axis3", "equilense")
JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"
HTML_TYPE = "text/html; charset=utf-8"
#: Paths served without authentication (probes; no data in them).
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
REALM = "vfr-monitor"


class StateView(Protocol):
    """What the API reads from the service: plain JSON-like data, no service objects."""

    def ready(self) -> tuple[bool, str]:
        """(ready, reason): reason says what is missing when not ready."""
        ...

    def cells(self) -> list[dict]: ...

    def events(self, limit: int, since_id: int | None) -> list[dict]: ...

    def windows(
        self, model: str, metric: str, attribute: str, limit: int, before: int | None = None
    ) -> list[dict] | None:
        """Latest evaluations of one cell (older than ``before``); None: unknown cell."""
        ...

    def models(self) -> list[dict]:
        """Each model's window size, rolling AUROC / accuracy and last evaluation time."""
        ...

    def axes(self, axis: str, model: str | None, limit: int, offset: int) -> list[dict] | None:
        """Stored results of one scheduled axis, newest first; None: unknown model."""
        ...

    def status_page(self) -> str:
        """The governance report as one self-contained HTML page."""
        ...


@dataclass(frozen=True)
class HttpLimits:
    """Connection limits of the server (ServiceConfig carries the configured values)."""

    #: connections + running requests; beyond it uvicorn answers 503
    max_connections: int = 64
    #: idle time allowed between two requests of a kept-alive connection
    keep_alive_s: float = 5.0
    #: a request line and its headers must arrive within this long
    header_timeout_s: float = 10.0
    #: threads that run the blocking reads (DuckDB, exporter collection)
    worker_threads: int = 4


# ----------------------------------------------------------------------------- parameters
class _BadParamError(Exception):
    """A query parameter is missing or invalid; carries the parameter NAME only."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _one(query: dict[str, list[str]], name: str, required: bool) -> str | None:
    values = query.get(name)
    if not values:
        if required:
            raise _BadParamError(name)
        return None
    if len(values) != 1:
        raise _BadParamError(name)
    return values[0]


def _int_param(query: dict[str, list[str]], name: str, default: int | None, lo: int, hi: int):
    raw = _one(query, name, required=False)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise _BadParamError(name)
    value = int(raw)
    if not lo <= value <= hi:
        raise _BadParamError(name)
    return value


def _name_param(query: dict[str, list[str]], name: str, required: bool = True) -> str | None:
    value = _one(query, name, required=required)
    if value is None:
        return None
    if len(value) > MAX_NAME_LENGTH or not value.isprintable():
        raise _BadParamError(name)
    return value


def _page(rows: list[dict], query: dict[str, list[str]]) -> list[dict]:
    """``limit`` / ``offset`` over an in-memory list (absent limit: everything)."""
    limit = _int_param(query, "limit", None, 1, MAX_LIMIT)
    offset = _int_param(query, "offset", 0, 0, MAX_OFFSET)
    return rows[offset:] if limit is None else rows[offset : offset + limit]


# ----------------------------------------------------------------------------- responses
_COMMON_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def _send(
    status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
) -> Response:
    return Response(body, status, {**_COMMON_HEADERS, **(headers or {})}, content_type)


def _json(status: int, obj: Any, headers: dict[str, str] | None = None) -> Response:
    return _send(status, dumps(obj), JSON_TYPE, headers)


# ----------------------------------------------------------------------------- routes
Handler = Callable[[dict[str, list[str]]], Response]


class _Routes:
    """The route handlers: plain functions of the parsed query, run on worker threads."""

    def __init__(self, exporter: Exporter, view: StateView):
        self.exporter = exporter
        self.view = view

    def status_page(self, query: dict[str, list[str]]) -> Response:
        return _send(200, self.view.status_page().encode(), HTML_TYPE)

    def metrics(self, query: dict[str, list[str]]) -> Response:
        return _send(200, self.exporter.render(), CONTENT_TYPE_LATEST)

    def healthz(self, query: dict[str, list[str]]) -> Response:
        return _send(200, b"ok\n", TEXT_TYPE)

    def readyz(self, query: dict[str, list[str]]) -> Response:
        ready, reason = self.view.ready()
        if ready:
            return _json(200, {"status": "ready"})
        return _json(503, {"status": "not ready", "reason": reason})

    def cells(self, query: dict[str, list[str]]) -> Response:
        return _json(200, _page(self.view.cells(), query))

    def events(self, query: dict[str, list[str]]) -> Response:
        limit = _int_param(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        since_id = _int_param(query, "since_id", None, 0, 2**62)
        return _json(200, self.view.events(limit, since_id))

    def windows(self, query: dict[str, list[str]]) -> Response:
        model = _name_param(query, "model")
        metric = _name_param(query, "metric")
        attribute = _name_param(query, "attribute")
        assert model is not None and metric is not None and attribute is not None
        limit = _int_param(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        before = _int_param(query, "before", None, 1, 2**62)
        if before is None:
            rows = self.view.windows(model, metric, attribute, limit)
        else:
            rows = self.view.windows(model, metric, attribute, limit, before=before)
        if rows is None:
            return _json(404, {"error": "unknown cell"})
        return _json(200, rows)

    def models(self, query: dict[str, list[str]]) -> Response:
        return _json(200, _page(self.view.models(), query))

    def axes(self, query: dict[str, list[str]]) -> Response:
        axis = _one(query, "axis", required=True)
        if axis not in AXES:
            raise _BadParamError("axis")
        model = _name_param(query, "model", required=False)
        limit = _int_param(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        offset = _int_param(query, "offset", 0, 0, MAX_OFFSET)
        rows = self.view.axes(axis, model, limit, offset)
        if rows is None:
            return _json(404, {"error": "unknown model"})
        return _json(200, rows)


def _endpoint(handler: Handler, limiter: anyio.CapacityLimiter):
    async def endpoint(request: Request) -> Response:
        try:
            raw = request.scope["query_string"].decode("latin-1")
            query = parse_qs(raw, keep_blank_values=False, max_num_fields=20)
        except ValueError:
            return _json(400, {"error": "malformed query string"})
        try:
            return await anyio.to_thread.run_sync(handler, query, limiter=limiter)
        except _BadParamError as e:
            return _json(400, {"error": "invalid parameter", "parameter": e.name})
        except Exception as exc:  # the type only: an exception's text may quote data
            log.error("api: %s failed: %s", request.url.path, type(exc).__name__)
            return _json(500, {"error": "internal error"})

    return endpoint


async def _not_found(request: Request, exc: Exception) -> Response:
    return _json(404, {"error": "not found"})


class _GetOnly:
    """Every method but GET is a 405, on every path (HEAD and made-up methods included).

    The request may carry a body we do not read: close rather than misparse it as the
    next request on a kept-alive connection.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] != "GET":
            response = _json(
                405, {"error": "method not allowed"}, {"Allow": "GET", "Connection": "close"}
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _BasicAuth:
    """HTTP basic authentication against bcrypt hashes, as the exporter-toolkit does it.

    bcrypt is slow on purpose (~0.1-0.3 s a check), so it runs on the worker threads, and
    a successful check is remembered under an HMAC of (user, password) with a key that
    lives only in this process, so a scrape every 15 s costs one bcrypt check, not one
    each time. Unknown users are checked against a dummy hash, so the answer time does
    not tell which user names exist; user names are compared with ``hmac.compare_digest``.
    """

    CACHE_SIZE = 64

    def __init__(self, app: ASGIApp, users: dict[str, bytes], limiter: anyio.CapacityLimiter):
        self.app = app
        self.users = users
        self.limiter = limiter
        self._key = os.urandom(32)
        self._ok: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()
        # the cost of the configured hashes, so a miss costs the same as a hit
        costs = [int(h[4:6]) for h in users.values() if h[4:6].isdigit()]
        self._dummy = bcrypt.hashpw(b"not a password", bcrypt.gensalt(max(costs, default=12)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        credentials = _basic_credentials(scope)
        if credentials is not None and await anyio.to_thread.run_sync(
            self._check, *credentials, limiter=self.limiter
        ):
            await self.app(scope, receive, send)
            return
        response = _json(
            401,
            {"error": "unauthorized"},
            {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'},
        )
        await response(scope, receive, send)

    def _check(self, user: bytes, password: bytes) -> bool:
        tag = hmac.new(self._key, user + b"\x00" + password, hashlib.sha256).digest()
        with self._lock:
            if tag in self._ok:
                self._ok.move_to_end(tag)
                return True
        hashed = self._dummy
        known = False
        for name, h in self.users.items():
            if hmac.compare_digest(name.encode("utf-8"), user):
                hashed, known = h, True
        try:
            ok = bcrypt.checkpw(password, hashed) and known
        except ValueError:
            ok = False
        if ok:
            with self._lock:
                self._ok[tag] = None
                while len(self._ok) > self.CACHE_SIZE:
                    self._ok.popitem(last=False)
        return ok


def _basic_credentials(scope: Scope) -> tuple[bytes, bytes] | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, encoded = value.partition(b" ")
            if scheme.lower() != b"basic":
                return None
            try:
                decoded = base64.b64decode(encoded.strip(), validate=True)
            except (binascii.Error, ValueError):
                return None
            user, sep, password = decoded.partition(b":")
            return (user, password) if sep else None
    return None


def build_app(
    exporter: Exporter,
    view: StateView,
    *,
    api_enabled: bool = True,
    users: dict[str, bytes] | None = None,
    worker_threads: int = 4,
) -> ASGIApp:
    """The ASGI application: auth (when users are configured) > GET only > routes."""
    limiter = anyio.CapacityLimiter(worker_threads)
    r = _Routes(exporter, view)
    table: dict[str, Handler] = {
        "/": r.status_page, "/metrics": r.metrics, "/healthz": r.healthz, "/readyz": r.readyz,
    }  # fmt: skip
    if api_enabled:
        table |= {
            "/api/cells": r.cells, "/api/events": r.events, "/api/windows": r.windows,
            "/api/models": r.models, "/api/axes": r.axes,
        }  # fmt: skip
    app = Starlette(
        routes=[Route(p, _endpoint(h, limiter), methods=["GET"]) for p, h in table.items()],
        exception_handlers={404: _not_found},
    )
    app.router.redirect_slashes = False  # "/metrics/" is a 404, not a redirect
    asgi: ASGIApp = _GetOnly(app)
    if users:
        asgi = _BasicAuth(asgi, users, limiter)
    return asgi


# ----------------------------------------------------------------------------- protocol
class _GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and JSON protocol errors.

    uvicorn's keep-alive timer starts only after a response and is reset by every byte
    received, so a client that trickles a header byte a second (or opens a connection
    and sends nothing) would hold it for ever. Here each request's line and headers must
    be complete within ``header_timeout_s`` of the connection opening, or of the previous
    response. Protocol errors (a malformed request line, oversized headers) are answered
    with ``{"error": "bad request"}``, never echoing the request.
    """

    header_timeout_s: float = 10.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the request's headers are in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            log.debug("api: request headers not complete in %.1f s: closing", self.header_timeout_s)
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        self._disarm()
        body = dumps({"error": "bad request"})
        headers = [
            (b"content-type", JSON_TYPE.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event) or b"")
        except h11.LocalProtocolError:
            pass  # h11 cannot frame an answer in this state: just close
        self.transport.close()


# ----------------------------------------------------------------------------- server
class ApiServer:
    """A running API: ``address`` / ``port`` (the real one when 0 was asked), ``close()``."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, sock: socket.socket,
                 tls: bool):  # fmt: skip
        self._server = server
        self._thread = thread
        self._sock = sock
        self._address = sock.getsockname()[:2]
        self.tls = tls

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._address
        return str(host), int(port)

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def url(self) -> str:
        host, port = self.address
        scheme = "https" if self.tls else "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    def close(self) -> None:
        """Stop serving and release the port; safe to call twice."""
        if self._thread.is_alive():
            self._server.should_exit = True
            self._thread.join(timeout=15)
        self._sock.close()

    def __enter__(self) -> ApiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a busy port fails at start-up, in the caller.

    No SO_REUSEADDR: a second service on the same port must fail loudly.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def serve(
    exporter: Exporter,
    view: StateView,
    host: str = "127.0.0.1",
    port: int = 9464,
    web_config: WebConfig | None = None,
    *,
    api_enabled: bool = True,
    limits: HttpLimits | None = None,
) -> ApiServer:
    """Start the API in a daemon thread (loopback by default; port 0 = any free port).

    ``web_config``: TLS and basic-auth users (None: plain HTTP, no authentication).
    """
    limits = limits or HttpLimits()
    web = web_config or WebConfig()
    app = build_app(
        exporter, view, api_enabled=api_enabled, users=web.users,
        worker_threads=limits.worker_threads,
    )  # fmt: skip
    protocol = type(
        "GuardedH11Protocol", (_GuardedH11Protocol,), {"header_timeout_s": limits.header_timeout_s}
    )
    tls = web.tls
    config = uvicorn.Config(
        app,
        http=protocol,
        loop="asyncio",
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=max(1, round(limits.keep_alive_s)),
        timeout_graceful_shutdown=5,
        ssl_context_factory=None if tls is None else (lambda _cfg, _default: tls.context()),
    )
    sock = _bind(host, port)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="vfr-api", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError("api: the HTTP server did not start (see the log)")
        time.sleep(0.01)
    api = ApiServer(server, thread, sock, tls=tls is not None)
    log.info("api listening on %s (auth %s)", api.url, "on" if web.users else "off")
    return api


__all__ = ["ApiServer", "HttpLimits", "StateView", "build_app", "serve"]
