"""The method's own constants and its metric rule: what docs/method.md fixes, not a setting
of one service.

Why here, in the bottom layer: the statistics (this package) are the method; the
configuration (:mod:`monitor.config`) is one service's choice of settings for it and is
built on top (it validates a file against these names and limits). So the core imports
no service configuration: the small-cell size, the metric names, how an intersection's
groups are coded and named, and what a metric rule is, live with the statistics that
use them, and :mod:`monitor.config` re-exports them for its readers.

>>> MetricRule(name="DI", threshold=0.8, direction=">=")
MetricRule(name='DI', threshold=0.8, direction='>=')
>>> try:
...     MetricRule(name="XYZ", threshold=0.1, direction="<=")
... except ValueError as e:
...     print(e.errors()[0]["msg"])
Value error, unknown metric 'XYZ'; allowed: DI, SPD, EOPP, EOD, TI, PP, CAL, CAL_GAP
>>> intersection_name(("race", "sex"))
'race_x_sex'
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

#: How a metric's value passes its threshold (docs/method.md section 2).
Direction = Literal[">=", "<=", "abs<="]

#: Metric names the engine knows (docs/method.md section 2, plus the named calibration variant).
KNOWN_METRICS: tuple[str, ...] = ("DI", "SPD", "EOPP", "EOD", "TI", "PP", "CAL", "CAL_GAP")

#: docs/method.md section 2 defaults: threshold and pass direction per metric.
DEFAULT_METRIC_RULES: dict[str, dict[str, Any]] = {
    "DI": {"threshold": 0.80, "direction": ">="},
    "SPD": {"threshold": 0.10, "direction": "abs<="},
    "EOPP": {"threshold": 0.10, "direction": "abs<="},
    "EOD": {"threshold": 0.10, "direction": "abs<="},
    "TI": {"threshold": 0.10, "direction": "<="},
    "PP": {"threshold": 0.10, "direction": "abs<="},
    "CAL": {"threshold": 0.05, "direction": "<="},
}

#: Fewer records than this and a figure is withheld (:data:`monitor.core.privacy.SMALL_CELL`).
SMALL_CELL_RECORDS = 11

#: Records a group needs before its rates count (docs/method.md section 9 default of
#: axis1.min_group_support; the axes' functions default to it too).
MIN_GROUP_SUPPORT = 20

#: Joins the group codes of an intersection's attributes into one code ("2" and "1" of race
#: and sex: "2:1"); exported as a label value, so no space, quote or backslash.
INTERSECTION_CODE_SEP = ":"

#: Joins the group labels into the readable name of an intersection group ("Black x Female").
INTERSECTION_LABEL_SEP = " x "

#: Joins the attribute names of an intersection into its own name ("race_x_sex").
INTERSECTION_NAME_SEP = "_x_"


def intersection_name(attributes: tuple[str, ...] | list[str]) -> str:
    """The attribute name of an intersection: ``("race", "sex")`` -> ``"race_x_sex"``."""
    return INTERSECTION_NAME_SEP.join(attributes)


class MetricRule(BaseModel):
    """A metric of the audit grid and its pass rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    threshold: float
    direction: Direction

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in KNOWN_METRICS:
            raise ValueError(f"unknown metric {v!r}; allowed: {', '.join(KNOWN_METRICS)}")
        return v
