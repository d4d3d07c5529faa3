"""The HTTP server's web-config file: TLS and basic-auth users, Prometheus-exporter style.

Why this format: operators who run Prometheus exporters already write it (the
exporter-toolkit's ``web-config.yml``), and Prometheus' own ``basic_auth`` /
``tls_config`` scrape settings pair with it. Only the keys below are accepted; an
unknown or misspelt key is an error (the toolkit is strict too), so a typo cannot
silently leave the server without TLS or authentication::

    tls_server_config:
      cert_file: server.crt        # relative paths: relative to this file
      key_file: server.key
      min_version: TLS12           # TLS12 (default) or TLS13
    basic_auth_users:
      prometheus: $2b$12$...       # bcrypt hash (htpasswd -nBC 12 "" | tr -d ':\\n')

Every problem raises :class:`~monitor.config.ConfigError` naming
``service.http.web_config.<key>`` at start-up; the password hashes never appear in a message.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from monitor.config import ConfigError

FIELD = "service.http.web_config"
_TOP_KEYS = frozenset({"tls_server_config", "basic_auth_users"})
_TLS_KEYS = frozenset({"cert_file", "key_file", "min_version"})
_MIN_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
#: bcrypt's modular-crypt prefixes; "$2y$" is what Apache's htpasswd writes.
_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")


@dataclass(frozen=True)
class TlsServerConfig:
    cert_file: Path
    key_file: Path
    min_version: str = "TLS12"

    def context(self) -> ssl.SSLContext:
        """A server context with the certificate loaded (raises ssl.SSLError / OSError)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = _MIN_VERSIONS[self.min_version]
        ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        return ctx


@dataclass(frozen=True)
class WebConfig:
    """TLS (None: plain HTTP) and basic-auth users (empty: no authentication)."""

    tls: TlsServerConfig | None = None
    #: user name -> bcrypt hash (bytes); repr hides the hashes
    users: dict[str, bytes] = field(default_factory=dict, repr=False)


def _error(key: str, message: str) -> ConfigError:
    return ConfigError(f"{FIELD}.{key}" if key else FIELD, message)


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _error(key, "expected a mapping")
    return value


def _tls(raw: Any, base: Path) -> TlsServerConfig:
    raw = _mapping(raw, "tls_server_config")
    for k in raw:
        if k not in _TLS_KEYS:
            raise _error(f"tls_server_config.{k}", f"unknown key; allowed: {sorted(_TLS_KEYS)}")
    paths = {}
    for k in ("cert_file", "key_file"):
        value = raw.get(k)
        if not isinstance(value, str) or not value:
            raise _error(f"tls_server_config.{k}", "required (a file path)")
        p = Path(value)
        p = p if p.is_absolute() else base / p
        if not p.is_file():
            raise _error(f"tls_server_config.{k}", f"file not found: {p}")
        paths[k] = p
    min_version = raw.get("min_version", "TLS12")
    if min_version not in _MIN_VERSIONS:
        raise _error("tls_server_config.min_version", f"allowed values: {sorted(_MIN_VERSIONS)}")
    tls = TlsServerConfig(paths["cert_file"], paths["key_file"], min_version)
    try:
        tls.context()
    except (ssl.SSLError, OSError) as exc:
        raise _error(
            "tls_server_config.cert_file",
            f"certificate and key do not load together ({type(exc).__name__}: "
            f"{getattr(exc, 'reason', None) or 'unreadable'})",
        ) from None
    return tls


def _users(raw: Any) -> dict[str, bytes]:
    raw = _mapping(raw, "basic_auth_users")
    users = {}
    for name, hashed in raw.items():
        if not isinstance(name, str) or not name or ":" in name or not name.isprintable():
            # basic auth sends "user:password": a colon in the name cannot be parsed back
            raise _error("basic_auth_users", "user names are non-empty printable text, no ':'")
        if not isinstance(hashed, str) or not hashed.startswith(_BCRYPT_PREFIXES):
            raise _error(f"basic_auth_users.{name}", "expected a bcrypt hash ($2b$...)")
        if len(hashed) != 60:
            raise _error(f"basic_auth_users.{name}", "malformed bcrypt hash (length)")
        users[name] = hashed.encode("ascii")
    return users


def load_web_config(path: str | Path) -> WebConfig:
    """Parse and check a web-config file; the certificate is loaded once to prove it works."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError:
        raise _error("", f"cannot read file {p}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise _error("", f"not valid YAML{where}") from None
    if raw is None:
        return WebConfig()
    raw = _mapping(raw, "")
    for k in raw:
        if k not in _TOP_KEYS:
            raise _error(str(k), f"unknown key; allowed: {sorted(_TOP_KEYS)}")
    tls = None
    if raw.get("tls_server_config") is not None:
        tls = _tls(raw["tls_server_config"], p.resolve().parent)
    users = _users(raw["basic_auth_users"]) if raw.get("basic_auth_users") else {}
    return WebConfig(tls=tls, users=users)
