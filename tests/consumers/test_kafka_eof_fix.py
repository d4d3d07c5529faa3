"""kafka-python must hand on the bytes that arrive together with the broker's close.

Real sockets (a connected pair); the peer writes a response and closes before the reader
wakes up, which is what a broker rejecting a SASL login does. Without
:mod:`consumers.kafka_eof_fix` kafka-python 3.0.x returns the bytes *and* the error from one
read and its read loop aborts without delivering them (the CI failure of the SCRAM
wrong-password test).
"""

from __future__ import annotations

import socket

import pytest

from consumers.kafka_eof_fix import bytes_before_eof
from consumers.kafka_source import _kafka


@pytest.fixture
def closed_after_response():
    """A non-blocking socket whose peer has written ``RESPONSE`` and closed."""
    reader, writer = socket.socketpair()
    writer.sendall(b"RESPONSE")
    writer.close()
    reader.setblocking(False)
    yield reader
    reader.close()


class _Transport:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock


def test_the_library_read_returns_bytes_and_error_together(closed_after_response):
    """The premise: the unwrapped read gives both at once (else the fix is not needed)."""
    from kafka.net.transport import KafkaTCPTransport

    _kafka()
    original = KafkaTCPTransport._sock_recv.__wrapped__
    data, err = original(_Transport(closed_after_response))
    assert data == b"RESPONSE" and err is not None


def test_bytes_come_first_and_the_close_on_the_next_read(closed_after_response):
    _kafka()
    from kafka.net.transport import KafkaTCPTransport

    transport = _Transport(closed_after_response)
    assert KafkaTCPTransport._sock_recv(transport) == (b"RESPONSE", None)
    data, err = KafkaTCPTransport._sock_recv(transport)
    assert data == b"" and err is not None


def test_both_transports_are_wrapped_once():
    _kafka()
    from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

    for cls in (KafkaTCPTransport, KafkaSSLTransport):
        recv = cls.__dict__["_sock_recv"]
        assert recv.__wrapped__ is not None
        assert not hasattr(recv.__wrapped__, "__wrapped__")  # not wrapped twice


def test_a_read_without_close_is_unchanged():
    reader, writer = socket.socketpair()
    try:
        writer.sendall(b"abc")
        reader.setblocking(False)
        calls = []

        def recv(self):
            calls.append(self)
            return self._sock.recv(10), None

        assert bytes_before_eof(recv)(_Transport(reader)) == (b"abc", None)
        assert len(calls) == 1
    finally:
        reader.close()
        writer.close()
