"""The complement attacks of issue 21, run the way a reader of published answers would.

A reader holds what left the service (an API answer, an audit or intervene file) and
knows the publication rules (docs/privacy.md). These functions say what that reader can
derive about the groups of one family (an attribute's groups, a cohort's folds, a split
part's groups) from its total and its shown parts, and about a withheld group's DPD
from the identity sum_g n_g DPD_g = 0. Each returns what was *recovered*: a withheld
size pinned to one value, or a withheld DPD computable from the others.

A published count that is a multiple of 5 may have been rounded, so it tells its value
within 2; any other count is exact; a withheld one (``<11``, None) may be a secondary
suppression of any size, so it says nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from monitor.core.privacy import ROUNDING_BASE, SMALL_CELL

HALF = ROUNDING_BASE // 2


def count_bounds(v: Any) -> tuple[float, float]:
    """What a published count says about the true one: (lowest, highest)."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return 0.0, math.inf
    if v % ROUNDING_BASE == 0:
        return max(0.0, v - HALF), float(v + HALF)
    return float(v), float(v)


def hidden_bounds(total: Any, parts: Mapping[Any, Any]) -> dict[Any, tuple[float, float]]:
    """For each withheld part: the range ``total - shown parts - other withheld parts``
    leaves for it."""
    t_lo, t_hi = count_bounds(total)
    bounds = {k: count_bounds(v) for k, v in parts.items()}
    withheld = [k for k, (lo, hi) in bounds.items() if hi == math.inf]
    out = {}
    for k in withheld:
        others = [b for j, b in bounds.items() if j != k]
        lo = t_lo - sum(hi for _, hi in others)
        hi = t_hi - sum(lo for lo, _ in others)
        out[k] = (max(0.0, lo), hi)
    return out


def recovered_sizes(total: Any, parts: Mapping[Any, Any]) -> dict[Any, int]:
    """Withheld parts whose size the complement pins to a single value."""
    return {
        k: int(lo) for k, (lo, hi) in hidden_bounds(total, parts).items() if lo == hi < math.inf
    }


def small_counts_shown(parts: Mapping[Any, Any]) -> dict[Any, int]:
    """Parts published outright with an exact count of 1-10 records (a 5 or a 10 may be
    a rounded 3-12, see :func:`count_bounds`)."""
    out = {}
    for k, v in parts.items():
        lo, hi = count_bounds(v)
        if lo == hi and 0 < lo < SMALL_CELL:
            out[k] = int(lo)
    return out


def small_recovered(total: Any, parts: Mapping[Any, Any]) -> dict[Any, int]:
    """Groups of 1-10 records a reader learns exactly: shown outright or by complement."""
    found = {**small_counts_shown(parts), **recovered_sizes(total, parts)}
    return {k: n for k, n in found.items() if 0 < n < SMALL_CELL}


def dpd_recovered(
    total: Any, sizes: Mapping[str, Any], dpd: Mapping[str, float | None]
) -> dict[str, float]:
    """A withheld group's DPD from sum_g n_g DPD_g = 0, when it is the only unknown term
    and its size is known (shown, or recovered by complement): -sum(shown n DPD) / n."""
    known = {**{k: v for k, v in sizes.items() if count_bounds(v)[1] < math.inf}}
    known.update(recovered_sizes(total, sizes))
    unknown = [g for g, v in dpd.items() if v is None and count_bounds(sizes[g]) != (0.0, 0.0)]
    if len(unknown) != 1 or unknown[0] not in known or not known[unknown[0]]:
        return {}
    (g,) = unknown
    weighted = sum(float(known[h]) * float(v) for h, v in dpd.items() if v is not None)
    return {g: -weighted / float(known[g])}


def exact_counts_in(text: str) -> list[int]:
    """Numbers of 1-10 quoted as record counts in a sentence ("2 records ...")."""
    return [int(m) for m in re.findall(r"\b(\d+) records?\b", text) if 0 < int(m) < SMALL_CELL]


# ----------------------------------------------------------------------------- the cohort
#: Records per hospital of :func:`five_hospital_cohort` (its Axis 3 folds), and records
#: without a hospital id.
HOSPITAL_SIZES = (31, 15, 8, 4, 1)
MISSING_HOSPITAL = 2
#: Records per race code: a group of 4 the complement would name.
RACE_SIZES = {"0": 4, "1": 14, "2": 13, "3": 18, "4": 12}


def five_hospital_cohort(seed: int = 0) -> Any:
    """61 scored records of one model ``m``: 5 hospitals of 31, 15, 8, 4 and 1 records,
    2 records without a hospital id, race groups of 4, 14, 13, 18 and 12 records, a
    decision at the default threshold (drop it to let the service or the audit decide)."""
    import numpy as np
    import pandas as pd

    n = sum(HOSPITAL_SIZES) + MISSING_HOSPITAL
    rng = np.random.default_rng(seed)
    hosp = [f"h{i}" for i, k in enumerate(HOSPITAL_SIZES) for _ in range(k)]
    race = [code for code, k in RACE_SIZES.items() for _ in range(k)]
    assert len(race) == n
    score = rng.uniform(size=n)
    return pd.DataFrame(
        {
            "record_id": [f"r{i}" for i in range(n)],
            "model_id": "m",
            "hospital_id": hosp + [None] * MISSING_HOSPITAL,
            "race": rng.permutation(race),
            "sex": [str(i % 2) for i in range(n)],
            "ethnicity": "1",
            "age_group": [str(2 + i % 2) for i in range(n)],
            "label": (rng.uniform(size=n) < score).astype(int),
            "score": score,
            "decision": (score >= 0.5).astype(int),  # the default decision threshold
        }
    )
