"""monitor.publish.events: events carry no figure of their window."""

from __future__ import annotations

from monitor.core.events import CellEvent
from monitor.publish.events import EVENT_FIGURES, published_events


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
