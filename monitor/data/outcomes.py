"""The synthetic year as a hospital feed sends it: predictions at admission, outcomes later.

The cohort (monitor.data.cohort) has one row per discharge: its time and its label
(length of stay > 3 days). A deployed length-of-stay model scores at admission, and the
label is known at discharge, so here each row becomes two messages (predictions now, outcomes
later):

* a **prediction** (``kind = "prediction"``) at the admission time, ``event_time`` =
  discharge - length of stay, with the score, decision inputs and attributes, no label;
* an **outcome** (``kind = "outcome"``) at the discharge time: model, record id, label.

The length of stay is drawn per record, consistent with its label (<= 3 days when the
label is 0, > 3 days when it is 1), from a seeded generator: the cohort does not carry it.

An :class:`OutcomeBias` scenario makes the outcomes of one group unrepresentative: a share
of that group's outcomes arrive ``extra_days`` later (``delayed``) or never
(``missing``), drawn by a seeded generator. That is the case the coverage figure is for
(monitor.core.coverage).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

#: Modes of ``produce --outcomes`` and ``demo --outcomes``: today's joined messages at
#: discharge with today's scores (none); joined messages at discharge, scored at admission
#: (joined); predictions at admission and outcomes at discharge (delayed).
OUTCOME_MODES = ("none", "joined", "delayed")

#: Length of stay (days) of a stay whose label is 0: uniform on (MIN_STAY, 3].
MIN_STAY_DAYS = 0.25
LABEL_CUT_DAYS = 3.0
#: Longer stays: 3 + Gamma(shape, scale) days, capped so that an outcome is never later
#: than the service's default ``max_outcome_delay_days`` (30) without a bias scenario.
LONG_STAY_SHAPE, LONG_STAY_SCALE, MAX_STAY_DAYS = 1.5, 2.5, 28.0


@dataclass(frozen=True)
class OutcomeBias:
    """A share of one group's outcomes delayed by ``extra_days`` or missing."""

    attribute: str
    group: str
    share: float
    mode: Literal["missing", "delayed"] = "missing"
    extra_days: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ValueError("the share of outcomes is in (0, 1]")
        if self.mode not in ("missing", "delayed"):
            raise ValueError("mode is 'missing' or 'delayed'")
        if self.mode == "delayed" and self.extra_days <= 0:
            raise ValueError("a delay needs a positive number of days")

    def describe(self) -> str:
        what = "missing" if self.mode == "missing" else f"{self.extra_days:g} days late"
        return f"{self.share:.0%} of outcomes of {self.attribute}={self.group} {what}"


_BIAS = re.compile(
    r"(?P<attr>[a-z][a-z0-9_]*)=(?P<group>[^:]+):(?P<share>[0-9.]+)"
    r"(?::(?P<mode>missing|delayed)(?::(?P<days>[0-9.]+))?)?"
)


def parse_outcome_bias(text: str) -> OutcomeBias:
    """``ATTR=GROUP:SHARE[:missing|:delayed:DAYS]``, e.g. ``race=2:0.3`` (30 % of the
    outcomes of race group 2 missing) or ``race=2:0.3:delayed:20``.

    >>> parse_outcome_bias("race=2:0.3")
    OutcomeBias(attribute='race', group='2', share=0.3, mode='missing', extra_days=0.0)
    >>> parse_outcome_bias("sex=1:0.5:delayed:20").extra_days
    20.0
    """
    m = _BIAS.fullmatch(text.strip())
    if m is None:
        raise ValueError("expected ATTR=GROUP:SHARE[:missing|:delayed:DAYS], e.g. race=2:0.3")
    mode = m.group("mode") or "missing"
    days = float(m.group("days") or 0.0)
    return OutcomeBias(m.group("attr"), m.group("group"), float(m.group("share")), mode, days)  # type: ignore[arg-type]  # the pattern admits the two modes only


def length_of_stay(label: np.ndarray, seed: int) -> np.ndarray:
    """Days in hospital per record, consistent with its label (LOS > 3 days)."""
    rng = np.random.default_rng([seed, 23])
    n = len(label)
    short = rng.uniform(MIN_STAY_DAYS, LABEL_CUT_DAYS, n)
    long = LABEL_CUT_DAYS + rng.gamma(LONG_STAY_SHAPE, LONG_STAY_SCALE, n)
    long = np.minimum(np.maximum(long, LABEL_CUT_DAYS + 1e-3), MAX_STAY_DAYS)
    return np.where(np.asarray(label) == 1, long, short)


def with_admission_times(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The cohort with ``admitted_at`` = discharge time - length of stay (a copy)."""
    out = frame.copy()
    days = length_of_stay(out["label"].to_numpy(), seed)
    out["admitted_at"] = out["event_time"] - pd.to_timedelta(days, unit="D")
    return out


def joined_messages(frame: pd.DataFrame) -> pd.DataFrame:
    """One scored discharge per row at its discharge time, as today (``admitted_at``
    dropped: it is not a field of the record schema)."""
    return frame.drop(columns=["admitted_at"], errors="ignore")


def delayed_messages(
    frame: pd.DataFrame, seed: int, bias: OutcomeBias | None = None
) -> pd.DataFrame:
    """Predictions at admission and outcomes at discharge (delayed or left out as ``bias``
    says), in the order a feed sends them: by message time, a prediction before an outcome
    of the same instant. ``frame``: scored rows with ``admitted_at`` (with_admission_times
    before scoring). Outcome rows carry only model_id, record_id, event_time and label;
    prediction rows everything but the label."""
    if "admitted_at" not in frame:
        raise ValueError("the frame needs admitted_at (monitor.data.outcomes.with_admission_times)")
    pred = frame.drop(columns=["label", "admitted_at"]).copy()
    pred["event_time"] = frame["admitted_at"].to_numpy()
    pred.insert(0, "kind", "prediction")
    out = pd.DataFrame(
        {
            "kind": "outcome",
            "record_id": frame["record_id"].to_numpy(),
            "model_id": frame["model_id"].to_numpy(),
            "event_time": frame["event_time"].to_numpy(),
            "label": frame["label"].to_numpy(),
        }
    )
    keep = np.ones(len(frame), dtype=bool)
    if bias is not None:
        keep, late = _biased(frame, seed, bias)
        shift = pd.to_timedelta(np.where(late, bias.extra_days, 0.0), unit="D")
        out["event_time"] = pd.DatetimeIndex(out["event_time"]) + shift
    out = out[keep]
    both = pd.concat([pred.assign(_o=0), out.assign(_o=1)], ignore_index=True)
    both["_i"] = np.arange(len(both))
    both = both.sort_values(["event_time", "_o", "_i"], kind="stable")
    return both.drop(columns=["_o", "_i"]).reset_index(drop=True)


def _biased(frame: pd.DataFrame, seed: int, bias: OutcomeBias) -> tuple[np.ndarray, np.ndarray]:
    """(outcome sent, outcome late) per row under ``bias``; one draw per discharge, so every
    model's outcome of a discharge is treated alike (the hospital sends it, or it does not)."""
    if bias.attribute not in frame:
        raise ValueError(f"unknown attribute {bias.attribute!r} for the outcome bias")
    rng = np.random.default_rng([seed, 29])
    ids = frame["record_id"].to_numpy()
    uniq, inverse = np.unique(ids, return_inverse=True)
    hit_record = rng.random(len(uniq)) < bias.share
    hit = hit_record[inverse] & (frame[bias.attribute].astype(str).to_numpy() == bias.group)
    if bias.mode == "missing":
        return ~hit, np.zeros(len(frame), dtype=bool)
    return np.ones(len(frame), dtype=bool), hit


#: The fields of an outcome message (monitor.stream.schema: kind, ids, time known, label).
OUTCOME_FIELDS = ("kind", "record_id", "model_id", "event_time", "label")


def iter_messages(frame: pd.DataFrame, chunk: int = 10_000) -> Iterator[dict]:
    """Rows of :func:`message_frame` as JSON-ready dicts: a prediction without a label, an
    outcome with its five fields only, a joined record as it is (event_time as RFC 3339)."""
    kinds = "kind" in frame
    for lo in range(0, len(frame), chunk):
        part = frame.iloc[lo : lo + chunk].copy()
        part["event_time"] = part["event_time"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for rec in part.to_dict("records"):
            if not kinds:  # joined records (monitor.data.scorer.iter_records does the same)
                yield rec
            elif rec["kind"] == "outcome":
                yield {k: rec[k] for k in OUTCOME_FIELDS} | {"label": int(rec["label"])}
            else:
                rec.pop("label", None)
                yield rec


def message_frame(
    frame: pd.DataFrame, mode: str, seed: int, bias: OutcomeBias | None = None
) -> pd.DataFrame:
    """The messages of a scored stream in ``mode`` (:data:`OUTCOME_MODES`): the frame as
    it is (none), joined at discharge (joined) or predictions and outcomes (delayed)."""
    if mode not in OUTCOME_MODES:
        raise ValueError(f"unknown outcome mode {mode!r}; choose from {list(OUTCOME_MODES)}")
    if bias is not None and mode != "delayed":
        raise ValueError("an outcome bias needs delayed outcomes (--outcomes delayed)")
    if mode == "delayed":
        return delayed_messages(frame, seed, bias)
    return joined_messages(frame)
