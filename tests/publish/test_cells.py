"""monitor.publish.cells: cell, window, event and audit rows as they leave the service."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from monitor.core.privacy import SMALL_CELL, SMALL_CELL_LABEL, rounded_count
from monitor.publish.cells import (
    CELL_IDENTITY,
    EVENT_IDENTITY,
    published_audit_cell,
    published_cell,
    published_evaluation,
    published_event_rows,
    published_windows,
    withhold,
)
from tests.support.exporter_state import make_cell

ROW = {"model_id": "m", "metric": "DI", "attribute": "race", "evaluation": 3, "value": 0.9,
       "vfr": 0.2, "tier": "Practical-Stability", "window_n": 87, "resample_n": 87}  # fmt: skip


@given(st.integers(0, 10_000))
def test_a_row_shows_figures_only_from_eleven_records(n):
    """Below the rule every field but the identity reads "<11" (the row stays); from 11
    on the figures are unchanged and only the record counts are rounded."""
    out = published_cell({**ROW, "window_n": n, "resample_n": n}, n)
    if n < SMALL_CELL:
        assert out == {k: v if k in CELL_IDENTITY else SMALL_CELL_LABEL for k, v in ROW.items()}
        assert withhold(dict(ROW), n) == out
    else:
        assert (out["value"], out["vfr"], out["tier"]) == (0.9, 0.2, "Practical-Stability")
        assert out["window_n"] == out["resample_n"] == rounded_count(n)


def test_a_cells_prediction_counts_leave_the_service_rounded():
    """The two new record counts of a cell are published like window_n (rounded to 5)."""

    row = {"metric": "EOPP", "window_n": 87, "predictions": 143, "with_outcome": 87}
    out = published_cell(row, 87)
    assert (out["window_n"], out["predictions"], out["with_outcome"]) == (85, 145, 85)


def test_an_evaluation_is_published_from_its_stored_form_and_window():
    for n in (8, 5003):
        cell = make_cell(window_n=n)
        assert published_evaluation(cell) == published_cell(cell.to_dict(), n)
    small = published_evaluation(make_cell(window_n=8))
    assert small["value"] == small["tier"] == SMALL_CELL_LABEL and small["metric"] == "DI"
    assert published_evaluation(make_cell(window_n=5003))["window_n"] == 5005


def test_window_rows_keep_their_seed_and_each_is_judged_on_its_own_size():
    rows = [{**ROW, "seed": 7, "window_n": 8}, {**ROW, "seed": 9, "window_n": 88}]
    small, big = published_windows(rows)
    assert small["seed"] == 7 and small["value"] == SMALL_CELL_LABEL
    assert big["seed"] == 9 and big["value"] == 0.9 and big["window_n"] == 90


def test_an_event_of_a_small_window_keeps_its_identity_only():
    event = {"id": 1, "created_at": "t", "kind": "verdict_flip", "model_id": "m",
             "metric": "DI", "attribute": "race", "confirmed": True, "evaluation": 3,
             "decision_config": "", "old": "pass", "new": "fail", "explanation": "..."}  # fmt: skip
    other = {**event, "id": 2, "evaluation": 4}
    small, big = published_event_rows([event, other], {("m", 3): 8, ("m", 4): 40})
    assert small == {k: v if k in EVENT_IDENTITY else SMALL_CELL_LABEL for k, v in event.items()}
    assert big == other
    # an evaluation whose size is unknown (no stored window) is withheld too
    assert published_event_rows([event], {})[0]["old"] == SMALL_CELL_LABEL


def test_audit_cell_round_trip_and_withheld_cells(tmp_path):
    from batch_axes.audit_cell import audit_cell_from_row, audit_row
    from monitor.audit.run import run_audit
    from monitor.config import config_from_mapping

    rng = np.random.default_rng(1)
    rows = [{"record_id": i, "model_id": m, "score": rng.uniform(),
             "label": int(rng.integers(0, 2)), "race": int(rng.integers(0, 5)), "sex": i % 2,
             "ethnicity": 1, "age_group": 2}
            for m, n in (("big", 300), ("tiny", 8)) for i in range(n)]  # fmt: skip
    pd.DataFrame(rows).to_csv(tmp_path / "in.csv", index=False)
    cfg = config_from_mapping({"axis1": {"K": 30}, "axis2": {"sizes": [50, 100], "R": 3}})
    cells = run_audit(tmp_path / "in.csv", cfg).cells
    exact = 0
    for c in cells:
        back = audit_cell_from_row(
            json.loads(json.dumps(published_audit_cell(c), allow_nan=False))
        )
        assert published_audit_cell(back) == published_audit_cell(c)
        assert back.withheld == c.withheld == (c.model_id == "tiny")
        r = c.result
        figures = (r.value, r.sigma, r.ci_low, r.ci_high, r.min_denominator)
        if not c.withheld and not any(math.isnan(x) for x in figures):
            # counts leave rounded to 5 (monitor.publish.counts.published_count), the rest exact
            published = replace(c, result=replace(
                r, window_n=rounded_count(r.window_n), resample_n=rounded_count(r.resample_n),
                min_denominator=float(rounded_count(r.min_denominator)),
            ))  # fmt: skip
            assert audit_row(back) == audit_row(published)
            assert (back.tier, back.axis2) == (c.tier, c.axis2)
            exact += 1
    assert exact
