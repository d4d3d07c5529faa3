"""Deliver the bytes kafka-python reads in the same call as the broker's close.

kafka-python 3.0.x (``kafka.net.transport``) reads a readable socket in a loop until it
would block. When the last bytes and the peer's close arrive together, the loop collects
the bytes, then sees the close, and returns both; the caller aborts on the error and
drops the bytes unread.

A Kafka broker that rejects a SASL login does exactly this: it sends the
``SaslAuthenticate`` error response and closes the connection right after it
(``connection.failed.authentication.delay.ms`` delays both together). On a busy machine the
client wakes up after both have arrived, the response is dropped, and a wrong password
looks like an unreachable broker: kafka-python retries until "Unable to bootstrap" and
the service cannot say which setting is wrong. This failed CI once (the SCRAM wrong-password
test, at load), so it is fixed here rather than worked around in the test.

The fix wraps each transport's ``_sock_recv``: when it returns bytes *and* an error, the
bytes are returned alone; the socket is still at end-of-file, so the transport's next read
(it loops while reading is on) returns the error with no bytes and aborts as before.
Nothing else changes. Applied once, by :func:`consumers.kafka_source._kafka`, and only to
the transport classes that have the method this was written against.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

#: marks a wrapped ``_sock_recv`` so that applying the fix twice is a no-op
_WRAPPED = "_vfr_bytes_before_eof"


def bytes_before_eof(sock_recv: Callable[[Any], tuple[bytes, Any]]) -> Callable:
    """Wrap a transport's ``_sock_recv() -> (bytes, error | None)``: bytes go first."""

    @functools.wraps(sock_recv)
    def wrapper(self: Any) -> tuple[bytes, Any]:
        data, err = sock_recv(self)
        if data and err is not None:
            return data, None
        return data, err

    setattr(wrapper, _WRAPPED, True)
    return wrapper


def deliver_bytes_before_eof() -> list[str]:
    """Apply :func:`bytes_before_eof` to kafka-python's transports; returns the classes patched.

    An empty list means this kafka-python has no such transports (another major version):
    nothing is changed.
    """
    try:
        from kafka.net import transport
    except ImportError:
        return []
    patched = []
    for name in ("KafkaTCPTransport", "KafkaSSLTransport"):
        cls = getattr(transport, name, None)
        recv = None if cls is None else cls.__dict__.get("_sock_recv")
        if cls is None or recv is None or getattr(recv, _WRAPPED, False):
            continue
        cls._sock_recv = bytes_before_eof(recv)
        patched.append(name)
    return patched
