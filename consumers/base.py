"""What every source shares: where a payload came from, what it is handed to, lag.

Sources (Kafka, embedded replay) push raw payloads into a :class:`Sink`; the stream
pipeline implements it. The protocol lives here, at the bottom, so that sources never
import the pipeline and the pipeline never imports a particular source.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple, Protocol

#: Unprocessed messages per (topic, partition).
LagReport = dict[tuple[str, int], int]


class Origin(NamedTuple):
    """Where a payload came from (Kafka coordinates, or the embedded source's own).

    A named tuple, not a frozen dataclass: one is made per message on the ingest thread,
    and a frozen dataclass costs about twice as long to build (~0.5 us a message).
    """

    topic: str
    partition: int
    offset: int


class Sink(Protocol):
    """What a source feeds: the pipeline's decode -> validate -> store -> window step."""

    def ingest_batch(self, payloads: list[bytes | None], origins: list[Origin]) -> None:
        """Decode, validate, store (one DuckDB transaction) and update windows. When it
        returns, the batch is durable; if it raises, nothing of the batch was committed."""


class HistorySink(Sink, Protocol):
    """A sink whose state is built from a partition's history (the pipeline's windows and
    audit cohorts): when a consumer group hands it a partition, the Kafka source replays
    what it lacks (:mod:`consumers.kafka_source`, rebuild on assignment)."""

    def source_offsets(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the offset after the last message stored from it; a
        partition absent was never consumed here."""

    def forget_partitions(self, partitions: Collection[tuple[str, int]]) -> list[str]:
        """The group took ``partitions`` away: drop their models from memory (and so from
        what is exported); returns the models dropped."""

    def keep_partitions(self, owned: Collection[tuple[str, int]]) -> list[str]:
        """This member's whole assignment: drop models of partitions it does not own."""


class SinkRetriesExhaustedError(RuntimeError):
    """The sink failed ``sink_max_retries + 1`` times in a row on the same batch."""
