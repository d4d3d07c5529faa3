"""`vfr-monitor bench detection` (monitor/bench/detection.py) on a small population.

Smoke and sense checks only: the figures of the notes come from running the command
(docs/decisions.md, "Certified pages"). The population here is the small synthetic
cohort of monitor/bench/synthetic.py (no model to train), at a few hundred records a
year so that a year is a few looks.
"""

from __future__ import annotations

import numpy as np

from monitor.bench.detection import (
    INTERSECTIONS,
    Population,
    poisson_ci,
    run_calibration,
    run_delay,
    run_false_pages,
)
from monitor.bench.synthetic import synthetic_cohort
from monitor.config import MonitorConfig
from monitor.core.tables import grid_groups


def _config() -> MonitorConfig:
    return MonitorConfig.model_validate(
        {**MonitorConfig().model_dump(), "intersections": INTERSECTIONS}
    )


def test_false_pages_counts_both_layers_per_grid() -> None:
    cfg = _config()
    c = synthetic_cohort(20_000, models=1, seed=0, config=cfg)
    pop = Population("m", grid_groups(c.attributes, cfg), c.label,
                     (c.scores[0] >= 0.5).astype(np.int64), c.scores[0])  # fmt: skip
    out = run_false_pages([pop], cfg, years=4, today_years=1, budget=0.1, seed=1,
                          records_per_year=4_000)  # fmt: skip
    assert out["looks_per_year"] == 4
    default, inter = out["grids"]["default"], out["grids"]["intersections"]
    # DI, SPD, EOPP, EOD, PP certified; TI and CAL not
    assert default["certified"]["cells_per_model"] == 5 * 4
    assert inter["certified"]["cells_per_model"] == 5 * 6
    assert default["certified"]["threshold_c"] == 2 * 20 / 0.1
    assert default["certified"]["model_years"] == 4
    # today's rule: one year, its pages on the default attributes a subset of the grid's
    assert len(default["today"]["pages_by_model_year"]) == 1
    assert default["today"]["pages"] <= inter["today"]["pages"]
    lo, hi = default["certified"]["ci95"]
    assert 0 <= lo <= default["certified"]["pages_per_model_year"] <= hi


def test_delay_orders_the_oracles_and_detects_the_planted_crossings() -> None:
    out = run_delay(MonitorConfig(), reps=20, today_reps=1, budget=0.1, seed=3,
                    warmup_looks=40)  # fmt: skip
    case = out["cases"]["DI 0.90 -> 0.70 at once"]
    assert case["certified"]["detected"] == 1.0 and case["today"]["detected"] == 1.0
    # the pre/post oracle knows more than a threshold test can use: never slower
    oracle, threshold = case["oracle_cusum"], case["threshold_oracle_cusum"]
    assert oracle["median_records"] <= threshold["median_records"]
    assert case["certified"]["median_records"] > 0
    assert case["certified"]["false_fail_before_crossing"] == 0.0


def test_certified_delay_is_within_one_and_a_half_times_the_threshold_oracle() -> None:
    """The issue's target on every planted crossing, at 60 runs (seeded). Why 60 and 1.5:
    the delays' spread (90th percentile about 1.6 x the median at 100 runs) gives the
    median of 60 a standard error of about 6 % (1.25 sd / sqrt(60)), the oracle's the
    same; the bench's 100 runs measured 1.07-1.21 x (docs/decisions.md, "Certified
    pages"), more than three standard errors of the ratio below 1.5. The detector before
    the bet grid measured 1.35-3.7 x."""
    out = run_delay(MonitorConfig(), reps=60, today_reps=0, budget=0.1, seed=5,
                    warmup_looks=60)  # fmt: skip
    for name, case in out["cases"].items():
        cert = case["certified"]
        assert cert["detected"] == 1.0, name
        assert cert["share_paged_from_pass"] == 1.0, name  # pass certified before it
        assert cert["ratio_to_threshold_oracle"] <= 1.5, (name, cert)


def test_calibration_rows() -> None:
    out = run_calibration(MonitorConfig(), windows=12, di_values=(0.70, 0.80, 0.90))
    rows = {r["true_di"]: r for r in out["by_true_di"]}
    assert rows[0.70]["share_dominant_pass"] == 0.0 and rows[0.90]["share_dominant_pass"] == 1.0
    assert rows[0.80]["mean_vfr"] > rows[0.90]["mean_vfr"]
    # the certified verdict is never on the wrong side of a clear value here
    assert rows[0.70]["certified_pass"] == 0.0 and rows[0.90]["certified_fail"] == 0.0
    assert sum(b["windows"] for b in out["by_vfr_band"]) == 36


def test_poisson_interval() -> None:
    lo, hi = poisson_ci(0, 200)
    assert lo == 0 and abs(hi - 3.689 / 200) < 1e-3  # the exact 95 % bound for 0 events
