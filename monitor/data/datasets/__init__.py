"""Real discharge datasets mapped onto the monitor's record schema.

A loader turns a public file into a :class:`Dataset`: one row per discharge with
``record_id``, ``event_time`` (UTC), the protected attributes as the string
codes of ``attributes``, ``label`` (1 = LOS > 3 days) and numeric clinical
feature columns, plus ``hospital_id`` only when the file really has a site id.
The scorer (monitor.data.scorer) trains on the feature columns and the demo streams
the scored rows, so every dataset runs through the same pipeline.

Why a separate type rather than a bare frame: what a dataset *lacks* changes
the audit. A file without site ids has no Axis 3 (it is reported not
applicable, never faked with invented hospitals), and a file without dates
gets a replay clock that the summary must call a replay clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Dataset:
    """A discharge cohort in the monitor's schema, not yet scored."""

    name: str
    frame: pd.DataFrame
    #: Numeric columns of ``frame`` the scorer may train on.
    features: tuple[str, ...]
    #: ``MonitorConfig.attributes`` entries (name + group code -> label) for this data.
    attributes: list[dict[str, Any]]
    #: True when ``frame`` has a real ``hospital_id`` (Axis 3 applies).
    has_sites: bool
    #: True when ``event_time`` comes from the file; False for a replay clock.
    real_dates: bool
    #: Source and licence, printed by the demo.
    credit: str
    #: Anything the user should know when reading results (coding caveats, dropped rows).
    notes: list[str] = field(default_factory=list)
