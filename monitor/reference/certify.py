"""Record-level oracle of the certified verdict (tests only; docs/method.md section 11).

Recomputes, from individual records and with plain loops, what
``monitor.core.certify`` computes from count tables: each group's rate successes and
trials from (label, decision) per record, the block e-value's denominator as a sum of
per-record log moment generating functions maximised over the null segment by a bounded
scalar optimiser (not the closed form), the decayed predictions behind the bets as a sum
over past records weighted by decay ** age, and the Shiryaev-Roberts recursion pair by
pair in Python.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize_scalar

from monitor.core.certify import growth_bets, pair_spec

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
        pa = theta * pb - eps
        total = 0.0
        for _ in records_a:
            total += math.log(1.0 - pa + pa * math.exp(lam_a))
        for _ in records_b:
            total += math.log(1.0 - pb + pb * math.exp(lam_b))
        return total

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
) -> list[str]:
    """The verdict after each block; a block is a list of (group, label, decision)."""
    spec = pair_spec(rule)
    assert spec is not None, "the oracle is called on certifiable rules"
    G = len(groups)
    decay = 0.5 ** (1.0 / half_life_blocks)
    pairs = [(r, a, b) for r in spec.rates for a in range(G) for b in range(G) if a != b]
    r_fail = {p: 0.0 for p in pairs}
    r_pass = {p: 0.0 for p in pairs}
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
            r_fail = {p: 0.0 for p in pairs}
            r_pass = {p: 0.0 for p in pairs}
        entering_before = entering
        live = [p for p in pairs if p[1] in entering and p[2] in entering]
        total_block = len(block)
        total_past = {r: sum(n[(r, g)] for g in range(G)) for r in spec.rates}
        trials_block = {
            r: sum(1 for g, y, d in block if _RATE_OF_RECORD[r][0](y, d)) for r in spec.rates
        }
        del total_block
        for p in pairs:
            if p not in live:
                r_fail[p] = r_pass[p] = 0.0
                continue
            r, a, b = p
            trial, success = _RATE_OF_RECORD[r]
            outs = {
                g: [int(success(y, d)) for gg, y, d in block if gg == g and trial(y, d)]
                for g in (a, b)
            }
            q = {g: x[(r, g)] / n[(r, g)] if n[(r, g)] > 0 else 0.5 for g in (a, b)}
            exp_n = {g: n[(r, g)] / max(total_past[r], 1e-9) * trials_block[r] for g in (a, b)}
            for side in ("fail", "pass"):
                la, lb = growth_bets(
                    np.array(q[a]),
                    np.array(q[b]),
                    np.array(exp_n[a]),
                    np.array(exp_n[b]),
                    spec.theta,
                    spec.eps,
                    side,
                    margin,
                )
                e = math.exp(
                    min(
                        record_log_e(outs[a], outs[b], float(la), float(lb), spec.theta, spec.eps),
                        600.0,
                    )
                )
                if side == "fail":
                    r_fail[p] = min((years + r_fail[p]) * e, 1e200)
                else:
                    r_pass[p] = min((years + r_pass[p]) * e, 1e200)
        if state == "fail":
            r_fail = {p: 0.0 for p in pairs}
        if state == "pass":
            r_pass = {p: 0.0 for p in pairs}
        if live:
            fail_stat = sum(r_fail[p] for p in live) / len(live)
            pass_stat = min(r_pass[p] for p in live)
            new = None
            if fail_stat >= threshold and state != "fail":
                new = "fail"
            elif pass_stat >= threshold and state != "pass":
                new = "pass"
            if new is not None:
                state = new
                r_fail = {p: 0.0 for p in pairs}
                r_pass = {p: 0.0 for p in pairs}
        out.append(state)
        history.append(list(block))
    return out
