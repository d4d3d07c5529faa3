"""A small seeded synthetic window for benchmarks, examples and tests.

Not the calibrated demo cohort: just enough structure (skewed group sizes,
group-dependent base rates and scores, several models, skewed hospital volumes)
that cells land on both sides of their thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from batch_axes.mppd import scale_features
from monitor.config import MonitorConfig
from monitor.core.counts import CountTable
from monitor.core.tables import grid_groups

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
    groups = grid_groups(c.attributes, cfg)  # with the configured intersections
    out = {}
    for m, s in enumerate(c.scores):
        d = (s >= threshold).astype(np.int64)
        for a in cfg.grid_attributes:
            out[(model_name(m), a.name)] = CountTable.from_records(
                a.codes, groups[a.name], c.label, d, s, cfg.axis1.score_bins
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


GROUP_NAMES = ("g1", "g2", "g3", "g4", "g5")


GROUP_SHARES = (0.50, 0.20, 0.15, 0.10, 0.05)


def synthetic_similarity_cohort(
    n: int, seed: int = 0, features: int = 8
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A seeded clinical-like cohort for the matcher benchmark: ``(raw features, scores, groups)``.

    Features look like a surgical cohort (age, BMI, comorbidity index, ASA
    class, haemoglobin, creatinine, length of stay, medication count, then
    extra lab-like columns), tied together by a latent frailty. 2 % of records
    copy another record's features exactly and 2 % copy them with 0.1 %
    multiplicative noise, so duplicates and near-duplicates across groups
    exist. Scores come from a logistic model of the features with a group
    offset, so MPPD differs between the five groups.
    """
    if n < 0 or features < 1:
        raise ValueError("need n >= 0 and at least one feature")
    rng = np.random.default_rng(seed)
    group_codes = rng.choice(len(GROUP_NAMES), size=n, p=GROUP_SHARES)
    frailty = rng.normal(size=n) + 0.2 * (group_codes == 3)

    def noise() -> np.ndarray:
        return rng.normal(size=n)

    columns = [
        50 + 45 * rng.beta(1.0, 1.5, size=n),  # age, years
        np.clip(np.exp(np.log(28) + 0.5 * noise() + 0.03 * group_codes), 15, 60),  # BMI
        np.clip(rng.poisson(np.exp(0.3 + 0.6 * frailty)), 0, 12),  # Charlson index
        np.clip(np.round(2.2 + 0.8 * noise() + 0.4 * frailty), 1, 5),  # ASA class
        np.clip(12.5 + 3.5 * noise() - 0.5 * frailty, 6, 18),  # haemoglobin, g/dL
        np.clip(np.exp(0.9 * noise() + 0.15 * frailty), 0.3, 8),  # creatinine, mg/dL
        np.clip(np.round(np.exp(1.0 + 1.1 * noise() + 0.2 * frailty)), 1, 60),  # stay, days
        np.clip(rng.poisson(np.exp(1.6 + 0.5 * frailty + 0.5 * noise())), 0, 40),  # medications
    ]
    while len(columns) < features:
        columns.append(np.exp(0.6 * noise() + 0.2 * frailty))  # further lab values
    X = np.column_stack(columns[:features]).astype(np.float64)

    n_dup = int(0.02 * n)
    if n_dup:
        X[rng.choice(n, n_dup, replace=False)] = X[rng.integers(0, n, n_dup)]
        targets = rng.choice(n, n_dup, replace=False)
        X[targets] = X[rng.integers(0, n, n_dup)] * (1 + 1e-3 * rng.normal(size=(n_dup, features)))

    scaled = scale_features(X)
    weights = np.linspace(1.5, -0.5, features)
    group_offset = np.array([0.0, 0.15, -0.10, 0.30, 0.05])[group_codes]
    logit = -1.5 + scaled @ weights + group_offset + 0.25 * rng.normal(size=n)
    scores = 1.0 / (1.0 + np.exp(-logit))
    return X, scores, np.array(GROUP_NAMES)[group_codes]



def skewed_hospital_ids(n_records: int, n_hospitals: int, seed: int = 0) -> np.ndarray:
    """String hospital ids with Zipf-like volumes (a few large sites, many small ones)."""
    rng = np.random.default_rng(seed)
    weight = 1.0 / np.arange(1, n_hospitals + 1) ** 1.1
    idx = rng.choice(n_hospitals, size=n_records, p=weight / weight.sum())
    names = np.array([f"H{i:05d}" for i in range(n_hospitals)], dtype=object)
    return names[idx]



def with_bench_models(config: MonitorConfig, models: int) -> MonitorConfig:
    """``config`` with the bench's synthetic models (model-00, ...) registered in
    ``[[models]]`` and the wall-clock event-time bounds off (the bench replays a fixed
    date): the benches feed the pipeline models they name themselves, and say so."""
    data = config.model_dump()
    known = {m["id"] for m in data["models"]}
    data["models"] += [{"id": model_name(m)} for m in range(models) if model_name(m) not in known]
    intake = data["service"]["intake"]
    intake["event_time_bounds"] = "none"
    intake["max_models"] = max(intake["max_models"], len(data["models"]))
    return MonitorConfig.model_validate(data)
