"""Verdict-flip and tier-change events, debounced so Monte Carlo noise pages nobody.

Each cell keeps two states per tracked quantity (dominant verdict, tier):

* raw: the value of the latest evaluation; every change is a raw event.
* confirmed: changes only after the new raw value has held for
  ``confirm_windows`` consecutive evaluations (SPEC section 6); that change is
  a confirmed event carrying the old and new confirmed values.

Example:
    >>> d = Debounced(confirm_windows=2)
    >>> [d.update(v) for v in ["pass", "fail", "pass", "fail", "fail"]][-1]
    (None, ('pass', 'fail'))
    >>> d.confirmed
    'fail'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from monitor.tiers import TIER_LEVEL, Tier

Change = tuple[Any, Any] | None


class Debounced:
    """A raw value and its confirmed value, with a persistence rule between them."""

    __slots__ = ("candidate", "confirm_windows", "confirmed", "raw", "streak")

    def __init__(self, confirm_windows: int = 2):
        if confirm_windows < 1:
            raise ValueError("confirm_windows must be >= 1")
        self.confirm_windows = confirm_windows
        self.raw: Any = None
        self.confirmed: Any = None
        self.candidate: Any = None
        self.streak = 0

    def update(self, value: Any) -> tuple[Change, Change]:
        """Observe one evaluation: (raw change, confirmed change), each (old, new) or None."""
        if self.raw is None:  # first observation: nothing to compare with
            self.raw = self.confirmed = value
            return None, None
        raw_change = (self.raw, value) if value != self.raw else None
        self.raw = value
        if value == self.confirmed:
            self.candidate, self.streak = None, 0
            return raw_change, None
        if value == self.candidate:
            self.streak += 1
        else:
            self.candidate, self.streak = value, 1
        if self.streak >= self.confirm_windows:
            old, self.confirmed = self.confirmed, value
            self.candidate, self.streak = None, 0
            return raw_change, (old, value)
        return raw_change, None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Debounced:
        out = cls(d["confirm_windows"])
        for k in ("raw", "confirmed", "candidate", "streak"):
            setattr(out, k, d[k])
        return out


@dataclass(frozen=True)
class CellEvent:
    """A verdict flip or tier change of one cell, with the axis values behind it."""

    kind: str  # "verdict_flip" | "tier_change"
    model_id: str
    metric: str
    attribute: str
    old: str
    new: str
    confirmed: bool
    direction: (
        str  # tier: "downgrade" / "upgrade" / "pending"; verdict: "pass_to_fail" / "fail_to_pass"
    )
    evaluation: int
    axes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tier_direction(old: str, new: str) -> str:
    """'downgrade' toward Catastrophic-Instability, 'upgrade' away, 'pending' if Pending."""
    lo, ln = TIER_LEVEL[Tier(old)], TIER_LEVEL[Tier(new)]
    if lo < 0 or ln < 0:
        return "pending"
    return "downgrade" if ln > lo else "upgrade"


class CellTracker:
    """Debounced verdict and tier of one cell; turns evaluations into events."""

    def __init__(self, model_id: str, metric: str, attribute: str, confirm_windows: int = 2):
        self.key = (model_id, metric, attribute)
        self.verdict = Debounced(confirm_windows)
        self.tier = Debounced(confirm_windows)

    def observe(
        self, evaluation: int, verdict: str, tier: str, axes: dict[str, Any]
    ) -> list[CellEvent]:
        """Raw and confirmed verdict flips, then raw and confirmed tier changes."""
        events = []
        for kind, state, value, direction in (
            ("verdict_flip", self.verdict, verdict, lambda old, new: f"{old}_to_{new}"),
            ("tier_change", self.tier, tier, tier_direction),
        ):
            raw, conf = state.update(value)
            for change, confirmed in ((raw, False), (conf, True)):
                if change:
                    old, new = change
                    events.append(
                        CellEvent(
                            kind,
                            *self.key,
                            old,
                            new,
                            confirmed,
                            direction(old, new),
                            evaluation,
                            dict(axes),
                        )
                    )
        return events

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": list(self.key),
            "verdict": self.verdict.to_dict(),
            "tier": self.tier.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellTracker:
        out = cls(*d["key"])
        out.verdict = Debounced.from_dict(d["verdict"])
        out.tier = Debounced.from_dict(d["tier"])
        return out
