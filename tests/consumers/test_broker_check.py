"""What a wrong ``bootstrap_servers`` is told (consumers.broker_check), from real probes.

Each finding is caused for real on this machine: a name under ``.invalid`` (never resolves,
RFC 2606), a closed loopback port, a loopback listener that accepts but is no broker, a
listener whose accept queue is full (the kernel drops the connection attempt: no answer),
and the broadcast address (no TCP connection can be made to it). The CLI's own words for
these (``run``'s exit 3) are checked end to end by tests/scenarios/test_engineer_path.py.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

from consumers.broker_check import no_broker_message, probe, unreachable_message
from monitor.config.sources import KafkaConfig


@contextlib.contextmanager
def listener(backlog: int = 8) -> Iterator[tuple[socket.socket, int]]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(backlog)
    try:
        yield srv, srv.getsockname()[1]
    finally:
        srv.close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound once, then released)."""
    with listener() as (_, port):
        pass
    return port


def test_a_name_that_does_not_resolve():
    assert probe("no-such-broker.invalid:9092").startswith("the host name does not resolve")


def test_a_port_nothing_listens_on():
    port = closed_port()
    for server in (f"127.0.0.1:{port}", f"[::ffff:127.0.0.1]:{port}"):
        assert probe(server).startswith("nothing listens on that port (connection refused)")


def test_a_listener_that_accepts_but_is_not_a_broker():
    with listener() as (_, port):
        found = probe(f"127.0.0.1:{port}")
    assert found.startswith("it accepts TCP connections but did not answer as a Kafka broker")
    assert "advertised.listeners" in found


def test_no_answer_within_the_timeout():
    with listener(backlog=0) as (_, port):
        waiting = []
        for _ in range(4):  # fill the accept queue (nobody accepts)
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            waiting.append(c)
        time.sleep(0.1)
        start = time.monotonic()
        found = probe(f"127.0.0.1:{port}", timeout_s=0.4)
        took = time.monotonic() - start
        for c in waiting:
            c.close()
    assert found == "no answer to a TCP connection (a firewall, or the wrong host)"
    assert 0.35 < took < 5


def test_another_connection_failure_names_its_kind_only():
    found = probe("255.255.255.255:9092", timeout_s=0.5)
    assert found.startswith("the TCP connection failed (") and found.endswith("Error)")


def test_the_message_names_each_address_with_its_finding_and_the_settings():
    port = closed_port()
    with listener() as (_, open_port):
        cfg = KafkaConfig(
            bootstrap_servers=(f"127.0.0.1:{port}", "kafka.invalid:9092", f"127.0.0.1:{open_port}"),
            bootstrap_timeout_ms=2500, security_protocol="SSL",
        )  # fmt: skip
        msg = unreachable_message(cfg)
    assert msg.startswith(
        f"no Kafka broker answered at 127.0.0.1:{port},kafka.invalid:9092,127.0.0.1:{open_port} "
        "within 2.5 s (kafka.bootstrap_timeout_ms). "
        f"127.0.0.1:{port}: nothing listens on that port (connection refused)"
    )
    assert "; kafka.invalid:9092: the host name does not resolve" in msg
    assert f"; 127.0.0.1:{open_port}: it accepts TCP connections" in msg
    assert msg.endswith(
        "Check kafka.bootstrap_servers (VFR_KAFKA_BOOTSTRAP): host:port of a broker reachable "
        "from this machine with security_protocol SSL (VFR_KAFKA_SECURITY_PROTOCOL)"
    )


def test_a_client_names_its_own_setting():
    port = closed_port()
    msg = no_broker_message([f"127.0.0.1:{port}"], "within 10 s", "--bootstrap")
    assert msg.endswith("Check --bootstrap: host:port of a broker reachable from this machine")
