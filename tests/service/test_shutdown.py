"""The bounded shutdown: a signal stops the service, or after the grace period every
thread's stack goes to the log and the process exits with status 70.

Real signals are sent to this process (SIGTERM to a guard installed here, SIGUSR1 to
faulthandler); only the final ``os._exit`` is replaced by a recorder, since it would end the
test run itself. A real service process exiting within its grace after SIGTERM, under
scrapes and rebalances, is tests/scenarios/test_rebalance_scrape.py.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time

from monitor.service.shutdown import EXIT_STUCK, ShutdownGuard, thread_stacks


def test_sigterm_sets_stop_and_calls_on_stop_from_the_watcher_thread():
    stop = threading.Event()
    seen: list[str] = []
    exits: list[int] = []
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    guard = ShutdownGuard(stop, 30, on_stop=lambda: seen.append(threading.current_thread().name),
                          exit=exits.append)  # fmt: skip
    try:
        guard.install()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(10)
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == ["vfr-signals"] and exits == []
    finally:
        guard.cancel()
        guard.uninstall()
    assert {s: signal.getsignal(s) for s in old} == old  # the signals are given back


def test_past_the_grace_the_stacks_are_logged_and_the_exit_is_70(caplog):
    stop = threading.Event()
    exits: list[int] = []
    stuck = threading.Event()

    def blocked_worker() -> None:  # a thread that does not stop: its stack must be named
        stuck.wait(30)

    t = threading.Thread(target=blocked_worker, name="stuck-worker", daemon=True)
    t.start()
    guard = ShutdownGuard(stop, 0.5, exit=exits.append)
    with caplog.at_level(logging.ERROR, logger="monitor.service.shutdown"):
        guard.request("SIGTERM")
        deadline = time.monotonic() + 10
        while not exits and time.monotonic() < deadline:
            time.sleep(0.02)
    stuck.set()
    assert exits == [EXIT_STUCK]
    text = caplog.text
    assert "did not finish within 0 s" in text or "did not finish within 1 s" in text
    assert "stuck-worker" in text and "blocked_worker" in text


def test_a_second_request_does_not_restart_the_clock():
    stop = threading.Event()
    exits: list[int] = []
    guard = ShutdownGuard(stop, 0.5, exit=exits.append)
    guard.request("SIGTERM")
    time.sleep(0.3)
    guard.request("SIGTERM")
    deadline = time.monotonic() + 5
    while not exits and time.monotonic() < deadline:
        time.sleep(0.02)
    assert exits == [EXIT_STUCK]


def test_thread_stacks_names_every_thread():
    text = thread_stacks()
    assert "MainThread" in text and "test_thread_stacks_names_every_thread" in text


def test_sigusr1_dumps_every_stack_of_a_real_process_without_stopping_it():
    code = (
        "import threading, time, signal\n"
        "from monitor.service.shutdown import ShutdownGuard\n"
        "stop = threading.Event()\n"
        "ShutdownGuard(stop, 5).install()\n"
        "print('ready', flush=True)\n"
        "stop.wait(30)\n"
        "print('stopped', flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        assert proc.poll() is None  # still running
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "stopped" in out
    assert "Current thread" in err or "Thread 0x" in err  # faulthandler's dump
