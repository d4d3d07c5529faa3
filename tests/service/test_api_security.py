"""The API behind TLS and basic auth, and its connection limits, against a real server.

A self-signed certificate for 127.0.0.1 is made in the test with ``cryptography``; the
client is urllib with that certificate as its only trust anchor. bcrypt hashes use cost 4
so the test stays fast (the cost is read from the hash; production hashes use 10-12).
"""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import bcrypt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from monitor.config import ConfigError, config_from_mapping
from monitor.service.app import MonitorService
from monitor.service.exporter import Exporter
from monitor.service.http_server import serve
from monitor.service.http_settings import HttpLimits
from monitor.service.web_config import load_web_config

PASSWORD = "correct horse battery staple"


class View:
    def ready(self) -> tuple[bool, str]:
        return True, "ok"

    def cells(self) -> list[dict]:
        return [{"model_id": "xgb", "metric": "DI", "attribute": "race"}]

    def events(self, limit: int, since_id: int | None) -> list[dict]:
        return []

    def windows(self, model, metric, attribute, limit, before=None):
        return None

    def models(self) -> list[dict]:
        return []

    def axes(self, axis, model, limit, offset):
        return []


def _self_signed(dir: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vfr-monitor test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = dir / "server.crt", dir / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    _self_signed(d)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (d / "web.yml").write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    return d


def _tls_client(cafile: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cafile))


def fetch(url: str, ctx: ssl.SSLContext | None = None, user: str | None = None,
          password: str | None = None) -> tuple[int, Message, bytes]:  # fmt: skip
    req = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers, e.read()


@pytest.fixture
def tls_server(pki):
    # no login backoff here: these tests send many wrong credentials on purpose
    limits = HttpLimits(auth_free_failures=1000)
    server = serve(Exporter("0.1.0"), View(), port=0, web_config=load_web_config(pki / "web.yml"),
                   limits=limits)  # fmt: skip
    try:
        yield server, _tls_client(pki / "server.crt")
    finally:
        server.close()


# ----------------------------------------------------------------------------- TLS + auth
def test_correct_credentials_over_tls_get_200(tls_server):
    server, ctx = tls_server
    assert server.url.startswith("https://127.0.0.1:")
    for path in ("/metrics", "/api/cells", "/api/models"):
        status, _h, body = fetch(server.url + path, ctx, "prometheus", PASSWORD)
        assert status == 200, path
    status, _h, body = fetch(server.url + "/api/cells", ctx, "prometheus", PASSWORD)
    assert json.loads(body)[0]["metric"] == "DI"


def test_wrong_or_missing_credentials_get_401_without_data(tls_server, caplog):
    server, ctx = tls_server
    for user, password in [("prometheus", "wrong"), ("nobody", PASSWORD), (None, None),
                           ("prometheus", ""), ("", "")]:  # fmt: skip
        for path in ("/metrics", "/api/cells", "/nope"):
            status, headers, body = fetch(server.url + path, ctx, user, password)
            assert status == 401, (user, path)
            assert headers["WWW-Authenticate"].startswith('Basic realm="vfr-monitor"')
            assert json.loads(body) == {"error": "unauthorized"}
    assert "wrong" not in caplog.text and PASSWORD not in caplog.text
    # a malformed Authorization header is a 401 too, not a 400 or a 500
    req = urllib.request.Request(server.url + "/metrics", headers={"Authorization": "Basic !!"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=10, context=ctx)
    assert info.value.code == 401
    info.value.close()


def test_probes_stay_open_and_hold_no_data(tls_server):
    server, ctx = tls_server
    assert fetch(server.url + "/healthz", ctx)[::2] == (200, b"ok\n")
    status, _h, body = fetch(server.url + "/readyz", ctx)
    assert status == 200 and json.loads(body) == {"status": "ready"}


def test_plain_http_to_the_tls_port_is_refused(tls_server):
    server, _ctx = tls_server
    with pytest.raises((OSError, http.client.HTTPException)):
        fetch(f"http://127.0.0.1:{server.port}/healthz")
    # and a client that does not trust the certificate does not get through either
    with pytest.raises(urllib.error.URLError) as info:
        fetch(server.url + "/healthz", ssl.create_default_context())
    assert isinstance(info.value.reason, ssl.SSLCertVerificationError)


def test_api_off_is_404_but_metrics_stay(pki):
    web = load_web_config(pki / "web.yml")
    server = serve(Exporter("0.1.0"), View(), port=0, web_config=web, api_enabled=False)
    try:
        ctx = _tls_client(pki / "server.crt")
        for path in ("/api/cells", "/api/events", "/api/models", "/api/axes?axis=axis2"):
            status, _h, body = fetch(server.url + path, ctx, "prometheus", PASSWORD)
            assert (status, json.loads(body)) == (404, {"error": "not found"}), path
        assert fetch(server.url + "/metrics", ctx, "prometheus", PASSWORD)[0] == 200
    finally:
        server.close()


def test_service_reads_web_config_and_api_switch_from_its_config(pki, tmp_path):
    cfg = config_from_mapping(
        {"service": {"http": {"web_config": str(pki / "web.yml"), "api_enabled": False}}}
    )
    s = MonitorService(cfg, db_path=str(tmp_path / "w.duckdb"), http_port=0,
                       start_scheduler=False)  # fmt: skip
    try:
        s.start()
        assert s.api is not None and s.api.url.startswith("https://")
        ctx = _tls_client(pki / "server.crt")
        assert fetch(s.api.url + "/api/cells", ctx, "prometheus", PASSWORD)[0] == 404
        assert fetch(s.api.url + "/metrics", ctx, "prometheus", PASSWORD)[0] == 200
        assert fetch(s.api.url + "/metrics", ctx, "prometheus", "nope")[0] == 401
    finally:
        s.close()


# ----------------------------------------------------------------------------- bad files
@pytest.mark.parametrize(
    ("text", "field", "hint"),
    [
        ("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
         "service.http.web_config.tls_server_config.cert_file", "file not found"),
        ("tls_server_config:\n  cert_file: server.crt\n", "service.http.web_config."
         "tls_server_config.key_file", "required"),
        ("tls_server_config:\n  cert_file: server.key\n  key_file: server.key\n",
         "service.http.web_config.tls_server_config.cert_file", "do not load"),
        ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
         "  min_version: SSL3\n", "service.http.web_config.tls_server_config.min_version", "TLS12"),
        ("tls_server_config:\n  certfile: server.crt\n",
         "service.http.web_config.tls_server_config.certfile", "unknown key"),
        ("basic_auth_user:\n  a: b\n", "service.http.web_config.basic_auth_user", "unknown key"),
        ("basic_auth_users:\n  admin: plaintext-password\n",
         "service.http.web_config.basic_auth_users.admin", "bcrypt"),
        ("basic_auth_users: [a, b]\n", "service.http.web_config.basic_auth_users", "mapping"),
        ("tls_server_config: {cert_file: [\n", "service.http.web_config", "YAML"),
    ],
)  # fmt: skip
def test_a_bad_web_config_fails_naming_the_field(pki, tmp_path, text, field, hint):
    # the certificate files sit beside the config: relative paths are relative to it
    for name in ("server.crt", "server.key"):
        (tmp_path / name).write_bytes((pki / name).read_bytes())
    path = tmp_path / "web.yml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_web_config(path)
    assert info.value.field == field and hint in str(info.value)
    assert "plaintext-password" not in str(info.value)


def test_a_bad_web_config_stops_the_service_start(tmp_path):
    (tmp_path / "web.yml").write_text("tls_server_config:\n  cert_file: a\n  key_file: b\n")
    cfg = config_from_mapping({"service": {"http": {"web_config": str(tmp_path / "web.yml")}}})
    s = MonitorService(cfg, db_path=str(tmp_path / "x.duckdb"), http_port=0,
                       start_scheduler=False)  # fmt: skip
    try:
        with pytest.raises(ConfigError) as info:
            s.start()
        assert info.value.field == "service.http.web_config.tls_server_config.cert_file"
        assert s.api is None
    finally:
        s.close()


# ----------------------------------------------------------------------------- limits
def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the peer closes, trickling one header byte every 0.25 s meanwhile."""
    start = time.monotonic()
    header = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
    sock.settimeout(0.25)
    for b in header:
        elapsed = time.monotonic() - start
        if elapsed > seconds:
            return None
        try:
            sock.sendall(bytes([b]))
            if sock.recv(1) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - start
    return None


def test_a_trickled_header_is_cut_at_the_deadline():
    limits = HttpLimits(header_timeout_s=1.5)
    server = serve(Exporter("0.1.0"), View(), port=0, limits=limits)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            took = _closed_within(s, 10.0)
        # closed by the deadline, not before it; the upper bound is scheduling slack
        assert took is not None and 1.4 <= took <= 4.0, took
        # a well-behaved client on a kept-alive connection is not affected
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        for _ in range(3):
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() == b"ok\n"
            time.sleep(0.8)  # 3 x 0.8 s > the header deadline, but each request is quick
        conn.close()
    finally:
        server.close()


def test_half_open_connections_do_not_grow_threads_and_are_closed():
    limits = HttpLimits(header_timeout_s=1.5, max_connections=400)
    server = serve(Exporter("0.1.0"), View(), port=0, limits=limits)
    socks = []
    try:
        fetch(server.url + "/healthz")  # the worker pool has started
        before = threading.active_count()
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            s.sendall(b"GET /metr")
            socks.append(s)
        time.sleep(0.5)
        assert threading.active_count() <= before + 1  # the old server: one thread each
        time.sleep(limits.header_timeout_s + 1.5)
        closed = 0
        for s in socks:
            s.settimeout(0.01)
            try:
                closed += s.recv(1) == b""
            except (ConnectionResetError, BrokenPipeError):
                closed += 1
            except TimeoutError:
                pass
        assert closed == 300
        assert fetch(server.url + "/healthz")[0] == 200  # still serving
    finally:
        for s in socks:
            s.close()
        server.close()


def test_connections_over_the_limit_get_503_on_data_routes_but_not_on_probes():
    limits = HttpLimits(max_connections=3, header_timeout_s=30)
    server = serve(Exporter("0.1.0"), View(), port=0, limits=limits)
    idle = []
    try:
        assert fetch(server.url + "/metrics")[0] == 200
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        time.sleep(0.3)
        status, headers, body = fetch(server.url + "/metrics")
        assert (status, json.loads(body)) == (503, {"error": "server busy"})
        assert headers["Retry-After"] == "1"
        # the probes have capacity of their own: idle clients cannot fail them
        assert fetch(server.url + "/healthz")[::2] == (200, b"ok\n")
        assert fetch(server.url + "/readyz")[0] == 200
        for s in idle:
            s.close()
        idle = []
        deadline = time.monotonic() + 5
        while fetch(server.url + "/metrics")[0] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        for s in idle:
            s.close()
        server.close()


# ---------------------------------------------------------------------------------- bodies (22.1)
def _read_until_closed(sock: socket.socket, seconds: float) -> tuple[bytes, float | None]:
    """What the server sent, and after how many seconds it closed (None: still open)."""
    start = time.monotonic()
    reply = b""
    sock.settimeout(0.1)
    while time.monotonic() - start < seconds:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return reply, time.monotonic() - start
        if not chunk:
            return reply, time.monotonic() - start
        reply += chunk
    return reply, None


@pytest.mark.parametrize(
    "framing",
    [b"Content-Length: 100000000\r\n\r\na", b"Transfer-Encoding: chunked\r\n\r\n1\r\na"],
    ids=["content-length", "chunked"],
)
def test_a_request_body_is_refused_and_the_connection_closed_at_once(framing):
    # a long deadline: what closes the connection is the refusal, not the deadline
    server = serve(Exporter("0.1.0"), View(), port=0, limits=HttpLimits(header_timeout_s=30))
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + framing)
            reply, closed_after = _read_until_closed(s, 3.0)
        head, _, body = reply.partition(b"\r\n\r\n")
        assert b" 413 " in head.split(b"\r\n")[0], head
        assert json.loads(body) == {"error": "request body not allowed"}
        assert closed_after is not None, "the connection stayed open"
        # an empty body announced as such is no body
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("GET", "/healthz", headers={"Content-Length": "0"})
        assert conn.getresponse().read() == b"ok\n"
        conn.close()
    finally:
        server.close()


def _trickler(port: int, body: bool, stop: threading.Event, held: list[float]) -> None:
    """Until ``stop``: one connection after another, each trickling a byte every 0.25 s,
    of a body (after complete headers) or of the headers; how long each was held."""
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    while not stop.is_set():
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            if body:
                s.sendall(head + b"Content-Length: 100000000\r\n\r\n")
            else:
                s.sendall(head + b"X-Slow: ")
            s.settimeout(0.25)
            closed = False
            while not stop.is_set() and not closed:
                try:
                    s.sendall(b"a")
                    while s.recv(65536):  # a response (the 413): read on to the close
                        pass
                    closed = True
                except TimeoutError:
                    continue
                except OSError:
                    closed = True
            if closed:
                held.append(time.monotonic() - start)


def test_trickling_clients_do_not_take_the_probes_down():
    """The issue's attack scaled to a limit of 8: 8 clients trickle a body and 8 a header,
    reconnecting when cut, while the probes are asked every 0.1 s for two deadlines."""
    limits = HttpLimits(max_connections=8, header_timeout_s=2.0)
    server = serve(Exporter("0.1.0"), View(), port=0, limits=limits)
    stop = threading.Event()
    body_held: list[float] = []
    header_held: list[float] = []
    threads = [
        threading.Thread(target=_trickler, args=(server.port, body, stop, held), daemon=True)
        for body, held in [(True, body_held)] * 8 + [(False, header_held)] * 8
    ]
    statuses: list[int] = []
    try:
        for t in threads:
            t.start()
        time.sleep(0.5)  # every trickler is connected
        end = time.monotonic() + 2 * limits.header_timeout_s
        while time.monotonic() < end:
            for path in ("/healthz", "/readyz"):
                statuses.append(fetch(server.url + path)[0])
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
        server.close()
    assert statuses and set(statuses) == {200}, sorted(set(statuses))
    # bodies are cut at once (well inside the deadline), headers at the deadline
    assert body_held and max(body_held) < limits.header_timeout_s / 2, body_held[:5]
    assert header_held and min(header_held) >= limits.header_timeout_s - 0.1, header_held[:5]


# ------------------------------------------------------------------------- bad credentials (22.3)
def _hashed_web_config(tmp_path: Path, rounds: int) -> Path:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=rounds)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    return path


def _get_from(port: int, path: str, source: str, password: str | None = None,
              timeout: float = 20.0) -> tuple[int, Message, float]:  # fmt: skip
    """(status, headers, seconds) of one GET from the loopback address ``source``
    (127.0.0.0/8 is all loopback on Linux: each address is a client of its own)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                      source_address=(source, 0))  # fmt: skip
    headers = {}
    if password is not None:
        token = base64.b64encode(f"prometheus:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    start = time.monotonic()
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        return r.status, r.headers, time.monotonic() - start
    finally:
        conn.close()


def test_a_client_that_keeps_failing_waits_longer_each_time_and_others_do_not(tmp_path):
    limits = HttpLimits(auth_free_failures=3, auth_backoff_s=1.0)
    web = load_web_config(_hashed_web_config(tmp_path, rounds=4))
    server = serve(Exporter("0.1.0"), View(), port=0, web_config=web, limits=limits)
    a, b = "127.0.0.2", "127.0.0.3"
    try:
        assert _get_from(server.port, "/metrics", a, PASSWORD)[0] == 200  # now cached
        for i in range(limits.auth_free_failures):
            assert _get_from(server.port, "/metrics", a, f"wrong {i}")[0] == 401
        status, headers, _s = _get_from(server.port, "/metrics", a, "wrong again")
        assert status == 429 and headers["Retry-After"] == "1"
        # not checked, so a good password not cached yet is refused too while a waits
        assert _get_from(server.port, "/metrics", a, PASSWORD + " ")[0] == 429
        # a cached credential costs no check and still passes; another client is not held
        assert _get_from(server.port, "/metrics", a, PASSWORD)[0] == 200
        assert _get_from(server.port, "/metrics", b, "wrong")[0] == 401
        time.sleep(limits.auth_backoff_s + 0.3)
        # once the wait is over one more failure is checked, and the next wait is doubled
        assert _get_from(server.port, "/metrics", a, "wrong 4")[0] == 401
        status, headers, _s = _get_from(server.port, "/metrics", a, "wrong 5")
        assert status == 429 and headers["Retry-After"] == "2"
    finally:
        server.close()


def test_a_flood_of_bad_credentials_is_bounded_and_probes_and_scrapes_do_not_wait(tmp_path):
    """Eight clients send wrong passwords for 3 s against a cost-13 hash (0.5 s a check on
    an idle core) while the probes and an authorised (cached) scrape are asked."""
    rounds = 13
    limits = HttpLimits(auth_concurrency=1)
    path = _hashed_web_config(tmp_path, rounds)
    hashed = load_web_config(path).users["prometheus"]
    start = time.monotonic()
    bcrypt.checkpw(b"wrong", hashed)
    check_s = time.monotonic() - start  # what one check costs on this machine now
    server = serve(Exporter("0.1.0"), View(), port=0, web_config=load_web_config(path),
                   limits=limits)  # fmt: skip
    stop = threading.Event()
    answers: list[int] = []

    def flood(source: str) -> None:
        for i in range(200):  # bounded; 3 s of it at most
            if stop.is_set():
                return
            answers.append(_get_from(server.port, "/metrics", source, f"guess {i}")[0])
            time.sleep(0.02)

    floods = [threading.Thread(target=flood, args=(f"127.0.0.{10 + i}",), daemon=True)
              for i in range(8)]  # fmt: skip
    latencies: dict[str, list[float]] = {"/healthz": [], "/readyz": [], "/metrics": []}
    try:
        assert _get_from(server.port, "/metrics", "127.0.0.1", PASSWORD)[0] == 200  # cached
        for t in floods:
            t.start()
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            for p, lat in latencies.items():
                status, _h, seconds = _get_from(server.port, p, "127.0.0.1", PASSWORD)
                assert status == 200, p
                lat.append(seconds)
            time.sleep(0.05)
    finally:
        stop.set()
        for t in floods:
            t.join(timeout=30)
        server.close()
    assert set(answers) <= {401, 429} and 429 in answers
    # at most one check at a time: the 401s (checked) are bounded by the checks that fit
    assert answers.count(401) <= 3.5 / check_s + 8, (answers.count(401), check_s)
    for p, lat in latencies.items():
        median = sorted(lat)[len(lat) // 2]
        assert median < check_s / 4, (p, median, check_s)


# -------------------------------------------------------------------------- the fleet view (21.6)
def test_the_fleet_view_serves_through_the_same_web_config(pki, tmp_path):
    from monitor.service.fleet_view import FleetView

    cfg = config_from_mapping({"service": {"http": {"web_config": str(pki / "web.yml")}}})
    view = FleetView(cfg, str(tmp_path / "view.duckdb"))
    try:
        view.start(0)
        assert view.api is not None and view.api.url.startswith("https://")
        ctx = _tls_client(pki / "server.crt")
        for path in ("/api/cells", "/metrics", "/"):
            status, _h, body = fetch(view.api.url + path, ctx)
            assert (status, json.loads(body)) == (401, {"error": "unauthorized"}), path
        assert fetch(view.api.url + "/api/cells", ctx, "prometheus", PASSWORD)[0] == 200
        assert fetch(view.api.url + "/healthz", ctx)[0] == 200
    finally:
        view.close()
