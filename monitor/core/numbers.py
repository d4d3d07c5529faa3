"""One numeric coercion for values that cross a boundary (JSON, the API, gauges, CSV).

Results carry NaN for "undefined" and +/-inf with a meaning (N* never reached, sigma
with zero spread); JSON carries them as null and "inf"/"-inf" (:mod:`monitor.core.jsonable`).
These two functions are the only place that maps between the two, so a value read
back from the store means what it meant when it was written.
"""

from __future__ import annotations

import math
from typing import Any

_WORDS = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def as_float(x: Any) -> float:
    """A float for any stored or computed number; None (no value) becomes NaN.

    >>> as_float(None), as_float("inf"), as_float(2)
    (nan, inf, 2.0)
    """
    if x is None:
        return math.nan
    if isinstance(x, str):
        return _WORDS[x.lower()] if x.lower() in _WORDS else float(x)
    return float(x)


def float_or_none(x: Any) -> float | None:
    """A float, or None where there is no number: None, NaN, a bool, or a string that is
    not one (a count withheld as "<11" carries no number); infinities are kept.

    The one decoder of numbers read back from JSON, the store and the audit files (the
    report, the drivers' sentences and the exporter all call it).

    >>> float_or_none(float("nan")), float_or_none("inf"), float_or_none(0.5)
    (None, inf, 0.5)
    >>> float_or_none("<11"), float_or_none(True), float_or_none("Infinity")
    (None, None, inf)
    """
    if x is None or isinstance(x, bool):
        return None
    try:
        f = as_float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def finite_or_none(x: Any) -> float | None:
    """A finite float, or None (no value, NaN, or an infinity where none means anything).

    >>> finite_or_none(float("inf")), finite_or_none(1)
    (None, 1.0)
    """
    f = float_or_none(x)
    return f if f is not None and math.isfinite(f) else None
