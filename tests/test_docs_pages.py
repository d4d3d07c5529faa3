"""The documentation pages against what they describe (beside `mkdocs build --strict`,
which `make test` runs and which catches broken links, anchors and API references).

Why: a reference page that lists alerts or metrics is only useful while it lists all of
them and nothing else; the decisions log's contents are only useful while every section
is in them; the README only stays a newcomer's page while it stays short. Each of these
drifts silently when someone adds an alert, a metric or a section, so they are checked
here, not by review.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from markdown.extensions.toc import slugify

from monitor.service.exporter import Exporter

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ALERT_RULES = ROOT / "deploy" / "prometheus" / "rules" / "vfr_alerts.yml"

#: the README is the newcomer's page (issue 33: "under ~8 KB"); reference goes to docs/
README_MAX_BYTES = 8 * 1024


def _read(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _alerts() -> dict[str, dict]:
    rules = yaml.safe_load(ALERT_RULES.read_text(encoding="utf-8"))
    return {r["alert"]: r["labels"] for g in rules["groups"] for r in g["rules"] if "alert" in r}


def test_every_alert_is_listed_with_its_runbook_severity_and_team() -> None:
    page = _read("metrics-alerts.md")
    alerts = _alerts()
    assert alerts, "no alert rules read: has the rules file moved?"
    missing = [
        name
        for name, labels in alerts.items()
        if f"| [`{name}`](runbooks/{name}.md) | {labels['severity']} | {labels['team']} |"
        not in page
    ]
    assert not missing, (
        f"docs/metrics-alerts.md lacks (or has another severity/team for): {missing}"
    )
    listed = set(re.findall(r"\[`(VFR\w+)`\]\(runbooks/", page))
    assert listed <= set(alerts), f"listed but not in the rules: {listed - set(alerts)}"


def _exported_metric_names() -> set[str]:
    """Every family the exporter exposes, as a scrape names it (a counter with _total)."""
    names = set()
    for family in Exporter("0").registry.collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def test_every_exported_metric_is_documented_and_nothing_else() -> None:
    page = _read("metrics-alerts.md")
    metrics_section = page[page.index("## Metrics") : page.index("## Alerts")]
    documented = set(re.findall(r"`(vfr_[a-z_]+)`", metrics_section))
    exported = _exported_metric_names()
    assert exported, "the exporter exposed no family"
    assert not exported - documented, f"not on docs/metrics-alerts.md: {exported - documented}"
    assert not documented - exported, f"documented, not exported: {documented - exported}"


def test_the_decisions_contents_list_every_section_once() -> None:
    text = _read("decisions.md")
    sections = [h for h in re.findall(r"^## (.+)$", text, re.MULTILINE) if h != "Contents by topic"]
    contents = text[
        text.index("## Contents by topic") : text.index(
            "\n## ", text.index("## Contents by topic") + 1
        )
    ]
    linked = re.findall(r"^\* \[(.+)\]\(#([^)]+)\)$", contents, re.MULTILINE)
    titles = [t for t, _ in linked]
    assert sorted(titles) == sorted(sections), (
        f"sections not in the contents: {set(sections) - set(titles)}; "
        f"contents without a section: {set(titles) - set(sections)}"
    )
    for title, anchor in linked:  # the anchor MkDocs (and GitHub) give the heading
        assert anchor == slugify(title.replace("`", ""), "-"), title


def test_no_decisions_heading_is_keyed_to_an_issue() -> None:
    headings = re.findall(r"^#+ .*$", _read("decisions.md"), re.MULTILINE)
    keyed = [h for h in headings if re.search(r"\bissues?\s+\d", h)]
    assert not keyed, f"put the issue in the section's first line, not its heading: {keyed}"


def test_the_readme_stays_a_newcomers_page() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes (at most {README_MAX_BYTES}): move reference to docs/"
    )


def test_the_method_papers_are_cited_with_their_dois() -> None:
    method = _read("method.md")
    refs = method[method.index("## References") :]
    for doi in ("10.1145/3799682.3840827", "10.1101/2025.09.03.25334999"):
        assert f"https://doi.org/{doi}" in refs, doi
    assert "method.md#references" in (ROOT / "README.md").read_text(encoding="utf-8")


def _config_reference_hook():
    """The site's hook that writes the configuration reference (docs/hooks/)."""
    import importlib.util

    path = DOCS / "hooks" / "config_reference.py"
    spec = importlib.util.spec_from_file_location("config_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_has_every_field_with_its_note() -> None:
    from pydantic import BaseModel

    from monitor.config import MonitorConfig

    hook = _config_reference_hook()
    page = hook.on_page_markdown(_read("configuration.md"))
    assert hook.MARKER not in page, "the marker was not replaced"
    sections = re.split(r"^### ", page, flags=re.MULTILINE)
    for name, field in MonitorConfig.model_fields.items():
        model = hook._model_of(field.annotation)
        if model is None:
            assert f"| `{name}` |" in sections[1], name  # the top-level table comes first
            continue
        heading = f"`[[{name}]]`" if name in hook.ARRAYS else f"`[{name}]`"
        (section,) = [s for s in sections if s.startswith(heading)]
        for sub, subfield in model.model_fields.items():
            assert f"| `{sub}` |" in section, f"{heading} lacks {sub}"
            inner = hook._model_of(subfield.annotation)
            if inner is not None and name not in hook.ARRAYS:  # [service.http] and the like
                (table,) = [s for s in sections if s.startswith(f"`[{name}.{sub}]`")]
                for leaf in inner.model_fields:
                    assert f"| `{leaf}` |" in table, f"[{name}.{sub}] lacks {leaf}"
        assert issubclass(model, BaseModel)
    # the old flat keys of [service], each with the key to write instead
    assert hook.MOVED_MARKER not in page
    assert "| `http_host` | `[service.http] host` |" in page
    # the notes written above fields in the code (the `#:` comments) are carried over
    assert "DuckDB's memory ceiling" in page
    assert "Environment: `VFR_KAFKA_BOOTSTRAP`." in page


def test_the_site_home_says_what_the_readme_says() -> None:
    """docs/index.md repeats the README's what-and-why (the site cannot include a file
    outside docs/ with working links); the two must not drift apart."""

    def what_and_why(text: str) -> str:
        body = text[text.index("vfr-monitor watches") :]
        body = body[: body.index("\n## ", body.index("## Why a verdict needs a reliability"))]
        return body.replace(
            "[docs/method.md](docs/method.md#references)", "[the method](method.md#references)"
        )

    assert what_and_why(_read("index.md")) == what_and_why(
        (ROOT / "README.md").read_text(encoding="utf-8")
    )
