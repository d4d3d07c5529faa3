"""The small-cell rule's primitives.

No figure computed from fewer than :data:`SMALL_CELL` records of a group or a model
leaves the service (metrics, API, reports, audit files); where such a figure would
stand, :data:`SMALL_CELL_LABEL` does. 11 is the usual disclosure threshold for
health statistics (counts of 1-10 are suppressed).

Here: the threshold, rounding, which groups of a family (or of linked families) to
withhold, release blocks and release bookkeeping. What a published cell, count, axis or
period looks like is :mod:`monitor.publish`'s (the outputs read the rule only through
it); when a cell's figures are released is :mod:`monitor.stream.publication`'s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeGuard, TypeVar

from monitor.core.method import INTERSECTION_CODE_SEP, INTERSECTION_NAME_SEP, SMALL_CELL_RECORDS

K = TypeVar("K")
T = TypeVar("T")

#: Fewer records than this and a figure is withheld.
SMALL_CELL = SMALL_CELL_RECORDS

#: What stands in place of a withheld figure.
SMALL_CELL_LABEL = f"<{SMALL_CELL}"


def reportable(n: int | float | None) -> TypeGuard[int | float]:
    """True when a figure computed from ``n`` records may leave the service.

    >>> reportable(10), reportable(11), reportable(None)
    (False, True, False)
    """
    return n is not None and n >= SMALL_CELL


# ----------------------------------------------------------------------------- rounding
#: Counts that need not be exact (records received, group sizes, window sizes, volumes,
#: fold sizes) are published rounded to a multiple of this base. 5 is NHS England's
#: convention for published hospital activity counts (suppress 1-7, round the rest to 5):
#: it keeps a complement (a total minus its parts) from pinning down a withheld group
#: while changing no count by more than 2 (docs/privacy.md).
ROUNDING_BASE = 5

#: Rates published beside rounded counts (a group's selection rate) keep this many
#: decimals: an exact rate s/n next to a count rounded to 5 gives the exact n back (few
#: fractions with n in a width-5 interval equal a 17-digit float), two decimals do not.
RATE_DECIMALS = 2


def rounded_count(n: int | float, base: int = ROUNDING_BASE) -> int:
    """``n`` to the nearest multiple of ``base`` (halves up).

    >>> [rounded_count(n) for n in (11, 12, 13, 5240)]
    [10, 10, 15, 5240]
    """
    return int(base * math.floor(float(n) / base + 0.5))


def published(n: int | float | None) -> bool:
    """Whether ``n`` can be a published (rounded) count of 11 or more records: the check an
    edge that receives released figures makes before showing them (11 and 12 round to 10).

    >>> published(10), published(9), published(None)
    (True, False, False)
    """
    return n is not None and n >= rounded_count(SMALL_CELL)


def rounded_rate(x: float | None) -> float | None:
    """A rate published beside rounded counts (see :data:`RATE_DECIMALS`).

    >>> rounded_rate(41 / 90), rounded_rate(None)
    (0.46, None)
    """
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), RATE_DECIMALS)


# ----------------------------------------------------------------------------- complements
def suppressed_groups(sizes: Mapping[K, int]) -> frozenset[K]:
    """The groups of one family (the groups of an attribute, the folds of a cohort) whose
    figures are withheld, so that none can be derived from the others and the total.

    Primary: a group with 1-10 records. Secondary (as statistical agencies do): while the
    withheld groups hold fewer than 11 records together, or only one of them holds any,
    the smallest shown group with records is withheld too. A total minus the shown groups
    then equals the sum of at least two withheld groups holding 11 or more records, never
    one small group. Groups with no records are not primary (a 0 discloses no patient).

    >>> sorted(suppressed_groups({"a": 4, "b": 86, "c": 646, "d": 3458}))
    ['a', 'b']
    >>> sorted(suppressed_groups({"a": 0, "b": 86, "c": 646}))
    []
    >>> sorted(suppressed_groups({"a": 6, "b": 7, "c": 646}))
    ['a', 'b']
    >>> sorted(suppressed_groups({"a": 3, "b": 4, "c": 12, "d": 50}))
    ['a', 'b', 'c']
    """
    hidden = {g for g, n in sizes.items() if 0 < n < SMALL_CELL}
    if not hidden:
        return frozenset()
    shown = sorted((n, str(g), g) for g, n in sizes.items() if g not in hidden and n > 0)
    while shown and (sum(sizes[g] for g in hidden) < SMALL_CELL or len(hidden) < 2):
        hidden.add(shown.pop(0)[2])
    return frozenset(hidden)


def _top_up(sizes: Mapping[K, int], hidden: set[K], members: Iterable[K]) -> bool:
    """Secondary suppression inside ``members`` (one family, its total published): while
    its withheld groups with records hold fewer than SMALL_CELL together or only one of
    them holds any, withhold its smallest shown group with records. True when the family
    then meets the rule (or withholds nothing)."""
    members = list(members)
    held = [g for g in members if g in hidden and sizes[g] > 0]
    if not held:
        return True
    shown = sorted((sizes[g], str(g), g) for g in members if g not in hidden and sizes[g] > 0)
    while shown and (sum(sizes[g] for g in held) < SMALL_CELL or len(held) < 2):
        g = shown.pop(0)[2]
        hidden.add(g)
        held.append(g)
    return sum(sizes[g] for g in held) >= SMALL_CELL and len(held) >= 2


def linked_withheld(
    sizes: Mapping[str, Mapping[str, int]],
    parts: Mapping[str, Sequence[str]],
    sep: str,
) -> dict[str, frozenset[str]]:
    """:func:`suppressed_groups` of every attribute of a model at once, the intersections
    linked to their margins (docs/privacy.md, "Across families (intersections)").

    ``sizes``: attribute -> group -> records; ``parts``: intersection attribute -> the
    attributes it combines, its group keys being theirs joined by ``sep`` ("2:1" of race
    "2" and sex "1"). A margin group (race "2") is the total of a family of its own, the
    combinations within it (race "2" with each sex), so the rule of :func:`suppressed_groups`
    holds there too: when the margin is shown, the combinations withheld within it hold
    11 or more records and at least two of them hold some (else the smallest shown
    combination within it is withheld too; when none is left, the margin is withheld);
    when the margin is withheld, every combination within it is (their sum is the margin).
    A configured intersection of some of the parts ("race_x_sex" beside
    "race_x_sex_x_age_group") is a margin the same way. Repeated until nothing changes:
    withheld sets only grow, so it ends.

    Without this, "Black" minus the shown "Black x Male" is "Black x Female", withheld in
    its own family: with counts rounded to 5 and rates to 2 decimals, that pins a group of
    7 to a few records and its number selected to one value (the attack test).

    >>> out = linked_withheld(
    ...     {"race": {"B": 30, "W": 70}, "sex": {"F": 47, "M": 53},
    ...      "race_x_sex": {"B:F": 7, "B:M": 23, "W:F": 40, "W:M": 30}},
    ...     {"race_x_sex": ("race", "sex")}, ":")
    >>> sorted(out["race_x_sex"]), sorted(out["race"]), sorted(out["sex"])
    (['B:F', 'B:M', 'W:F', 'W:M'], [], [])
    >>> three = linked_withheld(
    ...     {"a": {"0": 60, "1": 60}, "b": {"0": 60, "1": 60}, "c": {"0": 60, "1": 60},
    ...      "a_x_b": {"0:0": 30, "0:1": 30, "1:0": 30, "1:1": 30},
    ...      "a_x_b_x_c": {"0:0:0": 5, "0:0:1": 25, "0:1:0": 15, "0:1:1": 15,
    ...                    "1:0:0": 15, "1:0:1": 15, "1:1:0": 25, "1:1:1": 5}},
    ...     {"a_x_b": ("a", "b"), "a_x_b_x_c": ("a", "b", "c")}, ":")
    >>> "0:0:1" in three["a_x_b_x_c"]  # the sibling of 0:0:0 within margin a_x_b "0:0"
    True
    """
    hidden = {a: set(suppressed_groups(s)) for a, s in sizes.items()}
    links: list[tuple[str, str, str, list[str]]] = []  # margin attr, margin, inter, members
    for inter, comps in parts.items():
        if inter not in sizes or any(c not in sizes for c in comps):
            continue
        split = {g: str(g).split(sep) for g in sizes[inter]}
        if any(len(p) != len(comps) for p in split.values()):
            continue
        for k in range(1, len(comps)):
            for idx in itertools.combinations(range(len(comps)), k):
                c = INTERSECTION_NAME_SEP.join(comps[i] for i in idx)  # a part, or parts joined
                if c not in sizes:
                    continue
                for m in sizes[c]:
                    members = [g for g, p in split.items() if sep.join(p[i] for i in idx) == m]
                    links.append((c, m, inter, members))
    changed = True
    while changed:
        before = sum(len(h) for h in hidden.values())
        for a, s in sizes.items():
            _top_up(s, hidden[a], s)
        for c, m, inter, members in links:
            if m in hidden[c]:
                hidden[inter].update(g for g in members if sizes[inter][g] > 0)
            elif not _top_up(sizes[inter], hidden[inter], members) and sizes[c][m] > 0:
                hidden[c].add(m)
        changed = sum(len(h) for h in hidden.values()) != before
    return {a: frozenset(h) for a, h in hidden.items()}


def intersection_parts(attributes: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The intersections among a window's attributes and the attributes each combines,
    read from their names (``race_x_sex``: :func:`monitor.config.intersection_name`), for
    :func:`linked_withheld`.
    A name that merely looks like one links nothing unless its group codes are its
    parts' codes joined (:func:`linked_withheld` checks).

    >>> intersection_parts(["race", "sex", "race_x_sex", "x_y"])
    {'race_x_sex': ('race', 'sex')}
    """
    names = set(attributes)
    out = {}
    for a in sorted(names):
        parts = tuple(a.split(INTERSECTION_NAME_SEP))
        if len(parts) >= 2 and all(p in names for p in parts):
            out[a] = parts
    return out


def model_withheld(sizes: Mapping[str, Mapping[str, int]]) -> dict[str, frozenset[str]]:
    """:func:`linked_withheld` of one model's (or part's) attributes keyed by group code,
    the intersections read from the names (:func:`intersection_parts`).

    >>> out = model_withheld({"race": {"B": 30, "W": 70}, "sex": {"F": 47, "M": 53},
    ...     "race_x_sex": {"B:F": 7, "B:M": 23, "W:F": 40, "W:M": 30}})
    >>> sorted(out["race_x_sex"])
    ['B:F', 'B:M', 'W:F', 'W:M']
    """
    return linked_withheld(sizes, intersection_parts(sizes), INTERSECTION_CODE_SEP)


def family_withheld(sizes: Mapping[K, int | str]) -> frozenset[K]:
    """:func:`suppressed_groups` of sizes some of which may already read ``<11`` (a stored
    result withholds its small counts).

    A size of SMALL_CELL_LABEL counts as 1 record, the fewest a withheld group can hold
    that matters: underestimating the withheld sum only withholds more, never less.

    >>> sorted(family_withheld({"a": "<11", "b": 86, "c": 646}))
    ['a', 'b']
    """
    return suppressed_groups({g: 1 if n == SMALL_CELL_LABEL else int(n) for g, n in sizes.items()})


def period_blocks(counts: Sequence[int]) -> list[int]:
    """Where the release blocks of consecutive periods (days with records, in time order,
    ``counts`` their records) start: the indices of the periods that open a block.

    Scanning forward, a block closes at the first period after it holds
    :data:`SMALL_CELL` records; a last block holding fewer joins the one before. Every
    block then holds at least SMALL_CELL records (when all of them together do), so two
    period filters widened to whole blocks differ by no record or by at least
    SMALL_CELL: no difference of two reports rests on one small day.

    >>> period_blocks([30, 4, 20, 20, 3])
    [0, 1, 3]
    >>> period_blocks([4, 4, 4]), period_blocks([])
    ([0], [])
    """
    starts: list[int] = []
    held = 0
    for i, n in enumerate(counts):
        if not starts or held >= SMALL_CELL:
            starts.append(i)
            held = 0
        held += int(n)
    if len(starts) > 1 and held < SMALL_CELL:
        starts.pop()
    return starts


# ----------------------------------------------------------------------------- releases
def releasable(churn_since: Iterable[int]) -> bool:
    """Whether new figures may replace the released ones: every group (or model) they are
    computed from had 0 or at least :data:`SMALL_CELL` records enter or leave it since the
    last release, so no difference of two releases rests on fewer than 11 records.

    >>> releasable([0, 11, 40]), releasable([0, 3]), releasable([])
    (True, False, True)
    """
    return all(d == 0 or d >= SMALL_CELL for d in churn_since)


def records_changed(n_then: Any, n_now: Any, kept: Any) -> Any:  # ints or numpy arrays
    """Records in one of two windows (or cohorts) and not the other, per group: the
    symmetric difference of two record sets of which the second only gained records at its
    end and lost some for good, ``kept`` being the first one's records still present.
    Works on ints and numpy arrays alike.

    >>> records_changed(20, 20, 14)  # 6 left, 6 came
    12
    """
    return n_then + n_now - 2 * kept


@dataclass(frozen=True)
class Release(Generic[T]):
    """What one item last released (None: withheld) and its churn counters at that moment
    (cumulative counts of records that entered or left each group it rests on)."""

    figures: T | None
    churn: tuple[int, ...]


class ReleaseBook(Generic[K, T]):
    """The published figures of a family of items (the service's rolling health figures
    per model), one release at a time; the window's cells and groups use the exact record
    count of monitor.stream.publication instead.

    At each release point the owner offers every item's current figures with a cumulative
    counter of the records they rest on (for the health figures: records the health
    window has seen; with a window of 11 or more, 11 new ones change 11 or more of its
    records); an item whose counter moved by 1-10 since its last release keeps its last
    released figures. Pure bookkeeping, no I/O.

    >>> book = ReleaseBook()
    >>> book.offer("g", [20], "figures at 20")
    'figures at 20'
    >>> book.offer("g", [23], "figures at 23")  # 3 records since: the old ones stay
    'figures at 20'
    >>> book.offer("g", [31], "figures at 31")  # 11 since the release
    'figures at 31'
    """

    def __init__(self) -> None:
        self._released: dict[K, Release[T]] = {}

    def offer(
        self,
        key: K,
        churn: Sequence[int],
        figures: T | None,
    ) -> T | None:
        """The figures ``key`` publishes after this release point."""
        now = tuple(int(c) for c in churn)
        prev = self._released.get(key)
        if prev is not None and len(prev.churn) == len(now):
            deltas = [a - b for a, b in zip(now, prev.churn, strict=True)]
            if not releasable(deltas):
                return prev.figures
        self._released[key] = Release(figures, now)
        return figures

    def released(self, key: K) -> T | None:
        """The figures ``key`` publishes now (None: withheld or never released)."""
        r = self._released.get(key)
        return None if r is None else r.figures
