"""The compose stack, checked as far as a machine without a Docker engine can.

No Docker engine runs here, so the stack is not started: the files parse, every
mounted file exists, images are pinned, and ports agree across the compose file,
the monitor's config, Prometheus, Alertmanager, Grafana and the Dockerfile.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from monitor.config import load_config
from monitor.config.sources import kafka_config_with_env
from monitor.service.web_config import load_web_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def _published(service: str) -> dict[int, str]:
    """container port -> host binding address, from "127.0.0.1:HOST:CONTAINER"."""
    out = {}
    for p in SERVICES[service].get("ports", []):
        host_ip, host_port, container = p.split(":")
        assert host_port == container, p
        out[int(container)] = host_ip
    return out


def test_services_and_pinned_images():
    assert set(SERVICES) == {"kafka", "monitor", "prometheus", "alertmanager", "grafana"}
    for name, svc in SERVICES.items():
        if "image" in svc:
            image = svc["image"]
            assert ":" in image and not image.endswith(":latest"), name
            assert re.search(r":v?\d+\.\d+", image), f"{name}: image not pinned to a version"
    assert SERVICES["kafka"]["image"].startswith("apache/kafka:4.")
    base = re.search(r"^FROM (\S+)", (ROOT / "Dockerfile").read_text(), re.M).group(1)
    assert re.search(r":\d+\.\d+\.\d+", base), "Dockerfile base image not pinned"


def test_every_mounted_file_exists():
    for name, svc in SERVICES.items():
        for vol in svc.get("volumes", []):
            source = vol.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts missing {source}"
    build = SERVICES["monitor"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).exists()


def test_published_ports_bind_loopback_only():
    for name in SERVICES:
        for ip in _published(name).values():
            assert ip == "127.0.0.1", name


def test_ports_agree_across_configs():
    monitor_cfg = load_config(DEPLOY / "compose" / "monitor.toml")
    port = monitor_cfg.service.http.port
    assert port in _published("monitor")
    assert f"EXPOSE {port}" in (ROOT / "Dockerfile").read_text()
    prom = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())
    scrape = prom["scrape_configs"][0]["static_configs"][0]["targets"]
    assert scrape == [f"monitor:{port}"]
    am_targets = prom["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    am_port = int(am_targets[0].split(":")[1])
    assert am_targets == [f"alertmanager:{am_port}"] and am_port in _published("alertmanager")
    ds = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    assert ds["datasources"][0]["url"] == "http://prometheus:9090" and 9090 in _published(
        "prometheus"
    )
    assert 3000 in _published("grafana")


def test_rules_and_dashboards_mounted_where_configs_expect_them():
    prom = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())
    mounts = dict(v.split(":")[:2] for v in SERVICES["prometheus"]["volumes"] if v.startswith("."))
    for rule_file in prom["rule_files"]:
        container_dir, name = rule_file.rsplit("/", 1)
        host_dir = next(h for h, c in mounts.items() if c == container_dir)
        assert (DEPLOY / host_dir / name).exists(), rule_file
    provider = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "dashboards" / "vfr.yml").read_text()
    )
    path = provider["providers"][0]["options"]["path"]
    grafana_mounts = {v.split(":")[1]: v.split(":")[0] for v in SERVICES["grafana"]["volumes"]}
    assert path in grafana_mounts and list((DEPLOY / grafana_mounts[path]).glob("*.json"))


def test_published_ports_are_loopback_and_the_broker_is_not_published():
    for name, svc in SERVICES.items():
        for p in svc.get("ports", []):
            assert isinstance(p, str) and p.startswith("127.0.0.1:"), (name, p)
    assert "ports" not in SERVICES["kafka"]


def test_web_config_is_mounted_where_the_monitor_config_names_it():
    cfg = load_config(DEPLOY / "compose" / "monitor.toml")
    assert cfg.service.http.web_config is not None
    mounts = dict(v.split(":")[:2] for v in SERVICES["monitor"]["volumes"] if v.startswith("."))
    host = next(h for h, c in mounts.items() if c == str(cfg.service.http.web_config))
    web = load_web_config(DEPLOY / host)  # parses with the service's own loader
    assert web.tls is None and not web.users  # as shipped: documented, nothing enabled


def test_monitor_config_points_at_the_compose_broker():
    cfg = load_config(DEPLOY / "compose" / "monitor.toml")
    kafka = kafka_config_with_env(cfg.kafka, environ={})
    host, port = kafka.bootstrap_servers[0].split(":")
    assert host in SERVICES and host == "kafka"
    assert f"//{host}:{port}" in SERVICES["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]


def test_the_broker_keeps_topics_for_the_monitors_horizon():
    """The monitor refuses a topic kept shorter than its horizon (consumers.retention):
    the compose broker's default retention must cover the compose config's horizon."""
    from consumers.retention import DAY_MS, TopicRetention

    hours = int(SERVICES["kafka"]["environment"]["KAFKA_LOG_RETENTION_HOURS"])
    config = load_config(DEPLOY / "compose" / "monitor.toml")
    assert TopicRetention("t", hours * 3_600_000, -1).covers(config.horizon_days)
    assert not TopicRetention("t", 7 * DAY_MS, -1).covers(config.horizon_days)
