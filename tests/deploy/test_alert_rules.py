"""Prometheus and Alertmanager configuration: valid, unit-tested, documented.

Runs promtool (Debian package ``prometheus``) and amtool (``prometheus-alertmanager``) on
deploy/prometheus and deploy/alertmanager; ``make test`` installs both. A missing tool is a
failure, not a skip: these files would otherwise ship unchecked.

YAML is read with PyYAML (a dependency of the package).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "deploy" / "prometheus"
PROM_CONFIG = PROM / "prometheus.yml"
#: Several instances through file-based service discovery (issue 15).
FLEET_CONFIG = PROM / "prometheus-fleet.yml"
FLEET_TARGETS = PROM / "targets" / "vfr-instances.json"
RULE_FILES = sorted((PROM / "rules").glob("*.yml"))
ALERT_FILE = PROM / "rules" / "vfr_alerts.yml"
TEST_FILES = sorted((PROM / "tests").glob("*.yml"))
AM_CONFIG = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
RUNBOOKS = ROOT / "docs" / "runbooks"
SEVERITIES = {"critical", "warning", "info"}
ANNOTATIONS = ("summary", "description", "runbook_url")


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} not found on PATH: install the Debian package {package} "
            f"(`make test` installs it through `make system-deps`)",
            pytrace=False,
        )
    return path


def _run(*args: str | Path, cwd: Path = ROOT) -> None:
    """Run a tool; on a non-zero exit fail with its whole output.

    The limit: `promtool test rules vfr_cells_test.yml` takes about 28 s on a quiet 2-core
    machine and ran past 60 s at a load of 10 (a fresh-clone `make test` beside other
    suites); 180 s still ends a hung tool well inside the suite's time."""
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=180
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(str(a) for a in args)} exited {proc.returncode}\n"
            f"{proc.stdout}\n{proc.stderr}",
            pytrace=False,
        )


def _alerts() -> dict[str, dict]:
    """Alert name -> {"labels": {...}, "annotations": {...}} from the alert rule file."""
    text = ALERT_FILE.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    return {
        r["alert"]: {
            "labels": r.get("labels") or {},
            "annotations": r.get("annotations") or {},
        }
        for g in doc["groups"]
        for r in g["rules"]
        if "alert" in r
    }


def _tested_alert_names() -> set[str]:
    names = set()
    for f in TEST_FILES:
        names |= set(re.findall(r"alertname:\s*['\"]?(\w+)", f.read_text(encoding="utf-8")))
    return names


def test_files_exist():
    assert PROM_CONFIG.is_file() and FLEET_CONFIG.is_file() and FLEET_TARGETS.is_file()
    assert ALERT_FILE in RULE_FILES and len(RULE_FILES) >= 2
    assert TEST_FILES, "no promtool unit tests in deploy/prometheus/tests"
    assert AM_CONFIG.is_file()


def test_prometheus_config_valid():
    """The config and the rule files it names (relative paths resolve)."""
    _run(_tool("promtool", "prometheus"), "check", "config", PROM_CONFIG)


def test_fleet_config_valid():
    """The file-SD config, its rule files and its targets files (promtool reads them)."""
    _run(_tool("promtool", "prometheus"), "check", "config", FLEET_CONFIG)


def test_fleet_example_lists_three_instances_of_the_one_job():
    groups = json.loads(FLEET_TARGETS.read_text(encoding="utf-8"))
    targets = [t for g in groups for t in g["targets"]]
    assert len(targets) == 3 and len(set(targets)) == 3, targets
    text = FLEET_CONFIG.read_text(encoding="utf-8")
    assert re.search(r"^\s*- job_name: vfr-monitor$", text, re.M)  # the rules select it
    assert re.search(r"^\s*- targets/vfr-\*\.json$", text, re.M)
    # one static list, Alertmanager's: the instances come from file SD only
    assert text.count("static_configs:") == 1 and "file_sd_configs:" in text


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_rule_file_valid(rule_file):
    _run(_tool("promtool", "prometheus"), "check", "rules", rule_file)


@pytest.mark.parametrize("test_file", TEST_FILES, ids=lambda p: p.name)
def test_rule_unit_tests_pass(test_file):
    _run(_tool("promtool", "prometheus"), "test", "rules", test_file)


def test_every_alert_is_labelled_and_annotated():
    alerts = _alerts()
    assert len(alerts) >= 10, sorted(alerts)
    problems = []
    for name, rule in alerts.items():
        if rule["labels"].get("severity") not in SEVERITIES:
            problems.append(f"{name}: severity {rule['labels'].get('severity')!r}")
        problems += [f"{name}: no {a}" for a in ANNOTATIONS if not rule["annotations"].get(a)]
        url = rule["annotations"].get("runbook_url", "")
        if url != f"docs/runbooks/{name}.md":
            problems.append(f"{name}: runbook_url {url!r}")
    assert not problems, "\n".join(problems)


def test_every_alert_has_a_runbook():
    missing = [n for n in _alerts() if not (RUNBOOKS / f"{n}.md").is_file()]
    assert not missing, f"no docs/runbooks/<alert>.md for {missing}"
    for name in _alerts():
        text = (RUNBOOKS / f"{name}.md").read_text(encoding="utf-8")
        assert text.startswith(f"# {name}\n"), name


def test_every_alert_is_unit_tested():
    untested = sorted(set(_alerts()) - _tested_alert_names())
    assert not untested, f"alerts without a promtool test in deploy/prometheus/tests: {untested}"


def test_alertmanager_config_valid():
    amtool = _tool("amtool", "prometheus-alertmanager")
    _run(amtool, "check-config", AM_CONFIG)
