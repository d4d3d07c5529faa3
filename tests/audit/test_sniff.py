"""CSV dialects of real exports: comma, semicolon with decimal commas, tab, gzip."""

from __future__ import annotations

import gzip

import pandas as pd
import pytest

from monitor.audit.sniff import csv_dialect

FRAME = pd.DataFrame(
    {"record_id": ["a", "b", "c"], "score": [0.25, 0.5, 0.75], "race": ["x, y", "z", "w"]}
)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, (",", ".")),
        ({"sep": ";", "decimal": ","}, (";", ",")),
        ({"sep": ";"}, (";", ".")),
        ({"sep": "\t"}, ("\t", ".")),
        ({"sep": "|"}, ("|", ".")),
    ],
)
def test_delimiter_and_decimal_are_sniffed(tmp_path, kwargs, expected):
    path = tmp_path / "f.csv"
    FRAME.to_csv(path, index=False, **kwargs)
    assert csv_dialect(path) == expected
    sep, decimal = csv_dialect(path)
    back = pd.read_csv(path, sep=sep, decimal=decimal)
    pd.testing.assert_frame_equal(back, FRAME)


def test_gzip_and_one_column_and_empty(tmp_path):
    gz = tmp_path / "f.csv.gz"
    with gzip.open(gz, "wt") as f:
        FRAME.to_csv(f, index=False, sep=";")
    assert csv_dialect(gz) == (";", ".")
    one = tmp_path / "one.csv"
    one.write_text("score\n0.1\n0.2\n")
    assert csv_dialect(one) == (",", ".")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert csv_dialect(empty) == (",", ".")
