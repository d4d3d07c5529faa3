"""The governance report on a real DuckDB file written by the real service path.

One module fixture runs the service in-process (pipeline, DuckDB, the scheduled axes run
on demand) on a seeded stream: two models, one of which gets a score update for one sex
group part-way (so verdicts flip and tiers move), and a third model with only 8 records,
evaluated by a wall-clock hop, so the small-cell rule has something to withhold. The
clock is a plain function the service accepts (time is an input, not a faked part).
The page is then checked as text, and loaded in Debian's headless Chromium.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import duckdb
import numpy as np
import pandas as pd
import pytest
from markupsafe import escape

from batch_axes.equilense import AttributeMPPD
from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.cli import main
from monitor.config import config_from_mapping
from monitor.core.explain import Cutoffs, explain_event
from monitor.report.data import (
    SMALL_CELL,
    cell_from_result,
    mppd_attributes,
    open_database,
    read_database,
    rolling_auroc,
)
from monitor.report.figures import _slug
from monitor.report.render import render_report
from monitor.service.app import MonitorService

CFG = config_from_mapping(
    {
        "window": {"size": 3000, "hop_records": 1000, "hop_seconds": 60},
        "axis1": {"K": 100},
        "axis2": {"sizes": [500, 1000, 2000], "R": 10},
        "axis3": {"folds": 5},
        "equilense": {"features": ["x1", "x2"]},
        # the fixture's models are unregistered and its year is replayed: admitted, unbounded
        "service": {"intake": {"unknown_models": "admit", "event_time_bounds": "none"}},
    }
)
START = pd.Timestamp("2026-01-01", tz="UTC")


def _frame(n: int, seed: int, day0: int, shift: bool) -> pd.DataFrame:
    """n records per model (model-00, model-01); with ``shift`` model-01 lowers sex=1 scores."""
    df = synthetic_window(n, models=2, seed=seed).drop(columns=["decision"])
    df["record_id"] = [f"s{seed}-{i}" for i in range(len(df))]
    rng = np.random.default_rng(seed)
    days = np.tile(np.sort(rng.uniform(day0, day0 + 60, n)), 2)
    df["event_time"] = [(START + pd.Timedelta(days=float(d))).isoformat() for d in days]
    x = rng.integers(0, 4, size=(n, 2))
    df["features"] = [{"x1": int(a), "x2": int(b)} for a, b in np.tile(x, (2, 1))]
    if shift:
        hit = (df["model_id"] == "model-01") & (df["sex"] == "1")
        df.loc[hit, "score"] = df.loc[hit, "score"] * 0.55
    return df


def _feed(service: MonitorService, df: pd.DataFrame, batch: int = 1000) -> None:
    payloads = [json.dumps(r).encode() for r in df.to_dict("records")]
    for i in range(0, len(payloads), batch):
        chunk = payloads[i : i + batch]
        service.pipeline.ingest_batch(chunk, [Origin("t", 0, i + k) for k in range(len(chunk))])
    service.pipeline.flush()


def _run_axes(service: MonitorService) -> None:
    for job in ("axis2", "axis3", "equilense"):
        outcome = service.scheduler.run_now_blocking(job)
        assert outcome.state == "success", outcome


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """The DuckDB file, plus the page rendered live from the running service's cursor."""
    d = tmp_path_factory.mktemp("report")
    now = [1_800_000_000.0]
    service = MonitorService(
        CFG, db_path=str(d / "svc.duckdb"), http_port=0, start_scheduler=False,
        clock=lambda: now[0],
    )  # fmt: skip
    service.start()
    try:
        first = _frame(2000, seed=1, day0=0, shift=False)
        _feed(service, first.sort_values("event_time", kind="stable"))
        _run_axes(service)
        second = _frame(4000, seed=2, day0=60, shift=True)
        _feed(service, second.sort_values("event_time", kind="stable"))
        tiny = first[first["model_id"] == "model-00"].head(8).assign(model_id="model-tiny")
        _feed(service, tiny)
        now[0] += 120  # a wall-clock hop evaluates the tiny model's 8 records
        service.pipeline.tick()
        _run_axes(service)
        cursor = service.store.cursor()
        try:
            live = render_report(cursor, config=CFG)
        finally:
            cursor.close()
    finally:
        service.close()
    return d / "svc.duckdb", live


@pytest.fixture(scope="module")
def page(db):
    return render_report(db[0])


def _latest(db_path) -> dict[tuple[str, str, str], dict]:
    with duckdb.connect(str(db_path), read_only=True) as c:
        rows = c.execute("SELECT model_id, metric, attribute, latest FROM cell_state").fetchall()
    return {(m, me, a): json.loads(lt) for m, me, a, lt in rows if lt}


def _section(html: str, model: str) -> str:
    m = re.search(rf'<section class="model" id="model-{re.escape(model)}">(.*?)</section>',
                  html, re.S)  # fmt: skip
    assert m, model
    return m.group(1)


def test_the_fixture_has_what_the_page_must_show(db):
    latest = _latest(db[0])
    models = {k[0] for k in latest}
    assert models == {"model-00", "model-01", "model-tiny"}
    assert all(v["window_n"] == 8 for k, v in latest.items() if k[0] == "model-tiny")
    assert {v["tier"] for k, v in latest.items() if k[0] != "model-tiny"} - {"Pending"}
    with duckdb.connect(str(db[0]), read_only=True) as c:
        flips = c.execute(
            "SELECT count(*) FROM events WHERE confirmed AND kind = 'verdict_flip' "
            "AND model_id = 'model-01'"
        ).fetchone()[0]
        axes = {r[0] for r in c.execute("SELECT DISTINCT axis FROM axis_results").fetchall()}
    assert flips >= 1 and axes == {"axis2", "axis3", "equilense"}


def test_page_is_self_contained_and_every_figure_is_inline_svg(page):
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', ""
    )
    for tag in ("<img", "<script", "<link", "<iframe", "<object", "@import"):
        assert tag not in page.lower(), tag
    assert not re.search(r"url\((?!#)", page)  # only references inside the page (clip paths)
    figures = re.findall(r"<figure>(.*?)</figure>", page, re.S)
    assert len(figures) >= 3 * 5  # grid, VFR, value, kappa, N*, MPPD, health per model
    for f in figures:
        assert f.lstrip().startswith("<svg"), f[:80]
    # a figure's element ids are unique on the page (clip paths of one must not hit another)
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))


def test_tier_grid_and_table_show_the_database_tiers(db, page):
    latest = _latest(db[0])
    grid = {
        tuple(g.split("--")[1:4]): g.split("--")[4]
        for g in re.findall(r'<g id="(tier--[^"]+)"', page)
    }
    # a cell of fewer than 11 window records shows that it exists, not its tier
    tiers = {k: v["tier"] if v["window_n"] >= SMALL_CELL else "Withheld" for k, v in latest.items()}
    want = {tuple(_slug(x) for x in k): _slug(t) for k, t in tiers.items()}
    assert grid == want
    rows = re.findall(
        r'data-model="([^"]+)" data-metric="([^"]+)" data-attribute="([^"]+)" '
        r'data-tier="([^"]+)"',
        page,
    )
    assert {(m, me, a): t for m, me, a, t in rows} == tiers
    assert len(rows) == len(latest)


def test_page_rendered_from_the_live_services_cursor_matches_the_file(db, page):
    live = db[1]
    assert set(re.findall(r'<g id="(tier--[^"]+)"', live)) == set(
        re.findall(r'<g id="(tier--[^"]+)"', page)
    )
    assert "Configuration hash" in live and "Thresholds hash" in page


def test_small_cell_rule_holds_on_the_page(db, page):
    tiny = _section(page, "model-tiny")
    rows = re.findall(r'<tr data-model="model-tiny".*?</tr>', tiny, re.S)
    assert len(rows) == 28
    for r in rows:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)
        # verdict, value, VFR, N* and kappa are withheld; no digit but in the rule text
        assert all(cells[k] == "&lt;11" for k in (3, 4, 5, 6, 7)), cells
    grid = re.search(r'<svg.*?id="fig-grid-model-tiny".*?</svg>', tiny, re.S).group(0)
    assert "VFR" not in grid and grid.count("n &lt;11") == 28
    # the tiny model's 8 records are a period of fewer than 11: withheld as a whole
    assert 'id="fig-health-model-tiny"' not in tiny
    assert "period holds fewer than 11 records" in tiny
    with duckdb.connect(str(db[0]), read_only=True) as c:
        eq = json.loads(
            c.execute(
                "SELECT payload FROM axis_results WHERE axis = 'equilense' "
                "AND model_id = 'model-tiny' ORDER BY computed_at DESC LIMIT 1"
            ).fetchone()[0]
        )
    # a model of fewer than 11 records keeps nothing of its MPPD but its id
    assert eq["models"]["model-tiny"] == {
        "records": f"<{SMALL_CELL}", "individual_fairness_gap": None, "mppd": {}
    }
    fig = re.search(r'id="fig-mppd-model-tiny".*?</svg>', tiny, re.S)
    if fig is not None:  # if drawn at all, no pair count is printed
        assert " pairs<" not in fig.group(0).replace("</text>", "<")
    # no sentence about the tiny model's events quotes a number either
    assert "VFR rose" not in tiny and "VFR fell" not in tiny


def test_an_event_reads_on_the_page_as_in_its_alert(db, page):
    """The page words each confirmed event with the sentence alerts and the API carry
    (explain_event on the event's stored axes, with the configured cutoffs)."""
    with open_database(db[0]) as c:
        data = read_database(c, CFG)
    checked = 0
    for m in data.models:
        if m.model_id == "model-tiny":
            continue
        for e in m.events:  # every event of the period is on the page (folded away)
            rule = next(r for r in CFG.metrics if r.name == e.metric)
            cutoffs = Cutoffs(
                rule.threshold, rule.direction, CFG.axis1.tau_vfr, CFG.axis2.n_field,
                CFG.axis3.kappa_cutoff,
            )  # fmt: skip
            assert str(escape(explain_event(e, cutoffs))) in page
            checked += 1
    assert checked


def test_small_cell_rule_is_applied_on_reading_whatever_the_writer_did():
    r = {"model_id": "m", "metric": "DI", "attribute": "sex", "threshold": 0.8,
         "direction": ">=", "value": 0.5, "vfr": 0.3, "ci_low": 0.1, "ci_high": 0.9,
         "dominant_verdict": "fail", "window_n": SMALL_CELL - 1, "tier": "Pending"}  # fmt: skip
    c = cell_from_result(r)
    assert c.suppressed and c.value is None and c.vfr is None and c.dominant_verdict is None
    assert not cell_from_result({**r, "window_n": SMALL_CELL}).suppressed
    # an MPPD payload written without suppression: 5 pairs are withheld here
    raw = {"sex": {
        "reference": {"reference": "0", "min_pairs": 30, "groups": [
            {"group": "0", "mean": 0.1, "pairs": 50, "low_support": False, "gap_to_reference": 0},
            {"group": "1", "mean": 0.4, "pairs": 5, "low_support": True, "gap_to_reference": 0.3},
        ]},
        "pairwise": {"groups": ["0", "1"], "min_pairs": 30, "means": [[0.1, 0.4], [0.4, 0.2]],
                     "pairs": [[50, 5], [5, 30]], "low_support": [[False, True], [True, False]]},
    }}  # fmt: skip
    (a,) = mppd_attributes({k: AttributeMPPD.from_dict(v) for k, v in raw.items()})
    assert a.bars[1].mean is None and a.bars[1].pairs is None and a.bars[1].suppressed
    # and, secondary suppression, the only other group (else it follows from a total)
    assert a.bars[0].mean is None and a.bars[0].suppressed
    # the matrix: the pair (0, 1) and the next smallest entry, (1, 1)
    assert a.pairs == ((50, None), (None, None)) and a.means == ((0.1, None), (None, None))


def test_rolling_auroc_leaves_out_blocks_with_a_small_class():
    rng = np.random.default_rng(0)
    label = (rng.random(3000) < 0.5).astype(np.int64)
    label[1000:2000] = 0
    label[1000:1005] = 1  # 5 positives: that block describes five patients
    score = rng.random(3000)
    got = rolling_auroc(label, score, 1000, 3000)
    assert [p.records for p in got] == [1000, 3000]


def test_chromium_loads_the_page_without_console_errors(page, tmp_path_factory):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed (make system-deps installs it)"
    d = tmp_path_factory.mktemp("browser")
    html = d / "report.html"
    html.write_text(page, encoding="utf-8")
    base = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr",
            "--v=0", "--hide-scrollbars", f"--user-data-dir={d / 'profile'}"]  # fmt: skip
    dom = subprocess.run(
        [*base, "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln]
    assert not console, console
    assert "Fairness reliability report" in dom.stdout
    assert dom.stdout.count("<svg") == page.count("<svg")
    shot = d / "report.png"
    run = subprocess.run(
        [*base, "--window-size=1200,3000", f"--screenshot={shot}", html.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert not [ln for ln in run.stderr.splitlines() if "CONSOLE" in ln]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_compare_lists_exactly_the_cells_that_differ(db, tmp_path, capsys):
    out = tmp_path / "reports"
    assert main(["report", "--db", str(db[0]), "--compare", "model-00", "model-01",
                 "--out", str(out) + "/"]) == 0  # fmt: skip
    (path,) = out.iterdir()
    assert path.name.startswith("report_model-00-vs-model-01_2026-")
    html = path.read_text()
    latest = _latest(db[0])
    differ = {
        (me, a)
        for (m, me, a), v in latest.items()
        if m == "model-00"
        and (v["tier"], v["dominant_verdict"])
        != (latest[("model-01", me, a)]["tier"], latest[("model-01", me, a)]["dominant_verdict"])
    }
    assert differ, "the score update must change some cell of model-01"
    table = re.search(r'<table class="changed">(.*?)</table>', html, re.S).group(1)
    assert len(re.findall(r"<tr><td", table)) == len(differ)
    assert 'id="fig-cmp-a-model-00"' in html and 'id="fig-cmp-b-model-01"' in html
    assert main(["report", "--db", str(db[0]), "--compare", "model-00", "nope"]) == 2
    assert "--compare nope: no such model" in capsys.readouterr().err


def test_versioned_names_never_overwrite(db, tmp_path, capsys):
    out = tmp_path / "reports"
    out.mkdir()
    args = ["report", "--db", str(db[0]), "--model", "model-01", "--out", str(out)]
    assert main(args) == 0
    (first,) = out.iterdir()
    assert re.fullmatch(r"report_model-01_2026-\d\d-\d\d_2026-\d\d-\d\d\.html", first.name)
    before = first.read_bytes()
    assert main(args) == 0
    said = capsys.readouterr().out
    second = first.with_name(first.stem + "-2.html")
    assert second.is_file() and first.read_bytes() == before
    assert f"{first} exists: written to {second}" in said
    # an explicit file name is not overwritten either
    assert main(["report", "--db", str(db[0]), "--out", str(first)]) == 0
    assert first.read_bytes() == before and second.is_file()
    assert first.with_name(first.stem + "-3.html").is_file() and len(list(out.iterdir())) == 3


def test_since_keeps_the_later_part_of_the_period(db):
    conn = open_database(db[0])
    try:
        full = read_database(conn)
        later = read_database(conn, since=pd.Timestamp("2026-03-01", tz="UTC").to_pydatetime())
    finally:
        conn.close()
    assert full.period[0] < pd.Timestamp("2026-03-01", tz="UTC") <= later.period[0]
    n_full = sum(len(v) for v in full.model("model-01").history.values())
    n_later = sum(len(v) for v in later.model("model-01").history.values())
    assert 0 < n_later < n_full


def test_audit_dir_renders_the_same_page_with_what_it_has(tmp_path, capsys):
    df = synthetic_window(1500, models=2, seed=4).drop(columns=["decision"])
    df.to_csv(tmp_path / "cohort.csv", index=False)
    audit = tmp_path / "audit"
    assert main(["audit", "--input", str(tmp_path / "cohort.csv"), "--out", str(audit),
                 "--quiet"]) == 0  # fmt: skip
    cells = json.loads((audit / "cells.json").read_text())["cells"]
    out = tmp_path / "reports"
    out.mkdir()
    assert main(["report", "--audit-dir", str(audit), "--out", str(out)]) == 0
    (path,) = out.iterdir()
    assert re.fullmatch(r"report_all_audit_\d{4}-\d\d-\d\d\.html", path.name)
    html = path.read_text()
    assert "offline audit" in html and "one audit cohort" in html
    rows = re.findall(r'data-model="([^"]+)" data-metric="([^"]+)" data-attribute="([^"]+)" '
                      r'data-tier="([^"]+)"', html)  # fmt: skip
    assert {(m, me, a): t for m, me, a, t in rows} == {
        (c["model_id"], c["metric"], c["attribute"]): c["tier"] for c in cells
    }
    assert 'id="fig-kappa-model-00"' in html  # kappa per metric from the cells
    assert "Confirmed events" not in html  # an audit has no history
    for f in re.findall(r"<figure>(.*?)</figure>", html, re.S):
        assert f.lstrip().startswith("<svg")
    capsys.readouterr()
    assert main(["report", "--audit-dir", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert "no cells.json" in capsys.readouterr().err


def test_failing_cells_say_on_the_page_what_drives_them(db, page):
    """The page shows, in a failing or flipping cell's sentence, the driver sentence
    worded from the cell's stored (released) result; a withheld model shows none."""
    from monitor.core.drivers import driver_sentence

    latest = _latest(db[0])
    labels = {a.name: dict(a.groups) for a in CFG.grid_attributes}
    shown = 0
    for (model, _, attr), row in latest.items():
        sentence = driver_sentence(row, labels.get(attr))
        if model == "model-tiny":
            assert row["window_n"] < SMALL_CELL
            continue
        if sentence is not None:
            assert str(escape(sentence)) in _section(page, model), sentence
            shown += 1
    assert shown >= 1
    assert " fails because " not in _section(page, "model-tiny")


def test_cell_sentence_puts_the_pooled_estimate_beside_the_raw_one():
    """A stored result with pooled fields and drivers reads: raw verdict first, the pooled
    estimate beside it, then what drives it; withheld (window under 11) it says none."""
    from monitor.report.sentences import cell_sentence

    row = {
        "model_id": "m", "metric": "DI", "attribute": "race x sex", "evaluation": 3,
        "window_n": 1030, "threshold": 0.8, "direction": ">=", "value": 0.6, "vfr": 0.088,
        "ci_low": 0.30, "ci_high": 0.88, "dominant_verdict": "fail", "point_verdict": "fail",
        "tier": "Pending", "n_pass": 44, "K": 500, "pooled_value": 0.852, "pooled_vfr": 0.402,
        "pooled_dominant_verdict": "pass", "driver_rate": "SR", "low_group": "Black x Female",
        "high_group": "White x Female", "low_rate": 0.3, "high_rate": 0.5, "low_share": 0.93,
        "high_share": 0.58,
    }  # fmt: skip
    s = cell_sentence(cell_from_result(row), 0.10, 50_000, 0.40)
    assert s.startswith("Fail; 9 % of resamples pass: stable.")
    assert "Pooled estimate (beside the raw one): 0.85, pass, 40 % of resamples flip." in s
    assert s.index("Pooled") < s.index("DI by race x sex fails because Black x Female")
    small = cell_sentence(cell_from_result({**row, "window_n": 8}), 0.10, 50_000, 0.40)
    assert "Pooled" not in small and "because" not in small


def test_the_page_says_how_mppd_was_computed_and_its_error(db, page):
    """A figure a board reads says whether it is exact or estimated on a sample, and on a
    sample it carries its 95 % interval: the stored result's sampling is on the page."""
    with duckdb.connect(str(db[0]), read_only=True) as c:
        eq = json.loads(
            c.execute(
                "SELECT payload FROM axis_results WHERE axis = 'equilense' "
                "AND model_id = 'model-00' ORDER BY computed_at DESC LIMIT 1"
            ).fetchone()[0]
        )
    how = eq["models"]["model-00"]["sampling"]
    assert "MPPD disparity (max - min)" in page
    if how["method"] == "stratified sample":
        assert "MPPD from a stratified sample" in page and "±" in page
    else:
        assert "MPPD from all" in page


def test_a_sampled_mppd_reads_with_its_interval_and_sample_size():
    from batch_axes.mppd_sample import Z95, MPPDSampling
    from monitor.report.data import ModelReport, mppd_basis
    from monitor.report.render import _mppd_headline

    raw = {"sex": {
        "reference": {"reference": "0", "min_pairs": 30, "disparity": 0.04,
                      "disparity_se": 0.003, "disparity_between": ["1", "0"], "groups": [
            {"group": "0", "mean": 0.10, "pairs": 900, "low_support": False,
             "gap_to_reference": 0.0, "se": 0.002, "gap_se": 0.0},
            {"group": "1", "mean": 0.14, "pairs": 700, "low_support": False,
             "gap_to_reference": 0.04, "se": 0.0025, "gap_se": 0.003},
            {"group": "2", "mean": 0.12, "pairs": 800, "low_support": False,
             "gap_to_reference": 0.02, "se": 0.002, "gap_se": 0.002},
        ]},
        "pairwise": {"groups": ["0", "1", "2"], "min_pairs": 30,
                     "means": [[0.1, 0.14, 0.12], [0.14, 0.2, 0.1], [0.12, 0.1, 0.1]],
                     "pairs": [[900, 700, 800], [700, 600, 500], [800, 500, 400]],
                     "low_support": [[False] * 3] * 3},
    }}  # fmt: skip
    m = ModelReport("m", [])
    m.mppd = mppd_attributes({k: AttributeMPPD.from_dict(v) for k, v in raw.items()})
    m.mppd_basis = mppd_basis(MPPDSampling("stratified sample", 20_003, 1_800_002, 0, 160,
                                           20_000, 1_500_000))  # fmt: skip
    text = _mppd_headline(m)
    assert f"sex 0.040 ± {Z95 * 0.003:.3f}" in text
    # record counts as published: rounded to 5
    assert "of 20,005 of 1,800,000 records" in text
    assert mppd_basis(MPPDSampling("all records", 24_488, 24_488, 0, 1, 20_000, 1)) == (
        "MPPD from all 24,490 records of the cohort (exact)."
    )


def test_every_event_of_the_period_is_in_the_file(db, page):
    """No API runs once the demo has ended: the page holds every confirmed event of the
    period, folded away in a <details> element."""
    with open_database(db[0]) as c:
        data = read_database(c, CFG)
    checked = 0
    for m in data.models:
        if not m.events:
            continue
        sec = _section(page, m.model_id)
        det = re.search(r'<details class="events" data-model="[^"]+" data-events="(\d+)">'
                        r"(.*?)</details>", sec, re.S)  # fmt: skip
        assert det, m.model_id
        assert int(det.group(1)) == len(m.events)
        assert det.group(2).count("<tr><td") == len(m.events)
        checked += 1
    assert checked and "/api/events has them all" not in page


def test_a_failing_verdict_comes_first_and_never_looks_fine(db, page):
    """Verdict and reliability look different: a failing cell's row and grid tile are red
    whatever its tier (never the green of Stable), and the table lists failing cells
    first, the reliably failing ones before the others."""
    from monitor.report.changes import reliable_verdict
    from monitor.report.figures import FAIL_FILL, TIER_COLOURS

    latest = _latest(db[0])
    n_fail = 0
    for model in ("model-00", "model-01"):
        sec = _section(page, model)
        rows = re.findall(
            rf'<tr data-model="{model}" data-metric="([^"]+)" data-attribute="([^"]+)" '
            r'data-tier="[^"]+"( class="failing")?>',
            sec,
        )
        rank = []
        for metric, attr, failing in rows:
            row = latest[(model, metric, attr)]
            fails = row["dominant_verdict"] == "fail"
            assert bool(failing) == fails, (model, metric, attr)
            ok = reliable_verdict(row["vfr"], CFG.axis1.tau_vfr, row["tier"]) and reliable_verdict(
                row["vfr"], CFG.axis1.tau_vfr, row.get("confirmed_tier")
            )
            rank.append(0 if fails and ok else 1 if fails else 2)
            tile = re.search(
                rf'<g id="tier--{_slug(model)}--{_slug(metric)}--{_slug(attr)}--[^"]+">(.*?)</g>',
                sec, re.S,
            ).group(1)  # fmt: skip
            fill = re.search(r"fill:\s*(#[0-9A-Fa-f]{6})", tile).group(1).upper()
            if fails:
                n_fail += 1
                assert fill == FAIL_FILL.upper() and fill != TIER_COLOURS["Practical-Stability"]
        assert rank == sorted(rank), (model, rank)
    assert n_fail, "the fixture's score update must make some cell fail"


def test_what_changed_is_on_the_first_screen(page, tmp_path):
    """Chromium lays the page out in a 1280 x 800 window: the "what changed" section, its
    change items and the models' attention lines are within that first screen."""
    from tests.report.chromium import first_screen

    vh, boxes = first_screen(page, tmp_path)
    assert 600 <= vh <= 800  # headless Chromium keeps part of the 800 px window: stricter
    items = [b for b in boxes if b.attrs.get("data-kind") in ("verdict_change", "coin_toss")]
    assert items, "the fixture's score update must give a change or a coin toss"
    for b in items:
        assert b.on_first_screen(vh), (b.top, b.bottom, b.text[:80])
