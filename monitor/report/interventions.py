"""The report's interventions section: the four baselines of ``vfr-monitor intervene``.

Reads the command's ``baselines.json`` (docs/method.md section 8; the paper's Tables 5 and 6 in
one row per baseline) and turns it into the rows the page shows. Only aggregates are in
that file; group sizes below the small-cell rule are already written ``<11`` there, and
the split's record counts are shown rounded (:func:`~monitor.publish.counts.published_count`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor.publish.counts import published_count
from monitor.report.data import ReportInputError
from monitor.report.sentences import fmt_count

#: (column heading, key in a baseline row, format)
TABLE6 = (
    ("Baseline", "baseline", "{}"),
    ("Method", "method", "{}"),
    ("Accuracy", "accuracy", "{:.3f}"),
    ("AUROC", "auroc", "{:.3f}"),
    ("F1", "f1", "{:.3f}"),
    ("Cost (pp)", "acc_cost_pp", "{:.2f}"),
    ("VFR mean", "vfr_mean", "{:.3f}"),
    ("VFR max", "vfr_max", "{:.3f}"),
    ("Cells VFR > 0", "cells_vfr_gt0", "{}"),
    ("Stable cells", "cells_stable", "{}"),
    ("Mean kappa", "kappa_mean", "{:.3f}"),
    ("DI pass", "di_pass", "{}"),
)


@dataclass(frozen=True)
class InterventionsView:
    """What the page shows of an intervention run."""

    source: str
    model: str
    split: str
    headings: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    attributes: tuple[str, ...]
    di_rows: tuple[tuple[str, ...], ...]  # baseline, DI per attribute
    notes: tuple[str, ...]


def _fmt(fmt: str, v: Any) -> str:
    if v is None:
        return "n/a"
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def read_interventions(path: str | Path) -> InterventionsView:
    """The section's content from an ``intervene --out`` directory (its baselines.json)."""
    f = Path(path) / "baselines.json"
    if not f.is_file():
        raise ReportInputError(f"{path}: no baselines.json (the output of vfr-monitor intervene)")
    doc = json.loads(f.read_text(encoding="utf-8"))
    baselines = doc.get("baselines") or []
    if not baselines:
        raise ReportInputError(f"{f}: no baseline rows")
    attrs = tuple(baselines[0].get("di", {}))
    split = doc.get("split", {})
    parts = ", ".join(
        f"{name} {fmt_count(published_count(split[name]['records']))} records"
        + (f" / {split[name]['hospitals']} hospitals" if "hospitals" in split[name] else "")
        for name in ("train", "validation", "audit")
        if isinstance(split.get(name), dict) and "records" in split[name]
    )
    how = split.get("how", "")
    return InterventionsView(
        source=str(Path(path).name),
        model=f"{doc.get('model', '?')} ({doc.get('model_id', '?')})",
        split=f"{parts}; {how}" if how else parts,
        headings=tuple(h for h, _, _ in TABLE6),
        rows=tuple(tuple(_fmt(fmt, b.get(k)) for _, k, fmt in TABLE6) for b in baselines),
        attributes=attrs,
        di_rows=tuple(
            (b.get("baseline", "?"), *(_fmt("{:.3f}", b.get("di", {}).get(a)) for a in attrs))
            for b in baselines
        ),
        notes=tuple(str(n) for n in doc.get("notes") or ()),
    )
