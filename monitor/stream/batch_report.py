"""What one ingest call did, for the observer (the service's metrics): aggregates only.

A :class:`BatchReport` is made under the pipeline's lock and handed to the observer once
the lock is released (``Pipeline._locked``); it holds counts, the evaluations' cells and
events, and per model the new records' (label, score, decision) arrays for model health,
never a record's identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from monitor.core.events import CellEvent
from monitor.core.results import CellEvaluation


@dataclass
class BatchReport:
    """What one ingest call did (for metrics; aggregates only)."""

    received: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    evaluations: list[tuple[str, float]] = field(default_factory=list)  # (model, seconds)
    cells: list[CellEvaluation] = field(default_factory=list)
    events: list[CellEvent] = field(default_factory=list)
    drift: list[tuple[str, str, str]] = field(default_factory=list)
    #: per model, the new records' (label, score, decision) for model-health tracking
    new_records: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: what the batch's outcome messages did, by case (monitor.stream.join_rules.JoinCase)
    outcomes: dict[str, int] = field(default_factory=dict)
