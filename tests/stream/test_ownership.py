"""PartitionOwnership: each model's partition, the changes to store, the dropped models."""

from __future__ import annotations

from monitor.stream.ownership import PartitionOwnership


def test_notes_record_changes_once_and_what_the_instance_saw_wins_over_the_file():
    book = PartitionOwnership()
    book.note("m1", ("t", 0))
    book.load({"m1": ("t", 5), "m2": ("t", 1), "m3": ("t", 2)}, models={"m1", "m2"})
    assert book.partition_of("m1") == ("t", 0)  # seen here, not the file's
    assert book.partition_of("m2") == ("t", 1)
    assert book.partition_of("m3") is None  # not among the models asked for
    book.note("m1", ("t", 0))  # unchanged: nothing new to store
    book.note("m2", ("t", 3))
    assert book.take_changes() == {"m1": ("t", 0), "m2": ("t", 3)}
    assert book.take_changes() == {}


def test_revocation_and_return():
    book = PartitionOwnership()
    book.load({"m1": ("t", 0), "m2": ("t", 1), "m3": ("t", 1)})
    assert book.models_on([("t", 1)]) == {"m2", "m3"}
    assert book.partitions_outside([("t", 0)]) == {("t", 1)}
    book.revoke(["m2", "m3"])
    assert book.forgotten == {"m2", "m3"}
    assert book.models_on([("t", 1)]) == set() and book.partitions_outside([("t", 0)]) == set()
    assert book.returning(["m1", "m2"]) == {"m2"}  # m1 was never dropped
    assert book.forgotten == {"m3"}
    assert book.returning(["m2"]) == set()  # returned once


def test_reset_forgets_partitions_and_pending_changes_but_keeps_the_dropped_models():
    book = PartitionOwnership()
    book.note("m1", ("t", 0))
    book.revoke(["m2"])
    book.reset()
    assert book.partition_of("m1") is None and book.take_changes() == {}
    assert book.forgotten == {"m2"}
