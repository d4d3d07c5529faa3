"""Why no Kafka broker answered: the message a wrong ``bootstrap_servers`` gets.

kafka-python gives up with a bare ``KafkaTimeoutError: Unable to bootstrap`` after
``bootstrap_timeout_ms``; the CLI withholds messages of foreign exceptions (they may quote
record values), so the user saw 30 s of silence and then nothing useful. A broker's
address is a server address, not patient data: the message names it, probes each address
once (does the name resolve, does anything accept a TCP connection there) and says what to
check for what it found.
"""

from __future__ import annotations

import socket

from monitor.config.sources import KafkaConfig

#: Seconds each probe may take (one name look-up and one TCP connect per address).
PROBE_TIMEOUT_S = 2.0


def probe(server: str, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """What a ``host:port`` looks like from here, in words."""
    host, _, port = server.rpartition(":")
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return (
            "the host name does not resolve (a typo, or a name known only inside a "
            "container network such as docker compose's)"
        )
    except OSError:
        return "the host name could not be looked up"
    family, kind, proto, _, addr = infos[0]
    try:
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(timeout_s)
            sock.connect(addr)
    except ConnectionRefusedError:
        return (
            "nothing listens on that port (connection refused): check that the broker "
            "runs and listens on this port"
        )
    except TimeoutError:
        return "no answer to a TCP connection (a firewall, or the wrong host)"
    except OSError as exc:
        return f"the TCP connection failed ({type(exc).__name__})"
    return (
        "it accepts TCP connections but did not answer as a Kafka broker: check that it is "
        "the broker's listener (advertised.listeners) and that the security protocol matches"
    )


def unreachable_message(cfg: KafkaConfig) -> str:
    """No broker answered within ``bootstrap_timeout_ms``: each address with what a probe
    found, and the settings to check."""
    return no_broker_message(
        cfg.bootstrap_servers,
        f"within {cfg.bootstrap_timeout_ms / 1000:g} s (kafka.bootstrap_timeout_ms)",
        "kafka.bootstrap_servers (VFR_KAFKA_BOOTSTRAP)",
        f" with security_protocol {cfg.security_protocol} (VFR_KAFKA_SECURITY_PROTOCOL)",
    )


def no_broker_message(
    servers: tuple[str, ...] | list[str], waited: str, setting: str, protocol: str = ""
) -> str:
    """The words of :func:`unreachable_message` for any client (``produce --bootstrap``
    names its flag as ``setting``)."""
    found = "; ".join(f"{s}: {probe(s)}" for s in servers)
    return (
        f"no Kafka broker answered at {','.join(servers)} {waited}. {found}. "
        f"Check {setting}: host:port of a broker reachable from this machine{protocol}"
    )
