"""The hop evaluations' queue: what the worker computes equals what this thread computes,
finished jobs come back in the order they were taken, and a backlog is bounded."""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pandas as pd

from monitor.bench.synthetic import synthetic_window
from monitor.config import config_from_mapping
from monitor.core.results import WindowPosition
from monitor.stream.evaluation_queue import EvaluationQueue, Job, evaluation_seed
from monitor.stream.model_state import ModelState
from monitor.stream.window import ModelWindow, RecordBatch

CFG = config_from_mapping(
    {
        "window": {"size": 1500, "hop_records": 400, "hop_seconds": 0},
        "axis1": {"K": 60},
        "models": [{"id": "model-00"}, {"id": "model-01"}],
    }
)
NOW = pd.Timestamp("2026-11-01", tz="UTC")


def _records(model: str, n: int, seed: int, start: int = 0) -> RecordBatch:
    frame = synthetic_window(n, models=1, seed=seed).assign(model_id=model)
    frame = frame.assign(seq=np.arange(start, start + n), event_time=NOW)
    return RecordBatch.from_frame(frame, CFG)


def _job(model: str, end: int, future: Future | None = None) -> Job:
    return Job(model, NOW, 1, WindowPosition("count", 0, end, end, 1), future=future)


def test_the_worker_computes_bit_for_bit_what_this_thread_computes():
    here = EvaluationQueue(CFG, use_worker=False)
    worker = EvaluationQueue(CFG, use_worker=True)
    expected, batch = [], []
    # two models, one of them at two hop points of the same worker call (a later round)
    for model, seed, ends in (("model-00", 1, (400, 800)), ("model-01", 2, (400,))):
        ms = ModelState(ModelWindow(model, CFG))
        for k, end in enumerate(ends):
            ms.window.add(_records(model, end - ms.window.arrivals, seed + 10 * k,
                                   ms.window.arrivals))  # fmt: skip
            job = here.snapshot(ms.window, ms, NOW)
            here.compute(job, ms.window)
            expected.append(job)
            batch.append((worker.snapshot(ms.window, ms, NOW), ms.window.split_tables()))
            ms.evaluated = end
    assert not here.pending  # computed here: nothing queued
    worker.submit(batch)
    assert [j for j, _ in batch] == worker.pending
    assert [j.index for j in worker.pending] == [0, 1, 2]
    got = worker.collect(lambda job: job, wait_all=True)
    assert not worker.pending
    assert [(j.model_id, j.window.end_count) for j in got] == [
        ("model-00", 400), ("model-00", 800), ("model-01", 400),
    ]  # fmt: skip
    for job, ref in zip(got, expected, strict=True):
        assert job.seed == ref.seed and ref.results
        assert repr(job.computed()) == repr(ref.results)  # NaN-safe, bit for bit


def test_finished_jobs_come_back_in_stream_order_and_the_first_unfinished_stops_them():
    q = EvaluationQueue(CFG, use_worker=False)
    first, second = Future(), Future()
    q.pending += [_job("a", 400, first), _job("b", 400, second), _job("a", 800, first)]
    second.set_result([])
    assert q.collect(lambda job: job.model_id) == []  # the oldest is not finished
    first.set_result([])
    applied: list[str] = []

    def apply(job: Job) -> str | None:
        applied.append(job.model_id)
        return None if job.model_id == "b" else f"{job.model_id}@{job.window.end_count}"

    assert q.collect(apply) == ["a@400", "a@800"]
    assert applied == ["a", "b", "a"] and not q.pending  # None: applied, nothing to store


def test_more_than_max_backlog_worker_calls_outstanding_waits_for_the_oldest():
    q = EvaluationQueue(CFG, use_worker=False)
    calls = [Future() for _ in range(q.MAX_BACKLOG + 2)]
    q.pending += [_job(f"m{i}", 400, f) for i, f in enumerate(calls)]
    got = q.collect(lambda job: job.model_id)
    # the two oldest are taken (their caller waits for them) until MAX_BACKLOG are left
    assert got == ["m0", "m1"]
    assert len(q.pending) == q.MAX_BACKLOG
    assert q.collect(lambda job: job.model_id, wait_all=True) == [
        f"m{i}" for i in range(2, q.MAX_BACKLOG + 2)
    ]


def test_cancel_all_cancels_the_calls_not_started_and_empties_the_queue():
    q = EvaluationQueue(CFG, use_worker=False)
    waiting, running = Future(), Future()
    assert running.set_running_or_notify_cancel()
    q.pending += [_job("a", 400, waiting), _job("b", 400, running), _job("c", 400)]
    q.cancel_all()
    assert not q.pending
    assert waiting.cancelled() and not running.cancelled()


def test_a_snapshot_decides_a_release_only_at_a_position_not_evaluated_yet():
    q = EvaluationQueue(CFG, use_worker=False)
    ms = ModelState(ModelWindow("model-00", CFG))
    ms.window.add(_records("model-00", 400, 5))
    new = q.snapshot(ms.window, ms, NOW)
    assert new.bases is not None and new.release
    assert (new.predictions, new.window.end_count) == (400, 400)
    ms.evaluated = 400
    again = q.snapshot(ms.window, ms, NOW)
    assert again.bases is None and again.release == frozenset()
    assert again.seed == new.seed == evaluation_seed(CFG.axis1.seed, "model-00", 400)


def test_the_evaluation_seed_depends_on_model_and_position_only():
    seeds = {evaluation_seed(7, m, e) for m in ("model-00", "model-01") for e in (400, 800)}
    assert len(seeds) == 4 and all(0 <= s < 2**63 for s in seeds)
    assert evaluation_seed(7, "model-00", 400) == evaluation_seed(7, "model-00", np.int64(400))
    assert evaluation_seed(8, "model-00", 400) != evaluation_seed(7, "model-00", 400)
