"""docs/method.md against the code: every section cited exists, the defaults table is true.

Product code cites the method by section number ("docs/method.md section N"); a citation
of a section the page does not have sends a reader nowhere, and a default the page
states that the code does not use misleads them. Both are checked here, not by review.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Any

import pytest

from monitor.config import MonitorConfig

ROOT = Path(__file__).resolve().parents[1]
METHOD = ROOT / "docs" / "method.md"
CITING_DIRS = ("monitor", "batch_axes", "consumers", "deploy")

#: "SPEC section 3" (the old name) or "docs/method.md section 3"
#: (across a line break too: a docstring may wrap between the words)
CITATION = re.compile(r"(?:SPEC|docs/method\.md)\s+sections?\s+(\d+)")
HEADING = re.compile(r"^## (\d+)\. ", re.MULTILINE)
#: a defaults row: | quantity | `field` | `literal` |
DEFAULT_ROW = re.compile(r"^\|[^|]*\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|\s*$", re.MULTILINE)

#: defaults the page must state (the values a reader is most likely to look up)
REQUIRED_DEFAULTS = {
    "axis1.K",
    "axis1.N",
    "axis1.tau_vfr",
    "axis1.min_group_support",
    "monitor.config.SMALL_CELL_RECORDS",
    "axis2.R",
    "axis2.cv_cutoff",
    "axis2.n_field",
    "axis3.folds",
    "axis3.kappa_cutoff",
    "confirm_windows",
    "equilense.threshold",
    *(f"metrics.{m}.threshold" for m in ("DI", "SPD", "EOPP", "EOD", "TI", "PP", "CAL")),
}


def method_text() -> str:
    return METHOD.read_text(encoding="utf-8")


def section_numbers(text: str) -> list[int]:
    return [int(n) for n in HEADING.findall(text)]


def defaults_section(text: str) -> str:
    start = re.search(r"^## 9\. .*$", text, re.MULTILINE)
    assert start, "docs/method.md has no '## 9.' (defaults) section"
    end = HEADING.search(text, start.end())
    return text[start.end() : end.start() if end else len(text)]


def citations() -> list[tuple[str, int, int]]:
    """(file, line, section) of every section citation in the product tree."""
    found = []
    for top in CITING_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:  # binary files (the shipped dataset zip)
                continue
            for m in CITATION.finditer(text):
                lineno = text.count("\n", 0, m.start()) + 1
                found.append((str(path.relative_to(ROOT)), lineno, int(m.group(1))))
    return found


def resolve(path: str) -> Any:
    """A dotted path: a module constant (``monitor.x.NAME``) or an attribute path on
    ``MonitorConfig()``, where a list of named items (``metrics``) is indexed by name."""
    if path.startswith("monitor."):
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)
    obj: Any = MonitorConfig()
    for part in path.split("."):
        if isinstance(obj, list):
            matches = [x for x in obj if getattr(x, "name", None) == part]
            assert matches, f"{path}: no item named {part!r}"
            obj = matches[0]
        else:
            obj = getattr(obj, part)
    return obj


def test_headings_are_the_numbered_sections_once_each():
    numbers = section_numbers(method_text())
    assert numbers, "docs/method.md has no '## N.' headings"
    assert len(numbers) == len(set(numbers)), f"a section number is used twice: {numbers}"
    assert numbers == sorted(numbers)


def test_every_cited_section_exists():
    sections = set(section_numbers(method_text()))
    cited = citations()
    assert cited, "no section citation found: has the citation wording changed?"
    missing = [f"{f}:{line} cites section {n}" for f, line, n in cited if n not in sections]
    assert not missing, "sections docs/method.md does not have:\n" + "\n".join(missing)


def test_the_defaults_table_states_the_required_defaults():
    listed = {field for field, _ in DEFAULT_ROW.findall(defaults_section(method_text()))}
    assert listed >= REQUIRED_DEFAULTS, f"missing from the table: {REQUIRED_DEFAULTS - listed}"


@pytest.mark.parametrize("field, literal", DEFAULT_ROW.findall(defaults_section(method_text())))
def test_a_stated_default_is_the_code_default(field: str, literal: str):
    stated = ast.literal_eval(literal)
    actual = resolve(field)
    if isinstance(stated, tuple):
        actual = tuple(actual)
    assert actual == stated, f"docs/method.md says {field} = {stated!r}, the code has {actual!r}"
