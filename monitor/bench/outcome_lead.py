"""`vfr-monitor bench outcomes`: what predictions-now, outcomes-later gains.

The demo year is run headless (``--rate 0``) in two modes on the same scored stream,
scored at admission in both:

* ``joined``: each record sent once, at discharge, with its outcome (what a hospital that
  builds the join itself can send);
* ``delayed``: the prediction at admission, the outcome at discharge.

The planted model update (``group_score_shift``: los-xgb-discharge lowers female
patients' scores from 2026-07-01) turns Disparate Impact by sex from pass to fail. The
**lead time** is how much earlier, in stream time, the delayed run confirms that flip:
the event time of the evaluation that confirmed it (the time of the window's last message,
as the report and the alerts date an evaluation), joined minus delayed.

A third run adds an outcome bias (a share of one group's outcomes missing) and reports the
coverage figure the service published for that attribute and which label-based cells say
"outcomes incomplete".

Everything is read back from each run's DuckDB file (read-only), so the figures are the
service's own, not recomputed here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from monitor.core.coverage import needs_outcome
from monitor.publish.counts import published_count
from monitor.store import queries

PLANTED = ("los-xgb-discharge", "DI", "sex")
#: when the planted update starts to act (monitor.data.cohort.DRIFT_START)
UPDATE_START = "2026-07-01T00:00:00Z"
#: the metrics whose flips are compared (label-free first)
METRICS = ("DI", "SPD", "EOPP", "EOD", "PP", "CAL", "TI")

#: runs the headless demo: (outcomes mode, outcome bias text or None, out dir) -> DuckDB file
DemoRunner = Callable[[str, str | None, str], str]


def first_confirmed_flip(
    db: str | Path,
    cell: tuple[str, str, str] = PLANTED,
    direction: str = "pass_to_fail",
    since: str | None = UPDATE_START,
) -> dict[str, Any] | None:
    """The first confirmed verdict flip of ``cell`` in ``direction`` at or after ``since``
    (stream time; default: the model update, so a noise flip before it is not taken for
    the update's): its evaluation and the evaluation's stream time (None: no such flip)."""
    start = None if since is None else pd.Timestamp(since)
    c = duckdb.connect(str(db), read_only=True)
    try:
        times = queries.evaluation_times(c)
        for e in queries.confirmed_events(c):
            if (e.model_id, e.metric, e.attribute) != cell or e.kind != "verdict_flip":
                continue
            at = times.get((e.model_id, e.evaluation))
            if start is not None and (at is None or pd.Timestamp(at) < start):
                continue
            if e.direction == direction:
                return {"evaluation": int(e.evaluation), "at": None if at is None else str(at)}
    finally:
        c.close()
    return None


def label_cells(db: str | Path, model: str = PLANTED[0]) -> list[dict[str, Any]]:
    """The released label-based cells of ``model`` at the end of the run: what each rests on
    (predictions, those with an outcome) and its outcome coverage and reason."""
    c = duckdb.connect(str(db), read_only=True)
    try:
        rows = queries.latest_cells(c, model)
    finally:
        c.close()
    out = []
    for r in sorted(rows, key=lambda r: (r.result.attribute, r.result.metric)):
        if not needs_outcome(r.result.metric):
            continue
        cov = r.outcome_coverage
        out.append(
            {
                "cell": f"{r.result.metric} x {r.result.attribute}",
                # counts as the service publishes them (rounded to 5, withheld under 11)
                "predictions": _published(r.predictions),
                "with_outcome": _published(r.with_outcome),
                "verdict": r.result.dominant_verdict,
                "coverage_gap": None if cov is None else cov.gap,
                "coverage": {} if cov is None else {g.group: g.coverage for g in cov.groups},
                "reason": r.coverage_reason,
            }
        )
    return out


def _days(later: str | None, earlier: str | None) -> float | None:
    if later is None or earlier is None:
        return None
    delta = pd.Timestamp(later) - pd.Timestamp(earlier)
    return round(delta.total_seconds() / 86_400, 2)


def flip_leads(
    joined_db: str | Path, delayed_db: str | Path, metrics: tuple[str, ...] = METRICS
) -> dict[str, dict[str, Any]]:
    """Per metric of the planted cell's model and attribute: the first confirmed pass ->
    fail flip in each run and how many days earlier the delayed run confirmed it."""
    out = {}
    for m in metrics:
        cell = (PLANTED[0], m, PLANTED[2])
        j, d = first_confirmed_flip(joined_db, cell), first_confirmed_flip(delayed_db, cell)
        out[m] = {
            "joined": None if j is None else j["at"],
            "delayed": None if d is None else d["at"],
            "lead_days": _days(None if j is None else j["at"], None if d is None else d["at"]),
        }
    return out


def run_outcome_lead(run_demo: DemoRunner, out_dir: str, bias: str | None) -> dict[str, Any]:
    """The lead time of the planted DI flip (joined vs delayed) and, with ``bias``, the
    coverage figures of a delayed run with that outcome bias."""
    root = Path(out_dir)
    joined = first_confirmed_flip(run_demo("joined", None, str(root / "joined")))
    delayed_db = run_demo("delayed", None, str(root / "delayed"))
    delayed = first_confirmed_flip(delayed_db)
    out: dict[str, Any] = {
        "cell": " ".join(PLANTED),
        "joined_flip": joined,
        "delayed_flip": delayed,
        "lead_days": _days(
            None if joined is None else joined["at"], None if delayed is None else delayed["at"]
        ),
        # the other cells the update flips: label-free ones gain, label-based ones wait
        "by_metric": flip_leads(str(root / "joined" / "synthetic.duckdb"), delayed_db),
        "delayed_label_cells": label_cells(delayed_db),
    }
    if bias is not None:
        biased_db = run_demo("delayed", bias, str(root / "biased"))
        cells = label_cells(biased_db)
        out["bias"] = bias
        out["biased_flip"] = first_confirmed_flip(biased_db)
        out["biased_label_cells"] = cells
    return out


def _published(n: Any) -> Any:
    """A stored count as the API shows it (None: not stored)."""
    return None if n is None else published_count(n)
