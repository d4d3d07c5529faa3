"""Read-only HTTP API of the streaming service: /metrics, health, and the current state.

Served by Starlette on uvicorn in a background thread of the service (the main thread
runs the source). Why not ``http.server`` any more: it spends a thread per connection
(300 half-open connections were 183 threads) and has no deadline for a trickled header;
TLS, basic auth and connection limits belong to a server that is maintained for them.
One event loop holds every connection; the blocking reads (DuckDB, the exporter's
collector) run on a small fixed pool of worker threads.

Routes::

    GET /              the governance report of the service's DuckDB file (HTML, self-contained;
                       the view's last background drawing: monitor.service.page_renderer)
    GET /metrics       Prometheus text format of the Exporter's own registry
    GET /healthz       200 "ok" while the process does its job; 503 "stalled: ..." when its
                       ingest loop is stuck or stores nothing while records wait
                       (StateView.alive, monitor.service.liveness): restart it
    GET /readyz        200 {"status": "ready"} or 503 {"status": "not ready", "reason": ...}
    GET /api/cells     JSON list, StateView.cells(); ?limit=1..1000 &offset=>=0 (default all);
                       each row with "driver": the sentence on what drives a failing or
                       flipping cell's disparity (monitor.core.drivers), else null
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
or the service's own state such as "starting").

Limits (docs/decisions.md, "HTTP under load"):

* a request (line and headers) must be complete within ``header_timeout_s`` of the
  connection opening, or of the previous response, however slowly it trickles in; past
  it the connection is closed;
* a request body is refused: this API is GET-only, so a ``Content-Length`` above 0 or
  any ``Transfer-Encoding`` is answered 413 and the connection closed at once, before
  authentication (a trickled body used to hold its connection for ever);
* ``max_connections``: a data route asked while that many connections are open (or that
  many requests run) answers 503; the probes are not counted against it but have
  ``probe_reserve`` requests of their own, so slow or idle clients cannot make an
  orchestrator restart the process. /healthz is answered on the event loop, /readyz on
  threads of its own: neither waits behind the data routes' worker threads;
* basic auth: verified credentials are cached, at most ``auth_concurrency`` bcrypt checks
  run at once (beyond: 429 at once, no check), and a client that keeps failing is
  refused (429 with ``Retry-After``) for a time that doubles with each failure.

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
import math
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

from monitor.config import ServiceConfig
from monitor.core.drivers import with_driver
from monitor.core.jsonable import dumps
from monitor.service.exporter import Exporter
from monitor.service.web_config import WebConfig, load_web_config

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

    # optional: ``alive() -> (alive, reason)`` for /healthz (never blocking); a view
    # without it is always alive

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

    #: open connections (or running requests) beyond which a data route answers 503
    max_connections: int = 64
    #: idle time allowed between two requests of a kept-alive connection
    keep_alive_s: float = 5.0
    #: a request (line and headers; bodies are refused) must arrive within this long
    header_timeout_s: float = 10.0
    #: threads that run the blocking reads (DuckDB, exporter collection)
    worker_threads: int = 4
    #: probe requests (/healthz, /readyz) served at once, outside ``max_connections``
    probe_reserve: int = 8
    #: bcrypt checks running at once; a credential not in the cache beyond it: 429
    auth_concurrency: int = 1
    #: failed logins in a row a client (IP address) may make before it is made to wait
    auth_free_failures: int = 3
    #: the first wait after them; doubled at each further failure, up to the maximum
    auth_backoff_s: float = 1.0
    auth_backoff_max_s: float = 60.0
    #: clients whose failures are remembered (least recently failed forgotten first)
    auth_clients: int = 4096


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
    """The route handlers: plain functions of the parsed query, run on worker threads
    (/healthz, which never blocks, on the event loop)."""

    def __init__(self, exporter: Exporter, view: StateView):
        self.exporter = exporter
        self.view = view

    def status_page(self, query: dict[str, list[str]]) -> Response:
        return _send(200, self.view.status_page().encode(), HTML_TYPE)

    def metrics(self, query: dict[str, list[str]]) -> Response:
        return _send(200, self.exporter.render(), CONTENT_TYPE_LATEST)

    def healthz(self, query: dict[str, list[str]]) -> Response:
        alive = getattr(self.view, "alive", None)
        if alive is not None:
            ok, reason = alive()
            if not ok:
                return _send(503, f"stalled: {reason}\n".encode(), TEXT_TYPE)
        return _send(200, b"ok\n", TEXT_TYPE)

    def readyz(self, query: dict[str, list[str]]) -> Response:
        ready, reason = self.view.ready()
        if ready:
            return _json(200, {"status": "ready"})
        return _json(503, {"status": "not ready", "reason": reason})

    def cells(self, query: dict[str, list[str]]) -> Response:
        return _json(200, [with_driver(r) for r in _page(self.view.cells(), query)])

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


def _endpoint(handler: Handler, limiter: anyio.CapacityLimiter | None):
    """The ASGI endpoint of one handler: on a worker thread of ``limiter``, or on the
    event loop itself when ``limiter`` is None (only for handlers that never block)."""

    async def endpoint(request: Request) -> Response:
        try:
            raw = request.scope["query_string"].decode("latin-1")
            query = parse_qs(raw, keep_blank_values=False, max_num_fields=20)
        except ValueError:
            return _json(400, {"error": "malformed query string"})
        try:
            if limiter is None:
                return handler(query)
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


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request announces a body: Content-Length above 0, or any Transfer-Encoding
    (h11 has already refused a malformed or doubled Content-Length with a 400)."""
    for name, value in headers:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length" and value.strip() not in (b"0", b""):
            return True
    return False


class _NoBody:
    """A request with a body is a 413 and its connection is closed at once.

    Every route is a GET, so a body has no use; reading it would let a client hold the
    connection by trickling it (uvicorn resets its keep-alive timer on every byte and
    never starts the next request until the body has ended), and not reading it leaves
    the connection unusable. Placed before authentication: it costs no bcrypt check.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _has_body(scope["headers"]):
            response = _json(413, {"error": "request body not allowed"}, {"Connection": "close"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _Backoff:
    """Failed logins per client address: after ``free`` failures in a row, the client is
    refused for ``base_s``, doubled at each further failure up to ``max_s``.

    A success forgets the client; so does ``max_s`` without a failure. The table holds at
    most ``size`` clients (the one that failed longest ago goes first), so a flood of
    addresses costs bounded memory (it can then evict a slow attacker: bcrypt concurrency
    is still bounded). Used on the event loop thread only: no lock.
    """

    def __init__(self, free: int, base_s: float, max_s: float, size: int,
                 clock: Callable[[], float] = time.monotonic):  # fmt: skip
        self.free, self.base_s, self.max_s, self.size = free, base_s, max_s, size
        self.clock = clock
        #: client -> (failures in a row, refused until, last failure)
        self._table: OrderedDict[str, tuple[int, float, float]] = OrderedDict()

    def wait_s(self, client: str) -> float:
        """Seconds the client must still wait before its credentials are checked (0: none)."""
        entry = self._table.get(client)
        if entry is None:
            return 0.0
        now = self.clock()
        if now - entry[2] > self.max_s:
            del self._table[client]
            return 0.0
        return max(0.0, entry[1] - now)

    def failed(self, client: str) -> None:
        now = self.clock()
        failures, _until, last = self._table.pop(client, (0, 0.0, now))
        if now - last > self.max_s:
            failures = 0
        failures += 1
        extra = failures - self.free  # 0: the last free failure; the wait starts here
        until = now + min(self.max_s, self.base_s * 2**extra) if extra >= 0 else now
        self._table[client] = (failures, until, now)
        while len(self._table) > self.size:
            self._table.popitem(last=False)

    def succeeded(self, client: str) -> None:
        self._table.pop(client, None)


class _BasicAuth:
    """HTTP basic authentication against bcrypt hashes, as the exporter-toolkit does it.

    bcrypt is slow on purpose (0.06 s a check at cost 10, 0.23 s at 12, on one core), so:

    * a verified (user, hash, password) is remembered under an HMAC with a key that lives
      only in this process, so a scrape every 15 s costs one bcrypt check, not one each
      time; a failed one too (in a table of its own, so failures cannot evict successes):
      a client repeating a wrong password costs no check;
    * at most ``auth_concurrency`` checks run at once, on threads of their own (never the
      data routes' or the probes'); a credential that would need one more is answered 429
      at once, without a check;
    * a client address that keeps failing is answered 429 (``Retry-After``) without a
      check until its backoff has passed (:class:`_Backoff`); cached successes still pass.

    Unknown users are checked against a dummy hash, so the answer time does not tell which
    user names exist; user names are compared with ``hmac.compare_digest``.
    """

    CACHE_SIZE = 64
    FAILED_CACHE_SIZE = 256

    def __init__(self, app: ASGIApp, users: dict[str, bytes], limits: HttpLimits):
        self.app = app
        self.users = users
        self.max_checks = limits.auth_concurrency
        self.limiter = anyio.CapacityLimiter(limits.auth_concurrency)
        self.backoff = _Backoff(limits.auth_free_failures, limits.auth_backoff_s,
                                limits.auth_backoff_max_s, limits.auth_clients)  # fmt: skip
        self._checks = 0
        self._key = os.urandom(32)
        self._ok: OrderedDict[bytes, None] = OrderedDict()
        self._failed: OrderedDict[bytes, None] = OrderedDict()
        # the cost of the configured hashes, so a miss costs the same as a hit
        costs = [int(h[4:6]) for h in users.values() if h[4:6].isdigit()]
        self._dummy = bcrypt.hashpw(b"not a password", bcrypt.gensalt(max(costs, default=12)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        credentials = _basic_credentials(scope)
        if credentials is None:
            await _unauthorized(scope, receive, send)
            return
        user, password = credentials
        hashed, known = self._lookup(user)
        tag = hmac.new(self._key, b"\x00".join((user, hashed, password)), hashlib.sha256).digest()
        if tag in self._ok:
            self._ok.move_to_end(tag)
            await self.app(scope, receive, send)
            return
        client = _client_address(scope)
        wait = self.backoff.wait_s(client)
        if wait > 0 or (tag not in self._failed and self._checks >= self.max_checks):
            await _too_many(scope, receive, send, max(wait, 1.0))
            return
        ok = False
        if tag not in self._failed:
            self._checks += 1
            try:
                ok = await anyio.to_thread.run_sync(
                    _bcrypt_ok, password, hashed, known, limiter=self.limiter
                )
            finally:
                self._checks -= 1
        if ok:
            _remember(self._ok, tag, self.CACHE_SIZE)
            self.backoff.succeeded(client)
            await self.app(scope, receive, send)
            return
        _remember(self._failed, tag, self.FAILED_CACHE_SIZE)
        self.backoff.failed(client)
        await _unauthorized(scope, receive, send)

    def _lookup(self, user: bytes) -> tuple[bytes, bool]:
        """(the user's hash or the dummy one, whether the user exists), in constant time
        over the configured names."""
        hashed, known = self._dummy, False
        for name, h in self.users.items():
            if hmac.compare_digest(name.encode("utf-8"), user):
                hashed, known = h, True
        return hashed, known


def _bcrypt_ok(password: bytes, hashed: bytes, known: bool) -> bool:
    """The bcrypt check itself (it releases the GIL); False for a malformed hash."""
    try:
        return bcrypt.checkpw(password, hashed) and known
    except ValueError:
        return False


def _remember(cache: OrderedDict[bytes, None], tag: bytes, size: int) -> None:
    cache[tag] = None
    cache.move_to_end(tag)
    while len(cache) > size:
        cache.popitem(last=False)


def _client_address(scope: Scope) -> str:
    """The TCP peer's address (uvicorn's proxy headers are off: not spoofable)."""
    client = scope.get("client")
    return str(client[0]) if client else "?"


async def _unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
    response = _json(
        401,
        {"error": "unauthorized"},
        {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'},
    )
    await response(scope, receive, send)


async def _too_many(scope: Scope, receive: Receive, send: Send, retry_s: float) -> None:
    headers = {"Retry-After": str(math.ceil(retry_s))}
    await _json(429, {"error": "too many requests"}, headers)(scope, receive, send)


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
    limits: HttpLimits | None = None,
) -> ASGIApp:
    """The ASGI application: no body > auth (when users are configured) > GET only > routes.

    Three separate pools, so one kind of request never queues behind another: the data
    routes' worker threads, two threads for /readyz (/healthz needs none), and the bcrypt
    checks' own (:class:`_BasicAuth`).
    """
    limits = limits or HttpLimits()
    data = anyio.CapacityLimiter(limits.worker_threads)
    probes = anyio.CapacityLimiter(2)
    r = _Routes(exporter, view)
    table: dict[str, tuple[Handler, anyio.CapacityLimiter | None]] = {
        "/": (r.status_page, data), "/metrics": (r.metrics, data),
        "/healthz": (r.healthz, None), "/readyz": (r.readyz, probes),
    }  # fmt: skip
    if api_enabled:
        table |= {
            "/api/cells": (r.cells, data), "/api/events": (r.events, data),
            "/api/windows": (r.windows, data), "/api/models": (r.models, data),
            "/api/axes": (r.axes, data),
        }  # fmt: skip
    app = Starlette(
        routes=[Route(p, _endpoint(h, lim), methods=["GET"]) for p, (h, lim) in table.items()],
        exception_handlers={404: _not_found},
    )
    app.router.redirect_slashes = False  # "/metrics/" is a 404, not a redirect
    asgi: ASGIApp = _GetOnly(app)
    if users:
        asgi = _BasicAuth(asgi, users, limits)
    return _NoBody(asgi)


# ----------------------------------------------------------------------------- protocol
async def _busy(scope: Scope, receive: Receive, send: Send) -> None:
    headers = {"Retry-After": "1", "Connection": "close"}
    await _json(503, {"error": "server busy"}, headers)(scope, receive, send)


#: h11 states of the client once its request (line, headers and any body) is all in
_REQUEST_IN = frozenset({h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR})


class _Admission:
    """The server-wide counts the admission rule reads (one per server; event loop only)."""

    def __init__(self, max_connections: int, probe_reserve: int):
        self.max_connections = max_connections
        self.probe_reserve = probe_reserve
        self.probes = 0
        #: set at SIGTERM (ApiServer.stop_data_routes): every route but the probes is 503
        self.stopping = False


class _GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request deadline, probe capacity and JSON errors.

    * Deadline: uvicorn's keep-alive timer starts only after a response and is cancelled
      by any byte received, so a client that trickles a header byte a second (or opens a
      connection and sends nothing, or trickles a body) would hold it for ever. Here each
      request must be complete (line, headers and body: h11 says the client is DONE)
      within ``header_timeout_s`` of the connection opening, or of the previous response.
    * Admission, in place of uvicorn's ``limit_concurrency``: a data route is answered 503
      when ``max_connections`` connections are open or that many requests run (uvicorn's
      rule); a probe is not counted against it, only against ``probe_reserve`` probes in
      flight, so connections held by slow clients cannot fail the orchestrator's probes.
    * Protocol errors (a malformed request line, oversized headers) are answered with
      ``{"error": "bad request"}``, never echoing the request.
    """

    header_timeout_s: float = 10.0
    admission: _Admission = _Admission(64, 8)
    _deadline: asyncio.TimerHandle | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._inner_app = self.app
        self.app = self._admit

    async def _admit(self, scope: Scope, receive: Receive, send: Send) -> None:
        adm = self.admission
        if scope.get("path") in OPEN_PATHS:
            if adm.probes >= adm.probe_reserve:
                await _busy(scope, receive, send)
                return
            adm.probes += 1
            try:
                await self._inner_app(scope, receive, send)
            finally:
                adm.probes -= 1
            return
        if adm.stopping:
            headers = {"Connection": "close"}
            await _json(503, {"error": "shutting down"}, headers)(scope, receive, send)
            return
        # this request's own task and connection are already in the sets
        if len(self.connections) >= adm.max_connections or len(self.tasks) > adm.max_connections:
            await _busy(scope, receive, send)
            return
        await self._inner_app(scope, receive, send)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # a stream server gives a Transport
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in _REQUEST_IN:
            self._disarm()  # the whole request is in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state not in _REQUEST_IN:
            self._arm()  # the next request's clock (or a body still coming: closed soon)

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
            log.debug("api: request not complete in %.1f s: closing", self.header_timeout_s)
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
                 tls: bool, admission: _Admission | None = None):  # fmt: skip
        self._server = server
        self._admission = admission
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

    def stop_data_routes(self) -> None:
        """Shutting down: every route but /healthz and /readyz answers 503 from now on."""
        if self._admission is not None:
            self._admission.stopping = True

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
    app = build_app(exporter, view, api_enabled=api_enabled, users=web.users, limits=limits)
    admission = _Admission(limits.max_connections, limits.probe_reserve)
    protocol = type("GuardedH11Protocol", (_GuardedH11Protocol,), {
        "header_timeout_s": limits.header_timeout_s, "admission": admission,
    })  # fmt: skip
    tls = web.tls
    config = uvicorn.Config(
        app,
        http=protocol,
        loop="asyncio",
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        # the client address is the TCP peer's: X-Forwarded-For must not pick the
        # address the login backoff is kept under
        proxy_headers=False,
        limit_concurrency=None,  # the protocol's admission rule (probes apart)
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
    api = ApiServer(server, thread, sock, tls=tls is not None, admission=admission)
    log.info("api listening on %s (auth %s)", api.url, "on" if web.users else "off")
    return api


def server_settings(svc: ServiceConfig) -> tuple[WebConfig | None, HttpLimits]:
    """The web config (TLS, users; None without a file) and the limits ``config.service``
    asks for: the one place ``run`` and ``view`` both take them from.

    A bad web-config file raises ConfigError naming ``service.web_config.<key>``.
    """
    web = None if svc.web_config is None else load_web_config(svc.web_config)
    limits = HttpLimits(
        max_connections=svc.http_max_connections,
        keep_alive_s=svc.http_keep_alive_s,
        header_timeout_s=svc.http_header_timeout_s,
    )
    return web, limits


def serve_configured(
    exporter: Exporter, view: StateView, svc: ServiceConfig, port: int
) -> ApiServer:
    """:func:`serve` with ``config.service``'s address, web config, API switch and limits."""
    web, limits = server_settings(svc)
    return serve(exporter, view, host=svc.http_host, port=port, web_config=web,
                 api_enabled=svc.api_enabled, limits=limits)  # fmt: skip


__all__ = [
    "ApiServer", "HttpLimits", "StateView", "build_app", "serve", "serve_configured",
    "server_settings",
]  # fmt: skip
