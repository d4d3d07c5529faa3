"""One model's in-memory state in the pipeline, and the read-only view the service shows.

Everything the pipeline keeps about a model lives in one :class:`ModelState`, so dropping
a model (its partition revoked) or rebuilding it from the store is one dict operation:
no per-model map can be forgotten when a model goes or comes back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from monitor.core.events import CellTracker
from monitor.core.results import CellEvaluation
from monitor.store.codec import ModelStateRow, encode_releases
from monitor.stream.certified import ModelCertified
from monitor.stream.publication import ModelPublication, PublishedModel
from monitor.stream.window import ModelWindow, RecordBatch, WindowCoverage

if TYPE_CHECKING:  # the joins' module imports the store; the state only calls its cursor
    from monitor.stream.join_windows import JoinCursor

#: a cell of one model: (metric, attribute)
CellKey = tuple[str, str]


@dataclass(frozen=True)
class GroupSummary:
    """A group's records in a model's window, and how many of them have decision 1."""

    records: int
    selected: int

    @property
    def selection_rate(self) -> float:
        return self.selected / self.records if self.records else 0.0


@dataclass(frozen=True)
class ModelView:
    """What the service shows of a model's stream state (a copy: safe outside the lock)."""

    model_id: str
    #: records in the window now
    window_records: int
    #: records of this model accepted so far (its stream position)
    arrivals: int
    #: records that arrived older than the time window (a running total)
    old_events: int
    #: numbered (hop) evaluations so far
    evaluations: int
    #: attribute -> group code -> its records and selected records
    groups: Mapping[str, Mapping[str, GroupSummary]] = field(default_factory=dict)
    #: what the model publishes (window size and groups as last released)
    published: PublishedModel = field(default_factory=PublishedModel)
    #: outcome coverage of the window now (outcomes later): predictions, with an outcome,
    #: expired, delay histogram, per attribute and group (monitor.stream.window)
    coverage: WindowCoverage | None = None


@dataclass
class ModelState:
    """A model's window, cell trackers, latest cell evaluations and evaluation counters."""

    window: ModelWindow
    #: numbered evaluations so far (interim ones keep the last hop's number)
    evaluations: int = 0
    #: end count of the last written evaluation (None: never evaluated)
    evaluated: int | None = None
    #: records not seen by any evaluation yet (what a wall-clock hop may evaluate)
    since_eval: int = 0
    #: wall time (Unix seconds) of the last evaluation: the wall-clock hop cadence
    last_eval_wall: float = 0.0
    trackers: dict[CellKey, CellTracker] = field(default_factory=dict)
    latest: dict[CellKey, CellEvaluation] = field(default_factory=dict)
    #: the release books: what of the evaluations leaves the service
    publication: ModelPublication = field(default_factory=ModelPublication)
    #: the certified verdicts, fed a block at each hop evaluation (monitor.stream.certified)
    certified: ModelCertified = field(init=False)

    def __post_init__(self) -> None:
        self.certified = ModelCertified(self.window.model_id, self.window.config)

    @property
    def model_id(self) -> str:
        return self.window.model_id

    def add_to_hops(self, batch: RecordBatch, hop: int) -> Iterator[int]:
        """Add newly stored records (arrival order) to the window, stopping at each hop
        point (a stream position that is a multiple of ``hop``) to yield it: the caller
        evaluates the window there, before the next records enter it."""
        w = self.window
        i = 0
        while i < len(batch):
            take = min(hop - w.arrivals % hop, len(batch) - i)
            part = batch.take(slice(i, i + take))
            self.certified.add_predictions(part, w.arrivals)  # before a time window drops any
            w.add(part)
            self.since_eval += take
            i += take
            if w.arrivals % hop == 0:
                yield w.arrivals

    def apply_joins(self, cursor: JoinCursor, upto: int | None) -> None:
        """The batch's outcomes that count by stream position ``upto`` (None: the rest)
        joined to the window, and counted in their certified blocks."""
        joined = cursor.apply(self.window, upto)
        if joined is not None:
            self.certified.add_outcomes(*joined, self.window.arrivals)

    def mark_evaluated(self, wall: float) -> None:
        """An evaluation of the window as it is now was taken at ``wall`` (Unix seconds):
        nothing is left for a wall-clock hop, whose cadence starts again."""
        self.since_eval = 0
        self.last_eval_wall = wall

    def resume(self, last_eval_wall: float) -> None:
        """After a restore: the records no written evaluation saw are what a wall-clock hop
        may evaluate (none when the last one saw the whole window, so a restart never
        evaluates an unchanged window again), and the cadence goes on from the last stored
        evaluation's time."""
        self.since_eval = self.window.arrivals - (self.evaluated or 0)
        self.last_eval_wall = last_eval_wall

    def saved_row(self, at: pd.Timestamp) -> ModelStateRow:
        """The model's ``model_state`` row as of ``at``: with its stream position go its
        cells' release points and certified state, so a restart releases and certifies
        exactly as an uninterrupted run."""
        w = self.window
        return ModelStateRow(
            self.model_id, w.arrivals, self.evaluations, w.old_events, at, self.evaluated or 0,
            encode_releases(self.publication.saved()), self.certified.saved(),
        )  # fmt: skip

    def view(self) -> ModelView:
        w = self.window
        groups = {}
        for attr, table in w.prediction_tables().items():
            sizes, selected = table.group_counts(), table.selected_counts()
            groups[attr] = {
                g: GroupSummary(int(n), int(s))
                for g, n, s in zip(table.groups, sizes, selected, strict=True)
            }
        return ModelView(
            self.model_id, w.n, w.arrivals, w.old_events, self.evaluations, groups,
            self.publication.model, w.coverage(),
        )  # fmt: skip
