"""Texas-100X loader: code mapping, drops and their counts, replay clock, ids, overrides, schema.

The real file cannot ship with the monitor, so every test writes a small file in the
Texas-100X layout (including the unnamed index column the published CSV carries) with
deliberately bad rows.  Expected codes come from the coding tables written out here, not from
the loader's own constants, so a wrong entry in the loader's table fails a test.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from monitor.config import DEFAULT_ATTRIBUTES, MonitorConfig
from monitor.data.datasets import Dataset
from monitor.data.datasets import texas100x as tx
from monitor.data.datasets.texas100x import load_texas100x
from monitor.stream.schema import validate_frame, validate_records
from tests.support.texas_frames import N, clean_texas_frame

# The specification, written independently of the loader.
RACE = {0: "0", 1: "1", 2: "2", 3: "3", 4: "4"}
SEX = {0: "0", 1: "1"}
ETHNICITY = {0: "0", 1: "1"}
AGE = {
    **dict.fromkeys(range(0, 6), "0"),
    **dict.fromkeys(range(6, 11), "1"),
    **dict.fromkeys(range(11, 16), "2"),
    **dict.fromkeys(range(16, 22), "3"),
    22: "0",
    24: "2",
    25: "3",
    26: "3",
}
FEATURES = (
    "type_of_admission",
    "source_of_admission",
    "pat_status",
    "total_charges_log",
    "admitting_diagnosis",
    "princ_surg_proc_code",
)


#: Bad rows planted in the fixture: position -> (column, value, expected drop reason or None).
BAD = {
    7: ("SEX_CODE", "U", "unknown_sex"),
    40: ("SEX_CODE", "", "unknown_sex"),
    41: ("SEX_CODE", "2", "unknown_sex"),
    52: ("RACE", "7", "unknown_race"),  # not a PAT_AGE 23 row: each row has one fault
    51: ("RACE", "X", "unknown_race"),
    60: ("ETHNICITY", "", "unknown_ethnicity"),
    70: ("LENGTH_OF_STAY", "", "bad_length_of_stay"),
    71: ("LENGTH_OF_STAY", "-1", "bad_length_of_stay"),
    72: ("LENGTH_OF_STAY", "n/a", "bad_length_of_stay"),
    80: ("THCIC_ID", "", "missing_hospital_id"),
    90: ("PAT_AGE", "27", "unknown_age_code"),
    91: ("PAT_AGE", "A", "unknown_age_code"),
    100: ("TYPE_OF_ADMISSION", "x", None),  # a feature: coerced to NaN, row kept
    101: ("TOTAL_CHARGES", "-5", None),
}


def _fixture_frame() -> pd.DataFrame:
    df = clean_texas_frame().astype(object)
    for pos, (col, value, _) in BAD.items():
        df.loc[pos, col] = value
    return df


def _write_csv(df: pd.DataFrame, path: Path, index: bool = True) -> Path:
    df.to_csv(path, index=index)  # index=True: the published texas_100x.csv has one
    return path


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    return _write_csv(_fixture_frame(), tmp_path / "texas_100x.csv")


@pytest.fixture
def ds(csv_path: Path) -> Dataset:
    return load_texas100x(csv_path)


def _position(ds: Dataset) -> np.ndarray:
    return ds.frame["record_id"].str.removeprefix("tx-").astype(int).to_numpy()


def _dropped(ds: Dataset, reason: str) -> int:
    for note in ds.notes:
        m = re.match(rf"dropped ([\d,]+) rows: {reason} ", note)
        if m:
            return int(m.group(1).replace(",", ""))
    return 0


def _age_rows(tmp_path: Path, codes: list[object]) -> Dataset:
    df = clean_texas_frame(len(codes))
    df["PAT_AGE"] = codes
    return load_texas100x(_write_csv(df, tmp_path / "age.csv"))


def test_every_code_maps_as_specified(ds: Dataset) -> None:
    src = _fixture_frame().iloc[_position(ds)].reset_index(drop=True)
    f = ds.frame
    for col, attr, table in (
        ("RACE", "race", RACE),
        ("SEX_CODE", "sex", SEX),
        ("ETHNICITY", "ethnicity", ETHNICITY),
        ("PAT_AGE", "age_group", AGE),
    ):
        expected = src[col].astype(int).map(table)
        assert (f[attr].to_numpy(dtype=object) == expected.to_numpy(dtype=object)).all(), attr
        seen = sorted(set(src[col].astype(int)))
        assert seen == sorted(table), f"fixture must exercise every {col} code"
        assert set(f[attr]) == set(table.values())
    codes = {a["name"]: set(a["groups"]) for a in DEFAULT_ATTRIBUTES}
    for attr, allowed in codes.items():
        assert set(f[attr]) == allowed


@pytest.mark.parametrize(
    ("code", "bucket"),
    [
        ("00", "0"),
        ("05", "0"),
        ("06", "1"),
        ("10", "1"),
        ("11", "2"),
        ("15", "2"),
        ("16", "3"),
        ("21", "3"),
        ("22", "0"),
        ("24", "2"),
        ("25", "3"),
        ("26", "3"),
        (5, "0"),
        (6, "1"),
        (26, "3"),
    ],
)
def test_pat_age_boundaries(tmp_path: Path, code: object, bucket: str) -> None:
    d = _age_rows(tmp_path, [code] * 3)
    assert list(d.frame["age_group"]) == [bucket] * 3


def test_pat_age_as_parquet_integers(tmp_path: Path) -> None:
    df = clean_texas_frame(27)
    df["PAT_AGE"] = np.arange(27, dtype=np.int64)
    df.to_parquet(tmp_path / "ints.parquet")
    d = load_texas100x(tmp_path / "ints.parquet")
    got = dict(zip(_position(d), d.frame["age_group"], strict=True))
    assert got == AGE


def test_code_23_dropped_and_counted(ds: Dataset, tmp_path: Path) -> None:
    src = _fixture_frame()
    n23 = int((src["PAT_AGE"] == "23").sum())
    assert n23 == N // 27
    assert _dropped(ds, "unmappable_age_code") == n23
    assert "23" not in set(_fixture_frame()["PAT_AGE"].iloc[_position(ds)])
    d = _age_rows(tmp_path, ["23", "23", "11"])
    assert list(d.frame["age_group"]) == ["2"]
    assert _dropped(d, "unmappable_age_code") == 2


def test_unknown_sex_dropped_and_counted(ds: Dataset) -> None:
    assert _dropped(ds, "unknown_sex") == 3
    for pos, (_, _, reason) in BAD.items():
        assert (pos in set(_position(ds))) == (reason is None)


def test_drop_counts_sum_and_never_show_values(ds: Dataset) -> None:
    expected: dict[str, int] = {}
    for _, _, reason in BAD.values():
        if reason:
            expected[reason] = expected.get(reason, 0) + 1
    expected["unmappable_age_code"] = N // 27
    for reason, count in expected.items():
        assert _dropped(ds, reason) == count, reason
    assert len(ds.frame) == N - sum(expected.values())
    summary = next(n for n in ds.notes if n.startswith("read "))
    assert f"kept {len(ds.frame)}" in summary
    assert f"dropped {sum(expected.values())}" in summary
    text = " ".join(ds.notes)
    assert "n/a" not in text and "'U'" not in text and "000107" not in text


def test_label_is_los_over_three(ds: Dataset, tmp_path: Path) -> None:
    src = _fixture_frame().iloc[_position(ds)]
    los = src["LENGTH_OF_STAY"].astype(int).to_numpy()
    assert (ds.frame["label"].to_numpy() == (los > 3)).all()
    assert ds.frame["label"].dtype == np.int64
    df = clean_texas_frame(6)
    df["LENGTH_OF_STAY"] = ["0", "3", "4", "3.0", "3.5", "365"]
    d = load_texas100x(_write_csv(df, tmp_path / "los.csv"))
    assert list(d.frame["label"]) == [0, 0, 1, 0, 1, 1]


@pytest.mark.parametrize("column", list(tx.REQUIRED_COLUMNS.values()))
def test_missing_required_column_names_it(tmp_path: Path, column: str) -> None:
    path = _write_csv(clean_texas_frame(20).drop(columns=[column]), tmp_path / "m.csv")
    with pytest.raises(ValueError, match=column):
        load_texas100x(path)


def test_missing_columns_all_named(tmp_path: Path) -> None:
    path = _write_csv(clean_texas_frame(20).drop(columns=["RACE", "PAT_AGE"]), tmp_path / "m.csv")
    with pytest.raises(ValueError, match=r"RACE.*PAT_AGE|PAT_AGE.*RACE"):
        load_texas100x(path)


def test_case_insensitive_columns(csv_path: Path, ds: Dataset, tmp_path: Path) -> None:
    df = _fixture_frame()
    df.columns = [c.lower() if i % 2 else c.title() for i, c in enumerate(df.columns)]
    d = load_texas100x(_write_csv(df, tmp_path / "lower.csv"))
    pd.testing.assert_frame_equal(d.frame, ds.frame)
    assert d.features == ds.features


def test_columns_override(ds: Dataset, tmp_path: Path) -> None:
    renamed = {"THCIC_ID": "site", "PAT_AGE": "AgeCode", "TOTAL_CHARGES": "charges"}
    df = _fixture_frame().rename(columns=renamed)
    path = _write_csv(df, tmp_path / "renamed.csv")
    with pytest.raises(ValueError, match="THCIC_ID"):
        load_texas100x(path)
    d = load_texas100x(
        path, columns={"hospital_id": "SITE", "age_group": "agecode", "total_charges": "charges"}
    )
    pd.testing.assert_frame_equal(d.frame, ds.frame)


def test_columns_override_rejects_typos(csv_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown key"):
        load_texas100x(csv_path, columns={"hospital": "THCIC_ID"})
    with pytest.raises(ValueError, match="NOPE"):
        load_texas100x(csv_path, columns={"pat_status": "NOPE"})


def test_age_codes_override(tmp_path: Path) -> None:
    df = clean_texas_frame(6)
    df["PAT_AGE"] = ["child", "adult", "40s", "old", "??", "7"]
    path = _write_csv(df, tmp_path / "age.csv")
    d = load_texas100x(
        path, age_codes={"child": "0", "adult": "1", "40s": "2", "old": "3", "07": None}
    )
    assert list(d.frame["age_group"]) == ["0", "1", "2", "3"]
    assert _dropped(d, "unknown_age_code") == 1
    assert _dropped(d, "unmappable_age_code") == 1
    assert any("mapped to None by age_codes" in n for n in d.notes)
    # an override replaces the default table: code 5 is unknown unless listed
    d = _age_rows(tmp_path, ["05", "05"])
    assert list(d.frame["age_group"]) == ["0", "0"]
    d = load_texas100x(_write_csv(clean_texas_frame(27), tmp_path / "c.csv"), age_codes={5: "1"})
    assert list(d.frame["age_group"]) == ["1"]


def test_age_codes_override_rejects_bad_buckets(csv_path: Path) -> None:
    with pytest.raises(ValueError, match="age_codes"):
        load_texas100x(csv_path, age_codes={5: "4"})
    with pytest.raises(ValueError, match="age_codes"):
        load_texas100x(csv_path, age_codes={})


def test_parquet_same_as_csv(ds: Dataset, tmp_path: Path) -> None:
    df = _fixture_frame().astype(str)  # mixed bad cells: Parquet columns hold text, like CSV
    df.to_parquet(tmp_path / "t.parquet")
    d = load_texas100x(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(d.frame, ds.frame)
    assert d.notes == ds.notes and d.features == ds.features


def test_parquet_native_types_same_as_csv(tmp_path: Path) -> None:
    df = clean_texas_frame()
    for col in ("SEX_CODE", "LENGTH_OF_STAY", "PAT_AGE", "RACE", "ETHNICITY"):
        df[col] = df[col].astype(np.int64)
    df["THCIC_ID"] = df["THCIC_ID"].astype(np.int64)
    df.to_parquet(tmp_path / "t.parquet")
    from_csv = load_texas100x(_write_csv(df, tmp_path / "t.csv"))
    from_pq = load_texas100x(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(from_pq.frame, from_csv.frame)
    assert set(from_pq.frame["hospital_id"]) == {"107", "1200", "4500", "7001"}


def test_chunked_read_same_as_whole(ds: Dataset, csv_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tx, "CHUNK_ROWS", 7)
    small = load_texas100x(csv_path)
    pd.testing.assert_frame_equal(small.frame, ds.frame)
    assert small.notes == ds.notes


def test_event_time_is_a_replay_clock_over_2006(ds: Dataset) -> None:
    t = ds.frame["event_time"]
    assert str(t.dt.tz) == "UTC"
    assert t.is_monotonic_increasing
    assert t.min() == pd.Timestamp("2006-01-01", tz="UTC")  # row 0 is kept
    assert t.max() < pd.Timestamp("2007-01-01", tz="UTC")
    assert t.max() >= pd.Timestamp("2006-12-31", tz="UTC")  # row N-1 is kept
    assert ds.real_dates is False
    assert any("replay clock" in n for n in ds.notes)


def test_record_ids_unique_and_stable(ds: Dataset, csv_path: Path) -> None:
    ids = ds.frame["record_id"]
    assert ids.is_unique
    assert ids.str.fullmatch(r"tx-\d{7}").all()
    assert ids.iloc[0] == "tx-0000000"
    pos = _position(ds)
    assert (np.diff(pos) > 0).all() and 7 not in set(pos)  # dropped rows leave gaps
    again = load_texas100x(csv_path)
    pd.testing.assert_series_equal(again.frame["record_id"], ids)
    pd.testing.assert_series_equal(again.frame["event_time"], ds.frame["event_time"])


def test_sites_kept_as_strings(ds: Dataset) -> None:
    assert ds.has_sites is True
    hosp = ds.frame["hospital_id"]
    assert all(isinstance(h, str) for h in hosp)
    assert set(hosp) == {"000107", "1200", "4500", "7001"}
    src = _fixture_frame().iloc[_position(ds)]
    assert list(hosp) == list(src["THCIC_ID"])


def test_features(ds: Dataset, tmp_path: Path) -> None:
    assert ds.features == FEATURES
    f = ds.frame
    for name in ds.features:
        assert pd.api.types.is_float_dtype(f[name]), name
    src = _fixture_frame().iloc[_position(ds)].reset_index(drop=True)
    charges = pd.to_numeric(src["TOTAL_CHARGES"])
    ok = charges >= 0
    np.testing.assert_allclose(f["total_charges_log"][ok], np.log1p(charges[ok]))
    assert f["total_charges_log"].isna().sum() == 1  # the planted -5
    assert f["type_of_admission"].isna().sum() == 1  # the planted "x"
    assert any(n.startswith("TYPE_OF_ADMISSION: 1 non-numeric") for n in ds.notes)
    assert any(n.startswith("TOTAL_CHARGES: 1 negative") for n in ds.notes)
    assert any("end-of-encounter" in n and "total_charges_log" in n for n in ds.notes)
    # absent features are tolerated; a code column holding ICD-9 text is not a feature
    df = clean_texas_frame(30).drop(columns=["PAT_STATUS", "SOURCE_OF_ADMISSION"]).astype(object)
    df.loc[3, "ADMITTING_DIAGNOSIS"] = "V3000"
    d = load_texas100x(_write_csv(df, tmp_path / "f.csv"))
    assert d.features == (
        "type_of_admission",
        "total_charges_log",
        "princ_surg_proc_code",
    )
    assert "admitting_diagnosis" not in d.frame.columns
    assert any(n.startswith("ADMITTING_DIAGNOSIS not used") for n in d.notes)
    assert any("not in the file: SOURCE_OF_ADMISSION, PAT_STATUS" in n for n in d.notes)


def test_columns_look_like_the_synthetic_cohort(ds: Dataset) -> None:
    head = ["record_id", "hospital_id", "event_time", "race", "sex", "ethnicity", "age_group"]
    assert list(ds.frame.columns) == [*head, *FEATURES, "label"]


def test_dataset_metadata(ds: Dataset) -> None:
    assert ds.name == "texas100x"
    assert ds.attributes == DEFAULT_ATTRIBUTES
    ds.attributes[0]["groups"]["9"] = "x"  # a copy: the config default stays intact
    assert "9" not in DEFAULT_ATTRIBUTES[0]["groups"]
    for part in ("THCIC", "2006", "PUDF", "https://github.com/bargavj/Texas-100X", "Jayaraman"):
        assert part in ds.credit
    assert "not redistributed with vfr-monitor" in ds.credit


def test_output_validates_through_the_monitor_schema(ds: Dataset) -> None:
    config = MonitorConfig()
    rng = np.random.default_rng(1)
    scored = ds.frame.assign(score=rng.random(len(ds.frame)), model_id="los-xgb")
    result = validate_frame(scored, config)
    assert result.rejected == []
    assert len(result.valid) == len(ds.frame)

    records = []
    for row, score in zip(ds.frame.to_dict("records"), scored["score"], strict=True):
        feats = {k: float(row[k]) for k in ds.features if np.isfinite(row[k])}
        records.append(
            {
                "record_id": row["record_id"],
                "model_id": "los-xgb",
                "event_time": row["event_time"].isoformat().replace("+00:00", "Z"),
                "hospital_id": row["hospital_id"],
                "score": float(score),
                "label": int(row["label"]),
                **{a: row[a] for a in ("race", "sex", "ethnicity", "age_group")},
                "features": feats,
            }
        )
    result = validate_records(records, config)
    assert result.rejected == []
    assert len(result.valid) == len(records)


def test_no_usable_rows(tmp_path: Path) -> None:
    df = clean_texas_frame(10)
    df["SEX_CODE"] = "U"
    with pytest.raises(ValueError, match="no usable rows"):
        load_texas100x(_write_csv(df, tmp_path / "u.csv"))
    path = _write_csv(clean_texas_frame(1).iloc[:0], tmp_path / "empty.csv")
    with pytest.raises(ValueError, match="no data rows"):
        load_texas100x(path)


def test_row_with_two_faults_counted_once(tmp_path: Path) -> None:
    df = clean_texas_frame(3)
    df["PAT_AGE"] = ["23", "23", "01"]
    df["SEX_CODE"] = ["U", "0", "1"]
    d = load_texas100x(_write_csv(df, tmp_path / "two.csv"))
    assert _dropped(d, "unknown_sex") == 1
    assert _dropped(d, "unmappable_age_code") == 1
    assert list(d.frame["record_id"]) == ["tx-0000002"]
