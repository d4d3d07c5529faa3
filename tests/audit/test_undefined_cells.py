"""Issue 24, "Undefined is not a verdict", on an ICU-like cohort where deaths are rare.

EOPP and EOD by race and by ethnicity are undefined (one group of each reaches 20
positives). Before the change `vfr-monitor audit` wrote them as value NaN, point verdict
fail, VFR 0.000, kappa 1.0 (degenerate) and tier Caution-Required: a *stable* fail on which
the hospitals "agree". Now they are not evaluable, with a reason and the records needed,
and carry no verdict, VFR, kappa or tier.
"""

from __future__ import annotations

import csv
import json

import pytest

from monitor.audit.run import format_summary, run_audit, write_report
from monitor.config import MonitorConfig
from tests.support.sparse_cohort import icu_like_cohort


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    d = tmp_path_factory.mktemp("icu")
    icu_like_cohort().to_csv(d / "cohort.csv", index=False)
    report = run_audit(d / "cohort.csv", MonitorConfig())
    return report, write_report(report, d / "out")


def _row(rows, metric, attribute):
    return next(r for r in rows if r["metric"] == metric and r["attribute"] == attribute)


@pytest.mark.parametrize("metric", ["EOPP", "EOD"])
@pytest.mark.parametrize("attribute", ["race", "ethnicity"])
def test_undefined_cells_are_not_evaluable_in_the_audit_files(audit, metric, attribute):
    _, paths = audit
    rows = json.loads(paths["cells_json"].read_text(), parse_constant=pytest.fail)["cells"]
    r = _row(rows, metric, attribute)
    assert r["value"] is None and r["n_undefined"] == r["K"]
    assert (r["point_verdict"], r["dominant_verdict"]) == ("not_evaluable", "not_evaluable")
    assert r["vfr"] is None and r["kappa"] is None and not r["kappa_degenerate"]
    assert r["tier"] == "Not-Evaluable" and r["evaluable"] is False
    assert r["not_evaluable_reason"].startswith(f"fewer than two {attribute} groups have 20 pos")
    assert r["failed_axes"] == "" and r["pending_axes"] == ""
    # Black has 15 positives: 5 more; Hispanic 9 (1-10 counts as none): up to 20
    want = {"race": (5, "2"), "ethnicity": (20, "0")}[attribute]
    assert (r["records_needed"], r["records_needed_groups"]) == want
    with paths["cells_csv"].open() as f:
        row = _row(list(csv.DictReader(f)), metric, attribute)
    assert row["tier"] == "Not-Evaluable" and row["vfr"] == "" and row["records_needed"]


def test_defined_cells_keep_their_verdicts_and_the_summary_says_not_evaluable(audit):
    report, _ = audit
    sex = next(c for c in report.cells if (c.metric, c.attribute) == ("EOPP", "sex"))
    r = sex.result
    assert r.evaluable and r.dominant_verdict in ("pass", "fail") and r.vfr == r.vfr
    # every hospital fold of EOPP is undefined (about 7 positives a fold): no vote, no kappa
    assert sex.own_kappa != sex.own_kappa and "folds that can judge" in sex.axis3.reason
    text = format_summary(report)
    line = next(t for t in text.splitlines() if " EOPP " in t and " race " in t)
    assert "n/e" in line and "Not-Evaluable: fewer than two race groups" in line
    assert "Caution-Required" not in line


def test_report_says_not_evaluable_not_a_stable_fail(audit, tmp_path):
    """The page's sentence for EOPP by race: the old one read "Fail in every resample:
    stable. ... Hospitals agree on it (kappa 1.00, almost perfect)."."""
    from monitor.cli import main

    _, paths = audit
    assert main(["report", "--audit-dir", str(paths["cells_json"].parent), "--out",
                 str(tmp_path)]) == 0  # fmt: skip
    (page,) = tmp_path.iterdir()
    html = page.read_text()
    want = (
        "Not evaluable: fewer than two race groups have 20 positives (1 of 5 do); it needs "
        "up to 5 more positives in 2. It has no verdict, flip rate, hospital agreement or tier."
    )
    start = html.index('data-metric="EOPP" data-attribute="race" data-tier="Not-Evaluable"')
    row = html[start : html.index("</tr>", start)]
    assert want in row and "Fail in every resample" not in row and "kappa" not in row
