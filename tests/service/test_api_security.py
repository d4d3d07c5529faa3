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
from monitor.service.api import HttpLimits, serve
from monitor.service.app import MonitorService
from monitor.service.exporter import Exporter
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
    server = serve(Exporter("0.1.0"), View(), port=0, web_config=load_web_config(pki / "web.yml"))
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
        {"service": {"web_config": str(pki / "web.yml"), "api_enabled": False}}
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
         "service.web_config.tls_server_config.cert_file", "file not found"),
        ("tls_server_config:\n  cert_file: server.crt\n", "service.web_config."
         "tls_server_config.key_file", "required"),
        ("tls_server_config:\n  cert_file: server.key\n  key_file: server.key\n",
         "service.web_config.tls_server_config.cert_file", "do not load"),
        ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
         "  min_version: SSL3\n", "service.web_config.tls_server_config.min_version", "TLS12"),
        ("tls_server_config:\n  certfile: server.crt\n",
         "service.web_config.tls_server_config.certfile", "unknown key"),
        ("basic_auth_user:\n  a: b\n", "service.web_config.basic_auth_user", "unknown key"),
        ("basic_auth_users:\n  admin: plaintext-password\n",
         "service.web_config.basic_auth_users.admin", "bcrypt"),
        ("basic_auth_users: [a, b]\n", "service.web_config.basic_auth_users", "mapping"),
        ("tls_server_config: {cert_file: [\n", "service.web_config", "YAML"),
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
    cfg = config_from_mapping({"service": {"web_config": str(tmp_path / "web.yml")}})
    s = MonitorService(cfg, db_path=str(tmp_path / "x.duckdb"), http_port=0,
                       start_scheduler=False)  # fmt: skip
    try:
        with pytest.raises(ConfigError) as info:
            s.start()
        assert info.value.field == "service.web_config.tls_server_config.cert_file"
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


def test_connections_over_the_limit_get_503():
    limits = HttpLimits(max_connections=3, header_timeout_s=30)
    server = serve(Exporter("0.1.0"), View(), port=0, limits=limits)
    idle = []
    try:
        assert fetch(server.url + "/healthz")[0] == 200
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        time.sleep(0.3)
        assert fetch(server.url + "/healthz")[0] == 503
        for s in idle:
            s.close()
        idle = []
        deadline = time.monotonic() + 5
        while fetch(server.url + "/healthz")[0] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        for s in idle:
            s.close()
        server.close()
