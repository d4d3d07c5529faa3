"""The HTTP server of the service and of the fleet view: its life cycle, from the bound
port to ``close()``.

Served by Starlette on uvicorn in a background thread of the service (the main thread
runs the source). Why not ``http.server`` any more: it spends a thread per connection
(300 half-open connections were 183 threads) and has no deadline for a trickled header;
TLS, basic auth and connection limits belong to a server that is maintained for them.
One event loop holds every connection; the blocking reads (DuckDB, the exporter's
collector) run on a small fixed pool of worker threads.

The application, outside in: no request body (monitor.service.http_protocol) > basic auth
when users are configured (monitor.service.http_auth) > GET only > the routes
(monitor.service.http_routes); under it all, uvicorn's h11 protocol with the request
deadline and the admission rule. Protection (see :mod:`monitor.service.web_config`): TLS
and basic auth from the web-config file.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import anyio
import uvicorn
from starlette.types import ASGIApp

from monitor.config.service import HttpConfig
from monitor.service.exporter import Exporter
from monitor.service.http_auth import BasicAuth
from monitor.service.http_protocol import Admission, GetOnly, NoBody, guarded_protocol
from monitor.service.http_routes import StateView, routes_app
from monitor.service.http_settings import HttpLimits, server_settings
from monitor.service.web_config import WebConfig

log = logging.getLogger(__name__)


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
    checks' own (:class:`~monitor.service.http_auth.BasicAuth`).
    """
    limits = limits or HttpLimits()
    data = anyio.CapacityLimiter(limits.worker_threads)
    probes = anyio.CapacityLimiter(2)
    asgi: ASGIApp = GetOnly(routes_app(exporter, view, api_enabled, data, probes))
    if users:
        asgi = BasicAuth(asgi, users, limits)
    return NoBody(asgi)


class ApiServer:
    """A running API: ``address`` / ``port`` (the real one when 0 was asked), ``close()``."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, sock: socket.socket,
                 tls: bool, admission: Admission | None = None):  # fmt: skip
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
    protocol, admission = guarded_protocol(limits)
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


def serve_configured(exporter: Exporter, view: StateView, http: HttpConfig, port: int) -> ApiServer:
    """:func:`serve` with ``[service.http]``'s address, web config, API switch and limits."""
    web, limits = server_settings(http)
    return serve(exporter, view, host=http.host, port=port, web_config=web,
                 api_enabled=http.api_enabled, limits=limits)  # fmt: skip
