"""The alert bench's replay clock: cutting each evaluation's gap to the rules' memory fires
exactly what the full event-time replay fires (the oracle), and the old one-minute clock
does not (it merges episodes days apart).

Real promtool on the shipped rules; the cells are made here (one model, eight evaluations
four days apart, as in the demo year), so the expected episodes are known by construction.
"""

from __future__ import annotations

import pandas as pd

from monitor.bench.alerts import (
    RULE_FILES,
    Episode,
    replay_clock,
    replay_model,
    rule_memory_s,
)
from monitor.core.cell_result import CellResult, Estimate
from monitor.core.results import Axis2Outcome, Axis3Outcome, CellEvaluation
from monitor.core.tiers import Tier, TierResult

DAY = 86_400
EVALUATIONS = range(1, 9)
TIMES = {k: pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(days=4 * k) for k in EVALUATIONS}
TIER = {0: Tier.PRACTICAL_STABILITY, 1: Tier.CAUTION_REQUIRED, 2: Tier.HIGH_VARIANCE}


def make(k, metric, attribute, *, verdict, reliable, vfr, level) -> CellEvaluation:
    result = CellResult(
        model_id="m", metric=metric, attribute=attribute, threshold=0.8, direction=">=", K=500,
        window_n=5000, resample_n=5000, groups_left_out=(), groups_left_out_point=(),
        raw=Estimate(0.85 if verdict == "pass" else 0.75, verdict, 400, vfr, verdict, 2.0, 0.8,
                     0.02, 0.7, 0.9, 0),
    )  # fmt: skip
    tier = TIER[level]
    return CellEvaluation(
        result=result, evaluation=k, tier=TierResult(tier, (), (), ()), confirmed_tier=tier.value,
        confirmed_verdict=verdict, axis2=Axis2Outcome(1000.0), axis3=Axis3Outcome(True, 0.8),
        evaluated_at=str(TIMES[k]), reliable_verdict=reliable,
    )  # fmt: skip


def cells(k: int) -> list[CellEvaluation]:
    """DI x race: reliable pass, fail from 4, pass from 7 (two pages). SPD x race: a reliable
    pass losing both structural axes at 5 (a page). EOD x age: the confirmed verdict flips
    every second evaluation at VFR 0.3 while the reliable verdict stays pass (a notice at
    each flip away from it: 3 and 7)."""
    di = "fail" if 4 <= k <= 6 else "pass"
    eod = "fail" if k in (3, 4, 7, 8) else "pass"
    return [
        make(k, "DI", "race", verdict=di, reliable=di, vfr=0.0, level=0),
        make(k, "SPD", "race", verdict="pass", reliable="pass", vfr=0.0, level=2 if k >= 5 else 0),
        make(k, "EOD", "age", verdict=eod, reliable="pass", vfr=0.3, level=1),
    ]


def episodes(gap_s: int | None, interval_s: int = 900) -> set[tuple[int, str, str]]:
    memory = rule_memory_s(RULE_FILES)
    clock = replay_clock(TIMES, interval_s, memory, gap_s)
    eps: list[Episode] = replay_model({k: cells(k) for k in EVALUATIONS}, clock, RULE_FILES)
    return {(e.evaluation, e.alertname, dict(e.labels)["metric"]) for e in eps}


def test_the_cut_replay_fires_what_the_event_time_replay_fires():
    full = episodes(gap_s=4 * DAY)  # the oracle: every gap at its event-time length
    assert episodes(gap_s=None) == full
    assert {
        (4, "VFRConfirmedVerdictFlip", "DI"),
        (7, "VFRConfirmedVerdictFlip", "DI"),
        (5, "VFRConfirmedTierDowngrade", "SPD"),
        (3, "VFRVerdictUnreliable", "EOD"),
        (7, "VFRVerdictUnreliable", "EOD"),
    } <= full
    pages = {e for e in full if e[1] in ("VFRConfirmedVerdictFlip", "VFRConfirmedTierDowngrade")}
    assert len(pages) == 3
    # the one-minute clock puts all eight evaluations inside one 1-hour window: the two
    # reliable flips of DI x race become one page, and the downgrade at 5 never lasts the
    # 10 minutes of its `for` (4 evaluations are left): 1 page instead of 3
    old = episodes(gap_s=60, interval_s=60)
    assert sorted(e for e in old if e[1] != "VFRVerdictUnreliable") == [
        (4, "VFRConfirmedVerdictFlip", "DI")
    ]


def test_rule_memory_is_the_longest_window_plus_hold():
    # VFRVerdictUnreliable: changes(...[6h]) + keep_firing_for 24h; plus the recording
    # rules' longest window (1h)
    assert rule_memory_s(RULE_FILES) == (6 + 24 + 1) * 3600
