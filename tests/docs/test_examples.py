"""docs/examples/audit_a_dataframe.ipynb runs through a real Jupyter kernel (nbclient), on
this virtualenv's Python, and its point values are fairlearn's on the same data."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from fairlearn.metrics import (
    MetricFrame,
    equalized_odds_difference,
    selection_rate,
    true_positive_rate,
)
from nbclient import NotebookClient

from monitor.audit.run import diabetes130_frame

NOTEBOOK = Path(__file__).parents[2] / "docs" / "examples" / "audit_a_dataframe.ipynb"
KERNEL = "vfr-monitor-venv"


def _kernelspec(root: Path) -> None:
    """A kernelspec running this interpreter (the venv's python, on a fresh clone too),
    under a private JUPYTER_PATH: a user's own "python3" kernelspec cannot stand in."""
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "vfr-monitor (venv)",
                "language": "python",
            }
        )
    )


def _outputs(cell: dict, kind: str) -> str:
    if kind == "stream":
        return "".join(o.get("text", "") for o in cell["outputs"] if o["output_type"] == "stream")
    return "".join(
        o["data"].get(kind, "")
        for o in cell["outputs"]
        if o["output_type"] in ("execute_result", "display_data")
    )


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    root = tmp_path_factory.mktemp("jupyter")
    _kernelspec(root)
    work = tmp_path_factory.mktemp("notebook")
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(root))
    mp.setenv("JUPYTER_RUNTIME_DIR", str(root / "runtime"))
    mp.setenv("IPYTHONDIR", str(root / "ipython"))
    try:
        nb = nbformat.read(NOTEBOOK, as_version=4)
        # raises CellExecutionError (with the cell and its traceback) if any cell fails,
        # the notebook's own assertion against fairlearn included
        NotebookClient(
            nb, kernel_name=KERNEL, timeout=600, resources={"metadata": {"path": str(work)}}
        ).execute()
    finally:
        mp.undo()
    return nb, work


def test_the_notebook_runs_on_this_venvs_python(executed):
    nb, work = executed
    first = _outputs(nb.cells[1], "stream")
    assert f"kernel python: {sys.executable}" in first
    assert "76,252 scored encounters" in first
    # the audit's HTML view: a verdict column and tier badges, distinct styles
    page = _outputs(nb.cells[3], "text/html")
    assert "Verdict" in page and "border-radius:8px" in page and "diabetes130-xgb" in page
    # the report cell wrote its page in the notebook's directory
    reports = list((work / "reports").glob("report_*.html"))
    assert len(reports) == 1 and reports[0].stat().st_size > 10_000


def test_the_notebooks_point_values_equal_fairlearn(executed):
    nb, _ = executed
    cell = next(c for c in nb.cells if "comparison-json" in c.metadata.get("tags", []))
    rows = json.loads(_outputs(cell, "stream"))
    assert {(r["metric"], r["attribute"]) for r in rows} == {
        (m, a) for m in ("DI", "SPD", "EOPP", "EOD") for a in ("race", "sex", "age")
    }
    # fairlearn again, here, on the same data built here (the notebook's fairlearn figures
    # are checked too, but the engine's must match an independent computation)
    df = diabetes130_frame()
    groups = {
        "race": df["race"],
        "sex": df["sex"],
        "age": df["age_group"],  # the notebook renames these codes; the groups are the same
    }
    y, d = df["label"], (df["score"] >= 0.5).astype(int)
    for r in rows:
        a = groups[r["attribute"]]
        mf = MetricFrame(
            metrics={"sr": selection_rate, "tpr": true_positive_rate},
            y_true=y, y_pred=d, sensitive_features=a,
        )  # fmt: skip
        expected = {
            "DI": mf.ratio()["sr"],
            "SPD": mf.difference()["sr"],
            "EOPP": mf.difference()["tpr"],
            "EOD": equalized_odds_difference(y, d, sensitive_features=a),
        }[r["metric"]]
        assert r["vfr_monitor"] == pytest.approx(expected, rel=1e-12, abs=1e-12)
        assert r["fairlearn"] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    di_race = next(r for r in rows if r["metric"] == "DI" and r["attribute"] == "race")
    assert 0 < di_race["vfr_monitor"] < 1
