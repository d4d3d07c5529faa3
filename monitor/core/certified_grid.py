"""A model's certified cells (:mod:`monitor.core.certify`), updated together at each block.

Why a module of its own: the stream updates every certified cell of a model (20 on the
default grid) at each count hop. :meth:`CertifiedCell.update` does it for one cell with
about two hundred numpy calls on arrays of a few dozen pairs, so the calls' own cost was
nearly all of it: 20 to 45 ms a hop of 1,000 records on the ingest thread, the largest
part of the pipeline's time (docs/decisions.md, "Ingest path": the profile). Here the
pairs of all the cells lie end to end in one flat vector, and each step of the update is
one numpy call over all of them.

Bit for bit the arithmetic of :meth:`CertifiedCell.update`, which stays the definition
(tests/core/test_certified_grid.py compares the two under hypothesis):

* every step on pairs, groups or rates is elementwise, and an elementwise operation gives
  each element the same result whatever array it sits in; the bets and e-values, the only
  steps that read the metric's constraint (theta, eps), run once per run of consecutive
  cells with the same constraint, with the very functions the cell calls;
* the float sums over a cell's pairs (the fail detector's mean of its pairs) and over its
  groups (the records behind a change) are taken cell by cell, on contiguous slices, as
  numpy sums one cell's array (a segmented reduction such as ``np.add.reduceat`` adds in
  another order, so other bits); the other reductions are exact in any order (counts of
  booleans, a minimum);
* the cells hold their arrays as before (views of the flat result), so every reader of a
  cell, :meth:`CertifiedGrid.state` and :meth:`CertifiedGrid.restore` are unchanged.

Validation is the cell's, done before any cell moves (a bad block changes none of them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from monitor.core.certify import (
    _FAIL,
    _PASS,
    _R_CAP,
    VERDICTS,
    CertifiedCell,
    both_sides_bets,
    certified_rules,
    cube_rate_counts,
    log_e_values,
    outcome_cube,
    threshold_for_budget,
)
from monitor.core.counts import CountTable
from monitor.core.method import MetricRule
from monitor.core.outcome_split import needs_label

#: one block's counts for one cell, as :meth:`CertifiedCell.update` takes them
Counts = Mapping[str, tuple[np.ndarray, np.ndarray]]
#: a certified change: (metric, attribute, old verdict, new verdict, records behind it)
Change = tuple[str, str, str, str, int]


class _Layout:
    """Where each cell's numbers sit in the flat vectors (fixed for a grid).

    Three kinds of slot, each cell's in one contiguous span, cells in grid order:
    rate-group slots (a cell's ``x`` and ``n``, rates x groups, rate-major), group slots
    (``entering``) and pair slots (``r_fail``/``r_pass`` rows: rates x ordered pairs,
    rate-major, as :meth:`CertifiedCell.update` lays them out).
    """

    def __init__(self, cells: Sequence[CertifiedCell]):
        rg = [0]
        g = [0]
        q = [0]
        pa_rg, pb_rg, pa_g, pb_g, rg_g, rg_rates = [], [], [], [], [], []
        for cell in cells:
            R, G = len(cell.spec.rates), len(cell.groups)
            for r in range(R):
                pa_rg.append(rg[-1] + r * G + cell.pair_a)
                pb_rg.append(rg[-1] + r * G + cell.pair_b)
                pa_g.append(g[-1] + cell.pair_a)
                pb_g.append(g[-1] + cell.pair_b)
            rg_g.append(np.tile(np.arange(G) + g[-1], R))
            rg_rates.append(np.full(G, R))
            rg.append(rg[-1] + R * G)
            g.append(g[-1] + G)
            q.append(q[-1] + R * len(cell.pair_a))
        C = len(cells)
        self.rg, self.g, self.q = np.array(rg), np.array(g), np.array(q)
        self.pa_rg, self.pb_rg = np.concatenate(pa_rg), np.concatenate(pb_rg)
        self.pa_g, self.pb_g = np.concatenate(pa_g), np.concatenate(pb_g)
        #: each pair slot's cell, each group slot's cell, each rate-group slot's group slot
        self.pair_cell = np.repeat(np.arange(C), np.diff(self.q))
        self.g_cell = np.repeat(np.arange(C), np.diff(self.g))
        self.rg_g = np.concatenate(rg_g)
        #: rates of each group slot's cell (a group enters when it has support in all)
        self.g_rates = np.concatenate(rg_rates)
        #: each cell's span of its first rate's rate-group slots (records behind a change)
        self.first = [(int(self.rg[c]), int(self.rg[c] + len(cell.groups)))
                      for c, cell in enumerate(cells)]  # fmt: skip
        self.pairs = [(int(self.q[c]), int(self.q[c + 1])) for c in range(C)]
        #: (first pair slot, end pair slot, first cell) of each run of consecutive cells
        #: with the same constraint and bets: the bets and e-values are computed per run
        self.runs: list[tuple[int, int, int]] = []
        key = None
        for c, cell in enumerate(cells):
            k = (cell.spec.theta, cell.spec.eps, cell.margin, cell.grid)
            if k != key:
                self.runs.append((int(self.q[c]), int(self.q[c + 1]), c))
                key = k
            else:
                self.runs[-1] = (self.runs[-1][0], int(self.q[c + 1]), self.runs[-1][2])


def flat_update(
    cells: Sequence[CertifiedCell], counts: Sequence[Counts], years: float, layout: _Layout
) -> np.ndarray:
    """:meth:`CertifiedCell.update` of every cell with its block's counts, at once; returns
    which cells changed their verdict (their ``last_old``/``last_change`` say how).

    The cells must share the detector's settings besides the constraint (threshold,
    support, decay, bet grid; single cells): :func:`flat_updatable`.
    """
    L, C = layout, len(cells)
    one = cells[0]
    xs = np.concatenate([counts[c][r][0] for c, cell in enumerate(cells)
                         for r in cell.spec.rates]).astype(np.float64)  # fmt: skip
    ns = np.concatenate([counts[c][r][1] for c, cell in enumerate(cells)
                         for r in cell.spec.rates]).astype(np.float64)  # fmt: skip
    if np.any(xs < 0) or np.any(xs > ns):
        raise ValueError("successes must lie between 0 and the trials")
    years_ = np.asarray(years, np.float64)
    if np.any(years_ < 0):
        raise ValueError("a block's length in years cannot be negative")
    x = np.concatenate([c.x.ravel() for c in cells])
    n = np.concatenate([c.n.ravel() for c in cells])
    state = np.array([c.state for c in cells], dtype=np.int8)
    # entering groups from the past only; the detectors restart where they moved
    support = np.bincount(L.rg_g, weights=n >= one.min_group_support, minlength=len(L.g_cell))
    entering = support == L.g_rates
    old = np.concatenate([c.entering for c in cells])
    moved = np.bincount(L.g_cell, weights=entering != old, minlength=C) > 0
    moved_p = moved[L.pair_cell][:, None]
    r_fail = np.where(moved_p, 0.0, np.concatenate([c.r_fail for c in cells]))
    r_pass = np.where(moved_p, 0.0, np.concatenate([c.r_pass for c in cells]))
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(n > 0, x / n, 0.5)
    qa, qb = q[L.pa_rg], q[L.pb_rg]
    xa, xb, na, nb = xs[L.pa_rg], xs[L.pb_rg], ns[L.pa_rg], ns[L.pb_rg]
    mask = entering[L.pa_g] & entering[L.pb_g]
    evaluable = np.bincount(L.pair_cell, weights=mask, minlength=C) > 0
    w = np.where(evaluable, years_, 0.0)[L.pair_cell][:, None]
    m = mask[:, None]
    state_p = state[L.pair_cell][:, None]
    # both sides' e-values, run by run (one constraint each): [0] fail, [1] pass
    log_e = np.zeros((2, *r_fail.shape))
    for lo, hi, first in L.runs:
        cell = cells[first]
        spec = cell.spec
        la, lb = both_sides_bets(qa[lo:hi], qb[lo:hi], na[lo:hi], nb[lo:hi], spec.theta,
                                 spec.eps, cell.margin, cell.grid)  # fmt: skip
        log_e[:, lo:hi] = log_e_values(
            xa[None, lo:hi, None], na[None, lo:hi, None], xb[None, lo:hi, None],
            nb[None, lo:hi, None], la, lb, spec.theta, spec.eps,
        )  # fmt: skip
    e = np.where(m, np.exp(np.minimum(log_e, 600.0)), 1.0)
    r_fail = np.where(m, np.minimum((w + r_fail) * e[0], _R_CAP), 0.0)
    r_pass = np.where(m, np.minimum((w + r_pass) * e[1], _R_CAP), 0.0)
    # in a certified state only the other side's detector runs
    r_fail = np.where(state_p == _FAIL, 0.0, r_fail)
    r_pass = np.where(state_p == _PASS, 0.0, r_pass)
    fail, ok = _statistics(r_fail, r_pass, mask, evaluable, layout)
    threshold = one.threshold
    to_fail = evaluable & (fail >= threshold) & (state != _FAIL)
    to_pass = evaluable & (ok >= threshold) & (state != _PASS) & ~to_fail
    changed: np.ndarray = to_fail | to_pass
    last_old = np.where(changed, state, 0).astype(np.int8)
    last_change = np.where(to_fail, _FAIL, np.where(to_pass, _PASS, 0)).astype(np.int8)
    state = np.where(changed, last_change, state).astype(np.int8)
    changed_p = changed[L.pair_cell][:, None]
    r_fail = np.where(changed_p, 0.0, r_fail)
    r_pass = np.where(changed_p, 0.0, r_pass)
    records = np.array([c.records for c in cells], dtype=np.float64)
    since = records + np.array([ns[lo:hi].sum() for lo, hi in L.first])
    last_records = np.where(changed, since, 0.0)  # the evidence behind a change
    records = np.where(changed, 0.0, since)
    x = one.decay * x + xs  # decayed counts for the next block's bets and support
    n = one.decay * n + ns
    for c, cell in enumerate(cells):
        rg0, rg1 = L.rg[c], L.rg[c + 1]
        q0, q1 = L.pairs[c]
        shape = cell.x.shape
        cell.x, cell.n = x[rg0:rg1].reshape(shape), n[rg0:rg1].reshape(shape)
        cell.r_fail, cell.r_pass = r_fail[q0:q1], r_pass[q0:q1]
        cell.entering = entering[L.g[c] : L.g[c + 1]]
        cell.state = state[c : c + 1].reshape(())
        cell.records = records[c : c + 1].reshape(())
        cell.last_records = last_records[c : c + 1].reshape(())
        cell.last_change = last_change[c : c + 1].reshape(())
        cell.last_old = last_old[c : c + 1].reshape(())
    return changed


def _statistics(
    r_fail: np.ndarray, r_pass: np.ndarray, mask: np.ndarray, evaluable: np.ndarray, L: _Layout
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`CertifiedCell._statistics` of every cell: the mean of the fail detectors of
    its entering pairs, and the smallest pass detector (0 where none enters)."""
    k = np.maximum(np.bincount(L.pair_cell, weights=mask, minlength=len(L.pairs)), 1)
    fail_each = np.where(mask, r_fail.mean(axis=-1), 0.0)
    fail = np.array([fail_each[lo:hi].sum() for lo, hi in L.pairs]) / k
    ok = np.minimum.reduceat(np.where(mask, r_pass.mean(axis=-1), np.inf), L.q[:-1])
    return fail, np.where(evaluable, ok, 0.0)


def flat_updatable(cells: Sequence[CertifiedCell]) -> bool:
    """Whether :func:`flat_update` may take these cells: single cells with two groups or
    more, sharing everything but the constraint."""
    if not cells:
        return False
    one = cells[0]
    same = (one.threshold, one.min_group_support, one.decay, one.margin, one.grid)
    return all(
        c.batch == () and len(c.groups) >= 2
        and (c.threshold, c.min_group_support, c.decay, c.margin, c.grid) == same
        for c in cells
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class CellReading:
    """What a cell says now: its verdict, the records since its last change, whether two
    groups or more enter it, and its evidence (:meth:`CertifiedCell.evidence`: log10 of
    each side's detector over the threshold; >= 0 certifies)."""

    verdict: str
    records: int
    evaluable: bool
    fail: float
    ok: float

    @classmethod
    def of(cls, cell: CertifiedCell) -> CellReading:
        ev = cell.evidence()
        return cls(cast(str, cell.verdict), int(np.asarray(cell.records)), bool(cell.evaluable),
                   ev["fail"], ev["pass"])  # fmt: skip


class CertifiedGrid:
    """The certified verdicts of one model's grid: a :class:`CertifiedCell` per
    certifiable (metric, attribute), the threshold from the model's budget.

    What the pipeline needs at each count hop: ``observe`` with the hop's *block* tables
    (attribute -> CountTable of the records since the previous hop; for label-based
    metrics, of the outcomes joined since then) and the block's length in years of event
    time; it returns the certified changes, each (metric, attribute, old, new, records):
    a change from 'undetermined' is a first certification (a notice), any other a page.
    :meth:`observe_cubes` takes the same blocks as (group, label, decision) counts
    (:func:`~monitor.core.certify.outcome_cube`), as the stream keeps them.
    ``state()`` / ``restore()`` carry the cells across a restart.

    >>> from monitor.config import MonitorConfig
    >>> cfg = MonitorConfig()
    >>> grid = CertifiedGrid(cfg.metrics, {a.name: a.codes for a in cfg.attributes}, 0.1)
    >>> len(grid.cells), grid.threshold
    (20, 400.0)
    """

    def __init__(
        self,
        rules: Sequence[MetricRule],
        attributes: Mapping[str, Sequence[str]],
        false_pages_per_year: float,
        min_group_support: int = 20,
    ):
        keys = [(r, a) for r in certified_rules(rules) for a in attributes]
        self.threshold = threshold_for_budget(false_pages_per_year, max(len(keys), 1))
        self.cells = {
            (r.name, a): CertifiedCell(r, attributes[a], self.threshold,
                                       min_group_support=min_group_support)
            for r, a in keys
        }  # fmt: skip
        self._layout: _Layout | None = None

    def observe(
        self,
        blocks: Mapping[str, CountTable],
        years: float,
        outcomes: Mapping[str, CountTable] | None = None,
    ) -> list[Change]:
        """One block into every cell. ``outcomes``: where outcomes arrive after their
        predictions, the tables of the outcomes joined in the block, which the label-based
        metrics read instead of ``blocks`` (each outcome counted in the block it arrived in)."""
        cubes = {a: outcome_cube(t) for a, t in blocks.items()}
        joined = None if outcomes is None else {a: outcome_cube(t) for a, t in outcomes.items()}
        return self.observe_cubes(cubes, years, joined)

    def observe_cubes(
        self,
        blocks: Mapping[str, np.ndarray],
        years: float,
        outcomes: Mapping[str, np.ndarray] | None = None,
    ) -> list[Change]:
        """:meth:`observe` with each table as its (group, label, decision) counts."""
        cells = list(self.cells.items())
        counts: list[Counts] = []
        rates: dict[tuple[int, str, str], tuple[np.ndarray, np.ndarray]] = {}
        for (metric, attribute), cell in cells:
            source = outcomes if outcomes is not None and needs_label(metric) else blocks
            if attribute not in source:
                return self._observe_each(cells, blocks, years, outcomes)
            for r in cell.spec.rates:  # DI and SPD read the same SR counts
                key = (id(source), attribute, r)
                if key not in rates:
                    rates[key] = cube_rate_counts(source[attribute], r)
            counts.append({r: rates[(id(source), attribute, r)] for r in cell.spec.rates})
        if not flat_updatable([c for _, c in cells]):
            return self._observe_each(cells, blocks, years, outcomes)
        if self._layout is None:
            self._layout = _Layout([c for _, c in cells])
        changed = flat_update([c for _, c in cells], counts, years, self._layout)
        return [_change(k, c) for i, (k, c) in enumerate(cells) if changed[i]]

    @staticmethod
    def _observe_each(
        cells: list[tuple[tuple[str, str], CertifiedCell]],
        blocks: Mapping[str, np.ndarray],
        years: float,
        outcomes: Mapping[str, np.ndarray] | None,
    ) -> list[Change]:
        """Cell by cell (a cell whose attribute the block lacks takes nothing)."""
        changes = []
        for (metric, attribute), cell in cells:
            source = outcomes if outcomes is not None and needs_label(metric) else blocks
            if attribute not in source:
                continue
            cube = source[attribute]
            if cell.update({r: cube_rate_counts(cube, r) for r in cell.spec.rates}, years):
                changes.append(_change((metric, attribute), cell))
        return changes

    def readings(self) -> dict[tuple[str, str], CellReading]:
        """Every cell's :class:`CellReading`, from one pass over all the cells' detectors
        (the numbers :meth:`CellReading.of` reads cell by cell)."""
        cells = list(self.cells.values())
        if not flat_updatable(cells):
            return {k: CellReading.of(c) for k, c in self.cells.items()}
        if self._layout is None:
            self._layout = _Layout(cells)
        L = self._layout
        entering = np.concatenate([c.entering for c in cells])
        mask = entering[L.pa_g] & entering[L.pb_g]
        evaluable = np.bincount(L.pair_cell, weights=mask, minlength=len(cells)) > 0
        r_fail = np.concatenate([c.r_fail for c in cells])
        r_pass = np.concatenate([c.r_pass for c in cells])
        fail, ok = _statistics(r_fail, r_pass, mask, evaluable, L)
        c = np.log10(self.threshold)
        fail = np.log10(np.maximum(fail, 1e-300)) - c
        ok = np.log10(np.maximum(ok, 1e-300)) - c
        state = [int(c.state) for c in cells]
        records = [int(np.asarray(c.records)) for c in cells]
        return {
            k: CellReading(VERDICTS[v], n, e, f, o)
            for k, v, n, e, f, o in zip(self.cells, state, records, evaluable.tolist(),
                                        fail.tolist(), ok.tolist(), strict=True)
        }  # fmt: skip

    def verdicts(self) -> dict[tuple[str, str], str]:
        # a grid's cells are single cells (no batch axis): each verdict is one str
        return {k: cast(str, c.verdict) for k, c in self.cells.items()}

    _ARRAYS = ("x", "n", "r_fail", "r_pass", "entering", "state", "records")

    def state(self) -> dict[str, dict[str, Any]]:
        """JSON-ready state of every cell (lists of numbers)."""
        return {
            f"{m}|{a}": {k: np.asarray(getattr(c, k)).tolist() for k in self._ARRAYS}
            for (m, a), c in self.cells.items()
        }

    def restore(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Load :meth:`state`; cells it does not name start undetermined.

        A state saved before the detectors had a bet-grid axis (``r_fail``/``r_pass`` one
        number per pair) is accepted: each pair's number becomes every one of its
        detectors' (each continues the saved detector with its own bets from here on,
        which is as valid as the saved one, so their mean is)."""
        for (m, a), c in self.cells.items():
            saved = state.get(f"{m}|{a}")
            if saved is None:
                continue
            for k in self._ARRAYS:
                cur = np.asarray(getattr(c, k))
                arr = np.asarray(saved[k], dtype=cur.dtype)
                if k in ("r_fail", "r_pass") and arr.shape == cur.shape[:-1]:
                    arr = np.repeat(arr[..., None], cur.shape[-1], axis=-1)
                setattr(c, k, arr.reshape(cur.shape))


def _change(key: tuple[str, str], cell: CertifiedCell) -> Change:
    return (*key, VERDICTS[int(cell.last_old)], VERDICTS[int(cell.last_change)],
            int(cell.last_records))  # fmt: skip
