"""Rolling windows: the tables always equal the tables of exactly the records in the window."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from monitor.config import config_from_mapping
from monitor.core.counts import CountTable
from monitor.stream.window import ModelWindow, RecordBatch

CFG_COUNT = config_from_mapping({"window": {"kind": "count", "size": 50}})
CFG_TIME = config_from_mapping({"window": {"kind": "time", "days": 2.0}})


def _batch(rng, start_seq, n, cfg, t0_ns=0, spread_days=0.0):
    groups = {a.name: rng.integers(0, len(a.codes), n) for a in cfg.attributes}
    return RecordBatch(
        seq=np.arange(start_seq, start_seq + n, dtype=np.int64),
        event_time=(t0_ns + rng.uniform(0, spread_days * 86_400e9, n)).astype(np.int64),
        groups=groups,
        label=rng.integers(0, 2, n),
        decision=rng.integers(0, 2, n),
        score=rng.uniform(0, 1, n),
    )


def _expected_tables(records, cfg):
    return {
        a.name: CountTable.from_records(
            a.codes, records.groups[a.name], records.label, records.decision, records.score
        )
        for a in cfg.attributes
    }


@given(st.lists(st.integers(0, 80), min_size=1, max_size=12), st.integers(0, 2**31))
def test_count_window_holds_exactly_the_last_records(sizes, seed):
    rng = np.random.default_rng(seed)
    w = ModelWindow("m", CFG_COUNT)
    batches, seq = [], 0
    for n in sizes:
        b = _batch(rng, seq, n, CFG_COUNT)
        seq += n
        batches.append(b)
        w.add(b)
        everything = RecordBatch.concat(batches)
        last = everything.take(slice(max(0, len(everything) - 50), None))
        assert w.n == len(last) and w.arrivals == len(everything)
        assert np.array_equal(w.seqs(), last.seq)
        assert w.tables == _expected_tables(last, CFG_COUNT)


@given(st.lists(st.floats(0, 6), min_size=1, max_size=10), st.integers(0, 2**31))
def test_time_window_keeps_the_horizon_and_counts_old_events(starts, seed):
    rng = np.random.default_rng(seed)
    w = ModelWindow("m", CFG_TIME)
    seq, seen, entered = 0, [], []
    for day in starts:
        b = _batch(rng, seq, 20, CFG_TIME, t0_ns=int(day * 86_400e9), spread_days=1.0)
        seq += 20
        latest_before = max([int(x.event_time.max()) for x in seen], default=None)
        seen.append(b)
        latest = max(int(x.event_time.max()) for x in seen)
        cutoff_at_arrival = max(latest, latest_before or latest) - 2 * 86_400e9
        entered.append(b.take(b.event_time >= cutoff_at_arrival))
        w.add(b)
        cutoff = latest - 2 * 86_400e9
        kept = RecordBatch.concat(entered)
        kept = kept.take(kept.event_time >= cutoff)
        assert w.tables == _expected_tables(kept, CFG_TIME)
        assert w.old_events == sum(len(x) for x in seen) - sum(len(x) for x in entered)


def test_from_frame_reads_utc_nanoseconds():
    frame = pd.DataFrame(
        {
            "seq": [1, 2],
            "event_time": pd.to_datetime(
                ["2026-01-01T00:00:00Z", "2026-01-01T01:00:00+01:00"], utc=True
            ),
            "score": [0.1, 0.9], "label": [0, 1], "decision": [0, 1],
            "race": ["3", "2"], "sex": ["0", "1"], "ethnicity": ["1", "1"], "age_group": ["2", "3"],
        }
    )  # fmt: skip
    b = RecordBatch.from_frame(frame, CFG_COUNT)
    assert b.event_time[0] == b.event_time[1] == pd.Timestamp("2026-01-01T00:00:00Z").value
    assert b.groups["race"].tolist() == [3, 2]
