"""`vfr-monitor bench ingest`: raw kafka-python consumption vs the whole pipeline, one run.

Both consume the same pre-produced topic (different consumer groups), so the
ratio pipeline_eps / raw_eps says what validation, DuckDB, windows and the
evaluations (12 models, every 1,000 records per model) cost on top of reading
Kafka. The pipeline's clock stops after ``Pipeline.close()``: evaluations the
worker process still computes when the last batch is stored count as work.
RSS (of this process; the worker's is not included) is sampled during the
pipeline run; the first and last quarters (by messages consumed) are compared.
Without ``--bootstrap`` a local broker is started from deploy/kafka/kafka.sh and
stopped afterwards.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from consumers.config import KafkaConfig
from consumers.kafka_source import KafkaSource, consume_raw, ensure_topic, produce_records
from monitor.config import MonitorConfig, config_from_mapping
from monitor.pipeline import Pipeline
from monitor.store import Store
from monitor.synthetic import synthetic_window

KAFKA_SH = Path(__file__).resolve().parents[1] / "deploy" / "kafka" / "kafka.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_broker() -> Iterator[str]:
    """A throw-away single-node broker on 127.0.0.1 (provisioned and cached by kafka.sh)."""
    run_dir = Path(tempfile.mkdtemp(prefix="vfr-bench-kafka-"))
    subprocess.run(["bash", str(KAFKA_SH), "provision"], check=True, capture_output=True)
    port, cport = _free_port(), _free_port()
    out = subprocess.run(
        ["bash", str(KAFKA_SH), "start", "--port", str(port), "--controller-port", str(cport),
         "--dir", str(run_dir), "--partitions", "3"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    try:
        yield out.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(KAFKA_SH), "stop", "--dir", str(run_dir)], capture_output=True)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class _CountingSink:
    """The pipeline as sink, counting messages for the RSS quarters."""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self.seen = 0
        self.batches = 0
        #: (messages seen, MB DuckDB accounts for), sampled between batches on the ingest
        #: thread: a probe from another thread keeps DuckDB from releasing memory and
        #: inflated RSS growth from 0.12 to 0.43 when tried
        self.duckdb_mb: list[tuple[int, float]] = []

    def ingest_batch(self, payloads, origins) -> None:
        self.pipeline.ingest_batch(payloads, origins)
        self.seen += len(payloads)
        self.batches += 1
        if self.batches % 10 == 0:
            cur = self.pipeline.store.cursor()
            try:
                (b,) = cur.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()
            finally:
                cur.close()
            self.duckdb_mb.append((self.seen, float(b) / 2**20))


def run_ingest_bench(
    events: int = 1_000_000,
    models: int = 12,
    bootstrap: str | None = None,
    config: MonitorConfig | None = None,
    max_batch: int = 5000,
) -> dict:
    if bootstrap is None:
        with local_broker() as b:
            return run_ingest_bench(events, models, b, config, max_batch)
    cfg = config or config_from_mapping(
        {"window": {"size": 10_000, "hop_records": 1_000, "hop_seconds": 0}}
    )
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, topic, partitions=3)
    per_model = max(1, events // models)
    frame = synthetic_window(per_model, models=models, seed=1, config=cfg).drop(
        columns=["decision"]
    )
    frame["event_time"] = "2026-11-01T00:00:00Z"
    frame = frame.sample(frac=1.0, random_state=2)  # models interleave in the topic
    t0 = time.perf_counter()
    n = produce_records(bootstrap, topic, frame.to_dict("records"))
    produce_s = time.perf_counter() - t0

    raw_s = consume_raw(bootstrap, topic, f"raw-{topic}", n, max_batch)

    with tempfile.TemporaryDirectory() as d:
        store = Store(Path(d) / "bench.duckdb", cfg)
        sink = _CountingSink(Pipeline(cfg, store))
        kcfg = KafkaConfig(
            bootstrap_servers=(bootstrap,), topics=(topic,), group_id=f"pipe-{topic}",
            max_batch=max_batch,
        )  # fmt: skip
        samples: list[tuple[int, float]] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.5):
                samples.append((sink.seen, _rss_mb()))

        sampler = threading.Thread(target=sample, daemon=True)
        source = KafkaSource(kcfg, sink)
        sampler.start()
        t0 = time.perf_counter()
        source.run(threading.Event(), max_messages=n)
        sink.pipeline.close()  # evaluations still in the worker are part of the work
        pipe_s = time.perf_counter() - t0
        stop.set()
        sampler.join()
        source.close()
        evaluations = int(
            store.counts()["window_results"] / (len(cfg.metrics) * len(cfg.attributes))
        )
        store.close()
    samples.append((n, _rss_mb()))
    first = [r for k, r in samples if k <= n / 4] or [samples[0][1]]
    last = [r for k, r in samples if k >= 3 * n / 4]
    rss_first, rss_last = statistics.median(first), statistics.median(last)

    def quarter_median(points: list[tuple[int, float]], last_quarter: bool) -> float:
        got = [v for k, v in points if (k >= 3 * n / 4 if last_quarter else k <= n / 4)]
        return round(statistics.median(got), 1) if got else float("nan")
    return {
        "events": n,
        "models": models,
        "max_batch": max_batch,
        "evaluations": evaluations,
        "produce_eps": round(n / produce_s),
        "raw_eps": round(n / raw_s),
        "pipeline_eps": round(n / pipe_s),
        "ratio": round(raw_s / pipe_s, 3),
        "rss_mb": round(rss_last, 1),
        "rss_first_quarter_mb": round(rss_first, 1),
        "rss_last_quarter_mb": round(rss_last, 1),
        "rss_growth": round(rss_last / rss_first - 1, 3),
        "duckdb_mb_first_quarter": quarter_median(sink.duckdb_mb, False),
        "duckdb_mb_last_quarter": quarter_median(sink.duckdb_mb, True),
    }
