"""Record-level oracle of the certified verdict (tests only; docs/method.md section 11).

Recomputes, from individual records and with plain loops, what
``monitor.core.certify`` computes from count tables: each group's rate successes and
trials from (label, decision) per record, the block e-value's denominator as the
records' log moment generating functions summed and maximised over the null segment by
a bounded scalar optimiser (not the closed form), the decayed predictions behind the
bets as a sum over past records weighted by decay ** age, the block's trials per group
by counting its records, and the Shiryaev-Roberts recursion pair by pair and bet by bet in Python (a
pair's detector the mean of its bets' detectors). The bets themselves are the service's
functions (``growth_bets``, ``grid_bets``: any bet is valid; what is checked is the
statistic built on them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize_scalar

from monitor.core.certify import BET_GRID_NATS, grid_bets, growth_bets, pair_spec

_RATE_OF_RECORD = {
    # rate -> (is the record a trial of it, is it a success)
    "SR": (lambda y, d: True, lambda y, d: d == 1),
    "TPR": (lambda y, d: y == 1, lambda y, d: d == 1),
    "FPR": (lambda y, d: y == 0, lambda y, d: d == 1),
    "PPV": (lambda y, d: d == 1, lambda y, d: y == 1),
}


def record_log_e(
    records_a: Sequence[int],
    records_b: Sequence[int],
    lam_a: float,
    lam_b: float,
    theta: float,
    eps: float,
) -> float:
    """log e of one block for one pair from its records' outcomes (0/1 per trial)."""
    lo, hi = max(0.0, eps / theta), min(1.0, (1.0 + eps) / theta)

    def log_mgf(pb: float) -> float:
        # every trial of a group has the same moment generating function: the sum over a
        # group's records is their number times one record's (a count, so that the
        # optimiser's ~40 evaluations for each of a pair's ten detectors stay cheap)
        pa = theta * pb - eps
        return len(records_a) * math.log(1.0 - pa + pa * math.exp(lam_a)) + len(
            records_b
        ) * math.log(1.0 - pb + pb * math.exp(lam_b))

    res = minimize_scalar(
        lambda v: -log_mgf(v), bounds=(lo, hi), method="bounded", options={"xatol": 1e-10}
    )
    sup = max(-res.fun, log_mgf(lo), log_mgf(hi))
    gain = lam_a * sum(records_a) + lam_b * sum(records_b)
    return gain - sup


def reference_run(
    rule,
    groups: Sequence[str],
    blocks: Sequence[Sequence[tuple[int, int, int]]],
    threshold: float,
    years: float,
    min_group_support: int = 20,
    half_life_blocks: float = 3.0,
    margin: float = 0.02,
    grid: Sequence[float] = BET_GRID_NATS,
) -> list[str]:
    """The verdict after each block; a block is a list of (group, label, decision)."""
    spec = pair_spec(rule)
    assert spec is not None, "the oracle is called on certifiable rules"
    G = len(groups)
    decay = 0.5 ** (1.0 / half_life_blocks)
    pairs = [(r, a, b) for r in spec.rates for a in range(G) for b in range(G) if a != b]
    K = 1 + len(grid)  # the plug-in, then the grid's strengths
    r_fail = {p: [0.0] * K for p in pairs}
    r_pass = {p: [0.0] * K for p in pairs}
    history: list[list[tuple[int, int, int]]] = []
    state, entering_before, out = "undetermined", None, []
    for block in blocks:
        # decayed successes and trials from the past records
        x = {(r, g): 0.0 for r in spec.rates for g in range(G)}
        n = dict(x)
        for age, past in enumerate(reversed(history)):
            weight = decay**age
            for g, y, d in past:
                for r in spec.rates:
                    trial, success = _RATE_OF_RECORD[r]
                    if trial(y, d):
                        n[(r, g)] += weight
                        x[(r, g)] += weight * success(y, d)
        entering = [g for g in range(G) if all(n[(r, g)] >= min_group_support for r in spec.rates)]
        if entering != entering_before:
            r_fail = {p: [0.0] * K for p in pairs}
            r_pass = {p: [0.0] * K for p in pairs}
        entering_before = entering
        live = [p for p in pairs if p[1] in entering and p[2] in entering]
        for p in pairs:
            if p not in live:
                r_fail[p], r_pass[p] = [0.0] * K, [0.0] * K
                continue
            r, a, b = p
            trial, success = _RATE_OF_RECORD[r]
            outs = {
                g: [int(success(y, d)) for gg, y, d in block if gg == g and trial(y, d)]
                for g in (a, b)
            }
            q = {g: x[(r, g)] / n[(r, g)] if n[(r, g)] > 0 else 0.5 for g in (a, b)}
            for side in ("fail", "pass"):
                args = (np.array(q[a]), np.array(q[b]), np.array(float(len(outs[a]))),
                        np.array(float(len(outs[b]))), spec.theta, spec.eps, side)  # fmt: skip
                la, lb = growth_bets(*args, margin)
                ga, gb = grid_bets(*args, grid)
                bets = [(float(la), float(lb))] + [
                    (float(ga[k]), float(gb[k])) for k in range(len(grid))
                ]
                detectors = r_fail[p] if side == "fail" else r_pass[p]
                for k, (bet_a, bet_b) in enumerate(bets):
                    log_e = record_log_e(outs[a], outs[b], bet_a, bet_b, spec.theta, spec.eps)
                    e = math.exp(min(log_e, 600.0))
                    detectors[k] = min((years + detectors[k]) * e, 1e200)
        if state == "fail":
            r_fail = {p: [0.0] * K for p in pairs}
        if state == "pass":
            r_pass = {p: [0.0] * K for p in pairs}
        if live:
            fail_stat = sum(sum(r_fail[p]) / K for p in live) / len(live)
            pass_stat = min(sum(r_pass[p]) / K for p in live)
            new = None
            if fail_stat >= threshold and state != "fail":
                new = "fail"
            elif pass_stat >= threshold and state != "pass":
                new = "pass"
            if new is not None:
                state = new
                r_fail = {p: [0.0] * K for p in pairs}
                r_pass = {p: [0.0] * K for p in pairs}
        out.append(state)
        history.append(list(block))
    return out
