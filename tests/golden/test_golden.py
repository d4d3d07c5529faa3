"""The golden run's hashes are the stored ones: no output of the product changed.

A failure lists the artefacts that differ (tests/golden/run.py says what each one is) and
the one command that regenerates the hashes after an intended behaviour change.
"""

from __future__ import annotations

from tests.golden import run


def test_every_golden_artefact_is_unchanged() -> None:
    expected = run.load_expected()
    actual = run.hashes(run.artefacts())
    diff = run.differences(expected, actual)
    assert not diff, run.check_message(diff)


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
