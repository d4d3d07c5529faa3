"""The producer process of `vfr-monitor bench soak`.

A module of its own so that the spawned process imports only what producing needs
(kafka-python, orjson, the synthetic records), not the service the soak runs in the parent:
importing :mod:`monitor.bench.soak` pulls in the pipeline and the scheduled axes (scikit-learn),
which took the child 10 s of a loaded machine before it sent its first record.
"""

from __future__ import annotations

import time
from typing import Any

from consumers.kafka_source import _kafka
from monitor.bench.synthetic import synthetic_window


def produce(bootstrap: str, topic: str, rate: float, seconds: float, out: Any) -> None:
    """One KafkaProducer, paced chunks of synthetic records (unique ids, keyed by model)
    every 100 ms for ``seconds``; puts the number sent on ``out``."""
    import orjson

    producer = _kafka().KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    per_model = max(1, int(rate // 40))  # 4 models, a chunk every 100 ms
    start = time.monotonic()
    sent, k = 0, 0
    while time.monotonic() - start < seconds:
        df = synthetic_window(per_model, models=4, seed=k).drop(columns=["decision"])
        df["record_id"] = [f"s{k}-{i}" for i in range(len(df))]
        # discharged now: the audit cohort (the last cohort_days) slides with the stream
        df["event_time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for rec in df.to_dict("records"):
            producer.send(topic, orjson.dumps(rec), key=rec["model_id"].encode())
        sent += len(df)
        k += 1
        delay = start + sent / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    producer.flush(timeout=120)
    producer.close()
    out.put(sent)
