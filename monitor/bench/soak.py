"""`vfr-monitor bench soak`: steady load through the real broker, scheduler running.

A producer *process* (so its JSON encoding does not share this process's GIL) writes
``rate`` records a second for ``minutes`` to a fresh topic; the service (store, pipeline,
evaluation worker, scheduler with Axis 2/3 and retention every minute, Kafka source, wall-
clock ticker) runs here, as `vfr-monitor run` wires it. Once a second the sampler notes
this process's RSS plus the evaluation worker's, and the consumer lag. After the producer
stops it waits for the lag to reach 0, then counts what the DuckDB file holds.

Reported: ``rss_start_mb`` (at ``steady_from_s``: 10 % of the run, or once the compressed
retention deletes as fast as records arrive, if later), ``rss_end_mb`` (when the producer
stops), ``lost`` (produced and not accepted), ``duplicates`` (accepted or stored more than
once), ``max_lag`` and ``drain_s`` (producer stop to lag 0 with everything accepted).
Targets: RSS growth under 10 %, lost = duplicates = 0, drain within 10 s.
``duckdb_start_mb``/``duckdb_end_mb`` are what DuckDB accounts for (its buffer pool: data
blocks and the (model_id, record_id) index of the stored records, capped by
``duckdb_memory_limit``); ``rss_growth_outside_duckdb`` is the growth of the rest.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from consumers.kafka_source import KafkaSource
from consumers.kafka_tools import ensure_topic
from monitor.bench.ingest import local_broker
from monitor.bench.soak_producer import produce
from monitor.config import MonitorConfig, config_from_mapping
from monitor.config.sources import KafkaConfig


def _rss_mb(pid: int | str = "self") -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _children_rss_mb() -> float:
    """RSS of this process's children (the evaluation worker)."""
    total = 0.0
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            for pid in (task / "children").read_text().split():
                total += _rss_mb(pid)
    return total


#: The audit cohort and the record retention, compressed from 90 and 400 days to 30 and 60
#: seconds, so that a 10-minute run reaches the steady state a deployment reaches after
#: its retention period: the cohort stops growing, and retention deletes records as fast
#: as they arrive. RSS is measured from then on (STEADY_AFTER_S).
SOAK_COHORT_S = 30
SOAK_RETENTION_S = 60
#: The longest outcome delay, compressed with them (30 days to 30 seconds): the retention
#: must cover it (a prediction is kept while its outcome may still arrive), and the soak's
#: records carry their outcome, so it only sets how long an unmatched one would be kept.
SOAK_OUTCOME_DELAY_S = 30
STEADY_AFTER_S = SOAK_RETENTION_S + 30


class _DuckDBSampler:
    """The pipeline as the source's sink, noting what DuckDB accounts for every 10th batch,
    on the ingest thread (a probe from another thread keeps DuckDB from releasing memory)."""

    def __init__(self, pipeline: Any, t0: float) -> None:
        self.pipeline = pipeline
        self.t0 = t0
        self.batches = 0
        self.samples: list[tuple[float, float]] = []  # (seconds since t0, MB)

    def ingest_batch(self, payloads: Any, origins: Any) -> None:
        self.pipeline.ingest_batch(payloads, origins)
        self.batches += 1
        if self.batches % 10 == 0:
            self.samples.append((time.monotonic() - self.t0, self.pipeline.store.memory_mb()))


def _accepted(svc: Any) -> int:
    cur = svc.store.cursor()
    try:
        (n,) = cur.execute("SELECT COALESCE(sum(records), 0) FROM model_state").fetchone()
    finally:
        cur.close()
    return int(n)


def _duckdb_mb(svc: Any) -> float:
    """What DuckDB accounts for after the run (the ingest thread has stopped)."""
    return round(svc.store.memory_mb(), 1)


def soak_config(db: str) -> MonitorConfig:
    return config_from_mapping(
        {
            "window": {"size": 10_000, "hop_records": 1_000, "hop_seconds": 10},
            "service": {
                # unregistered bench models; event times are the producer's wall clock
                "intake": {"unknown_models": "admit", "event_time_bounds": "wall-clock"},
                "axes": {"cohort_days": SOAK_COHORT_S / 86_400, "axis2_interval_s": 60,
                         "axis3_interval_s": 60, "equilense_interval_s": 3_600},
                "retention": {"discharge_days": SOAK_RETENTION_S / 86_400, "interval_s": 15},
                "store": {"db_path": db}, "http": {"port": 0},
            },
            "outcomes": {"max_outcome_delay_days": SOAK_OUTCOME_DELAY_S / 86_400},
        }
    )  # fmt: skip


def run_soak(
    minutes: float = 10.0, rate: float = 5_000.0, bootstrap: str | None = None
) -> dict[str, Any]:
    if bootstrap is None:
        with local_broker() as b:
            return run_soak(minutes, rate, b)
    from monitor.service.app import MonitorService, run_until_stopped

    seconds = minutes * 60
    topic = f"soak-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, topic, partitions=3)
    with tempfile.TemporaryDirectory(prefix="vfr-soak-") as tmp:
        cfg = soak_config(str(Path(tmp) / "soak.duckdb"))
        svc = MonitorService(cfg, source_name="kafka", start_scheduler=True)
        kcfg = KafkaConfig(
            bootstrap_servers=(bootstrap,), topics=(topic,), group_id=f"g-{topic}",
            max_batch=5_000,
        )  # fmt: skip
        sampler = _DuckDBSampler(svc.pipeline, time.monotonic())
        source = KafkaSource(kcfg, sampler)
        svc.source_health = source.health
        svc.start()
        stop = threading.Event()
        runner = threading.Thread(
            target=run_until_stopped, args=(svc, source, stop), daemon=True
        )
        runner.start()
        ctx = multiprocessing.get_context("spawn")
        sent_q = ctx.Queue()
        producer = ctx.Process(target=produce, args=(bootstrap, topic, rate, seconds, sent_q))
        samples: list[tuple[float, float, int]] = []  # (t, rss, lag)
        t0 = sampler.t0 = time.monotonic()
        producer.start()
        while producer.is_alive():
            lag = sum(svc._lag.values())
            samples.append((time.monotonic() - t0, _rss_mb() + _children_rss_mb(), lag))
            time.sleep(1.0)
        sent = int(sent_q.get(timeout=60))
        producer.join()
        stopped = time.monotonic()
        rss_end = _rss_mb() + _children_rss_mb()
        drain_s = None
        while time.monotonic() - stopped < 300:
            lag = sum(source.lag(exact=True).values())
            samples.append((time.monotonic() - t0, _rss_mb() + _children_rss_mb(), lag))
            if lag == 0 and _accepted(svc) >= sent:
                drain_s = round(time.monotonic() - stopped, 1)
                break
            time.sleep(0.2)
        stop.set()
        runner.join(timeout=60)
        duckdb_end_mb = _duckdb_mb(svc)
        source.close()
        svc.close()
        from monitor.store import Store

        store = Store(cfg.service.store.db_path, cfg)
        # retention deletes records: what was accepted is each model's stream position
        # (model_state.records), which deletions do not lower; every produced id is unique
        c = store.cursor()

        def scalar(sql: str) -> int:
            return int(c.execute(sql).fetchone()[0])  # type: ignore[index]  # an aggregate: one row

        accepted = scalar("SELECT COALESCE(sum(records), 0) FROM model_state")
        stored = scalar("SELECT count(*) FROM discharges")
        distinct = scalar("SELECT count(DISTINCT (model_id, record_id)) FROM discharges")
        evaluations = scalar(
            "SELECT count(*) FROM (SELECT DISTINCT model_id, evaluation FROM window_results)"
        )
        store.close()
    steady = max(0.1 * seconds, STEADY_AFTER_S)
    at_10 = [r for t, r, _ in samples if t >= steady] or [samples[-1][1]]
    rss_start = at_10[0]
    duck_10 = [mb for t, mb in sampler.samples if t >= steady] or [duckdb_end_mb]
    duckdb_start_mb = round(duck_10[0], 1)
    outside_start = rss_start - duckdb_start_mb
    return {
        "minutes": minutes,
        "rate": rate,
        "events": sent,
        "achieved_rate": round(sent / seconds, 1),
        "evaluations": evaluations,
        "rss_start_mb": round(rss_start, 1),
        "rss_end_mb": round(rss_end, 1),
        "rss_growth": round(rss_end / rss_start - 1, 4) if rss_start else None,
        "duckdb_start_mb": duckdb_start_mb,
        "duckdb_end_mb": duckdb_end_mb,
        # the rest of the process (windows, trackers, cohort frames, the evaluation worker)
        "rss_growth_outside_duckdb": (
            round((rss_end - duckdb_end_mb) / outside_start - 1, 4) if outside_start > 0 else None
        ),
        "duckdb_memory_limit": cfg.service.store.memory_limit,
        "steady_from_s": round(steady, 1),
        "stored_at_end": stored,
        "lost": max(0, sent - accepted),
        # accepted twice (a redelivery not recognised), or stored twice in the table
        "duplicates": max(0, accepted - sent) + (stored - distinct),
        "max_lag": max(lag for _, _, lag in samples),
        "drain_s": drain_s,
    }
