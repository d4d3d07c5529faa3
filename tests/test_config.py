"""Configuration: the defaults (docs/method.md section 9), start-up errors that name the field."""

from __future__ import annotations

import pytest

from monitor.cli import main
from monitor.config import ConfigError, MonitorConfig, config_from_mapping, load_config


def test_defaults_are_spec_section_9():
    c = MonitorConfig()
    assert (c.axis1.K, c.axis1.N, c.axis1.tau_vfr, c.axis1.min_group_support) == (
        500,
        10_000,
        0.10,
        20,
    )
    assert c.confirm_windows == 2
    rules = {r.name: (r.threshold, r.direction) for r in c.metrics}
    assert rules == {
        "DI": (0.80, ">="),
        "SPD": (0.10, "abs<="),
        "EOPP": (0.10, "abs<="),
        "EOD": (0.10, "abs<="),
        "TI": (0.10, "<="),
        "PP": (0.10, "abs<="),
        "CAL": (0.05, "<="),
    }
    assert [a.name for a in c.attributes] == ["race", "sex", "ethnicity", "age_group"]


def test_toml_file_overrides(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(
        """
[axis1]
K = 200
[metrics.DI]
threshold = 0.9
[metrics.SPD]
[[attributes]]
name = "sex"
groups = { F = "Female", M = "Male" }
"""
    )
    c = load_config(p)
    assert c.axis1.K == 200 and c.axis1.N == 10_000
    assert [(r.name, r.threshold, r.direction) for r in c.metrics] == [
        ("DI", 0.9, ">="),
        ("SPD", 0.10, "abs<="),
    ]
    assert c.attribute("sex").codes == ("F", "M")


@pytest.mark.parametrize(
    ("raw", "field", "fragment"),
    [
        ({"axis1": {"K": 0}}, "axis1.K", "greater than or equal"),
        ({"axis1": {"tau_vfr": 0.7}}, "axis1.tau_vfr", "0.5"),
        ({"axis1": {"Kay": 5}}, "axis1.Kay", "unknown field"),
        (
            {"metrics": {"XYZ": {"threshold": 1, "direction": ">="}}},
            "metrics.XYZ.name",
            "allowed: DI",
        ),
        ({"metrics": {"DI": {"direction": ">"}}}, "metrics.DI.direction", "allowed values: '>='"),
        (
            {"attributes": [{"name": "race", "groups": {"1": "x"}}]},
            "attributes.race.groups",
            "two group",
        ),
        (
            {"attributes": [{"name": "Race!", "groups": {"1": "x", "2": "y"}}]},
            "attributes.Race!.name",
            "pattern",
        ),
        (
            {"attributes": [{"name": "race", "groups": {"1": "x", 'a"b': "y"}}]},
            "attributes.race.groups",
            "printable",
        ),
        ({"window": {"kind": "sliding"}}, "window.kind", "'count' or 'time'"),
        # spliced into a SET statement: only a size passes
        (
            {"service": {"store": {"checkpoint_wal": "1GB'; DROP TABLE x; --"}}},
            "service.store.checkpoint_wal",
            "pattern",
        ),
        # the same under the key's old flat spelling: named as it was written
        (
            {"service": {"duckdb_checkpoint_wal": "1GB'; DROP TABLE x; --"}},
            "service.duckdb_checkpoint_wal",
            "pattern",
        ),
    ],
)
def test_bad_config_names_the_field(raw, field, fragment):
    with pytest.raises(ConfigError) as info:
        config_from_mapping(raw)
    assert info.value.field == field
    assert f"field '{field}'" in str(info.value)
    assert fragment in str(info.value)


def test_cli_fails_at_start_up_on_bad_config(tmp_path, capsys):
    p = tmp_path / "bad.toml"
    p.write_text("[axis1]\nK = -3\n")
    assert main(["bench", "axis1", "--config", str(p)]) == 2
    assert "axis1.K" in capsys.readouterr().err


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "x.toml"
    bad.write_text("[axis1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"input": {"codes": {"sex": {"M": "7"}}}}, "input.codes.sex"),
        ({"input": {"codes": {"gender": {"M": "0"}}}}, "input.codes.gender"),
        ({"equilense": {"reference": {"race": "99"}}}, "equilense.reference.race"),
        ({"metrics": []}, "metrics"),
        ({"axis2": {"sizes": [5000, 1000]}}, "axis2.sizes"),
    ],
)
def test_cross_field_errors_name_the_field(raw, field):
    with pytest.raises(ConfigError) as info:
        config_from_mapping(raw)
    assert info.value.field == field, str(info.value)


def test_the_store_applies_the_duckdb_settings(tmp_path):
    from monitor.store import Store

    cfg = config_from_mapping(
        {"service": {"store": {"memory_limit": "300MB", "checkpoint_wal": "64MB"}}}
    )
    store = Store(tmp_path / "s.duckdb", cfg)
    got = store.cursor().execute(
        "SELECT current_setting('memory_limit'), current_setting('checkpoint_threshold')"
    ).fetchone()
    store.close()
    assert got == ("286.1 MiB", "61.0 MiB")  # DuckDB prints 300 MB and 64 MB in MiB


def test_source_settings_are_typed_and_validated_at_load():
    from monitor.config import EmbeddedConfig, KafkaConfig

    cfg = config_from_mapping(
        {"kafka": {"bootstrap_servers": "b:9092", "max_batch": 10}, "embedded": {"rate": 5}},
        environ={"VFR_KAFKA_GROUP": "from-env"},
    )
    assert isinstance(cfg.kafka, KafkaConfig) and isinstance(cfg.embedded, EmbeddedConfig)
    assert (cfg.kafka.max_batch, cfg.kafka.group_id, cfg.embedded.rate) == (10, "from-env", 5)
    assert config_from_mapping({}, environ={}).kafka is None
    only_env = config_from_mapping({}, environ={"VFR_KAFKA_BOOTSTRAP": "k:1"})
    assert only_env.kafka is not None and only_env.kafka.bootstrap_servers == ("k:1",)


@pytest.mark.parametrize(
    ("raw", "env", "field", "words"),
    [
        ({"kafka": {"bootstrap_servers": "b:1", "max_bach": 1}}, {}, "kafka.max_bach",
         "unknown field"),
        ({"kafka": {"bootstrap_servers": "b:1", "security_protocol": "SASL_SSL"}}, {},
         "kafka.sasl_mechanism", "required"),
        ({"kafka": {"bootstrap_servers": "b:1"}}, {"VFR_KAFKA_MAX_BATCH": "many"},
         "kafka.max_batch", "VFR_KAFKA_MAX_BATCH"),
        ({"embedded": {"rate": -1}}, {}, "embedded.rate", "greater than or equal"),
        ({"axis1": {"K": 0}}, {}, "axis1.K", "greater than"),
    ],
)  # fmt: skip
def test_one_translator_names_the_field_in_every_section(raw, env, field, words):
    from monitor.config.sources import embedded_config, kafka_config_with_env

    with pytest.raises(ConfigError) as info:
        config_from_mapping(raw, environ=env)
    assert info.value.field == field and words in str(info.value), str(info.value)
    section = next(iter(raw))
    if section in ("kafka", "embedded"):  # the same message when the table is validated alone
        with pytest.raises(ConfigError) as alone:
            if section == "kafka":
                kafka_config_with_env(raw["kafka"], env)
            else:
                embedded_config(raw["embedded"])
        assert str(alone.value) == str(info.value)
