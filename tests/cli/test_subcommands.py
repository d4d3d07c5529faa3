"""Subcommands registered when chosen, on a made-up table of two modules written here: a
module is imported when argparse reaches its name and not before, registered once, and the
whole tree can still be built and walked."""

from __future__ import annotations

import argparse
import sys

import pytest

from monitor.cli.subcommands import CommandInfo, LazySubcommands, add_commands, register_all

_MODULE = """
import argparse
REGISTERED = []

def register(parser: argparse.ArgumentParser) -> None:
    REGISTERED.append(parser.prog)
    parser.add_argument("--{flag}", type=int, default=1, help="the {flag}")

def run(args) -> int:
    return args.{flag}
"""


@pytest.fixture
def table(tmp_path, monkeypatch) -> dict[str, CommandInfo]:
    """Two commands in modules of a package made for the test (and forgotten after it)."""
    pkg = tmp_path / "made_up_commands"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, flag in (("alpha", "apples"), ("beta", "bananas")):
        (pkg / f"{name}.py").write_text(_MODULE.format(flag=flag))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield {
        "alpha": CommandInfo("made_up_commands.alpha", "the first"),
        "beta": CommandInfo("made_up_commands.beta", "the second"),
    }
    for name in [m for m in sys.modules if m.startswith("made_up_commands")]:
        del sys.modules[name]


def _parser(table: dict[str, CommandInfo], **kwargs) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tool")
    add_commands(p, table, dest="command", required=True, **kwargs)
    return p


def test_only_the_chosen_module_is_imported(table, capsys) -> None:
    p = _parser(table)
    with pytest.raises(SystemExit):
        p.parse_args(["--help"])
    listing = capsys.readouterr().out
    assert "alpha       the first" in listing and "beta        the second" in listing
    assert "made_up_commands.alpha" not in sys.modules
    args = p.parse_args(["beta", "--bananas", "7"])
    assert (args.command, args.bananas) == ("beta", 7)
    assert "made_up_commands.beta" in sys.modules
    assert "made_up_commands.alpha" not in sys.modules


def test_an_unknown_name_is_refused_without_importing_anything(table, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        _parser(table).parse_args(["gamma"])
    assert info.value.code == 2
    assert "invalid choice: 'gamma' (choose from 'alpha', 'beta')" in capsys.readouterr().err
    assert not [m for m in sys.modules if m.startswith("made_up_commands.")]


def test_a_command_is_registered_once_however_often_it_is_parsed(table) -> None:
    """A second parse reuses the registered parser (argparse refuses an option added
    twice, so registering again would fail)."""
    p = _parser(table)
    assert p.parse_args(["alpha", "--apples", "2"]).apples == 2
    assert p.parse_args(["alpha"]).apples == 1
    assert sys.modules["made_up_commands.alpha"].REGISTERED == ["tool alpha"]


def test_register_all_builds_the_whole_tree(table) -> None:
    p = register_all(_parser(table, summary_as_description=True))
    (action,) = [a for a in p._actions if isinstance(a, LazySubcommands)]
    for name, parser in action.choices.items():
        assert parser.description == table[name].summary
        flag = "apples" if name == "alpha" else "bananas"
        assert [a.dest for a in parser._actions] == ["help", flag]
    register_all(p)  # again: nothing registered twice
    assert sys.modules["made_up_commands.beta"].REGISTERED == ["tool beta"]
