"""Reading a scored cohort file for the offline audit.

The file may use its own column names and codes; ``[input]`` in the config maps
them onto the scored-discharge schema. Unlike the streaming path (where bad
records go to a dead-letter table and the service carries on), an audit of a
file with bad rows stops: a governance report computed on silently dropped
rows would be wrong. The message names the column and the first offending row
positions (0-based, in the file), never the values.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from monitor.config import MonitorConfig
from monitor.stream.schema import validate_frame

#: How many offending row positions an error message lists per fault.
MAX_POSITIONS = 5
AUDIT_EVENT_TIME = "1970-01-01T00:00:00Z"


class AuditInputError(ValueError):
    """An audit input problem, naming the column (and rows) concerned."""


def read_cohort_file(path: str | Path, text_columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """A CSV or Parquet file as a frame; an empty or unreadable file is an AuditInputError.

    ``text_columns`` (ids) are read as text from a CSV: an id column of digits is an id,
    not a number ("007" stays "007", and a numeric record_id is not "wrong type").
    """
    p = Path(path)
    if not p.exists():
        raise AuditInputError(f"input file not found: {p}")
    suffix = p.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(p)
        elif suffix in (".csv", ".gz", ".txt"):
            frame = pd.read_csv(p, low_memory=False, dtype=dict.fromkeys(text_columns, str))
        else:
            raise AuditInputError(f"input must be .csv or .parquet, got {p.name!r}")
    except pd.errors.EmptyDataError:
        raise AuditInputError(f"input file is empty: {p.name}") from None
    if frame.empty:
        raise AuditInputError(f"input file has no rows: {p.name}")
    return frame


def _require(frame: pd.DataFrame, column: str, field: str) -> None:
    if column not in frame.columns:
        raise AuditInputError(
            f"missing column {column!r} (schema field {field!r}); "
            f'map it with [input.columns] {field} = "<file column>"'
        )


def to_scored_frame(raw: pd.DataFrame, config: MonitorConfig) -> pd.DataFrame:
    """Map a file's columns and codes onto the schema; one row per (record, model).

    Adds ``source_row`` (the 0-based row in the file) for error messages.
    """
    cols = config.input.columns
    frame = pd.DataFrame({"source_row": np.arange(len(raw))}, index=raw.index)

    def source(field: str) -> str:
        return cols.get(field, field)

    if config.input.label_from is not None:
        rule = config.input.label_from
        _require(raw, rule.column, "label")
        values = pd.to_numeric(raw[rule.column], errors="coerce")
        bad = values.isna().to_numpy()
        if bad.any():
            raise AuditInputError(_positions_message(rule.column, "not a number", bad))
        frame["label"] = (values > rule.greater_than).astype(np.int64).to_numpy()
    else:
        _require(raw, source("label"), "label")
        frame["label"] = raw[source("label")].to_numpy()

    for attr in config.attributes:
        _require(raw, source(attr.name), attr.name)
        values = raw[source(attr.name)]
        mapping = config.input.codes.get(attr.name)
        codes = values.map(_code_text)
        if mapping:
            codes = codes.map(lambda c, m=mapping: m.get(c, c) if c is not None else None)
        frame[attr.name] = codes.to_numpy(dtype=object)

    for field in ("hospital_id", "decision", "record_id", "event_time", "features"):
        if source(field) in raw.columns:
            col = raw[source(field)]
            if field in ("hospital_id", "record_id"):
                col = col.map(_code_text)  # ids are text, whatever the file's column type
            frame[field] = col.to_numpy(dtype=object) if field != "decision" else col.to_numpy()
    if "record_id" not in frame:
        frame["record_id"] = frame["source_row"].astype(str)
    if "event_time" not in frame:
        frame["event_time"] = AUDIT_EVENT_TIME

    if config.input.score_columns:
        parts = []
        for model_id, column in config.input.score_columns.items():
            _require(raw, column, f"score of model {model_id}")
            part = frame.copy()
            part["model_id"] = model_id
            part["score"] = raw[column].to_numpy()
            parts.append(part)
        return pd.concat(parts, ignore_index=True)
    _require(raw, source("score"), "score")
    frame["score"] = raw[source("score")].to_numpy()
    if source("model_id") in raw.columns:
        frame["model_id"] = raw[source("model_id")].map(_code_text).to_numpy(dtype=object)
    else:
        frame["model_id"] = config.input.model_id
    return frame.reset_index(drop=True)


def _code_text(x: object) -> str | None:
    """File codes as text: 3 and 3.0 both read as '3'; missing stays missing."""
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return None
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    if isinstance(x, np.integer):
        return str(int(x))
    return str(x)


def _positions_message(
    column: str, fault: str, mask: np.ndarray, rows: np.ndarray | None = None
) -> str:
    where = np.flatnonzero(mask)
    file_rows = np.unique(rows[where] if rows is not None else where)
    more = "" if len(file_rows) <= MAX_POSITIONS else f" and {len(file_rows) - MAX_POSITIONS} more"
    listed = ", ".join(str(int(p)) for p in file_rows[:MAX_POSITIONS])
    return (
        f"column {column!r}: {fault} in {len(file_rows)} row(s), "
        f"first at 0-based row(s) {listed}{more}"
    )


@dataclass(frozen=True)
class AuditCohort:
    """Validated records (one row per record and model; ``source_row`` = row in the file)
    and, when configured, the similarity features per file row (for MPPD)."""

    records: pd.DataFrame
    features: np.ndarray | None
    feature_names: tuple[str, ...]


def load_audit_cohort(path: str | Path | pd.DataFrame, config: MonitorConfig) -> AuditCohort:
    """Read, map and validate an audit file (or a frame already in memory, as the file
    would read: :mod:`monitor.audit.frame`); stop with a clear message on bad rows."""
    ids = tuple(config.input.columns.get(f, f) for f in ("record_id", "hospital_id", "model_id"))
    raw = path if isinstance(path, pd.DataFrame) else read_cohort_file(path, ids)
    scored = to_scored_frame(raw, config)
    checked = validate_frame(scored.drop(columns=["source_row"]), config)
    rows = scored["source_row"].to_numpy()
    if checked.rejected:
        reasons: dict[str, list[int]] = {}
        for r in checked.rejected:
            reasons.setdefault(r.reason, []).append(r.index)
        messages = []
        for reason, idx in reasons.items():
            kind, _, field = reason.partition(":")
            column = config.input.columns.get(field, field) if field else "<record>"
            if field == "label" and config.input.label_from is not None:
                column = config.input.label_from.column
            if field == "score" and config.input.score_columns:
                column = "score column(s) " + ", ".join(config.input.score_columns.values())
            mask = np.zeros(len(scored), bool)
            mask[idx] = True
            messages.append(_positions_message(column, kind.replace("_", " "), mask, rows))
        raise AuditInputError("bad input rows; nothing was audited:\n  " + "\n  ".join(messages))
    records = checked.valid
    records.insert(0, "source_row", rows[records["position"].to_numpy()])
    records = records.drop(columns=["position"])
    names = tuple(config.equilense.features)
    features = None
    if names:
        for name in names:
            _require(raw, name, f"similarity feature {name}")
        block = raw[list(names)].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(block).all(axis=1)
        if bad.any():
            col = names[int(np.argmax(~np.isfinite(block[bad]).any(axis=0)))]
            raise AuditInputError(_positions_message(col, "missing or non-numeric feature", bad))
        features = block
    return AuditCohort(records=records, features=features, feature_names=names)
