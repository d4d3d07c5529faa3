"""The HTTP server's limits, and where they come from: ``[service.http]`` and its
web-config file.

:class:`HttpLimits` holds every number the server's guards read (monitor.service.http_protocol:
the request deadline and admission; monitor.service.http_auth: the login backoff); the
configuration sets three of them, the rest are fixed defaults a test or a bench may change.
:func:`server_settings` is the one place ``run`` and ``view`` take them from.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.config.service import HttpConfig
from monitor.service.web_config import WebConfig, load_web_config


@dataclass(frozen=True)
class HttpLimits:
    """Connection limits of the server (``[service.http]`` carries the configured
    values: :func:`server_settings`)."""

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


def server_settings(http: HttpConfig) -> tuple[WebConfig | None, HttpLimits]:
    """The web config (TLS, users; None without a file) and the limits ``[service.http]``
    asks for: the one place ``run`` and ``view`` both take them from.

    A bad web-config file raises ConfigError naming ``service.http.web_config.<key>``.

    >>> server_settings(HttpConfig(max_connections=8))[1].max_connections
    8
    """
    web = None if http.web_config is None else load_web_config(http.web_config)
    limits = HttpLimits(
        max_connections=http.max_connections,
        keep_alive_s=http.keep_alive_s,
        header_timeout_s=http.header_timeout_s,
    )
    return web, limits
