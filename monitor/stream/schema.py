"""The scored-discharge schema (docs/method.md section 1) and its validation.

One implementation, vectorised over a batch: a Kafka poll, a replayed file and
a single record all go through :func:`validate_frame`, so a record is judged
the same way whichever door it came in by.

A rejection carries a short machine-readable reason such as
``out_of_range:score`` or ``unknown_code:race``: the field and the kind of
fault, never the offending value (it may be patient data). The raw payload
goes to the dead-letter store, not into messages or logs. A NaN or null counts
as a missing value (``missing:score``), as an empty CSV cell does.

Example:
    >>> from monitor.config import EXPORTABLE_ID, MonitorConfig
    >>> rec = {"record_id": "r1", "model_id": "m", "event_time": "2026-01-02T03:04:05Z",
    ...        "hospital_id": "h1", "score": 0.7, "label": 1, "race": "3", "sex": "1",
    ...        "ethnicity": "1", "age_group": "2"}
    >>> ok, reason = validate_record(rec, MonitorConfig())
    >>> ok["decision"], reason
    (1, None)
    >>> validate_record({**rec, "score": 1.5}, MonitorConfig())[1]
    'out_of_range:score'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import EXPORTABLE_ID, MonitorConfig

SCHEMA_VERSION = 1
MAX_ID_LENGTH = 256
MAX_FEATURES = 256

#: Core fields in the order they are checked (the first fault found is reported).
REQUIRED = ("record_id", "model_id", "event_time", "score", "label")
OPTIONAL = ("hospital_id", "decision", "features", "schema_version", "kind")
#: an outcome message (predictions now, outcomes later): which record of which model, its label, and
#: when the label became known (``event_time``); nothing else
OUTCOME_FIELDS = ("kind", "record_id", "model_id", "event_time", "label", "schema_version")
#: the ``label`` of a prediction whose outcome is not known yet
LABEL_UNKNOWN = -1


@dataclass(frozen=True)
class Rejection:
    """One invalid record: its position in the batch and why."""

    index: int
    reason: str


def _no_outcomes() -> pd.DataFrame:
    return pd.DataFrame(
        {"position": np.zeros(0, np.int64), "model_id": np.zeros(0, object),
         "record_id": np.zeros(0, object),
         "event_time": pd.Series([], dtype="datetime64[ns, UTC]").array,
         "label": np.zeros(0, np.int8)}
    )  # fmt: skip


@dataclass(frozen=True)
class ValidationResult:
    """Valid records as a typed frame (``position`` = index in the batch) and the rejections.

    ``valid`` holds predictions and joined records (a prediction's label is
    :data:`LABEL_UNKNOWN`); ``outcomes`` the valid outcome messages (position, model_id,
    record_id, event_time = when known, label).
    """

    valid: pd.DataFrame
    rejected: list[Rejection]
    outcomes: pd.DataFrame = field(default_factory=_no_outcomes)

    def reason_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rejected:
            out[r.reason] = out.get(r.reason, 0) + 1
        return out


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _is_id(x: Any) -> bool:
    return isinstance(x, str) and 0 < len(x) <= MAX_ID_LENGTH


def _as_code(x: Any) -> str | None:
    """Group codes may arrive as strings or integers (CSV); anything else is invalid."""
    if isinstance(x, str):
        return x
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return str(int(x))
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return None


def _features_ok(x: Any) -> bool:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return True
    if not isinstance(x, Mapping) or len(x) > MAX_FEATURES:
        return False
    return all(isinstance(k, str) and _is_number(v) and math.isfinite(v) for k, v in x.items())


# ----------------------------------------------------------------------------- privacy rules
# Separate rule functions (docs/decisions.md, "Hostile input and patient privacy"), each one mask
# over the batch.

#: The event times every layer can hold (pandas nanoseconds, DuckDB, window arithmetic).
EVENT_TIME_MIN = pd.Timestamp("1677-09-22", tz="UTC")
EVENT_TIME_MAX = pd.Timestamp("2262-04-11", tz="UTC")


def model_id_not_exportable(vals: np.ndarray) -> np.ndarray:
    """A model id the exporter could not use as a label value (EXPORTABLE_ID): such an id
    never gets a window, so it can never reach the exporter."""
    match = EXPORTABLE_ID.fullmatch
    return np.fromiter((not (isinstance(x, str) and match(x)) for x in vals), bool, len(vals))


def boolean_values(col: pd.Series) -> np.ndarray:
    """JSON true/false in a label or decision column. Rejected in every batch (one rule
    whatever the batch's mix of types): a boolean is not the schema's 0/1 integer, and
    accepting it only in all-boolean batches made the verdict depend on the neighbours."""
    if pd.api.types.is_bool_dtype(col):
        return col.notna().to_numpy()
    if pd.api.types.is_numeric_dtype(col):
        return np.zeros(len(col), bool)
    vals = col.to_numpy(dtype=object)
    return np.fromiter((isinstance(x, (bool, np.bool_)) for x in vals), bool, len(vals))


def configured_features(vals: np.ndarray, allowed: frozenset[str]) -> np.ndarray:
    """Each ``features`` object reduced to the keys named in ``[equilense] features``
    (None when none is left). Why drop rather than dead-letter: producers send their
    model's whole feature vector; the service needs only the configured similarity
    features, and keeping nothing else means free-form data is never stored, while the
    record's scores still count."""
    out = np.empty(len(vals), dtype=object)
    for i, x in enumerate(vals):
        if isinstance(x, Mapping):
            kept = {k: v for k, v in x.items() if k in allowed}
            out[i] = kept or None
        else:
            out[i] = None
    return out


def event_time_unrepresentable(ts: pd.Series) -> np.ndarray:
    """Outside the range every layer can hold (1677-09-22 .. 2262-04-11)."""
    t = pd.Series(ts)
    return (t.notna() & ((t < EVENT_TIME_MIN) | (t > EVENT_TIME_MAX))).to_numpy()


def event_time_out_of_bounds(
    times: Any, now: pd.Timestamp, config: MonitorConfig
) -> np.ndarray:
    """``[service.intake] event_time_bounds = "wall-clock"``: an event time older than
    ``max_event_age_days`` or later than ``now + max_clock_skew_s``."""
    svc = config.service.intake
    t = pd.Series(times)
    if svc.event_time_bounds == "none" or not len(t):
        return np.zeros(len(t), bool)
    lo = now - pd.Timedelta(days=svc.max_event_age_days)
    hi = now + pd.Timedelta(seconds=svc.max_clock_skew_s)
    return ((t < lo) | (t > hi)).to_numpy()


def _binary(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(is a 0/1 value, value as int) for a label/decision column."""
    if pd.api.types.is_bool_dtype(col):
        return np.ones(len(col), bool), col.to_numpy(dtype=np.int64)
    if pd.api.types.is_numeric_dtype(col):
        v = col.to_numpy(dtype=np.float64)
        ok = (v == 0) | (v == 1)
        return ok, np.where(ok, v, 0).astype(np.int64)
    vals = col.to_numpy(dtype=object)
    ok = np.fromiter((_is_number(x) and x in (0, 1) for x in vals), bool, len(vals))
    return ok, np.array([int(x) if o else 0 for x, o in zip(vals, ok, strict=True)], dtype=np.int64)


def _present(col: pd.Series) -> np.ndarray:
    return col.notna().to_numpy()


# Fast paths: a column whose values are all plain ``str`` (the usual JSON batch) is judged
# with C-level map/set operations instead of a Python call per value. Any other mix of
# types takes the per-value checks, so the verdicts are the same either way.


def _all_str(vals: np.ndarray) -> bool:
    return len(vals) > 0 and set(map(type, vals)) == {str}


def _ids_ok(vals: np.ndarray) -> np.ndarray:
    """_is_id of every value."""
    if _all_str(vals):
        lens = np.fromiter(map(len, vals), np.int64, len(vals))
        return (lens > 0) & (lens <= MAX_ID_LENGTH)
    return np.fromiter((_is_id(x) for x in vals), bool, len(vals))


def _codes(vals: np.ndarray) -> np.ndarray:
    """_as_code of every value, as an object array."""
    if _all_str(vals):
        return vals.copy()
    return np.array([_as_code(x) for x in vals], dtype=object)


#: RFC 3339 requires an offset: Z or +hh:mm (a zone-less time is not taken as UTC)
_ZONE = r"(?:Z|z|[+-]\d\d:?\d\d)$"


def parse_time_strings(values: np.ndarray) -> tuple[np.ndarray, pd.Series]:
    """(has a UTC offset, parsed time or NaT) of a batch's distinct event_time strings.

    The one event_time parse of both ingest paths: the columnar one
    (:mod:`monitor.stream.columnar`) hands it the same distinct strings, so both get the
    same times (pandas picks the time resolution from all the strings it is given).
    """
    u = pd.Series(values, dtype="string")
    zone = u.str.contains(_ZONE, regex=True, na=False).to_numpy()
    return zone, pd.to_datetime(u.where(zone), format="ISO8601", utc=True, errors="coerce")


def _parse_times(col: pd.Series, n: int) -> tuple[np.ndarray, np.ndarray, pd.Series]:
    """(is a string, has a UTC offset, parsed time or NaT) of an event_time column.

    Each distinct string is parsed once (a batch often repeats timestamps).
    """
    vals = col.to_numpy(dtype=object)
    if _all_str(vals):
        codes, uniq = pd.factorize(vals)
        zone, ts_u = parse_time_strings(uniq)
        ts = pd.Series(ts_u.array.take(codes), index=col.index)
        return np.ones(n, bool), zone[codes], ts
    text = col.astype("string")
    has_zone = text.str.contains(_ZONE, regex=True, na=False).to_numpy()
    is_str = np.fromiter((isinstance(x, str) for x in vals), bool, n)
    ts = pd.to_datetime(text.where(is_str & has_zone), format="ISO8601", utc=True, errors="coerce")
    return is_str, has_zone, ts


def validate_frame(frame: pd.DataFrame, config: MonitorConfig) -> ValidationResult:
    """Validate every row of a frame of scored discharges; never raises on bad rows."""
    n = len(frame)
    reason = np.full(n, None, dtype=object)
    free = np.ones(n, dtype=bool)  # no fault found yet

    def fail(mask: np.ndarray, why: str) -> None:
        hit = mask & free
        if hit.any():
            reason[hit] = why
            free[hit] = False

    def column(name: str) -> pd.Series:
        if name in frame.columns:
            return frame[name]
        return pd.Series([None] * n, index=frame.index, dtype=object)

    out: dict[str, Any] = {"position": np.arange(n)}

    kinds = column("kind")
    given_kind = _present(kinds)
    kind_vals = kinds.to_numpy(dtype=object)
    prediction = np.fromiter((k == "prediction" for k in kind_vals), bool, n) & given_kind
    fail(given_kind & ~prediction, "invalid:kind")

    for name in ("record_id", "model_id"):
        col = column(name)
        fail(~_present(col), f"missing:{name}")
        fail(~_ids_ok(col.to_numpy(dtype=object)), f"wrong_type:{name}")
        out[name] = col.to_numpy(dtype=object)
    fail(model_id_not_exportable(out["model_id"]), "invalid:model_id")

    col = column("event_time")
    fail(~_present(col), "missing:event_time")
    if pd.api.types.is_datetime64_any_dtype(col):
        ts = pd.to_datetime(col, utc=True)
    else:
        is_str, has_zone, ts = _parse_times(col, n)
        fail(_present(col) & ~is_str, "wrong_type:event_time")
        fail(_present(col) & ~has_zone, "invalid:event_time")
    fail(ts.isna().to_numpy(), "invalid:event_time")
    fail(event_time_unrepresentable(ts), "out_of_range:event_time")
    # kept as a tz-aware array: to_numpy() would box every value as a Timestamp object
    out["event_time"] = ts.array

    col = column("score")
    fail(~_present(col), "missing:score")
    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        score = col.to_numpy(dtype=np.float64)
    else:
        vals = col.to_numpy(dtype=object)
        is_num = np.fromiter((_is_number(x) for x in vals), bool, n)
        fail(_present(col) & ~is_num, "wrong_type:score")
        score = np.array([float(x) if ok else np.nan for x, ok in zip(vals, is_num, strict=True)])
    with np.errstate(invalid="ignore"):
        fail(~np.isfinite(score) | (score < 0) | (score > 1), "out_of_range:score")
    out["score"] = np.nan_to_num(score)

    col = column("label")
    # a prediction has no label yet (predictions now, outcomes later): one carrying a label is not a
    # prediction
    fail(prediction & _present(col), "unexpected_field:label")
    fail(~prediction & ~_present(col), "missing:label")
    fail(~prediction & boolean_values(col), "wrong_type:label")
    ok, label = _binary(col)
    fail(~prediction & ~ok, "out_of_range:label")
    out["label"] = np.where(prediction, LABEL_UNKNOWN, label)

    col = column("decision")
    given = _present(col)
    fail(given & boolean_values(col), "wrong_type:decision")
    if given.any():
        ok, decision = _binary(col)
    else:  # usually absent: derived from the score below
        ok, decision = np.zeros(n, bool), np.zeros(n, np.int64)
    fail(given & ~ok, "out_of_range:decision")

    for attr in config.attributes:
        col = column(attr.name)
        fail(~_present(col), f"missing:{attr.name}")
        codes = _codes(col.to_numpy(dtype=object))
        allowed = set(attr.codes)
        fail(
            ~np.fromiter(map(allowed.__contains__, codes), bool, n), f"unknown_code:{attr.name}"
        )
        out[attr.name] = codes

    col = column("hospital_id")
    vals = col.to_numpy(dtype=object)
    fail(_present(col) & ~_ids_ok(vals), "wrong_type:hospital_id")
    out["hospital_id"] = np.where(_present(col), vals, None)

    col = column("features")
    vals = col.to_numpy(dtype=object)
    if not (n and set(map(type, vals)) == {type(None)}):
        fail(~np.fromiter((_features_ok(x) for x in vals), bool, n), "wrong_type:features")
    out["features"] = configured_features(vals, frozenset(config.equilense.features))

    col = column("schema_version")
    sv = col.to_numpy(dtype=object)
    present = _present(col)
    if present.any():
        bad = np.zeros(n, bool)
        bad[present] = [not (_is_number(x) and x == SCHEMA_VERSION) for x in sv[present]]
        fail(bad, "unsupported:schema_version")

    # A missing decision is derived from the score and the model's thresholds.
    thresholds = decision_thresholds(out, config)
    out["decision"] = np.where(given & ok, decision, (out["score"] >= thresholds).astype(np.int64))

    good = free
    valid = pd.DataFrame(
        {
            k: (v[good] if k == "event_time" and good.any() else np.asarray(v)[good])
            for k, v in out.items()
        }
    )
    valid["label"] = valid["label"].astype(np.int8)
    valid["decision"] = valid["decision"].astype(np.int8)
    rejected = [Rejection(int(i), str(reason[i])) for i in np.flatnonzero(~good)]
    return ValidationResult(valid=valid.reset_index(drop=True), rejected=rejected)


def decision_thresholds(columns: Mapping[str, Any], config: MonitorConfig) -> np.ndarray:
    """Per-record decision threshold: the model's per-group threshold if configured, else global."""
    n = len(columns["score"])
    thr = np.full(n, config.decision.threshold)
    per = config.decision.per_group
    if per:
        models = np.asarray(columns["model_id"], dtype=object)
        for model, by_attr in per.items():
            in_model = models == model
            for attr, by_code in by_attr.items():
                codes = np.asarray(columns[attr], dtype=object)
                for code, t in by_code.items():
                    thr[in_model & (codes == code)] = t
    return thr


def validate_outcome_frame(frame: pd.DataFrame, config: MonitorConfig) -> ValidationResult:
    """Validate outcome messages (predictions now, outcomes later): the id, time and label rules of
    a scored discharge, on the fields an outcome has; ``outcomes`` holds the valid ones."""
    n = len(frame)
    reason = np.full(n, None, dtype=object)
    free = np.ones(n, dtype=bool)

    def fail(mask: np.ndarray, why: str) -> None:
        hit = mask & free
        reason[hit & (reason == None)] = why  # noqa: E711 (elementwise)
        free[hit] = False

    def column(name: str) -> pd.Series:
        if name in frame.columns:
            return frame[name]
        return pd.Series([None] * n, index=frame.index, dtype=object)

    out: dict[str, Any] = {"position": frame["position"].to_numpy(np.int64)}
    for name in ("record_id", "model_id"):
        col = column(name)
        fail(~_present(col), f"missing:{name}")
        fail(~_ids_ok(col.to_numpy(dtype=object)), f"wrong_type:{name}")
        out[name] = col.to_numpy(dtype=object)
    fail(model_id_not_exportable(out["model_id"]), "invalid:model_id")
    col = column("event_time")
    fail(~_present(col), "missing:event_time")
    is_str, has_zone, ts = _parse_times(col, n)
    fail(_present(col) & ~is_str, "wrong_type:event_time")
    fail(_present(col) & ~has_zone, "invalid:event_time")
    fail(ts.isna().to_numpy(), "invalid:event_time")
    fail(event_time_unrepresentable(ts), "out_of_range:event_time")
    out["event_time"] = ts.array
    col = column("label")
    fail(~_present(col), "missing:label")
    fail(boolean_values(col), "wrong_type:label")
    ok, label = _binary(col)
    fail(~ok, "out_of_range:label")
    out["label"] = label.astype(np.int8)
    sv = column("schema_version").to_numpy(dtype=object)
    present = _present(column("schema_version"))
    bad = np.zeros(n, bool)
    bad[present] = [not (_is_number(x) and x == SCHEMA_VERSION) for x in sv[present]]
    fail(bad, "unsupported:schema_version")
    good = free
    valid = pd.DataFrame(
        {k: (v[good] if k == "event_time" and good.any() else np.asarray(v)[good])
         for k, v in out.items()}
    )  # fmt: skip
    if not good.any():
        valid = _no_outcomes()
    rejected = [Rejection(int(out["position"][i]), str(reason[i])) for i in np.flatnonzero(~good)]
    return ValidationResult(valid=_no_outcomes().iloc[0:0], rejected=rejected,
                            outcomes=valid.reset_index(drop=True))  # fmt: skip


def _is_outcome(rec: Any) -> bool:
    return isinstance(rec, Mapping) and rec.get("kind") == "outcome"


def validate_records(
    records: Sequence[Mapping[str, Any]], config: MonitorConfig
) -> ValidationResult:
    """Validate decoded JSON objects; non-objects and unknown fields are rejected too.

    Outcome messages (``"kind": "outcome"``) are judged by :func:`validate_outcome_frame`
    and returned in ``outcomes``; everything else as a scored discharge or prediction.
    """
    if any(map(_is_outcome, records)):
        return _validate_mixed(records, config)
    known = set(REQUIRED) | set(OPTIONAL) | {a.name for a in config.attributes}
    pre: dict[int, str] = {}
    rows: list[Mapping[str, Any]] = []
    for i, rec in enumerate(records):
        if type(rec) is dict and known.issuperset(rec):  # the usual case, checked in C
            rows.append(rec)
            continue
        if not isinstance(rec, Mapping):
            pre[i] = "not_an_object"
            rows.append({})
            continue
        extra = [k for k in rec if k not in known]
        if extra:
            pre[i] = "unexpected_field"
        rows.append(rec)
    frame = pd.DataFrame(rows, index=range(len(rows)))  # keeps rows of empty objects
    result = validate_frame(frame, config)
    if not pre:
        return result
    keep = ~result.valid["position"].isin(list(pre)).to_numpy()
    rejected = sorted(
        [r for r in result.rejected if r.index not in pre]
        + [Rejection(i, w) for i, w in pre.items()],
        key=lambda r: r.index,
    )
    return ValidationResult(valid=result.valid[keep].reset_index(drop=True), rejected=rejected)


def validate_outcome_records(
    records: Sequence[Any], positions: Sequence[int] | np.ndarray, config: MonitorConfig
) -> ValidationResult:
    """Outcome messages (decoded, each with its batch position): a field an outcome does
    not have is ``unexpected_field``, the rest :func:`validate_outcome_frame`. The one
    judgement of outcomes, for both ingest paths."""
    known = set(OUTCOME_FIELDS)
    pre = [Rejection(int(p), "unexpected_field")
           for r, p in zip(records, positions, strict=True) if not known.issuperset(r)]  # fmt: skip
    ok = [(r, int(p)) for r, p in zip(records, positions, strict=True) if known.issuperset(r)]
    if not ok:
        return ValidationResult(_no_outcomes().iloc[0:0], sorted(pre, key=lambda r: r.index))
    frame = pd.DataFrame([r for r, _ in ok], index=range(len(ok)))
    frame["position"] = np.asarray([p for _, p in ok], dtype=np.int64)
    outs = validate_outcome_frame(frame, config)
    rejected = sorted(pre + outs.rejected, key=lambda r: r.index)
    return ValidationResult(outs.valid, rejected, outs.outcomes)


def _validate_mixed(records: Sequence[Any], config: MonitorConfig) -> ValidationResult:
    """A batch with outcome messages: outcomes and the rest validated apart, positions kept."""
    is_out = np.fromiter(map(_is_outcome, records), bool, len(records))
    rest = [r for r, o in zip(records, is_out, strict=True) if not o]
    where = np.flatnonzero(~is_out)
    main = validate_records(rest, config) if rest else None
    out_pos = np.flatnonzero(is_out)
    outs = validate_outcome_records([records[i] for i in out_pos.tolist()], out_pos, config)
    rejected = list(outs.rejected)
    if main is None:
        return ValidationResult(_empty_valid(config), sorted(rejected, key=lambda r: r.index),
                                outs.outcomes)  # fmt: skip
    valid = main.valid.copy()
    valid["position"] = where[valid["position"].to_numpy(np.int64)]
    rejected += [Rejection(int(where[r.index]), r.reason) for r in main.rejected]
    return ValidationResult(valid, sorted(rejected, key=lambda r: r.index), outs.outcomes)


def _empty_valid(config: MonitorConfig) -> pd.DataFrame:
    """The valid frame of a batch without predictions (the columns validate_frame makes)."""
    return validate_frame(pd.DataFrame(index=range(0)), config).valid


def validate_record(record: Any, config: MonitorConfig) -> tuple[dict[str, Any] | None, str | None]:
    """One record: (typed record, None) or (None, reason). Same rules as the batch path."""
    result = validate_records([record], config)
    if result.rejected:
        return None, result.rejected[0].reason
    if len(result.outcomes):
        row = result.outcomes.iloc[0].to_dict()
        row.pop("position", None)
        row["label"] = int(row["label"])
        return row, None
    row = result.valid.iloc[0].to_dict()
    row.pop("position", None)
    row["label"], row["decision"] = int(row["label"]), int(row["decision"])
    return row, None
