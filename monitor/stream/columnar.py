"""The columnar fast path of ingestion: a poll's payloads parsed in bulk, judged column-wise.

Why: the per-message path (``orjson.loads`` of each payload, a pandas frame built from
the dicts, per-value checks) costs tens of microseconds of Python per record, more
than reading the record from Kafka. Here the joined payloads are parsed by Arrow's JSON
reader in one C++ call and each field is checked by one vectorised rule on its column.

Exactness comes first. :func:`parse_payloads` returns None for any batch whose bulk
parse could differ from ``orjson.loads`` of each payload (a token orjson rejects but
Arrow accepts, two objects in one payload, invalid UTF-8, a field of an unplanned JSON
type, an unknown field, ...): such a batch takes the per-message path. A batch that
parses but holds a bad record also takes the per-message path (see
``Pipeline._decode_columnar``), so every dead letter keeps the per-message reason.
The per-message path (``validate_record`` in :mod:`monitor.stream.schema`) is the
oracle of both functions here (tests/stream/test_columnar.py).

Predictions and outcomes: :func:`split_kinds` sets a batch's outcome messages
apart; the rest (predictions and joined records) is judged here, a prediction's label by
its own rule, and the outcomes per message by the per-message path's function
(``validate_outcome_records``: an outcome's fields are few, and "field present but null"
is an ``unexpected_field`` the bulk parse cannot tell from "field absent").

Rules are one per field, in :func:`field_rules`, in the order :func:`validate_frame`
checks them (the first fault of a record is its reason). A new per-field rule goes
into both paths: into ``validate_frame`` (the oracle) and into the rule of its field here;
the oracle test then compares the two on batches with bad records mixed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from monitor.config import MonitorConfig
from monitor.stream.schema import (
    MAX_ID_LENGTH,
    OPTIONAL,
    REQUIRED,
    SCHEMA_VERSION,
    Rejection,
    decision_thresholds,
    event_time_unrepresentable,
    model_id_not_exportable,
    parse_time_strings,
)

#: Fields parsed as strings whatever they look like (Arrow would infer a timestamp for an
#: ISO date string); a JSON number, boolean or object in one of them fails the bulk parse.
_STRING_FIELDS = ("record_id", "model_id", "event_time", "hospital_id")


def _schema(config: MonitorConfig) -> pa.Schema:
    strings = [*_STRING_FIELDS, *(a.name for a in config.attributes)]
    return pa.schema([(f, pa.string()) for f in strings] + [("score", pa.float64())])


def parse_payloads(payloads: Sequence[bytes | None], config: MonitorConfig) -> pa.Table | None:
    """All payloads as one Arrow table (row i = payload i), or None when the bulk parse
    might not give what ``orjson.loads`` gives for each payload (the caller then takes the
    per-message path)."""
    n = len(payloads)
    if not n or None in payloads:
        return None
    sizes = list(map(len, payloads))  # type: ignore[arg-type]  # no None: returned above
    if min(sizes) == 0 or max(sizes) > config.service.intake.max_payload_bytes:
        return None
    buf = b"\n".join(payloads)  # type: ignore[arg-type]  # no None: returned above
    # Every line one payload (no payload holds a newline) and every payload starting with
    # "{": no blank or whitespace-only payload (the reader would skip it), no byte-order
    # mark (the reader accepts one, orjson does not). Two objects in one payload would
    # make more rows than payloads (checked below). NaN and Infinity tokens (the reader
    # accepts them, orjson does not) can only land in a numeric column: see _number.
    if buf.count(b"\n") != n - 1 or not buf.startswith(b"{") or buf.count(b"\n{") != n - 1:
        return None
    try:
        buf.decode("utf-8")  # Arrow's reader passes invalid UTF-8 through; orjson rejects it
        table = pj.read_json(
            pa.py_buffer(buf),
            read_options=pj.ReadOptions(use_threads=False, block_size=len(buf) + 1),
            parse_options=pj.ParseOptions(
                explicit_schema=_schema(config),
                unexpected_field_behavior="infer",
                newlines_in_values=False,
            ),
        )
    except (pa.ArrowException, UnicodeDecodeError):
        return None
    if table.num_rows != n:  # two objects in one payload
        return None
    known = set(REQUIRED) | set(OPTIONAL) | {a.name for a in config.attributes}
    if not known.issuperset(table.column_names):  # unexpected_field: the per-message path
        return None
    if "kind" in table.column_names and not pa.types.is_string(table.column("kind").type):
        return None  # a kind that is not a string: the per-message path says why
    return table


@dataclass(frozen=True)
class ColumnarResult:
    """Valid rows as an Arrow table (``position`` = index in the batch) and the rejections."""

    valid: pa.Table
    rejected: list[Rejection]


class _UnplannedError(Exception):
    """A column this path cannot judge exactly as the per-message path does."""


@dataclass(frozen=True)
class FieldRule:
    """The checks of one field on its column: (fault mask, reason) pairs in the order the
    per-message path checks them, and the typed output column (None: no output)."""

    field: str
    check: Callable[[pa.ChunkedArray, str, MonitorConfig], tuple[list[tuple[Any, str]], Any]]


def _null(col: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _mask(x: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean Arrow result as numpy, nulls as False."""
    return np.asarray(pc.fill_null(x, False).to_numpy(zero_copy_only=False), dtype=bool)


def _id_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    length = pc.utf8_length(col)
    bad = _mask(pc.or_(pc.equal(length, 0), pc.greater(length, MAX_ID_LENGTH)))
    return [(_null(col), f"missing:{name}"), (bad, f"wrong_type:{name}")], col


def _per_distinct(col: pa.ChunkedArray, rule: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """A per-value rule of the per-message path applied to each distinct string once (a
    batch holds a dozen model ids), then spread to the rows; nulls give False."""
    enc = col.combine_chunks().cast(pa.string()).dictionary_encode()
    verdict = np.append(rule(enc.dictionary.to_numpy(zero_copy_only=False)), False)
    idx = enc.indices.fill_null(len(verdict) - 1).to_numpy(zero_copy_only=False)
    return verdict[idx]


def _model_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    faults, value = _id_rule(col, name, config)
    # the exporter's identifier rule (docs/decisions.md, "Hostile input and patient privacy"), by
    # the per-message path's own function
    return [*faults, (_per_distinct(col, model_id_not_exportable), "invalid:model_id")], value


def _time_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    # each distinct string parsed once, by the per-message path's own function
    missing = _null(col)
    if col.null_count == len(col):
        return [(missing, "missing:event_time")], pa.nulls(len(col), pa.timestamp("us", "UTC"))
    enc = col.combine_chunks().cast(pa.string()).dictionary_encode()
    uniq = np.asarray(enc.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    zone, ts = parse_time_strings(uniq)
    idx = enc.indices
    value = pa.array(ts.array).take(idx)
    bad_zone = ~zone[idx.fill_null(0).to_numpy(zero_copy_only=False)]
    nat = _null(value) & ~missing
    # outside what every layer can hold: the per-message path's rule, on the distinct times
    far = ~missing & event_time_unrepresentable(ts)[idx.fill_null(0).to_numpy(zero_copy_only=False)]
    faults = [(missing, "missing:event_time"), (~missing & bad_zone, "invalid:event_time")]
    return [*faults, (nat, "invalid:event_time"), (far, "out_of_range:event_time")], value


def _number(col: pa.ChunkedArray) -> np.ndarray:
    """A numeric column as float64 (nulls as NaN).

    Unplanned: a boolean or other type, and a NaN or infinite value (JSON has no such
    number: it came from a NaN or Infinity token, which orjson rejects as invalid JSON).
    """
    t = col.type
    if not (pa.types.is_null(t) or pa.types.is_int64(t) or pa.types.is_float64(t)):
        raise _UnplannedError(str(t))
    if pa.types.is_float64(t) and pc.all(pc.is_finite(col)).as_py() is False:
        raise _UnplannedError("non-finite number")
    # unsafe: an integer beyond 2**53 rounds to the nearest double, as float(x) does per
    # message (the safe cast raises on it)
    floats = col.cast(pa.float64(), safe=False)
    return np.asarray(floats.to_numpy(zero_copy_only=False), dtype=np.float64)


def _score_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    score = _number(col)
    if np.any((score == 0) & np.signbit(score)):
        # "-0" (an integer: 0.0 per message) and "-0.0" (-0.0) both parse to -0.0 here
        raise _UnplannedError("score")
    with np.errstate(invalid="ignore"):
        out = ~np.isfinite(score) | (score < 0) | (score > 1)
    return [(np.isnan(score), "missing:score"), (out, "out_of_range:score")], np.nan_to_num(score)


def _binary(col):
    v = _number(col)
    ok = (v == 0) | (v == 1)
    return ok, np.where(ok, v, 0).astype(np.int64)


def _label_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    ok, label = _binary(col)
    return [(_null(col), "missing:label"), (~ok, "out_of_range:label")], label


def _decision_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    ok, decision = _binary(col)
    given = ~_null(col)
    return [(given & ~ok, "out_of_range:decision")], (given, decision)


def _code_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    codes = next(a.codes for a in config.attributes if a.name == name)
    known = _mask(pc.is_in(col, value_set=pa.array(list(codes), pa.string())))
    return [(_null(col), f"missing:{name}"), (~known, f"unknown_code:{name}")], col


def _hospital_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    length = pc.utf8_length(col)
    bad = _mask(pc.or_(pc.equal(length, 0), pc.greater(length, MAX_ID_LENGTH)))
    return [(bad, "wrong_type:hospital_id")], col


def _features_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    if col.null_count != len(col):  # feature maps are judged per message
        raise _UnplannedError("features")
    return [], None


def _schema_version_rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
    v = _number(col)
    present = ~np.isnan(v)
    return [(present & (v != SCHEMA_VERSION), "unsupported:schema_version")], None


def field_rules(config: MonitorConfig) -> tuple[FieldRule, ...]:
    """One rule per field, in the order the per-message path checks them."""
    return (
        FieldRule("record_id", _id_rule),
        FieldRule("model_id", _model_rule),
        FieldRule("event_time", _time_rule),
        FieldRule("score", _score_rule),
        FieldRule("label", _label_rule),
        FieldRule("decision", _decision_rule),
        *(FieldRule(a.name, _code_rule) for a in config.attributes),
        FieldRule("hospital_id", _hospital_rule),
        FieldRule("features", _features_rule),
        FieldRule("schema_version", _schema_version_rule),
    )


def split_kinds(table: pa.Table) -> tuple[pa.Table, np.ndarray, np.ndarray] | None:
    """(the rows that are not outcomes, their batch positions, the outcome positions) of a
    parsed batch (predictions now, outcomes later); None when a ``kind`` is neither absent,
    "prediction" nor "outcome" (the per-message path gives ``invalid:kind``)."""
    n = table.num_rows
    if "kind" not in table.column_names:
        return table, np.arange(n), np.zeros(0, np.int64)
    kind = table.column("kind")
    known = pc.is_in(kind, value_set=pa.array(["prediction", "outcome"]))
    if not _mask(pc.or_(known, kind.is_null())).all():
        return None
    outcome = _mask(pc.equal(kind, "outcome"))
    rest = np.flatnonzero(~outcome)
    return table.filter(pa.array(~outcome)), rest, np.flatnonzero(outcome)


def _label_rule_of(prediction: np.ndarray) -> Callable:
    """The label rule of a batch holding predictions: a prediction has no label (-1)."""

    def rule(col: pa.ChunkedArray, name: str, config: MonitorConfig) -> Any:
        ok, label = _binary(col)
        given = ~_null(col)
        faults = [
            (prediction & given, "unexpected_field:label"),
            (~prediction & ~given, "missing:label"),
            (~prediction & ~ok, "out_of_range:label"),
        ]
        return faults, np.where(prediction, -1, label)

    return rule


def validate_table(
    table: pa.Table, config: MonitorConfig, positions: np.ndarray | None = None
) -> ColumnarResult | None:
    """Every row of a parsed batch judged by the field rules; None when a column is of a
    type these rules do not judge exactly (the per-message path then decides).
    ``positions``: each row's index in the batch (default: the row number), for a table of
    the batch's predictions without its outcomes (:func:`split_kinds`)."""
    n = table.num_rows
    rules = field_rules(config)
    if "kind" in table.column_names:  # "prediction" or null here (split_kinds)
        prediction = _mask(pc.equal(table.column("kind"), "prediction"))
        rules = tuple(
            FieldRule(r.field, _label_rule_of(prediction)) if r.field == "label" else r
            for r in rules
        )
    reason = np.full(n, None, dtype=object)
    free = np.ones(n, dtype=bool)
    out: dict[str, Any] = {}
    try:
        for rule in rules:
            if rule.field in table.column_names:
                col = table.column(rule.field)
            else:
                col = pa.chunked_array([pa.nulls(n)])
            faults, value = rule.check(col, rule.field, config)
            for mask, why in faults:
                hit = mask & free
                if hit.any():
                    reason[hit] = why
                    free[hit] = False
            out[rule.field] = value
    except (_UnplannedError, pa.ArrowException):
        # an Arrow error on a column is never a batch failure: the per-message path judges
        return None
    given, decision = out.pop("decision")
    thresholds = decision_thresholds(_object_columns(out, config), config)
    derived = (out["score"] >= thresholds).astype(np.int64)
    decision = np.where(given, decision, derived)
    pos = np.arange(n) if positions is None else np.asarray(positions, dtype=np.int64)
    columns = {
        "position": pa.array(pos),
        "record_id": _as_string(out["record_id"]),
        "model_id": _as_string(out["model_id"]),
        "event_time": out["event_time"],
        "hospital_id": _as_string(out["hospital_id"]),
        "score": pa.array(out["score"]),
        "label": pa.array(out["label"].astype(np.int8)),
        "decision": pa.array(decision.astype(np.int8)),
        **{a.name: _as_string(out[a.name]) for a in config.attributes},
    }
    valid = pa.table(columns).filter(pa.array(free))
    rejected = [Rejection(int(pos[i]), str(reason[i])) for i in np.flatnonzero(~free)]
    return ColumnarResult(valid, rejected)


def _as_string(col: pa.ChunkedArray) -> pa.Array:
    return col.combine_chunks().cast(pa.string())


def _object_columns(out: dict[str, Any], config: MonitorConfig) -> dict[str, Any]:
    """What :func:`decision_thresholds` reads; object arrays only when per-group
    thresholds are configured (they compare values in Python)."""
    if not config.decision.per_group:
        return {"score": out["score"]}
    cols = {"score": out["score"]}
    for name in ("model_id", *(a.name for a in config.attributes)):
        cols[name] = np.asarray(out[name].to_numpy(), dtype=object)
    return cols
