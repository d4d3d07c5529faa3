"""The golden run's hashes are the stored ones: no output of the product changed.

A failure lists the artefacts that differ (tests/golden/run.py says what each one is) and
the one command that regenerates the hashes after an intended behaviour change.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.golden import run


def test_every_golden_artefact_is_unchanged() -> None:
    """Run in a process of its own, with the numerical libraries' CPU-dependent choices
    pinned (run.PINNED_ENV: numpy here has made its own already)."""
    done = run.run_pinned(["--check"])
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "golden artefacts unchanged" in done.stdout


def test_the_pins_are_what_numpy_and_openblas_run_with() -> None:
    """A pin that a library ignored would leave the hashes CPU-dependent again: the pinned
    process reports numpy's baseline dispatch only and OpenBLAS's Haswell kernels."""
    probe = (
        "import numpy, threadpoolctl, json; "
        "from numpy._core._multiarray_umath import __cpu_dispatch__ as d, __cpu_features__ as f; "
        "b = [i for i in threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas']; "
        "print(json.dumps({'dispatch': [x for x in d if f.get(x)], "
        "'blas': [(i['architecture'], i['num_threads']) for i in b]}))"
    )
    env = {**os.environ, **run.PINNED_ENV}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    got = json.loads(out)
    assert got["dispatch"] == [], got  # numpy's baseline loops only
    assert got["blas"] and all(b == ["Haswell", 1] for b in got["blas"]), got


def test_a_changed_artefact_is_named_with_the_command_that_regenerates() -> None:
    """The check's own logic, on hashes that differ in each way it reports."""
    expected = {"a": "1", "b": "2", "gone": "3"}
    actual = {"a": "1", "b": "changed", "new": "4"}
    diff = run.differences(expected, actual)
    assert diff == ["  changed:     b", "  missing now: gone", "  new:         new"]
    message = run.check_message(diff)
    assert "3 golden artefact(s) differ" in message and run.REGENERATE in message


def test_the_metrics_normalisation_keeps_counts_and_drops_measured_times() -> None:
    text = "\n".join([
        "# HELP vfr_evaluation_duration_seconds Wall time.",
        'vfr_evaluation_duration_seconds_bucket{le="0.1",model="m"} 3.0',
        'vfr_evaluation_duration_seconds_count{model="m"} 4.0',
        'vfr_evaluation_duration_seconds_sum{model="m"} 0.123',
        'vfr_evaluation_duration_seconds_created{model="m"} 1.7e9',
        'vfr_job_duration_seconds{task="axis2"} 0.5',
        "process_cpu_seconds_total 1.5",
        'vfr_evaluations_total{model="m"} 4.0',
    ])  # fmt: skip
    out = run.normalised_metrics(text).splitlines()
    assert 'vfr_evaluation_duration_seconds_count{model="m"} 4.0' in out
    assert 'vfr_evaluations_total{model="m"} 4.0' in out
    assert 'vfr_evaluation_duration_seconds_sum{model="m"} <duration>' in out
    assert 'vfr_job_duration_seconds{task="axis2"} <duration>' in out
    assert not any("_created" in line or "process_" in line for line in out)
    assert out == sorted(out)


def test_canonical_json_has_one_spelling_for_equal_values() -> None:
    a = run.canonical_json({"b": '{"y": 1, "x": [1.5, NaN]}', "a": 2})
    b = run.canonical_json({"a": 2, "b": {"x": [1.5, float("nan")], "y": 1}})
    assert a == b
