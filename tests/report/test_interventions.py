"""The report's interventions section (monitor.report.interventions) from hand-written
``baselines.json`` files: what the page's rows say, how the split's counts are published,
and the errors of a directory that is not an ``intervene`` output. The section on a page
made from a real ``intervene`` run is tests/audit/test_interventions.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.report.data import ReportInputError
from monitor.report.interventions import TABLE6, read_interventions


def write(d: Path, doc: dict) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "baselines.json").write_text(json.dumps(doc), encoding="utf-8")
    return d


BASE = {
    "baseline": "B0", "method": "none", "accuracy": 0.81234, "auroc": 0.9, "f1": 0.5,
    "acc_cost_pp": 0.0, "vfr_mean": 0.1234, "vfr_max": 0.5, "cells_vfr_gt0": 3,
    "cells_stable": 20, "kappa_mean": 0.77, "di_pass": "5/7",
    "di": {"race": 0.8123, "sex": 0.95},
}  # fmt: skip


def test_rows_and_the_di_table(tmp_path):
    b3 = {**BASE, "baseline": "B3", "method": "thresholds", "auroc": None, "f1": "n.a.",
          "di": {"race": 0.9, "sex": None}}  # fmt: skip
    view = read_interventions(write(tmp_path / "run1", {
        "model": "logreg", "model_id": "model-00", "baselines": [BASE, b3],
        "notes": ["no hospital in two parts", 7],
    }))  # fmt: skip
    assert view.source == "run1" and view.model == "logreg (model-00)"
    assert view.headings == tuple(h for h, _, _ in TABLE6)
    assert view.rows[0] == ("B0", "none", "0.812", "0.900", "0.500", "0.00", "0.123", "0.500",
                            "3", "20", "0.770", "5/7")  # fmt: skip
    # a missing value is "n/a"; a value its format does not take is shown as it is
    assert view.rows[1][3:5] == ("n/a", "n.a.")
    assert view.attributes == ("race", "sex")
    assert view.di_rows == (("B0", "0.812", "0.950"), ("B3", "0.900", "n/a"))
    assert view.notes == ("no hospital in two parts", "7")
    assert view.split == ""


def test_the_split_is_published_rounded_or_withheld(tmp_path):
    view = read_interventions(write(tmp_path / "run", {
        "baselines": [BASE],
        "split": {
            "train": {"records": 6_004, "hospitals": 40},
            "validation": {"records": 1_498},
            "audit": {"records": 7},
            "how": "by hospital",
        },
    }))  # fmt: skip
    assert view.split == (
        "train 6,005 records / 40 hospitals, validation 1,500 records, audit <11 records; "
        "by hospital"
    )
    assert view.model == "? (?)"


def test_a_directory_that_is_not_an_intervene_output(tmp_path):
    with pytest.raises(ReportInputError, match=r"no baselines\.json"):
        read_interventions(tmp_path)
    with pytest.raises(ReportInputError, match="no baseline rows"):
        read_interventions(write(tmp_path / "empty", {"baselines": []}))
