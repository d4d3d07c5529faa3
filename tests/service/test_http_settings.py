"""The server's limits from ``[service.http]`` (monitor.service.http_settings); a bad
web-config file at start-up: tests/service/test_api_security.py."""

from __future__ import annotations

import pytest

from monitor.config import ConfigError, config_from_mapping
from monitor.service.http_settings import HttpLimits, server_settings


def test_the_configured_limits_reach_the_server_and_the_rest_keep_their_defaults():
    cfg = config_from_mapping(
        {"service": {"http": {"max_connections": 7, "keep_alive_s": 9, "header_timeout_s": 2}}}
    )
    web, limits = server_settings(cfg.service.http)
    assert web is None  # no web-config file: plain HTTP, no users
    assert (limits.max_connections, limits.keep_alive_s, limits.header_timeout_s) == (7, 9, 2)
    defaults = HttpLimits()
    assert (limits.worker_threads, limits.probe_reserve, limits.auth_concurrency) == (
        defaults.worker_threads, defaults.probe_reserve, defaults.auth_concurrency,
    )  # fmt: skip


def test_the_defaults_of_the_section_are_the_limits_defaults():
    _web, limits = server_settings(config_from_mapping({}).service.http)
    assert limits == HttpLimits()


def test_a_web_config_file_that_is_missing_names_the_field(tmp_path):
    cfg = config_from_mapping({"service": {"http": {"web_config": str(tmp_path / "no.yml")}}})
    with pytest.raises(ConfigError) as info:
        server_settings(cfg.service.http)
    assert info.value.field.startswith("service.http.web_config")
