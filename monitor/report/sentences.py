"""Plain-language sentences: what a cell's numbers and an event mean, for a governance board.

Pure functions of the typed rows in :mod:`monitor.report.data`; no number is
invented here, each clause restates a stored value against its configured cut-off.
Events are worded by :mod:`monitor.core.explain`, the module alerts and the API use.

    >>> pct(0.31), fmt_n(40_000.0)
    ('31 %', '40,000')
"""

from __future__ import annotations

import math

from batch_axes.axis3 import landis_koch_band
from monitor.core.explain import Cutoffs, explain_event
from monitor.publish.counts import published_count
from monitor.publish.rule import SMALL_CELL, SMALL_CELL_LABEL
from monitor.report.data import CellPoint, EventRow

#: What each axis checks, in the board's words.
AXIS_WORDS = {
    "axis1": "flip rate",
    "axis2": "audit size",
    "axis3": "hospital agreement",
}


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


def fmt_count(n: int | str) -> str:
    """A count already published (rounded, or "<11") as the page prints it.

    >>> fmt_count(3010), fmt_count("<11")
    ('3,010', '<11')
    """
    return f"{n:,}" if isinstance(n, int) else str(n)


def plural(n: int, noun: str) -> str:
    """A count with its noun in the right number (English "s" plurals only).

    >>> plural(1, "patient"), plural(2, "cell"), plural(0, "confirmed flip")
    ('1 patient', '2 cells', '0 confirmed flips')
    """
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def cell_label(metric: str, attribute: str) -> str:
    return f"{metric} by {attribute.replace('_', ' ')}"


def cell_sentence(c: CellPoint, tau: float, n_field: int, kappa_cutoff: float) -> str:
    """One or two sentences on a cell's latest result: verdict, stability, N*, hospitals.

    E.g. "Pass, but 31 % of resamples fail: unstable. About 40,000 records are needed
    before this metric settles."
    """
    if c.suppressed:
        return (
            f"Fewer than {SMALL_CELL} records in the window ({SMALL_CELL_LABEL}): nothing is shown "
            "for this cell."
        )
    if c.not_evaluable_reason:  # no verdict, VFR, kappa or tier: the reason instead
        need = f"; it needs {c.needs}" if c.needs else ""
        return (
            f"Not evaluable: {c.not_evaluable_reason}{need}. It has no verdict, flip rate, "
            "hospital agreement or tier."
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
            f"It settles at about {fmt_n(c.n_star)} records (the window has about "
            f"{fmt_count(published_count(c.window_n))})."
        )
    if c.n_star is not None and not math.isinf(c.n_star) and c.n_star > n_field:
        parts[-1] = parts[-1][:-1] + f", more than the {n_field:,} a site can audit."
    if c.time_to_reliable and c.n_star is not None and math.isinf(c.n_star):
        parts.append(reliable_wait_sentence(c.time_to_reliable))
    note = c.support_note
    if note and (":" in note or _partly(note) or "_x_" in c.attribute):
        # every intersection says how many of its groups it rests on; an attribute only
        # when some group is left out or the support is thin
        parts.append(note[0].upper() + note[1:] + ".")
    if c.kappa is not None:
        band = landis_koch_band(c.kappa)
        if c.kappa < kappa_cutoff:
            parts.append(f"Hospitals disagree on it (kappa {c.kappa:.2f}, {band}).")
        else:
            parts.append(f"Hospitals agree on it (kappa {c.kappa:.2f}, {band}).")
    elif c.partial and "axis3" not in c.pending_axes:
        parts.append("Hospital agreement cannot be checked (no hospital ids).")
    if c.pooled_value is not None and c.pooled_dominant_verdict is not None:
        pooled_vfr = "" if c.pooled_vfr is None else f", {pct(c.pooled_vfr)} of resamples flip"
        parts.append(
            f"Pooled estimate (beside the raw one): {c.pooled_value:.2f}, "
            f"{c.pooled_dominant_verdict}{pooled_vfr}."
        )
    if c.driver:
        parts.append(c.driver)
    if c.tier == "Pending" and c.pending_axes:
        waiting = ", ".join(AXIS_WORDS.get(a, a) for a in c.pending_axes)
        parts.append(f"Tier pending: waiting for {waiting}.")
    return " ".join(parts)


def reliable_wait_sentence(text: str) -> str:
    """The time to a reliable verdict (batch_axes.axis2.TimeToReliable.text) as a sentence.

    >>> reliable_wait_sentence("about 14 weeks at this volume")
    'A reliable verdict needs about 14 weeks at this volume.'
    >>> reliable_wait_sentence("not within a year")
    'A reliable verdict is not within a year at this volume.'
    """
    if text.startswith("about"):
        return f"A reliable verdict needs {text}."
    if text == "not within a year":
        return "A reliable verdict is not within a year at this volume."
    return f"The time to a reliable verdict is {text}."


def _partly(note: str) -> bool:
    """Whether "k of n groups evaluated" has k < n."""
    head = note.split(" groups evaluated", 1)[0].split(" of ")
    return len(head) == 2 and head[0] != head[1]


def event_sentence(
    e: EventRow, cur: CellPoint | None, tau: float, n_field: int, kappa_cutoff: float
) -> str:
    """Why an event happened: the sentence alerts and the API carry
    (:func:`monitor.core.explain.explain_event`), from the axes stored with the event
    and the pass rule of the cell at the event, so a page and an alert read the same.

    A cell withheld by the small-cell rule (or with no stored evaluation) says what kind
    of change it was and nothing else: its old and new verdicts or tiers rest on the same
    few records as its figures.
    """
    if cur is None or cur.suppressed:
        what = "verdict flipped" if e.kind == "verdict_flip" else "tier changed"
        label = cell_label(e.metric, e.attribute)
        return (
            f"The {what} for {label}; its window held fewer than {SMALL_CELL} records, so "
            f"the verdicts and tiers are withheld ({SMALL_CELL_LABEL})."
        )
    return explain_event(e, Cutoffs(cur.threshold, cur.direction, tau, n_field, kappa_cutoff))
