"""The latest scheduled-axis results a pipeline's tier rule reads, per model.

Axis 2 (N*) and Axis 3 (hospital kappa) run on the scheduler, not on the stream; each new
result is handed to the pipeline (``Pipeline.set_axis_result``) and kept here typed, with
what each cell's tier reads of it (:meth:`AxisCache.outcomes`: the parts of a
:class:`~monitor.core.results.CellEvaluation`), so applying an evaluation never reads a
stored payload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result
from monitor.core.results import Axis2Outcome, Axis3Outcome

CellKey = tuple[str, str]  # (metric, attribute)


@dataclass
class AxisCache:
    """Latest scheduled-axis results per model (typed), and what each cell of a model
    takes of them: its Axis 2 and Axis 3 outcomes, by (metric, attribute)."""

    axis2: dict[str, tuple[Axis2Cell, ...]] = field(default_factory=dict)
    axis3: dict[str, Axis3Result] = field(default_factory=dict)
    axis2_outcomes: dict[str, dict[CellKey, Axis2Outcome]] = field(default_factory=dict)
    axis3_outcomes: dict[str, dict[CellKey, Axis3Outcome]] = field(default_factory=dict)

    def set_axis2(self, model_id: str, cells: Sequence[Axis2Cell]) -> None:
        self.axis2[model_id] = tuple(cells)
        self.axis2_outcomes[model_id] = {(c.metric, c.attribute): c.outcome() for c in cells}

    def set_axis3(self, model_id: str, result: Axis3Result) -> None:
        self.axis3[model_id] = result
        self.axis3_outcomes[model_id] = {
            (c.metric, c.attribute): result.outcome(c.metric, c.attribute) for c in result.cells
        }

    def outcomes(
        self, model_id: str, metric: str, attribute: str
    ) -> tuple[Axis2Outcome | None, Axis3Outcome | None]:
        """What the latest Axis 2 and Axis 3 results say of a cell (None: no result yet;
        a result that did not judge the cell says so: ``Axis3Result.outcome``)."""
        key = (metric, attribute)
        a2 = self.axis2_outcomes.get(model_id, {}).get(key)
        result = self.axis3.get(model_id)
        if result is None:
            return a2, None
        a3 = self.axis3_outcomes[model_id].get(key)
        return a2, result.outcome(metric, attribute) if a3 is None else a3

    def forget(self, model_id: str) -> None:
        for book in (self.axis2, self.axis3, self.axis2_outcomes, self.axis3_outcomes):
            book.pop(model_id, None)
