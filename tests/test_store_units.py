"""Unit tests of monitor.store's small modules: migrations, key_index, rows."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from monitor.store import migrations
from monitor.store.key_index import conflicting_rows
from monitor.store.rows import insert_frame, update_else_upsert


def test_migrate_brings_an_empty_file_to_the_build_version_once(tmp_path):
    c = duckdb.connect(str(tmp_path / "m.duckdb"))
    migrations.migrate(c)
    migrations.migrate(c)  # nothing left to apply
    assert migrations.schema_version(c) == migrations.SCHEMA_VERSION == len(migrations.MIGRATIONS)
    (applied,) = c.execute("SELECT count(*) FROM schema_migrations").fetchone()
    assert applied == migrations.SCHEMA_VERSION


def test_migrate_refuses_a_newer_file(tmp_path):
    c = duckdb.connect(str(tmp_path / "m.duckdb"))
    migrations.migrate(c)
    c.execute("INSERT INTO schema_migrations (version) VALUES (?)", [migrations.SCHEMA_VERSION + 1])
    with pytest.raises(RuntimeError, match="newer than this build"):
        migrations.migrate(c)


def test_conflicting_rows_compare_with_the_stored_then_the_first_content():
    keys = pd.DataFrame(
        {"model_id": ["m"] * 4, "record_id": ["a", "a", "b", "b"], "pos": np.arange(4)}
    )
    content = np.array(["x", "y", "p", "p"], dtype=object)
    new = np.array([False, False, True, False])  # "a" stored before; "b" new in the batch
    got = conflicting_rows(keys, content, new, np.array([0]), np.array(["x"], dtype=object))
    assert got.tolist() == [False, True, False, False]
    # a stored record without a hash (before schema v4) cannot be compared: no conflict
    unknown = conflicting_rows(keys, content, new, np.array([0]), np.array([None], dtype=object))
    assert unknown.tolist() == [False, False, False, False]


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
