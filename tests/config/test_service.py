"""``[service]`` in sections (monitor.config.service): old flat keys still load, with a
message naming the key to write; a key given both ways is an error naming it; the settings
keep their configuration hash."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

import pytest

from monitor.config import ConfigError, MonitorConfig, ServiceConfig, config_from_mapping
from monitor.config import load_config as load
from monitor.config import service as service_module
from monitor.config.service import FLAT_KEYS, MOVED_KEYS, new_spelling

ROOT = Path(__file__).resolve().parents[2]
OLD_FILE = ROOT / "tests" / "data" / "service-flat-keys-2026-12.toml"
NEW_FILE = ROOT / "deploy" / "compose" / "monitor.toml"

#: A value for every flat key, none of them its default (so a key that landed nowhere, or
#: in the wrong field, shows).
NOT_DEFAULTS: dict[str, object] = {
    "db_path": "/data/x.duckdb", "duckdb_memory_limit": "300MB",
    "duckdb_checkpoint_wal": "32MB", "http_host": "0.0.0.0", "progress_interval_s": 0.0,
    "http_port": 9000, "web_config": "/etc/web.yml", "api_enabled": False,
    "http_max_connections": 7, "http_keep_alive_s": 9.0, "http_header_timeout_s": 3.0,
    "cohort_days": 60.0, "axis2_interval_s": 11.0, "axes_first_run_records": 12,
    "axis3_interval_s": 13.0, "equilense_interval_s": 14.0, "early_run_min_interval_s": 15.0,
    "drift_delta": 0.01, "retention_discharge_days": 500.0, "retention_result_days": 900.0,
    "retention_interval_s": 16.0, "max_payload_bytes": 1024, "evaluation_worker": False,
    "unknown_models": "admit", "max_models": 5, "event_time_bounds": "none",
    "max_event_age_days": 17.0, "max_clock_skew_s": 18.0, "keep_rejected_payloads": True,
    "payload_hash_key": "ab" * 16, "shutdown_grace_s": 19.0, "stall_after_s": 21.0,
}  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_messages(monkeypatch):
    """Each test sees the deprecation messages as a new process would (logged once each)."""
    monkeypatch.setattr(service_module, "_warned", set())


def _sections(flat: dict[str, object]) -> dict[str, object]:
    """The same settings written in sections."""
    out: dict[str, dict[str, object]] = {}
    top: dict[str, object] = {}
    for old, value in flat.items():
        section, key = FLAT_KEYS[old]
        if section is None:
            top[key] = value
        else:
            out.setdefault(section, {})[key] = value
    return {**top, **out}


def test_every_old_key_has_a_value_here_and_is_not_its_default():
    assert list(NOT_DEFAULTS) == list(FLAT_KEYS)
    assert ServiceConfig().flat_settings().keys() == FLAT_KEYS.keys()
    defaults = ServiceConfig().flat_settings()
    assert [k for k, v in NOT_DEFAULTS.items() if defaults[k] == v] == []


def test_the_old_flat_keys_load_to_the_same_config_as_the_sections(caplog):
    with caplog.at_level(logging.WARNING, logger="monitor.config.service"):
        old = config_from_mapping({"service": NOT_DEFAULTS}, environ={})
    new = config_from_mapping({"service": _sections(NOT_DEFAULTS)}, environ={})
    assert old == new
    # and each value reads back under its old key: every key landed in a field of its own
    assert new.service.flat_settings() == NOT_DEFAULTS
    moved = {r.getMessage() for r in caplog.records}
    assert len(moved) == len(MOVED_KEYS) == 30


def test_the_shipped_file_of_before_loads_as_the_shipped_file_of_now(caplog):
    with caplog.at_level(logging.WARNING, logger="monitor.config.service"):
        old = load(OLD_FILE, environ={})
    new = load(NEW_FILE, environ={})
    assert old == new
    assert new.service.http.host == "0.0.0.0" and new.service.intake.event_time_bounds == "none"
    assert "[service]" in OLD_FILE.read_text() and "http_host" in OLD_FILE.read_text()
    assert "http_host" not in NEW_FILE.read_text()  # the shipped file uses the sections
    assert any("[service.http] host" in r.getMessage() for r in caplog.records)


def test_the_message_names_the_old_key_and_the_new_one_and_comes_once(caplog):
    with caplog.at_level(logging.WARNING, logger="monitor.config.service"):
        config_from_mapping({"service": {"http_host": "::1"}}, environ={})
        config_from_mapping({"service": {"http_host": "::1"}}, environ={})
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "configuration: [service] http_host is deprecated; write it as [service.http] host "
        "(the old key is still read, for now)"
    ]
    assert caplog.records[0].levelno == logging.WARNING


def test_the_sections_alone_log_nothing(caplog):
    with caplog.at_level(logging.DEBUG, logger="monitor.config.service"):
        cfg = config_from_mapping({"service": _sections(NOT_DEFAULTS)}, environ={})
        MonitorConfig.model_validate(cfg.model_dump())  # a dump validates again, silently
    assert caplog.records == []


@pytest.mark.parametrize("old", sorted(MOVED_KEYS))
def test_an_old_key_and_its_new_spelling_together_are_an_error_naming_both(old):
    section, key = MOVED_KEYS[old]
    raw = {"service": {old: NOT_DEFAULTS[old], section: {key: NOT_DEFAULTS[old]}}}
    with pytest.raises(ConfigError) as info:
        config_from_mapping(raw, environ={})
    assert info.value.field == f"service.{old}"
    assert f"keep only {new_spelling(old)}" in str(info.value)


def test_a_bad_value_under_an_old_key_is_named_by_that_key():
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"service": {"http_port": 70_000}}, environ={})
    assert info.value.field == "service.http_port"
    assert "now written [service.http] port" in str(info.value)
    with pytest.raises(ConfigError) as new:
        config_from_mapping({"service": {"http": {"port": 70_000}}}, environ={})
    assert new.value.field == "service.http.port"
    # a whole-model check names the key as written too
    with pytest.raises(ConfigError) as cross:
        config_from_mapping({"service": {"retention_discharge_days": 1}}, environ={})
    assert cross.value.field == "service.retention_discharge_days"


def test_a_key_that_never_existed_is_still_an_unknown_field():
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"service": {"http": {"http_host": "x"}}}, environ={})
    assert info.value.field == "service.http.http_host" and "unknown field" in str(info.value)


def test_the_flat_layout_is_the_one_the_configuration_hash_was_taken_over():
    """The configuration hash a report shows is taken over the flat layout, key for key in
    the old order, so the same settings keep their hash (the golden run's report pins it)."""
    from monitor.report.data import config_hash

    old_spelling = tomllib.loads(OLD_FILE.read_text())
    new = load(NEW_FILE, environ={})
    flat = new.service.flat_settings()
    assert {k: flat[k] for k in old_spelling["service"]} == old_spelling["service"]
    assert ServiceConfig.model_validate(flat) == new.service  # the flat layout loads back
    assert config_hash(new) == config_hash(load(OLD_FILE, environ={}))
    assert config_hash(new) != config_hash(MonitorConfig())
