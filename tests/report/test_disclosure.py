"""Disclosure control across the report's answers (issue 21, items 4 and 5), as an attacker
reads them.

One module fixture runs the real service in-process on a seeded stream written to a real
DuckDB file: ``model-00`` with about 3,000 records over January to May, holding a day of
exactly 4 records (10 March), a month of 4 records (May) and a race group of 4 records,
and ``model-tiny`` with 8 records (evaluated by a wall-clock hop). The scheduled axes run
on the whole file. Each test then renders the page with the real functions and reads it
as an attacker would: the text's counts, the SVG bars decoded back to numbers through the
axis ticks, totals minus the parts shown, and reports of neighbouring periods side by side.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime
from html import unescape

import duckdb
import numpy as np
import pandas as pd
import pytest

from consumers.base import Origin
from monitor.bench.synthetic import synthetic_window
from monitor.cli import main
from monitor.config import config_from_mapping
from monitor.core.explain import tier_name
from monitor.core.privacy import ROUNDING_BASE, SMALL_CELL, rounded_count
from monitor.report.data import EventRow, ReportInputError, cell_from_result, read_database
from monitor.report.render import event_lines, render_report
from monitor.service.app import MonitorService

CFG = config_from_mapping(
    {
        "window": {"size": 3000, "hop_records": 1000, "hop_seconds": 60},
        "axis1": {"K": 60},
        "axis2": {"sizes": [500, 1000], "R": 6},
        "axis3": {"folds": 5},
        "equilense": {"features": ["x1", "x2"]},
        "service": {
            "intake": {"unknown_models": "admit", "event_time_bounds": "none"},
            "axes": {"cohort_days": 400},
        },
    }
)
BIG, TINY = "model-00", "model-tiny"
#: The day of exactly 4 records, and the month of 4 records, of model-00.
SMALL_DAY = date(2026, 3, 10)
SMALL_MONTH = "2026-05"
SVG_NS = {"s": "http://www.w3.org/2000/svg"}


def _days(first: str, last: str, total: int, rng: np.random.Generator) -> list[date]:
    """``total`` record days spread over the days first..last, every day holding at least
    ``total // days`` records (so every day but the planted ones holds 11 or more)."""
    days = [d.date() for d in pd.date_range(first, last, freq="D")]
    base = total // len(days)
    extra = rng.choice(len(days), total - base * len(days), replace=False)
    counts = np.full(len(days), base)
    counts[extra] += 1
    return [d for d, n in zip(days, counts, strict=True) for _ in range(n)]


def _times(days: list[date], rng: np.random.Generator) -> list[str]:
    """An event time inside each day (UTC), in order."""
    secs = np.sort(rng.uniform(60, 86_000, len(days)))
    out = [
        pd.Timestamp(d, tz="UTC") + pd.Timedelta(seconds=float(s))
        for d, s in zip(days, secs, strict=True)
    ]
    return [t.isoformat() for t in sorted(out)]


def _stream() -> pd.DataFrame:
    """model-00's 3,008 records in event-time order, then model-tiny's 8."""
    rng = np.random.default_rng(21)
    df = synthetic_window(3008 + 8, models=1, seed=21).drop(columns=["decision"])
    df["record_id"] = [f"r{i}" for i in range(len(df))]
    days = (
        _days("2026-01-05", "2026-03-09", 2000, rng)
        + [SMALL_DAY] * 4
        + _days("2026-03-11", "2026-04-30", 1000, rng)
        + [date(2026, 5, 12)] * 4  # the month of 4
    )
    df["event_time"] = _times(days, rng) + _times([date(2026, 2, 14)] * 8, rng)
    df["model_id"] = [BIG] * 3008 + [TINY] * 8
    # a race group of 4 records, inside the last window
    df["race"] = np.where(df["race"] == "0", "3", df["race"])
    df.loc[2500:2503, "race"] = "0"
    x = rng.integers(0, 4, size=(len(df), 2))
    df["features"] = [{"x1": int(a), "x2": int(b)} for a, b in x]
    return df


def _feed(service: MonitorService, df: pd.DataFrame, batch: int = 500) -> None:
    payloads = [json.dumps(r).encode() for r in df.to_dict("records")]
    for i in range(0, len(payloads), batch):
        chunk = payloads[i : i + batch]
        service.pipeline.ingest_batch(chunk, [Origin("t", 0, i + k) for k in range(len(chunk))])
    service.pipeline.flush()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """The service's DuckDB file (closed), and the data it was fed."""
    d = tmp_path_factory.mktemp("disclosure")
    now = [1_800_000_000.0]
    service = MonitorService(
        CFG, db_path=str(d / "svc.duckdb"), http_port=0, start_scheduler=False,
        clock=lambda: now[0],
    )  # fmt: skip
    service.start()
    df = _stream()
    try:
        _feed(service, df)
        now[0] += 120  # a wall-clock hop evaluates model-tiny's 8 records
        service.pipeline.tick()
        for job in ("axis2", "axis3", "equilense"):
            outcome = service.scheduler.run_now_blocking(job)
            assert outcome.state == "success", outcome
    finally:
        service.close()
    return d / "svc.duckdb", df


@pytest.fixture(scope="module")
def page(db):
    """The page as the status page at / renders it: through a connection (the service
    hands its cursor to the same render_report)."""
    with duckdb.connect(str(db[0]), read_only=True) as conn:
        return render_report(conn, config=CFG)


# ----------------------------------------------------------------------------- reading it back


def _exact(db_path, sql: str, params: tuple = ()) -> list[tuple]:
    with duckdb.connect(str(db_path), read_only=True) as c:
        return c.execute(sql, list(params)).fetchall()


def _monthly(db_path, model: str, start: str | None = None, end: str | None = None) -> dict:
    """Exact records per month of a model in the days [start, end) (None: open)."""
    sql = (
        "SELECT strftime(event_time AT TIME ZONE 'UTC', '%Y-%m'), count(*) FROM discharges "
        "WHERE model_id = ?"
    )
    params: list = [model]
    if start:
        sql += " AND CAST(event_time AT TIME ZONE 'UTC' AS DATE) >= CAST(? AS DATE)"
        params.append(start)
    if end:
        sql += " AND CAST(event_time AT TIME ZONE 'UTC' AS DATE) <= CAST(? AS DATE)"
        params.append(end)
    return dict(_exact(db_path, sql + " GROUP BY 1 ORDER BY 1", tuple(params)))


def _section(html: str, model: str) -> str:
    m = re.search(rf'<section class="model" id="model-{re.escape(model)}">(.*?)</section>',
                  html, re.S)  # fmt: skip
    assert m, model
    return m.group(1)


def _figure(html: str, name: str) -> ET.Element | None:
    m = re.search(rf'<svg[^>]*id="fig-{re.escape(name)}".*?</svg>', html, re.S)
    return None if m is None else ET.fromstring(m.group(0))


def _axes(svg: ET.Element, k: int) -> ET.Element:
    (ax,) = [g for g in svg.iter(f"{{{SVG_NS['s']}}}g") if g.get("id", "").endswith(f"-axes_{k}")]
    return ax


def _scale(ax: ET.Element, which: str) -> tuple[float, float]:
    """(a, b) with value = a * pixel + b on one axis, from its tick marks and labels: what
    an attacker reads off the page."""
    px, val = [], []
    for tick in ax.iter(f"{{{SVG_NS['s']}}}g"):
        if not re.search(rf"-{which}tick_\d+$", tick.get("id", "")):
            continue
        use = tick.find(".//s:use", SVG_NS)
        label = "".join(tick.find(".//s:text", SVG_NS).itertext()).replace(",", "")
        label = label.replace("\u2212", "-")
        if use is None or not re.fullmatch(r"-?[\d.]+", label):
            continue
        px.append(float(use.get("y" if which == "y" else "x")))
        val.append(float(label))
    assert len(px) >= 2, f"no {which} ticks to read"
    a, b = np.polyfit(px, val, 1)
    return float(a), float(b)


def _path_points(d: str) -> list[tuple[float, float]]:
    nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", d)]
    return list(zip(nums[::2], nums[1::2], strict=True))


def volume_bars(html: str, model: str) -> tuple[list[float], int]:
    """The monthly volume bars of a model decoded back to record counts (through the y
    ticks), and how many months show the withheld label."""
    svg = _figure(html, f"health-{model}")
    if svg is None:
        return [], 0
    ax = _axes(svg, 1)
    a, _ = _scale(ax, "y")
    bars = []
    for path in ax.iter(f"{{{SVG_NS['s']}}}path"):
        if "fill: #0072b2" not in (path.get("style") or ""):
            continue
        ys = [y for _, y in _path_points(path.get("d"))]
        bars.append(abs(a * (max(ys) - min(ys))))
    withheld = sum(
        "".join(t.itertext()) == f"<{SMALL_CELL}" for t in ax.iter(f"{{{SVG_NS['s']}}}text")
    )
    return bars, withheld


def auroc_positions(html: str, model: str) -> list[float]:
    """The x positions (records received) of the AUROC line, decoded through the x ticks."""
    svg = _figure(html, f"health-{model}")
    ax = _axes(svg, 2)
    a, b = _scale(ax, "x")
    out = []
    for g in ax.iter(f"{{{SVG_NS['s']}}}g"):
        if re.search(r"-line2d_\d+$", g.get("id", "")) and g.find("s:path", SVG_NS) is not None:
            out += [a * x + b for x, _ in _path_points(g.find("s:path", SVG_NS).get("d"))]
    return out


def _text(html: str) -> str:
    """The page as a reader sees it: tags dropped (SVG text stays text), entities read."""
    return unescape(re.sub(r"<[^>]+>", " ", html))


# ----------------------------------------------------------------------------- the tests


def test_the_fixture_has_what_the_attack_needs(db):
    months = _monthly(db[0], BIG)
    assert months[SMALL_MONTH] == 4 and any(n % ROUNDING_BASE for n in months.values())
    assert _records_between(db[0], BIG, SMALL_DAY, date(2026, 3, 11)) == 4
    cohorts = dict(_exact(db[0], "SELECT model_id, min(cohort_n) FROM axis_results GROUP BY 1"))
    assert cohorts[TINY] == 8 and cohorts[BIG] >= SMALL_CELL
    (race0,) = _exact(db[0], "SELECT count(*) FROM discharges WHERE model_id = ? AND "
                      "json_extract_string(attributes, '$.race') = '0'", (BIG,))  # fmt: skip
    assert race0 == (4,)


def test_counts_in_the_text_are_rounded_or_withheld(db, page):
    """ "8 records received" for a model whose API answer is <11, and exact totals beside
    rounded parts, are the issue's first finding."""
    text = _text(page)
    assert f"<{SMALL_CELL} records received" in _text(_section(page, TINY))
    counts = [
        int(n.replace(",", ""))
        for n in re.findall(r"(?<![<\w])(\d[\d,]*) records", text)
        if not re.search(rf"(than|least) {n} records", text)
    ]
    assert counts, "the page states no record count"
    assert all(n % ROUNDING_BASE == 0 for n in counts), counts
    (total,) = _exact(db[0], "SELECT records FROM model_state WHERE model_id = ?", (BIG,))
    assert f"{total[0]:,} records" not in text and total[0] % ROUNDING_BASE


def test_volume_bars_do_not_decode_to_exact_counts(db, page):
    exact = _monthly(db[0], BIG)
    bars, _ = volume_bars(page, BIG)
    assert bars, "the volume figure has no bar"
    for v in bars:  # each bar is a rounded count, none an exact one
        assert abs(v - ROUNDING_BASE * round(v / ROUNDING_BASE)) < 0.05, v
        hits = [m for m, n in exact.items() if n % ROUNDING_BASE and abs(v - n) < 0.05]
        assert not hits, f"a bar decodes to {v:.6f}: the exact count of {hits}"
    (records,) = _exact(db[0], "SELECT records FROM model_state WHERE model_id = ?", (BIG,))
    for x in auroc_positions(page, BIG):
        assert abs(x - records[0]) > 0.5, f"the AUROC line ends at the exact count {x:.3f}"


def test_no_total_minus_the_months_shown_gives_a_withheld_month(db, page):
    """The months of a model are one family: a withheld month must not follow from the
    total (records received) minus the months shown."""
    exact = [n for _, n in sorted(_monthly(db[0], BIG).items())]
    bars, withheld = volume_bars(page, BIG)
    assert len(bars) + withheld == len(exact)
    assert withheld >= 1, "the month of 4 records is withheld"
    shown = sorted(round(b) for b in bars)
    hidden = sorted(exact)
    for b in shown:  # match each shown bar to the exact month it rounds
        hidden.remove(next(n for n in hidden if abs(n - b) <= ROUNDING_BASE // 2))
    assert len(hidden) >= 2 and sum(hidden) >= SMALL_CELL, hidden


def test_every_per_group_mppd_table_withholds_a_second_group(db):
    """MPPD per attribute (reference bars; pairs of groups): one withheld group would follow
    from the other groups and a total, so a second one is withheld with it."""
    with duckdb.connect(str(db[0]), read_only=True) as conn:
        data = read_database(conn, CFG, models=[BIG])
    attrs = data.model(BIG).mppd
    assert attrs, "model-00 has MPPD"
    checked = 0
    for a in attrs:
        hidden = [b for b in a.bars if b.pairs is None]
        assert len(hidden) != 1, (a.attribute, hidden)
        for b in a.bars:
            assert b.pairs is None or b.pairs % ROUNDING_BASE == 0
        k = len(a.groups)
        cells = [a.pairs[i][j] for i in range(k) for j in range(i, k)]
        assert sum(n is None for n in cells) != 1, a.attribute
        checked += bool(hidden)
    assert checked, "the race group of 4 is withheld somewhere"


def test_withheld_cells_show_no_tier(db, page):
    with duckdb.connect(str(db[0]), read_only=True) as c:
        rows = c.execute("SELECT model_id, metric, attribute, latest FROM cell_state").fetchall()
    small = {(m, me, a) for m, me, a, lt in rows if lt and json.loads(lt)["window_n"] < SMALL_CELL}
    assert small
    grid = {tuple(g.split("--")[1:4]): g.split("--")[4]
            for g in re.findall(r'<g id="(tier--[^"]+)"', page)}  # fmt: skip
    table = {
        (m, me, a): (t, cells)
        for m, me, a, t, cells in re.findall(
            r'<tr data-model="([^"]+)" data-metric="([^"]+)" data-attribute="([^"]+)" '
            r'data-tier="([^"]+)">(.*?)</tr>', page, re.S)
    }  # fmt: skip
    names = ("Stable", "Caution", "High variance", "Catastrophic", "Pending")
    for key in small:
        assert grid[key] == "Withheld", (key, grid[key])
        tier, cells = table[key]
        assert tier == "Withheld", (key, tier)
        assert not any(n in cells for n in names), cells
    tiny_grid = "".join(_figure(page, f"grid-{TINY}").itertext())
    assert not any(n in tiny_grid for n in names), tiny_grid
    summary = re.search(rf"<li><strong>{TINY}</strong>: (.*?)</li>", page, re.S).group(1)
    assert not any(n in summary for n in names), summary


def test_no_axis_figure_for_a_cohort_under_11(db, page):
    cohorts = dict(_exact(db[0], "SELECT model_id, max(cohort_n) FROM axis_results GROUP BY 1"))
    small = [m for m, n in cohorts.items() if n < SMALL_CELL]
    assert small == [TINY]
    for m in small:
        for fig in ("kappa", "nstar", "mppd"):
            assert f'id="fig-{fig}-{m}"' not in page, (fig, m)
        assert "hospital agreement (Axis 3) withheld" in _section(page, m)
    assert f'id="fig-kappa-{BIG}"' in page and f'id="fig-nstar-{BIG}"' in page


def test_period_filters_take_whole_days_only(db, capsys):
    """Two reports a few hours apart differ by the records of those hours: refused."""
    for option, value in (("--since", "2026-03-10T00:00"), ("--since", "2026-03-10T06:00"),
                          ("--until", "2026-03-10 06:00"), ("--since", "10/03/2026")):  # fmt: skip
        assert main(["report", "--db", str(db[0]), option, value, "--out", "/nonexistent/"]) == 2
        err = capsys.readouterr().err
        assert f"{option} {value!r}: not a whole day" in err and "YYYY-MM-DD" in err, err
    with pytest.raises(ReportInputError, match="--since"):
        render_report(db[0], since=datetime(2026, 3, 10, 6, tzinfo=UTC))


def _midnight(day: str) -> datetime:
    """A day as the start of that UTC day (what the report took before filters were days)."""
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


def _period_records(db_path, model: str, html: str) -> int:
    """The exact records of the period the page says it rests on."""
    m = re.search(rf'<p class="muted period" data-model="{re.escape(model)}" '
                  r'data-from="([^"]*)" data-to="([^"]*)">', html)  # fmt: skip
    assert m, f"the page does not say which days {model}'s figures rest on"
    return sum(_monthly(db_path, model, m.group(1) or None, m.group(2) or None).values())


def test_reports_of_neighbouring_days_differ_by_none_or_at_least_11_records(db):
    """Bisection: a report from day d and one from day d + 1 differ by the records of day d
    (4 on 10 March). The filter widens to whole release blocks: the two periods are the
    same, or differ by at least 11 records, or the period is withheld as a whole."""
    pages = {d: render_report(db[0], config=CFG, models=[BIG], since=_midnight(d))
             for d in ("2026-03-10", "2026-03-11")}  # fmt: skip
    a, b = (sum(volume_bars(p, BIG)[0]) for p in pages.values())
    assert abs(a - b) < 0.05 or abs(a - b) >= rounded_count(SMALL_CELL), (
        f"the volumes of the two reports differ by {abs(a - b):.3f} records"
    )
    n = [_period_records(db[0], BIG, p) for p in pages.values()]
    assert n[0] == n[1] or abs(n[0] - n[1]) >= SMALL_CELL, n
    for p in pages.values():  # what is drawn is the stated period's months, rounded
        months = _monthly_of_stated(db[0], BIG, p)
        bars, withheld = volume_bars(p, BIG)
        assert len(bars) + withheld == len(months)
        rounded = [rounded_count(v) for v in months.values()]
        assert all(any(abs(b - r) < 0.05 for r in rounded) for b in bars), (bars, rounded)
    # every pair of neighbouring days around the small one, read as the page reads them
    with duckdb.connect(str(db[0]), read_only=True) as conn:
        for day in range(5, 16):
            got = [
                read_database(conn, CFG, models=[BIG], since=datetime(2026, 3, d, tzinfo=UTC))
                .model(BIG)
                .period
                for d in (day, day + 1)
            ]
            if any(p.withheld for p in got):
                continue
            rec = [_records_between(db[0], BIG, p.start, p.end) for p in got]
            assert rec[0] == rec[1] or rec[0] - rec[1] >= SMALL_CELL, (day, rec)
    # a model of 8 records: its period is withheld as a whole, whatever the filter
    with duckdb.connect(str(db[0]), read_only=True) as conn:
        tiny = read_database(
            conn, CFG, models=[TINY], since=datetime(2026, 2, 1, tzinfo=UTC)
        ).model(TINY)
    assert tiny.period.withheld and not tiny.volume and not tiny.history and not tiny.events


def _monthly_of_stated(db_path, model: str, html: str) -> dict:
    m = re.search(rf'data-model="{re.escape(model)}" data-from="([^"]*)" data-to="([^"]*)"', html)
    return _monthly(db_path, model, m.group(1) or None, m.group(2) or None)


def _records_between(db_path, model: str, start: date | None, end: date | None) -> int:
    """Exact records of a model in the days [start, end) (None: open)."""
    sql = "SELECT count(*) FROM discharges WHERE model_id = ?"
    params: list = [model]
    day = "CAST(event_time AT TIME ZONE 'UTC' AS DATE)"
    if start is not None:
        sql += f" AND {day} >= ?"
        params.append(start)
    if end is not None:
        sql += f" AND {day} < ?"
        params.append(end)
    return int(_exact(db_path, sql, tuple(params))[0][0])


def test_an_event_of_a_withheld_cell_shows_neither_verdict_nor_tier(db):
    """The old and new verdict (or tier) of an event rest on its window's records: in a
    window of fewer than 11 the event line says only that the cell changed."""
    with duckdb.connect(str(db[0]), read_only=True) as conn:
        data = read_database(conn, CFG, models=[BIG])
    r = {"model_id": BIG, "metric": "DI", "attribute": "race", "threshold": 0.8,
         "direction": ">=", "value": 0.5, "window_n": SMALL_CELL - 1, "evaluation": 7,
         "tier": "High-Variance", "dominant_verdict": "fail"}  # fmt: skip
    cur = cell_from_result(r)
    for kind, old, new in (("verdict_flip", "pass", "fail"),
                           ("tier_change", "Practical-Stability", "High-Variance")):  # fmt: skip
        e = EventRow(kind=kind, model_id=BIG, metric="DI", attribute="race", old=old, new=new,
                     confirmed=True, direction="x", evaluation=7, id=1, at=None)  # fmt: skip
        m = data.model(BIG)
        m.events, m.event_context = [e], {1: cur}
        (line,) = event_lines(m, data)
        said = f"{line.change} {line.sentence}"
        for word in (old, new, tier_name(old), tier_name(new)):
            assert word not in said, (word, said)
        assert line.change == f"<{SMALL_CELL}"
