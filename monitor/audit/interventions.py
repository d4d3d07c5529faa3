"""docs/method.md section 8, the computation: splits, reweighing, per-group thresholds, refinement.

Pure functions on arrays (no files, no model fitting): ``monitor.audit.intervene``
loads the cohort, fits the models and writes the results.

Why thresholds take the shape they do: the service derives a record's decision
from ``[decision.per_group]`` (``monitor.stream.schema.decision_thresholds``),
where for each attribute *in the order listed* every listed group code sets the
threshold of its records, so a later attribute overrides an earlier one and a
record no listed group covers keeps the global threshold. A
:class:`ThresholdPlan` is exactly that object, and the searches below move its
thresholds with that resolution, so the decisions chosen here are the ones the
service will make from the written TOML. Intersectional thresholds (one per
race x sex x age cell) cannot be written in that format and are not searched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from monitor.config import MIN_GROUP_SUPPORT, MonitorConfig
from monitor.config.engine import engine_options
from monitor.core.axis1 import run_axis1
from monitor.core.cell_result import CellResult
from monitor.core.counts import CountTable

#: Pass-rule tolerance, as in monitor.core.metrics.passes.
_TOL = 1e-12


# ----------------------------------------------------------------------------- splits
@dataclass(frozen=True)
class Split:
    """Row positions of the train / validation / audit parts."""

    train: np.ndarray
    validation: np.ndarray
    audit: np.ndarray
    grouped: bool  # True: no hospital in two parts

    def parts(self) -> dict[str, np.ndarray]:
        return {"train": self.train, "validation": self.validation, "audit": self.audit}


def split_cohort(
    n: int,
    fractions: Sequence[float],
    seed: int,
    hospital_ids: np.ndarray | None = None,
    labels: np.ndarray | None = None,
) -> Split:
    """A seeded train / validation / audit split of ``n`` records.

    With hospital ids, whole hospitals are assigned (GroupShuffleSplit's rule: no
    hospital in two parts) in a seeded random order, each to the part whose
    record share is still below its target when the hospital comes up. Unlike
    GroupShuffleSplit, which takes a share of *hospitals*, this hits the record
    shares (within about one hospital's volume) when site sizes are skewed.
    Without hospital ids, a label-stratified random split (scikit-learn).
    """
    f_train, f_val, _ = (float(x) for x in fractions)
    if hospital_ids is None:
        from sklearn.model_selection import train_test_split

        idx = np.arange(n)
        strat = labels if labels is not None and len(np.unique(labels)) > 1 else None
        n_train, n_val = round(f_train * n), round(f_val * n)
        train, rest = train_test_split(
            idx, train_size=n_train, random_state=seed, shuffle=True, stratify=strat
        )
        rest = np.sort(rest)
        strat_rest = strat[rest] if strat is not None else None
        val, audit = train_test_split(
            rest, train_size=n_val, random_state=seed + 1, shuffle=True, stratify=strat_rest
        )
        return Split(np.sort(train), np.sort(val), np.sort(audit), grouped=False)
    codes, inverse = np.unique(np.asarray(hospital_ids, dtype=str), return_inverse=True)
    sizes = np.bincount(inverse, minlength=len(codes))
    order = np.random.default_rng([seed, 13]).permutation(len(codes))
    cum = np.cumsum(sizes[order]) - sizes[order]  # records assigned before this hospital
    part_of = np.empty(len(codes), np.int64)
    part_of[order] = np.where(cum < f_train * n, 0, np.where(cum < (f_train + f_val) * n, 1, 2))
    rows = part_of[inverse]
    train, validation, audit = (np.flatnonzero(rows == k) for k in range(3))
    return Split(train, validation, audit, grouped=True)


# ----------------------------------------------------------------------------- reweighing
def kamiran_calders_weights(
    cells: np.ndarray,
    labels: np.ndarray,
    lam: float = 1.0,
    clip: tuple[float, float] = (0.1, 10.0),
) -> np.ndarray:
    """Per-record weight w = 1 + lam (w_KC - 1), clipped; w_KC(c, y) = P(c) P(y) / P(c, y).

    ``cells`` holds each record's intersectional cell (any hashable code), ``labels``
    its 0/1 outcome. ``lam = 1`` is plain Kamiran-Calders reweighing (AIF360's
    ``Reweighing``: n_c n_y / (n n_cy)), ``lam = 0`` leaves every weight at 1. Why
    label-aware: reweighing that only balances cell sizes leaves the label-cell
    dependence the method exists to remove (docs/method.md section 10).
    """
    _, c = np.unique(np.asarray(cells), return_inverse=True)
    y = np.asarray(labels, dtype=np.int64)
    n = len(y)
    n_c = np.bincount(c)
    n_y = np.bincount(y, minlength=2)
    n_cy = np.bincount(c * 2 + y, minlength=2 * len(n_c))
    w_kc = n_c[c] * n_y[y] / (n * n_cy[c * 2 + y])
    return np.clip(1.0 + lam * (w_kc - 1.0), clip[0], clip[1])


def intersection_cells(columns: Mapping[str, np.ndarray], attributes: Sequence[str]) -> np.ndarray:
    """Each record's intersectional cell as text, e.g. ``"race=3|age_group=1|sex=0"``."""
    parts = [np.char.add(f"{a}=", np.asarray(columns[a], dtype=str)) for a in attributes]
    out = parts[0]
    for p in parts[1:]:
        out = np.char.add(np.char.add(out, "|"), p)
    return out


# ----------------------------------------------------------------------------- groups
@dataclass(frozen=True)
class GroupCodes:
    """One attribute on one split: its configured codes and each record's code position."""

    name: str
    codes: tuple[str, ...]
    index: np.ndarray  # (n,) position in ``codes``

    @property
    def counts(self) -> np.ndarray:
        return np.bincount(self.index, minlength=len(self.codes))


def selection_rates(decision: np.ndarray, g: GroupCodes) -> np.ndarray:
    """SR per group (NaN for an empty group)."""
    n = g.counts
    pos = np.bincount(g.index, weights=decision, minlength=len(g.codes))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, pos / np.maximum(n, 1), np.nan)


def disparate_impact(sr: np.ndarray, supported: np.ndarray) -> float:
    """min_g SR / max_g SR over supported groups; 1.0 when the max is 0; NaN below 2 groups.

    The same definition as monitor.core.metrics.disparate_impact (docs/method.md section 2).
    """
    vals = sr[supported]
    if len(vals) < 2:
        return math.nan
    top = float(vals.max())
    return 1.0 if top == 0 else float(vals.min()) / top


def di_passes(di: float, target: float) -> bool:
    """DI >= target (an undefined DI fails, as in the audit grid)."""
    return bool(np.isfinite(di) and di >= target - _TOL)


# ----------------------------------------------------------------------------- thresholds
@dataclass(frozen=True)
class ThresholdPlan:
    """Per-group decision thresholds in ``[decision.per_group]`` form.

    ``attributes`` is the listing order (a later attribute overrides an earlier one
    for records in both); ``thresholds[a][code]`` is a listed group's threshold.
    """

    base: float
    attributes: tuple[str, ...]
    thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def per_group(self) -> dict[str, dict[str, float]]:
        """``{attribute: {code: threshold}}`` in listing order, listed groups only."""
        return {a: dict(self.thresholds[a]) for a in self.attributes if self.thresholds.get(a)}

    def resolve(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """Each record's threshold, resolved as decision_thresholds does."""
        n = len(next(iter(columns.values())))
        thr = np.full(n, self.base)
        for a, by_code in self.per_group().items():
            codes = np.asarray(columns[a], dtype=object)
            for code, t in by_code.items():
                thr[codes == code] = t
        return thr

    def decisions(self, scores: np.ndarray, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        return (scores >= self.resolve(columns)).astype(np.int64)


def _grid(t: float, step: float) -> float:
    """Thresholds live on a grid (rounded so the TOML round trip is exact)."""
    return round(min(max(t, step), 1.0 - step), 6)


class _State:
    """The searched plan with each record's owner (the listed group that sets its threshold)."""

    def __init__(
        self,
        scores: np.ndarray,
        labels: np.ndarray,
        groups: Sequence[GroupCodes],
        base: float,
        min_support: int,
        owners: int | None = None,
    ):
        self.s = scores
        self.y = labels
        #: every checked attribute (DI); the first ``owners`` may own thresholds, the rest
        #: (intersections) are only checked: the service's per-group thresholds are per
        #: configured attribute (docs/decisions.md, "Intersectional cells")
        self.groups = list(groups)
        self.owners = len(self.groups) if owners is None else owners
        self.base = base
        self.n = len(scores)
        self.thr = np.full(self.n, base)
        self.owner_pos = np.full(self.n, -1)  # attribute position of the owner, -1: none
        self.listed: dict[tuple[int, int], float] = {}
        self.members = {
            (ai, gi): g.index == gi
            for ai, g in enumerate(self.groups[: self.owners])
            for gi in range(len(g.codes))
        }
        self.supported = [g.counts >= min_support for g in self.groups]
        self.decision = (scores >= self.thr).astype(np.int64)
        self.pos = [np.bincount(g.index, weights=self.decision, minlength=len(g.codes))
                    for g in self.groups]  # fmt: skip
        self.correct = int((self.decision == self.y).sum())

    def affected(self, ai: int, gi: int) -> np.ndarray:
        return np.flatnonzero(self.members[(ai, gi)] & (self.owner_pos <= ai))

    def trial(self, ai: int, gi: int, t: float) -> tuple[list[np.ndarray], int, np.ndarray]:
        """Positives per group, correct count and the affected rows if (ai, gi) moved to t."""
        rows = self.affected(ai, gi)
        new = (self.s[rows] >= t).astype(np.int64)
        delta = new - self.decision[rows]
        pos = [p + np.bincount(g.index[rows], weights=delta, minlength=len(g.codes))
               for p, g in zip(self.pos, self.groups, strict=True)]  # fmt: skip
        correct = self.correct + int(((new == self.y[rows]).astype(np.int64)
                                      - (self.decision[rows] == self.y[rows])).sum())  # fmt: skip
        return pos, correct, rows

    def apply(self, ai: int, gi: int, t: float) -> None:
        pos, correct, rows = self.trial(ai, gi, t)
        self.thr[rows] = t
        self.owner_pos[rows] = ai
        self.decision[rows] = (self.s[rows] >= t).astype(np.int64)
        self.pos, self.correct = pos, correct
        self.listed[(ai, gi)] = t

    def current(self, ai: int, gi: int) -> float:
        return self.listed.get((ai, gi), self.base)

    def rates(self, pos: list[np.ndarray]) -> list[np.ndarray]:
        return [p / np.maximum(g.counts, 1) for p, g in zip(pos, self.groups, strict=True)]

    def dis(self, pos: list[np.ndarray]) -> list[float]:
        return [disparate_impact(sr, ok) for sr, ok in zip(self.rates(pos), self.supported,
                                                           strict=True)]  # fmt: skip

    def deficit(self, pos: list[np.ndarray], target: float) -> float:
        """Sum over attributes and supported groups of max(0, target * max SR - SR_g)."""
        total = 0.0
        for sr, ok in zip(self.rates(pos), self.supported, strict=True):
            if ok.sum() < 2:
                continue
            vals = sr[ok]
            total += float(np.clip(target * vals.max() - vals, 0.0, None).sum())
        return total

    def feasible(self, pos: list[np.ndarray], target: float) -> bool:
        return all(
            di_passes(d, target) for d, ok in zip(self.dis(pos), self.supported, strict=True)
            if ok.sum() >= 2
        )  # fmt: skip

    def plan(self) -> ThresholdPlan:
        by_attr: dict[str, dict[str, float]] = {}
        for (ai, gi), t in sorted(self.listed.items()):
            g = self.groups[ai]
            by_attr.setdefault(g.name, {})[g.codes[gi]] = t
        owners = tuple(g.name for g in self.groups[: self.owners])
        return ThresholdPlan(self.base, owners, by_attr)


@dataclass(frozen=True)
class SearchResult:
    """B3: the plan, whether it meets the DI target on validation, and its figures there."""

    plan: ThresholdPlan
    feasible: bool
    steps: int
    accuracy: float  # on the validation rows
    di: dict[str, float]
    note: str = ""


#: Move sizes tried per step, in grid steps: small moves for precision, larger ones to
#: cross plateaus where a small group's selection rate does not change for one step.
_MOVES = (1, 2, 5, 10)


def _candidates(state: _State, step: float) -> list[tuple[int, int, float]]:
    out = []
    for ai, g in enumerate(state.groups[: state.owners]):
        for gi in range(len(g.codes)):
            if not state.supported[ai][gi]:
                continue  # a group left out of DI gets no threshold of its own
            cur = state.current(ai, gi)
            for k in _MOVES:
                for sign in (-1, 1):
                    t = _grid(cur + sign * k * step, step)
                    if t != cur:
                        out.append((ai, gi, t))
    return out


def search_thresholds(
    scores: np.ndarray,
    labels: np.ndarray,
    groups: Sequence[GroupCodes],
    *,
    base: float,
    target: float = 0.80,
    step: float = 0.01,
    min_support: int = MIN_GROUP_SUPPORT,
    max_steps: int = 2_000,
    owners: int | None = None,
) -> SearchResult:
    """B3: per-group thresholds with DI >= target on every attribute at the best accuracy found.

    ``owners``: the first that many of ``groups`` get thresholds (the configured
    attributes); the others (intersections) are only held to the DI target.

    Greedy on the given (validation) rows only. Phase 1 reaches the DI target:
    each step takes the move with the largest reduction of the DI shortfall per
    accuracy point lost (moves that lose nothing first). Phase 2 climbs accuracy:
    each step takes the move that gains the most accuracy while every DI still
    meets the target. A heuristic, not a global optimum: it is written down as such.
    """
    st = _State(scores, labels, groups, base, min_support, owners)
    steps = 0
    while not st.feasible(st.pos, target) and steps < max_steps:
        d0 = st.deficit(st.pos, target)
        best: tuple[tuple[float, ...], tuple[int, int, float]] | None = None
        for ai, gi, t in _candidates(st, step):
            pos, correct, _ = st.trial(ai, gi, t)
            gain = d0 - st.deficit(pos, target)
            if gain <= 1e-12:
                continue
            lost = (st.correct - correct) / st.n
            key: tuple[float, ...] = (1.0, gain, -lost) if lost <= 0 else (0.0, gain / lost, -lost)
            if best is None or key > best[0]:
                best = (key, (ai, gi, t))
        if best is None:
            break
        st.apply(*best[1])
        steps += 1
    feasible = st.feasible(st.pos, target)
    note = "" if feasible else "DI target not reached on validation by the greedy search"
    while feasible and steps < max_steps:
        best = None
        for ai, gi, t in _candidates(st, step):
            pos, correct, _ = st.trial(ai, gi, t)
            if correct > st.correct and st.feasible(pos, target):
                key = (correct, -abs(t - st.base))
                if best is None or key > best[0]:
                    best = (key, (ai, gi, t))
        if best is None:
            break
        st.apply(*best[1])
        steps += 1
    return SearchResult(
        st.plan(), feasible, steps, st.correct / st.n,
        {g.name: d for g, d in zip(st.groups, st.dis(st.pos), strict=True)}, note,
    )  # fmt: skip


# ----------------------------------------------------------------------------- refinement
Objective = Callable[[np.ndarray], tuple[float, float]]


@dataclass(frozen=True)
class RefineResult:
    """B4: the refined plan and its path (objective before and after, accepted moves)."""

    plan: ThresholdPlan
    steps: int
    objective_start: tuple[float, float]
    objective_end: tuple[float, float]
    accuracy: float
    di: dict[str, float]
    moves: list[dict[str, object]]


def refine_thresholds(
    start: ThresholdPlan,
    scores: np.ndarray,
    labels: np.ndarray,
    groups: Sequence[GroupCodes],
    objective: Objective,
    *,
    target: float = 0.80,
    step: float = 0.01,
    min_support: int = MIN_GROUP_SUPPORT,
    max_steps: int = 300,
    owners: int | None = None,
) -> RefineResult:
    """B4: move B3's thresholds back toward the base one while DI holds and VFR does not worsen.

    Each step tries every listed threshold one grid step closer to ``base`` and keeps
    the move with the lowest objective (max VFR, then mean VFR, on these rows) among
    those where every DI still meets the target and the objective is no worse than
    now; ties go to the higher accuracy. Stops when no move qualifies. Every move is
    toward ``base``, so the walk ends.
    """
    st = _State(scores, labels, groups, start.base, min_support, owners)
    name_pos = {g.name: ai for ai, g in enumerate(groups)}
    for a in start.attributes:
        for code, t in start.thresholds.get(a, {}).items():
            ai = name_pos[a]
            st.apply(ai, groups[ai].codes.index(code), t)
    current = objective(st.decision)
    first = current
    moves: list[dict[str, object]] = []
    for _ in range(max_steps):
        best = None
        for (ai, gi), t in sorted(st.listed.items()):
            if t == st.base:
                continue
            toward = t - step if t > st.base else t + step
            crossed = (toward - st.base) * (t - st.base) <= 0 or abs(toward - st.base) < step / 2
            new_t = st.base if crossed else _grid(toward, step)
            pos, correct, rows = st.trial(ai, gi, new_t)
            if not st.feasible(pos, target):
                continue
            decision = st.decision.copy()
            decision[rows] = (st.s[rows] >= new_t).astype(np.int64)
            obj = objective(decision)
            if obj > current:
                continue
            key = (obj, -correct)
            if best is None or key < best[0]:
                best = (key, (ai, gi, new_t), obj)
        if best is None:
            break
        ai, gi, new_t = best[1]
        moves.append({"attribute": groups[ai].name, "group": groups[ai].codes[gi],
                      "from": st.current(ai, gi), "to": new_t,
                      "max_vfr": best[2][0], "mean_vfr": best[2][1]})  # fmt: skip
        st.apply(ai, gi, new_t)
        current = best[2]
    return RefineResult(
        st.plan(), len(moves), first, current, st.correct / st.n,
        {g.name: d for g, d in zip(st.groups, st.dis(st.pos), strict=True)}, moves,
    )  # fmt: skip


def vfr_cells(
    labels: np.ndarray,
    decisions: np.ndarray,
    scores: np.ndarray,
    groups: Sequence[GroupCodes],
    config: MonitorConfig,
    model_id: str = "validation",
) -> list[CellResult]:
    """Axis 1 (the project's engine) on records given as arrays."""
    bins = config.axis1.score_bins
    tables = {
        (model_id, g.name): CountTable.from_records(g.codes, g.index, labels, decisions, scores,
                                                    bins)
        for g in groups
    }  # fmt: skip
    return run_axis1(tables, engine_options(config, threads=1), config.axis1.seed)


def vfr_objective(
    labels: np.ndarray, scores: np.ndarray, groups: Sequence[GroupCodes], config: MonitorConfig
) -> Objective:
    """The B4 objective: (max VFR, mean VFR) over the configured cells, lower is better.

    The bootstrap seed is fixed, so two candidate decision sets are compared on the
    same random streams (common random numbers), not on independent noise.
    """

    def objective(decisions: np.ndarray) -> tuple[float, float]:
        vfr = [c.vfr for c in vfr_cells(labels, decisions, scores, groups, config)]
        return (round(max(vfr), 12), round(float(np.mean(vfr)), 12))

    return objective
