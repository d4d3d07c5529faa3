"""``[service]``: the settings of the running service, in one section per job.

The service's settings were once ~30 flat keys of ``[service]`` (``http_host``,
``retention_discharge_days``, ``shutdown_grace_s`` ...). They are grouped by what reads
them, so a reader of a section sees every knob of one job and no other:

=========================  ==================================================================
section                    what reads it
=========================  ==================================================================
``[service]``              ``run`` itself: its progress line, where Axis 1 is computed
``[service.store]``        the DuckDB file and DuckDB's memory (monitor.store.writer)
``[service.http]``         the HTTP server: address, TLS/auth file, limits (monitor.service.http_*)
``[service.axes]``         the scheduled axes: their audit cohort, cadence, early runs on drift
``[service.retention]``    the retention job: how long discharges and results are kept
``[service.intake]``       which records are admitted (payload size, models, event times)
``[service.dead_letters]`` what a refused record leaves behind (payload or keyed hash)
``[service.shutdown]``     SIGTERM/SIGINT: the grace before a forced exit
``[service.liveness]``     /healthz: when a stuck process is reported stalled
=========================  ==================================================================

Old files keep working: a flat key of the old ``[service]`` (:data:`MOVED_KEYS`) is moved
into its section when the configuration is validated, and a deprecation message naming
the key to write instead is logged once per key and process. Giving a key both ways is an
error (which of the two was meant cannot be guessed).

Example (TOML)::

    [service.store]
    db_path = "/data/vfr-monitor.duckdb"

    [service.http]
    host = "0.0.0.0"
    web_config = "web-config.yml"

    [service.intake]
    unknown_models = "admit"
    event_time_bounds = "none"
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from monitor.config.errors import ConfigError

log = logging.getLogger(__name__)

#: A DuckDB size setting ("1GB", "512 MiB").
_SIZE = r"^[0-9]+(\.[0-9]+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StoreConfig(_Strict):
    """``[service.store]``: the service's DuckDB file and what DuckDB may hold in memory."""

    db_path: str = "vfr-monitor.duckdb"
    #: DuckDB's memory ceiling (its default is 80 % of the machine's RAM)
    memory_limit: str = Field("1GB", pattern=_SIZE)
    #: WAL size at which DuckDB checkpoints (its default is 16MB). Checkpoints run inside
    #: an ingest batch's commit; at 16MB one came every few batches and cost ~3.5 us a
    #: record at the default cadence (64MB: ~1.5 us less; 128MB: ~2.2 us less). The price
    #: of a larger one: data not yet checkpointed stays in DuckDB's memory (~1.5x the
    #: WAL: +50 MB at 64MB), and up to this much WAL to replay after a crash (seconds).
    checkpoint_wal: str = Field("64MB", pattern=_SIZE)


class HttpConfig(_Strict):
    """``[service.http]``: the HTTP server of /metrics, the probes, the API and the report
    (docs/http-api.md)."""

    host: str = "127.0.0.1"
    port: int = Field(9464, ge=0, le=65535)
    #: Prometheus-style web-config file (TLS, basic-auth users); relative paths in it are
    #: relative to it. Absent: plain HTTP without authentication (keep it on loopback).
    web_config: Path | None = None
    #: false: every /api route answers 404 (/metrics, /healthz and /readyz stay)
    api_enabled: bool = True
    #: open connections (or running requests) beyond which a data route answers 503;
    #: /healthz and /readyz are not counted against it
    max_connections: int = Field(64, ge=1, le=10_000)
    #: idle seconds a kept-alive connection may wait for its next request
    keep_alive_s: float = Field(5.0, ge=1, le=300)
    #: a request (line and headers; a body is refused) must arrive within this many seconds
    header_timeout_s: float = Field(10.0, gt=0, le=300)


class AxesConfig(_Strict):
    """``[service.axes]``: the scheduled axes (Axis 2, Axis 3, EquiLense): the records they
    read, how often they run, and when drift runs them early."""

    #: audit cohort of the scheduled axes: each model's records of the last cohort_days
    cohort_days: float = Field(90.0, gt=0)
    axis2_interval_s: float = Field(3600.0, gt=0)
    axis3_interval_s: float = Field(3600.0, gt=0)
    equilense_interval_s: float = Field(3600.0, gt=0)
    #: the slow axes run for a model as soon as it has this many records and no result of
    #: theirs yet, then on their cadence: without it a new model's tiers read Pending until
    #: the next interval (an hour by default)
    first_run_records: int = Field(1_000, ge=1)
    #: minimum time between two drift-triggered early runs of the slow axes
    early_run_min_interval_s: float = Field(300.0, ge=0)
    #: ADWIN's confidence parameter of the drift detectors that trigger the early runs
    drift_delta: float = Field(0.002, gt=0, lt=1)


class RetentionConfig(_Strict):
    """``[service.retention]``: how long the DuckDB file keeps discharges (and dead
    letters) and results, and how often the retention job deletes older ones."""

    #: discharges and dead letters; must cover the window, the audit cohort and
    #: outcomes.max_outcome_delay_days (checked at load)
    discharge_days: float = Field(400.0, gt=0)
    result_days: float = Field(730.0, gt=0)
    interval_s: float = Field(86_400.0, gt=0)


class IntakeConfig(_Strict):
    """``[service.intake]``: which records are admitted; the others are dead-lettered with
    their reason (monitor.stream.admission)."""

    #: a larger message is dead-lettered ``oversized`` before it is parsed
    max_payload_bytes: int = Field(65_536, ge=256)
    #: a record of a model not in [[models]]: dead-lettered (unknown_model) or admitted
    unknown_models: Literal["dead-letter", "admit"] = "dead-letter"
    #: hard cap on monitored models (registered and admitted); beyond: too_many_models
    max_models: int = Field(64, ge=1, le=10_000)
    #: "wall-clock": event_time within [now - max_event_age_days, now + max_clock_skew_s];
    #: "none": any time pandas and DuckDB can represent (replays of old data, replay clocks)
    event_time_bounds: Literal["wall-clock", "none"] = "wall-clock"
    max_event_age_days: float = Field(400.0, gt=0)
    max_clock_skew_s: float = Field(300.0, ge=0)


class DeadLetterConfig(_Strict):
    """``[service.dead_letters]``: what is kept of a refused record (docs/privacy.md)."""

    #: keep raw payloads of dead letters (patient data); false: reason, position and a
    #: keyed hash only
    keep_payloads: bool = False
    #: HMAC-SHA256 key of dead-letter payload hashes (hex, >= 32 hex digits); empty: the
    #: environment variable VFR_PAYLOAD_HASH_KEY, else a random key kept in the DuckDB file
    payload_hash_key: str = Field("", pattern=r"^([0-9a-fA-F]{32,128})?$")


class ShutdownConfig(_Strict):
    """``[service.shutdown]``: SIGTERM/SIGINT (docs/runbooks/shutdown-and-stalls.md)."""

    #: the data routes stop, the source closes, work in flight is written and the process
    #: exits within this many seconds; past it every thread's stack goes to the log and it
    #: exits with status 70. Keep it below the orchestrator's own grace (Kubernetes: 30 s
    #: by default).
    grace_s: float = Field(20.0, gt=0, le=600)


class LivenessConfig(_Strict):
    """``[service.liveness]``: when /healthz reports the process stalled (answers 503), so
    that an orchestrator restarts it (monitor.service.liveness)."""

    #: the ingest loop or the ticker has not turned for this long, or nothing was stored
    #: for this long while records wait at a reachable source
    stall_after_s: float = Field(120.0, ge=5)


#: Each key of the flat ``[service]`` of older files -> (its section, its name there), in
#: the order the flat keys were declared. ``None``: the key stayed in ``[service]``.
FLAT_KEYS: dict[str, tuple[str | None, str]] = {
    "db_path": ("store", "db_path"),
    "duckdb_memory_limit": ("store", "memory_limit"),
    "duckdb_checkpoint_wal": ("store", "checkpoint_wal"),
    "http_host": ("http", "host"),
    "progress_interval_s": (None, "progress_interval_s"),
    "http_port": ("http", "port"),
    "web_config": ("http", "web_config"),
    "api_enabled": ("http", "api_enabled"),
    "http_max_connections": ("http", "max_connections"),
    "http_keep_alive_s": ("http", "keep_alive_s"),
    "http_header_timeout_s": ("http", "header_timeout_s"),
    "cohort_days": ("axes", "cohort_days"),
    "axis2_interval_s": ("axes", "axis2_interval_s"),
    "axes_first_run_records": ("axes", "first_run_records"),
    "axis3_interval_s": ("axes", "axis3_interval_s"),
    "equilense_interval_s": ("axes", "equilense_interval_s"),
    "early_run_min_interval_s": ("axes", "early_run_min_interval_s"),
    "drift_delta": ("axes", "drift_delta"),
    "retention_discharge_days": ("retention", "discharge_days"),
    "retention_result_days": ("retention", "result_days"),
    "retention_interval_s": ("retention", "interval_s"),
    "max_payload_bytes": ("intake", "max_payload_bytes"),
    "evaluation_worker": (None, "evaluation_worker"),
    "unknown_models": ("intake", "unknown_models"),
    "max_models": ("intake", "max_models"),
    "event_time_bounds": ("intake", "event_time_bounds"),
    "max_event_age_days": ("intake", "max_event_age_days"),
    "max_clock_skew_s": ("intake", "max_clock_skew_s"),
    "keep_rejected_payloads": ("dead_letters", "keep_payloads"),
    "payload_hash_key": ("dead_letters", "payload_hash_key"),
    "shutdown_grace_s": ("shutdown", "grace_s"),
    "stall_after_s": ("liveness", "stall_after_s"),
}
#: The flat keys that moved into a section: old key -> (section, key).
MOVED_KEYS: dict[str, tuple[str, str]] = {
    old: (section, key) for old, (section, key) in FLAT_KEYS.items() if section is not None
}

#: Old keys whose deprecation message was logged (once per key and process).
_warned: set[str] = set()


def new_spelling(old: str) -> str:
    """How a moved flat key is written now: ``"http_host"`` -> ``"[service.http] host"``.

    >>> new_spelling("retention_discharge_days")
    '[service.retention] discharge_days'
    """
    section, key = MOVED_KEYS[old]
    return f"[service.{section}] {key}"


def moved_into_sections(data: Mapping[str, object]) -> dict[str, object]:
    """``[service]`` as given, with each old flat key moved into its section.

    Logs a deprecation message once per old key; raises ValueError (``"<old key>: ..."``,
    which the configuration's errors name as ``service.<old key>``) when the key is also
    given in its section.

    >>> moved_into_sections({"http_port": 0, "http": {"host": "::1"}, "evaluation_worker": False})
    {'http': {'host': '::1', 'port': 0}, 'evaluation_worker': False}
    """
    out = dict(data)
    for old in [k for k in out if k in MOVED_KEYS]:
        section, key = MOVED_KEYS[old]
        table = out.get(section, {})
        if isinstance(table, BaseModel):
            table = table.model_dump(exclude_unset=True)
        if not isinstance(table, Mapping):
            continue  # the section itself is malformed: validation names it
        if key in table:
            raise ValueError(
                f"{old}: the old spelling of {new_spelling(old)}, which is also set; "
                f"keep only {new_spelling(old)}"
            )
        out[section] = {**table, key: out.pop(old)}
        if old not in _warned:
            _warned.add(old)
            log.warning(
                "configuration: [service] %s is deprecated; write it as %s (the old key is "
                "still read, for now)", old, new_spelling(old),
            )  # fmt: skip
    return out


def as_written(error: ConfigError, service: object) -> ConfigError:
    """``error`` naming the key as the file wrote it: a bad value given under an old flat
    key is reported under that key (``service.http_port``), not under the section it was
    moved into, which the file does not have.

    >>> e = as_written(ConfigError("service.http.port", "too big"), {"http_port": 70_000})
    >>> e.field, e.message
    ('service.http_port', 'too big (now written [service.http] port)')
    """
    if not isinstance(service, Mapping):
        return error
    for old, (section, key) in MOVED_KEYS.items():
        if error.field == f"service.{section}.{key}" and old in service:
            written = f"{error.message} (now written {new_spelling(old)})"
            return ConfigError(f"service.{old}", written)
    return error


class ServiceConfig(_Strict):
    """The running service: its DuckDB file, HTTP server, scheduled axes, retention,
    admission of records, shutdown and liveness, one section each."""

    #: `vfr-monitor run` prints a progress line (messages/s, stored, dead letters, lag)
    #: every this many seconds; 0: none (``run --progress-interval``)
    progress_interval_s: float = Field(10.0, ge=0)
    #: compute the hop evaluations' Axis 1 bootstrap in a worker process beside ingestion
    #: (results are written with the next batch); false: inside the batch's transaction
    evaluation_worker: bool = True
    #: the DuckDB file and DuckDB's memory: [service.store]
    store: StoreConfig = Field(default_factory=StoreConfig)
    #: address, web-config file, API switch and limits of the HTTP server: [service.http]
    http: HttpConfig = Field(default_factory=HttpConfig)
    #: cohort, cadence and early runs of the scheduled axes: [service.axes]
    axes: AxesConfig = Field(default_factory=AxesConfig)
    #: how long records and results are kept: [service.retention]
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    #: which records are admitted: [service.intake]
    intake: IntakeConfig = Field(default_factory=IntakeConfig)
    #: what a refused record leaves behind: [service.dead_letters]
    dead_letters: DeadLetterConfig = Field(default_factory=DeadLetterConfig)
    #: the grace of SIGTERM/SIGINT: [service.shutdown]
    shutdown: ShutdownConfig = Field(default_factory=ShutdownConfig)
    #: when /healthz reports a stall: [service.liveness]
    liveness: LivenessConfig = Field(default_factory=LivenessConfig)

    @model_validator(mode="before")
    @classmethod
    def _flat_keys_moved(cls, data: Any) -> Any:
        return moved_into_sections(data) if isinstance(data, Mapping) else data

    def flat_settings(self) -> dict[str, object]:
        """The settings as JSON values under their old flat keys, in the old order.

        Why kept: the configuration hash a report shows (monitor.report.data.config_hash)
        is taken over this layout, so the same settings keep the hash they had before the
        sections came in; a reader comparing reports across the upgrade is not told the
        configuration changed when only its spelling did.

        >>> list(ServiceConfig().flat_settings().items())[:2]
        [('db_path', 'vfr-monitor.duckdb'), ('duckdb_memory_limit', '1GB')]
        """
        nested = self.model_dump(mode="json")
        return {
            old: nested[key] if section is None else nested[section][key]
            for old, (section, key) in FLAT_KEYS.items()
        }
