"""``vfr-monitor demo``: the options that apply to the synthetic cohort only are refused
on the real ones, and a missing Texas-100X file is named (the demo's story itself is
tests/scenarios/test_demo.py)."""

from __future__ import annotations

import pytest

from monitor.cli import main

WITHHELD = "details withheld"


def test_demo_names_a_missing_texas_file(tmp_path, capsys) -> None:
    missing = tmp_path / "texas.csv"
    rc = main(["demo", "--dataset", "texas100x", "--data", str(missing),
               "--out-dir", str(tmp_path / "out")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert f"texas100x: file not found: {missing}" in err and WITHHELD not in err


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--scenario", "label_rate"], "field '--scenario': scenarios apply to the synthetic"),
        (["--outcomes", "delayed"], "--outcomes: delayed outcomes apply to the synthetic cohort"),
        (["--outcome-bias", "race=2:0.3"], "--outcome-bias: needs --outcomes delayed"),
    ],
)
def test_synthetic_only_options_are_refused_on_real_data(tmp_path, capsys, flags, said) -> None:
    out = tmp_path / "out"
    assert main(["demo", "--dataset", "diabetes130", "--out-dir", str(out), *flags]) == 2
    assert said in capsys.readouterr().err
    assert not out.exists()  # refused before anything ran
