"""A model's grid of certified cells (monitor/core/certified_grid.py): the flat update of
every cell at once against :meth:`CertifiedCell.update` cell by cell (the definition), bit
for bit, on random grids and streams; pages and a restart; a state from before the bet
grid."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.core.certified_grid import CertifiedGrid, flat_updatable
from monitor.core.certify import CertifiedCell, block_counts
from monitor.core.counts import CountTable
from monitor.core.method import MetricRule
from monitor.core.outcome_split import needs_label

DI = MetricRule(name="DI", threshold=0.8, direction=">=")
SPD = MetricRule(name="SPD", threshold=0.1, direction="abs<=")
RULES = [
    DI, SPD,
    MetricRule(name="EOPP", threshold=0.1, direction="abs<="),
    MetricRule(name="EOD", threshold=0.1, direction="abs<="),
    MetricRule(name="TI", threshold=0.1, direction="<="),
    MetricRule(name="PP", threshold=0.1, direction="abs<="),
    MetricRule(name="DI", threshold=0.9, direction=">="),
    MetricRule(name="SPD", threshold=0.05, direction="abs<="),
]  # fmt: skip
_STATE = ("x", "n", "r_fail", "r_pass", "entering", "state", "records", "last_records",
          "last_change", "last_old")  # fmt: skip


def _table(rng, groups: int, size: int, rates, pos: float = 0.4) -> CountTable:
    """A block of ``size`` records over ``groups`` groups (the first ones rarer, so some
    groups enter the detectors late or leave them), decisions at ``rates`` per group."""
    share = np.linspace(0.2, 1.0, groups)
    g = rng.choice(groups, size, p=share / share.sum())
    y = (rng.random(size) < pos).astype(np.int64)
    d = (rng.random(size) < np.asarray(rates)[g] + 0.1 * y).astype(np.int64)
    t = CountTable(tuple(str(i) for i in range(groups)))
    t.add(g, y, d, rng.random(size))
    return t


def _by_cell(grid: CertifiedGrid, blocks, years, outcomes):
    """The definition: each cell's own update, in grid order (CertifiedGrid.observe before
    the flat update)."""
    changes = []
    for (metric, attribute), cell in grid.cells.items():
        source = outcomes if outcomes is not None and needs_label(metric) else blocks
        change = cell.update(block_counts(source[attribute], cell.spec), years)
        if change is not None:
            changes.append((metric, attribute, *change, int(cell.last_records)))
    return changes


def _assert_same_cells(flat: CertifiedGrid, ref: CertifiedGrid) -> None:
    for key, cell in ref.cells.items():
        mine = flat.cells[key]
        for name in _STATE:
            a, b = np.asarray(getattr(mine, name)), np.asarray(getattr(cell, name))
            assert a.dtype == b.dtype and a.shape == b.shape, (key, name)
            assert a.tobytes() == b.tobytes(), (key, name)  # bit for bit


@settings(max_examples=30, deadline=None)
@given(
    rules=st.lists(st.sampled_from(RULES), min_size=1, max_size=6, unique_by=id),
    groups=st.lists(st.integers(2, 5), min_size=1, max_size=3),
    budget=st.sampled_from([0.1, 20.0, 400.0]),
    support=st.sampled_from([5, 20, 60]),
    seed=st.integers(0, 2**16),
    separate=st.booleans(),
)
def test_the_flat_update_is_each_cells_update_bit_for_bit(
    rules, groups, budget, support, seed, separate
):
    """Random grids (metrics with two constraints each for DI and SPD, so runs of cells
    with the same constraint are split, 2-5 groups), random blocks (sizes from a dozen
    records to 900, so groups enter and leave; a shift half way, so cells certify, page
    and restart; a large budget certifies within the stream), outcomes in the same block
    or apart: the flat update leaves every cell's arrays as the cell's own update does."""
    attrs = {f"a{i}": tuple(str(j) for j in range(g)) for i, g in enumerate(groups)}
    if not any(r.name != "TI" for r in rules):
        rules = [*rules, DI]
    flat = CertifiedGrid(rules, attrs, budget, support)
    ref = CertifiedGrid(rules, attrs, budget, support)
    assert flat_updatable(list(flat.cells.values()))
    rng = np.random.default_rng(seed)
    base = {a: rng.uniform(0.2, 0.7, len(c)) for a, c in attrs.items()}
    for k in range(24):
        size = int(rng.choice([12, 80, 300, 900]))
        rates = {a: v - (0.25 if k >= 12 else 0.0) * (np.arange(len(v)) == 0)
                 for a, v in base.items()}  # fmt: skip
        blocks = {a: _table(rng, len(c), size, rates[a]) for a, c in attrs.items()}
        outcomes = None
        if separate:
            outcomes = {a: _table(rng, len(c), size // 2, rates[a]) for a, c in attrs.items()}
        years = float(rng.choice([0.0, 1 / 87, 0.5]))
        got = flat.observe(blocks, years, outcomes)
        assert got == _by_cell(ref, blocks, years, outcomes)
        _assert_same_cells(flat, ref)
    assert flat.state() == ref.state()


def test_a_block_missing_an_attribute_updates_the_other_cells_only():
    attrs = {"sex": ("0", "1"), "race": ("0", "1", "2")}
    flat, ref = CertifiedGrid([DI, SPD], attrs, 0.1), CertifiedGrid([DI, SPD], attrs, 0.1)
    rng = np.random.default_rng(3)
    for _ in range(4):
        blocks = {"sex": _table(rng, 2, 500, [0.3, 0.5])}
        assert flat.observe(blocks, 1 / 87) == [] == flat.observe({}, 1 / 87)
        for key in (("DI", "sex"), ("SPD", "sex")):
            ref.cells[key].update(block_counts(blocks["sex"], ref.cells[key].spec), 1 / 87)
    _assert_same_cells(flat, ref)
    assert not flat.cells[("DI", "race")].n.any()


def test_a_bad_block_moves_no_cell():
    """The flat update checks every cell's counts before it moves any."""
    attrs = {"sex": ("0", "1"), "race": ("0", "1", "2")}
    grid = CertifiedGrid([DI, SPD], attrs, 0.1)
    rng = np.random.default_rng(4)
    grid.observe({a: _table(rng, len(c), 300, [0.4] * len(c)) for a, c in attrs.items()}, 0.1)
    before = json.dumps(grid.state())
    with pytest.raises(ValueError, match="negative"):
        grid.observe({a: _table(rng, len(c), 300, [0.4] * len(c)) for a, c in attrs.items()}, -1)
    assert json.dumps(grid.state()) == before


def test_grid_observes_blocks_and_survives_a_restart():
    """A model's grid: a planted drop of group 0's selection rate on one attribute is a
    page (after a first certification), and a grid restored from its state mid-stream
    gives the same changes as one that never stopped."""
    rules = [DI, SPD, MetricRule(name="CAL", threshold=0.05, direction="<=")]
    attrs = {"sex": ("0", "1")}
    live = CertifiedGrid(rules, attrs, 0.1)
    assert live.threshold == 2 * 2 / 0.1  # DI and SPD on one attribute; CAL not certified
    rng = np.random.default_rng(9)
    blocks = [_table(rng, 2, 1000, [0.55, 0.55] if k < 30 else [0.30, 0.55]) for k in range(60)]
    changes, restored = [], None
    for k, block in enumerate(blocks):
        tables = {"sex": block}
        got = live.observe(tables, 1 / 87)
        changes += [(k, *c) for c in got]
        if k == 20:
            restored = CertifiedGrid(rules, attrs, 0.1)
            restored.restore(json.loads(json.dumps(live.state())))
        elif restored is not None:
            assert restored.observe(tables, 1 / 87) == got
    pages = [c for c in changes if c[3] != "undetermined"]
    assert [(c[1], c[3], c[4]) for c in pages] == [("DI", "pass", "fail"), ("SPD", "pass", "fail")]
    assert all(c[0] >= 30 and c[5] > 0 for c in pages)
    assert restored is not None and restored.verdicts() == live.verdicts()


def test_restore_accepts_a_state_saved_before_the_bet_grid():
    """A state whose detectors are one number per pair (before the bet grid) loads: each
    pair's number becomes each of its bets' detectors, so the cell's statistics are the
    saved ones, and the other arrays are taken as they are."""
    rules, attrs = [DI, SPD], {"sex": ("0", "1")}
    grid = CertifiedGrid(rules, attrs, 0.1)
    rng = np.random.default_rng(2)
    for _ in range(5):
        grid.observe({"sex": _table(rng, 2, 1000, [0.3, 0.55])}, 1 / 87)
    state = json.loads(json.dumps(grid.state()))
    old = {cell: dict(arrays) for cell, arrays in state.items()}
    for arrays in old.values():  # the old format: one detector per pair and direction
        for k in ("r_fail", "r_pass"):
            arrays[k] = np.asarray(arrays[k]).mean(axis=-1).tolist()
    restored = CertifiedGrid(rules, attrs, 0.1)
    restored.restore(old)
    for key, cell in grid.cells.items():
        back = restored.cells[key]
        assert back.r_fail.shape == cell.r_fail.shape
        np.testing.assert_allclose(back._statistics(), cell._statistics())
        np.testing.assert_array_equal(back.x, cell.x)
        assert back.verdict == cell.verdict


def test_cells_the_flat_update_cannot_take_are_updated_one_by_one():
    cells = [CertifiedCell(DI, ("a", "b"), 10.0), CertifiedCell(DI, ("a", "b"), 20.0)]
    assert not flat_updatable(cells)  # another threshold
    assert not flat_updatable([CertifiedCell(DI, ("a",), 10.0)])  # one group: no pair
    assert not flat_updatable([CertifiedCell(DI, ("a", "b"), 10.0, batch=(3,))])
    assert flat_updatable(cells[:1])
