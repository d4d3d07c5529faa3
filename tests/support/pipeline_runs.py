"""Feeding the real pipeline without a broker, and reading back what it stored.

Shared by the pipeline's unit tests, the fault scenarios and the store's query tests.
"""

from __future__ import annotations

import json

import pandas as pd

from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.store import Store
from monitor.stream.pipeline import Pipeline
from tests.support.store_reads import window_results


def scored_payloads(n: int = 2000, models: int = 2, seed: int = 3) -> list[bytes]:
    """Synthetic scored discharges as a topic partitioned by model would deliver them."""
    df = synthetic_window(n, models=models, seed=seed).drop(columns=["decision"])
    df["event_time"] = "2026-11-01T00:00:00Z"
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    return [json.dumps(r).encode() for r in df.to_dict("records")]


def feed(pipe: Pipeline, payloads: list[bytes], batch: int = 333, start: int = 0) -> None:
    """Ingest in batches with consecutive offsets, then wait for the worker's evaluations."""
    for i in range(start, len(payloads), batch):
        chunk = payloads[i : i + batch]
        pipe.ingest_batch(chunk, [Origin("t", 0, i + k) for k in range(len(chunk))])
    pipe.flush()


def stored_results(store: Store) -> pd.DataFrame:
    """The stored window results without their wall-clock times (comparable across runs)."""
    wr = window_results(store).drop(columns=["evaluated_at"])
    wr["result"] = [
        {k: v for k, v in json.loads(r).items() if k != "evaluated_at"} for r in wr["result"]
    ]
    return wr


def feed_service(service, n: int, seed: int, start: int = 0, model: str | None = None) -> None:
    """``n`` synthetic scored discharges of one model into a MonitorService's pipeline
    (offsets from ``start``), then its evaluations written."""
    df = synthetic_window(n, models=1, seed=seed).drop(columns=["decision"])
    if model is not None:
        df["model_id"] = model
    df["record_id"] = [f"s{seed}-{i}" for i in range(len(df))]
    df["event_time"] = "2026-11-01T00:00:00Z"
    payloads = [json.dumps(r).encode() for r in df.to_dict("records")]
    service.pipeline.ingest_batch(
        payloads, [Origin("t", 0, start + i) for i in range(len(payloads))]
    )
    service.pipeline.flush()
