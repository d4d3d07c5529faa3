"""The latest scheduled-axis results a pipeline's tier rule reads, per model.

Axis 2 (N*) and Axis 3 (hospital kappa) run on the scheduler, not on the stream; each new
result is handed to the pipeline (``Pipeline.set_axis_result``) and kept here typed, with
the lookups an evaluation's tier reads from it, so applying an evaluation never reads a
stored payload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result


@dataclass
class AxisCache:
    """Latest scheduled-axis results per model (typed), and the lookups the tier rule
    reads from them: N* and kappa per (metric, attribute), whether Axis 3 applies."""

    axis2: dict[str, tuple[Axis2Cell, ...]] = field(default_factory=dict)
    axis3: dict[str, Axis3Result] = field(default_factory=dict)
    n_star: dict[str, dict[tuple[str, str], float]] = field(default_factory=dict)
    kappa: dict[str, dict[tuple[str, str], float]] = field(default_factory=dict)
    axis3_applicable: dict[str, bool] = field(default_factory=dict)

    def set_axis2(self, model_id: str, cells: Sequence[Axis2Cell]) -> None:
        self.axis2[model_id] = tuple(cells)
        # n_star is math.inf when not reached below the cohort size
        self.n_star[model_id] = {(c.metric, c.attribute): c.n_star for c in cells}

    def set_axis3(self, model_id: str, result: Axis3Result) -> None:
        self.axis3[model_id] = result
        self.axis3_applicable[model_id] = result.applicable
        self.kappa[model_id] = {(c.metric, c.attribute): c.kappa for c in result.cells}

    def forget(self, model_id: str) -> None:
        for book in (self.axis2, self.axis3, self.n_star, self.kappa, self.axis3_applicable):
            book.pop(model_id, None)
