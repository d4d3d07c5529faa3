"""monitor.publish.audit: an offline audit as published, written and read back the same."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from monitor.audit.run import AuditReport, run_audit
from monitor.config import config_from_mapping
from monitor.publish.audit import audit_read, audit_value, cells_json
from monitor.publish.cells import audit_cell_value
from monitor.publish.encode import audit_cell_json, equilense_json
from monitor.publish.shown import Shown


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> AuditReport:
    """An audit of a model of 300 records and one of 8 (withheld as a whole)."""
    rng = np.random.default_rng(1)
    rows = [{"record_id": i, "model_id": m, "score": rng.uniform(),
             "label": int(rng.integers(0, 2)), "race": int(rng.integers(0, 5)), "sex": i % 2,
             "ethnicity": 1, "age_group": 2, "x": rng.normal()}
            for m, n in (("big", 300), ("tiny", 8)) for i in range(n)]  # fmt: skip
    path = tmp_path_factory.mktemp("audit") / "in.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    cfg = config_from_mapping({"axis1": {"K": 30}, "axis2": {"sizes": [50, 100], "R": 3},
                               "equilense": {"features": ["x"]}})  # fmt: skip
    return run_audit(path, cfg)


def test_the_audits_files_are_its_published_values_encoded(report):
    p = audit_value(report.cells, report.equilense, ["a note"], {"no score": 4, "x": 120},
                    {"axis 1": 0.5})  # fmt: skip
    assert [audit_cell_json(c) for c in p.cells] == [
        audit_cell_json(audit_cell_value(c)) for c in report.cells
    ]
    out = cells_json(p)
    assert list(out) == ["cells", "notes", "timings_s", "left_out"]
    assert out["left_out"] == {"no score": "<11", "x": 120}
    assert out["notes"] == [
        "a note",
        "Invalid records left out of the audit ([input] skip_invalid_rows), by reason: "
        "no score <11, x 120.",
    ]
    shown = {c.identity.model_id: isinstance(c.figures, Shown) for c in p.cells}
    assert shown == {"big": True, "tiny": False}
    # nothing left out: no note about it
    assert audit_value(report.cells, report.equilense, [], {}, {}).notes == ()


def test_an_audit_read_back_from_its_files_is_the_audit_that_was_published(report):
    p = report.published()
    files = json.loads(json.dumps(cells_json(p)))
    assert p.equilense is not None
    mppd = json.loads(json.dumps(equilense_json(p.equilense)))
    back = audit_read(files, mppd)
    assert back.notes == p.notes
    assert [c.identity for c in back.cells] == [c.identity for c in p.cells]
    assert [audit_cell_json(c) for c in back.cells] == files["cells"]
    assert back.equilense is not None
    assert json.loads(json.dumps(equilense_json(back.equilense))) == mppd
    assert p.equilense.models["big"].mppd  # MPPD ran: the comparison below has entries
    assert {m: e.mppd for m, e in back.equilense.models.items()} == {
        m: e.mppd for m, e in p.equilense.models.items()
    }
    assert audit_read(files, None).equilense is None
