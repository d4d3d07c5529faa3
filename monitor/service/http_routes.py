"""The routes of the service's read-only HTTP API: /metrics, health, and the current state.

Each route is a plain function of the parsed query, run on a worker thread (the blocking
reads: DuckDB, the exporter's collector) or, for /healthz, which never blocks, on the
event loop. The server around them (monitor.service.http_server) adds, outside in:
refusal of request bodies and of methods other than GET (monitor.service.http_protocol),
basic auth (monitor.service.http_auth), the request deadline and admission.

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

JSON and non-finite numbers (documented choice): NaN is encoded as ``null``
and +/-infinity as the strings ``"inf"`` / ``"-inf"``. Infinity means something
here (N* = inf: the audit size was never reached; sigma = inf: zero spread), so
it must stay distinguishable from "no value" (null). Output is produced with
``allow_nan=False``, so it is always strict JSON.

Errors are JSON ``{"error": ...}`` naming at most the offending parameter,
never echoing request-supplied values, never a stack trace (that goes to the
log). Nothing is printed; uvicorn's access log is off.

Protection (TLS, basic auth, limits) is the server's: monitor.service.http_server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import parse_qs

import anyio
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from monitor.core.drivers import with_driver
from monitor.core.jsonable import dumps
from monitor.service.exporter import Exporter

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


def respond(
    status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
) -> Response:
    """A response with the headers every answer carries (not cached, no type sniffing)."""
    return Response(body, status, {**_COMMON_HEADERS, **(headers or {})}, content_type)


def json_response(status: int, obj: Any, headers: dict[str, str] | None = None) -> Response:
    """``obj`` as strict JSON (monitor.core.jsonable: NaN null, infinities as strings)."""
    return respond(status, dumps(obj), JSON_TYPE, headers)


# ----------------------------------------------------------------------------- routes
Handler = Callable[[dict[str, list[str]]], Response]


class _Routes:
    """The route handlers: plain functions of the parsed query, run on worker threads
    (/healthz, which never blocks, on the event loop)."""

    def __init__(self, exporter: Exporter, view: StateView):
        self.exporter = exporter
        self.view = view

    def status_page(self, query: dict[str, list[str]]) -> Response:
        return respond(200, self.view.status_page().encode(), HTML_TYPE)

    def metrics(self, query: dict[str, list[str]]) -> Response:
        return respond(200, self.exporter.render(), CONTENT_TYPE_LATEST)

    def healthz(self, query: dict[str, list[str]]) -> Response:
        alive = getattr(self.view, "alive", None)
        if alive is not None:
            ok, reason = alive()
            if not ok:
                return respond(503, f"stalled: {reason}\n".encode(), TEXT_TYPE)
        return respond(200, b"ok\n", TEXT_TYPE)

    def readyz(self, query: dict[str, list[str]]) -> Response:
        ready, reason = self.view.ready()
        if ready:
            return json_response(200, {"status": "ready"})
        return json_response(503, {"status": "not ready", "reason": reason})

    def cells(self, query: dict[str, list[str]]) -> Response:
        return json_response(200, [with_driver(r) for r in _page(self.view.cells(), query)])

    def events(self, query: dict[str, list[str]]) -> Response:
        limit = _int_param(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        since_id = _int_param(query, "since_id", None, 0, 2**62)
        return json_response(200, self.view.events(limit, since_id))

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
            return json_response(404, {"error": "unknown cell"})
        return json_response(200, rows)

    def models(self, query: dict[str, list[str]]) -> Response:
        return json_response(200, _page(self.view.models(), query))

    def axes(self, query: dict[str, list[str]]) -> Response:
        axis = _one(query, "axis", required=True)
        if axis not in AXES:
            raise _BadParamError("axis")
        model = _name_param(query, "model", required=False)
        limit = _int_param(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        offset = _int_param(query, "offset", 0, 0, MAX_OFFSET)
        rows = self.view.axes(axis, model, limit, offset)
        if rows is None:
            return json_response(404, {"error": "unknown model"})
        return json_response(200, rows)


def _endpoint(handler: Handler, limiter: anyio.CapacityLimiter | None):
    """The ASGI endpoint of one handler: on a worker thread of ``limiter``, or on the
    event loop itself when ``limiter`` is None (only for handlers that never block)."""

    async def endpoint(request: Request) -> Response:
        try:
            raw = request.scope["query_string"].decode("latin-1")
            query = parse_qs(raw, keep_blank_values=False, max_num_fields=20)
        except ValueError:
            return json_response(400, {"error": "malformed query string"})
        try:
            if limiter is None:
                return handler(query)
            return await anyio.to_thread.run_sync(handler, query, limiter=limiter)
        except _BadParamError as e:
            return json_response(400, {"error": "invalid parameter", "parameter": e.name})
        except Exception as exc:  # the type only: an exception's text may quote data
            log.error("api: %s failed: %s", request.url.path, type(exc).__name__)
            return json_response(500, {"error": "internal error"})

    return endpoint


async def _not_found(request: Request, exc: Exception) -> Response:
    return json_response(404, {"error": "not found"})


def routes_app(
    exporter: Exporter,
    view: StateView,
    api_enabled: bool,
    data: anyio.CapacityLimiter,
    probes: anyio.CapacityLimiter,
) -> Starlette:
    """The routes: the data routes on ``data``'s worker threads, /readyz on ``probes``'
    (neither waits behind the other), /healthz on the event loop; with ``api_enabled``
    false no /api route exists (a 404, as any unknown path)."""
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
    return app
