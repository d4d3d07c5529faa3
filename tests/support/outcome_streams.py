"""Streams of predictions and outcomes (issue 23) for the pipeline's tests, without a broker.

A synthetic scored cohort split in two kinds of message: each record's prediction, and its
outcome ``lag`` messages later in the stream (known some whole days after scoring), so
every hop point sees predictions whose outcome has not come yet.
"""

from __future__ import annotations

import json

import pandas as pd

from monitor.bench.synthetic import synthetic_window

#: scoring time of the first prediction; one prediction a minute after it
T0 = pd.Timestamp("2026-10-01T00:00:00Z")


def prediction_and_outcome(rec: dict, i: int, delay_days: int) -> tuple[dict, dict]:
    """One scored record as a prediction (scored ``i`` minutes after T0) and its outcome."""
    scored = T0 + pd.Timedelta(minutes=i)
    pred = {k: v for k, v in rec.items() if k != "label"}
    pred.update(kind="prediction", event_time=scored.strftime("%Y-%m-%dT%H:%M:%SZ"))
    known = scored + pd.Timedelta(days=delay_days, hours=1)
    outcome = {
        "kind": "outcome", "model_id": rec["model_id"], "record_id": rec["record_id"],
        "label": int(rec["label"]), "event_time": known.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }  # fmt: skip
    return pred, outcome


def records(n: int, models: int, seed: int) -> list[dict]:
    df = synthetic_window(n, models=models, seed=seed).drop(columns=["decision"])
    df = df.sort_values(["record_id", "model_id"], kind="stable").reset_index(drop=True)
    return df.to_dict("records")


def two_kind_payloads(
    n: int = 2000, models: int = 2, seed: int = 3, lag: int = 250, skip: int = 0
) -> list[bytes]:
    """Predictions, each record's outcome ``lag`` messages after its prediction (delay
    ``i % 7`` days); with ``skip`` > 0 every ``skip``-th record's outcome never comes."""
    recs = records(n, models, seed)
    preds, outs = [], []
    for i, rec in enumerate(recs):
        p, o = prediction_and_outcome(rec, i, i % 7)
        preds.append(p)
        outs.append(None if skip and i % skip == 0 else o)
    stream: list[dict] = []
    for i, p in enumerate(preds):
        stream.append(p)
        if i >= lag and (late := outs[i - lag]) is not None:
            stream.append(late)
    stream.extend(o for o in outs[max(len(outs) - lag, 0) :] if o is not None)
    return [json.dumps(m).encode() for m in stream]
