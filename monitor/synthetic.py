"""A small seeded synthetic window for benchmarks, examples and tests.

Not the calibrated demo cohort: just enough structure (skewed group sizes,
group-dependent base rates and scores, several models, skewed hospital volumes)
that cells land on both sides of their thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor.config import MonitorConfig
from monitor.counts import CountTable

#: Composition per attribute (probabilities in configured group order).
_MIX = {
    "race": [0.005, 0.035, 0.12, 0.62, 0.22],
    "sex": [0.42, 0.58],
    "ethnicity": [0.24, 0.76],
    "age_group": [0.08, 0.27, 0.30, 0.35],
}


@dataclass(frozen=True)
class SyntheticCohort:
    """Patients (attributes, hospital, label) and one score vector per model."""

    attributes: dict[str, np.ndarray]  # attribute -> group index per record
    hospital: np.ndarray
    label: np.ndarray
    scores: list[np.ndarray]


def synthetic_cohort(
    n: int, models: int = 1, seed: int = 0, config: MonitorConfig | None = None
) -> SyntheticCohort:
    cfg = config or MonitorConfig()
    rng = np.random.default_rng(seed)
    risk = rng.normal(0.0, 1.0, n)
    attrs: dict[str, np.ndarray] = {}
    for a in cfg.attributes:
        k = len(a.codes)
        mix = np.asarray(_MIX.get(a.name, np.full(k, 1.0 / k)), dtype=float)
        if len(mix) != k:
            mix = np.full(k, 1.0 / k)
        idx = rng.choice(k, size=n, p=mix / mix.sum())
        attrs[a.name] = idx
        risk += (idx - idx.mean()) * rng.uniform(0.05, 0.25)
    hospital = (rng.zipf(1.6, n) - 1) % 400
    risk += (hospital % 7 - 3) * 0.05
    label = (rng.uniform(size=n) < 1 / (1 + np.exp(-(risk - 0.3)))).astype(np.int64)
    scores = []
    for m in range(models):
        logit = 1.2 * risk + rng.normal(0.0, 0.6 + 0.05 * m, n) - 0.35 + 0.03 * m
        scores.append(1 / (1 + np.exp(-logit)))
    return SyntheticCohort(attrs, hospital, label, scores)


def model_name(m: int) -> str:
    return f"model-{m:02d}"


def synthetic_tables(
    n: int,
    models: int = 1,
    seed: int = 0,
    config: MonitorConfig | None = None,
    threshold: float = 0.5,
) -> dict[tuple[str, str], CountTable]:
    """Count tables of a synthetic window, built without a record frame (for large n)."""
    cfg = config or MonitorConfig()
    c = synthetic_cohort(n, models, seed, cfg)
    out = {}
    for m, s in enumerate(c.scores):
        d = (s >= threshold).astype(np.int64)
        for a in cfg.attributes:
            out[(model_name(m), a.name)] = CountTable.from_records(
                a.codes, c.attributes[a.name], c.label, d, s, cfg.axis1.score_bins
            )
    return out


def synthetic_window(
    n: int,
    models: int = 1,
    seed: int = 0,
    config: MonitorConfig | None = None,
    threshold: float = 0.5,
) -> pd.DataFrame:
    """``n`` scored discharges per model (same patients, one score per model).

    Columns: record_id, model_id, hospital_id, the configured attributes (codes),
    label, score, decision.
    """
    cfg = config or MonitorConfig()
    c = synthetic_cohort(n, models, seed, cfg)
    codes = {a.name: np.array(a.codes)[c.attributes[a.name]] for a in cfg.attributes}
    frames = [
        pd.DataFrame(
            {
                "record_id": np.char.add("r", np.arange(n).astype(str)),
                "model_id": model_name(m),
                "hospital_id": np.char.add("h", c.hospital.astype(str)),
                **codes,
                "label": c.label,
                "score": s,
                "decision": (s >= threshold).astype(np.int64),
            }
        )
        for m, s in enumerate(c.scores)
    ]
    return pd.concat(frames, ignore_index=True)
