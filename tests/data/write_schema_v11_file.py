"""Write a DuckDB file with the code of the tree on ``sys.path`` (run from that tree).

Kept with the file it wrote (``tests/data/schema-v11-2026-12-02.duckdb.gz``, README.md):
tests/scenarios/test_old_file.py opens that file with today's code. The configuration
here is the test's (``OLD_CONFIG``), so both read the file the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: the configuration the file was written with (the test opens it with the same)
OLD_CONFIG: dict[str, Any] = {
    "window": {"size": 600, "hop_records": 200, "hop_seconds": 0},
    "axis1": {"K": 40},
    "service": {"evaluation_worker": False, "unknown_models": "admit",
                "event_time_bounds": "none", "payload_hash_key": "ab" * 16},
}  # fmt: skip


def write(out: Path) -> None:
    from monitor.config import config_from_mapping
    from monitor.service.app import MonitorService
    from tests.support.pipeline_runs import feed_service

    svc = MonitorService(config_from_mapping(OLD_CONFIG), db_path=str(out), start_scheduler=False)
    try:
        feed_service(svc, 700, seed=11, model="model-a")
        feed_service(svc, 500, seed=12, start=700, model="model-b")
        for job in ("job_axis2", "job_axis3", "job_equilense"):
            getattr(svc, job)()
        feed_service(svc, 300, seed=13, start=1200, model="model-a")
    finally:
        svc.close()


if __name__ == "__main__":
    write(Path(sys.argv[1]))
