"""Basic auth's pieces that need no server (monitor.service.http_auth): the login backoff
on a hand-advanced clock, and the parsing of an Authorization header. The whole of it on a
real server (cache, bcrypt bound, 401/429 answers): tests/service/test_api_security.py."""

from __future__ import annotations

import base64

from monitor.service.http_auth import LoginBackoff, _basic_credentials


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _backoff(clock: Clock, size: int = 100) -> LoginBackoff:
    return LoginBackoff(free=3, base_s=1.0, max_s=60.0, size=size, clock=clock)


def test_the_wait_starts_at_the_last_free_failure_and_doubles_up_to_the_cap():
    clock = Clock()
    b = _backoff(clock)
    waits = []
    for _ in range(10):
        b.failed("10.0.0.1")
        waits.append(b.wait_s("10.0.0.1"))
    assert waits == [0.0, 0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert b.wait_s("10.0.0.2") == 0.0  # another client does not wait
    clock.now += 30
    assert b.wait_s("10.0.0.1") == 30.0  # time passes off the wait


def test_a_success_forgets_the_client_and_so_does_a_long_quiet():
    clock = Clock()
    b = _backoff(clock)
    for _ in range(5):
        b.failed("a")
    b.succeeded("a")
    assert b.wait_s("a") == 0.0
    b.failed("a")
    assert b.wait_s("a") == 0.0  # counting starts again
    for _ in range(5):
        b.failed("b")
    clock.now += 61  # max_s without a failure
    assert b.wait_s("b") == 0.0
    b.failed("b")
    assert b.wait_s("b") == 0.0  # a new first failure, not the sixth


def test_the_table_is_bounded_and_forgets_the_client_that_failed_longest_ago():
    clock = Clock()
    b = _backoff(clock, size=2)
    for client in ("a", "b", "c"):
        for _ in range(3):
            b.failed(client)
        clock.now += 0.01
    assert b.wait_s("a") == 0.0  # evicted
    assert b.wait_s("b") > 0 and b.wait_s("c") > 0


def _scope(value: bytes | None) -> dict:
    headers = [] if value is None else [(b"authorization", value)]
    return {"headers": [(b"host", b"x"), *headers]}


def test_basic_credentials_are_parsed_and_anything_else_is_none():
    good = b"Basic " + base64.b64encode(b"prometheus:pa:ss")
    assert _basic_credentials(_scope(good)) == (b"prometheus", b"pa:ss")
    assert _basic_credentials(_scope(b"basic " + base64.b64encode(b"u:"))) == (b"u", b"")
    no_colon = b"Basic " + base64.b64encode(b"nocolon")
    for bad in (None, b"Bearer abc", b"Basic not-base64!", no_colon):
        assert _basic_credentials(_scope(bad)) is None
