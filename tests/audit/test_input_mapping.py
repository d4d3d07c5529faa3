"""Auditing the valid rows of a file with bad ones: what is left out is counted by reason.

On the shipped Diabetes-130 file with planted faults: the audit of the valid rows must
equal the audit of a file that never had the bad rows, and the output (summary and
cells.json) must count the rows left out by reason.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from monitor.audit.input_mapping import AuditInputError, load_audit_cohort
from monitor.cli import main
from monitor.config import config_from_mapping
from monitor.core.privacy import rounded_count
from tests.audit.test_input_errors import CONFIG, CONFIG_NO_UNKNOWN

NAN_ROWS = list(range(100, 130))  # 30 rows without a score
PERCENT_ROWS = [7, 8, 9]  # 3 rows with a score of 0-100


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    from tests.support.real_data import diabetes_scored

    d = tmp_path_factory.mktemp("faulty")
    clean = diabetes_scored().iloc[:4000].reset_index(drop=True).copy()
    bad = clean.copy()
    bad.loc[NAN_ROWS, "score"] = np.nan
    bad.loc[PERCENT_ROWS, "score"] = 55.0
    bad.to_csv(d / "bad.csv", index=False)
    dropped = clean.drop(index=NAN_ROWS + PERCENT_ROWS)
    dropped.to_csv(d / "clean.csv", index=False)
    (d / "c.toml").write_text(CONFIG)
    return d, clean


def _run(d, name, out, *flags):
    return main(["audit", "--input", str(d / name), "--config", str(d / "c.toml"),
                 "--out", str(d / out), "--quiet", *flags])  # fmt: skip


def test_skip_invalid_rows_audits_the_rest_and_counts_by_reason(faulty, capsys):
    d, clean = faulty
    assert _run(d, "bad.csv", "refused") == 2
    capsys.readouterr()
    assert _run(d, "bad.csv", "skipped", "--skip-invalid-rows") == 0
    printed = capsys.readouterr().out
    assert "records left out of the audit (invalid, skipped): 33" in printed
    assert "       30  missing:score" in printed and "        3  out_of_range:score" in printed
    assert _run(d, "clean.csv", "clean") == 0
    skipped = pd.read_csv(d / "skipped" / "cells.csv")
    reference = pd.read_csv(d / "clean" / "cells.csv")
    # the same records audited: the same cells, point values and cohort sizes
    cols = ["model_id", "metric", "attribute", "value", "cohort_n", "point_verdict"]
    pd.testing.assert_frame_equal(skipped[cols], reference[cols])
    assert (skipped["cohort_n"] == rounded_count(len(clean) - 33)).all()  # published: rounded
    written = json.loads((d / "skipped" / "cells.json").read_text())
    assert written["left_out"] == {"missing:score": 30, "out_of_range:score": "<11"}
    assert json.loads((d / "clean" / "cells.json").read_text())["left_out"] == {}
    # the governance report of the audit says what was left out
    assert main(["report", "--audit-dir", str(d / "skipped"), "--out", str(d / "r.html")]) == 0
    page = (d / "r.html").read_text()
    assert "Invalid records left out of the audit" in page
    assert "missing:score 30, out_of_range:score &lt;11" in page


def test_config_key_skips_and_small_counts_are_withheld_in_files(faulty, capsys, tmp_path):
    _d, clean = faulty
    frame = clean.copy()
    frame.loc[[1, 2], "score"] = np.nan  # 2 rows: written "<11"
    frame.to_csv(tmp_path / "f.csv", index=False)
    (tmp_path / "c.toml").write_text(
        CONFIG.replace("[input]\n", "[input]\nskip_invalid_rows = true\n")
    )
    code = main(["audit", "--input", str(tmp_path / "f.csv"), "--config",
                 str(tmp_path / "c.toml"), "--out", str(tmp_path / "o"), "--quiet"])  # fmt: skip
    assert code == 0
    assert json.loads((tmp_path / "o" / "cells.json").read_text())["left_out"] == {
        "missing:score": "<11"
    }
    assert "        2  missing:score" in capsys.readouterr().out


def test_several_reasons_are_counted_apart(faulty, tmp_path):
    _d, clean = faulty
    frame = clean.copy()
    frame.loc[[3, 4, 5], "score"] = np.nan
    frame.loc[[10, 11], "gender"] = np.nan  # missing group code
    (tmp_path / "f.csv").write_text(frame.to_csv(index=False))
    cfg = config_from_mapping(
        {**_toml(CONFIG_NO_UNKNOWN), "input": {**_toml(CONFIG_NO_UNKNOWN)["input"],
                                               "skip_invalid_rows": True}}
    )  # fmt: skip
    cohort = load_audit_cohort(tmp_path / "f.csv", cfg)
    n_question = int((clean["race"] == "?").sum())
    assert cohort.left_out == {
        "missing:score": 3, "missing:sex": 2, "unknown_code:race": n_question
    }  # fmt: skip
    assert len(cohort.records) == len(clean) - 5 - n_question
    assert not set(cohort.records["source_row"]) & {3, 4, 5, 10, 11}


def test_nothing_valid_is_an_error(tmp_path):
    pd.DataFrame({"score": [np.nan] * 3, "label": [0, 1, 0], "race": ["3"] * 3,
                  "sex": ["0"] * 3, "ethnicity": ["1"] * 3,
                  "age_group": ["2"] * 3}).to_csv(tmp_path / "f.csv", index=False)  # fmt: skip
    cfg = config_from_mapping({"input": {"skip_invalid_rows": True}})
    with pytest.raises(AuditInputError, match="no valid rows left to audit"):
        load_audit_cohort(tmp_path / "f.csv", cfg)


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)
