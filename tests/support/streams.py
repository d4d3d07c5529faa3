"""Seeded synthetic streams as a live source brings them: records interleaved by model.

Not a test module: the lock-order and rebalance tests share it.
"""

from __future__ import annotations

import json

from monitor.bench.synthetic import synthetic_window


def interleaved_records(per_model: int, models: int, seed: int) -> list[dict]:
    """``per_model`` synthetic records of each of ``models`` models (no decision: the
    service derives it), one event time, interleaved by model as a live stream would."""
    df = synthetic_window(per_model, models=models, seed=seed).drop(columns=["decision"])
    df["event_time"] = "2026-11-01T00:00:00Z"
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    return df.to_dict("records")


def model_partition(payload: bytes) -> int:
    """The partition of a payload when producers key by model: model-NN is partition NN."""
    return int(json.loads(payload)["model_id"].rsplit("-", 1)[1])
