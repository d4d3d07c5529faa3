"""`vfr-monitor audit`: the papers' batch procedure on a scored cohort file.

Every cell of every model gets Axis 1 (VFR on the whole cohort), Axis 2 (N*),
Axis 3 (hospital kappa, or "not applicable" when the file has no hospital ids)
and a reliability tier; EquiLense group metrics and MPPD are computed per
(model, attribute). Results go to ``DIR/cells.csv``, ``DIR/cells.json`` and
``DIR/mppd.json``; a summary table is printed.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from batch_axes.audit_cell import POOLED_COLUMNS
from batch_axes.audit_tables import audit_tables_from_frame
from batch_axes.equilense import EquiLenseResult
from batch_axes.runner import run_equilense
from batch_axes.table_engine import run_tables
from monitor.audit.input_errors import left_out_lines
from monitor.audit.input_mapping import AuditCohort, load_audit_cohort
from monitor.config import MonitorConfig
from monitor.core.results import CellEvaluation
from monitor.publish.audit import PublishedAudit, audit_value, cells_json
from monitor.publish.encode import csv_row, equilense_json
from monitor.publish.rule import SMALL_CELL_LABEL

#: Columns of cells.csv, in order (the first fifteen are the issue's contract).
CELL_COLUMNS = (
    "model_id", "metric", "attribute", "value", "point_verdict", "dominant_verdict", "vfr",
    "sigma", "ci_low", "ci_high", "n_star", "kappa", "kappa_band", "failed_axes", "tier",
    "partial", "pending_axes", "threshold", "direction", "n_pass", "K", "resample_n",
    "cohort_n", "groups_left_out", "n_star_reached", "kappa_degenerate", "axis3_note",
    "min_denominator", "n_undefined", "evaluable", "not_evaluable_reason", "records_needed",
    "records_needed_groups", "kappa_reason", "groups_evaluated", "groups_total", "support_note",
    "time_to_reliable", "records_to_reliable",
)  # fmt: skip


@dataclass
class AuditReport:
    """Everything an audit produced, ready to be written or inspected."""

    cells: list[CellEvaluation]
    equilense: EquiLenseResult
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: records not audited (``[input] skip_invalid_rows``), by reason; empty: none
    left_out: dict[str, int] = field(default_factory=dict)

    def published(self) -> PublishedAudit:
        """What of it may leave, typed (:func:`monitor.publish.audit.audit_value`): what
        the files hold and the governance report of the audit shows."""
        return audit_value(self.cells, self.equilense, self.notes, self.left_out, self.timings)


class Progress:
    """Prints a line per step with its duration, to stderr (stdout holds the summary)."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.timings: dict[str, float] = {}

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        if self.enabled:
            print(f"[audit] {name} ...", file=self.stream, flush=True)
        t0 = time.perf_counter()
        out = fn()
        self.timings[name] = round(time.perf_counter() - t0, 3)
        if self.enabled:
            print(
                f"[audit] {name} done in {self.timings[name]:.2f} s", file=self.stream, flush=True
            )
        return out


#: The built-in cohort ``--input`` accepts: the shipped UCI file, scored as the demo scores it.
DIABETES130 = "diabetes130"


def diabetes130_frame(seed: int = 0) -> pd.DataFrame:
    """The shipped Diabetes-130 file scored by the demo's model (one XGBoost on a seeded
    25 % split, the rest scored: monitor.data.scorer.dataset_stream), one column per
    feature: what ``--input diabetes130`` audits, and the example notebook's data."""
    from monitor.data.datasets.diabetes130 import load_diabetes130
    from monitor.data.scorer import dataset_stream

    frame = dataset_stream(load_diabetes130(), seed).frame
    feats = pd.DataFrame(list(frame.pop("features")), index=frame.index)
    return frame.join(feats)


def diabetes130_file(config: MonitorConfig, directory: Path, seed: int = 0) -> MonitorConfig:
    """Write :func:`diabetes130_frame` to ``directory/scored.csv``; return ``config`` with
    the file's attributes (its ``[[intersections]]`` and everything else kept)."""
    from monitor.data.datasets.diabetes130 import load_diabetes130

    ds = load_diabetes130()
    diabetes130_frame(seed).to_csv(directory / "scored.csv", index=False)
    data = config.model_dump(by_alias=True)
    data["attributes"] = ds.attributes
    return MonitorConfig.model_validate(data)


def run_audit(
    path: str | Path | pd.DataFrame, config: MonitorConfig, progress: Progress | None = None
) -> AuditReport:
    """Run every axis on a cohort file (or ``diabetes130``: :func:`diabetes130_file`; or a
    DataFrame as a file would read, :func:`monitor.audit.frame.audit_frame`); raises
    AuditInputError on bad input."""
    if isinstance(path, str | Path) and str(path) == DIABETES130:
        with tempfile.TemporaryDirectory(prefix="vfr-audit-") as tmp:
            cfg = diabetes130_file(config, Path(tmp))
            return run_audit(Path(tmp) / "scored.csv", cfg, progress)
    prog = progress or Progress(enabled=False)
    cohort: AuditCohort = prog.step(
        "read and validate input", lambda: load_audit_cohort(path, config)
    )
    tables = prog.step(
        "count tables", lambda: audit_tables_from_frame(cohort.records, config)
    )
    # the engine on count tables (a network's coordinator runs the same on summed tables),
    # then what needs the records: EquiLense's MPPD
    result = run_tables(tables, config, equilense=False, step=prog.step)
    eq = prog.step(
        "equilense: group metrics and MPPD",
        lambda: run_equilense(
            cohort.records, cohort.features, cohort.feature_names, tables.joined_tables(),
            config,
        ),
    )  # fmt: skip
    return AuditReport(
        cells=result.cells, equilense=eq, timings=dict(prog.timings), notes=result.notes,
        left_out=dict(cohort.left_out),
    )  # fmt: skip


def write_report(report: AuditReport, out_dir: str | Path) -> dict[str, Path]:
    """cells.csv, cells.json and mppd.json in ``out_dir`` (created if needed), in their
    published forms (:meth:`AuditReport.published`, encoded by
    :mod:`monitor.publish.encode`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "cells_csv": out / "cells.csv",
        "cells_json": out / "cells.json",
        "mppd": out / "mppd.json",
    }
    published = report.published()
    cells = cells_json(published)
    # a pooled audit's cells carry their pooled estimates too ([pooling]; POOLED_COLUMNS)
    pooled = any("pooled_value" in row for row in cells["cells"])
    columns = (*CELL_COLUMNS, *POOLED_COLUMNS) if pooled else CELL_COLUMNS
    with paths["cells_csv"].open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for row in cells["cells"]:
            w.writerow(csv_row(row, columns))
    paths["cells_json"].write_text(json.dumps(cells, indent=1))
    assert published.equilense is not None  # an audit always runs EquiLense
    paths["mppd"].write_text(json.dumps(equilense_json(published.equilense), indent=1))
    return paths


def format_summary(report: AuditReport) -> str:
    """The printed table: one line per cell, then counts per tier."""
    w = max([12, *(len(c.attribute) + 1 for c in report.cells)])  # intersections are long
    head = f"{'model':<14}{'metric':<8}{'attribute':<{w}}{'value':>8} {'verdict':>8}{'VFR':>7}"
    head += f"{'N*':>9}{'kappa':>8}  tier"
    lines = [head, "-" * len(head)]
    for c in report.cells:
        if c.withheld:  # fewer than 11 records
            lines.append(
                f"{c.model_id[:13]:<14}{c.metric:<8}{c.attribute:<{w}}"
                f"{SMALL_CELL_LABEL:>8} {SMALL_CELL_LABEL:>8}{SMALL_CELL_LABEL:>7}"
                f"{SMALL_CELL_LABEL:>9}{SMALL_CELL_LABEL:>8}  {SMALL_CELL_LABEL}"
            )
            continue
        r, k = c.result, c.own_kappa
        value = "undef" if math.isnan(r.value) else f"{r.value:.3f}"
        n_star = c.n_star if c.n_star is None or math.isinf(c.n_star) else int(c.n_star)
        kappa = "n/a" if k is None else "n/e" if math.isnan(k) else f"{k:.2f}"
        tier = c.tier.tier.value + (" (partial)" if c.tier.partial else "")
        verdict, vfr = r.dominant_verdict, f"{r.vfr:>7.3f}"
        if not c.tier.evaluable:  # no verdict, VFR or tier: the reason instead
            verdict, vfr, kappa = "n/e", f"{'-':>7}", "-"
            tier += f": {r.not_evaluable_reason}"
        lines.append(
            f"{c.model_id[:13]:<14}{c.metric:<8}{c.attribute:<{w}}{value:>8} "
            f"{verdict:>8}{vfr}{n_star!s:>9}{kappa:>8}  {tier}"
        )
    counts: dict[str, int] = {}
    for c in report.cells:
        name = SMALL_CELL_LABEL if c.withheld else c.tier.tier.value
        counts[name] = counts.get(name, 0) + 1
    lines.append("")
    lines.append("cells per tier: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    lines.extend(report.notes)
    lines.extend(left_out_lines(report.left_out))
    return "\n".join(lines)
