"""Verdict-flip and tier-change events, debounced so Monte Carlo noise pages nobody.

Each cell keeps two states per tracked quantity (dominant verdict, tier):

* raw: the value of the latest evaluation; every change is a raw event.
* confirmed: changes only after the new raw value has held for
  ``confirm_windows`` consecutive evaluations (docs/method.md section 6); that change is
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
from typing import Any, TypedDict, cast

from monitor.core.tiers import TIER_LEVEL, Tier

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


class ReliableVerdict:
    """The latest verdict that held for ``confirm_windows`` consecutive evaluations with a
    Verdict Flip Rate of at most ``tau_vfr`` in each (None until there is one).

    The debounced verdict (:class:`Debounced`) says a flip persisted; this one says the
    new verdict can also be trusted: an evaluation whose VFR is above tau (or undefined)
    breaks the streak, so a cell whose verdict hovers at the metric's threshold (where
    VFR is high by construction) never changes it. It is what pages the governance team
    (alert VFRConfirmedVerdictFlip on the gauge ``vfr_cell_reliable_pass``).

    Example:
        >>> r = ReliableVerdict(confirm_windows=2, tau_vfr=0.10)
        >>> [r.update(v, f) for v, f in [("pass", 0.0), ("pass", 0.0), ("fail", 0.3),
        ...                              ("fail", 0.05), ("fail", 0.0)]][-1]
        ('pass', 'fail')
    """

    __slots__ = ("candidate", "confirm_windows", "confirmed", "streak", "tau_vfr")

    def __init__(self, confirm_windows: int = 2, tau_vfr: float = 0.10):
        if confirm_windows < 1:
            raise ValueError("confirm_windows must be >= 1")
        self.confirm_windows = confirm_windows
        self.tau_vfr = float(tau_vfr)
        self.confirmed: str | None = None
        self.candidate: str | None = None
        self.streak = 0

    def update(self, verdict: str, vfr: float | None) -> Change:
        """Observe one evaluation: (old, new) when the reliable verdict changed, else None
        (also None for the cell's first reliable verdict: nothing to flip from)."""
        if vfr is None or not vfr <= self.tau_vfr:  # NaN and None are not reliable
            self.candidate, self.streak = None, 0
            return None
        if verdict == self.candidate:
            self.streak += 1
        else:
            self.candidate, self.streak = verdict, 1
        if self.streak < self.confirm_windows or verdict == self.confirmed:
            return None
        old, self.confirmed = self.confirmed, verdict
        return None if old is None else (old, verdict)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReliableVerdict:
        out = cls(d["confirm_windows"], d["tau_vfr"])
        for k in ("confirmed", "candidate", "streak"):
            setattr(out, k, d[k])
        return out


#: the event kind of a change of a cell's certified verdict (monitor.stream.certified)
CERTIFIED_CHANGE = "certified_change"


class EventAxes(TypedDict, total=False):
    """The axis values behind an event, as they are stored: a verdict flip's or tier
    change's (``value``, ``vfr``, ``n_star``, ``kappa``, ``sigma``; the window's figures
    ``value`` and ``sigma`` are dropped before anything leaves: monitor.publish.events),
    a certified change's (``records``, rounded to 5, and whether it is a ``page``).

    A TypedDict, not a class: the stored JSON and the results topic carry it as it is, and
    rows written by every earlier version read back into it unchanged."""

    value: float
    vfr: float
    n_star: float | None
    kappa: float | None
    sigma: float
    records: int
    page: bool


@dataclass(frozen=True)
class CellEvent:
    """A verdict flip or tier change of one cell, with the axis values behind it."""

    kind: str  # "verdict_flip" | "tier_change" | "certified_change" (CERTIFIED_CHANGE)
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
    axes: EventAxes = field(default_factory=EventAxes)
    #: the same axes before the change: at the previous evaluation for a raw event, at
    #: the last evaluation that still showed the old confirmed value for a confirmed one
    axes_before: EventAxes = field(default_factory=EventAxes)

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

    def __init__(
        self,
        model_id: str,
        metric: str,
        attribute: str,
        confirm_windows: int = 2,
        tau_vfr: float = 0.10,
    ):
        self.key = (model_id, metric, attribute)
        self.verdict = Debounced(confirm_windows)
        self.tier = Debounced(confirm_windows)
        #: axes of the previous evaluation (the "before" of a raw event)
        self.last_axes: EventAxes = {}
        #: per tracked quantity, axes of the last evaluation that showed its confirmed
        #: value (the "before" of a confirmed event)
        self.settled_axes: dict[str, EventAxes] = {}
        self.reliable = ReliableVerdict(confirm_windows, tau_vfr)

    def observe_not_evaluable(self) -> list[CellEvent]:
        """An evaluation in which the cell is not evaluable (docs/method.md section 2): it
        has no verdict and no tier, so nothing flips and nothing changes tier.

        The raw and confirmed verdict and tier stay what the last evaluable evaluation
        left, so a cell that goes from evaluable to not evaluable and back with the same
        verdict raises no event. A change must hold for ``confirm_windows``
        *consecutive* evaluations, so a not-evaluable one breaks a pending change's
        streak, and the reliable verdict's streak too. Returns no events (always [])."""
        for state in (self.verdict, self.tier):
            state.candidate, state.streak = None, 0
        self.reliable.candidate, self.reliable.streak = None, 0
        return []

    def observe(
        self, evaluation: int, verdict: str, tier: str, axes: EventAxes
    ) -> list[CellEvent]:
        """Raw and confirmed verdict flips, then raw and confirmed tier changes.

        Also updates the reliable verdict from ``axes["vfr"]`` (no event: the exporter
        shows it as a gauge)."""
        self.reliable.update(verdict, axes.get("vfr"))
        events = []
        for kind, state, value, direction in (
            ("verdict_flip", self.verdict, verdict, lambda old, new: f"{old}_to_{new}"),
            ("tier_change", self.tier, tier, tier_direction),
        ):
            raw, conf = state.update(value)
            befores = (self.last_axes, self.settled_axes.get(kind, self.last_axes))
            for change, confirmed, before in ((raw, False, befores[0]), (conf, True, befores[1])):
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
                            EventAxes(**axes),
                            EventAxes(**before),
                        )
                    )
            if state.raw == state.confirmed:
                self.settled_axes[kind] = EventAxes(**axes)
        self.last_axes = EventAxes(**axes)
        return events

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": list(self.key),
            "verdict": self.verdict.to_dict(),
            "tier": self.tier.to_dict(),
            "last_axes": self.last_axes,
            "settled_axes": self.settled_axes,
            "reliable": self.reliable.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellTracker:
        out = cls(*d["key"])
        out.verdict = Debounced.from_dict(d["verdict"])
        out.tier = Debounced.from_dict(d["tier"])
        # stored JSON, as CellTracker.to_dict wrote it (last_axes absent in files before v4)
        out.last_axes = cast(EventAxes, dict(d.get("last_axes") or {}))
        out.settled_axes = {
            k: cast(EventAxes, dict(v)) for k, v in (d.get("settled_axes") or {}).items()
        }
        if "reliable" in d:  # states written before the reliable verdict start afresh
            out.reliable = ReliableVerdict.from_dict(d["reliable"])
        else:
            out.reliable = ReliableVerdict(out.verdict.confirm_windows)
        return out
