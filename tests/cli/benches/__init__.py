"""Each benchmark's command-line module: its options reach the benchmark it runs. The
benchmark's function is replaced by a recorder, so these run in milliseconds; the
benchmarks themselves run in tests/bench/test_bench_cli.py."""

from __future__ import annotations

import argparse
from typing import Any

from monitor.cli import build_parser


def recorder(monkeypatch: Any, target: str, returns: Any = None) -> list[dict[str, Any]]:
    """Replace the function at the dotted ``target`` by one that records each call (its
    positional arguments under ``"args"``, its keywords by name) and returns ``returns``
    (default: a dict naming the target)."""
    calls: list[dict[str, Any]] = []

    def fake(*args: Any, **kwargs: Any) -> Any:
        calls.append({"args": args, **kwargs})
        return {"ran": target} if returns is None else returns

    monkeypatch.setattr(target, fake)
    return calls


def bench_args(*argv: str) -> argparse.Namespace:
    """``vfr-monitor bench ARGV`` as parsed."""
    return build_parser().parse_args(["bench", *argv])
