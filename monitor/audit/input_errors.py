"""The words of an audit input error: what is wrong, where, and how to fix it.

Why a module of its own: a data scientist auditing their own file meets these messages
first, and each must say how to fix what it reports (a code map, a column map, a
division by 100, a change of ``[[attributes]]``) without quoting a record's values
(patient data). What a message may name:

* columns of the file, schema fields and configuration keys;
* 0-based row positions (where to look), at most :data:`MAX_POSITIONS` of them;
* the configured group codes, and a file's unexpected codes that appear in 11 or more
  rows (:data:`monitor.config.SMALL_CELL_RECORDS`): such a code is a category of the
  file, not a fact about a patient. A rarer code is only counted ("2 other codes");
* counts and fixed ranges ("[0, 1]"), never a value read from a record.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from monitor.config import SMALL_CELL_RECORDS, MonitorConfig

#: How many offending row positions an error message lists per fault.
MAX_POSITIONS = 5
#: A named code is cut to this many characters (a code is an exported label: short).
MAX_CODE_CHARS = 40
#: Delimiters a header may carry when the file was read with the wrong one.
OTHER_DELIMITERS = (";", "\t", "|")


def positions_message(
    column: str, fault: str, mask: np.ndarray, rows: np.ndarray | None = None
) -> str:
    """``column 'x': <fault> in N row(s), first at 0-based row(s) ...``."""
    where = np.flatnonzero(mask)
    file_rows = np.unique(rows[where] if rows is not None else where)
    return f"column {column!r}: {fault} in {len(file_rows)} row(s), {first_rows(file_rows)}"


def first_rows(file_rows: np.ndarray) -> str:
    """``first at 0-based row(s) 12, 72 and 3 more`` of sorted unique row positions."""
    more = "" if len(file_rows) <= MAX_POSITIONS else f" and {len(file_rows) - MAX_POSITIONS} more"
    listed = ", ".join(str(int(p)) for p in file_rows[:MAX_POSITIONS])
    return f"first at 0-based row(s) {listed}{more}"


def did_you_mean(wanted: str, columns: Iterable[object]) -> str | None:
    """The file column closest to ``wanted`` (case first, then spelling), or None."""
    names = [str(c) for c in columns]
    for name in names:
        if name.lower() == wanted.lower():
            return name
    close = difflib.get_close_matches(wanted, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(wanted.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def missing_column_message(
    columns: Sequence[object], column: str, field: str, config: MonitorConfig | None = None
) -> str:
    """A column the configuration needs is not in the file: the closest file column, the
    ``[input.columns]`` line that maps one, and for an attribute how to drop it."""
    parts = [f"missing column {column!r} (schema field {field!r})"]
    names = [str(c) for c in columns]
    if len(names) == 1 and any(d in names[0] for d in OTHER_DELIMITERS):
        parts.append(
            "the file was read as one column: is it separated by something other than "
            "commas? Save it comma-separated (or as Parquet)"
        )
    guess = did_you_mean(column, names)
    if guess is not None and guess != column:
        parts.append(f'did you mean {guess!r}? Map it with [input.columns] {field} = "{guess}"')
    else:
        parts.append(f'map a file column to it with [input.columns] {field} = "<file column>"')
    attrs = [a.name for a in config.attributes] if config is not None else []
    if field in attrs:
        keep = [a for a in attrs if a != field]
        parts.append(
            f"or, if the file has no {field!r} attribute, audit without it: configure the "
            f"attributes the file has as [[attributes]] tables (name and groups; they replace "
            f"the default list {attrs}), e.g. only {keep}" + _intersections_naming(config, field)
        )
    return "; ".join(parts)


def _intersections_naming(config: MonitorConfig | None, attribute: str) -> str:
    if config is None:
        return ""
    inters = [i.name for i in config.intersections if attribute in i.attributes]
    return f", and drop the [[intersections]] {inters}" if inters else ""


def _code_counts(codes: np.ndarray, rows: np.ndarray) -> pd.Series:
    """Rows per unexpected code (a file row counted once, whatever its models)."""
    pairs = pd.DataFrame({"row": rows, "code": pd.Series(codes, dtype=object).astype(str)})
    return pairs.drop_duplicates().groupby("code")["row"].size().sort_values(ascending=False)


def _quoted(code: str) -> str:
    return repr(code if len(code) <= MAX_CODE_CHARS else code[:MAX_CODE_CHARS] + "...")


def unknown_code_message(
    attribute: str, column: str, idx: np.ndarray, scored: pd.DataFrame, config: MonitorConfig
) -> str:
    """Codes not configured for ``attribute``: the expected ones, the unexpected ones seen
    in 11+ rows (with their row counts), the rarer ones counted, and the two fixes."""
    rows = scored["source_row"].to_numpy()[idx]
    counts = _code_counts(scored[attribute].to_numpy(dtype=object)[idx], rows)
    named = counts[counts >= SMALL_CELL_RECORDS]
    rare = int((counts < SMALL_CELL_RECORDS).sum())
    seen = [f"{_quoted(str(c))} ({int(n)} rows)" for c, n in named.items()]
    if rare:
        seen.append(f"{rare} other code{'s' if rare > 1 else ''} (each in fewer than "
                    f"{SMALL_CELL_RECORDS} rows, not named)")  # fmt: skip
    mapping = config.input.codes.get(attribute, {})
    expected = list(dict.fromkeys([*config.attribute(attribute).codes, *mapping]))
    example = _quoted(str(named.index[0])) if len(named) else '"<file code>"'
    file_rows = np.unique(rows)
    n_rows, where = len(file_rows), first_rows(file_rows)
    return (
        f"column {column!r} (attribute {attribute!r}): unknown code in {n_rows} row(s): "
        f"{', '.join(seen)}; expected one of {', '.join(map(_quoted, expected))}. "
        f"Map a file code to a configured one with [input.codes.{attribute}] "
        f'{example} = "<configured code>", or add it to the groups of {attribute!r} in '
        f"[[attributes]] ({where})"
    )


def score_range_message(column: str, idx: np.ndarray, scored: pd.DataFrame) -> str:
    """Scores outside [0, 1]: how many, and the likely cause (percentages, log-odds,
    empty cells), judged from the whole column without quoting a value."""
    score = pd.to_numeric(pd.Series(scored["score"].to_numpy()), errors="coerce").to_numpy(
        dtype=np.float64
    )
    bad = score[idx]
    finite = score[np.isfinite(score)]
    causes = []
    n_missing = int((~np.isfinite(bad)).sum())
    # a cause is named only when it fits most of the column, not a stray value
    over, under = (
        (finite > 1).mean() if len(finite) else 0,
        (finite < 0).mean() if len(finite) else 0,
    )
    if over >= 0.5 and finite.min() >= 0 and finite.max() <= 100:
        causes.append("most scores are within (1, 100]: percentages? divide the column by 100")
    elif under >= 0.1:
        causes.append(
            "many scores are below 0: log-odds? apply the logistic function 1 / (1 + exp(-x))"
        )
    if n_missing:
        causes.append(
            f"{n_missing} of them have no number (an empty cell, not a number, or infinite)"
        )
    mask = np.zeros(len(scored), bool)
    mask[idx] = True
    head = positions_message(
        column, "out of range: outside the expected range [0, 1] (a score is a probability)", mask,
        scored["source_row"].to_numpy(),
    )  # fmt: skip
    return head + ("; " + "; ".join(causes) if causes else "")


#: How to fix a fault of a field, by schema reason (``kind:field``), where it helps.
HINTS = {
    "out_of_range:label": "a label is 0 or 1 (or derive it: [input.label_from] column and "
    "greater_than)",
    "missing:label": "every row needs a label 0 or 1",
    "missing:score": "every row needs a score in [0, 1]",
    "out_of_range:decision": "a decision is 0 or 1 (or leave the column out: it is derived "
    "from the score and [decision] threshold)",
    "wrong_type:score": "a score is a number in [0, 1]",
}


def reason_message(
    reason: str, idx: np.ndarray, scored: pd.DataFrame, config: MonitorConfig
) -> str:
    """One line of the refusal: the rows rejected for ``reason`` (schema reason
    ``kind:field``) and how to fix them."""
    kind, _, fld = reason.partition(":")
    column = config.input.columns.get(fld, fld) if fld else "<record>"
    if fld == "label" and config.input.label_from is not None:
        column = config.input.label_from.column
    if fld == "score" and config.input.score_columns:
        column = "score column(s) " + ", ".join(config.input.score_columns.values())
    attrs = {a.name for a in config.attributes}
    if kind == "unknown_code" and fld in attrs:
        return unknown_code_message(fld, column, idx, scored, config)
    if reason == "out_of_range:score":
        return score_range_message(column, idx, scored)
    mask = np.zeros(len(scored), bool)
    mask[idx] = True
    fault = kind.replace("_", " ")
    if kind == "missing":
        fault = "missing (an empty cell or not a number)"
    text = positions_message(column, fault, mask, scored["source_row"].to_numpy())
    hint = HINTS.get(reason)
    if kind == "missing" and fld in attrs:
        hint = f"every row needs a group code of {fld!r}"
    return f"{text}; {hint}" if hint else text


def feature_fault(names: Sequence[str], block: np.ndarray, bad: np.ndarray) -> str:
    """Rows whose similarity features are missing or not numbers."""
    col = names[int(np.argmax(~np.isfinite(block[bad]).any(axis=0)))]
    return positions_message(col, "missing or non-numeric feature", bad) + (
        "; fill or drop those rows, or remove the feature from [equilense] features"
    )


def left_out_lines(left_out: dict[str, int]) -> list[str]:
    """``records left out (--skip-invalid-rows): 1,145 unknown_code:race ...`` lines."""
    if not left_out:
        return []
    total = sum(left_out.values())
    lines = [f"records left out of the audit (invalid, skipped): {total:,}"]
    lines += [f"  {n:>9,}  {reason}" for reason, n in sorted(left_out.items())]
    return lines
