"""The `vfr-monitor bench` commands run and print the keys their notes quote.

Smoke tests only: timings are measured by running the commands, never asserted here
(machines are shared and noisy). What is asserted is that each benchmark still compares
the fast path with its baseline and agrees with it (same pairs, VFR within tolerance).
"""

from __future__ import annotations

import json
import os

from monitor.cli import main


def _run(capsys, *argv: str) -> dict:
    assert main(["bench", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_bench_axes_runs_the_service_entry_points(capsys) -> None:
    out = _run(capsys, "axes", "--records", "20000", "--repeats", "1")
    assert out["cells"] == 28 and out["records"] == 20000
    assert out["axis2_s"] > 0 and out["axis3_s"] > 0


def test_bench_mppd_fast_matcher_agrees_with_the_oracle(capsys) -> None:
    out = _run(capsys, "mppd", "--n", "1500", "--n-large", "3000")
    assert out["same_pairs"] is True and out["speedup"] > 0


def test_bench_mppd_bound_times_exact_against_the_bounded_sample(capsys) -> None:
    """--bound: exact and bounded EquiLense side by side, with the sampled value's error;
    a size under the sample bound is computed on all records (identical figures)."""
    out = _run(capsys, "mppd", "--bound", "--sizes", "5000,30000", "--repeats", "1")
    small, large = out["sizes"]["5000"], out["sizes"]["30000"]
    assert small["bounded"]["method"] == "all records" and small["within_95"] is True
    assert small["bounded"]["mppd_disparity_group"] == small["full"]["mppd_disparity_group"]
    b = large["bounded"]
    assert b["method"] == "stratified sample" and b["records"] <= out["sample_records"]
    assert b["mppd_disparity_group_se"] > 0 and large["full_s"] > 0 and large["ratio"] > 0


def test_bench_axis1_fast_agrees_with_the_record_oracle(capsys) -> None:
    out = _run(capsys, "axis1", "--models", "1", "--window", "2000", "--repeats", "1")
    assert out["cells"] == 28 and out["max_vfr_diff"] <= out["vfr_tolerance"]
    # the floor is timed beside the engine, with the same draws
    assert out["floor_s"] > 0
    assert abs(out["floor_ratio"] - out["fast_s"] / out["floor_s"]) < 0.01
    # issue 24: the default intersections beside the attribute-only grid, checked too
    inter = out["intersections"]
    assert inter["configured"] == ["race_x_sex", "race_x_age_group"]
    assert (inter["attribute_only_cells"], inter["cells"]) == (28, 42)
    assert inter["groups"] == {"race_x_sex": 10, "race_x_age_group": 20}
    assert inter["oracle_cells_run"] == 14 and inter["max_vfr_diff"] <= inter["vfr_tolerance"]
    assert inter["time_ratio"] == round(inter["fast_s"] / inter["attribute_only_fast_s"], 3)


def test_bench_ingest_honours_the_config_and_can_leave_evaluations_out(
    capsys,
    tmp_path,
    kafka_broker,
) -> None:
    """--config sets the pipeline's window and hop; --no-evaluations times ingest alone."""
    cfg = tmp_path / "bench.toml"
    cfg.write_text('[window]\nsize = 500\nhop_records = 250\nhop_seconds = 0\n')
    common = ("--events", "6000", "--max-batch", "500", "--bootstrap", kafka_broker)
    out = _run(capsys, "ingest", *common, "--config", str(cfg))
    assert out["events"] == 6000 and out["evaluations_enabled"] is True
    assert out["hop_records"] == 250
    assert out["evaluations"] == 12 * (500 // 250)  # 12 models x 500 records / hop 250
    # the worker's Axis 1 CPU is counted in the CPU budget (it computed 24 evaluations)
    assert out["worker_cpu_us"] > 0 and out["cores"] == os.cpu_count()
    budget = (out["pipeline_cpu_us"] + out["worker_cpu_us"]) / out["cores"]
    assert abs(out["cpu_ceiling_ratio"] - out["raw_us"] / budget) < 0.02 * out["cpu_ceiling_ratio"]
    out = _run(capsys, "ingest", *common, "--config", str(cfg), "--no-evaluations")
    assert out["evaluations_enabled"] is False and out["evaluations"] == 0
    assert out["ratio"] > 0
    # the pipeline's own stage timings; clean synthetic input takes the columnar path
    for stage in ("decode_us", "validate_us", "store_us", "window_us", "commit_us"):
        assert out[stage] > 0 and out["cpu_per_record_us"][stage] >= 0
    assert out["per_message_batches"] == 0 and out["batches"] >= 12
    # the same payloads through the pipeline without Kafka, and the serial bound
    assert out["sink_alone_records"] == 6000 and out["sink_alone_us"] > 0
    assert abs(out["serial_us"] - out["raw_us"] - out["sink_alone_us"]) < 0.02


def test_bench_alerts_replays_a_small_demo_through_the_real_rules(capsys, tmp_path) -> None:
    """A short demo year through the real exporter, promtool rules and amtool routing."""
    out = _run(capsys, "alerts", "--records", "12000")
    models = out["models"]
    assert set(models) == {"los-xgb-discharge", "los-xgb-admission"}
    assert all(n > 0 for n in out["evaluations"].values())
    # routing comes from the shipped Alertmanager config
    assert out["receivers"]["VFRCertifiedVerdictChange"] == "governance"
    assert out["receivers"]["VFRConfirmedVerdictFlip"] == "governance-notices"
    assert out["receivers"]["VFRConfirmedTierDowngrade"] == "governance-notices"
    assert out["receivers"]["VFRVerdictUnreliable"] == "governance-notices"
    assert out["receivers"]["VFRConfirmedTierDowngradeNotice"] == "governance-notices"
    notices = {
        "VFRVerdictUnreliable", "VFRCatastrophicInstability", "VFRConfirmedTierDowngradeNotice",
        "VFRConfirmedVerdictFlip", "VFRConfirmedTierDowngrade",
    }
    for d in models.values():
        assert d["pages_total"] == sum(d["pages"].values())
        assert not set(d["pages"]) & notices
    # the replay clock: each evaluation lasts its event-time gap, cut to the rules' memory
    # (the demo's gaps, days, are longer than the shipped rules' memory, hours)
    replay = out["replay"]
    assert 0 < replay["rule_memory_s"] <= replay["longest_span_s"]
    assert replay["event_time_gap_hours"]["min"] * 3600 > replay["rule_memory_s"]
    # every counted episode is an alert promtool reported, on a known model
    assert sum(d["pages_total"] + d["notices_total"] for d in models.values()) == len(
        [e for e in out["episodes"] if e.get("model") in models]
    )
    assert out["planted"]["model"] == "los-xgb-discharge"
    assert main(["bench", "alerts", "--db", str(tmp_path / "missing.duckdb")]) == 2


def test_the_benches_find_the_broker_script_and_rule_files() -> None:
    """`bench ingest`/`bench soak` without --bootstrap start a broker with kafka.sh, and
    `bench alerts` reads the shipped rules: their paths must survive package moves (a move
    into monitor/bench/ once left `bench soak` looking for monitor/deploy/kafka/kafka.sh)."""
    from monitor.bench import alerts, ingest

    assert ingest.KAFKA_SH.is_file(), ingest.KAFKA_SH
    assert all(p.is_file() for p in (*alerts.RULE_FILES, alerts.ALERTMANAGER))


def test_bench_axes_from_store_times_both_paths_on_a_real_file(capsys) -> None:
    """Re-read and incremental jobs on one DuckDB file, checked to agree; a run after a day
    of records moves about two days of records (one in, one out), a run without new records
    none; memory per model reported."""
    out = _run(
        capsys, "axes", "--from-store", "--records-per-model", "9000", "--models", "2",
        "--repeats", "1",
    )  # fmt: skip
    assert out["same_results"] is True and out["models"] == 2
    assert out["reread_s"] > 0 and out["incremental_day_s"] > 0 and out["incremental_noop_s"] > 0
    per_day = 9000 / out["cohort_days"]
    assert 0 < out["records_moved_per_day_run"] <= 2 * 2 * per_day * 1.5
    assert set(out["noop_update_one_model_s"]) == {"9000", "1125"}
    assert all(b > 0 for b in out["memory_bytes_per_model"].values())


def test_bench_page_reads_the_status_page_while_the_demo_stream_runs(capsys, tmp_path) -> None:
    """Four real HTTP clients on the running service's ``/``, then the file's full report
    timed cold and cached; a before run gives ratios (before / after)."""
    from monitor.bench.page import with_before

    before = tmp_path / "before.json"
    before.write_text(json.dumps({"first_byte_p95_s": 30.0, "report_render_s": 12.0}))
    out = _run(capsys, "page", "--records", "6000", "--repeats", "1", "--before", str(before))
    assert out["clients"] == 4 and out["messages"] > 6000  # two models score the stream
    assert out["requests"] > 0 and out["failed_requests"] == 0
    assert out["first_byte_p50_s"] <= out["first_byte_p95_s"] <= out["first_byte_max_s"]
    assert out["report_render_s"] > 0 and out["report_render_cached_s"] > 0
    assert out["figure_cache"] is True and out["html_bytes"] > 0
    ratios = out["ratio_before_over_after"]
    assert set(ratios) == {"first_byte_p95_s", "report_render_s"}
    assert ratios["report_render_s"] == round(12.0 / out["report_render_s"], 2)
    zero = with_before({"report_render_s": 0.0}, {"report_render_s": 1.0})
    assert zero["ratio_before_over_after"] == {}  # no ratio to a zero


def _bench_parsers() -> dict:
    from tests.bench.test_bench_smoke import bench_subparsers

    return bench_subparsers()


def test_an_option_of_another_benchmark_is_a_usage_error(capsys) -> None:
    """Each benchmark takes only its own options: one meant for another is refused with the
    benchmark's own usage line (it used to run, silently ignoring it)."""
    import pytest

    for argv, wrong in (
        (["axis1", "--minutes", "3", "--clients", "9"], "--minutes 3 --clients 9"),
        (["soak", "--config", "x.toml"], "--config x.toml"),
        (["mppd", "--records", "5"], "--records 5"),
        (["page", "--sweep"], "--sweep"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["bench", *argv])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"usage: vfr-monitor bench {argv[0]} " in err
        assert f"error: unrecognized arguments: {wrong}" in err


def test_bad_size_lists_are_usage_errors(capsys) -> None:
    import pytest

    for argv, bad in (
        (["mppd", "--bound", "--sizes", "5000,x"], "--sizes: 'x'"),
        (["axis1", "--sweep", "--windows", "0"], "--windows: '0'"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["bench", *argv])
        assert exc.value.code == 2
        assert f"argument {bad} is not a whole number >= 1" in capsys.readouterr().err


def test_every_benchmark_and_option_has_help() -> None:
    parsers = _bench_parsers()
    for name, parser in parsers.items():
        assert parser.description, name
        for action in parser._actions:
            assert action.help and action.help.strip(), f"bench {name} {action.option_strings}"


def test_the_documented_bench_commands_parse(capsys) -> None:
    """Every `vfr-monitor bench ...` command line in README.md, docs/ and the Makefile is
    accepted by the parser (optional parts in [brackets] included, a `# comment` left out,
    a placeholder such as WHAT or COMMAND standing for every benchmark)."""
    import re
    from pathlib import Path

    from monitor.cli import build_parser

    root = Path(__file__).resolve().parents[2]
    files = [root / "README.md", root / "Makefile", *sorted((root / "docs").rglob("*.md"))]
    names = sorted(_bench_parsers())
    found = 0
    for path in files:
        for line in re.findall(r"vfr-monitor bench\b[^`\n|#]*", path.read_text()):
            words = line.replace("[", " ").replace("]", " ").split()[1:]
            if len(words) < 2:
                continue  # "each `vfr-monitor bench` command ...": prose, not a command
            if words[1].startswith("-"):  # `vfr-monitor bench --help`
                whats, rest = [None], words[1:]
            else:  # a placeholder in capitals (WHAT, COMMAND) stands for every benchmark
                whats, rest = (names if words[1].isupper() else [words[1]]), words[2:]
            for what in whats:
                argv = ["bench", *([what] if what else []), *rest]
                try:
                    ns = build_parser().parse_args(argv)
                except SystemExit as exc:  # 0: --help printed; 2: a usage error
                    err = capsys.readouterr().err
                    assert exc.code == 0, f"{path.name}: `{' '.join(argv)}` is refused: {err}"
                else:
                    assert ns.what == what
                found += 1
    assert found >= 10  # README's list and docs/scaling.md's table at least
