"""The method's constants live in the core, and the configuration only re-exports them."""

from __future__ import annotations

import ast
from pathlib import Path

import monitor.config as config
from monitor.core import method

CORE = Path(method.__file__).parent


def test_the_configuration_re_exports_the_core_constants_unchanged():
    for name in ("SMALL_CELL_RECORDS", "MIN_GROUP_SUPPORT", "INTERSECTION_CODE_SEP",
                 "INTERSECTION_LABEL_SEP", "DEFAULT_METRIC_RULES", "MetricRule"):  # fmt: skip
        assert getattr(config, name) is getattr(method, name)
    assert method.SMALL_CELL_RECORDS == 11 and method.MIN_GROUP_SUPPORT >= 11


def test_no_core_module_imports_the_configuration():
    """import-linter's layers say so too; this names the module and line if one does."""
    offenders = []
    for path in sorted(CORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [f"{path.name}:{node.lineno}" for n in names
                          if n == "monitor.config" or n.startswith("monitor.config.")]  # fmt: skip
    assert offenders == []
