"""Read-only HTTP API of the streaming service: /metrics, health, and the current state.

Standard library only (``ThreadingHTTPServer`` in a daemon thread): the service
needs six GET routes, and a framework would be one more dependency to patch for
something that must never write anything.

Routes::

    GET /metrics       Prometheus text format of the Exporter's own registry
    GET /healthz       200 "ok" while the process serves requests
    GET /readyz        200 {"status": "ready"} or 503 {"status": "not ready", "reason": ...}
    GET /api/cells     JSON list, StateView.cells()
    GET /api/events    ?limit=1..1000 (default 100) &since_id=>=0 -> StateView.events()
    GET /api/windows   ?model=&metric=&attribute= (required) &limit=1..1000 (default 100)
                       -> StateView.windows(); None (unknown cell) is a 404

Anything else is 404, any other method 405 (``Allow: GET``).

JSON and non-finite numbers (documented choice): NaN is encoded as ``null``
and +/-infinity as the strings ``"inf"`` / ``"-inf"``. Infinity means something
here (N* = inf: the audit size was never reached; sigma = inf: zero spread), so
it must stay distinguishable from "no value" (null). Output is produced with
``allow_nan=False``, so it is always strict JSON.

Errors are JSON ``{"error": ...}`` naming at most the offending parameter,
never echoing request-supplied values, never a stack trace (that goes to the
log). Access logging goes to ``logging`` at DEBUG; nothing is printed.
"""

from __future__ import annotations

import logging
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST

from monitor.exporter import Exporter
from monitor.jsonable import dumps

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
#: Longest accepted model / metric / attribute value: these are configured ids.
MAX_NAME_LENGTH = 128
JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"


class StateView(Protocol):
    """What the API reads from the service: plain JSON-like data, no service objects."""

    def ready(self) -> tuple[bool, str]:
        """(ready, reason): reason says what is missing when not ready."""
        ...

    def cells(self) -> list[dict]: ...

    def events(self, limit: int, since_id: int | None) -> list[dict]: ...

    def windows(self, model: str, metric: str, attribute: str, limit: int) -> list[dict] | None:
        """Latest evaluations of one cell; None when the cell is unknown."""
        ...


# ----------------------------------------------------------------------------- handler
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


def _name_param(query: dict[str, list[str]], name: str) -> str:
    value = _one(query, name, required=True)
    assert value is not None
    if len(value) > MAX_NAME_LENGTH or not value.isprintable():
        raise _BadParamError(name)
    return value


class _Handler(BaseHTTPRequestHandler):
    """GET-only router; the exporter and view come from the server object."""

    server: _Server
    server_version = "vfr-monitor"
    sys_version = ""  # do not advertise the Python version
    protocol_version = "HTTP/1.1"
    timeout = 30  # a stuck client must not hold a thread forever

    # -- routing
    def do_GET(self) -> None:
        try:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query, keep_blank_values=False, max_num_fields=20)
        except ValueError:
            self._json(HTTPStatus.BAD_REQUEST, {"error": "malformed query string"})
            return
        route = {
            "/metrics": self._metrics,
            "/healthz": self._healthz,
            "/readyz": self._readyz,
            "/api/cells": self._cells,
            "/api/events": self._events,
            "/api/windows": self._windows,
        }.get(parts.path)
        if route is None:
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        try:
            route(query)
        except _BadParamError as e:
            self._json(HTTPStatus.BAD_REQUEST, {"error": "invalid parameter", "parameter": e.name})
        except Exception as exc:  # the type only: an exception's text may quote data
            log.error("api: %s failed: %s", parts.path, type(exc).__name__)
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": "internal error"})

    def __getattr__(self, name: str):
        # BaseHTTPRequestHandler looks up do_<METHOD>; every method but GET is a 405
        # (not the default 501), including made-up ones.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        # The request may carry a body we do not read: close rather than misparse it
        # as the next request on a kept-alive connection.
        self.close_connection = True
        self._json(
            HTTPStatus.METHOD_NOT_ALLOWED,
            {"error": "method not allowed"},
            {"Allow": "GET", "Connection": "close"},
        )

    # -- routes
    def _metrics(self, query: dict[str, list[str]]) -> None:
        self._send(HTTPStatus.OK, self.server.exporter.render(), CONTENT_TYPE_LATEST)

    def _healthz(self, query: dict[str, list[str]]) -> None:
        self._send(HTTPStatus.OK, b"ok\n", TEXT_TYPE)

    def _readyz(self, query: dict[str, list[str]]) -> None:
        ready, reason = self.server.view.ready()
        if ready:
            self._json(HTTPStatus.OK, {"status": "ready"})
        else:
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"status": "not ready", "reason": reason})

    def _cells(self, query: dict[str, list[str]]) -> None:
        self._json(HTTPStatus.OK, self.server.view.cells())

    def _events(self, query: dict[str, list[str]]) -> None:
        limit = _int_param(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        since_id = _int_param(query, "since_id", None, 0, 2**62)
        self._json(HTTPStatus.OK, self.server.view.events(limit, since_id))

    def _windows(self, query: dict[str, list[str]]) -> None:
        model = _name_param(query, "model")
        metric = _name_param(query, "metric")
        attribute = _name_param(query, "attribute")
        limit = _int_param(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        rows = self.server.view.windows(model, metric, attribute, limit)
        if rows is None:
            self._json(HTTPStatus.NOT_FOUND, {"error": "unknown cell"})
        else:
            self._json(HTTPStatus.OK, rows)

    # -- responses
    def _json(self, status: HTTPStatus, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, dumps(obj), JSON_TYPE, headers)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None):
        """Protocol-level errors (bad request line, oversized header...) as JSON.

        The default puts the offending request text into an HTML page; this
        never echoes the request, only the standard reason phrase.
        """
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            # An unparsable request line leaves the version at 0.9, which would
            # suppress the status line: answer as HTTP/1.0 so clients see the code.
            self.request_version = "HTTP/1.0"
        body = dumps({"error": phrase.lower()})
        self.send_response(code)
        self.send_header("Content-Type", JSON_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("api %s " + format, self.address_string(), *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Never share the port with a stale process: a second service on the same
    # port must fail loudly at start-up.
    allow_reuse_address = False

    def __init__(self, address: tuple[str, int], exporter: Exporter, view: StateView):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.exporter = exporter
        self.view = view
        super().__init__(address, _Handler)


class ApiServer:
    """A running API: ``address`` / ``port`` (the real one when 0 was asked), ``close()``."""

    def __init__(self, server: _Server, thread: threading.Thread):
        self._server = server
        self._thread = thread

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def close(self) -> None:
        """Stop serving and release the port; safe to call twice."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()

    def __enter__(self) -> ApiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(
    exporter: Exporter, view: StateView, host: str = "127.0.0.1", port: int = 9464
) -> ApiServer:
    """Start the API in a daemon thread (loopback by default; port 0 = any free port)."""
    server = _Server((host, port), exporter, view)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="vfr-api", daemon=True
    )
    thread.start()
    log.info("api listening on %s:%d", *server.server_address[:2])
    return ApiServer(server, thread)
