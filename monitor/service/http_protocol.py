"""The guards of the HTTP connection and request, before any route runs.

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
* every method but GET is a 405 (``Allow: GET``), on every path.

The login backoff and the bcrypt bound are the authentication's (monitor.service.http_auth).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from monitor.core.jsonable import dumps
from monitor.service.http_routes import JSON_TYPE, OPEN_PATHS, json_response
from monitor.service.http_settings import HttpLimits

log = logging.getLogger(__name__)


class GetOnly:
    """Every method but GET is a 405, on every path (HEAD and made-up methods included).

    The request may carry a body we do not read: close rather than misparse it as the
    next request on a kept-alive connection.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] != "GET":
            response = json_response(
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


class NoBody:
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
            response = json_response(
                413, {"error": "request body not allowed"}, {"Connection": "close"}
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _busy(scope: Scope, receive: Receive, send: Send) -> None:
    headers = {"Retry-After": "1", "Connection": "close"}
    await json_response(503, {"error": "server busy"}, headers)(scope, receive, send)


#: h11 states of the client once its request (line, headers and any body) is all in
_REQUEST_IN = frozenset({h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR})


class Admission:
    """The server-wide counts the admission rule reads (one per server; event loop only)."""

    def __init__(self, max_connections: int, probe_reserve: int):
        self.max_connections = max_connections
        self.probe_reserve = probe_reserve
        self.probes = 0
        #: set at SIGTERM (ApiServer.stop_data_routes): every route but the probes is 503
        self.stopping = False


class GuardedH11Protocol(H11Protocol):
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
    admission: Admission = Admission(64, 8)
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
            await json_response(503, {"error": "shutting down"}, headers)(scope, receive, send)
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


def guarded_protocol(limits: HttpLimits) -> tuple[type[GuardedH11Protocol], Admission]:
    """The protocol class of one server (its deadline and its admission counts) and those
    counts, which the server's shutdown flips to "stopping"."""
    admission = Admission(limits.max_connections, limits.probe_reserve)
    protocol = type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "header_timeout_s": limits.header_timeout_s, "admission": admission,
    })  # fmt: skip
    return protocol, admission
