"""Audit input errors say how to fix them, never quoting a record's values.

The issue's examples, on the shipped Diabetes-130 file (real codes, among them "?"): an
unknown code, scores on 0-100, a misspelt column, a missing attribute column, one NaN
score. Each runs the `audit` command as a user would and reads what it printed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor.cli import main
from tests.support.real_data import DIABETES_CONFIG, diabetes_scored

#: The user's config without MPPD features (not under test here: keeps the runs short).
CONFIG = DIABETES_CONFIG.split("[equilense]")[0] + "[axis1]\nK = 50\n"
#: The same without the code map of race's "?": the file's "?" is then an unknown code.
CONFIG_NO_UNKNOWN = CONFIG.replace('[input.codes.race]\n"?" = "Unknown"\n', "")


@pytest.fixture(scope="module")
def cohort() -> pd.DataFrame:
    """4,000 scored rows of the real file (675 of its 30,529 audit rows have race "?")."""
    return diabetes_scored().iloc[:4000].reset_index(drop=True).copy()


def _audit(tmp_path, frame, config, capsys, *flags, name="scored.csv", **to_csv):
    path = tmp_path / name
    frame.to_csv(path, index=False, **to_csv)
    (tmp_path / "c.toml").write_text(config)
    code = main(["audit", "--input", str(path), "--config", str(tmp_path / "c.toml"),
                 "--out", str(tmp_path / "out"), "--quiet", *flags])  # fmt: skip
    out = capsys.readouterr()
    return code, out.out, out.err


def test_unknown_code_names_expected_and_unexpected_codes(tmp_path, cohort, capsys):
    n_question = int((cohort["race"] == "?").sum())
    assert n_question >= 11  # the real file's "?" is common enough to be named
    frame = cohort.copy()
    frame.loc[[5, 6, 7], "race"] = "Zz-rare"  # 3 rows: counted, never named
    frame.loc[[8], "race"] = "Yy-rare"
    code, _, err = _audit(tmp_path, frame, CONFIG_NO_UNKNOWN, capsys)
    assert code == 2
    assert f"unknown code in {n_question + 4} row(s)" in err, err
    assert f"'?' ({n_question} rows)" in err
    assert "2 other codes (each in fewer than 11 rows, not named)" in err
    assert "Zz-rare" not in err and "Yy-rare" not in err
    # the expected codes: the configured groups and the file codes the config maps
    assert "expected one of 'Caucasian', 'AfricanAmerican', 'Hispanic', 'Asian'" in err
    assert "[input.codes.race] '?' = \"<configured code>\"" in err
    assert "[[attributes]]" in err


def test_percent_scores_say_the_range_and_divide_by_100(tmp_path, cohort, capsys):
    frame = cohort.assign(score=cohort["score"] * 100)
    code, _, err = _audit(tmp_path, frame, CONFIG, capsys)
    assert code == 2
    assert "outside the expected range [0, 1]" in err
    assert "percentages? divide the column by 100" in err and "most scores" in err
    # no score is quoted: none of the file's values, at the precision CSV wrote them
    for value in frame["score"].iloc[:50]:
        assert f"{value:.4f}"[:-1] not in err


def test_log_odds_scores_suggest_the_logistic_function(tmp_path, cohort, capsys):
    p = cohort["score"].clip(1e-6, 1 - 1e-6)
    frame = cohort.assign(score=np.log(p / (1 - p)))
    code, _, err = _audit(tmp_path, frame, CONFIG, capsys)
    assert code == 2 and "log-odds? apply the logistic function" in err


def test_misspelt_column_gets_did_you_mean(tmp_path, cohort, capsys):
    frame = cohort.rename(columns={"gender": "Gendr"})
    code, _, err = _audit(tmp_path, frame, CONFIG, capsys)
    assert code == 2
    assert "missing column 'gender'" in err
    assert "did you mean 'Gendr'? Map it with [input.columns] sex = \"Gendr\"" in err


def test_missing_attribute_column_says_how_to_drop_the_attribute(tmp_path, cohort, capsys):
    # the default config audits race, sex, ethnicity and age_group; this file has no
    # ethnicity: the fix is the attribute list, not only a column map
    frame = cohort.rename(columns={"gender": "sex", "age": "age_group"})
    config = '[input]\nmodel_id = "m"\n[input.label_from]\ncolumn = "time_in_hospital"\n'
    config += "greater_than = 3\n"
    code, _, err = _audit(tmp_path, frame, config, capsys)
    assert code == 2
    assert "missing column 'race'" in err or "missing column 'ethnicity'" in err
    assert "audit without it: configure the attributes the file has as [[attributes]]" in err
    assert "they replace the default list ['race', 'sex', 'ethnicity', 'age_group']" in err


def test_missing_attribute_names_the_intersections_to_drop(tmp_path, cohort, capsys):
    frame = cohort.drop(columns=["gender"])
    config = CONFIG + '[[intersections]]\nattributes = ["race", "sex"]\n'
    code, _, err = _audit(tmp_path, frame, config, capsys)
    assert code == 2 and "drop the [[intersections]] ['race_x_sex']" in err, err


def test_one_nan_score_refuses_and_names_the_skip_option(tmp_path, cohort, capsys):
    frame = cohort.copy()
    frame.loc[17, "score"] = np.nan
    code, _, err = _audit(tmp_path, frame, CONFIG, capsys)
    assert code == 2
    assert "nothing was audited" in err
    fault = "column 'score': missing (an empty cell or not a number) in 1 row(s)"
    assert f"{fault}, first at 0-based row(s) 17" in err
    assert "--skip-invalid-rows" in err and "skip_invalid_rows = true" in err
    assert not (tmp_path / "out").exists()


def test_semicolon_file_with_decimal_commas_is_read(tmp_path, cohort, capsys):
    code, _out, err = _audit(tmp_path, cohort, CONFIG, capsys, sep=";", decimal=",")
    assert code == 0, err
    semi = pd.read_csv(tmp_path / "out" / "cells.csv")
    code, _, err = _audit(tmp_path, cohort, CONFIG, capsys)
    assert code == 0, err
    comma = pd.read_csv(tmp_path / "out" / "cells.csv")
    pd.testing.assert_series_equal(semi["value"], comma["value"])
    assert len(comma) == 7 * 3
