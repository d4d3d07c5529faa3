"""Dead-letter dominance: say so, once, when most of what arrives is refused for one reason.

Why (docs/decisions.md, "A user's mistakes and silent dead letters"): a stream whose model ids are
not registered, or whose event times lie outside the wall-clock bounds, is dead-lettered record by
record, which is correct and silent: a run stored 0 of 69,936 messages, logged nothing about it and
exited 0. Each refusal is right; what is wrong is the configuration, and only an aggregate shows
it. :class:`DeadLetterWatch` counts dead letters by reason over the most recent messages
and reports a reason once when it holds the majority of them, naming the count and the
setting that would admit such records (:data:`ADMITTING_SETTINGS`).

Pure: no clock, no I/O; the service feeds it each batch's counts and logs what it returns.
Aggregates only: reason codes and counts, never a record's values.

Example:
    >>> watch = DeadLetterWatch(window=100)
    >>> watch.observe(60, {"unknown_model": 50})
    []
    >>> [d.reason for d in watch.observe(60, {"unknown_model": 40})]
    ['unknown_model']
    >>> watch.observe(60, {"unknown_model": 60}), sorted(watch.dominant)
    ([], ['unknown_model'])
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Messages over which a reason's share is judged: "most of what arrives lately".
DEFAULT_WINDOW = 1_000

#: Reason code (or its prefix, up to the colon) -> what would admit such records. A reason
#: that names a fault of the data itself (invalid JSON, a missing field) has no setting:
#: the producer has to change.
ADMITTING_SETTINGS: dict[str, str] = {
    "unknown_model": (
        'register the model ids in [[models]] (or set [service.intake] unknown_models = "admit")'
    ),
    "too_many_models": "raise [service.intake] max_models (and register the ids in [[models]])",
    "out_of_range:event_time": (
        '[service.intake] event_time_bounds = "none" for a replay of another calendar, '
        "or [service.intake] max_event_age_days / max_clock_skew_s"
    ),
    "oversized": "raise [service.intake] max_payload_bytes",
    "unknown_code": "add the code to the attribute's groups in [[attributes]]",
    "unexpected_field": "none: the producer sends fields schema_version 1 does not have",
    "unsupported:schema_version": "none: the producer sends a schema version this build lacks",
}

#: For a reason without an entry: it is the data, not a setting.
NO_SETTING = "none: the records themselves are malformed; fix the producer"


def admitting_setting(reason: str) -> str:
    """The setting that would admit records dead-lettered for ``reason``.

    >>> admitting_setting("unknown_code:race")
    "add the code to the attribute's groups in [[attributes]]"
    """
    return ADMITTING_SETTINGS.get(
        reason, ADMITTING_SETTINGS.get(reason.split(":", 1)[0], NO_SETTING)
    )


@dataclass(frozen=True)
class DominantReason:
    """A reason that became the majority of the recent messages."""

    reason: str
    #: dead letters of this reason among the recent messages
    count: int
    #: the recent messages they were counted over (at least the watch's window)
    of: int
    setting: str

    def message(self) -> str:
        """One log line: the reason, the count and what would admit the records."""
        return (
            f"{self.count} of the last {self.of} messages were dead-lettered as "
            f"{self.reason}; to admit such records: {self.setting}"
        )


class DeadLetterWatch:
    """Dead letters by reason over the last ``window`` messages (or a little more: whole
    batches are kept, so one batch larger than the window is judged on its own)."""

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = window
        self._chunks: deque[tuple[int, Counter[str]]] = deque()
        self._messages = 0
        self._recent: Counter[str] = Counter()
        self._reported: set[str] = set()
        #: reasons that hold the majority of the recent messages now
        self.dominant: frozenset[str] = frozenset()

    def observe(self, messages: int, rejected: Mapping[str, int]) -> list[DominantReason]:
        """Count one batch (``messages`` received, ``rejected`` dead letters by reason);
        returns the reasons that hold the majority for the first time (once per reason)."""
        if messages <= 0:
            return []
        batch = Counter({r: int(n) for r, n in rejected.items() if n > 0})
        self._chunks.append((messages, batch))
        self._messages += messages
        self._recent.update(batch)
        while self._messages - self._chunks[0][0] >= self.window:
            n, old = self._chunks.popleft()
            self._messages -= n
            self._recent.subtract(old)
        if self._messages < self.window:
            self.dominant = frozenset()
            return []
        self.dominant = frozenset(r for r, n in self._recent.items() if 2 * n > self._messages)
        new = sorted(self.dominant - self._reported)
        self._reported.update(new)
        return [
            DominantReason(r, self._recent[r], self._messages, admitting_setting(r)) for r in new
        ]


@dataclass
class IngestTally:
    """What one process stored and refused, for the line ``vfr-monitor run`` ends with.

    >>> t = IngestTally()
    >>> t.add(accepted=5, duplicates=1, rejected={"unknown_model": 3, "invalid_json": 1})
    >>> t.summary()
    'stored 5, duplicates 1, dead-lettered 4 (unknown_model 3, invalid_json 1)'
    """

    stored: int = 0
    duplicates: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)

    def add(self, accepted: int, duplicates: int, rejected: Mapping[str, int]) -> None:
        self.stored += int(accepted)
        self.duplicates += int(duplicates)
        self.dead_letters.update({r: int(n) for r, n in rejected.items() if n > 0})

    def summary(self) -> str:
        """Counts by outcome, dead letters by reason (most first)."""
        total = sum(self.dead_letters.values())
        reasons = ", ".join(f"{r} {n}" for r, n in self.dead_letters.most_common())
        return f"stored {self.stored}, duplicates {self.duplicates}, dead-lettered {total}" + (
            f" ({reasons})" if reasons else ""
        )
