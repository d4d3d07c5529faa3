"""DeadLetterWatch: one reason holding most of the recent messages is reported once, with
the count and the setting that would admit the records (issue 22, finding 6)."""

from __future__ import annotations

import pytest

from monitor.stream.dead_letter_watch import (
    NO_SETTING,
    DeadLetterWatch,
    IngestTally,
    admitting_setting,
)


def test_a_majority_reason_is_reported_once_with_its_count_and_setting() -> None:
    watch = DeadLetterWatch(window=1000)
    assert watch.observe(500, {"unknown_model": 500}) == []  # fewer than 1,000 seen yet
    (d,) = watch.observe(500, {"unknown_model": 400, "invalid_json": 5})
    assert (d.reason, d.count, d.of) == ("unknown_model", 900, 1000)
    assert "[[models]]" in d.setting and "900 of the last 1000" in d.message()
    assert watch.dominant == {"unknown_model"}
    for _ in range(5):  # still dominant: not reported again
        assert watch.observe(500, {"unknown_model": 500}) == []
    assert watch.dominant == {"unknown_model"}


def test_half_is_not_a_majority_and_old_batches_leave_the_window() -> None:
    watch = DeadLetterWatch(window=1000)
    assert watch.observe(1000, {"out_of_range:event_time": 500}) == []
    assert watch.dominant == frozenset()
    # 1,000 clean messages push the rejected ones out: nothing is dominant
    watch.observe(1000, {})
    assert watch.observe(1000, {"out_of_range:event_time": 501}) != []
    watch.observe(1000, {})
    assert watch.dominant == frozenset()


def test_two_reasons_in_turn_are_each_reported_once() -> None:
    """The README's Kafka recipe: unknown_model for months, then out_of_range:event_time
    for the records past today (both come first by time order in the stream)."""
    watch = DeadLetterWatch(window=1000)
    got = []
    for _ in range(10):
        got += watch.observe(700, {"unknown_model": 700})
    for _ in range(10):
        got += watch.observe(700, {"out_of_range:event_time": 700})
    assert [d.reason for d in got] == ["unknown_model", "out_of_range:event_time"]
    assert "event_time_bounds" in got[1].setting


def test_a_batch_larger_than_the_window_is_judged_on_its_own() -> None:
    watch = DeadLetterWatch(window=1000)
    (d,) = watch.observe(5000, {"oversized": 2600})
    assert (d.count, d.of) == (2600, 5000) and "max_payload_bytes" in d.setting


def test_settings_by_reason_and_prefix() -> None:
    assert "groups" in admitting_setting("unknown_code:sex")
    assert "max_models" in admitting_setting("too_many_models")
    assert admitting_setting("invalid_json") == NO_SETTING
    assert admitting_setting("missing:score") == NO_SETTING
    with pytest.raises(ValueError):
        DeadLetterWatch(window=0)


def test_tally_summary() -> None:
    t = IngestTally()
    assert t.summary() == "stored 0, duplicates 0, dead-lettered 0"
    t.add(10, 0, {"unknown_model": 7})
    t.add(0, 2, {"unknown_model": 1, "out_of_range:event_time": 3})
    assert t.summary() == (
        "stored 10, duplicates 2, dead-lettered 11 (unknown_model 8, out_of_range:event_time 3)"
    )
