"""One plain sentence per verdict flip or tier change: what moved, and what crossed a line.

A governance board does not read "tier_change Practical-Stability -> Caution-Required";
it reads "DI by sex moved from Stable to Caution: VFR rose from 0.04 to 0.19 (above
0.10) as the value fell to 0.81, 0.01 from the threshold." The sentence is built from
the event's axes before and after the change (:class:`~monitor.core.events.CellEvent`)
and the cutoffs that define the tiers (docs/method.md section 6): tau for the VFR, N_field for N*,
the kappa cutoff for Axis 3. It names every axis that crossed its cutoff; when none did
(a result arriving for the first time, say) it says which result arrived.

Example:
    >>> from monitor.core.events import CellEvent
    >>> e = CellEvent("tier_change", "m", "DI", "sex", "Practical-Stability",
    ...               "Caution-Required", True, "downgrade", 7,
    ...               {"value": 0.81, "vfr": 0.19}, {"value": 0.86, "vfr": 0.04})
    >>> explain_event(e, Cutoffs(threshold=0.8, direction=">="))
    'DI by sex moved from Stable to Caution: VFR rose from 0.04 to 0.19 (above 0.10) as the value fell to 0.81, 0.01 from the threshold 0.80.'
"""  # noqa: E501

from __future__ import annotations

import math
from dataclasses import dataclass

from monitor.core.events import CellEvent, EventAxes
from monitor.core.numbers import float_or_none

TIER_WORDS = {
    "Practical-Stability": "Stable",
    "Caution-Required": "Caution",
    "High-Variance": "High variance",
    "Catastrophic-Instability": "Catastrophic",
    "Pending": "Pending",
}


def tier_name(tier: str) -> str:
    """A tier as the board reads it ('Caution-Required' -> 'Caution'); other text unchanged."""
    return TIER_WORDS.get(tier, tier)


@dataclass(frozen=True)
class Cutoffs:
    """The pass rule of the cell's metric and the tier cutoffs in force."""

    threshold: float | None = None
    direction: str | None = None
    tau_vfr: float = 0.10
    n_field: float = 50_000
    kappa_cutoff: float = 0.40


def _num(x: float) -> str:
    if math.isinf(x):
        return "never reached" if x > 0 else "-inf"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.2f}"


def _moved(name: str, a: float, b: float) -> str:
    verb = "rose" if b > a else "fell"
    return f"{name} {verb} from {_num(a)} to {_num(b)}"


def _crossings(before: EventAxes, after: EventAxes, c: Cutoffs) -> list[str]:
    """Each axis whose value crossed its tier cutoff, or arrived for the first time."""
    out = []
    for key, name, cutoff, bad_above in (
        ("vfr", "VFR", c.tau_vfr, True),
        ("n_star", "N*", c.n_field, True),
        ("kappa", "kappa", c.kappa_cutoff, False),
    ):
        a, b = float_or_none(before.get(key)), float_or_none(after.get(key))
        if b is None:
            continue
        if a is None:
            if before and key in ("n_star", "kappa"):
                side = "above" if b > cutoff else "at or below"
                out.append(f"{name} arrived at {_num(b)} ({side} {_num(cutoff)})")
            continue
        fails_a = a > cutoff if bad_above else a < cutoff
        fails_b = b > cutoff if bad_above else b < cutoff
        if fails_a != fails_b:
            if bad_above:
                side = "above" if fails_b else "at or below"
            else:
                side = "below" if fails_b else "at or above"
            out.append(f"{_moved(name, a, b)} ({side} {_num(cutoff)})")
    return out


def _value_clause(before: EventAxes, after: EventAxes, c: Cutoffs) -> str:
    if "value" not in after:
        return ""  # published events carry no window figure (monitor.stream.publication)
    b = float_or_none(after.get("value"))
    if b is None:
        return "the value is undefined on the window"
    a = float_or_none(before.get("value"))
    verb = "is" if a is None or a == b else ("rose to" if b > a else "fell to")
    text = f"the value {verb} {_num(b)}"
    if c.threshold is not None and c.direction is not None:
        gap = abs(abs(b) - c.threshold) if c.direction == "abs<=" else abs(b - c.threshold)
        text += f", {gap:.2f} from the threshold {_num(c.threshold)}"
    return text


def _certified_sentence(event: CellEvent, cell: str) -> str:
    """A certified change (monitor.stream.certified): the verdict, and the records since the
    previous change that carry it (a published count: rounded, or ``<11``).

    >>> e = CellEvent("certified_change", "m", "DI", "sex", "pass", "fail", True,
    ...               "pass_to_fail", 59, {"records": 8000, "page": True})
    >>> _certified_sentence(e, "DI by sex")
    'DI by sex is now a certified fail (was a certified pass), on 8000 records since the previous change.'
    """  # noqa: E501
    records = (event.axes or {}).get("records")
    on = "" if records is None else f", on {records} records since the previous change"
    if event.old == "undetermined":
        return f"{cell} is certified {event.new} for the first time{on}."
    return f"{cell} is now a certified {event.new} (was a certified {event.old}){on}."


def explain_event(event: CellEvent, cutoffs: Cutoffs) -> str:
    """The event in one sentence (aggregates and cell names only, never record values)."""
    after, before = event.axes or {}, event.axes_before or {}
    cell = f"{event.metric} by {event.attribute}"
    if event.kind == "certified_change":
        return _certified_sentence(event, cell)
    value = _value_clause(before, after, cutoffs)
    vfr = float_or_none(after.get("vfr"))
    if event.kind == "verdict_flip":
        text = f"{cell} flipped from {event.old} to {event.new}"
        text += f": {value}" if value else ""
        if vfr is not None:
            text += f"; VFR {_num(vfr)}"
            if vfr > cutoffs.tau_vfr:
                text += f", above {_num(cutoffs.tau_vfr)}: the new verdict is not reliable"
        return text + "."
    old, new = tier_name(event.old), tier_name(event.new)
    crossed = _crossings(before, after, cutoffs)
    tail = f" as {value}" if value else ""
    if not crossed:
        return f"{cell} moved from {old} to {new}{tail}."
    return f"{cell} moved from {old} to {new}: {' and '.join(crossed)}{tail}."
