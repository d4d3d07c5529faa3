"""``vfr-monitor synth``: a seeded cohort written where ``--out`` says, and its mistakes
refused before anything is drawn."""

from __future__ import annotations

import pandas as pd
import pytest

from monitor.cli import main


def test_a_seeded_cohort_is_written_and_counted(tmp_path, capsys) -> None:
    out = tmp_path / "c.parquet"
    assert main(["synth", "--records", "500", "--seed", "3", "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"vfr-monitor synth: 500 discharges -> {out}\n"
    first = pd.read_parquet(out)
    assert main(["synth", "--records", "500", "--seed", "3", "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out), first)  # the seed decides


def test_negative_counts_are_usage_errors(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["synth", "--records", "-5", "--out", str(tmp_path / "c.parquet")])
    assert info.value.code == 2
    assert "argument --records" in capsys.readouterr().err


def test_a_model_update_is_not_a_data_scenario(tmp_path, capsys) -> None:
    out = tmp_path / "c.parquet"
    rc = main(["synth", "--records", "10", "--out", str(out), "--scenario", "group_score_shift"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "field '--scenario': 'group_score_shift' is not a data scenario" in err
    assert "see `vfr-monitor produce`" in err and not out.exists()
