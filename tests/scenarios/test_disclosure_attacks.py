"""The attacker's suite: patients recovered by combining the service's answers.

The real service (its DuckDB file, pipeline, exporter and HTTP API on 127.0.0.1) is fed as a
slow hospital feed would feed it: 3,000 records of a model, then 25 probe records one per
batch, each followed by a wall-clock hop (an evaluation, so a release point, after every
record: the worst case). A second model has 8 records, and race group "0" has 4. After every
probe the attacker reads everything a staff member could: ``/metrics``, ``/api/models``,
``/api/cells``, ``/api/windows``, ``/api/events`` and the status page. Then:

* **differencing**: between two consecutive answers, a group's published figures change
  although 1-10 of its records entered or left since they last changed (the test knows each
  probe's groups; the attacker's simplest use of it, "the one group whose count went up by
  one", is counted as recovered records);
* **complements**: per attribute, the window size minus the shown groups pins down one
  withheld group of 1-10 records;
* **health**: a rolling accuracy or AUROC published from fewer than 11 records, or changed by
  1-10 new ones.

Every attack recovers nothing. On the code before the release rule (issue 21) the first
probes' groups and decisions came out of consecutive scrapes, and 3,000 + 25 - (shown groups)
gave the 4 records of race group "0".
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.core.privacy import SMALL_CELL
from monitor.service.app import MonitorService

ATTRS = ("race", "sex", "ethnicity", "age_group")
PROBES = 25
HOP_S = 60.0

CFG = config_from_mapping(
    {
        "window": {"size": 10_000, "hop_records": 1000, "hop_seconds": HOP_S},
        "axis1": {"K": 40},
        "equilense": {"features": []},
        "models": [{"id": "big"}, {"id": "tiny"}],
        "service": {"intake": {"event_time_bounds": "none"}},
    }
)


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


def _records(n: int, model: str, seed: int, prefix: str) -> pd.DataFrame:
    df = synthetic_window(n, models=1, seed=seed).drop(columns=["decision"])
    df["model_id"] = model
    df["record_id"] = [f"{prefix}{i}" for i in range(n)]
    df["event_time"] = "2026-11-01T00:00:00Z"
    return df


def _base() -> pd.DataFrame:
    big = _records(3000, "big", 11, "b")
    big["race"] = np.where(big["race"] == "0", "1", big["race"])
    big.loc[big.index[:4], "race"] = "0"  # a group of 4
    return pd.concat([big, _records(8, "tiny", 12, "t")], ignore_index=True)


def _probes() -> pd.DataFrame:
    p = _records(PROBES, "big", 13, "p")
    p["race"] = np.where(p["race"] == "0", "2", p["race"])  # the group of 4 stays at 4
    return p


def _payloads(df: pd.DataFrame) -> list[bytes]:
    return [json.dumps(r).encode() for r in df.to_dict("records")]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def _scrape(base: str) -> dict:
    """Everything a reader of the metrics and the API sees, parsed."""
    series: dict[tuple, float] = {}
    for fam in text_string_to_metric_families(_get(base + "/metrics")):
        for s in fam.samples:
            series[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return {
        "metrics": series,
        "models": json.loads(_get(base + "/api/models")),
        "cells": json.loads(_get(base + "/api/cells")),
        "events": json.loads(_get(base + "/api/events?limit=1000")),
        "windows": json.loads(
            _get(base + "/api/windows?model=big&metric=DI&attribute=race&limit=1000")
        ),
        "page": _get(base + "/"),  # the status page (drawn in the background)
    }


def _groups(scrape: dict, model: str = "big") -> dict[tuple[str, str], tuple[float, float]]:
    """(attribute, group) -> (records, selection rate) as /metrics publishes them."""
    rec, rate = {}, {}
    for (name, labels), v in scrape["metrics"].items():
        d = dict(labels)
        if d.get("model") != model:
            continue
        if name == "vfr_group_records":
            rec[(d["attribute"], d["group"])] = v
        elif name == "vfr_group_selection_rate":
            rate[(d["attribute"], d["group"])] = v
    return {k: (rec[k], rate.get(k)) for k in rec}


def _model_series(scrape: dict, name: str, model: str = "big") -> float | None:
    for (n, labels), v in scrape["metrics"].items():
        if n == name and dict(labels).get("model") == model:
            return v
    return None


@pytest.fixture(scope="module")
def attack(tmp_path_factory):
    """The service fed as above; every answer after the base and after each probe."""
    clock = Clock()
    path = tmp_path_factory.mktemp("attack") / "a.duckdb"
    svc = MonitorService(CFG, db_path=str(path), http_port=0, start_scheduler=False, clock=clock)
    svc.start()
    try:
        base = _base()
        svc.pipeline.ingest_batch(_payloads(base), [Origin("t", 0, i) for i in range(len(base))])
        svc.pipeline.flush()
        clock.t += HOP_S
        svc.pipeline.tick()  # the base's interim evaluation: a first release
        url = svc.api.url
        scrapes = [_scrape(url)]
        probes = _probes()
        for i, payload in enumerate(_payloads(probes)):
            svc.pipeline.ingest_batch([payload], [Origin("t", 0, len(base) + i)])
            svc.pipeline.flush()
            clock.t += HOP_S
            svc.pipeline.tick()  # a wall-clock hop: an evaluation after every record
            scrapes.append(_scrape(url))
        # the status page is drawn in the background: wait for a drawing of the final state
        # (bounded: the drawing of a file this size takes seconds; 120 s is the margin of a
        # loaded machine)
        deadline = time.monotonic() + 120
        page = _get(url + "/")
        while "records received" not in page and time.monotonic() < deadline:
            time.sleep(0.5)
            page = _get(url + "/")
        yield {"base": base, "probes": probes, "scrapes": scrapes, "final_page": page}
    finally:
        svc.close()


def test_consecutive_scrapes_change_no_group_on_fewer_than_11_records(attack):
    """Differencing: a group's published figures change only after 0 or 11+ of its
    records entered or left since they last changed; and the attacker's rule "the group
    whose count rose by one holds the new record" recovers no probe."""
    probes, scrapes = attack["probes"], attack["scrapes"]
    churn_since: dict[tuple[str, str], int] = defaultdict(int)  # since the last change
    bad, recovered = [], 0
    for i in range(1, len(scrapes)):
        before, after = _groups(scrapes[i - 1]), _groups(scrapes[i])
        p = probes.iloc[i - 1]
        for a in ATTRS:
            churn_since[(a, str(p[a]))] += 1
        for key in set(before) | set(after):
            if before.get(key) != after.get(key) and key in before and key in after:
                if 0 < churn_since[key] < SMALL_CELL:
                    bad.append((i, key, churn_since[key]))
                churn_since[key] = 0
        for a in ATTRS:
            risen = [
                k for k in after if k[0] == a and k in before and after[k][0] - before[k][0] == 1
            ]
            if risen == [(a, str(p[a]))]:
                recovered += 1
    assert recovered == 0
    assert bad == []
    # not vacuous: groups are shown, and their figures changed at some point
    assert _groups(scrapes[0])
    assert any(_groups(scrapes[i]) != _groups(scrapes[i - 1]) for i in range(1, len(scrapes)))


def test_consecutive_scrapes_change_no_model_figure_on_fewer_than_11_records(attack):
    """Window size, rolling accuracy and AUROC (metrics and /api/models) change only after
    11+ new records, and health is never published from fewer than 11 records."""
    scrapes = attack["scrapes"]
    last_change = 0
    for i in range(1, len(scrapes)):
        b, a = scrapes[i - 1], scrapes[i]
        seen = [
            (_model_series(s, n) for n in ("vfr_window_records", "vfr_model_rolling_accuracy",
                                            "vfr_model_rolling_auroc"))
            for s in (b, a)
        ]  # fmt: skip
        mb = next(m for m in b["models"] if m["model_id"] == "big")
        ma = next(m for m in a["models"] if m["model_id"] == "big")
        changed = tuple(seen[0]) != tuple(seen[1]) or mb != {**ma, "last_evaluation_at":
                                                             mb["last_evaluation_at"]}
        if changed:
            assert i - last_change >= SMALL_CELL, f"probe {i}: model figures moved"
            last_change = i
    for s in scrapes:
        tiny = next(m for m in s["models"] if m["model_id"] == "tiny")
        assert tiny["window_records"] == "<11"
        assert tiny["rolling_accuracy"] is None and tiny["rolling_auroc"] is None
        assert _model_series(s, "vfr_window_records", "tiny") is None
        assert _model_series(s, "vfr_model_rolling_accuracy", "tiny") is None


def test_consecutive_cells_change_only_on_11_records_per_group(attack):
    """A cell's published evaluation (in /api/cells and its window history) changes only
    when every group of its attribute had 0 or 11+ records of churn since it last changed."""
    probes, scrapes = attack["probes"], attack["scrapes"]
    churn_since: dict[tuple[str, str, str], int] = defaultdict(int)
    bad = []
    for i in range(1, len(scrapes)):
        p = probes.iloc[i - 1]
        before = {(c["model_id"], c["metric"], c["attribute"]): c for c in scrapes[i - 1]["cells"]}
        after = {(c["model_id"], c["metric"], c["attribute"]): c for c in scrapes[i]["cells"]}
        for a in ATTRS:
            churn_since[(a, str(p[a]), "")] += 1
        for key, cell in after.items():
            if key[0] != "big" or key not in before or before[key] == cell:
                continue
            counts = [v for (a, _, _), v in churn_since.items() if a == key[2] and v]
            if any(v < SMALL_CELL for v in counts):
                bad.append((i, key, counts))
        changed_attrs = {k[2] for k in after if k in before and before[k] != after[k]}
        for k in list(churn_since):
            if k[0] in changed_attrs:
                churn_since[k] = 0
    assert bad == []
    # not vacuous: cells were released more than once over the probes
    changes = sum(
        1 for i in range(1, len(scrapes)) if scrapes[i]["cells"] != scrapes[i - 1]["cells"]
    )
    assert changes >= 1
    history = scrapes[-1]["windows"]
    assert all(r.get("released", True) for r in history)


def test_no_withheld_group_follows_from_the_total(attack):
    """Complements: per attribute, window size minus the shown groups never equals the size
    of one withheld group of 1-10 records, and withheld groups come two or more together."""
    base, probes, scrapes = attack["base"], attack["probes"], attack["scrapes"]
    recovered = 0
    for i, s in enumerate(scrapes):
        rows = pd.concat([base[base["model_id"] == "big"], probes.iloc[:i]])
        total = _model_series(s, "vfr_window_records")
        shown = _groups(s)
        for a in ATTRS:
            true = rows[a].value_counts().to_dict()
            hidden = {g: n for g, n in true.items() if (a, str(g)) not in shown and n > 0}
            small = [g for g, n in hidden.items() if n < SMALL_CELL]
            if small:
                assert len(hidden) >= 2 and sum(hidden.values()) >= SMALL_CELL, (i, a, hidden)
            if total is not None:
                rest = total - sum(n for (aa, _), (n, _) in shown.items() if aa == a)
                recovered += sum(1 for g in small if rest == true[g])
    assert recovered == 0
    # the group of 4 exists and is withheld in every scrape
    assert all(("race", "0") not in _groups(s) for s in scrapes)


def test_events_carry_no_window_figures(attack):
    """Events are published as they happen (alerts), so they carry verdicts, tiers and VFR
    but not the value: that is read from the cell's release."""
    for s in attack["scrapes"]:
        for e in s["events"]:
            for axes in (e.get("axes") or {}, e.get("axes_before") or {}):
                if isinstance(axes, dict):
                    assert "value" not in axes and "sigma" not in axes


def test_the_status_page_quotes_no_exact_small_or_unrounded_count(attack):
    """Every status page served: record counts rounded to 5 or withheld (the tiny model's 8
    records read "<11"), so two pages differ by no exact count of a few records."""
    pages = [s["page"] for s in attack["scrapes"]] + [attack["final_page"]]
    counts = [
        int(n.replace(",", ""))
        for p in pages
        for n in re.findall(r"(?<![<;\d,])([\d,]+) records received", p)
    ]
    assert all(n % 5 == 0 for n in counts), counts
    assert not any(re.search(r"\b8 records", p) for p in pages)
    drawn = [p for p in pages if "records received" in p]
    assert drawn, "the page was drawn at least once during the probes"
    assert all("&lt;11 records received" in p for p in drawn)  # the tiny model's 8


def test_a_scheduled_job_publishes_nothing_new_on_a_cohort_moved_by_1_to_10_records(tmp_path):
    """Scheduled jobs are releases too: EquiLense run again after one more record of a
    group answers what it answered (the difference of two runs would be that record),
    and after 11 more records of every group changed, a new result."""
    clock = Clock()
    cfg = config_from_mapping(
        {
            "window": {"size": 10_000, "hop_records": 1000, "hop_seconds": 0},
            "axis1": {"K": 40},
            "equilense": {"features": []},
            "models": [{"id": "big"}],
            "service": {"intake": {"event_time_bounds": "none"}},
        }
    )
    svc = MonitorService(cfg, db_path=str(tmp_path / "j.duckdb"), http_port=0,
                         start_scheduler=False, clock=clock)  # fmt: skip
    svc.start()
    try:
        base = _records(2000, "big", 21, "j")
        svc.pipeline.ingest_batch(_payloads(base), [Origin("t", 0, i) for i in range(2000)])
        svc.pipeline.flush()

        def answers() -> list:
            return json.loads(_get(svc.api.url + "/api/axes?axis=equilense&model=big"))

        svc.job_equilense()
        first = answers()
        assert len(first) == 1
        one = _records(1, "big", 22, "one")
        svc.pipeline.ingest_batch(_payloads(one), [Origin("t", 0, 2000)])
        svc.pipeline.flush()
        clock.t += 60
        svc.job_equilense()
        assert answers() == first  # held: one record moved the cohort
        more = _records(120, "big", 23, "more")
        for a, k in (("race", 5), ("sex", 2), ("ethnicity", 2), ("age_group", 4)):
            more[a] = [str(i % k) for i in range(len(more))]  # 24+ records in every group
        svc.pipeline.ingest_batch(_payloads(more), [Origin("t", 0, 2001 + i) for i in range(120)])
        svc.pipeline.flush()
        clock.t += 60
        svc.job_equilense()
        assert len(answers()) == 2  # 11+ records in every group: a new release
    finally:
        svc.close()
