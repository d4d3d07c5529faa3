"""monitor.store.migrations: a new file gets the build's schema once; a newer file is refused;
stored cells of earlier versions get the keys they lack once (v13)."""

from __future__ import annotations

import json

import duckdb
import pytest

from monitor.core.jsonable import to_json
from monitor.store import migrations
from monitor.store.codec import decode_evaluation


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


def _at_version(c: duckdb.DuckDBPyConnection, version: int) -> None:
    """The schema of ``version`` (as a file of that version has it)."""
    c.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
              "applied_at TIMESTAMPTZ DEFAULT now())")  # fmt: skip
    for v in range(1, version + 1):
        for stmt in migrations.MIGRATIONS[v - 1]:
            c.execute(stmt)
        c.execute("INSERT INTO schema_migrations (version) VALUES (?)", [v])


def test_v13_gives_every_stored_cell_the_keys_its_version_did_not_write(tmp_path):
    """Rows of earlier versions (without the not-evaluable fields, drivers, pooled and
    certified keys) get them once, each with what its absence meant; a row that has a key
    keeps its value (a null stays null); a cell state without a released evaluation and a
    cell never evaluated stay as they were. Decoded, the rows are the cells they were."""
    from tests.support.exporter_state import make_cell

    cell = make_cell("m", "DI", "race", partial=True)
    full = json.loads(to_json(cell.to_dict()))
    newer = [*migrations.CELL_KEYS_V13, "not_applicable_axes"]
    old = {k: v for k, v in full.items() if k not in newer}
    old_null = {**old, "kappa": None}
    c = duckdb.connect(str(tmp_path / "m.duckdb"))
    _at_version(c, 12)
    c.execute("INSERT INTO window_results VALUES ('m', 1, now(), 'count', 1, 2, 2, 7, 'DI', "
              "'race', ?, 'Pending', NULL), ('m', 2, now(), 'count', 1, 2, 2, 7, 'DI', 'sex', "
              "?, 'Pending', NULL)", [json.dumps(old), json.dumps(full)])  # fmt: skip
    c.execute("INSERT INTO cell_state VALUES ('m', 'DI', 'race', ?, ?, now()), "
              "('m', 'SPD', 'race', '{}', NULL, now())",
              [json.dumps({"key": ["m", "DI", "race"], "released": old_null}),
               json.dumps(old)])  # fmt: skip
    migrations.migrate(c)
    rows = dict(c.execute("SELECT attribute, result FROM window_results").fetchall())
    upgraded = json.loads(rows["race"])
    assert upgraded == migrations.upgraded_cell(old) and upgraded.keys() == full.keys()
    assert upgraded["not_applicable_axes"] == ["axis3"] and upgraded["verdict_basis"] == "raw"
    assert json.loads(rows["sex"]) == full  # nothing lacking: untouched
    state, latest = c.execute(
        "SELECT state, latest FROM cell_state WHERE metric = 'DI'").fetchone()  # fmt: skip
    assert json.loads(state)["released"] == migrations.upgraded_cell(old_null)
    assert json.loads(state)["key"] == ["m", "DI", "race"]
    assert json.loads(latest) == upgraded
    assert c.execute(
        "SELECT state, latest FROM cell_state WHERE metric = 'SPD'").fetchone() == ("{}", None)
    back = decode_evaluation(rows["race"])
    assert json.loads(to_json(back.to_dict())) == migrations.upgraded_cell(old)
    assert back.certified is None and back.outcome_coverage is None and back.released
