"""Tests mirror the tree: each production module has its test module, or tests/README.md
names, under "Modules tested elsewhere", the tests that cover it.

Why a test: the rule was written down (tests/README.md) and half the modules had drifted
from it unnoticed; a module without a mirror file is fine when its coverage is said, and
wrong when nobody can tell where it is tested. So, for every module under ``monitor/``,
``consumers/`` and ``batch_axes/`` (``__init__.py`` aside): its mirror file exists, or an
entry names it with test files that exist, never both (the entry is then stale), and no
entry names a module that is gone.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("monitor", "consumers", "batch_axes")
SECTION = "## Modules tested elsewhere"
ENTRY = re.compile(r"^\* `([\w.]+)`:(.*)$")
TEST_FILE = re.compile(r"\btests/[\w/]+\.py\b")


def production_modules(root: Path) -> list[str]:
    """Module paths relative to ``root`` ("monitor/core/locks.py"), ``__init__.py`` aside."""
    return sorted(
        p.relative_to(root).as_posix()
        for pkg in PACKAGES
        for p in (root / pkg).rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    )


def mirror_file(module: str) -> str:
    """``monitor/<pkg>/<m>.py`` -> ``tests/<pkg>/test_<m>.py`` (``monitor/data/**`` ->
    ``tests/datasets/``: ``tests/data/`` holds data files); ``consumers`` and ``batch_axes``
    keep their name under ``tests/``."""
    *dirs, name = module.split("/")
    if dirs[0] == "monitor":
        dirs = dirs[1:]
        if dirs[:1] == ["data"]:
            dirs = ["datasets"]
    return "/".join(["tests", *dirs, f"test_{name}"])


def entries(readme: str) -> tuple[dict[str, list[str]], list[str]]:
    """The section's entries (dotted module -> test files named) and its malformed lines."""
    if SECTION not in readme:
        return {}, [f"tests/README.md has no {SECTION!r} section"]
    body = readme.split(SECTION, 1)[1]
    body = re.split(r"^## ", body, maxsplit=1, flags=re.M)[0]
    found: dict[str, list[str]] = {}
    errors: list[str] = []
    current: str | None = None
    for line in body.splitlines():
        m = ENTRY.match(line)
        if m:
            current = m.group(1)
            if current in found:
                errors.append(f"{current}: two entries in {SECTION!r}; keep one")
            found[current] = TEST_FILE.findall(m.group(2))
        elif line.startswith("* "):
            errors.append(f"not an entry (* `dotted.module`: tests/...): {line!r}")
            current = None
        elif line.startswith("  ") and current is not None:
            found[current] += TEST_FILE.findall(line)
        elif line.strip():
            current = None
    return found, errors


def problems(root: Path, readme: str) -> list[str]:
    modules = production_modules(root)
    dotted = {m[:-3].replace("/", "."): m for m in modules}
    listed, out = entries(readme)
    for name, tests in sorted(listed.items()):
        if name not in dotted:
            out.append(f"{name}: listed in tests/README.md but no such module; delete its entry")
            continue
        mirror = mirror_file(dotted[name])
        if (root / mirror).is_file():
            out.append(f"{name}: has its mirror file {mirror}; delete its (stale) entry in "
                       f"tests/README.md {SECTION!r}")  # fmt: skip
        if not tests:
            out.append(f"{name}: its entry in tests/README.md names no test file")
        for t in tests:
            if not (root / t).is_file():
                out.append(f"{name}: its entry names {t}, which does not exist")
    for name, module in sorted(dotted.items()):
        mirror = mirror_file(module)
        if not (root / mirror).is_file() and name not in listed:
            out.append(
                f"{name} ({module}) has no test module: write {mirror}, or add an entry "
                f"'* `{name}`: tests/<file>.py (how it covers it)' to tests/README.md "
                f"{SECTION!r}"
            )
    return out


def test_every_module_has_its_mirror_file_or_an_entry():
    found = problems(ROOT, (ROOT / "tests" / "README.md").read_text(encoding="utf-8"))
    assert not found, "\n".join(found)


def test_the_mirror_of_each_kind_of_module():
    assert mirror_file("monitor/core/locks.py") == "tests/core/test_locks.py"
    assert mirror_file("monitor/cli.py") == "tests/test_cli.py"
    assert mirror_file("monitor/data/cohort.py") == "tests/datasets/test_cohort.py"
    assert mirror_file("monitor/data/datasets/texas100x.py") == "tests/datasets/test_texas100x.py"
    assert mirror_file("consumers/kafka_source.py") == "tests/consumers/test_kafka_source.py"
    assert mirror_file("batch_axes/axis2.py") == "tests/batch_axes/test_axis2.py"


def test_the_check_finds_each_kind_of_problem(tmp_path):
    """On a made-up tree: what each mistake is told."""
    for path in ("monitor/__init__.py", "monitor/core/a.py", "monitor/core/b.py",
                 "monitor/core/c.py", "consumers/d.py", "batch_axes/e.py",
                 "tests/core/test_a.py", "tests/core/test_other.py",
                 "monitor/core/__pycache__/x.py"):  # fmt: skip
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    readme = f"""# Tests

{SECTION}

Intro text that is no entry.

* `monitor.core.a`: tests/core/test_other.py (stale: a has its mirror file)
* `monitor.core.b`: tests/core/test_other.py (first line)
  and tests/core/test_gone.py (a file that does not exist)
* `consumers.d`: no test file named
* `monitor.core.z`: tests/core/test_other.py (no such module)
* `batch_axes.e`: tests/core/test_other.py
* `batch_axes.e`: tests/core/test_other.py
* batch_axes.e without backticks

## Next section

* `monitor.core.c`: tests/core/test_other.py (outside the section: not an entry)
"""
    assert problems(tmp_path, readme) == [
        "batch_axes.e: two entries in '## Modules tested elsewhere'; keep one",
        "not an entry (* `dotted.module`: tests/...): '* batch_axes.e without backticks'",
        "consumers.d: its entry in tests/README.md names no test file",
        "monitor.core.a: has its mirror file tests/core/test_a.py; delete its (stale) entry "
        "in tests/README.md '## Modules tested elsewhere'",
        "monitor.core.b: its entry names tests/core/test_gone.py, which does not exist",
        "monitor.core.z: listed in tests/README.md but no such module; delete its entry",
        "monitor.core.c (monitor/core/c.py) has no test module: write tests/core/test_c.py, "
        "or add an entry '* `monitor.core.c`: tests/<file>.py (how it covers it)' to "
        "tests/README.md '## Modules tested elsewhere'",
    ]
    assert problems(tmp_path, "# Tests\n")[0] == (
        "tests/README.md has no '## Modules tested elsewhere' section"
    )
