"""What the end-to-end tests that run servers share: free loopback ports, HTTP reads,
polling with a deadline, the alert rules with their durations shortened, and every
dashboard panel's query."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
#: How long one phase of a live scenario (a server starting, an alert firing) may take.
PHASE_TIMEOUT_S = 120.0


def free_ports(k: int) -> list[int]:
    """``k`` distinct ports free right now (held together, so never the same one twice)."""
    socks = [socket.socket() for _ in range(k)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class PortTakenError(Exception):
    """A server could not bind its port (taken between choosing and binding it)."""


def get_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def get_text(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(what: str, check, timeout: float = PHASE_TIMEOUT_S, every: float = 0.5):
    """Poll ``check()`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            out = check()
            if out:
                return out
        except (OSError, ValueError, KeyError) as exc:  # server not up yet, etc.
            last_error = exc
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last_error})")


def _count_duration_keys(node, keys: tuple[str, ...]) -> int:
    if isinstance(node, dict):
        return sum(k in keys for k in node) + sum(
            _count_duration_keys(v, keys) for v in node.values()
        )
    if isinstance(node, list):
        return sum(_count_duration_keys(v, keys) for v in node)
    return 0


def _strip_keys(node, keys: tuple[str, ...]):
    if isinstance(node, dict):
        return {k: _strip_keys(v, keys) for k, v in node.items() if k not in keys}
    if isinstance(node, list):
        return [_strip_keys(v, keys) for v in node]
    return node


def shorten_durations(text: str, durations: dict[str, str]) -> tuple[str, int]:
    """Replace the value of every ``key: <duration>`` line; assert nothing else changed."""
    keys = tuple(durations)
    pattern = re.compile(r"^(\s*(?:- )?)(" + "|".join(keys) + r"):[ \t]*\S+[ \t]*$", re.M)
    out, n = pattern.subn(lambda m: f"{m.group(1)}{m.group(2)}: {durations[m.group(2)]}", text)
    before, after = yaml.safe_load(text), yaml.safe_load(out)
    assert n == _count_duration_keys(before, keys), (n, keys)
    assert _strip_keys(before, keys) == _strip_keys(after, keys)
    return out, n


def panel_queries() -> list[tuple[str, str, str]]:
    out = []

    def walk(panels, file):
        for p in panels:
            walk(p.get("panels", []), file)
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((file, p.get("title", "?"), t["expr"]))

    for f in sorted(DASHBOARDS.glob("*.json")):
        walk(json.loads(f.read_text()).get("panels", []), f.name)
    return out
