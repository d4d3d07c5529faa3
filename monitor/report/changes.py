"""What changed in the period: the list of changes a board acts on, computed in one place.

The report opens with this list (:func:`period_changes`), so a board member reads "DI by
sex of los-xgb-discharge went from pass to fail in July 2026: Female patients are
selected at 0.27 against 0.44 for Male patients; stable since" before any grid or table.
Its source today is the period's confirmed events and each cell's latest result; a
certified (anytime-valid) verdict layer can replace :func:`period_changes` without the
page changing, since the page only reads :class:`Change` items.

Three kinds of item, in this order:

* ``verdict_change``: a cell whose confirmed verdict at the end of the period differs
  from the one it had at the start, and whose verdict is reliable now
  (:func:`reliable_verdict`): the change a board acts on. Changes to fail come first.
* ``coin_toss``: one item per model summarising the cells whose verdict flips back and
  forth (two or more confirmed flips, or a flip rate above tau now, or a tier of two or
  more failed checks): their verdict is a coin toss, so they are counted, not listed
  flip by flip.
* ``still_failing``: cells that fail reliably and did not change in the period (an
  offline audit, which has no history, lists its reliably failing cells here).

A cell withheld by the small-cell rule (fewer than SMALL_CELL records in its window)
is never described by verdict or figure: it is counted as withheld.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from monitor.publish.points import WITHHELD_TIER
from monitor.publish.rule import SMALL_CELL
from monitor.report.data import CellPoint, EventRow, ModelReport, ReportData
from monitor.report.sentences import cell_label, plural

#: Tiers whose verdict is not reliable whatever the flip rate says: two or three of the
#: three checks fail (the tier may be the debounced one of a recent window).
UNRELIABLE_TIERS = frozenset({"High-Variance", "Catastrophic-Instability"})

#: Coin-toss cells named in a model's summary (the most flips first; the rest counted).
COIN_TOSSES_NAMED = 4


def reliable_verdict(vfr: float | None, tau: float, tier: str | None) -> bool:
    """Whether a verdict can be acted on: its flip rate is known and at most tau, and its
    tier is not High variance or Catastrophic (two or more checks fail).

    >>> reliable_verdict(0.0, 0.1, "Practical-Stability"), reliable_verdict(0.05, 0.1, None)
    (True, True)
    >>> reliable_verdict(0.02, 0.1, "Catastrophic-Instability"), reliable_verdict(0.3, 0.1, None)
    (False, False)
    """
    return vfr is not None and vfr <= tau and tier not in UNRELIABLE_TIERS


def cell_reliable(c: CellPoint, tau: float) -> bool:
    """:func:`reliable_verdict` of a cell, judged on its tier and its debounced tier."""
    return reliable_verdict(c.vfr, tau, c.tier) and reliable_verdict(c.vfr, tau, c.confirmed_tier)


@dataclass(frozen=True)
class Change:
    """One line of "what changed": a cell (or, for ``coin_toss``, a model's set of cells)
    and the sentence the page prints."""

    kind: str
    model_id: str
    sentence: str
    metric: str = ""
    attribute: str = ""
    old: str = ""
    new: str = ""
    at: datetime | None = None
    #: the cells a ``coin_toss`` item counts: (metric, attribute)
    cells: tuple[tuple[str, str], ...] = ()

    @property
    def to_fail(self) -> bool:
        return self.kind == "verdict_change" and self.new == "fail"


@dataclass(frozen=True)
class Attention:
    """How much a model needs the board's attention, for ordering and its one line."""

    model_id: str
    changed_to_fail: int
    changed_to_pass: int
    failing_reliably: int
    coin_tosses: int
    worst_tier: int
    cells: int
    line: str = ""
    changes: tuple[Change, ...] = field(default=())

    @property
    def key(self) -> tuple[int, int, int, int, str]:
        """Sort key: changes to fail, then reliable failures, coin tosses, worst tier."""
        return (
            -self.changed_to_fail,
            -self.failing_reliably,
            -self.coin_tosses,
            -self.worst_tier,
            self.model_id,
        )


def _month(at: datetime | None) -> str:
    return "" if at is None else f" in {at:%B %Y}"


def _flips_by_cell(m: ModelReport) -> dict[tuple[str, str], list[EventRow]]:
    out: dict[tuple[str, str], list[EventRow]] = {}
    for e in m.events:
        if e.kind == "verdict_flip":
            out.setdefault((e.metric, e.attribute), []).append(e)
    return out


def _flip_context_suppressed(m: ModelReport, flips: list[EventRow]) -> bool:
    """Whether a flip's cell, as published at the flip, is unknown or suppressed
    (monitor.publish.points decided that): the sentence then does not describe it."""
    return any((c := m.event_context.get(e.id)) is None or c.suppressed for e in flips)


def _change_sentence(m: ModelReport, c: CellPoint, old: str, new: str, at: datetime | None,
                     tau: float) -> str:  # fmt: skip
    label = f"{cell_label(c.metric, c.attribute)} of {m.model_id}"
    why = f": {c.driver_clause}" if c.driver_clause else ""
    vfr = "" if c.vfr is None else f" (flip rate {c.vfr:.2f})"
    return f"{label} went from {old} to {new}{_month(at)}{why}; stable since{vfr}."


def _coin_toss_sentence(m: ModelReport, tossed: list[tuple[CellPoint, int]], tau: float) -> str:
    shown = sorted(tossed, key=lambda t: (-t[1], -(t[0].vfr or 0.0), t[0].key))
    parts = []
    for c, n in shown[:COIN_TOSSES_NAMED]:
        vfr = "" if c.vfr is None else f", flip rate {c.vfr:.2f}"
        parts.append(f"{cell_label(c.metric, c.attribute)} ({plural(n, 'flip')}{vfr})")
    rest = len(shown) - COIN_TOSSES_NAMED
    more = f" and {plural(rest, 'more cell')}" if rest > 0 else ""
    flips = sum(n for _, n in tossed)
    n = len(tossed)
    return (
        f"{plural(n, 'cell')} of {m.model_id} {'has' if n == 1 else 'have'} a coin-toss "
        f"verdict ({plural(flips, 'confirmed flip')} in the period): {', '.join(parts)}{more}. "
        f"{'It flips' if n == 1 else 'They flip'} back and forth or in more than {tau:.0%} of "
        "resamples: act on neither pass nor fail."
    )


def _still_failing_sentence(m: ModelReport, c: CellPoint, history: bool) -> str:
    label = f"{cell_label(c.metric, c.attribute)} of {m.model_id}"
    why = f": {c.driver_clause}" if c.driver_clause else ""
    when = " throughout the period" if history else ""
    vfr = "" if c.vfr is None else f" (flip rate {c.vfr:.2f})"
    return f"{label} fails{when}{why}; a reliable verdict{vfr}."


def model_changes(m: ModelReport, data: ReportData) -> list[Change]:
    """The change items of one model (see the module docstring), in page order."""
    tau = data.tau
    history = data.source == "database"
    flips = _flips_by_cell(m)
    changed: list[Change] = []
    tossed: list[tuple[CellPoint, int]] = []
    failing: list[Change] = []
    withheld: list[CellPoint] = []
    for c in m.cells:
        evs = flips.get(c.key, [])
        if c.suppressed or (evs and _flip_context_suppressed(m, evs)):
            if evs:
                withheld.append(c)
            continue
        reliable = cell_reliable(c, tau)
        now = c.dominant_verdict
        if evs:
            old, new = evs[0].old, evs[-1].new
            if old != new and now == new and reliable:
                changed.append(
                    Change(
                        "verdict_change",
                        m.model_id,
                        _change_sentence(m, c, old, new, evs[-1].at, tau),
                        c.metric,
                        c.attribute,
                        old,
                        new,
                        evs[-1].at,
                    )
                )
            else:
                tossed.append((c, len(evs)))
        elif now is not None and not reliable and c.vfr is not None and c.vfr > tau:
            tossed.append((c, 0))  # never confirmed a flip, but a coin toss now
        elif now == "fail" and reliable:
            failing.append(
                Change(
                    "still_failing",
                    m.model_id,
                    _still_failing_sentence(m, c, history),
                    c.metric,
                    c.attribute,
                    "fail",
                    "fail",
                )
            )
    changed.sort(key=lambda x: (not x.to_fail, x.metric, x.attribute))
    out = list(changed)
    if tossed:
        out.append(
            Change(
                "coin_toss",
                m.model_id,
                _coin_toss_sentence(m, tossed, tau),
                cells=tuple(c.key for c, _ in tossed),
            )
        )
    out += failing
    if withheld:
        n = len(withheld)
        out.append(
            Change(
                "withheld",
                m.model_id,
                f"The verdict of {plural(n, 'cell')} of {m.model_id} changed, but "
                f"{'its window holds' if n == 1 else 'their windows hold'} fewer than "
                f"{SMALL_CELL} records: withheld.",
                cells=tuple(c.key for c in withheld),
            )
        )
    return out


def attention(m: ModelReport, data: ReportData, changes: list[Change]) -> Attention:
    """A model's attention counts and its one line for the first screen."""
    tier_levels = {"Practical-Stability": 0, "Caution-Required": 1, "High-Variance": 2,
                   "Catastrophic-Instability": 3}  # fmt: skip
    kinds = Counter(x.kind for x in changes)
    to_fail = sum(1 for x in changes if x.to_fail)
    to_pass = kinds["verdict_change"] - to_fail
    still = kinds["still_failing"]
    tosses = sum(len(x.cells) for x in changes if x.kind == "coin_toss")
    shown = [c for c in m.cells if not c.suppressed]
    worst = max(
        (tier_levels.get(c.tier, -1) for c in m.cells if c.tier != WITHHELD_TIER), default=-1
    )
    parts = []
    if to_fail:
        parts.append(f"{plural(to_fail, 'verdict')} changed to fail")
    if still:
        other = "other " if to_fail else ""
        parts.append(
            f"{plural(still, other + 'cell')} {'fails' if still == 1 else 'fail'} reliably"
        )
    if tosses:
        parts.append(f"{plural(tosses, 'coin-toss verdict')}")
    if to_pass:
        parts.append(f"{plural(to_pass, 'verdict')} changed to pass")
    if parts:
        head = "needs attention" if to_fail or still else "to watch"
        line = f"{head}: {'; '.join(parts)} (of {plural(len(m.cells), 'cell')})."
    elif shown:
        line = f"no change; every verdict of its {plural(len(m.cells), 'cell')} passes reliably."
    else:
        line = f"every cell is withheld (fewer than {SMALL_CELL} records)."
    failing = to_fail + still
    return Attention(
        m.model_id, to_fail, to_pass, failing, tosses, worst, len(m.cells), line, tuple(changes)
    )


def period_changes(data: ReportData) -> list[Attention]:
    """Every model's change items and attention line, the models needing attention first.

    The one function the page's "what changed" reads: swap its source (e.g. certified
    verdicts) here and the page follows.
    """
    out = [attention(m, data, model_changes(m, data)) for m in data.models]
    return sorted(out, key=lambda a: a.key)
