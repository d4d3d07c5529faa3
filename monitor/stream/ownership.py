"""Which source partition each model's records come from, and which models this instance
dropped because their partition was revoked.

Producers key by model id, so a model lives in one partition, and a consumer group gives a
partition to one member at a time. The pipeline asks this book which models to drop when
partitions are revoked (or were never assigned to a restarted member), and which dropped
models to restore when their records arrive again. Each model's partition is also kept in
the store (``model_partitions``), written with the batch that changed it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

#: (topic, partition)
Partition = tuple[str, int]


class PartitionOwnership:
    """Each model's last seen partition, the changes not yet stored, the dropped models."""

    def __init__(self) -> None:
        self._partition_of: dict[str, Partition] = {}
        self._changes: dict[str, Partition] = {}
        self._forgotten: set[str] = set()

    def load(self, stored: Mapping[str, Partition], models: Collection[str] | None = None) -> None:
        """The partitions read from the store (of ``models`` only, when given); what this
        instance saw since it started wins."""
        for model_id, where in stored.items():
            if models is None or model_id in models:
                self._partition_of.setdefault(model_id, where)

    def note(self, model_id: str, where: Partition) -> None:
        """A model's latest record came from ``where``."""
        if self._partition_of.get(model_id) != where:
            self._partition_of[model_id] = where
            self._changes[model_id] = where

    def take_changes(self) -> dict[str, Partition]:
        """The changes to write with the next batch (and forget here)."""
        changes, self._changes = self._changes, {}
        return changes

    def partition_of(self, model_id: str) -> Partition | None:
        return self._partition_of.get(model_id)

    def models_on(self, partitions: Collection[Partition]) -> set[str]:
        """The models last seen on ``partitions``."""
        on = set(partitions)
        return {m for m, p in self._partition_of.items() if p in on}

    def partitions_outside(self, owned: Collection[Partition]) -> set[Partition]:
        """The models' partitions that are not in ``owned``."""
        keep = set(owned)
        return {p for p in self._partition_of.values() if p not in keep}

    def revoke(self, models: Collection[str]) -> None:
        """``models`` were dropped from memory: forget their partition, remember them."""
        for model_id in models:
            self._partition_of.pop(model_id, None)
        self._forgotten.update(models)

    @property
    def forgotten(self) -> frozenset[str]:
        """The models dropped because their partition was revoked (and not back yet)."""
        return frozenset(self._forgotten)

    def returning(self, models: Collection[str]) -> set[str]:
        """The dropped models among ``models`` (their records arrive again): no longer
        dropped once returned here, the caller restores them."""
        back = self._forgotten.intersection(models)
        self._forgotten.difference_update(back)
        return back

    def reset(self) -> None:
        """Before the pipeline reloads from the store: the partitions are read again (the
        dropped models stay dropped)."""
        self._partition_of.clear()
        self._changes = {}
