"""monitor.store.rows: batched inserts and keyed updates on a real DuckDB file."""

from __future__ import annotations

import duckdb

from monitor.store.rows import insert_frame, update_else_upsert


def test_insert_frame_and_update_else_upsert():
    c = duckdb.connect()
    c.execute("CREATE TABLE t (k VARCHAR PRIMARY KEY, n BIGINT, j JSON)")
    insert_frame(c, "t", ["k", "n", "j"], [("a", 1, '{"x": 1}'), ("b", 2, "[]")],
                 json_columns={"j"})  # fmt: skip
    insert_frame(c, "t", ["k", "n", "j"], [("a", 5, "null")], json_columns={"j"}, replace=True)
    insert_frame(c, "t", ["k", "n", "j"], [])  # no rows: no statement
    assert c.execute("SELECT k, n FROM t ORDER BY k").fetchall() == [("a", 5), ("b", 2)]
    update_else_upsert(
        c, [("b", 7), ("c", 3)],
        "UPDATE t SET n = v.n FROM (VALUES {values}) AS v(k, n) WHERE t.k = v.k",
        "INSERT OR REPLACE INTO t (k, n) VALUES {values}",
    )  # fmt: skip
    assert c.execute("SELECT k, n FROM t ORDER BY k").fetchall() == [("a", 5), ("b", 7), ("c", 3)]
