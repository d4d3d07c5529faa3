"""The delimiter (and decimal mark) of a CSV file, sniffed from its first lines.

Why: a spreadsheet saved as "CSV" in a European locale is separated by semicolons, with
decimal commas. Read as comma-separated it is one column, and every configured column is
"missing" though it is there. The standard library's :class:`csv.Sniffer` judges the
delimiter from a sample; the decimal comma follows from a semicolon file whose fields
look like ``0,73``.
"""

from __future__ import annotations

import csv
import gzip
import re
from pathlib import Path

#: Characters tried as delimiters, most usual first.
DELIMITERS = ",;\t|"
#: How much of the file the sniffer reads.
SAMPLE_BYTES = 64 * 1024
_DECIMAL_COMMA = re.compile(r"(?:^|;)\s*-?\d+,\d+\s*(?=;|$)", re.M)


def _sample(path: Path) -> str:
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as f:
        text = f.read(SAMPLE_BYTES)
    if len(text) == SAMPLE_BYTES and "\n" in text:  # whole lines only
        text = text[: text.rindex("\n")]
    return text


def csv_dialect(path: Path) -> tuple[str, str]:
    """(delimiter, decimal mark) of a CSV file: "," and "." unless the sample says
    otherwise. A file the sniffer cannot judge is read as comma-separated."""
    text = _sample(path)
    if not text.strip():
        return ",", "."
    header = text.splitlines()[0]
    try:
        sep = csv.Sniffer().sniff(text, delimiters=DELIMITERS).delimiter
    except csv.Error:
        # one column, or too few lines: the header decides when it has another delimiter
        counts = {d: header.count(d) for d in DELIMITERS}
        sep = max(counts, key=lambda d: counts[d]) if any(counts.values()) else ","
    if sep not in header or header.count(",") > header.count(sep):
        sep = ","  # the header is the judge: a separator must separate the column names
    decimal = "," if sep == ";" and _DECIMAL_COMMA.search(text) else "."
    return sep, decimal
