"""Plain-language sentences: what a cell's numbers and an event mean, for a governance board.

Pure functions of the typed rows in :mod:`monitor.report.data`; no number is
invented here, each clause restates a stored value against its configured cut-off.

    >>> tier_name("Caution-Required")
    'Caution'
    >>> landis_koch_band(0.45)
    'moderate'
"""

from __future__ import annotations

import math

from monitor.report.data import SMALL_CELL, CellPoint, EventRow

TIER_NAMES = {
    "Practical-Stability": "Stable",
    "Caution-Required": "Caution",
    "High-Variance": "High variance",
    "Catastrophic-Instability": "Catastrophic",
    "Pending": "Pending",
}
#: What each axis checks, in the board's words.
AXIS_WORDS = {
    "axis1": "flip rate",
    "axis2": "audit size",
    "axis3": "hospital agreement",
}
WITHHELD = f"<{SMALL_CELL}"

#: Landis and Koch (1977) bands of Fleiss' kappa: (lower bound, name), ascending.
LANDIS_KOCH = (
    (-1.0, "poor"),
    (0.0, "slight"),
    (0.20, "fair"),
    (0.40, "moderate"),
    (0.60, "substantial"),
    (0.80, "almost perfect"),
)


def tier_name(tier: str) -> str:
    return TIER_NAMES.get(tier, tier)


def landis_koch_band(kappa: float) -> str:
    """The Landis-Koch band of a kappa (upper bounds inclusive: 0.40 is 'fair')."""
    name = LANDIS_KOCH[0][1]
    for lower, band in LANDIS_KOCH:
        if kappa > lower or (lower == -1.0 and kappa >= lower):
            name = band
    return name


def pct(x: float) -> str:
    """A share as a whole percentage with a thin space, as the board reads it: '31 %'."""
    if 0 < x < 0.005:
        return "under 1 %"
    return f"{round(100 * x):d} %"


def fmt_n(n: float | None) -> str:
    if n is None:
        return "not computed"
    if math.isinf(n):
        return "not reached"
    return f"{int(n):,}"


def cell_label(metric: str, attribute: str) -> str:
    return f"{metric} by {attribute.replace('_', ' ')}"


def distance_to_threshold(value: float, threshold: float, direction: str) -> float:
    """How far the value is from flipping its point verdict (on the compared scale)."""
    v = abs(value) if direction.startswith("abs") else value
    return abs(v - threshold)


def rule_text(threshold: float, direction: str) -> str:
    """'passes at 0.80 or above', '|value| 0.10 or below' ..."""
    if direction == ">=":
        return f"passes at {threshold:.2f} or above"
    if direction == "<=":
        return f"passes at {threshold:.2f} or below"
    if direction == "abs<=":
        return f"passes when its size is {threshold:.2f} or less"
    return f"{direction} {threshold:.2f}"


def cell_sentence(c: CellPoint, tau: float, n_field: int, kappa_cutoff: float) -> str:
    """One or two sentences on a cell's latest result: verdict, stability, N*, hospitals.

    E.g. "Pass, but 31 % of resamples fail: unstable. About 40,000 records are needed
    before this metric settles."
    """
    if c.suppressed:
        return (
            f"Fewer than {SMALL_CELL} records in the window ({WITHHELD}): nothing is shown "
            "for this cell."
        )
    parts = []
    dom = c.dominant_verdict
    if dom is None or c.vfr is None:
        parts.append("The metric is undefined in this window (a group is too small or empty).")
    else:
        other = "fail" if dom == "pass" else "pass"
        if c.vfr == 0:
            parts.append(f"{dom.capitalize()} in every resample: stable.")
        elif c.vfr > tau:
            parts.append(f"{dom.capitalize()}, but {pct(c.vfr)} of resamples {other}: unstable.")
        else:
            parts.append(f"{dom.capitalize()}; {pct(c.vfr)} of resamples {other}: stable.")
        if c.point_verdict is not None and c.point_verdict != dom and c.value is not None:
            parts.append(
                f"The observed value ({c.value:.2f}) would {c.point_verdict}, but most "
                f"resamples {dom}."
            )
    if c.n_star is None:
        if "axis2" in c.pending_axes:
            parts.append("The audit size it needs is not computed yet.")
    elif math.isinf(c.n_star):
        parts.append("Its value does not settle at any audit size tried (N* not reached).")
    elif c.n_star > c.window_n:
        parts.append(f"About {fmt_n(c.n_star)} records are needed before this metric settles.")
    else:
        parts.append(
            f"It settles at about {fmt_n(c.n_star)} records (the window has {c.window_n:,})."
        )
    if c.n_star is not None and not math.isinf(c.n_star) and c.n_star > n_field:
        parts[-1] = parts[-1][:-1] + f", more than the {n_field:,} a site can audit."
    if c.kappa is not None:
        band = landis_koch_band(c.kappa)
        if c.kappa < kappa_cutoff:
            parts.append(f"Hospitals disagree on it (kappa {c.kappa:.2f}, {band}).")
        else:
            parts.append(f"Hospitals agree on it (kappa {c.kappa:.2f}, {band}).")
    elif c.partial and "axis3" not in c.pending_axes:
        parts.append("Hospital agreement cannot be checked (no hospital ids).")
    if c.tier == "Pending" and c.pending_axes:
        waiting = ", ".join(AXIS_WORDS.get(a, a) for a in c.pending_axes)
        parts.append(f"Tier pending: waiting for {waiting}.")
    return " ".join(parts)


def _value_clause(prev: CellPoint | None, cur: CellPoint) -> str:
    if cur.value is None:
        return ""
    d = distance_to_threshold(cur.value, cur.threshold, cur.direction)
    if prev is None or prev.value is None or prev.value == cur.value:
        moved = "is"
    else:
        moved = "rose to" if cur.value > prev.value else "fell to"
    side = "past" if cur.point_verdict == "fail" else "from"
    return f" as the value {moved} {cur.value:.2f}, {d:.2f} {side} the threshold"


def _axis_changes(
    prev: CellPoint, cur: CellPoint, tau: float, n_field: int, kappa_cutoff: float
) -> list[str]:
    """What moved an axis across its cut-off, in either direction."""
    out = []
    was, now = set(prev.failed_axes), set(cur.failed_axes)
    if "axis1" in now ^ was and prev.vfr is not None and cur.vfr is not None:
        verb = "rose" if cur.vfr > prev.vfr else "fell"
        where = f"above {tau:.2f}" if "axis1" in now else f"at or below {tau:.2f}"
        out.append(f"VFR {verb} from {prev.vfr:.2f} to {cur.vfr:.2f} ({where})")
    if "axis2" in now ^ was:
        if "axis2" in now and cur.n_star is not None and math.isinf(cur.n_star):
            out.append(f"the audit size N* is no longer reached (was {fmt_n(prev.n_star)})")
        elif "axis2" in now:
            out.append(
                f"the audit size N* went from {fmt_n(prev.n_star)} to {fmt_n(cur.n_star)} "
                f"(above {n_field:,})"
            )
        else:
            out.append(f"the audit size N* came down to {fmt_n(cur.n_star)} (within {n_field:,})")
    if "axis3" in now ^ was and cur.kappa is not None:
        before = "" if prev.kappa is None else f"from {prev.kappa:.2f} "
        if "axis3" in now:
            out.append(f"hospital kappa fell {before}to {cur.kappa:.2f} (below {kappa_cutoff:.2f})")
        else:
            out.append(
                f"hospital kappa rose {before}to {cur.kappa:.2f} (at or above {kappa_cutoff:.2f})"
            )
    return out


def event_sentence(
    e: EventRow,
    prev: CellPoint | None,
    cur: CellPoint | None,
    tau: float,
    n_field: int,
    kappa_cutoff: float,
) -> str:
    """Why an event happened, from the cell before the change and at the event.

    E.g. "DI by sex moved from Stable to Caution: VFR rose from 0.04 to 0.19 (above 0.10)
    as the value fell to 0.81, 0.01 from the threshold."
    """
    label = cell_label(e.metric, e.attribute)
    if cur is None or cur.suppressed:
        what = "flipped" if e.kind == "verdict_flip" else "moved"
        return f"{label} {what} from {e.old} to {e.new} (fewer than {SMALL_CELL} records)."
    if e.kind == "verdict_flip":
        head = f"{label} flipped from {e.old} to {e.new}"
        if cur.value is not None:
            rule = rule_text(cur.threshold, cur.direction)
            if prev is not None and prev.value is not None:
                verb = "rose" if cur.value > prev.value else "fell"
                head += f": the value {verb} from {prev.value:.2f} to {cur.value:.2f} (it {rule})"
            else:
                head += f": the value is {cur.value:.2f} (it {rule})"
        tail = ""
        if cur.vfr is not None:
            tail = (
                f" VFR is {cur.vfr:.2f}: the new verdict is stable."
                if cur.vfr <= tau
                else f" VFR is {cur.vfr:.2f} (above {tau:.2f}): it may flip back."
            )
        return head + "." + tail
    head = f"{label} moved from {tier_name(e.old)} to {tier_name(e.new)}"
    if e.new == "Pending":
        waiting = ", ".join(AXIS_WORDS.get(a, a) for a in cur.pending_axes) or "the slow axes"
        return f"{head}: waiting for {waiting}."
    if prev is None or prev.tier == "Pending" or e.old == "Pending":
        failed = [AXIS_WORDS.get(a, a) for a in cur.failed_axes]
        checks = (
            "no check fails" if not failed else f"{len(failed)} check(s) fail: " + ", ".join(failed)
        )
        return f"{head}: first full assessment, {checks}{_value_clause(None, cur)}."
    causes = _axis_changes(prev, cur, tau, n_field, kappa_cutoff)
    if not causes:
        failed = [AXIS_WORDS.get(a, a) for a in cur.failed_axes]
        causes = [f"{len(failed)} check(s) now fail" + (": " + ", ".join(failed) if failed else "")]
    return f"{head}: {'; '.join(causes)}{_value_clause(prev, cur)}."
