"""monitor.publish.events: events carry no figure of their window."""

from __future__ import annotations

from monitor.core.events import CellEvent
from monitor.publish.events import EVENT_FIGURES, event_row, published_events


def test_an_event_keeps_its_verdicts_and_axes_but_not_the_windows_figures():
    axes = {"value": 0.71, "sigma": 2.3, "vfr": 0.4, "n_star": 4000.0, "kappa": 0.5,
            "tier": "Caution-Required"}  # fmt: skip
    event = CellEvent("verdict_flip", "m", "DI", "race", "pass", "fail", True, "pass_to_fail",
                      7, dict(axes), {**axes, "value": 0.83})  # fmt: skip
    (out,) = published_events([event])
    assert out.axes == {k: v for k, v in axes.items() if k not in EVENT_FIGURES}
    assert out.axes_before == out.axes  # the before side loses the same keys
    assert (out.kind, out.old, out.new, out.evaluation) == ("verdict_flip", "pass", "fail", 7)
    assert event.axes["value"] == 0.71  # the input is not changed
    assert {"value", "sigma"} == EVENT_FIGURES


def test_an_event_row_is_its_stored_fields_in_the_tables_column_order():
    event = CellEvent("tier_change", "m", "DI", "race", "Pending", "Caution-Required", False,
                      None, 3, {"vfr": 0.2}, {})  # fmt: skip
    row = event_row(event, id=9, created_at="2026-11-02 00:00:00+00:00", decision_config="d1")
    assert list(row) == [
        "id", "created_at", "kind", "model_id", "metric", "attribute", "old", "new",
        "confirmed", "direction", "evaluation", "axes", "decision_config", "axes_before",
    ]  # fmt: skip
    assert row["id"] == 9 and row["decision_config"] == "d1" and row["axes"] == {"vfr": 0.2}
    assert (row["kind"], row["old"], row["new"], row["evaluation"]) == (
        "tier_change", "Pending", "Caution-Required", 3
    )
