"""Where an ingest batch's time goes: wall and CPU seconds per stage, summed over batches.

For ``vfr-monitor bench ingest`` (aggregates only, never record values). The stages are
the data path's, in its order; :class:`~monitor.stream.pipeline.Pipeline` and
:class:`~monitor.stream.intake.Intake` time themselves into one :class:`PipelineStats`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

#: ingest stages timed by :class:`PipelineStats`, in data-path order
STAGES = ("decode", "validate", "store", "window", "evaluate", "state", "commit")


@dataclass
class PipelineStats:
    """Wall and CPU seconds spent in each ingest stage, summed over batches.

    ``decode``: payloads to values (bulk or per message); ``validate``: the field rules and
    admission; ``store``: content hashes, deduplication and insert of records and dead
    letters; ``window``: count tables and hop points; ``evaluate``: tiers, trackers and
    events of the worker's finished evaluations; ``state``: the models' stream positions
    and evaluations written; ``commit``: the transaction's commit. CPU is the process's
    (DuckDB's threads included, the evaluation worker process not).

    >>> stats = PipelineStats()
    >>> with stats.stage("decode"):
    ...     pass
    >>> stats.records = 10
    >>> sorted(stats.per_record_us())[:2]
    ['commit_us', 'decode_us']
    """

    records: int = 0
    batches: int = 0
    #: batches that took the per-message path (a layout the bulk path does not judge
    #: exactly; see :meth:`monitor.stream.intake.Intake.check`)
    per_message_batches: int = 0
    #: of those, batches on which the columnar path raised (a defect: tests expect none)
    columnar_errors: int = 0
    wall_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    cpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        w, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall_s[name] += time.perf_counter() - w
            self.cpu_s[name] += time.process_time() - c

    def per_record_us(self, cpu: bool = False) -> dict[str, float]:
        """Microseconds per record of each stage (wall, or CPU)."""
        n = max(self.records, 1)
        src = self.cpu_s if cpu else self.wall_s
        return {f"{k}_us": round(v / n * 1e6, 2) for k, v in src.items()}
