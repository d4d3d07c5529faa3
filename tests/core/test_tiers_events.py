"""Tiers from failed axes, and debounced verdict-flip / tier-change events."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.core.events import CellTracker, Debounced, ReliableVerdict, tier_direction
from monitor.core.tiers import (
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


# ----------------------------------------------------------------------------- explanations
def test_events_carry_the_axes_before_the_change():
    from monitor.core.events import CellTracker

    tr = CellTracker("m", "DI", "sex", confirm_windows=2)
    axes = [{"value": v, "vfr": f} for v, f in ((0.9, 0.0), (0.86, 0.04), (0.81, 0.19),
                                                 (0.80, 0.30))]  # fmt: skip
    tiers = ["Practical-Stability", "Practical-Stability", "Caution-Required", "Caution-Required"]
    pairs = enumerate(zip(tiers, axes, strict=True))
    got = [tr.observe(i + 1, "pass", t, a) for i, (t, a) in pairs]
    (raw,) = got[2]
    assert not raw.confirmed and raw.axes_before == axes[1] and raw.axes == axes[2]
    (conf,) = got[3]
    # confirmed: before is the last evaluation that still showed the old confirmed tier
    assert conf.confirmed and conf.axes_before == axes[1] and conf.axes == axes[3]
    again = CellTracker.from_dict(tr.to_dict())  # survives a restart
    assert again.last_axes == axes[3] and again.settled_axes == tr.settled_axes


def _event(kind, old, new, before, after, metric="DI"):
    from monitor.core.events import CellEvent

    return CellEvent(kind, "m", metric, "sex", old, new, True, "x", 5, after, before)


def test_explanations_name_what_crossed_its_cutoff():
    from monitor.core.explain import Cutoffs, explain_event

    c = Cutoffs(threshold=0.8, direction=">=", tau_vfr=0.1, n_field=50_000, kappa_cutoff=0.4)
    s = explain_event(
        _event("tier_change", "Practical-Stability", "Caution-Required",
               {"value": 0.86, "vfr": 0.04}, {"value": 0.81, "vfr": 0.19}), c,
    )  # fmt: skip
    assert s == (
        "DI by sex moved from Stable to Caution: VFR rose from 0.04 to 0.19 (above 0.10) "
        "as the value fell to 0.81, 0.01 from the threshold 0.80."
    )
    s = explain_event(
        _event("tier_change", "Caution-Required", "High-Variance",
               {"value": 0.81, "vfr": 0.19, "n_star": 40_000.0, "kappa": 0.5},
               {"value": 0.81, "vfr": 0.19, "n_star": float("inf"), "kappa": 0.3}), c,
    )  # fmt: skip
    assert "N* rose from 40,000 to never reached (above 50,000)" in s
    assert "kappa fell from 0.50 to 0.30 (below 0.40)" in s and "VFR" not in s
    s = explain_event(
        _event("verdict_flip", "pass", "fail", {"value": 0.83, "vfr": 0.2},
               {"value": 0.79, "vfr": 0.31}), c,
    )  # fmt: skip
    assert s == (
        "DI by sex flipped from pass to fail: the value fell to 0.79, 0.01 from the threshold "
        "0.80; VFR 0.31, above 0.10: the new verdict is not reliable."
    )
    # a result arriving for the first time is named as such
    s = explain_event(
        _event("tier_change", "Pending", "Practical-Stability", {"value": 0.9, "vfr": 0.0},
               {"value": 0.9, "vfr": 0.0, "n_star": 2_000.0}), c,
    )  # fmt: skip
    assert "N* arrived at 2,000 (at or below 50,000)" in s
    # SPD: the threshold applies to the absolute gap
    s = explain_event(
        _event("verdict_flip", "pass", "fail", {"value": 0.08}, {"value": -0.12}, "SPD"),
        Cutoffs(threshold=0.1, direction="abs<="),
    )  # fmt: skip
    assert "0.02 from the threshold 0.10" in s
def _reliable_oracle(seq, cw, tau):
    """The verdict of the latest run of cw consecutive evaluations, each with VFR <= tau and
    the same verdict, ending at or before each step (None before the first such run)."""
    out = []
    for i in range(len(seq)):
        found = None
        for j in range(i, cw - 2, -1):
            run = seq[j - cw + 1 : j + 1]
            if len(run) == cw and all(f <= tau for _, f in run) and len({v for v, _ in run}) == 1:
                found = run[-1][0]
                break
        out.append(found)
    return out


@given(
    st.lists(
        st.tuples(st.sampled_from(["pass", "fail"]), st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.4])),
        max_size=40,
    ),
    st.integers(1, 4),
)
def test_reliable_verdict_matches_its_definition(seq, cw):
    r = ReliableVerdict(cw, 0.10)
    got, changes = [], []
    for v, f in seq:
        ch = r.update(v, f)
        got.append(r.confirmed)
        if ch:
            changes.append(ch)
    want = _reliable_oracle(seq, cw, 0.10)
    assert got == want
    # a change is reported exactly when a reliable verdict replaces a different one
    want_changes = [(a, b) for a, b in itertools.pairwise(want) if a and b and a != b]
    assert changes == want_changes


def test_reliable_verdict_ignores_flips_at_high_vfr_and_survives_a_restart():
    t = CellTracker("m", "DI", "sex", confirm_windows=2, tau_vfr=0.10)
    for i, (v, f) in enumerate([("pass", 0.0), ("pass", 0.02), ("fail", 0.3), ("fail", 0.4)]):
        t.observe(i + 1, v, Tier.PRACTICAL_STABILITY.value, {"vfr": f})
    # the flip is confirmed, but it was never reliable: the reliable verdict is still pass
    assert t.verdict.confirmed == "fail" and t.reliable.confirmed == "pass"
    u = CellTracker.from_dict(t.to_dict())
    for tr in (t, u):
        tr.observe(5, "fail", Tier.PRACTICAL_STABILITY.value, {"vfr": 0.05})
        tr.observe(6, "fail", Tier.PRACTICAL_STABILITY.value, {"vfr": math.nan})
        assert tr.reliable.confirmed == "pass"  # NaN breaks the streak
        tr.observe(7, "fail", Tier.PRACTICAL_STABILITY.value, {"vfr": 0.0})
        tr.observe(8, "fail", Tier.PRACTICAL_STABILITY.value, {"vfr": 0.1})
        assert tr.reliable.confirmed == "fail"
    # a state stored before the reliable verdict existed starts without one
    old = t.to_dict()
    del old["reliable"]
    assert CellTracker.from_dict(old).reliable.confirmed is None


# ----------------------------------------------------------------------------- not evaluable
def test_not_evaluable_cell_has_no_tier_but_a_reason():
    """Issue 24: an undefined cell's VFR (NaN) must not count as a passed Axis 1."""
    from monitor.config import MonitorConfig
    from monitor.core.tiers import Tier, cell_tier

    cfg = MonitorConfig()
    t = cell_tier(float("nan"), float("inf"), 1.0, True, cfg, "fewer than two race groups")
    assert t.tier is Tier.NOT_EVALUABLE and not t.evaluable and t.tier.level == -2
    assert (t.failed_axes, t.pending_axes, t.reason) == ((), (), "fewer than two race groups")
    assert t.to_dict()["tier_reason"] == "fewer than two race groups"
    # a kappa that is not evaluable (NaN) is not applicable to the cell, never Pending
    k = cell_tier(0.0, 1000.0, float("nan"), True, cfg)
    assert k.tier is Tier.PRACTICAL_STABILITY and k.not_applicable_axes == ("axis3",)


def test_going_not_evaluable_and_back_raises_no_flip():
    """pass, not evaluable x3, pass: no verdict flip, no tier change (raw or confirmed)."""
    from monitor.core.events import CellTracker

    t = CellTracker("m", "EOPP", "race", confirm_windows=2)
    axes = {"vfr": 0.0}
    assert t.observe(1, "pass", "Practical-Stability", axes) == []
    for _ in range(3):
        assert t.observe_not_evaluable() == []
    assert t.observe(5, "pass", "Practical-Stability", axes) == []
    assert (t.verdict.confirmed, t.tier.confirmed) == ("pass", "Practical-Stability")


def test_not_evaluable_breaks_a_pending_change():
    """A change must hold for confirm_windows consecutive evaluations; one that is not
    evaluable in between restarts the count."""
    from monitor.core.events import CellTracker

    t = CellTracker("m", "DI", "race", confirm_windows=2)
    t.observe(1, "pass", "Practical-Stability", {"vfr": 0.0})
    raw = t.observe(2, "fail", "Practical-Stability", {"vfr": 0.0})
    assert [e.confirmed for e in raw] == [False]
    t.observe_not_evaluable()
    again = t.observe(4, "fail", "Practical-Stability", {"vfr": 0.0})
    assert again == []  # raw value unchanged (fail), streak restarted: not confirmed yet
    confirmed = t.observe(5, "fail", "Practical-Stability", {"vfr": 0.0})
    assert [(e.kind, e.confirmed) for e in confirmed] == [("verdict_flip", True)]


def test_not_evaluable_cell_round_trips_through_stored_json():
    """What the store writes and a restart (or the fleet view) reads back keeps the cell
    not evaluable, its reason and its records needed; a row stored before (no such keys)
    reads as evaluable."""
    import json
    from dataclasses import replace

    from monitor.core.cell_result import Evaluability
    from monitor.core.jsonable import to_json
    from monitor.store.codec import evaluation_from_json
    from monitor.store.migrations import upgraded_cell
    from tests.support.exporter_state import make_cell

    cell = make_cell(value=math.nan, vfr=math.nan, not_evaluable="fewer than two race groups")
    ev = Evaluability(False, "fewer than two race groups", 15, ("2",))
    cell = replace(cell, result=replace(cell.result, evaluability=ev))
    back = evaluation_from_json(json.loads(to_json(cell.to_dict())))
    assert not back.result.evaluable and back.tier.reason == "fewer than two race groups"
    assert back.tier.tier.value == "Not-Evaluable" and math.isnan(back.result.vfr)
    assert back.result.evaluability == ev
    assert back.to_dict().keys() == cell.to_dict().keys()
    # a row written before these keys existed is upgraded once (migration v13): evaluable
    old = {k: v for k, v in json.loads(to_json(make_cell().to_dict())).items() if k not in (
        "evaluable", "not_evaluable_reason", "records_needed", "records_needed_groups")}
    assert evaluation_from_json(upgraded_cell(old)).result.evaluable
