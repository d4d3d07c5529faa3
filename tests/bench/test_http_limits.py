"""The slow- and hostile-client bench (monitor.bench.http_limits), run small against the real
API server on loopback: what it reports must be what the server did.

Not run here: ``--attack page`` (a real service fed 2,000 records and four browsers waiting
for the rendered report: tens of seconds on a shared machine); the report's own route is
tested by tests/service/test_page_renderer.py.
"""

from __future__ import annotations

import re

from monitor.bench import http_limits
from monitor.bench.http_limits import _get, _View, main, summary, trickle
from monitor.service.exporter import Exporter
from monitor.service.http_server import serve
from monitor.service.http_settings import HttpLimits


def test_summary_gives_median_max_and_share_answered():
    probes = {
        "/healthz": [(200, 0.1), (200, 0.3), (0, 2.0)],
        "/readyz": [],
        "/metrics": [(503, 0.01)],
    }
    assert summary(probes) == (
        "/healthz: median 0.300 s, max 2.000 s, 2/3 answered 200; /readyz: no answer; "
        "/metrics: median 0.010 s, max 0.010 s, 0/1 answered 200"
    )


def test_half_open_connections_and_a_trickled_header_are_cut_at_the_header_deadline(capsys):
    assert main(["--half-open", "10", "--header-timeout", "0.5", "--trickle-max", "10"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"threads with 10 half-open connections: before (\d+), while open (\d+), "
                  r"4 s later (\d+); connections closed by the server: (\d+)", out)  # fmt: skip
    assert m, out
    before, during, after, closed = map(int, m.groups())
    assert closed == 10  # every one cut by the server after its 0.5 s
    # no thread per connection (that would be 10 more); other tests' threads may come and go
    assert during <= before + 3 and after <= before + 3
    t = re.search(r"trickled header: disconnected after ([\d.]+) s", out)
    assert t, out
    assert 0.4 <= float(t.group(1)) < 5


def test_a_trickle_still_connected_at_the_bench_limit_is_reported_as_none():
    server = serve(Exporter("bench"), _View(), port=0, limits=HttpLimits(header_timeout_s=30))
    try:
        assert trickle(server.port, max_s=1.0) is None
        assert _get(server.port, "/healthz")[0] == 200
        assert _get(server.port, "/nope")[0] == 404
    finally:
        server.close()
    assert _get(server.port, "/healthz", timeout=2)[0] == 0  # closed: no answer


def test_body_tricklers_leave_the_probes_answered():
    got = http_limits.attack_bodies(clients=2, seconds=1.0)
    assert got.startswith("2 body tricklers for 1 s: /healthz: median ")
    for path in ("/healthz", "/readyz", "/metrics"):
        pattern = re.escape(path) + r": median [\d.]+ s, max [\d.]+ s, (\d+)/(\d+) answered"
        m = re.search(pattern, got)
        assert m and m.group(1) == m.group(2) != "0", got


def test_wrong_passwords_are_refused_and_the_right_one_still_scrapes():
    got = http_limits.attack_auth(clients=2, seconds=1.0, cost=4)
    answers = re.search(r"answers \{([^}]*)\}", got)
    assert answers, got
    statuses = {int(s) for s, _ in re.findall(r"(\d+): (\d+)", answers.group(1))}
    assert statuses and statuses <= {401, 429}, got  # never a 200 for a wrong password
    m = re.search(r"/metrics: median [\d.]+ s, max [\d.]+ s, (\d+)/(\d+) answered 200", got)
    assert m and m.group(1) == m.group(2) != "0", got
