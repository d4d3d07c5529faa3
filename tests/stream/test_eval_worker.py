"""The evaluation worker process does not outlive the service, even after kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = r"""
import time
from monitor.stream import eval_worker
if __name__ == "__main__":
    pool = eval_worker._get_pool()
    pool.submit(time.sleep, 0).result()
    print(list(pool._processes)[0], flush=True)
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "zombie" not in status.lower()


def test_the_worker_exits_when_the_service_is_killed(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CODE],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    worker = int(proc.stdout.readline())
    assert _alive(worker)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    gone = not _alive(worker)
    if not gone:
        os.kill(worker, signal.SIGKILL)
    assert gone, "the evaluation worker outlived the killed service"
