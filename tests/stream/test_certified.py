"""The certified verdicts in the pipeline (monitor.stream.certified) against a
CertifiedGrid fed directly, record by record, with the same blocks; restarts; events."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.core.certified_grid import CertifiedGrid
from monitor.core.certify import block_counts
from monitor.core.counts import CountTable
from monitor.core.outcome_split import needs_label
from monitor.core.tables import attribute_groups
from monitor.store import Store, queries
from monitor.stream.certified import YEAR_NS, ModelCertified
from monitor.stream.pipeline import Pipeline
from tests.support.outcome_streams import two_kind_payloads
from tests.support.pipeline_runs import feed, stored_results
from tests.support.store_reads import events_frame

# a large budget (c = 2 x 20 / 100 = 0.4) so that a short stream certifies and pages
CFG = config_from_mapping(
    {
        "window": {"size": 1500, "hop_records": 400, "hop_seconds": 0},
        "axis1": {"K": 60},
        "alerts": {"false_pages_per_year": 100.0},
        "models": [{"id": "model-00"}, {"id": "model-01"}],
    }
)


def planted_payloads(n: int = 6000, seed: int = 5) -> list[bytes]:
    """Two models, one record an hour each; from three quarters of the stream on,
    model-00 scores the records of sex '1' far lower (its cells by sex cross their
    thresholds after their pass was certified: a page)."""
    df = synthetic_window(n, models=2, seed=seed).drop(columns=["decision"])
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    hours = np.arange(len(df)) // 2
    df["event_time"] = [
        (pd.Timestamp("2026-02-01T00:00:00Z") + pd.Timedelta(hours=int(h))).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        for h in hours
    ]
    late = (np.arange(len(df)) >= len(df) * 3 // 4) & (df["model_id"] == "model-00")
    shift = late & (df["sex"] == "1")
    df.loc[shift, "score"] = df.loc[shift, "score"] * 0.3
    return [json.dumps(r).encode() for r in df.to_dict("records")]


def _stored(store: Store, model: str) -> pd.DataFrame:
    """Every stored record of a model with its stream positions (record level)."""
    rows = store._conn.execute(
        "SELECT seq, model_pos, label_pos, epoch_ns(event_time) AS t FROM discharges "
        "WHERE model_id = ? ORDER BY seq",
        [model],
    ).df()
    frame = store.window_records(model)  # label -1 while unknown, attributes as columns
    return frame.merge(rows, on="seq")


def _tables(frame: pd.DataFrame, label: bool) -> dict[str, CountTable]:
    groups = attribute_groups(frame, CFG)
    y = frame["label"].to_numpy(np.int64) if label else np.zeros(len(frame), np.int64)
    return {
        a.name: CountTable.from_records(
            a.codes, groups[a.name], y, frame["decision"].to_numpy(np.int64),
            frame["score"].to_numpy(np.float64), CFG.axis1.score_bins,
        )
        for a in CFG.grid_attributes
    }  # fmt: skip


def oracle(store: Store, model: str, per_rate: bool) -> tuple[CertifiedGrid, list[tuple]]:
    """A CertifiedGrid fed the model's blocks of hop positions, each built record by record
    from the stored rows. ``per_rate`` False: every record came with its outcome, and
    ``CertifiedGrid.observe`` takes each block's labelled tables; True: label-free cells
    take the block's predictions, label-based ones the outcomes whose label_pos lies in
    it (monitor.stream.certified's rule)."""
    recs = _stored(store, model)
    grid = CertifiedGrid(
        CFG.metrics, {a.name: a.codes for a in CFG.grid_attributes},
        CFG.alerts.false_pages_per_year, CFG.axis1.min_group_support,
    )  # fmt: skip
    hop, changes = CFG.window.hop_records, []
    pos = recs["model_pos"].to_numpy()
    lab = recs["label_pos"].to_numpy(np.float64)
    prev_end = int(recs["t"].iloc[0])
    for end in range(hop, int(pos.max()) + 1, hop):
        block = recs[(pos > end - hop) & (pos <= end)]
        t_end = int(block["t"].iloc[-1])
        years = max(0.0, (t_end - prev_end) / YEAR_NS)
        prev_end = t_end
        if not per_rate:
            changes += grid.observe(_tables(block, label=True), years)
            continue
        joined = recs[(lab > end - hop) & (lab <= end) & (recs["label"].to_numpy() >= 0)]
        free, with_label = _tables(block, label=False), _tables(joined, label=True)
        for (metric, attr), cell in grid.cells.items():
            table = (with_label if needs_label(metric) else free)[attr]
            ch = cell.update(block_counts(table, cell.spec), years)
            if ch is not None:
                changes.append((metric, attr, *ch, int(cell.last_records)))
    return grid, changes


def _certified_events(store: Store, model: str) -> list[tuple]:
    ev = events_frame(store)
    ev = ev[(ev["kind"] == "certified_change") & (ev["model_id"] == model)].iloc[::-1]
    return [
        (r.metric, r.attribute, r.old, r.new, r.axes["records"])
        for r in ev.itertuples()
    ]


def _rounded(changes: list[tuple]) -> list[tuple]:
    from monitor.publish.counts import rounded_count

    return [(*c[:4], rounded_count(c[4])) for c in changes]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("certified") / "m.duckdb", CFG)
    pipe = Pipeline(CFG, store)
    feed(pipe, planted_payloads())
    return store, pipe


def test_the_pipelines_certified_verdicts_equal_a_grid_fed_directly(planted):
    store, pipe = planted
    pages = {}
    for model in ("model-00", "model-01"):
        grid, changes = oracle(store, model, per_rate=False)
        assert _certified_events(store, model) == _rounded(changes)
        latest = {c.key[1:]: c.certified for c in pipe.latest_cells() if c.key[0] == model}
        want = grid.verdicts()
        assert {k: v.verdict for k, v in latest.items() if v is not None} == want
        assert {k for k, v in latest.items() if v is None} == {
            k for k in latest if k not in want  # TI, CAL, CAL_GAP: not certified
        }
        for key, cell in grid.cells.items():
            assert latest[key].records == int(cell.records)
        pages[model] = {(c[0], c[1]) for c in changes if {c[2], c[3]} == {"pass", "fail"}}
    # the planted shift pages (so the comparison above covers pages), on sex only; the
    # control model does not page
    assert pages == {"model-00": {("DI", "sex"), ("SPD", "sex"), ("EOPP", "sex"),
                                  ("EOD", "sex")}, "model-01": set()}  # fmt: skip


def test_the_saved_state_restores_the_same_cells(planted):
    store, pipe = planted
    for model, saved in store.read(queries.model_states).items():
        back = ModelCertified(model, CFG)
        assert saved.certified is not None
        back.restore(saved.certified)
        assert back.saved() == pipe._models[model].certified.saved()
        assert back.position == 6000 // 400 * 400


def test_with_outcomes_later_label_based_cells_take_the_outcomes_joined_in_the_block(tmp_path):
    cfg_payloads = two_kind_payloads(n=2400, lag=300, skip=11)
    store = Store(tmp_path / "m.duckdb", CFG)
    pipe = Pipeline(CFG, store)
    feed(pipe, cfg_payloads, batch=251)
    for model in ("model-00", "model-01"):
        grid, changes = oracle(store, model, per_rate=True)
        assert _certified_events(store, model) == _rounded(changes)
        got = pipe._models[model].certified
        for key, cell in grid.cells.items():
            mine = got.grid.cells[key]
            np.testing.assert_array_equal(mine.n, cell.n)
            np.testing.assert_array_equal(mine.r_fail, cell.r_fail)
            np.testing.assert_array_equal(mine.r_pass, cell.r_pass)


def test_a_restart_resumes_without_counting_a_block_twice(tmp_path):
    payloads = planted_payloads()
    ref = Store(tmp_path / "ref.duckdb", CFG)
    ref_pipe = Pipeline(CFG, ref)
    feed(ref_pipe, payloads)
    path = tmp_path / "restarted.duckdb"
    s1 = Store(path, CFG)
    feed(Pipeline(CFG, s1), payloads[:2331])
    s1.close()
    s2 = Store(path, CFG)
    pipe = Pipeline(CFG, s2)  # restores the grids from the file
    feed(pipe, payloads[1998:])  # an older offset: the overlap is replayed (deduplicated)
    for m in ("model-00", "model-01"):
        assert pipe._models[m].certified.saved() == ref_pipe._models[m].certified.saved()
        assert _certified_events(s2, m) == _certified_events(ref, m)
    pd.testing.assert_frame_equal(stored_results(ref), stored_results(s2))


def test_hop_evaluations_lost_in_the_worker_are_taken_at_restart_once(tmp_path):
    payloads = planted_payloads()
    ref = Store(tmp_path / "ref.duckdb", CFG)
    ref_pipe = Pipeline(CFG, ref)
    feed(ref_pipe, payloads)
    path = tmp_path / "killed.duckdb"
    s1 = Store(path, CFG)
    pipe = Pipeline(CFG, s1)
    # no flush: the last batch (positions ~1,499-1,665 of each model) holds hop 1,600, whose
    # evaluation is still in the worker when the loop ends
    for i in range(0, 3330, 333):
        chunk = payloads[i : i + 333]
        pipe.ingest_batch(chunk, [Origin("t", 0, i + k) for k in range(len(chunk))])
    assert pipe.queue.pending, "the test needs evaluations still pending at the 'kill'"
    pipe.queue.pending.clear()  # the process died: never written
    s1.close()
    s2 = Store(path, CFG)
    pipe = Pipeline(CFG, s2)  # recomputes the missing hops, their blocks included
    feed(pipe, payloads, start=3330)
    for m in ("model-00", "model-01"):
        assert pipe._models[m].certified.saved() == ref_pipe._models[m].certified.saved()
        assert _certified_events(s2, m) == _certified_events(ref, m)


def test_a_block_read_returns_predictions_and_late_outcomes_once(tmp_path):
    store = Store(tmp_path / "m.duckdb", CFG)
    feed(Pipeline(CFG, store), two_kind_payloads(n=1200, lag=300))
    recs = _stored(store, "model-00")
    seen_pred, seen_join = [], []
    for after in range(0, 600, 200):
        b = store.block_records("model-00", after, after + 200)
        seen_pred += b.loc[b["predicted"], "model_pos"].tolist()
        seen_join += b.loc[b["joined"], "model_pos"].tolist()
        assert (b.loc[b["joined"], "label"] >= 0).all()
    assert seen_pred == list(range(1, 601))
    want = recs[(recs["label_pos"] <= 600) & (recs["label"] >= 0)]["model_pos"].tolist()
    assert sorted(seen_join) == sorted(want) and len(set(seen_join)) == len(seen_join)


def test_a_file_written_before_certified_verdicts_starts_them_at_its_position(tmp_path):
    payloads = planted_payloads(n=1200)
    path = tmp_path / "old.duckdb"
    s1 = Store(path, CFG)
    feed(Pipeline(CFG, s1), payloads[:1600])
    s1._conn.execute("UPDATE model_state SET certified = NULL")  # as a v11 file has it
    s1.close()
    s2 = Store(path, CFG)
    pipe = Pipeline(CFG, s2)
    for m in ("model-00", "model-01"):
        cert = pipe._models[m].certified
        assert cert.position == 800
        assert all(v == "undetermined" for v in cert.grid.verdicts().values())
    feed(pipe, payloads, start=1600)
    for m in ("model-00", "model-01"):  # the first block after the restart: 801-1200
        assert pipe._models[m].certified.position == 1200
        assert all(c.records <= 400 for c in pipe._models[m].certified.verdicts().values())


def test_the_groups_that_enter_a_block_are_known_before_the_detectors_take_it(planted):
    """``may_enter`` (what holds a release of the certified evidence) says the same for
    a block whatever the detectors have taken when the release is decided: replayed from
    the file two hops or fifteen behind, read off the state one block behind, and the
    groups the detectors did enter when they took the block."""
    store, _ = planted
    hop = CFG.window.hop_records
    for model in ("model-00", "model-01"):
        behind = ModelCertified(model, CFG)  # takes no block: every answer is replayed
        ref = ModelCertified(model, CFG)
        codes = {a.name: a.codes for a in CFG.grid_attributes}
        for upto in range(hop, 6000 // hop * hop + 1, hop):
            ref.advance(store, upto - hop, 0)
            one_behind = {a: ref.may_enter(store, upto, a, c) for a, c in codes.items()}
            replayed = {a: behind.may_enter(store, upto, a, c) for a, c in codes.items()}
            ref.advance(store, upto, 0)
            taken = {a: ref.may_enter(store, upto, a, c) for a, c in codes.items()}
            mid_hop = {a: ref.may_enter(store, upto + hop // 2, a, c) for a, c in codes.items()}
            for a in codes:
                entered = np.zeros(len(codes[a]), dtype=bool)
                for (_, attr), cell in ref.grid.cells.items():
                    if attr == a:
                        entered |= np.asarray(cell.entering, dtype=bool)
                for got in (one_behind[a], replayed[a], taken[a], mid_hop[a]):
                    np.testing.assert_array_equal(got, entered, err_msg=f"{model} {a} {upto}")
        assert ref.position == 6000 // hop * hop and behind.position == 0
