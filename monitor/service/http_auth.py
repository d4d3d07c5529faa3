"""HTTP basic authentication of the API, with a backoff for clients that keep failing.

What it covers: every path but /healthz and /readyz (``http_routes.OPEN_PATHS``),
which orchestrator probes call without credentials and which carry no data. Users and
their bcrypt hashes come from the web-config file (monitor.service.web_config).

Limits (docs/decisions.md, "HTTP under load"): verified credentials are cached, at most
``auth_concurrency`` bcrypt checks run at once (beyond: 429 at once, no check), and a
client that keeps failing is refused (429 with ``Retry-After``) for a time that doubles
with each failure (:class:`LoginBackoff`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable

import anyio
import bcrypt
from starlette.types import ASGIApp, Receive, Scope, Send

from monitor.service.http_routes import OPEN_PATHS, json_response
from monitor.service.http_settings import HttpLimits

REALM = "vfr-monitor"


class LoginBackoff:
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


class BasicAuth:
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
      check until its backoff has passed (:class:`LoginBackoff`); cached successes still pass.

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
        self.backoff = LoginBackoff(limits.auth_free_failures, limits.auth_backoff_s,
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
    response = json_response(
        401,
        {"error": "unauthorized"},
        {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'},
    )
    await response(scope, receive, send)


async def _too_many(scope: Scope, receive: Receive, send: Send, retry_s: float) -> None:
    headers = {"Retry-After": str(math.ceil(retry_s))}
    await json_response(429, {"error": "too many requests"}, headers)(scope, receive, send)


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
