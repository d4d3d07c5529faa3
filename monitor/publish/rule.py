"""The small-cell rule as an output states it or checks it.

An output names the threshold in its sentences ("fewer than 11 records"), shows the label
in place of a withheld figure and checks whether a figure it received may be shown; it
takes these from here, not from :mod:`monitor.core.privacy` (an import-linter contract),
so everything an output knows of the rule goes through this package.

>>> SMALL_CELL, SMALL_CELL_LABEL, ROUNDING_BASE
(11, '<11', 5)
>>> reportable(10), published(10)
(False, True)
"""

from __future__ import annotations

from monitor.core.privacy import (
    RATE_DECIMALS,
    ROUNDING_BASE,
    SMALL_CELL,
    SMALL_CELL_LABEL,
    published,
    reportable,
)

__all__ = [
    "RATE_DECIMALS",
    "ROUNDING_BASE",
    "SMALL_CELL",
    "SMALL_CELL_LABEL",
    "published",
    "reportable",
]
