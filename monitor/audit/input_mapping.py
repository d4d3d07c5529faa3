"""Reading a scored cohort file for the offline audit.

The file may use its own column names and codes; ``[input]`` in the config maps
them onto the scored-discharge schema. Unlike the streaming path (where bad
records go to a dead-letter table and the service carries on), an audit of a
file with bad rows stops by default: a governance report computed on silently
dropped rows would be wrong. ``[input] skip_invalid_rows = true`` (or
``audit --skip-invalid-rows``) audits the valid rows instead, and the result says
how many were left out and why (:attr:`AuditCohort.left_out`): dropped, but not
silently.

Every message says how to fix what it reports (:mod:`monitor.audit.input_errors`
words them): the column, the first offending row positions (0-based, in the
file), the expected codes and the unexpected ones seen in 11 or more rows (a
rarer code is only counted), the expected score range and the likely cause, a
"did you mean" for a misspelt column. Never a record's values.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path

import numpy as np
import pandas as pd

from monitor.audit.input_errors import (
    feature_fault,
    missing_column_message,
    positions_message,
    reason_message,
)
from monitor.audit.sniff import csv_dialect
from monitor.config import MonitorConfig
from monitor.stream.schema import validate_frame

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
            # a semicolon (or tab) separated export is read as such: sniffed, not assumed
            sep, decimal = csv_dialect(p)
            frame = pd.read_csv(
                p, sep=sep, decimal=decimal, low_memory=False,
                dtype=dict.fromkeys(text_columns, str),
            )  # fmt: skip
        else:
            raise AuditInputError(f"input must be .csv or .parquet, got {p.name!r}")
    except pd.errors.EmptyDataError:
        raise AuditInputError(f"input file is empty: {p.name}") from None
    if frame.empty:
        raise AuditInputError(f"input file has no rows: {p.name}")
    return frame


def _require(
    frame: pd.DataFrame, column: str, field: str, config: MonitorConfig | None = None
) -> None:
    if column not in frame.columns:
        raise AuditInputError(missing_column_message(frame.columns, column, field, config))


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
        if bad.any() and not config.input.skip_invalid_rows:
            raise AuditInputError(positions_message(rule.column, "not a number", bad))
        label = (values > rule.greater_than).astype(np.int64).to_numpy()
        # skipping: a label that is not a number is left for validation to reject (missing)
        frame["label"] = np.where(bad, None, label) if bad.any() else label
    else:
        _require(raw, source("label"), "label")
        frame["label"] = raw[source("label")].to_numpy()

    for attr in config.attributes:
        _require(raw, source(attr.name), attr.name, config)
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


@dataclass(frozen=True)
class AuditCohort:
    """Validated records (one row per record and model; ``source_row`` = row in the file)
    and, when configured, the similarity features of each record (for MPPD).

    ``left_out``: with ``skip_invalid_rows``, the records not audited, counted by reason
    (the schema's reason, e.g. ``unknown_code:race``, ``out_of_range:score``); empty
    when every record was valid.
    """

    records: pd.DataFrame
    features: np.ndarray | None
    feature_names: tuple[str, ...]
    left_out: dict[str, int] = dc_field(default_factory=dict)


def load_audit_cohort(path: str | Path | pd.DataFrame, config: MonitorConfig) -> AuditCohort:
    """Read, map and validate an audit file (or a frame already in memory, as the file
    would read: :mod:`monitor.audit.frame`); stop with a message that says how to fix the
    bad rows, or (``[input] skip_invalid_rows``) leave them out and count them."""
    ids = tuple(config.input.columns.get(f, f) for f in ("record_id", "hospital_id", "model_id"))
    raw = path if isinstance(path, pd.DataFrame) else read_cohort_file(path, ids)
    scored = to_scored_frame(raw, config)
    checked = validate_frame(scored.drop(columns=["source_row"]), config)
    rows = scored["source_row"].to_numpy()
    skip = config.input.skip_invalid_rows
    left_out: dict[str, int] = {}
    if checked.rejected:
        reasons: dict[str, list[int]] = {}
        for r in checked.rejected:
            reasons.setdefault(r.reason, []).append(r.index)
        if skip:
            left_out = {reason: len(idx) for reason, idx in sorted(reasons.items())}
        else:
            messages = [
                reason_message(reason, np.asarray(idx), scored, config)
                for reason, idx in reasons.items()
            ]
            raise AuditInputError(
                "bad input rows; nothing was audited:\n  "
                + "\n  ".join(messages)
                + "\n(or audit the valid rows only: audit --skip-invalid-rows, or "
                "[input] skip_invalid_rows = true; what is left out is counted by reason)"
            )
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
        if bad.any() and not skip:
            raise AuditInputError(feature_fault(names, block, bad))
        if bad.any():
            keep = ~bad[records["source_row"].to_numpy()]
            if (~keep).any():
                left_out["missing_or_non_numeric:features"] = int((~keep).sum())
            records = records[keep].reset_index(drop=True)
        # one row per record (a wide file has several records per file row)
        features = block[records["source_row"].to_numpy()]
    if not len(records):
        raise AuditInputError(
            "no valid rows left to audit: every row was left out ("
            + ", ".join(f"{k}: {v}" for k, v in left_out.items())
            + ")"
        )
    return AuditCohort(records=records, features=features, feature_names=names, left_out=left_out)
