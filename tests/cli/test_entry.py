"""The entry point: start-up imports, the whole parser against the lazy one, the console
script, and what each kind of failure prints and exits with.

Why the import checks run in a fresh interpreter: ``sys.modules`` of the test process
already holds every module some other test imported, so only a new process shows what
``vfr-monitor --help`` itself loads.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import monitor.cli
from monitor.cli import entry
from monitor.cli.benches import BENCHES
from monitor.cli.commands import COMMANDS
from monitor.config import ConfigError, StartupError
from monitor.config.errors import MissingInputError, UsageError, UserError

ROOT = Path(__file__).resolve().parents[2]
WITHHELD = "details withheld"
COMMAND_MODULES = {info.module for info in COMMANDS.values()}
BENCH_MODULES = {info.module for info in BENCHES.values()} | {"monitor.cli.benches.demo_runs"}

#: Runs ``main(argv)`` in this fresh interpreter and prints the modules then loaded.
_PROBE = """
import json, sys
from monitor.cli import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _loaded_by(*argv: str) -> tuple[int, set[str]]:
    """Exit status and modules loaded by ``vfr-monitor ARGV`` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(argv))],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return found["code"], set(found["modules"])


def _heavy(modules: set[str]) -> set[str]:
    """What a ``--help`` must not load: the project beyond its command line, and the big
    libraries (pydantic for the configuration, pandas, numpy)."""
    return {
        m for m in modules
        if (m.split(".")[0] in {"monitor", "consumers", "batch_axes"}
            and m != "monitor" and not m.startswith("monitor.cli"))
        or m.split(".")[0] in {"pydantic", "pandas", "numpy", "duckdb"}
    }  # fmt: skip


def test_top_level_help_imports_no_command_module() -> None:
    code, modules = _loaded_by("--help")
    assert code == 0
    assert not modules & (COMMAND_MODULES | BENCH_MODULES)
    assert not _heavy(modules)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_help_imports_that_command_only(name: str) -> None:
    code, modules = _loaded_by(name, "--help")
    assert code == 0
    assert modules & COMMAND_MODULES == {COMMANDS[name].module}
    assert not modules & BENCH_MODULES  # `bench --help` lists them from its table
    assert not _heavy(modules)


@pytest.mark.parametrize("what", sorted(BENCHES))
def test_a_benchmarks_help_imports_that_benchmark_only(what: str) -> None:
    code, modules = _loaded_by("bench", what, "--help")
    assert code == 0
    assert modules & COMMAND_MODULES == {COMMANDS["bench"].module}
    assert modules & BENCH_MODULES == {BENCHES[what].module}
    assert not _heavy(modules)


def _help(parser: argparse.ArgumentParser, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as info:
        parser.parse_args([*argv, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def test_the_lazy_parser_answers_as_the_whole_one(capsys) -> None:
    """Every command's and benchmark's help, and a usage error at each level, are the same
    from the parser ``main`` uses (filled in when chosen) and from the whole tree."""
    paths = [[], *([n] for n in COMMANDS), *(["bench", w] for w in BENCHES)]
    for argv in paths:
        lazy = _help(entry.build_parser(lazy=True), argv, capsys)
        assert lazy == _help(entry.build_parser(), argv, capsys), argv
        assert lazy.startswith(f"usage: {' '.join(['vfr-monitor', *argv])} ")
    for argv in (["nosuch"], ["bench", "nosuch"], ["bench", "axis1", "--minutes", "3"],
                 ["audit", "--input", "x", "--out", "y", "--zz"]):  # fmt: skip
        errors = []
        for parser in (entry.build_parser(lazy=True), entry.build_parser()):
            with pytest.raises(SystemExit) as info:
                parser.parse_args(argv)
            errors.append((info.value.code, capsys.readouterr().err))
        assert errors[0] == errors[1] and errors[0][0] == 2, argv


def test_python_dash_m_and_the_console_script_are_main() -> None:
    """``python -m monitor.cli`` runs (``__main__.py``), and pyproject's console script
    names :func:`main` as importable from the package."""
    out = subprocess.run([sys.executable, "-m", "monitor.cli", "--version"], cwd=ROOT,
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == f"vfr-monitor {monitor.__version__}"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, attr = scripts["vfr-monitor"].partition(":")
    assert getattr(importlib.import_module(module), attr) is entry.main is monitor.cli.main


@pytest.mark.parametrize(
    ("exc", "status", "printed"),
    [
        (ConfigError("x.y", "bad"), 2, "vfr-monitor: invalid configuration: field 'x.y': bad"),
        (StartupError("no broker"), 3, "vfr-monitor: cannot start: no broker"),
        (UsageError("--rate", "bad"), 2, "vfr-monitor: --rate: bad"),
        (ValueError("MRN 123"), 1, f"vfr-monitor: error: ValueError ({WITHHELD}"),
        (KeyboardInterrupt(), 130, ""),
    ],
)
def test_exit_status_and_line_of_each_failure(monkeypatch, capsys, exc, status, printed) -> None:
    """A command's failure as ``main`` answers it; a builtin's message (which may quote a
    record) never printed."""
    import monitor.cli.commands.synth as synth

    def fail(args):
        raise exc

    monkeypatch.setattr(synth, "run", fail)
    assert entry.main(["synth", "--records", "1", "--out", "x.csv"]) == status
    err = capsys.readouterr().err
    assert err.startswith(printed) and "MRN" not in err


def test_user_errors_are_the_projects_own_types_and_builtins_stay_withheld() -> None:
    """ConfigError and the usage errors share one base; a builtin's message is withheld
    even when it looks harmless (the rule is by type, not by content)."""
    for exc in (ConfigError("x", "y"), UsageError("--rate", "bad"), MissingInputError("f", "g")):
        assert isinstance(exc, UserError) and isinstance(exc, ValueError)
        assert entry.error_line(exc).endswith(str(exc))
    assert isinstance(MissingInputError("f", "g"), FileNotFoundError)
    assert WITHHELD in entry.error_line(ValueError("rate must be a positive number"))
