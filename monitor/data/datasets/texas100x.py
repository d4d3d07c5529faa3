"""Texas-100X loader: the public THCIC 2006 extract mapped onto the monitor's record schema.

Texas-100X (B. Jayaraman, https://github.com/bargavj/Texas-100X) is 925,128 inpatient stays
from 441 Texas hospitals, cut from the Texas Inpatient Public Use Data File (PUDF) 2006 of the
Texas Health Care Information Collection (THCIC).  The VFR-Audit paper audited it, and the
monitor's default attributes (``monitor.config.DEFAULT_ATTRIBUTES``) use its codes.  Its data
use terms forbid redistribution, so vfr-monitor never ships or downloads it: a user who holds
a copy passes its path to :func:`load_texas100x`.

Why a dedicated loader rather than the generic ``[input]`` config mapping: three things about
this file are easy to get silently wrong, and each changes a verdict.

* **Age.** ``PAT_AGE`` is a THCIC band code, not an age, and the PUDF also uses coarse
  confidentiality bands.  Code 23 (18-44) straddles the Young Adult / Middle-Aged boundary at
  40, so it cannot be bucketed without guessing; such rows are dropped and counted, never
  assigned.  The full table is :data:`PAT_AGE_CODES`.
* **Dates.** The file has none.  ``event_time`` is a *replay clock* (rows spread evenly over
  2006 in file order) and the dataset says so (``real_dates=False`` plus a note): windows and
  drift over it describe file order, not calendar time.  The Texas-100X build script joins the
  quarterly PUDF files in directory-listing order and de-duplicates, so file order is not known
  to be chronological.
* **Leakage.** ``TOTAL_CHARGES`` and ``PAT_STATUS`` (discharge status) are only known at the end
  of the stay and leak length of stay; the VFR-Audit paper's admission-lean ablation drops them.
  They are loaded (as ``total_charges_log`` and ``pat_status``) because the paper's main models
  used them, and flagged in the notes.

Coding (Texas-100X's, which re-indexes the PUDF codes):

=================  ==========================================================================
file column        schema field and codes
=================  ==========================================================================
THCIC_ID           ``hospital_id`` (string, kept exactly as written; ``has_sites=True``)
RACE               ``race``: 0 Native American, 1 Asian/Pacific Islander, 2 Black, 3 White,
                   4 Other
SEX_CODE           ``sex``: 0 Male, 1 Female; anything else (U, blank) is unknown
ETHNICITY          ``ethnicity``: 0 Hispanic, 1 Not Hispanic
PAT_AGE            ``age_group``: 0 Pediatric <18, 1 Young Adult 18-39, 2 Middle-Aged 40-64,
                   3 Elderly 65+ (via :data:`PAT_AGE_CODES`)
LENGTH_OF_STAY     ``label`` = 1 if LOS > 3 days else 0
=================  ==========================================================================

Codes may be integers, integral floats or zero-padded strings (``5``, ``5.0``, ``"05"``).
Rows with an unknown code, a blank hospital id or a missing/negative LOS are dropped; the
notes give per-reason counts (each dropped row counted once, under its first fault), never
values.  A raw PUDF file (sex M/F, race 1-5, ethnicity 1-2) is *not* in this coding; pass it
through Jayaraman's script first.

Features are the numeric admission columns of :data:`FEATURE_COLUMNS` that the file has;
non-numeric values become NaN (counted).  In Texas-100X the categorical ones (admission type
and source, discharge status, admitting diagnosis, principal procedure) are 0..k-1 indices of
the sorted original codes: nominal, so a tree model uses them sensibly and a linear model does
not.  ``ADMITTING_DIAGNOSIS`` and ``PRINC_SURG_PROC_CODE`` are used only when every value is
numeric (a raw file's ICD-9 codes such as ``V3000`` are codes, not numbers).  Texas-100X keeps
only stays whose principal procedure is among the 100 most frequent, so the cohort is not all
2006 Texas discharges.

The CSV is read in chunks of :data:`CHUNK_ROWS` rows with only the needed columns (the
published CSV's unnamed index column is skipped), and a Parquet file batch by batch, so the
full 925k-row file loads in a few hundred MB.
"""

from __future__ import annotations

import copy
import numbers
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from monitor.config import DEFAULT_ATTRIBUTES
from monitor.config.errors import MissingInputError, UserError
from monitor.data.datasets import Dataset

__all__ = [
    "CREDIT",
    "FEATURE_COLUMNS",
    "PAT_AGE_CODES",
    "REQUIRED_COLUMNS",
    "load_texas100x",
]

NAME = "texas100x"


class TexasInputError(UserError, ValueError):
    """The user's Texas-100X file or column map cannot be read as Texas-100X; the message
    names the file, the columns or the codes, never a row's values (so the CLI shows it)."""


CREDIT = (
    "Texas Inpatient Public Use Data File (PUDF) 2006, Texas Health Care Information "
    "Collection (THCIC), Texas Department of State Health Services; Texas-100X extract by "
    "B. Jayaraman (https://github.com/bargavj/Texas-100X). Used under the THCIC data use "
    "terms; not redistributed with vfr-monitor (supply your own copy)."
)

#: Rows per CSV chunk / Parquet batch: bounds the memory of the raw text being parsed.
CHUNK_ROWS = 200_000

#: Schema field (the key of the ``columns`` override) -> Texas-100X column; all required.
REQUIRED_COLUMNS: dict[str, str] = {
    "hospital_id": "THCIC_ID",
    "race": "RACE",
    "sex": "SEX_CODE",
    "ethnicity": "ETHNICITY",
    "age_group": "PAT_AGE",
    "length_of_stay": "LENGTH_OF_STAY",
}

#: Feature name (the key of the ``columns`` override) -> Texas-100X column; used when present.
#: ``pat_status`` and ``total_charges`` are end-of-encounter values that leak LOS.
FEATURE_COLUMNS: dict[str, str] = {
    "type_of_admission": "TYPE_OF_ADMISSION",
    "source_of_admission": "SOURCE_OF_ADMISSION",
    "pat_status": "PAT_STATUS",
    "total_charges": "TOTAL_CHARGES",
    "admitting_diagnosis": "ADMITTING_DIAGNOSIS",
    "princ_surg_proc_code": "PRINC_SURG_PROC_CODE",
}

#: Features that are diagnosis/procedure codes: kept only if every non-blank value is numeric.
CODE_FEATURES: frozenset[str] = frozenset({"admitting_diagnosis", "princ_surg_proc_code"})

#: Features only known at discharge (output names); they leak the LOS label.
END_OF_ENCOUNTER_FEATURES: tuple[str, ...] = ("pat_status", "total_charges_log")

#: Output column of a feature when it differs from its name (charges are log1p-transformed).
_FEATURE_OUTPUT = {"total_charges": "total_charges_log"}

RACE_CODES: dict[int | str, str | None] = {0: "0", 1: "1", 2: "2", 3: "3", 4: "4"}
SEX_CODES: dict[int | str, str | None] = {0: "0", 1: "1"}
ETHNICITY_CODES: dict[int | str, str | None] = {0: "0", 1: "1"}

#: THCIC PUDF 2006 ``PAT_AGE`` code -> ``age_group`` bucket; None = cannot be bucketed exactly.
PAT_AGE_CODES: dict[int | str, str | None] = {
    0: "0",  # under 1 year (first infant band)
    1: "0",  # under 1 year (second infant band)
    2: "0",  # 1-4
    3: "0",  # 5-9
    4: "0",  # 10-14
    5: "0",  # 15-17
    6: "1",  # 18-19
    7: "1",  # 20-24
    8: "1",  # 25-29
    9: "1",  # 30-34
    10: "1",  # 35-39
    11: "2",  # 40-44
    12: "2",  # 45-49
    13: "2",  # 50-54
    14: "2",  # 55-59
    15: "2",  # 60-64
    16: "3",  # 65-69
    17: "3",  # 70-74
    18: "3",  # 75-79
    19: "3",  # 80-84
    20: "3",  # 85-89
    21: "3",  # 90+
    # Coarse bands THCIC uses for confidentiality-restricted records:
    22: "0",  # 0-17
    23: None,  # 18-44: spans Young Adult (18-39) and Middle-Aged (40-64); dropped, counted
    24: "2",  # 45-64
    25: "3",  # 65-74
    26: "3",  # 75+
}

#: The replay clock covers [2006-01-01, 2007-01-01) UTC.
CLOCK_START = pd.Timestamp("2006-01-01", tz="UTC")
CLOCK_END = pd.Timestamp("2007-01-01", tz="UTC")

#: Drop reasons in the order they are checked (a row is counted under its first fault).
_REASONS: dict[str, str] = {
    "missing_hospital_id": "THCIC_ID blank",
    "bad_length_of_stay": "LENGTH_OF_STAY missing, non-numeric or negative",
    "unknown_race": "RACE not one of 0-4",
    "unknown_sex": "SEX_CODE not 0 or 1 (e.g. U or blank)",
    "unknown_ethnicity": "ETHNICITY not 0 or 1",
    "unmappable_age_code": "PAT_AGE code 23 (ages 18-44) spans the 18-39 and 40-64 buckets",
    "unknown_age_code": "PAT_AGE not a known code",
}
_REASON_OVERRIDDEN_AGE = "PAT_AGE code mapped to None by age_codes"

_ATTRIBUTE_TABLES: dict[str, tuple[dict[int | str, str | None], str]] = {
    "race": (RACE_CODES, "unknown_race"),
    "sex": (SEX_CODES, "unknown_sex"),
    "ethnicity": (ETHNICITY_CODES, "unknown_ethnicity"),
}

_INT_TEXT = re.compile(r"[+-]?\d+")


@dataclass
class _Tally:
    """What the chunks saw, summed over the file: only counts, never values."""

    total: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_REASONS, 0))
    non_numeric: dict[str, int] = field(default_factory=dict)
    negative_charges: int = 0


def load_texas100x(
    path: str | Path,
    *,
    columns: Mapping[str, str] | None = None,
    age_codes: Mapping[int | str, str | None] | None = None,
) -> Dataset:
    """Load a Texas-100X CSV (or Parquet) file as a :class:`Dataset` in the monitor's schema.

    Args:
        path: the user's own copy of ``texas_100x.csv`` (``.parquet``/``.pq`` also accepted).
        columns: schema/feature name -> file column, for files with other column names
            (keys: :data:`REQUIRED_COLUMNS` and :data:`FEATURE_COLUMNS`).  File columns are
            matched case-insensitively, with or without an override.
        age_codes: ``PAT_AGE`` code -> age bucket ``"0"``..``"3"`` (or None to drop the code),
            replacing :data:`PAT_AGE_CODES` for a file with another age coding.

    Returns:
        A Dataset named ``"texas100x"`` with ``has_sites=True`` and ``real_dates=False``.

    Raises:
        ValueError: a required column is missing (the message names it), an override is
            malformed, or no row survives the checks.
    """
    path = Path(path)
    header, parquet = _header(path)
    required, features, absent = _resolve_columns(header, columns, path.name)
    age_table, age_overridden = _age_table(age_codes)

    tally = _Tally()
    parts: list[pd.DataFrame] = []
    usecols = list(dict.fromkeys([*required.values(), *features.values()]))
    for chunk in _read_chunks(path, usecols, [required["hospital_id"]], parquet):
        parts.append(_convert(chunk, tally.total, required, features, age_table, tally))
        tally.total += len(chunk)

    if tally.total == 0:
        raise TexasInputError(f"{NAME}: {path.name} has no data rows")
    frame = pd.concat(parts, ignore_index=True)
    if frame.empty:
        counts = ", ".join(f"{k}={v}" for k, v in tally.dropped.items() if v)
        raise TexasInputError(
            f"{NAME}: no usable rows in {path.name} ({tally.total} read; {counts})"
        )

    code_like = [f for f in features if f in CODE_FEATURES and tally.non_numeric.get(f, 0) > 0]
    used = [_FEATURE_OUTPUT.get(f, f) for f in features if f not in code_like]
    frame = _finish(frame, tally.total, used)
    notes = _notes(tally, len(frame), features, used, absent, code_like, age_overridden)
    return Dataset(
        name=NAME,
        frame=frame,
        features=tuple(used),
        attributes=copy.deepcopy(DEFAULT_ATTRIBUTES),
        has_sites=True,
        real_dates=False,
        credit=CREDIT,
        notes=notes,
    )


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


def _header(path: Path) -> tuple[list[str], bool]:
    """Column names of the file (without reading its rows) and whether it is Parquet."""
    if not path.exists():
        raise MissingInputError(NAME, f"file not found: {path}")
    if _is_parquet(path):
        import pyarrow.parquet as pq

        return list(pq.ParquetFile(path).schema_arrow.names), True
    try:
        return [str(c) for c in pd.read_csv(path, nrows=0).columns], False
    except pd.errors.EmptyDataError:
        raise TexasInputError(f"{NAME}: {path.name} is empty (no header row)") from None


def _find(header: list[str], wanted: str, what: str) -> str | None:
    """The file column named ``wanted``: exact match first, then case-insensitive."""
    if wanted in header:
        return wanted
    hits = [c for c in header if c.casefold() == wanted.casefold()]
    if len(hits) > 1:
        raise TexasInputError(f"{NAME}: column for {what} is ambiguous: {', '.join(hits)}")
    return hits[0] if hits else None


def _resolve_columns(
    header: list[str], columns: Mapping[str, str] | None, file_name: str
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(required field -> file column, present feature -> file column, absent features)."""
    overrides = dict(columns or {})
    unknown = sorted(set(overrides) - set(REQUIRED_COLUMNS) - set(FEATURE_COLUMNS))
    if unknown:
        allowed = ", ".join([*REQUIRED_COLUMNS, *FEATURE_COLUMNS])
        raise TexasInputError(f"{NAME}: unknown key(s) in columns: {unknown}; allowed: {allowed}")

    required: dict[str, str] = {}
    missing: list[str] = []
    for name, default in REQUIRED_COLUMNS.items():
        wanted = overrides.get(name, default)
        found = _find(header, wanted, name)
        if found is None:
            missing.append(f"{wanted} ({name})")
        else:
            required[name] = found
    if missing:
        raise TexasInputError(
            f"{NAME}: required column(s) missing from {file_name}: {', '.join(missing)}"
        )

    features: dict[str, str] = {}
    absent: list[str] = []
    for name, default in FEATURE_COLUMNS.items():
        wanted = overrides.get(name, default)
        found = _find(header, wanted, name)
        if found is not None:
            features[name] = found
        elif name in overrides:  # asked for explicitly: a typo must not vanish silently
            raise TexasInputError(f"{NAME}: column {wanted} ({name}) not found in {file_name}")
        else:
            absent.append(default)
    return required, features, absent


def _norm_code(key: object) -> int | str:
    """A code as a lookup key: integers (however written) as int, other text stripped."""
    if isinstance(key, bool):
        raise TexasInputError(f"{NAME}: age_codes: {key!r} is not a code")
    if isinstance(key, numbers.Integral):
        return int(key)
    if isinstance(key, float) and key.is_integer():
        return int(key)
    if isinstance(key, str) and key.strip():
        text = key.strip()
        return int(text) if _INT_TEXT.fullmatch(text) else text
    raise TexasInputError(f"{NAME}: age_codes: {key!r} is not a code")


def _age_table(
    age_codes: Mapping[int | str, str | None] | None,
) -> tuple[dict[int | str, str | None], bool]:
    """The PAT_AGE table to use, validated: an override replaces the default wholly."""
    if age_codes is None:
        return PAT_AGE_CODES, False
    buckets = {a["name"]: a for a in DEFAULT_ATTRIBUTES}["age_group"]["groups"]
    table: dict[int | str, str | None] = {}
    for key, bucket in age_codes.items():
        if bucket is not None and bucket not in buckets:
            raise TexasInputError(
                f"{NAME}: age_codes: code {key!r} maps to {bucket!r}; "
                f"allowed: {', '.join(buckets)} or None"
            )
        table[_norm_code(key)] = bucket
    if not table:
        raise TexasInputError(f"{NAME}: age_codes is empty")
    return table, True


def _read_chunks(
    path: Path, usecols: list[str], text_cols: list[str], parquet: bool
) -> Iterator[pd.DataFrame]:
    """The needed columns, CHUNK_ROWS rows at a time.

    ``text_cols`` (the hospital id) are read as text so an id like ``007`` keeps its zeros;
    the rest use the parser's own number detection, which is much faster than parsing text
    later, and a chunk whose column turns out not to be numeric arrives as text.
    """
    if parquet:
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=CHUNK_ROWS, columns=usecols):
            yield batch.to_pandas()
        return
    with pd.read_csv(
        path,
        usecols=usecols,
        dtype=dict.fromkeys(text_cols, str),
        chunksize=CHUNK_ROWS,
        low_memory=False,
    ) as reader:
        yield from reader


def _text(s: pd.Series) -> pd.Series:
    """Stripped text of a column, blanks as missing."""
    t = s.astype("str").str.strip()
    return t.where(t != "")


def _numbers(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(float values, NaN where missing or not a finite number; non-blank mask)."""
    if pd.api.types.is_bool_dtype(s):
        return np.full(len(s), np.nan), s.notna().to_numpy()
    if pd.api.types.is_numeric_dtype(s):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        present = s.notna().to_numpy()
    else:
        t = _text(s)
        v = pd.to_numeric(t, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        present = t.notna().to_numpy()
    v = np.where(np.isfinite(v), v, np.nan)
    return v, present


def _map_codes(
    s: pd.Series, table: Mapping[int | str, str | None]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mapped code or None, in the table but unmappable, not in the table) per row."""
    v, _ = _numbers(s)
    v = np.where(v == np.floor(v), v, np.nan)  # 5.5 is not a code
    n = len(s)
    out = np.full(n, None, dtype=object)
    listed = np.zeros(n, dtype=bool)
    unmappable = np.zeros(n, dtype=bool)
    text_keys = [k for k in table if isinstance(k, str)]
    text = _text(s).to_numpy(dtype=object, na_value=None) if text_keys else None
    for key, bucket in table.items():
        hit = np.isnan(v) & (text == key) if isinstance(key, str) else v == key
        listed |= hit
        if bucket is None:
            unmappable |= hit
        else:
            out[hit] = bucket
    return out, unmappable, ~listed


def _hospital_ids(s: pd.Series) -> np.ndarray:
    """THCIC ids as strings (text as written; integral numbers without a trailing .0)."""
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        ok = np.isfinite(v)
        out = np.full(len(s), None, dtype=object)
        uniq, inverse = np.unique(v[ok], return_inverse=True)
        labels = np.array(
            [str(int(x)) if float(x).is_integer() else repr(float(x)) for x in uniq], dtype=object
        )
        out[ok] = labels[inverse]
        return out
    return _text(s).to_numpy(dtype=object, na_value=None)


def _convert(
    chunk: pd.DataFrame,
    offset: int,
    required: Mapping[str, str],
    features: Mapping[str, str],
    age_table: Mapping[int | str, str | None],
    tally: _Tally,
) -> pd.DataFrame:
    """One chunk -> its kept rows in schema form; drop and coercion counts go to ``tally``."""
    n = len(chunk)
    reason = np.full(n, None, dtype=object)

    def fail(mask: np.ndarray, why: str) -> None:
        hit = mask & (reason == None)  # noqa: E711 (elementwise)
        reason[hit] = why

    out: dict[str, np.ndarray] = {"position": np.arange(offset, offset + n, dtype=np.int64)}

    hospital = _hospital_ids(chunk[required["hospital_id"]])
    fail(hospital == None, "missing_hospital_id")  # noqa: E711
    out["hospital_id"] = hospital

    los, _ = _numbers(chunk[required["length_of_stay"]])
    fail(~(los >= 0), "bad_length_of_stay")
    out["label"] = (np.nan_to_num(los) > 3).astype(np.int64)

    for attr, (table, why) in _ATTRIBUTE_TABLES.items():
        codes, _, unknown = _map_codes(chunk[required[attr]], table)
        fail(unknown, why)
        out[attr] = codes

    codes, unmappable, unknown = _map_codes(chunk[required["age_group"]], age_table)
    fail(unmappable, "unmappable_age_code")
    fail(unknown, "unknown_age_code")
    out["age_group"] = codes

    for name, col in features.items():
        v, present = _numbers(chunk[col])
        bad = int(np.count_nonzero(present & np.isnan(v)))
        tally.non_numeric[name] = tally.non_numeric.get(name, 0) + bad
        if name == "total_charges":
            negative = v < 0
            tally.negative_charges += int(np.count_nonzero(negative))
            v = np.log1p(np.where(negative, np.nan, v))
        out[_FEATURE_OUTPUT.get(name, name)] = v

    for why in _REASONS:
        tally.dropped[why] += int(np.count_nonzero(reason == why))
    keep = reason == None  # noqa: E711
    return pd.DataFrame({k: v[keep] for k, v in out.items()})


def _finish(frame: pd.DataFrame, total: int, features: list[str]) -> pd.DataFrame:
    """Add the replay clock and record ids (both from file position) and order the columns."""
    position = frame["position"].to_numpy(dtype=np.int64)
    step = (CLOCK_END - CLOCK_START).value // total  # ns per file row: all rows land in 2006
    event_time = pd.DatetimeIndex(CLOCK_START.value + position * step, tz="UTC")
    record_id = np.char.add("tx-", np.char.zfill(position.astype(str), 7)).astype(object)
    data = {
        "record_id": record_id,
        "hospital_id": frame["hospital_id"].to_numpy(dtype=object),
        "event_time": event_time,
        **{a: frame[a].to_numpy(dtype=object) for a in ("race", "sex", "ethnicity", "age_group")},
        **{f: frame[f].to_numpy(dtype=np.float64) for f in features},
        "label": frame["label"].to_numpy(dtype=np.int64),
    }
    return pd.DataFrame(data)


def _notes(
    tally: _Tally,
    kept: int,
    features: Mapping[str, str],
    used: list[str],
    absent: list[str],
    code_like: list[str],
    age_overridden: bool,
) -> list[str]:
    """Aggregate caveats for the reader of the results (counts and column names only)."""
    dropped = tally.total - kept
    notes = [
        "replay clock: the file has no dates; its "
        f"{tally.total:,} rows are spread evenly over 2006-01-01..2006-12-31 UTC in file order "
        "(not known to be chronological), so event_time orders records but dates nothing",
        f"read {tally.total:,} rows, kept {kept:,}, dropped {dropped:,} "
        "(each dropped row counted once, under its first fault)",
    ]
    for why, count in tally.dropped.items():
        if count:
            text = _REASONS[why]
            if why == "unmappable_age_code" and age_overridden:
                text = _REASON_OVERRIDDEN_AGE
            notes.append(f"dropped {count:,} rows: {why} ({text})")
    for name in features:
        if name in code_like:
            notes.append(
                f"{features[name]} not used as a feature: it holds non-numeric codes "
                "(Texas-100X has numeric indices here)"
            )
        elif tally.non_numeric.get(name):
            notes.append(
                f"{features[name]}: {tally.non_numeric[name]:,} non-numeric values set to NaN"
            )
    if tally.negative_charges and "total_charges_log" in used:
        notes.append(f"TOTAL_CHARGES: {tally.negative_charges:,} negative values set to NaN")
    if absent:
        notes.append(f"feature columns not in the file: {', '.join(absent)}")
    leaky = [f for f in END_OF_ENCOUNTER_FEATURES if f in used]
    if leaky:
        notes.append(
            f"{' and '.join(leaky)} are end-of-encounter values that leak length of stay; "
            "drop them for an admission-time model (the VFR-Audit admission-lean ablation)"
        )
    notes.append(
        "Texas-100X keeps only stays whose principal procedure is among the 100 most "
        "frequent, so the cohort is not all 2006 Texas discharges"
    )
    return notes
