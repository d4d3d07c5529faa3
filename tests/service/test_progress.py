"""The progress line of `vfr-monitor run` (monitor.service.progress): its words, its rate,
and the thread that prints it (a real thread, a short interval, a hand-advanced clock for
the rate)."""

from __future__ import annotations

import io
import time

from monitor.service.progress import ProgressReporter, progress_line
from monitor.stream.dead_letter_watch import IngestTally

PREFIX = "vfr-monitor: progress: "


def _tally(stored=0, duplicates=0, **rejected) -> IngestTally:
    t = IngestTally()
    t.add(accepted=stored, duplicates=duplicates, rejected=rejected)
    return t


def test_the_line_counts_every_outcome():
    t = _tally(118_000, 0, unknown_model=2_000)
    assert progress_line(t, {0: 4_000, 1: 500}, 2_340.4) == (
        PREFIX + "120,000 messages (2,340/s), stored 118,000, dead letters 2,000 "
        "(unknown_model 2,000), lag 4,500"
    )
    # duplicates are said only when there are some; no rate on the first line
    t = _tally(10, 3)
    assert progress_line(t, {0: 0}, None) == (
        PREFIX + "13 messages, stored 10, duplicates 3, dead letters 0, lag 0"
    )


def test_no_lag_is_a_dash_and_only_the_three_commonest_reasons_are_named():
    t = _tally(1, 0, a=5, b=4, c=3, d=2, e=1)
    line = progress_line(t, None, 1.0)
    assert line.endswith("dead letters 15 (a 5, b 4, c 3, 2 other reasons), lag -")
    assert progress_line(t, {}, 1.0).endswith("lag -")  # a source without partitions yet


def test_the_rate_is_the_messages_since_the_previous_line_over_the_time_between():
    now = [100.0]
    tally = _tally()
    rep = ProgressReporter(tally, lambda: {0: 7}, 5.0, clock=lambda: now[0])
    assert rep.line() == PREFIX + "0 messages, stored 0, dead letters 0, lag 7"
    tally.add(accepted=40, duplicates=5, rejected={"invalid_json": 5})
    now[0] += 2.0
    assert "50 messages (25/s)" in rep.line()
    assert "50 messages, " in rep.line()  # no time passed: no rate
    tally.add(accepted=3, duplicates=0, rejected={})
    now[0] += 0.5
    assert "53 messages (6/s)" in rep.line()


def test_the_reporter_prints_every_interval_until_stopped_and_survives_a_failing_lag():
    tally = _tally(5)
    out = io.StringIO()
    calls = [0]

    def lag() -> dict[int, int]:
        calls[0] += 1
        if calls[0] == 2:  # the first printed line: a lag read that fails
            raise RuntimeError("source closed")
        return {0: 1}

    rep = ProgressReporter(tally, lag, 0.05, out=out)
    rep.start()
    rep.start()  # once only
    deadline = time.monotonic() + 10
    while out.getvalue().count("\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    rep.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2, lines
    assert all(line.startswith(PREFIX + "5 messages") for line in lines)
    assert calls[0] >= 3  # the failed read did not end the thread
    printed = len(lines)
    time.sleep(0.2)
    assert len(out.getvalue().splitlines()) == printed  # stopped


def test_an_interval_of_zero_prints_nothing():
    out = io.StringIO()
    rep = ProgressReporter(_tally(1), lambda: {}, 0, out=out)
    rep.start()
    time.sleep(0.1)
    rep.stop()
    assert out.getvalue() == "" and rep._thread is None
