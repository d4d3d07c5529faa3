"""What changed: the change items the report opens with, from stored events and cells.

The rows are built as the report reads them (:func:`monitor.report.data.cell_from_result`
on stored result rows, events as stored), so the sentences are those of the page.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from monitor.config import MonitorConfig
from monitor.core.privacy import SMALL_CELL
from monitor.report.changes import model_changes, period_changes, reliable_verdict
from monitor.report.data import EventRow, ModelReport, ReportData, cell_from_result

LABELS = {"sex": {"0": "Male", "1": "Female"}, "race": {"0": "White", "1": "Black"}}
TAU = 0.10


def _cell(model: str, metric: str, attr: str, **kw):
    row = {"model_id": model, "metric": metric, "attribute": attr, "evaluation": 90,
           "window_n": 3000, "threshold": 0.8, "direction": ">=", "value": 0.61, "vfr": 0.0,
           "ci_low": 0.55, "ci_high": 0.66, "dominant_verdict": "fail",
           "point_verdict": "fail", "tier": "Practical-Stability",
           "confirmed_tier": "Practical-Stability", "confirmed_verdict": "fail",
           "n_pass": 0, "K": 200, "driver_rate": "SR", "low_group": "1", "high_group": "0",
           "low_rate": 0.27, "high_rate": 0.44, "low_share": 1.0, "high_share": 1.0}  # fmt: skip
    row.update(kw)
    return cell_from_result(row, None, LABELS)


def _flip(model: str, metric: str, attr: str, ev_id: int, old: str, new: str, month: int):
    return EventRow(
        kind="verdict_flip", model_id=model, metric=metric, attribute=attr, old=old, new=new,
        confirmed=True, direction=f"{old}_to_{new}", evaluation=ev_id, id=ev_id,
        at=datetime(2026, month, 3, tzinfo=UTC),
    )  # fmt: skip


def _model(model: str, cells, events) -> ModelReport:
    m = ModelReport(model_id=model, cells=list(cells), events=list(events))
    by_key = {c.key: c for c in m.cells}
    m.event_context = {e.id: by_key[(e.metric, e.attribute)] for e in events}
    return m


def _data(models, source: str = "database") -> ReportData:
    cfg = MonitorConfig()
    return ReportData(
        source=source, source_name="t", generated_at=datetime.now(UTC), version="t",
        config_hash="x", config_hash_kind="thresholds", period=None, models=list(models),
        metrics=["DI", "SPD"], attributes=["sex", "race"], group_labels=LABELS, tau=TAU,
        cv_cutoff=cfg.axis2.cv_cutoff, n_field=cfg.axis2.n_field,
        kappa_cutoff=cfg.axis3.kappa_cutoff, confirm_windows=cfg.confirm_windows,
    )  # fmt: skip


def test_a_settled_change_to_fail_reads_in_plain_words_with_group_names():
    m = _model("los-xgb-discharge", [_cell("los-xgb-discharge", "DI", "sex")],
               [_flip("los-xgb-discharge", "DI", "sex", 40, "pass", "fail", 7)])  # fmt: skip
    (x,) = model_changes(m, _data([m]))
    assert (x.kind, x.old, x.new, x.to_fail) == ("verdict_change", "pass", "fail", True)
    assert x.sentence == (
        "DI by sex of los-xgb-discharge went from pass to fail in July 2026: Female patients "
        "are selected at 0.27 against 0.44 for Male patients; stable since (flip rate 0.00)."
    )


def test_an_unreliable_tier_is_not_a_settled_change_but_a_coin_toss():
    """The demo summary's error: a Catastrophic cell listed as "changed and stable now"."""
    assert not reliable_verdict(0.02, TAU, "Catastrophic-Instability")
    assert not reliable_verdict(0.0, TAU, "High-Variance")
    assert reliable_verdict(0.0, TAU, "Caution-Required") and not reliable_verdict(None, TAU, None)
    for kw in ({"tier": "Catastrophic-Instability"}, {"confirmed_tier": "High-Variance"},
               {"vfr": 0.3}):  # fmt: skip
        c = _cell("m", "PP", "sex", **kw)
        m = _model("m", [c], [_flip("m", "PP", "sex", 5, "pass", "fail", 3)])
        (x,) = model_changes(m, _data([m]))
        assert x.kind == "coin_toss" and x.cells == (("PP", "sex"),), kw


def test_cells_that_flip_back_and_forth_are_one_summary_not_a_list_of_flips():
    cells = [_cell("m", "DI", "race", vfr=0.4, dominant_verdict="pass"),
             _cell("m", "SPD", "race", vfr=0.05, dominant_verdict="pass"),
             _cell("m", "DI", "sex", dominant_verdict="pass", vfr=0.0)]  # fmt: skip
    events = []
    for k in range(6):  # DI by race: 6 flips, ends where it began
        a, b = ("pass", "fail") if k % 2 == 0 else ("fail", "pass")
        events.append(_flip("m", "DI", "race", 10 + k, a, b, 2 + k))
    events += [_flip("m", "SPD", "race", 30, "pass", "fail", 3),
               _flip("m", "SPD", "race", 31, "fail", "pass", 4)]  # fmt: skip
    m = _model("m", cells, events)
    items = model_changes(m, _data([m]))
    assert [x.kind for x in items] == ["coin_toss"]
    s = items[0].sentence
    assert s.startswith("2 cells of m have a coin-toss verdict (8 confirmed flips in the period)")
    assert "DI by race (6 flips, flip rate 0.40), SPD by race (2 flips, flip rate 0.05)" in s
    one = _model("m", cells[:1], events[:1])
    (x,) = model_changes(one, _data([one]))
    assert x.sentence.startswith("1 cell of m has a coin-toss verdict (1 confirmed flip ")
    assert "It flips back and forth" in x.sentence


def test_a_withheld_cell_is_counted_with_no_verdict_or_figure():
    small = _cell("m", "DI", "sex", window_n=SMALL_CELL - 1)
    m = _model("m", [small], [_flip("m", "DI", "sex", 4, "pass", "fail", 5)])
    (x,) = model_changes(m, _data([m]))
    assert x.kind == "withheld"
    assert "fail" not in x.sentence and not re.search(r"\d\.\d", x.sentence)
    assert f"fewer than {SMALL_CELL} records" in x.sentence


def test_a_withheld_group_reads_a_small_group_with_no_figure():
    c = _cell("m", "DI", "sex", low_group=None, low_withheld=True, low_rate=None,
              low_share=None)  # fmt: skip
    m = _model("m", [c], [_flip("m", "DI", "sex", 4, "pass", "fail", 5)])
    (x,) = model_changes(m, _data([m]))
    assert ": a small group is selected against 0.44 for Male patients;" in x.sentence
    assert "0.27" not in x.sentence


def test_models_needing_attention_come_first():
    quiet = _model("a-control", [_cell("a-control", "DI", "sex", dominant_verdict="pass")], [])
    toss = _model("b-noisy", [_cell("b-noisy", "DI", "race", dominant_verdict="pass",
                                    vfr=0.45)], [])  # fmt: skip
    hit = _model("c-updated", [_cell("c-updated", "DI", "sex"), _cell("c-updated", "DI", "race")],
                 [_flip("c-updated", "DI", "sex", 9, "pass", "fail", 7)])  # fmt: skip
    got = period_changes(_data([quiet, toss, hit]))
    assert [a.model_id for a in got] == ["c-updated", "b-noisy", "a-control"]
    assert got[0].line == (
        "needs attention: 1 verdict changed to fail; 1 other cell fails reliably (of 2 cells)."
    )
    assert got[1].line == "to watch: 1 coin-toss verdict (of 1 cell)."
    assert got[2].line == "no change; every verdict of its 1 cell passes reliably."


def test_an_audit_lists_its_reliable_failures_without_history():
    c = _cell("m", "DI", "sex")
    m = _model("m", [c, _cell("m", "DI", "race", dominant_verdict="pass")], [])
    (x,) = model_changes(m, _data([m], source="audit"))
    assert x.kind == "still_failing"
    assert x.sentence.startswith("DI by sex of m fails: Female patients are selected at 0.27")
