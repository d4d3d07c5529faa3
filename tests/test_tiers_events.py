"""Tiers from failed axes, and debounced verdict-flip / tier-change events."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.events import CellTracker, Debounced, tier_direction
from monitor.tiers import (
    NOT_APPLICABLE,
    Tier,
    axis1_fails,
    axis2_fails,
    axis3_fails,
    reliability_tier,
)


@pytest.mark.parametrize(
    ("a1", "a2", "a3", "tier"),
    [
        (False, False, False, Tier.PRACTICAL_STABILITY),
        (True, False, False, Tier.CAUTION_REQUIRED),
        (False, True, False, Tier.CAUTION_REQUIRED),
        (False, False, True, Tier.CAUTION_REQUIRED),
        (True, True, False, Tier.HIGH_VARIANCE),
        (True, True, True, Tier.CATASTROPHIC_INSTABILITY),
        (True, None, True, Tier.PENDING),
        (None, False, False, Tier.PENDING),
        (True, True, NOT_APPLICABLE, Tier.HIGH_VARIANCE),
        (False, False, NOT_APPLICABLE, Tier.PRACTICAL_STABILITY),
    ],
)
def test_tier_table(a1, a2, a3, tier):
    r = reliability_tier(a1, a2, a3)
    assert r.tier is tier
    assert r.partial is (a3 == NOT_APPLICABLE)


def test_axis_rules_follow_spec():
    assert axis1_fails(0.10, 0.10) is False and axis1_fails(0.1001, 0.10) is True
    assert axis1_fails(None, 0.10) is None
    assert axis2_fails(50_000, 50_000) is False and axis2_fails(math.inf, 50_000) is True
    assert axis3_fails(0.40) is False and axis3_fails(0.399) is True
    assert axis3_fails(None) is None and axis3_fails(0.9, applicable=False) == NOT_APPLICABLE
    with pytest.raises(ValueError):
        reliability_tier(NOT_APPLICABLE, NOT_APPLICABLE, NOT_APPLICABLE)


def test_debounce_needs_persistence():
    d = Debounced(confirm_windows=2)
    seen = [d.update(v) for v in ["pass", "fail", "pass", "fail", "fail", "fail", "pass"]]
    raw = [r for r, _ in seen]
    confirmed = [c for _, c in seen]
    assert raw == [
        None,
        ("pass", "fail"),
        ("fail", "pass"),
        ("pass", "fail"),
        None,
        None,
        ("fail", "pass"),
    ]
    assert confirmed == [None, None, None, None, ("pass", "fail"), None, None]
    assert d.confirmed == "fail" and d.raw == "pass"


@given(st.lists(st.sampled_from("ab"), min_size=1, max_size=40), st.integers(1, 4))
def test_confirmed_value_is_a_run_of_confirm_windows(values, k):
    d = Debounced(confirm_windows=k)
    for i, v in enumerate(values):
        _, conf = d.update(v)
        if conf is not None:
            # confirmed only when the last k raw values all equal the new value
            assert i + 1 >= k and all(x == conf[1] for x in values[i + 1 - k : i + 1])
    # and every run of length >= k after the start ends in that value being confirmed
    if len(values) >= k and len(set(values[-k:])) == 1:
        assert d.confirmed == values[-1]


def test_round_trip_state():
    d = Debounced(3)
    for v in "aab":
        d.update(v)
    e = Debounced.from_dict(d.to_dict())
    assert [e.update(v) for v in "bb"] == [d.update(v) for v in "bb"]


def test_tracker_emits_raw_and_confirmed_events_with_axes():
    t = CellTracker("m", "DI", "race", confirm_windows=2)
    axes = {"vfr": 0.3}
    assert t.observe(1, "pass", Tier.PRACTICAL_STABILITY.value, axes) == []
    ev = t.observe(2, "fail", Tier.CAUTION_REQUIRED.value, axes)
    assert [(e.kind, e.confirmed) for e in ev] == [("verdict_flip", False), ("tier_change", False)]
    ev = t.observe(3, "fail", Tier.CAUTION_REQUIRED.value, axes)
    assert [(e.kind, e.confirmed, e.old, e.new) for e in ev] == [
        ("verdict_flip", True, "pass", "fail"),
        ("tier_change", True, "Practical-Stability", "Caution-Required"),
    ]
    assert ev[1].direction == "downgrade" and ev[0].direction == "pass_to_fail"
    assert ev[0].axes == axes and ev[0].evaluation == 3


def test_tier_direction():
    assert tier_direction("Caution-Required", "High-Variance") == "downgrade"
    assert tier_direction("High-Variance", "Practical-Stability") == "upgrade"
    assert tier_direction("Pending", "High-Variance") == "pending"
