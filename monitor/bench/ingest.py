"""`vfr-monitor bench ingest`: raw kafka-python consumption vs the whole pipeline, one run.

Both consume the same pre-produced topic (different consumer groups), so the
ratio pipeline_eps / raw_eps says what validation, DuckDB, windows and the
evaluations (12 models, every 1,000 records per model) cost on top of reading
Kafka. The pipeline's clock stops after ``Pipeline.close()``: evaluations the
worker process still computes when the last batch is stored count as work.
RSS (of this process; the worker's is not included) is sampled during the
pipeline run; the first and last quarters (by messages consumed) are compared.
The pipeline's own stage timings (``decode_us``, ``validate_us``, ``store_us``,
``window_us``, ``evaluate_us``, ``state_us``, ``commit_us``: wall microseconds per
record, and the same as process CPU in ``cpu_per_record_us``) say where the time goes;
``source_us`` is the rest of the pipeline's wall time per record (polls not overlapped
with the sink, offset commits, lag reports, the final flush). ``raw_cpu_us`` and
``pipeline_cpu_us`` are this process's CPU per record in the two runs (the broker's
is not included), ``worker_cpu_us`` the evaluation worker process's: on a shared machine
they move less with the neighbours' load than the wall-clock ratio does.
``cpu_ceiling_ratio`` is the ratio the pipeline's and worker's CPU would allow if it were
spread perfectly over all cores: a target above it cannot be met by overlapping work,
only by doing less of it.
Without ``--bootstrap`` a local broker is started from deploy/kafka/kafka.sh and
stopped afterwards.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from consumers.base import Origin
from consumers.encoding import encode_record
from consumers.kafka_source import (
    KafkaSource,
)
from consumers.kafka_tools import (
    consume_raw,
    ensure_topic,
    produce_records,
)
from monitor.bench.synthetic import synthetic_window, with_bench_models
from monitor.config import MonitorConfig, StartupError, config_from_mapping
from monitor.config.sources import KafkaConfig
from monitor.store import Store, queries
from monitor.stream import eval_worker
from monitor.stream.pipeline import Pipeline

KAFKA_SH = Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "kafka.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_broker() -> Iterator[str]:
    """A throw-away single-node broker on 127.0.0.1 (provisioned and cached by kafka.sh).

    A failure to provision or start raises :class:`StartupError` with kafka.sh's own last
    lines (the script's messages, no record values), which the CLI prints in full.
    """
    run_dir = Path(tempfile.mkdtemp(prefix="vfr-bench-kafka-"))
    _kafka_sh("provision")
    port, cport = _free_port(), _free_port()
    out = _kafka_sh("start", "--port", str(port), "--controller-port", str(cport),
                    "--dir", str(run_dir), "--partitions", "3")  # fmt: skip
    try:
        yield out.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(KAFKA_SH), "stop", "--dir", str(run_dir)], capture_output=True)


def _kafka_sh(*args: str) -> str:
    done = subprocess.run(["bash", str(KAFKA_SH), *args], capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise StartupError(
            f"deploy/kafka/kafka.sh {args[0]} failed (exit {done.returncode}):\n{tail}"
        )
    return done.stdout


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
            self.duckdb_mb.append((self.seen, self.pipeline.store.memory_mb()))


def two_kind_messages(records: list[dict], lag: int) -> list[dict]:
    """Each scored record as its prediction and, ``lag`` records later, its outcome (issue
    23): the interleaving of a feed whose labels come days after scoring."""
    out: list[dict] = []
    for i, rec in enumerate(records):
        out.append({**{k: v for k, v in rec.items() if k != "label"}, "kind": "prediction"})
        if i >= lag:
            out.append(_outcome_of(records[i - lag]))
    out.extend(_outcome_of(r) for r in records[max(len(records) - lag, 0) :])
    return out


def _outcome_of(rec: dict) -> dict:
    return {"kind": "outcome", "model_id": rec["model_id"], "record_id": rec["record_id"],
            "label": int(rec["label"]), "event_time": "2026-11-02T00:00:00Z"}  # fmt: skip


def _sink_alone(
    cfg: MonitorConfig, messages: list[dict], max_batch: int, limit: int = 200_000
) -> dict:
    """The same pipeline fed the same payloads without Kafka: wall and CPU per record.

    Why: ``raw_us + sink_alone_us`` is what the pipeline would take if reading and
    ingesting never overlapped; the Kafka run's ``pipeline_us`` against it says how much
    of the sink's work the prefetching poll thread actually hides (kafka-python decodes
    records in Python, so the two threads share one GIL). The first ``limit`` records
    only, in a fresh file, partitions keyed by model as the producer keys them.
    """
    records = messages[:limit]
    payloads = [encode_record(r) for r in records]
    parts = {m: i % 3 for i, m in enumerate(sorted({r["model_id"] for r in records}))}
    origins = [Origin("sink-alone", parts[r["model_id"]], i) for i, r in enumerate(records)]
    with tempfile.TemporaryDirectory() as d:
        store = Store(Path(d) / "alone.duckdb", cfg)
        pipeline = Pipeline(cfg, store)
        t0, c0 = time.perf_counter(), time.process_time()
        for s in range(0, len(payloads), max_batch):
            pipeline.ingest_batch(payloads[s : s + max_batch], origins[s : s + max_batch])
        pipeline.close()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        store.close()
    n = max(len(payloads), 1)
    return {"sink_alone_records": len(payloads), "sink_alone_us": round(wall / n * 1e6, 2),
            "sink_alone_cpu_us": round(cpu / n * 1e6, 2)}  # fmt: skip


def run_ingest_bench(
    events: int = 1_000_000,
    models: int = 12,
    bootstrap: str | None = None,
    config: MonitorConfig | None = None,
    max_batch: int = 5000,
    evaluations: bool = True,
    two_kinds: bool = False,
) -> dict:
    """Raw kafka-python consumption against the whole pipeline on the same events.

    ``config``: the service configuration to bench (window, hop, metrics, attributes,
    DuckDB memory); default a 10,000-record window with a hop of 1,000 and no wall-clock
    hops. ``evaluations=False`` switches hop evaluations off (the hop is set beyond the
    stream) so that the ingest path (decode, validate, dedupe, store, window) is timed alone.
    """
    if bootstrap is None:
        with local_broker() as b:
            return run_ingest_bench(events, models, b, config, max_batch, evaluations, two_kinds)
    cfg = config or config_from_mapping(
        {"window": {"size": 10_000, "hop_records": 1_000, "hop_seconds": 0}}
    )
    cfg = with_bench_models(cfg, models)
    if not evaluations:
        window = cfg.window.model_copy(update={"hop_records": 1 << 62, "hop_seconds": 0.0})
        cfg = cfg.model_copy(update={"window": window})
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, topic, partitions=3)
    # two kinds: each record is two messages (its prediction, and its outcome later)
    per_model = max(1, events // models // (2 if two_kinds else 1))
    frame = synthetic_window(per_model, models=models, seed=1, config=cfg).drop(
        columns=["decision"]
    )
    frame["event_time"] = "2026-11-01T00:00:00Z"
    frame = frame.sample(frac=1.0, random_state=2)  # models interleave in the topic
    messages = frame.to_dict("records")
    if two_kinds:
        messages = two_kind_messages(messages, lag=min(5 * max_batch, len(messages)))
    t0 = time.perf_counter()
    n = produce_records(bootstrap, topic, messages)
    produce_s = time.perf_counter() - t0

    c0 = time.process_time()
    raw_s = consume_raw(bootstrap, topic, f"raw-{topic}", n, max_batch)
    raw_cpu = time.process_time() - c0

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
        w0 = eval_worker.cpu_seconds()
        t0, c0 = time.perf_counter(), time.process_time()
        source.run(threading.Event(), max_messages=n)
        sink.pipeline.close()  # evaluations still in the worker are part of the work
        pipe_s = time.perf_counter() - t0
        pipe_cpu = time.process_time() - c0
        worker_cpu = eval_worker.cpu_seconds() - w0
        stop.set()
        sampler.join()
        source.close()
        stats = sink.pipeline.stats
        n_evaluations = int(
            store.read(queries.counts)["window_results"] / (len(cfg.metrics) * len(cfg.attributes))
        )
        store.close()
    samples.append((n, _rss_mb()))
    alone = _sink_alone(cfg, messages, max_batch)
    serial_us = raw_s / n * 1e6 + alone["sink_alone_us"]
    stage_us = stats.per_record_us()
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
        "evaluations_enabled": evaluations,
        "two_kinds": two_kinds,
        "hop_records": cfg.window.hop_records if evaluations else None,
        "evaluations": n_evaluations,
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
        # per record, measured inside the pipeline (perf_counter around each stage, summed)
        **stage_us,
        "source_us": round(pipe_s / n * 1e6 - sum(stage_us.values()), 2),
        "raw_us": round(raw_s / n * 1e6, 2),
        # process CPU per record (this process's threads; not the broker's, not the
        # evaluation worker's): steadier than wall time on a shared machine
        "raw_cpu_us": round(raw_cpu / n * 1e6, 2),
        # reading and ingesting one after the other (no overlap), and how much of that the
        # prefetching poll thread saved in the Kafka run
        **alone,
        "serial_us": round(serial_us, 2),
        "overlap": round(1 - (pipe_s / n * 1e6) / serial_us, 3),
        "pipeline_cpu_us": round(pipe_cpu / n * 1e6, 2),
        "worker_cpu_us": round(worker_cpu / n * 1e6, 2),
        # the best ratio this much CPU allows: the pipeline's and the worker's CPU per
        # record spread perfectly over every core (the broker's CPU and the GIL ignored,
        # so an upper bound); a target above it needs less CPU, not better overlap
        "cores": os.cpu_count(),
        "cpu_ceiling_ratio": round(
            (raw_s / n) / ((pipe_cpu + worker_cpu) / n / (os.cpu_count() or 1)), 3
        ),
        "cpu_per_record_us": stats.per_record_us(cpu=True),
        "per_message_batches": stats.per_message_batches,
        "batches": stats.batches,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
