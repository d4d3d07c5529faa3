"""monitor.store.migrations: a new file gets the build's schema once; a newer file is refused."""

from __future__ import annotations

import duckdb
import pytest

from monitor.store import migrations


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
