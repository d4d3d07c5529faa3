"""Grafana dashboards (deploy/grafana): committed JSON is generated, and queries are real.

The generator needs grafana-foundation-sdk (dev extras); without it the tests FAIL
(not skip) so a missing dependency is not mistaken for green dashboards.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.exporter_state import new_exporter, populate

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
GENERATOR = GRAFANA / "generate.py"
DASHBOARD_DIR = GRAFANA / "dashboards"
RECORDING_RULES = ROOT / "deploy" / "prometheus" / "rules" / "vfr_recording.yml"

#: A metric name in PromQL: an exported vfr_ name or a recording-rule name (has a colon).
_TOKEN = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_RECORD = re.compile(r"^\s*-?\s*record:\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*$", re.M)


@pytest.fixture(scope="module")
def generator():
    """deploy/grafana/generate.py imported by path (it is not a package)."""
    try:
        import grafana_foundation_sdk  # noqa: F401
    except ImportError:
        pytest.fail(
            "grafana-foundation-sdk is not installed: install the dev extras "
            "(pip install -e '.[dev]') to generate and check the Grafana dashboards",
            pytrace=False,
        )
    spec = importlib.util.spec_from_file_location("vfr_grafana_generate", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


@pytest.fixture(scope="module")
def generated(generator) -> dict[str, str]:
    return generator.generate()


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict]:
    files = sorted(DASHBOARD_DIR.glob("*.json"))
    assert files, f"no dashboards in {DASHBOARD_DIR}"
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in files}


def known_metric_names() -> set[str]:
    """Sample names a fully populated exporter renders (histograms: _bucket/_sum/_count)
    and names the recording rules record."""
    exp, st = new_exporter()
    populate(exp, st)
    names = {
        s.name
        for family in text_string_to_metric_families(exp.render().decode())
        for s in family.samples
    }
    names |= set(_RECORD.findall(RECORDING_RULES.read_text(encoding="utf-8")))
    return names


def metric_names(expr: str) -> set[str]:
    """vfr_ names and recording-rule names (with a colon) in a PromQL expression."""
    bare = _STRING.sub('""', expr)  # label values and count_values labels are not names
    bare = re.sub(r"\[[^\]]*\]", "[]", bare)  # range selectors ([5m], [$__rate_interval])
    return {t for t in _TOKEN.findall(bare) if t.startswith("vfr_") or ":" in t}


def all_panels(board: dict) -> list[dict]:
    out = []
    for panel in board.get("panels", []):
        out.append(panel)
        out.extend(panel.get("panels", []))  # panels of collapsed rows
    return out


def exprs(board: dict) -> list[tuple[str, str]]:
    """(where, expr) of every panel target and query variable of a dashboard."""
    found = []
    for panel in all_panels(board):
        for target in panel.get("targets", []):
            if target.get("expr"):
                found.append((f"panel {panel.get('title')!r}", target["expr"]))
    for var in board.get("templating", {}).get("list", []):
        query = var.get("query")
        if var.get("type") == "query":
            text = query.get("query", "") if isinstance(query, dict) else str(query or "")
            inner = re.fullmatch(r"\s*label_values\((.*),\s*\w+\)\s*", text)
            found.append((f"variable {var['name']!r}", inner.group(1) if inner else text))
    return found


# ---------------------------------------------------------------------------- (a) generated
def test_committed_json_is_what_the_code_generates(generator, generated):
    committed = {p.name for p in DASHBOARD_DIR.glob("*.json")}
    assert committed == set(generated), (
        f"dashboard files {sorted(committed)} != generated {sorted(generated)}; "
        "run: python deploy/grafana/generate.py"
    )
    stale = [
        name
        for name, text in generated.items()
        if (DASHBOARD_DIR / name).read_text(encoding="utf-8") != text
    ]
    assert not stale, f"{stale} differ from the generator; run: python deploy/grafana/generate.py"
    assert generator.check() == []


def test_generation_is_deterministic(generator, generated):
    assert generator.generate() == generated
    for text in generated.values():
        assert text.endswith("}\n")
        board = json.loads(text)
        assert text == json.dumps(board, indent=2, sort_keys=True) + "\n"


def test_check_flag_fails_on_a_modified_file(generator, tmp_path):
    assert generator.main(["--out", str(tmp_path)]) == 0
    assert generator.main(["--check", "--out", str(tmp_path)]) == 0
    victim = sorted(tmp_path.glob("*.json"))[0]
    victim.write_text(victim.read_text(encoding="utf-8").replace("vfr_", "xfr_"), encoding="utf-8")
    assert generator.main(["--check", "--out", str(tmp_path)]) == 1
    victim.unlink()
    assert generator.main(["--check", "--out", str(tmp_path)]) == 1


# ---------------------------------------------------------------------------- (b) metric names
def test_metric_name_parsing():
    assert metric_names(
        'sum by (tier) (model_tier:vfr_cells:count{model=~"$model"}) '
        '+ rate(vfr_ingest_rejected_total{reason="out_of_range:score"}[$__rate_interval]) '
        '+ count_values("level", vfr_cell_value) - time()'
    ) == {"model_tier:vfr_cells:count", "vfr_ingest_rejected_total", "vfr_cell_value"}
    known = known_metric_names()
    assert {
        "vfr_cell_value",
        "vfr_verdict_flips_total",
        "vfr_evaluation_duration_seconds_bucket",
        "vfr_job_runs_total",
        "model_tier:vfr_cells:count",
        "vfr:job_interval:seconds",
    } <= known
    assert "vfr_evaluation_duration_seconds" not in known  # a histogram has no bare series


def test_every_query_uses_only_exported_or_recorded_metrics(dashboards):
    known = known_metric_names()
    unknown = []
    for name, board in dashboards.items():
        queries = exprs(board)
        assert queries, f"{name}: no queries"
        for where, expr in queries:
            names = metric_names(expr)
            if not names and "vector(" not in expr:
                unknown.append(f"{name} {where}: no metric in {expr!r}")
            unknown += [f"{name} {where}: {n}" for n in sorted(names - known)]
    assert not unknown, "metrics neither exported nor recorded:\n" + "\n".join(unknown)


def test_every_query_reads_the_vfr_prometheus_datasource(dashboards):
    for name, board in dashboards.items():
        for panel in all_panels(board):
            if panel.get("type") == "row":
                continue
            sources = [panel.get("datasource")]
            sources += [t.get("datasource") for t in panel.get("targets", [])]
            for ds in sources:
                assert ds == {"type": "prometheus", "uid": "vfr-prometheus"}, (
                    f"{name} panel {panel.get('title')!r}: datasource {ds}"
                )


#: Grafana's variables, replaced by something PromQL parses (for promtool only).
_GRAFANA_VARS = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$threshold": "0.8",
}


def test_every_query_is_valid_promql(dashboards, tmp_path):
    """promtool parses every expression (as the expr of a throw-away recording rule)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found on PATH: install the Debian package prometheus")
    rules = []
    for name, board in dashboards.items():
        for where, expr in exprs(board):
            for var, value in _GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            expr = re.sub(r"\$(\w+)", r"\1", expr)  # "$model" inside a matcher value
            rules.append({"record": f"grafana_check:expr{len(rules)}", "expr": expr})
            rules[-1]["labels"] = {"where": f"{name} {where}"[:200]}
    rule_file = tmp_path / "grafana_exprs.yml"  # JSON is YAML
    rule_file.write_text(json.dumps({"groups": [{"name": "grafana", "rules": rules}]}))
    proc = subprocess.run(
        [promtool, "check", "rules", str(rule_file)], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, f"promtool check rules:\n{proc.stdout}\n{proc.stderr}"


# ---------------------------------------------------------------------------- (c) identity
def test_uids_titles_and_panel_titles(dashboards):
    uids = [board.get("uid") for board in dashboards.values()]
    titles = [board.get("title") for board in dashboards.values()]
    assert all(uids) and len(set(uids)) == len(uids), uids
    assert all(titles) and len(set(titles)) == len(titles), titles
    for name, board in dashboards.items():
        assert len(board["uid"]) <= 40, board["uid"]
        panels = all_panels(board)
        assert panels, f"{name}: no panels"
        untitled = [p.get("id") for p in panels if not str(p.get("title", "")).strip()]
        assert not untitled, f"{name}: panels without a title: {untitled}"
        ids = [p.get("id") for p in panels]
        assert None not in ids and len(set(ids)) == len(ids), f"{name}: panel ids {ids}"


def test_provisioning_points_at_the_datasource_and_dashboards():
    datasource = (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    assert re.search(r"^\s*uid:\s*vfr-prometheus\s*$", datasource, re.M)
    assert re.search(r"^\s*url:\s*http://prometheus:9090\s*$", datasource, re.M)
    provider = (GRAFANA / "provisioning" / "dashboards" / "vfr.yml").read_text()
    assert re.search(r"^\s*type:\s*file\s*$", provider, re.M)
    assert re.search(r"^\s*path:\s*/var/lib/grafana/dashboards\s*$", provider, re.M)
