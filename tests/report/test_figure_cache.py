"""The report's figures are drawn again only when their data changed (issue 25, target 3).

On the real DuckDB file of ``tests/report/test_report.py``'s fixture (the service's own
path): a second page from the same data draws no figure and is the same page; a change in
one cell's history redraws the two time-series figures of its model and nothing else; and
with a cache directory, a report written later reuses the figures kept there.
"""

from __future__ import annotations

import dataclasses
import re

from monitor.cli import main
from monitor.report import figures
from monitor.report.data import open_database, read_database
from monitor.report.render import render_data, render_report
from tests.report.test_report import CFG, db  # noqa: F401 (the module's fixture)


def _without_clock(html: str) -> str:
    """The page less the line with the time it was generated."""
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "<generated>", html)


def _data(path):
    with open_database(path) as c:
        return read_database(c, CFG)


def test_unchanged_data_draws_no_figure_and_gives_the_same_page(db):  # noqa: F811
    cache = figures.CACHE
    cache.clear()
    cold = render_report(db[0])
    drawn = cache.drawn
    assert drawn >= 3 * 5  # grid, VFR, value, kappa, N*, MPPD, health per model
    again = render_report(db[0])
    assert cache.drawn == drawn and cache.hits >= drawn
    assert _without_clock(again) == _without_clock(cold)


def test_a_changed_history_point_redraws_only_its_models_time_series(db):  # noqa: F811
    data = _data(db[0])
    figures.CACHE.clear()
    before = render_data(data)
    drawn = figures.CACHE.drawn
    m = data.model("model-01")
    key, points = next((k, p) for k, p in m.history.items() if len(p) >= 3)
    old = points[1]
    points[1] = dataclasses.replace(old, vfr=0.5 if old.vfr != 0.5 else 0.25)
    after = render_data(data)
    assert figures.CACHE.drawn == drawn + 2  # its VFR and value figures, nothing else

    def fig(html: str, name: str) -> str:
        found = re.search(rf'<svg[^>]*id="fig-{name}".*?</svg>', html, re.S)
        assert found is not None, name  # the page draws the figure
        return found.group(0)

    assert fig(after, "vfr-model-01") != fig(before, "vfr-model-01"), key
    for name in ("grid-model-01", "vfr-model-00", "kappa-model-01", "health-model-01"):
        assert fig(after, name) == fig(before, name), name


def test_a_cache_directory_keeps_figures_for_the_next_report(db, tmp_path, capsys):  # noqa: F811
    cache_dir, out = tmp_path / "figures", tmp_path / "reports"
    args = ["report", "--db", str(db[0]), "--out", f"{out}/", "--figure-cache", str(cache_dir)]
    assert main(args) == 0
    kept = sorted(cache_dir.glob("*.svg"))
    assert len(kept) >= 3 * 5
    # the next report reads them from the directory, not from a new drawing
    marked = kept[0].read_text().replace("</svg>", "<!-- kept -->\n</svg>", 1)
    kept[0].write_text(marked)
    figures.CACHE.clear()  # nothing in this process's memory either
    assert main(args) == 0
    pages = sorted(out.glob("*.html"))
    assert len(pages) == 2  # versioned names: the second did not overwrite the first
    (second,) = (p for p in pages if p.stem.endswith("-2"))
    (first,) = (p for p in pages if p != second)
    assert "<!-- kept -->" in second.read_text() and "<!-- kept -->" not in first.read_text()
    assert sorted(cache_dir.glob("*.svg")) == kept
    capsys.readouterr()


def test_rolling_auroc_is_sklearns_value_with_ties():
    """The report's AUROC per block (the service's midrank statistic) is sklearn's
    ``roc_auc_score``, ties included (scores rounded to two decimals: many ties)."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from monitor.report.data import rolling_auroc

    rng = np.random.default_rng(3)
    label = (rng.random(5000) < 0.3).astype(np.int64)
    score = np.round(np.clip(0.3 * label + rng.random(5000) * 0.7, 0, 1), 2)
    got = rolling_auroc(label, score, 1000, 5000)
    want = [roc_auc_score(label[s : s + 1000], score[s : s + 1000]) for s in range(0, 5000, 1000)]
    assert len(got) == 5
    assert all(abs(p.auroc - w) < 1e-12 for p, w in zip(got, want, strict=True))


def test_the_cache_keeps_at_most_its_byte_budget_newest_first():
    cache = figures.FigureCache(max_bytes=10)
    for k in "abc":
        cache.put(k, k * 4)  # 4 characters each: two fit
    assert cache.get("a") is None  # the oldest went
    assert cache.get("b") == "bbbb"  # now used after "c"
    cache.put("d", "dddd")  # so "c" goes
    assert cache.get("c") is None and cache.get("b") == "bbbb" and cache.get("d") == "dddd"
