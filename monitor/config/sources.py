"""Settings of the record sources: a Kafka consumer group or the embedded replay.

These models are mounted into ``MonitorConfig`` as ``kafka: KafkaConfig | None`` (absent:
no Kafka, the embedded replay is the source) and ``embedded: EmbeddedConfig``, validated
when the configuration is loaded (with the environment overrides below). They follow the
rest of the configuration: strict (an unknown or misspelt key is an error, not a silent
default) and every error names its field (:func:`monitor.config.errors.config_error`).
They live in the configuration layer so that the sources (``consumers``) and the monitor
share them.

Example (TOML)::

    [kafka]
    bootstrap_servers = ["broker-1:9093", "broker-2:9093"]
    topics = ["scored-discharges"]
    group_id = "vfr-monitor"
    security_protocol = "SASL_SSL"
    sasl_mechanism = "SCRAM-SHA-512"
    sasl_plain_username = "vfr-monitor"
    ssl_cafile = "/etc/vfr/ca.pem"
    # the password comes from VFR_KAFKA_SASL_PASSWORD or a mounted secret file
    # (sasl_plain_password_file / VFR_KAFKA_SASL_PASSWORD_FILE), never from this file

    [embedded]
    path = "scored.parquet"
    rate = 200.0          # records per second; omit (or 0) for as fast as possible

Environment overrides (applied by :func:`kafka_table_with_env` on top of the file; they
win because a deployment injects its broker address and secrets that way, never via a file
checked into a repository):

=============================  =======================================================
variable                       field
=============================  =======================================================
``VFR_KAFKA_BOOTSTRAP``        ``bootstrap_servers`` (comma-separated host:port list);
                               setting it enables Kafka even without a ``[kafka]`` table
``VFR_KAFKA_TOPIC``            ``topics`` (comma-separated)
``VFR_KAFKA_GROUP``            ``group_id``
``VFR_KAFKA_CLIENT_ID``        ``client_id``
``VFR_KAFKA_SECURITY_PROTOCOL`` ``security_protocol``
``VFR_KAFKA_SSL_CAFILE``       ``ssl_cafile``
``VFR_KAFKA_SSL_CERTFILE``     ``ssl_certfile``
``VFR_KAFKA_SSL_KEYFILE``      ``ssl_keyfile``
``VFR_KAFKA_SSL_PASSWORD``     ``ssl_password`` (secret: password of the key file)
``VFR_KAFKA_SASL_MECHANISM``   ``sasl_mechanism``
``VFR_KAFKA_SASL_USERNAME``    ``sasl_plain_username``
``VFR_KAFKA_SASL_PASSWORD``    ``sasl_plain_password`` (secret)
``VFR_KAFKA_SASL_PASSWORD_FILE`` ``sasl_plain_password_file`` (file holding the secret)
``VFR_KAFKA_SSL_PASSWORD_FILE`` ``ssl_password_file`` (file holding the key password)
``VFR_KAFKA_POLL_TIMEOUT_MS``  ``poll_timeout_ms``
``VFR_KAFKA_MAX_BATCH``        ``max_batch``
``VFR_KAFKA_SESSION_TIMEOUT_MS`` ``session_timeout_ms``
``VFR_KAFKA_BOOTSTRAP_TIMEOUT_MS`` ``bootstrap_timeout_ms``
``VFR_KAFKA_LOG_LEVEL``        ``library_log_level`` (kafka-python's own log lines)
=============================  =======================================================

An empty variable counts as unset. A secret and its ``*_file`` form are alternatives: setting
one by environment variable drops the other from the file's settings, and giving both in one
place is an error. A secret file is read when a client is made (so a rotated, re-mounted
secret is picked up at the next start), its first line without the line break; it must exist
and be non-empty at start-up. Secrets are ``SecretStr``: repr, str, ``model_dump`` and
error messages show ``**********``; only :meth:`KafkaConfig.client_kwargs` reveals them, to
hand them to the Kafka client.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from monitor.config.errors import config_error

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

#: Environment variable -> KafkaConfig field (see the module docstring).
KAFKA_ENV_VARS: dict[str, str] = {
    "VFR_KAFKA_BOOTSTRAP": "bootstrap_servers",
    "VFR_KAFKA_TOPIC": "topics",
    "VFR_KAFKA_GROUP": "group_id",
    "VFR_KAFKA_CLIENT_ID": "client_id",
    "VFR_KAFKA_SECURITY_PROTOCOL": "security_protocol",
    "VFR_KAFKA_SSL_CAFILE": "ssl_cafile",
    "VFR_KAFKA_SSL_CERTFILE": "ssl_certfile",
    "VFR_KAFKA_SSL_KEYFILE": "ssl_keyfile",
    "VFR_KAFKA_SSL_PASSWORD": "ssl_password",
    "VFR_KAFKA_SASL_MECHANISM": "sasl_mechanism",
    "VFR_KAFKA_SASL_USERNAME": "sasl_plain_username",
    "VFR_KAFKA_SASL_PASSWORD": "sasl_plain_password",
    "VFR_KAFKA_SASL_PASSWORD_FILE": "sasl_plain_password_file",
    "VFR_KAFKA_SSL_PASSWORD_FILE": "ssl_password_file",
    "VFR_KAFKA_POLL_TIMEOUT_MS": "poll_timeout_ms",
    "VFR_KAFKA_MAX_BATCH": "max_batch",
    "VFR_KAFKA_SESSION_TIMEOUT_MS": "session_timeout_ms",
    "VFR_KAFKA_BOOTSTRAP_TIMEOUT_MS": "bootstrap_timeout_ms",
    "VFR_KAFKA_LOG_LEVEL": "library_log_level",
}

#: Fields whose values never appear in messages (the input of a bad secret included).
SECRET_FIELDS = frozenset({"sasl_plain_password", "ssl_password"})
#: secret field -> the field naming a file that holds it
SECRET_FILES = {"sasl_plain_password": "sasl_plain_password_file",
                "ssl_password": "ssl_password_file"}  # fmt: skip


def read_secret_file(path: Path) -> str:
    """The first line of a secret file, without its line break (as mounted secrets are)."""
    with path.open(encoding="utf-8") as f:
        return f.readline().rstrip("\r\n")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _split_list(v: Any) -> Any:
    """ "a,b" (TOML string or environment variable) -> ["a", "b"]; lists pass through."""
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


class KafkaConfig(_Strict):
    """A Kafka consumer group reading scored discharges (docs/method.md section 1 JSON objects)."""

    bootstrap_servers: tuple[str, ...] = Field(min_length=1)
    topics: tuple[str, ...] = Field(("scored-discharges",), min_length=1)
    group_id: str = Field("vfr-monitor", min_length=1)
    client_id: str = Field("vfr-monitor", min_length=1)

    security_protocol: SecurityProtocol = "PLAINTEXT"
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_password: SecretStr | None = None
    ssl_password_file: Path | None = None
    #: Check the broker's host name against its certificate (turn off only for test CAs).
    ssl_check_hostname: bool = True
    sasl_mechanism: SaslMechanism | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: SecretStr | None = None
    sasl_plain_password_file: Path | None = None

    #: How long one poll waits for records; also bounds how fast ``run`` notices a stop.
    poll_timeout_ms: int = Field(500, ge=1, le=60_000)
    #: Records per poll, i.e. per sink call (one DuckDB transaction per batch).
    max_batch: int = Field(5_000, ge=1, le=1_000_000)
    #: Poll the next batch while the sink stores the current one (kafka-python's record
    #: decoding beside DuckDB's work); offsets are still committed only after the sink
    #: returns, and a failed or abandoned batch rewinds the prefetched one too.
    prefetch: bool = True
    session_timeout_ms: int = Field(45_000, ge=1_000, le=3_600_000)
    #: Must exceed the longest sink call plus backoff, or the group evicts the consumer.
    max_poll_interval_ms: int = Field(300_000, ge=1_000)
    #: kafka-python's limit on one request: a broker that stops answering without closing
    #: its connections (host gone, network cut) is given up after this long, so it bounds
    #: how late that kind of outage is noticed (see ``broker_unreachable_after_s``). Also
    #: the timeout of the source's offset look-ups (lag, rebuild).
    request_timeout_ms: int = Field(7_000, ge=1_000)
    #: The readiness bound: /readyz reports "broker unreachable" at most this long after
    #: the broker is lost. A broker that refuses or closes connections (stopped, crashed,
    #: restarting) is noticed at once; a silent one when kafka-python gives up on its
    #: request, so ``request_timeout_ms`` plus the heartbeat interval (the longest gap
    #: between requests in flight) must fit in it. It also caps kafka-python's reconnect
    #: backoff, so the source reconnects within about this long once the broker is back.
    broker_unreachable_after_s: float = Field(10.0, ge=2.0, le=300.0)
    #: How long a client waits for its first broker connection: a wrong address or
    #: credentials stop the start-up after this long, naming the address and what to check.
    bootstrap_timeout_ms: int = Field(30_000, ge=1_000, le=600_000)
    #: The level of kafka-python's own loggers ("kafka.*"). WARNING: its problems only (at
    #: INFO it writes ~100 lines of connection and group chatter per run). DEBUG is not
    #: offered: at DEBUG kafka-python logs the raw bytes of requests, i.e. record payloads.
    library_log_level: Literal["ERROR", "WARNING", "INFO"] = "WARNING"
    #: Upper bound of one synchronous offset commit; a timed-out commit is retried with
    #: the next batch (the sink's record_id dedupe absorbs any redelivery meanwhile).
    commit_timeout_ms: int = Field(30_000, ge=100)

    #: Backoff after a failed sink call doubles from the first value up to the cap.
    sink_retry_backoff_ms: int = Field(500, ge=1)
    sink_retry_backoff_max_ms: int = Field(30_000, ge=1)
    #: Consecutive failed attempts of one batch before ``run`` raises; absent = retry for
    #: ever (a store outage should not lose the stream; the failures are counted).
    sink_max_retries: int | None = Field(None, ge=0)
    #: Consecutive failed attempts of one batch after which the source reports itself not
    #: healthy (the service's /readyz: not ready); it keeps retrying with backoff.
    unready_after_sink_failures: int = Field(3, ge=1)
    #: At start-up, compare each topic's ``retention.ms`` with the service's horizon (the
    #: window and the audit cohort, see ``MonitorConfig.horizon_days``): a shorter retention
    #: means a replacement instance could not rebuild a model's state from the topic.
    #: "refuse" stops start-up naming the setting, "warn" logs it, "off" skips the check.
    retention_check: Literal["refuse", "warn", "off"] = "refuse"
    #: A fleet of instances in one group: every stored window result, event and axis
    #: result is also produced to this compacted topic (created if missing), which
    #: ``vfr-monitor view`` reads for one view of all models. Absent: not published.
    results_topic: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,249}$")
    #: Partitions of the results topic when the service creates it.
    results_partitions: int = Field(6, ge=1, le=10_000)

    @field_validator("bootstrap_servers", "topics", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return _split_list(v)

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_port(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for server in v:
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65_536:
                raise ValueError(f"expected host:port entries, got {server!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> KafkaConfig:
        # Messages start with the field they are about ("field: message"), the convention
        # monitor.config uses for whole-model checks.
        sasl = self.security_protocol.startswith("SASL_")
        ssl = self.security_protocol.endswith("SSL")
        for secret, file_field in SECRET_FILES.items():
            path = getattr(self, file_field)
            if path is None:
                continue
            if getattr(self, secret) is not None:
                raise ValueError(f"{file_field}: give {secret} or {file_field}, not both")
            try:
                ok = bool(read_secret_file(path))
            except (OSError, UnicodeDecodeError):
                raise ValueError(f"{file_field}: cannot read file {path}") from None
            if not ok:
                raise ValueError(f"{file_field}: file {path} is empty")
        if sasl:
            for name in ("sasl_mechanism", "sasl_plain_username"):
                if getattr(self, name) is None:
                    raise ValueError(
                        f"{name}: required when security_protocol is {self.security_protocol}"
                    )
            if self.sasl_plain_password is None and self.sasl_plain_password_file is None:
                raise ValueError(
                    "sasl_plain_password: required when security_protocol is "
                    f"{self.security_protocol} (or sasl_plain_password_file)"
                )
        elif (
            self.sasl_mechanism is not None
            or self.sasl_plain_username is not None
            or self.sasl_plain_password_file is not None
        ):
            raise ValueError(
                f"sasl_mechanism: only used with SASL_PLAINTEXT or SASL_SSL, "
                f"but security_protocol is {self.security_protocol}"
            )
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if path is None:
                continue
            if not ssl:
                raise ValueError(
                    f"{name}: only used with SSL or SASL_SSL, "
                    f"but security_protocol is {self.security_protocol}"
                )
            if not path.is_file():
                raise ValueError(f"{name}: file not found: {path}")
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ValueError("ssl_keyfile: ssl_certfile and ssl_keyfile go together")
        if self.sink_retry_backoff_max_ms < self.sink_retry_backoff_ms:
            raise ValueError("sink_retry_backoff_max_ms: must be >= sink_retry_backoff_ms")
        if self.max_poll_interval_ms <= self.sink_retry_backoff_max_ms:
            raise ValueError("max_poll_interval_ms: must exceed sink_retry_backoff_max_ms")
        bound_ms = self.broker_unreachable_after_s * 1000
        if self.request_timeout_ms + self.heartbeat_interval_ms > bound_ms:
            raise ValueError(
                f"request_timeout_ms: with a heartbeat every {self.heartbeat_interval_ms} ms, "
                f"must be <= {bound_ms - self.heartbeat_interval_ms:.0f} so that a silent "
                f"broker is noticed within broker_unreachable_after_s "
                f"({self.broker_unreachable_after_s:g} s)"
            )
        return self

    @property
    def heartbeat_interval_ms(self) -> int:
        """The consumer's heartbeat interval: the usual three per session timeout, at most
        3 s (the longest a consumer goes without a request in flight to its coordinator)."""
        return max(100, min(3_000, self.session_timeout_ms // 3))

    def _secret(self, name: str) -> str | None:
        value = getattr(self, name)
        if value is not None:
            return value.get_secret_value()
        path = getattr(self, SECRET_FILES[name])
        return None if path is None else read_secret_file(path)

    def security_warnings(self) -> list[str]:
        """What a start-up log should warn about in these settings (no secrets in them)."""
        out = []
        if self.security_protocol == "SASL_PLAINTEXT" and self.sasl_mechanism == "PLAIN":
            out.append(
                "kafka: SASL_PLAINTEXT with PLAIN sends the password in clear text over the "
                "network; use SASL_SSL, or SCRAM-SHA-512"
            )
        elif self.security_protocol == "SASL_PLAINTEXT":
            out.append("kafka: SASL_PLAINTEXT does not encrypt the records; use SASL_SSL")
        if self.security_protocol.endswith("SSL") and not self.ssl_check_hostname:
            out.append("kafka: ssl_check_hostname is off: the broker's identity is not checked")
        return out

    def client_kwargs(self) -> dict[str, Any]:
        """Connection and security keyword arguments for kafka-python clients.

        The only place secrets are revealed (read from their files here); never log the result.
        """
        kw: dict[str, Any] = {
            "bootstrap_servers": list(self.bootstrap_servers),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
            "bootstrap_timeout_ms": self.bootstrap_timeout_ms,
        }
        if self.security_protocol.endswith("SSL"):
            kw["ssl_check_hostname"] = self.ssl_check_hostname
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
                path = getattr(self, name)
                if path is not None:
                    kw[name] = str(path)
            ssl_password = self._secret("ssl_password")
            if ssl_password is not None:
                kw["ssl_password"] = ssl_password
        if self.security_protocol.startswith("SASL_"):
            kw["sasl_mechanism"] = self.sasl_mechanism
            kw["sasl_plain_username"] = self.sasl_plain_username
            kw["sasl_plain_password"] = self._secret("sasl_plain_password")
        return kw

    def describe(self) -> str:
        """One log line about the connection, without secrets."""
        auth: str = self.security_protocol
        if self.sasl_mechanism:
            auth += f"/{self.sasl_mechanism} user={self.sasl_plain_username}"
        return (
            f"kafka {','.join(self.bootstrap_servers)} topics={','.join(self.topics)} "
            f"group={self.group_id} client={self.client_id} security={auth} "
            f"max_batch={self.max_batch}"
        )


class EmbeddedConfig(_Strict):
    """In-process replay of a scored file: the source when no Kafka is configured."""

    #: CSV, Parquet or JSON-lines file to replay; absent: the caller supplies records.
    path: Path | None = None
    #: Records per second; absent or 0 = as fast as possible (as ``--rate 0`` on the CLI).
    rate: float | None = Field(None, ge=0, allow_inf_nan=False)
    batch_size: int = Field(1_000, ge=1, le=1_000_000)
    #: Topic name in the synthetic origins (dead letters and logs say where a record came from).
    topic_name: str = Field("embedded", min_length=1)
    #: Consecutive failed sink attempts of one batch before ``run`` raises: a replay has no
    #: broker keeping the data, and a sink that keeps failing on it is a bug to surface.
    sink_max_retries: int = Field(3, ge=0)
    sink_retry_backoff_ms: int = Field(200, ge=1)

    @field_validator("rate")
    @classmethod
    def _zero_is_unpaced(cls, v: float | None) -> float | None:
        return v or None

    @field_validator("path")
    @classmethod
    def _known_format(cls, v: Path | None) -> Path | None:
        if v is not None and v.suffix.lower() not in (".csv", ".parquet", ".pq", ".jsonl"):
            raise ValueError(f"unsupported file type {v.suffix!r}; use .csv, .parquet or .jsonl")
        return v


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """KafkaConfig fields set by ``VFR_KAFKA_*`` variables (empty values ignored)."""
    env = os.environ if environ is None else environ
    return {field: env[var] for var, field in KAFKA_ENV_VARS.items() if env.get(var)}


def kafka_table_with_env(
    raw: KafkaConfig | Mapping[str, Any] | None, environ: Mapping[str, str]
) -> dict[str, Any] | None:
    """The ``[kafka]`` settings of the file (a model, a parsed table or None) with the
    environment's overrides, to validate; None when neither configures Kafka."""
    overrides = env_overrides(environ)
    if raw is None and "bootstrap_servers" not in overrides:
        return None
    # exclude_unset: re-validating the dump must not turn defaults into explicit values;
    # model_dump keeps secrets wrapped in SecretStr, which validate as they are.
    base: dict[str, Any] = (
        raw.model_dump(exclude_unset=True) if isinstance(raw, KafkaConfig) else dict(raw or {})
    )
    for secret, file_field in SECRET_FILES.items():
        # the environment's form of a secret replaces the file's other form
        if secret in overrides:
            base.pop(file_field, None)
        if file_field in overrides:
            base.pop(secret, None)
    base.update(overrides)
    return base


def env_vars_set(environ: Mapping[str, str], prefix: str = "kafka") -> dict[str, str]:
    """Dotted KafkaConfig field -> the variable that set it (for error messages)."""
    return {f"{prefix}.{f}": var for var, f in KAFKA_ENV_VARS.items() if environ.get(var)}


def kafka_config_with_env(
    raw: KafkaConfig | Mapping[str, Any] | None,
    environ: Mapping[str, str] | None = None,
) -> KafkaConfig | None:
    """The Kafka settings of the file (a model, a parsed table or None) with env overrides.

    Returns None when neither the file nor ``VFR_KAFKA_BOOTSTRAP`` configures Kafka: the
    service then uses the embedded replay. Raises ConfigError naming ``kafka.<field>``.
    """
    env = os.environ if environ is None else environ
    table = kafka_table_with_env(raw, env)
    if table is None:
        return None
    try:
        return KafkaConfig(**table)
    except ValidationError as exc:
        raise config_error(exc, table, "kafka", SECRET_FIELDS, env_vars_set(env)) from None


def embedded_config(raw: EmbeddedConfig | Mapping[str, Any] | None = None) -> EmbeddedConfig:
    """Validate an ``[embedded]`` table, raising ConfigError naming ``embedded.<field>``."""
    if isinstance(raw, EmbeddedConfig):
        return raw
    table = dict(raw or {})
    try:
        return EmbeddedConfig(**table)
    except ValidationError as exc:
        raise config_error(exc, table, "embedded") from None
