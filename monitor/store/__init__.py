"""The service's DuckDB file: its schema, its one writer and every read of it.

* :mod:`~monitor.store.migrations`: the schema by version, and the upgrade of a file;
* :mod:`~monitor.store.key_index`: which record keys are stored (deduplication);
* :mod:`~monitor.store.writer`: :class:`Store`, the single writer (ingest, dead letters,
  source offsets, evaluations, outbox, scheduled-axis results, job runs, retention);
* :mod:`~monitor.store.fleet`: the fleet view's writer (results from the results topic);
* :mod:`~monitor.store.results_messages`: the results topic's messages;
* :mod:`~monitor.store.rows`: batched inserts and keyed updates;
* :mod:`~monitor.store.queries`: every read, as a function of a connection.

The choice for reads: every SELECT a reader issues is a function of
:mod:`~monitor.store.queries`, called with a connection. Readers on other threads than
the writer's (the API, the scheduled jobs, the report, the fleet view, tests) pass a
cursor (``store.cursor()``) or a connection opened ``read_only``. ``Store`` keeps a
thin method only for a read that runs on the writer's own connection (its start-up
restore, a window read inside its transaction, the source's offsets, the row counts),
delegating to the same function, so each read has one definition.
"""

from monitor.store.writer import DeadLetter, IngestOutcome, Store

__all__ = ["DeadLetter", "IngestOutcome", "Store"]
