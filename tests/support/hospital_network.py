"""A seeded scored cohort of several models and hospitals, and its split into sites.

For the count-table engine's tests: the whole cohort is what a pooled audit reads; the
sites (disjoint hospitals, records without a hospital id dealt round) are what a network
of hospitals would each hold. Synthetic: drawn from fixed seeds, no patient record.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor.bench.synthetic import synthetic_cohort

#: The first event time; records spread over about 200 days, to the nanosecond.
START = pd.Timestamp("2026-01-01", tz="UTC")


def scored_frame(
    n: int,
    seed: int,
    models: int = 2,
    hospitals: int = 25,
    missing_hospital: float = 0.03,
) -> pd.DataFrame:
    """One row per (record, model), in the scored-discharge schema as a file would hold it
    (event times as RFC 3339 strings, codes as text, no decision column)."""
    c = synthetic_cohort(n, models, seed)
    rng = np.random.default_rng(seed)
    hosp = np.array([f"h{h % hospitals:03d}" for h in c.hospital], dtype=object)
    hosp[rng.uniform(size=n) < missing_hospital] = None
    offset = pd.to_timedelta(rng.integers(0, 200 * 86_400 * 10**9, n), unit="ns")
    times = (START + offset).strftime("%Y-%m-%dT%H:%M:%S.%f")
    # to the nanosecond: strftime stops at microseconds
    nanos = pd.Series(offset.to_numpy().astype(np.int64) % 1000).astype(str).str.zfill(3)
    event_time = times + nanos.to_numpy() + "Z"
    parts = []
    for m, scores in enumerate(c.scores):
        parts.append(pd.DataFrame({
            "record_id": [f"r{i:06d}" for i in range(n)],
            "model_id": f"model-{m:02d}",
            "event_time": event_time,
            "hospital_id": hosp,
            "score": scores,
            "label": c.label,
            **{k: v.astype(str) for k, v in c.attributes.items()},
        }))  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def site_of(frame: pd.DataFrame, sites: int) -> np.ndarray:
    """Each row's site: a hospital belongs to one site; a record without a hospital id
    goes to the site of its record number."""
    ids = frame["hospital_id"].to_numpy(dtype=object)
    rec = frame["record_id"].str[1:].astype(int).to_numpy()
    site = [int(h[1:]) if isinstance(h, str) else r for h, r in zip(ids, rec, strict=True)]
    return np.array(site) % sites
