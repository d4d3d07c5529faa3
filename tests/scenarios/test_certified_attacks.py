"""The attacker's suite for the certified verdicts: one record of a small group recovered
from the certified evidence, change-record counts and verdicts of two releases.

The certified verdict of a cell (docs/method.md section 11) rests on the *blocks* of records
between count hops, not on the window, so the window's release rule alone does not say
that its figures are safe. The attacker here knows every record but one probe record (its
label and its decision) and reads everything a staff member sees of the certified
verdicts, before and after the hop that brings the probe: each cell's ``certified`` in
``/api/cells`` (verdict, evidence, record counts, whether it is there at all) and
``vfr_cell_certified_verdict``, ``vfr_cell_certified_change_records`` and
``vfr_certified_changes_total`` in ``/metrics``. Each world is the real service on its own
DuckDB file, fed 6,000 records (six hop blocks, so the detectors have evidence) and a
seventh block of 1,000 records holding the probe; two worlds differ only in the probe's
label and decision (positive and selected, or negative and not selected). Whatever the
attacker can tell apart between the two worlds' answers, they learn of the probe.

* **A group of 4 records** (race "0", below the smallest group support): the probe makes it
  5, and the race cells are released at that hop (a group under the support enters no
  value and holds nothing back). The group enters no detector, so no evidence, verdict or
  change of a race cell can move with the probe; the record counts are the model's (every
  group's trials since the last change), rounded as every count is, and the same in every
  cell of a metric, never a count of the group's.
* **A group of about 130 records that moves by one** (race "0" again, now entering the
  detectors): the probe is the only record of the group in its block, so the race cells
  are held at that hop (the release rule: 1 record of difference) and must show the
  certified verdict of their last release, in both worlds alike, although the probe does
  move the computed evidence (checked on the pipeline's live cells: the test is not
  vacuous). Published live instead of as released, the race cells' evidence would tell
  the worlds apart at one decimal: this test then fails.
* **A group of 10 records in a window of two hops** (5 a block, one of them the probe):
  under 11 in the window at both release points, so the release rule does not count it,
  but its decayed block counts (about 24) enter the detectors, so its 5 new records move
  the race cells' released evidence. Before the release rule counted the groups that
  enter the detectors (ModelCertified.may_enter) the attack succeeded (SPD by race:
  evidence -0.2 in one world, -0.3 in the other); now the race cells are held.

Rounding the evidence to one decimal protects nothing here (one record moves it by tenths
of a decade): what protects is that a group under the support enters no detector and
that a held cell shows its released verdict. The record counts are the model's, so the
probe's label can show in their rounding to 5 (1,950 or 1,955 positives, third case) as it
shows, to this attacker, in the exact released value of EOPP by sex: the release rule's
accepted case (a change resting on a block of 1,000 records), not a group's figure.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.config import MonitorConfig, config_from_mapping
from monitor.core.results import CertifiedVerdict
from monitor.service.app import MonitorService

HOP = 1000
BASE_BLOCKS = 6
CFG = config_from_mapping(
    {
        "window": {"size": 10_000, "hop_records": HOP, "hop_seconds": 0},
        "axis1": {"K": 40},
        "equilense": {"features": []},
        "alerts": {"false_pages_per_year": 100.0},
        "models": [{"id": "big"}],
        "service": {"intake": {"event_time_bounds": "none"}},
    }
)
#: the probe's place in its block, and the two worlds' (label, score): the service derives
#: the decision from the score (threshold 0.5)
PROBE_AT = 500
WORLDS = {"negative": (0, 0.05), "positive": (1, 0.95)}
CERTIFIED_SERIES = (
    "vfr_cell_certified_verdict", "vfr_cell_certified_change_records",
    "vfr_certified_changes_total",
)  # fmt: skip
CellKey = tuple[str, str, str]


@dataclass(frozen=True)
class Answers:
    """What a reader sees of the certified verdicts at one point."""

    cells: dict[CellKey, dict[str, Any]]
    series: dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass(frozen=True)
class World:
    """A world's answers before and after the probe's hop, and the pipeline's live
    (computed, not published) certified verdicts after it."""

    before: Answers
    after: Answers
    live: dict[CellKey, CertifiedVerdict | None]


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def _answers(base_url: str) -> Answers:
    cells = {
        (c["model_id"], c["metric"], c["attribute"]): c
        for c in json.loads(_get(base_url + "/api/cells"))
    }
    series = {}
    for fam in text_string_to_metric_families(_get(base_url + "/metrics").decode()):
        for s in fam.samples:
            if s.name.startswith(CERTIFIED_SERIES):
                series[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return Answers(cells, series)


def _records(n: int, seed: int, prefix: str, start: int) -> pd.DataFrame:
    """``n`` scored records of model "big", 30 minutes of event time apart from record
    ``start`` on (the detectors weigh a block by its length in years)."""
    df = synthetic_window(n, models=1, seed=seed).drop(columns=["decision"])
    df["model_id"] = "big"
    df["record_id"] = [f"{prefix}{i}" for i in range(n)]
    t0 = pd.Timestamp("2026-01-01T00:00:00Z")
    df["event_time"] = [
        (t0 + pd.Timedelta(hours=3 * (start + i))).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(n)
    ]
    return df


def _stream(small: int, world: str) -> list[pd.DataFrame]:
    """The base (race "0" has ``small`` records, spread over it) and the probe's block (its
    only race "0" record is the probe, whose label and score are the world's)."""
    base = _records(BASE_BLOCKS * HOP, 11, "b", 0)
    base["race"] = np.where(base["race"] == "0", "1", base["race"])
    base.loc[base.index[:: len(base) // small][:small], "race"] = "0"
    block = _records(HOP, 13, "p", len(base))
    block["race"] = np.where(block["race"] == "0", "2", block["race"])
    label, score = WORLDS[world]
    block.loc[block.index[PROBE_AT], ["race", "label", "score"]] = ["0", label, score]
    return [base, block]


def _run(path: str, cfg: MonitorConfig, frames: list[pd.DataFrame]) -> World:
    svc = MonitorService(cfg, db_path=path, http_port=0, start_scheduler=False,
                         clock=lambda: 1_800_000_000.0)  # fmt: skip
    svc.start()
    try:
        seen, offset = [], 0
        for frame in frames:
            payloads = [json.dumps(r).encode() for r in frame.to_dict("records")]
            svc.pipeline.ingest_batch(
                payloads, [Origin("t", 0, offset + i) for i in range(len(payloads))]
            )
            svc.pipeline.flush()
            offset += len(payloads)
            seen.append(_answers(svc.api.url))
        live = {c.key: c.certified for c in svc.pipeline.latest_cells()}
        return World(seen[0], seen[1], live)
    finally:
        svc.close()


def _worlds(tmp_path_factory, small: int) -> Iterator[dict[str, World]]:
    d = tmp_path_factory.mktemp(f"certified-{small}")
    yield {w: _run(str(d / f"{w}.duckdb"), CFG, _stream(small, w)) for w in WORLDS}


@pytest.fixture(scope="module")
def small_group(tmp_path_factory):
    """Race "0" has 4 records, then 5 (the probe)."""
    yield from _worlds(tmp_path_factory, 4)


@pytest.fixture(scope="module")
def moving_group(tmp_path_factory):
    """Race "0" has about 130 records (it enters the detectors), and one in the probe's
    block: the probe."""
    yield from _worlds(tmp_path_factory, 130)


#: a window of two hops: a group of 5 records a block holds 10 in the window (under 11,
#: so it holds no release back) while its decayed trials (about 24) enter the detectors
SHORT_HOP = 500
SHORT = config_from_mapping(
    {
        "window": {"size": 2 * SHORT_HOP, "hop_records": SHORT_HOP, "hop_seconds": 0},
        "axis1": {"K": 40},
        "equilense": {"features": []},
        "alerts": {"false_pages_per_year": 100.0},
        "models": [{"id": "big"}],
        "service": {"intake": {"event_time_bounds": "none"}},
    }
)


def _short_stream(world: str, per_block: int = 5, blocks: int = 8) -> list[pd.DataFrame]:
    """Race "0" has ``per_block`` records in every block of :data:`SHORT`'s stream; in
    the probe's block one of them is the probe."""
    base = _records(blocks * SHORT_HOP, 11, "b", 0)
    base["race"] = np.where(base["race"] == "0", "1", base["race"])
    step = SHORT_HOP // per_block
    at = [b * SHORT_HOP + j * step for b in range(blocks) for j in range(per_block)]
    base.loc[base.index[at], "race"] = "0"
    block = _records(SHORT_HOP, 13, "p", len(base))
    block["race"] = np.where(block["race"] == "0", "2", block["race"])
    block.loc[block.index[[j * step + 7 for j in range(per_block)]], "race"] = "0"
    label, score = WORLDS[world]
    block.loc[block.index[7], ["label", "score"]] = [label, score]
    return [base, block]


@pytest.fixture(scope="module")
def fading_group(tmp_path_factory):
    """Race "0" has 10 records in a window of two hops, 5 of them in the probe's block."""
    d = tmp_path_factory.mktemp("certified-short")
    yield {w: _run(str(d / f"{w}.duckdb"), SHORT, _short_stream(w)) for w in WORLDS}


def _race(answers: Answers) -> dict[CellKey, dict[str, Any]]:
    return {k: c for k, c in answers.cells.items() if k[2] == "race"}


def _race_series(answers: Answers) -> dict:
    return {k: v for k, v in answers.series.items() if ("attribute", "race") in k[1]}


def _released_series(answers: Answers) -> dict:
    """The race cells' certified series that show a release (not the changes counter: a
    certified change is an event, counted when it happens as a verdict flip is)."""
    return {
        k: v for k, v in _race_series(answers).items()
        if k[0] != "vfr_certified_changes_total"
    }  # fmt: skip


def _judged(certified: dict[str, Any] | None) -> dict[str, Any] | None:
    """A published certified verdict without its record counts (model counts: below)."""
    if certified is None:
        return None
    return {k: v for k, v in certified.items() if k not in ("records", "last_change_records")}


def test_a_record_of_a_group_of_4_moves_no_certified_figure(small_group):
    """The probe's label and decision, in a group of 4 records, change no certified
    verdict, evidence or change of a race cell, in /api/cells or /metrics; what the counts
    hold of it they hold as one of the model's records, rounded."""
    neg, pos = small_group["negative"], small_group["positive"]
    # the race cells were released at the probe's hop: the attacker has two releases to
    # difference, across which the group went from 4 records to 5
    for k, c in _race(neg.after).items():
        assert c["evaluation"] == neg.before.cells[k]["evaluation"] + 1, k
    # the race cells (the group's attribute) tell the worlds apart by nothing but counts;
    # the other attributes' cells move with the probe's block of 1,000 records (their
    # groups moved by hundreds: the release rule's case, as their exact values do)
    for k, c in _race(neg.after).items():
        assert _judged(c["certified"]) == _judged(pos.after.cells[k]["certified"]), k
    assert _race_series(neg.after) == _race_series(pos.after)
    # the counts: the model's trials since the cell's last change (every group's; the
    # probe is one of its block's 1,000 records), rounded to 5 like every count
    for w in (neg, pos):
        for k, c in w.after.cells.items():
            cert = c["certified"]
            if cert is None:
                continue
            for n in (cert["records"], cert["last_change_records"]):
                assert n in (None, 0, "<11") or n % 5 == 0, (k, n)
    # not vacuous: the detectors have evidence (a block weighs its event time), and the
    # probe's label and decision do enter what the pipeline computes (the label-based
    # cells' trials): it is their publication that tells the worlds nothing
    evidence = [
        c["certified"]["evidence_fail"] for c in _race(neg.after).values()
        if c["certified"] and c["certified"]["evidence_fail"] is not None
    ]  # fmt: skip
    assert evidence and max(evidence) > -50
    moved = {k for k, v in neg.live.items() if v is not None and v != pos.live[k]}
    assert ("big", "EOPP", "race") in moved and ("big", "PP", "race") in moved


def test_one_record_of_an_entering_group_is_held_with_its_cells(moving_group):
    """The probe is the only record of its group in its block: the race cells hold their
    last release, certified verdict included, in both worlds alike (differencing the two
    releases gives nothing), although the pipeline's evidence moved with the probe."""
    neg, pos = moving_group["negative"], moving_group["positive"]
    for w in (neg, pos):
        assert _race(w.after) == _race(w.before)  # held: the same release, in full
        assert _released_series(w.after) == _released_series(w.before)
    assert _race(neg.after) == _race(pos.after)
    assert _released_series(neg.after) == _released_series(pos.after)
    # not vacuous: the group enters the detectors and the probe moved the race cells'
    # evidence (what would have been published live), at one decimal too
    live = [
        (neg.live[k], pos.live[k]) for k in _race(neg.after)
        if neg.live[k] is not None and neg.live[k].evaluable
    ]  # fmt: skip
    assert live
    moved = [
        (x, y) for a, b in live
        for x, y in ((a.evidence_fail, b.evidence_fail), (a.evidence_pass, b.evidence_pass))
        if x is not None and y is not None and round(x, 1) != round(y, 1)
    ]  # fmt: skip
    assert moved
    # the sex cells were released at that hop (their groups moved by hundreds)
    for k, c in neg.after.cells.items():
        if k[2] == "sex":
            assert c["evaluation"] == neg.before.cells[k]["evaluation"] + 1, k


def test_a_group_under_11_in_the_window_that_enters_the_detectors_holds_them(fading_group):
    """A group of 10 records in the window (5 a block) holds no release of the window's
    cells (it enters no value), but its decayed trials enter the certified detectors, so
    its 5 new records move the evidence: the release that shows that evidence would let
    the attacker read the probe's decision off one decimal. The race cells' certified
    verdicts are the same in both worlds."""
    neg, pos = fading_group["negative"], fading_group["positive"]
    for w in (neg, pos):  # held: the group of 10 moved by 10 and enters the detectors
        assert _race(w.after) == _race(w.before)
    for k, c in _race(neg.after).items():
        assert _judged(c["certified"]) == _judged(pos.after.cells[k]["certified"]), k
    assert _released_series(neg.after) == _released_series(pos.after)
    # not vacuous: the probe moved the computed evidence of a race cell (the group enters)
    moved = [
        k for k, v in neg.live.items()
        if k[2] == "race" and v is not None and v.evaluable
        and (v.evidence_fail, v.evidence_pass)
        != (pos.live[k].evidence_fail, pos.live[k].evidence_pass)
    ]  # fmt: skip
    assert moved
