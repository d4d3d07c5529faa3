"""One real Kafka broker per test session, shared by every Kafka test module.

A real single-node Kafka 4.x (KRaft) broker is provisioned from Maven Central jars by
deploy/kafka/kafka.sh (cached between runs), started on a free 127.0.0.1 port in a temporary
directory for the whole test session, and stopped at the end. If the broker cannot be
provisioned or started the requesting test FAILS: a missing broker must never pass silently
as a skip.

Why a module of its own rather than a fixture per test file: starting the broker costs ~10 s,
so the session-scoped fixtures here are registered once, in tests/conftest.py, and every
test that names ``kafka_broker`` (or ``kafka_scram_broker``) shares them.

The broker is held in module state with a user count: the first requester starts it, later
ones reuse it, the last release (at session end) stops it. A failed start is remembered
too, so the other tests fail at once instead of retrying.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import free_ports

KAFKA_SH = Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "kafka.sh"
#: Default partitions of auto-created topics on the test broker.
N_PARTITIONS = 3


def _stop_when_this_process_ends(run_dir: str, env: dict[str, str]) -> None:
    """A detached watcher that stops the broker in ``run_dir`` once this process is gone.

    Why: the session fixtures stop their brokers at the end of the session, but a pytest
    worker that dies (pytest-timeout ends a hung test with ``os._exit``; xdist then says
    "node down") never gets there, and its broker's JVM outlived ``make test`` (seen: one
    still running 36 minutes after a run). ``kafka.sh stop`` on a stopped broker is a no-op.
    """
    watch = (
        f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 2; done; "
        f"exec bash {shlex.quote(str(KAFKA_SH))} stop --dir {shlex.quote(run_dir)}"
    )
    subprocess.Popen(
        ["bash", "-c", watch], env=env, start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _run_script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKA_PYTHON": sys.executable}
    if args and args[0] == "start" and "--dir" in args:
        _stop_when_this_process_ends(args[args.index("--dir") + 1], env)
    return subprocess.run(
        ["bash", str(KAFKA_SH), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class _SharedBroker:
    """The session's one broker, shared by every module that imported the fixture."""

    def __init__(self) -> None:
        self.users = 0
        self.bootstrap: str | None = None
        self.run_dir: Path | None = None
        self.failure: str | None = None

    def acquire(self, tmp_path_factory: pytest.TempPathFactory) -> str:
        if self.failure is not None:
            pytest.fail(self.failure)
        if self.bootstrap is None:
            try:
                self.bootstrap = self._start(tmp_path_factory)
            except pytest.fail.Exception as exc:
                self.failure = str(exc)
                raise
        self.users += 1
        return self.bootstrap

    def release(self) -> None:
        self.users -= 1
        if self.users == 0 and self.run_dir is not None:
            _run_script("stop", "--dir", str(self.run_dir), timeout=120)
            self.bootstrap = self.run_dir = None

    def _start(self, tmp_path_factory: pytest.TempPathFactory) -> str:
        try:
            prov = _run_script("provision", timeout=900)
        except subprocess.TimeoutExpired:
            pytest.fail(f"Kafka provisioning ({KAFKA_SH} provision) timed out after 900 s")
        if prov.returncode != 0:
            pytest.fail(
                f"could not provision the Kafka broker ({KAFKA_SH} provision, "
                f"exit {prov.returncode}); Maven Central must be reachable for the first run.\n"
                f"{_tail(prov.stderr)}"
            )

        run_dir = tmp_path_factory.mktemp("kafka")
        port, controller_port = free_ports(2)
        try:
            start = _run_script(
                "start",
                "--port", str(port),
                "--controller-port", str(controller_port),
                "--dir", str(run_dir),
                "--partitions", str(N_PARTITIONS),
                "--timeout", "120",
                timeout=240,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            _run_script("stop", "--dir", str(run_dir), timeout=120)
            pytest.fail(f"kafka.sh start timed out; broker logs in {run_dir}/logs")
        if start.returncode != 0:
            _run_script("stop", "--dir", str(run_dir), timeout=120)
            pytest.fail(
                f"could not start the Kafka broker (exit {start.returncode}); "
                f"logs in {run_dir}/logs\n{_tail(start.stderr)}"
            )
        bootstrap = start.stdout.strip().splitlines()[-1]
        self.run_dir = run_dir
        if bootstrap != f"127.0.0.1:{port}":
            pytest.fail(f"kafka.sh start printed {start.stdout!r}, want 127.0.0.1:{port}")
        return bootstrap


_BROKER = _SharedBroker()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address ("127.0.0.1:PORT") of a broker that lives for the test session."""
    bootstrap = _BROKER.acquire(tmp_path_factory)
    try:
        yield bootstrap
    finally:
        _BROKER.release()


# ----------------------------------------------------------------------------- own broker
@dataclass
class OwnBroker:
    """A broker that tests may stop and start again (outages), apart from the shared one.

    One per session, lent to one test at a time by the ``own_kafka_broker`` fixture, which
    starts it again if a test left it stopped: a broker start costs ~10 s, so the outage
    tests share it (each on its own topics and groups) instead of starting one each.
    """

    bootstrap: str
    run_dir: Path
    args: tuple[str, ...]
    running: bool = False

    def start(self) -> None:
        out = _run_script("start", *self.args, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip().splitlines()[-1] == self.bootstrap, out.stdout
        self.running = True

    def stop(self) -> None:
        _run_script("stop", "--dir", str(self.run_dir), timeout=180)
        self.running = False

    def freeze(self) -> None:
        """SIGSTOP the broker's JVM: a broker that hangs (a host frozen, a network cut): its
        connections stay open, its port still accepts, nothing answers. Undo with thaw()."""
        os.kill(self._pid(), signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self._pid(), signal.SIGCONT)

    def _pid(self) -> int:
        return int((self.run_dir / "kafka.pid").read_text().split()[0])


@pytest.fixture(scope="session")
def _stoppable_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnBroker]:
    run_dir = tmp_path_factory.mktemp("own-kafka")
    port, cport = free_ports(2)
    args = ("--port", str(port), "--controller-port", str(cport), "--dir", str(run_dir),
            "--partitions", str(N_PARTITIONS), "--timeout", "180")  # fmt: skip
    broker = OwnBroker(f"127.0.0.1:{port}", run_dir, args)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def own_kafka_broker(_stoppable_broker: OwnBroker) -> OwnBroker:
    """A running broker that this test may stop and start (not the shared ``kafka_broker``:
    other tests keep using that one meanwhile)."""
    if not _stoppable_broker.running:
        _stoppable_broker.start()
    return _stoppable_broker


# ----------------------------------------------------------------------------- SCRAM broker
@dataclass(frozen=True)
class ScramBroker:
    """A broker with a SASL_SSL listener (SCRAM-SHA-512, self-signed certificate)."""

    #: "127.0.0.1:PORT" of the SASL_SSL listener
    bootstrap: str
    #: the broker's certificate (its own CA): the clients' ssl_cafile
    cafile: Path
    user: str
    #: file holding the user's password (what VFR_KAFKA_SASL_PASSWORD_FILE points at)
    password_file: Path


@pytest.fixture(scope="session")
def kafka_scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramBroker]:
    """Its own broker, started once, for the SCRAM tests only (the shared one stays plain).

    A separate broker rather than a second listener on the shared one: SCRAM users are made
    by the storage format, and the plain tests should not pay for a keystore.
    """
    prov = _run_script("provision", timeout=900)
    if prov.returncode != 0:
        pytest.fail(f"could not provision the Kafka broker\n{_tail(prov.stderr)}")
    run_dir = tmp_path_factory.mktemp("kafka-scram")
    password_file = run_dir / "scram.password"
    password_file.write_text(secrets.token_urlsafe(24) + "\n")
    password_file.chmod(0o600)
    port, controller_port, scram_port = free_ports(3)
    try:
        start = _run_script(
            "start", "--port", str(port), "--controller-port", str(controller_port),
            "--scram-port", str(scram_port), "--scram-user", "vfr-monitor",
            "--scram-password-file", str(password_file), "--dir", str(run_dir / "broker"),
            "--partitions", str(N_PARTITIONS), "--timeout", "120", timeout=240,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        _run_script("stop", "--dir", str(run_dir / "broker"), timeout=120)
        pytest.fail(f"kafka.sh start --scram-port timed out; logs in {run_dir}/broker/logs")
    if start.returncode != 0:
        _run_script("stop", "--dir", str(run_dir / "broker"), timeout=120)
        pytest.fail(f"could not start the SCRAM broker (exit {start.returncode})\n"
                    f"{_tail(start.stderr)}")  # fmt: skip
    try:
        yield ScramBroker(
            f"127.0.0.1:{scram_port}",
            run_dir / "broker" / "config" / "ca.pem",
            "vfr-monitor",
            password_file,
        )
    finally:
        _run_script("stop", "--dir", str(run_dir / "broker"), timeout=120)
