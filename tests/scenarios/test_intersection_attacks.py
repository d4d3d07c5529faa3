"""The attacker's suite across families: a withheld intersection group from its margins.

The real service (its DuckDB file, pipeline, exporter and HTTP API on 127.0.0.1) with
``race x sex`` configured is fed 1,000 records of one model in which Native American
(race "0") holds 30 records: 23 men (10 selected) and 7 women (all 7 selected). "Native
American x Female" (7 records) is withheld in its own family. The attacker reads
everything published (``/metrics``, ``/api/cells`` with their driver fields and
subgroups, ``/api/windows``, the report) and, for each margin group containing the
withheld one (Native American, Female), subtracts the shown combinations within it from
the margin, with exact interval arithmetic on the rounding: a count published as R is
any n >= 11 with ``rounded_count(n) == R``; a rate published as r beside it is any s
with ``round(s / n, 2) == r``.

What "withheld" itself says: 1-10 records, any number selected 0..n. The rule: the
attacker's feasible set of (records, selected) of the withheld group is exactly that
triangle. On the code before the cross-family rule the Native American margin (30,
0.57) minus "Native American x Male" (25, 0.43) left one pair: 7 records, 7 selected.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterable

import numpy as np
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.core.privacy import SMALL_CELL, rounded_count, rounded_rate
from monitor.service.app import MonitorService

HOP_S = 60.0
TARGET = ("race_x_sex", "0:1")  # Native American x Female: 7 records, all selected
MARGINS = (("race", "0", 0), ("sex", "1", 1))  # (attribute, group, position in the code)

CFG = config_from_mapping(
    {
        "window": {"size": 10_000, "hop_records": 1000, "hop_seconds": HOP_S},
        "axis1": {"K": 40},
        "equilense": {"features": []},
        "models": [{"id": "big"}],
        "service": {"intake": {"event_time_bounds": "none"}},
        "intersections": [{"attributes": ["race", "sex"]}],
    }
)
LABELS = {a.name: a.groups for a in CFG.grid_attributes}
CODES = {a: {label: code for code, label in g.items()} for a, g in LABELS.items()}

Pairs = set[tuple[int, int]]


def _records() -> pd.DataFrame:
    """1,000 synthetic records, race "0" replaced by 30 chosen ones (23 men, 10 of them
    selected; 7 women, all selected). Selection is the score against the threshold."""
    df = synthetic_window(1000, models=1, seed=24).drop(columns=["decision"])
    df["race"] = np.where(df["race"] == "0", "1", df["race"])
    df["model_id"] = "big"
    df["record_id"] = [f"r{i}" for i in range(len(df))]
    df["event_time"] = "2026-11-01T00:00:00Z"
    na = df.index[:30]
    df.loc[na, "race"] = "0"
    df.loc[na, "sex"] = ["0"] * 23 + ["1"] * 7
    df.loc[na, "score"] = [0.9] * 10 + [0.1] * 13 + [0.9] * 7
    return df


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """Everything the service publishes after the records and one evaluation."""
    t = [1_800_000_000.0]
    path = tmp_path_factory.mktemp("xfam") / "x.duckdb"
    svc = MonitorService(
        CFG, db_path=str(path), http_port=0, start_scheduler=False, clock=lambda: t[0]
    )
    svc.start()
    try:
        df = _records()
        payloads = [json.dumps(r).encode() for r in df.to_dict("records")]
        svc.pipeline.ingest_batch(payloads, [Origin("t", 0, i) for i in range(len(df))])
        svc.pipeline.flush()
        t[0] += HOP_S
        svc.pipeline.tick()
        url = svc.api.url
        cells = json.loads(_get(url + "/api/cells"))
        windows = [
            json.loads(_get(url + f"/api/windows?model=big&metric={m}&attribute={a}&limit=100"))
            for m in ("DI", "SPD") for a in ("race", "sex", "race_x_sex")
        ]  # fmt: skip
        yield {"df": df, "metrics": _get(url + "/metrics"), "cells": cells, "windows": windows}
    finally:
        svc.close()


# ----------------------------------------------------------------------------- reading
def _code(attr: str, group: str) -> str:
    """A group as the attacker files it: its code (drivers may name it by its label)."""
    return CODES.get(attr, {}).get(group, group)


def _knowledge(pub: dict) -> tuple[dict, dict]:
    """(attribute, code) -> published count, and -> published selection rates, gathered
    from every edge: the group series of /metrics, and the selection rates the cells'
    drivers (low/high rate, subgroups) name."""
    counts: dict[tuple[str, str], float] = {}
    rates: dict[tuple[str, str], set[float]] = {}
    for fam in text_string_to_metric_families(pub["metrics"]):
        for s in fam.samples:
            d = s.labels
            if s.name == "vfr_group_records":
                counts[(d["attribute"], d["group"])] = s.value
            elif s.name == "vfr_group_selection_rate":
                rates.setdefault((d["attribute"], d["group"]), set()).add(s.value)
    rows = list(pub["cells"]) + [r for w in pub["windows"] for r in w]
    for c in rows:
        if c.get("driver_rate") != "SR":
            continue
        a = c["attribute"]
        for side in ("low", "high"):
            g, r = c.get(f"{side}_group"), c.get(f"{side}_rate")
            if isinstance(g, str) and isinstance(r, int | float):
                rates.setdefault((a, _code(a, g)), set()).add(float(r))
        for g, r in c.get("low_subgroups") or ():
            rates.setdefault(("race_x_sex", _code("race_x_sex", g)), set()).add(float(r))
    return counts, rates


def _pairs(count: float | None, rate: set[float] | None, n_max: int) -> Pairs | None:
    """Every (records, selected) consistent with a group's published figures (None:
    nothing published about it)."""
    if count is None and not rate:
        return None
    ns = (
        [n for n in range(SMALL_CELL, n_max + 3) if rounded_count(n) == count]
        if count is not None
        else range(1, n_max + 1)
    )
    out = set()
    for n in ns:
        for s in range(n + 1):
            if not rate or all(rounded_rate(s / n) == r for r in rate):
                out.add((n, s))
    return out


def _minus(total: Pairs, parts: Iterable[Pairs], cap: int) -> Pairs:
    """Every (N - sum n, S - sum s) left by the total after one pair of each part."""
    left = set(total)
    for p in parts:
        left = {(N - n, S - s) for N, S in left for n, s in p if n <= N and s <= S}
        left = {(N, S) for N, S in left if 0 <= S <= N <= cap}
    return left


def attacker_feasible(pub: dict) -> tuple[Pairs, list[dict]]:
    """The attacker's feasible (records, selected) of the withheld target: for each
    margin containing it, the margin minus every shown combination within it; the
    combinations with nothing published absorb any (n, s) with 0 <= s <= n; intersected
    over the margins. Exact on the rounding, a relaxation of the joint system (each
    margin on its own), so the true pair is always inside."""
    counts, rates = _knowledge(pub)
    assert TARGET not in counts, "the target must be withheld in its own family"
    feasible = {(n, s) for n in range(1, SMALL_CELL) for s in range(n + 1)}
    trace = []
    for attr, group, pos in MARGINS:
        n_max = int(counts[(attr, group)]) + 2
        total = _pairs(counts[(attr, group)], rates.get((attr, group)), n_max)
        members = [c for c in LABELS["race_x_sex"] if c.split(":")[pos] == group]
        known, free = [], []
        for c in members:
            key = ("race_x_sex", c)
            p = _pairs(counts.get(key), rates.get(key), n_max)
            (known if p is not None else free).append(c)
        parts = [_pairs(counts.get(("race_x_sex", c)), rates.get(("race_x_sex", c)), n_max)
                 for c in known]  # fmt: skip
        left = _minus(total, parts, n_max)  # what the unpublished combinations hold
        others = [c for c in free if c != TARGET[1]]
        here = {
            (n, s)
            for n, s in feasible
            if any(
                (n, s) == (N, S) if not others else (N - n >= 0 and 0 <= S - s <= N - n)
                for N, S in left
            )
        }
        trace.append({"margin": (attr, group), "shown": known, "unpublished": free,
                      "records": sorted({n for n, _ in here})})  # fmt: skip
        feasible = here
    return feasible, trace


# ----------------------------------------------------------------------------- tests
def test_the_scenario_is_what_it_says(published):
    """Not vacuous: the target holds 7 records (all selected) and is withheld, its margins
    are published with their rates, and the intersection publishes other groups."""
    df = published["df"]
    t = df[(df["race"] == "0") & (df["sex"] == "1")]
    assert len(t) == 7 and (t["score"] >= 0.5).all()
    counts, rates = _knowledge(published)
    assert TARGET not in counts
    for attr, group, _ in MARGINS:
        assert (attr, group) in counts and rates.get((attr, group))
    assert sum(1 for a, _ in counts if a == "race_x_sex") >= 4


def test_margins_minus_shown_combinations_pin_down_nothing(published):
    """The attacker's feasible (records, selected) of the withheld group is every pair
    "withheld" allows: 1-10 records, 0..n selected. On the code before the cross-family
    rule it was one pair, (7, 7): the group and its decisions disclosed."""
    feasible, trace = attacker_feasible(published)
    everything = {(n, s) for n in range(1, SMALL_CELL) for s in range(n + 1)}
    assert feasible == everything, trace
    assert (7, 7) in feasible  # the truth is inside (the arithmetic is sound)


def test_no_edge_names_a_rate_or_count_of_a_combination_withheld_by_the_rule(published):
    """The drivers (low/high rate, subgroups) and /metrics agree on what is withheld: a
    combination absent from /metrics shows no rate anywhere (a rate alone, beside the
    margin, narrows the rest)."""
    counts, rates = _knowledge(published)
    inter_rated = {k for k in rates if k[0] == "race_x_sex"}
    assert inter_rated <= set(counts), sorted(inter_rated - set(counts))
    assert not re.search(r'attribute="race_x_sex",.*group="0:1"', published["metrics"])
