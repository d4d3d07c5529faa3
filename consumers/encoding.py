"""Records to JSON payloads as producers should write them (docs/method.md section 1).

Used by the demo, the embedded source, the benchmarks and the tests' producers: one
encoder, so that what is replayed is byte for byte what a Kafka producer would send.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def _rfc3339(value: dt.datetime) -> str:
    """RFC 3339 with a zone: naive datetimes are taken as UTC (pandas' usual meaning)."""
    if value.tzinfo is None:
        return value.isoformat() + "Z"
    return value.isoformat()


def _missing(value: Any) -> bool:
    """NaN, NaT and pd.NA-like values: a key with such a value is omitted."""
    if isinstance(value, float | np.floating):
        return math.isnan(value)
    if isinstance(value, np.datetime64 | np.timedelta64):
        return bool(np.isnat(value))
    # pandas NaT / NA without importing pandas: both are singletons unequal to themselves.
    return type(value).__name__ in ("NaTType", "NAType")


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _rfc3339(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.datetime64):
        return str(np.datetime_as_string(value, unit="us")) + "Z"
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, decimal.Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _finite(value: Any) -> Any:
    """Nested non-finite floats -> null, so the output is standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


_PLAIN = frozenset({str, int, bool, type(None)})


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_json_default)


def encode_record(record: Mapping[str, Any]) -> bytes:
    """A record as compact UTF-8 JSON, the wire format of the scored-discharge topic.

    Top-level missing values (None stays null; NaN/NaT are omitted, as an empty CSV cell
    would be), datetimes become RFC 3339 strings (naive = UTC, written with "Z"), numpy
    scalars become plain numbers, +/-inf (top-level or nested) and nested NaN become null:
    never the ``Infinity``/``NaN`` tokens, which standard JSON lacks and the service's
    parser refuses (the record would be dead-lettered as invalid JSON, not named by field).
    """
    clean = {}
    for key, value in record.items():
        if type(value) in _PLAIN:  # the common case, checked cheaply (producer hot path)
            clean[key] = value
            continue
        if _missing(value):
            continue
        if isinstance(value, float) and not math.isfinite(value):  # np.float64 too
            value = None
        elif isinstance(value, Mapping | list | tuple):
            value = _finite(value)
        clean[key] = value
    return _ENCODER.encode(clean).encode()

