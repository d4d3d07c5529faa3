"""The demo's model: XGBoost trained on LOS > 3 days, and the scored stream it produces.

The monitor watches *deployed* models, so the demo needs one: gradient-boosted trees
(the VFR-Audit paper's canonical model) fitted on a training split and then used to score
every later discharge. The training split comes from before the drift start (a model is
trained on history, then deployed); everything else is the stream, in event-time order.

Two models score the same discharges, so a board sees a model that changes beside one
that does not:

* ``los-xgb-discharge``: every feature, including end-of-encounter charges (leaks LOS,
  like the paper's main analysis);
* ``los-xgb-admission``: without the charges (the paper's admission-lean ablation).

A *model update* is a drift of the scorer, not of the data, so its scenarios live here
(``MODEL_UPDATES``); data scenarios live in monitor.data.cohort. ``SCENARIOS`` lists both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from monitor.data import cohort
from monitor.data.datasets import Dataset

SYNTH_FEATURES: tuple[str, ...] = (
    "n_diagnoses",
    "n_procedures",
    "admission_type",
    "emergency",
    "comorbidity_index",
    "prior_admissions",
    "total_charges_log",
)
#: Synthetic-cohort models: id -> feature columns.
SYNTH_MODELS: dict[str, tuple[str, ...]] = {
    "los-xgb-discharge": SYNTH_FEATURES,
    "los-xgb-admission": SYNTH_FEATURES[:-1],
}

#: Scorer drift: a model update that moves scores for one group (name -> description).
MODEL_UPDATES: dict[str, str] = {
    "group_score_shift": (
        "From 2026-07-01 an update of los-xgb-discharge lowers the scores of female patients: "
        "a logit shift that ramps from 0 to -1.0 by 2026-09-01 and then stays. Data and the "
        "other model are unchanged, so only that model's sex cells move."
    ),
}
#: Every scenario name the demo, `synth` and `produce` accept.
SCENARIOS: dict[str, str] = {**cohort.SCENARIOS, **MODEL_UPDATES}

_SHIFT_MODEL = "los-xgb-discharge"
_SHIFT_ATTRIBUTE, _SHIFT_GROUP = "sex", "1"
_SHIFT_LOGIT = -1.0
_SHIFT_RAMP_END = pd.Timestamp("2026-09-01", tz="UTC")


@dataclass(frozen=True)
class TrainedModel:
    """One fitted scorer and its sanity figure."""

    model_id: str
    features: tuple[str, ...]
    booster: object  # xgboost.XGBClassifier (imported lazily: it is a heavy import)
    #: AUROC on the stream's records before any drift (held out from training).
    auroc: float
    n_train: int

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        X = frame[list(self.features)].to_numpy(dtype=np.float32)
        return self.booster.predict_proba(X)[:, 1].astype(np.float64)  # type: ignore[attr-defined]  # an XGBClassifier (xgboost imported lazily)


def split_train_stream(
    frame: pd.DataFrame, seed: int, train_fraction: float = 0.25, before: pd.Timestamp | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A random ``train_fraction`` of the records before ``before`` trains; the rest streams.

    ``before=None`` draws the training records from the whole frame (for real data without
    a drift point). The stream keeps the frame's (event-time) order.
    """
    rng = np.random.default_rng([seed, 11])
    eligible = np.ones(len(frame), dtype=bool)
    if before is not None:
        eligible = (frame["event_time"] < before).to_numpy()
    train = eligible & (rng.random(len(frame)) < train_fraction)
    return frame[train].reset_index(drop=True), frame[~train].reset_index(drop=True)


def train_model(
    model_id: str, features: Sequence[str], train: pd.DataFrame, seed: int, threads: int = 2
) -> TrainedModel:
    """Fit gradient-boosted trees (fixed hyper-parameters, frozen before any audit)."""
    from xgboost import XGBClassifier

    booster = XGBClassifier(
        n_estimators=150,
        max_depth=4,
        learning_rate=0.1,
        subsample=0.9,
        tree_method="hist",
        n_jobs=threads,
        random_state=seed,
    )
    booster.fit(train[list(features)].to_numpy(dtype=np.float32), train["label"].to_numpy())
    return TrainedModel(model_id, tuple(features), booster, float("nan"), len(train))


def with_auroc(model: TrainedModel, holdout: pd.DataFrame) -> TrainedModel:
    """The same model with its AUROC on ``holdout`` (NaN when one class is absent)."""
    y = holdout["label"].to_numpy()
    auroc = float("nan")
    if len(np.unique(y)) == 2:
        auroc = float(roc_auc_score(y, model.score(holdout)))
    return TrainedModel(model.model_id, model.features, model.booster, auroc, model.n_train)


def shift_scores(
    model_id: str, frame: pd.DataFrame, scores: np.ndarray, scenario: str | None
) -> np.ndarray:
    """Apply a model-update scenario to one model's scores (identity for data scenarios).

    The update acts from the time of scoring: the admission time where the stream has one
    (``admitted_at``, monitor.data.outcomes), else the discharge (``event_time``)."""
    if scenario != "group_score_shift" or model_id != _SHIFT_MODEL:
        return scores
    t = frame["admitted_at"] if "admitted_at" in frame else frame["event_time"]
    ramp = (t - cohort.DRIFT_START) / (_SHIFT_RAMP_END - cohort.DRIFT_START)
    weight = np.clip(ramp.to_numpy(dtype=np.float64), 0.0, 1.0)
    hit = (frame[_SHIFT_ATTRIBUTE] == _SHIFT_GROUP).to_numpy() & (weight > 0)
    logit = np.log(np.clip(scores, 1e-9, 1 - 1e-9) / np.clip(1 - scores, 1e-9, 1))
    shifted = 1.0 / (1.0 + np.exp(-(logit + _SHIFT_LOGIT * weight)))
    return np.where(hit, shifted, scores)


@dataclass(frozen=True)
class ScoredStream:
    """Scored discharges, one row per (discharge, model), in event-time order."""

    frame: pd.DataFrame
    models: list[TrainedModel]
    dataset: str
    scenario: str | None
    n_discharges: int


def score_stream(
    stream: pd.DataFrame,
    models: Sequence[TrainedModel],
    features: Sequence[str],
    dataset: str,
    scenario: str | None = None,
) -> ScoredStream:
    """Score every discharge with every model; rows interleaved by event time.

    Columns follow the record schema (docs/method.md section 1): record_id, model_id, event_time,
    hospital_id (when the data has one), score, label, the attributes, and ``features``
    (a dict of the numeric features, for EquiLense matching).
    """
    base_cols = [c for c in stream.columns if c not in set(features)]
    feats = stream[list(features)].to_dict("records")
    parts = []
    for order, m in enumerate(models):
        part = stream[base_cols].copy()
        part["model_id"] = m.model_id
        part["score"] = shift_scores(m.model_id, stream, m.score(stream), scenario)
        part["features"] = feats
        part["_pos"] = np.arange(len(stream)) * len(models) + order
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True).sort_values("_pos", kind="stable")
    frame = frame.drop(columns="_pos").reset_index(drop=True)
    return ScoredStream(frame, list(models), dataset, scenario, len(stream))


def synthetic_stream(
    records: int, seed: int, scenario: str | None, scored_at_admission: bool = False
) -> ScoredStream:
    """The demo's stream: a seeded cohort, two XGBoost models, an optional scenario.

    ``records`` discharges are drawn over 2026; a quarter of those before the drift start
    train the models and the rest stream (so about 7/8 of ``records`` are scored).
    ``scored_at_admission``: each discharge gets an admission time (``admitted_at``,
    monitor.data.outcomes) and is scored then, so a model update acts on the predictions
    made after it, whether they are sent at admission or joined with their outcome.
    """
    if scenario is not None and scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {sorted(SCENARIOS)}")
    data_scenario = scenario if scenario in cohort.SCENARIOS else None
    full = cohort.synth_cohort(records, seed=seed, scenario=data_scenario)
    if scored_at_admission:
        from monitor.data.outcomes import with_admission_times

        full = with_admission_times(full, seed)
    train, stream = split_train_stream(full, seed, before=cohort.DRIFT_START)
    holdout = stream[stream["event_time"] < cohort.DRIFT_START]
    models = [
        with_auroc(train_model(mid, feats, train, seed), holdout)
        for mid, feats in SYNTH_MODELS.items()
    ]
    return score_stream(stream, models, SYNTH_FEATURES, "synthetic", scenario)


def dataset_stream(ds: Dataset, seed: int, model_id: str | None = None) -> ScoredStream:
    """A real dataset's stream: one XGBoost model on a random 25 % split, the rest scored."""
    train, stream = split_train_stream(ds.frame, seed)
    model = with_auroc(train_model(model_id or f"{ds.name}-xgb", ds.features, train, seed), stream)
    return score_stream(stream, [model], ds.features, ds.name)


def iter_records(frame: pd.DataFrame, chunk: int = 10_000) -> Iterator[dict]:
    """Rows as JSON-ready dicts (event_time as RFC 3339 text), ``chunk`` rows at a time."""
    for lo in range(0, len(frame), chunk):
        part = frame.iloc[lo : lo + chunk].copy()
        part["event_time"] = part["event_time"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        yield from part.to_dict("records")
