"""Strict JSON for everything the service writes or serves.

NaN becomes null and +/-inf the strings "inf"/"-inf": infinity carries meaning
here (N* never reached, sigma with zero spread), so it stays distinct from "no
value", and the output never contains the non-standard NaN/Infinity tokens.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from enum import Enum
from typing import Any

_PLAIN = frozenset({str, int, bool, type(None)})


def to_jsonable(obj: Any) -> Any:
    """Plain JSON values: NaN -> None, +/-inf -> "inf"/"-inf", numpy scalars -> Python.

    >>> to_jsonable({"a": float("nan"), "b": [float("inf"), -float("inf"), 1]})
    {'a': None, 'b': ['inf', '-inf', 1]}
    """
    # Exact built-in types first (the bulk of what the service writes), without the ABC
    # isinstance checks below; subclasses (a str Enum, numpy scalars) take the general path.
    t = type(obj)
    if t in _PLAIN:
        return obj
    if t is float:
        if obj != obj:
            return None
        if obj in (math.inf, -math.inf):
            return "inf" if obj > 0 else "-inf"
        return obj
    if t is dict:
        return {(k if type(k) is str else str(k)): to_jsonable(v) for k, v in obj.items()}
    if t is list or t is tuple:
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Enum):
        return to_jsonable(obj.value)
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        x = float(obj)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays and scalars (bool_)
        return to_jsonable(obj.tolist())
    return str(obj)


def dumps(obj: Any) -> bytes:
    """Strict JSON (never NaN/Infinity tokens) as UTF-8 bytes."""
    return json.dumps(to_jsonable(obj), allow_nan=False, separators=(",", ":")).encode()




def to_json(obj: Any) -> str:
    """Strict JSON text (for the DuckDB JSON columns)."""
    return json.dumps(to_jsonable(obj), allow_nan=False)
