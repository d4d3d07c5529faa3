"""`vfr-monitor demo`: the smallest end-to-end run that exists so far.

A seeded synthetic window goes through validation, count tables and Axis 1;
the grid of verdicts and flip rates is printed per model. (The streaming demo
with Kafka-free ingestion, scheduled axes and the exporter replaces this once
those parts land.)
"""

from __future__ import annotations

import time

import numpy as np

from monitor.axes_runner import run_axis1
from monitor.axis1 import CellResult
from monitor.config import MonitorConfig
from monitor.schema import validate_records
from monitor.synthetic import synthetic_window
from monitor.tables import tables_from_frame


def format_grid(results: list[CellResult], config: MonitorConfig) -> str:
    """One block per model: metrics as rows, attributes as columns, 'verdict VFR' per cell."""
    attrs = [a.name for a in config.attributes]
    lines = []
    for model in sorted({r.model_id for r in results}):
        cells = {(r.metric, r.attribute): r for r in results if r.model_id == model}
        lines.append(f"model {model}  (cell: dominant verdict, VFR; '*' = VFR above tau)")
        lines.append("metric " + "".join(f"{a:>16}" for a in attrs))
        for rule in config.metrics:
            row = f"{rule.name:<7}"
            for a in attrs:
                r = cells[(rule.name, a)]
                flag = "*" if r.vfr > config.axis1.tau_vfr else " "
                row += f"{r.dominant_verdict:>9} {r.vfr:5.3f}{flag}"
            lines.append(row)
        lines.append("")
    return "\n".join(lines)


def run_demo(config: MonitorConfig, records: int = 20_000, models: int = 2) -> int:
    t0 = time.perf_counter()
    frame = synthetic_window(records, models=models, seed=config.axis1.seed, config=config)
    frame = frame.drop(columns=["decision"])
    frame["event_time"] = "2026-11-01T00:00:00Z"
    raw = frame.to_dict("records")
    # Two deliberately broken records show the dead-letter path.
    raw.append({**raw[0], "score": 1.7})
    raw.append({**raw[1], "race": "not-a-code"})
    checked = validate_records(raw, config)
    tables = tables_from_frame(checked.valid, config)
    t1 = time.perf_counter()
    results = run_axis1(tables, config, config.axis1.seed)
    t2 = time.perf_counter()
    print(
        f"vfr-monitor demo: {len(raw)} records in, {len(checked.valid)} valid, "
        f"rejected by reason: {checked.reason_counts()}"
    )
    print(
        f"Axis 1: {len(results)} cells, K={config.axis1.K}, N=min(window, {config.axis1.N}), "
        f"{(t2 - t1) * 1e3:.0f} ms (validation and tables {(t1 - t0) * 1e3:.0f} ms)\n"
    )
    print(format_grid(results, config))
    vfr = np.array([r.vfr for r in results])
    unstable = int((vfr > config.axis1.tau_vfr).sum())
    print(
        f"{unstable} of {len(results)} cells flip in more than "
        f"{config.axis1.tau_vfr:.0%} of resamples; {int((vfr > 0).sum())} flip at least once."
    )
    return 0
