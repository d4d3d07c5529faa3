"""Admission: which well-formed records the service takes in (docs/decisions.md, "Hostile input and
patient privacy").

Validation (:mod:`monitor.stream.schema`) judges a record on its own; admission judges
it against the service's state and clock, before anything is stored:

* ``out_of_range:event_time``: outside ``[now - max_event_age_days, now +
  max_clock_skew_s]`` when ``[service.intake] event_time_bounds = "wall-clock"``;
* ``unknown_model``: a model not in the registry (``[[models]]``) when
  ``[service.intake] unknown_models = "dead-letter"`` (the default);
* ``too_many_models``: admitting it would take the service past ``[service.intake]
  max_models`` monitored models.

Why a bounded set of models: every model id gets a window, trackers, drift state and
metric series, so a stream that could mint ids could exhaust memory and stall ingest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import MonitorConfig
from monitor.stream.schema import Rejection, event_time_out_of_bounds


@dataclass(frozen=True)
class Admission:
    """The admitted rows (same columns as the validated frame) and the refused ones,
    by their ``position`` in the decoded batch."""

    admitted: pd.DataFrame
    refused: list[Rejection]


def model_rejections(
    models: np.ndarray, known: Iterable[str], config: MonitorConfig
) -> np.ndarray:
    """Per row: None (admitted), ``unknown_model`` or ``too_many_models``.

    ``known``: models the service already monitors (they keep being admitted unless the
    registry leaves them out). New models are admitted in order of first appearance.

    Decided once per distinct model, at its first appearance: a model admitted there stays
    admitted, and one refused there is refused for the rest of the batch (the admitted set
    only grows, and only by the model at hand), so every row of a model shares its verdict.
    """
    svc = config.service.intake
    registry = {m.id for m in config.models}
    codes, uniq = pd.factorize(np.asarray(models, dtype=object))  # order of first appearance
    verdict = np.full(len(uniq), None, dtype=object)
    if svc.unknown_models == "dead-letter":
        for j, m in enumerate(uniq):
            if m not in registry:
                verdict[j] = "unknown_model"
        return verdict[codes]
    admitted = set(known) | registry
    for j, m in enumerate(uniq):
        if m in admitted:
            continue
        if len(admitted) < svc.max_models:
            admitted.add(m)
        else:
            verdict[j] = "too_many_models"
    return verdict[codes]


def admission_reasons(
    times: Any, models: np.ndarray, known: Iterable[str], now: pd.Timestamp,
    config: MonitorConfig,
) -> np.ndarray:
    """Per row: None (admitted) or why not: the event-time bounds first, then the model
    rules on the rows still in. Arrays in, so both ingest paths (a pandas frame per
    message, an Arrow table in bulk) take the same decisions from the same function."""
    n = len(models)
    reason = np.full(n, None, dtype=object)
    late = event_time_out_of_bounds(times, now, config)
    reason[late] = "out_of_range:event_time"
    ok = ~late
    by_model = np.full(n, None, dtype=object)
    by_model[ok] = model_rejections(models[ok], known, config)
    return np.where(reason == None, by_model, reason)  # noqa: E711 (elementwise)


def admit(
    valid: pd.DataFrame, known: Iterable[str], now: pd.Timestamp, config: MonitorConfig
) -> Admission:
    """Apply the event-time bounds, then the model rules, to a validated frame."""
    n = len(valid)
    if not n:
        return Admission(valid, [])
    models = valid["model_id"].to_numpy(dtype=object)
    reason = admission_reasons(valid["event_time"].array, models, known, now, config)
    refused = reason != None  # noqa: E711
    if not refused.any():
        return Admission(valid, [])
    positions = valid["position"].to_numpy()
    rejections = [Rejection(int(positions[i]), str(reason[i])) for i in np.flatnonzero(refused)]
    return Admission(valid[~refused].reset_index(drop=True), rejections)
