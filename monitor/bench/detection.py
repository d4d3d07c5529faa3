"""`vfr-monitor bench detection`: false pages in stationary years and detection delay on
planted threshold crossings, for today's page rule and for the certified verdict, beside
an oracle CUSUM (docs/method.md section 11; docs/decisions.md "Certified pages").

A count-level simulation that runs the service's own code on blocks of records:

* **Population.** The demo's synthetic year (``monitor.data.scorer.synthetic_stream``,
  no scenario): per model, its ~87,700 scored records. A stationary year draws blocks of
  ``hop`` records with replacement from them (the empirical population of the demo year,
  so every cell sits where the demo's sits: DI by race at 0.80, PP and CAL near theirs).
* **Today's rule.** Per look, the rolling window (the last ``window`` records: the last
  window/hop blocks, added and evicted as ``CountTable`` s, as the service's window does)
  goes through ``monitor.core.axis1.run_axis1`` with the configured K, N, seed and
  metric rules, and each cell's ``monitor.core.events.ReliableVerdict`` is updated with
  its dominant verdict and VFR. A page is a change of the reliable verdict: the alert
  VFRConfirmedVerdictFlip fires once per change at the demo's cadence (its rule window,
  1 h, never spans two evaluations days apart: docs/decisions.md "Pages and notices").
  Not simulated: VFRConfirmedTierDowngrade (it needs the scheduled Axis 2/3; the pages the
  issue counted on stationary years were all verdict flips).
* **Certified verdict.** ``monitor.core.certify.CertifiedCell`` per certifiable cell, fed
  each block's counts (``block_counts`` of the block's ``CountTable``), block length
  hop / (records per year) years; the threshold from the budget and the model's number
  of certified cells (``threshold_for_budget``). A page is a certified change.
* **Delay.** Planted crossings on a two-group attribute (sex, the demo's shares): the
  cell's true metric crosses its threshold at a known record; records and days from it
  to the first page (today's rule, the certified fail) and to the alarm of a CUSUM that
  knows the pre- and post-change rates, with threshold A = c x looks per year, so that
  its guaranteed average run length to a false alarm (>= A looks) equals the certified
  detector's (>= c / w looks, w = 1 / looks per year); and to the alarm of a *threshold
  oracle*, the CUSUM of the post-change rates against their nearest passing rates (the
  KL projection onto the boundary), at the same A: the fastest any detector can be that
  knows the post-change rates and must not fire while the metric passes. The first
  oracle tests "the rates left their known pre-change values", which a test of "the
  metric crossed its threshold" cannot use (docs/method.md section 11).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import chi2

from monitor.config import MetricRule, MonitorConfig
from monitor.config.engine import engine_options
from monitor.core.axis1 import run_axis1
from monitor.core.certify import (
    CertifiedCell,
    block_counts,
    pair_spec,
    rate_counts,
    threshold_for_budget,
)
from monitor.core.counts import CountTable
from monitor.core.events import ReliableVerdict

#: The demo's volume: scored records per model in its year (2026), ~87,700.
DEMO_RECORDS_PER_YEAR = 87_681
INTERSECTIONS = [{"attributes": ["race", "sex"]}, {"attributes": ["race", "age_group"]}]


@dataclass(frozen=True)
class Population:
    """One model's records as the count tables want them: group index per grid attribute,
    label, decision, score."""

    model_id: str
    groups: dict[str, np.ndarray]
    label: np.ndarray
    decision: np.ndarray
    score: np.ndarray


def demo_populations(config: MonitorConfig, seed: int = 1, records: int = 100_000):
    """Per model, the demo year's scored records (scenario none), decisions derived as
    the service derives them (``monitor.stream.schema.decision_thresholds``)."""
    from monitor.core.tables import attribute_groups
    from monitor.data import scorer
    from monitor.stream.schema import decision_thresholds

    frame = scorer.synthetic_stream(records, seed, None).frame
    out = []
    for model_id, sub in frame.groupby("model_id", sort=True):
        cols = {c: sub[c].to_numpy() for c in sub.columns if c != "features"}
        score = sub["score"].to_numpy(np.float64)
        decision = (score >= decision_thresholds(cols, config)).astype(np.int64)
        out.append(
            Population(
                str(model_id),
                attribute_groups(sub, config),
                sub["label"].to_numpy(np.int64),
                decision,
                score,
            )
        )
    return out


def _block_tables(pop: Population, idx: np.ndarray, config: MonitorConfig):
    prepared = CountTable.prepare(
        pop.label[idx], pop.decision[idx], pop.score[idx], config.axis1.score_bins
    )
    assert prepared is not None, "a block is far below prepare()'s batch limit"
    tables = [CountTable(a.codes, config.axis1.score_bins) for a in config.grid_attributes]
    CountTable.apply_prepared_many(
        tables, [pop.groups[a.name][idx] for a in config.grid_attributes], prepared, +1
    )
    return {a.name: t for a, t in zip(config.grid_attributes, tables, strict=True)}


def poisson_ci(count: int, exposure: float, level: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson rate: count events in ``exposure`` units."""
    a = 1 - level
    lo = 0.0 if count == 0 else chi2.ppf(a / 2, 2 * count) / 2
    hi = chi2.ppf(1 - a / 2, 2 * count + 2) / 2
    return lo / exposure, hi / exposure


# ------------------------------------------------------------------ false pages
def _certified_cells(config: MonitorConfig, attributes: Sequence[str]):
    return [
        (r, a)
        for r in config.metrics
        if pair_spec(r) is not None
        for a in config.grid_attributes
        if a.name in attributes
    ]


def run_false_pages(
    populations: Sequence[Population],
    config: MonitorConfig,
    *,
    years: int,
    today_years: int,
    budget: float,
    seed: int,
    records_per_year: int = DEMO_RECORDS_PER_YEAR,
    intersection_years: int | None = None,
) -> dict:
    """Pages per model-year in stationary years, with and without the intersections
    (``intersection_years`` for the grid with them, default ``years``: it costs about
    eight times as much per year).

    The certified layer runs ``years`` independent one-year streams per model (a batch of
    copies of each cell, every one starting undetermined; a first certification is no
    page) for each grid: the default attributes, and with both intersections (budget
    split over its larger set of cells). Today's rule runs ``today_years`` consecutive
    years per model (its Axis 1 evaluation costs ~0.3 s a look) on the grid with the
    intersections; its pages on the default attributes are counted apart (each (model,
    attribute) table has its own random stream, so a default cell's results do not
    depend on the intersections being configured).
    """
    hop = config.window.hop_records
    looks = round(records_per_year / hop)
    w = hop / records_per_year
    base = [a.name for a in config.attributes]
    grids = {"default": base, "intersections": [a.name for a in config.grid_attributes]}
    out: dict = {"looks_per_year": looks, "budget_per_model_year": budget, "grids": {}}
    rng = np.random.default_rng(seed)
    grid_years = {"default": years, "intersections": intersection_years or years}
    certified: dict[str, dict[str, Any]] = {
        g: {"pages": 0, "cells": 0, "first_certifications": 0} for g in grids
    }
    per_cell_pages: dict[str, dict[str, int]] = {g: {} for g in grids}
    t0 = time.perf_counter()
    for pop in populations:
        n_pop = len(pop.label)
        layers = {}
        for g, attrs in grids.items():
            cells = _certified_cells(config, attrs)
            c = threshold_for_budget(budget, len(cells))
            layers[g] = (
                c,
                [
                    (r, a, CertifiedCell(r, a.codes, c, batch=(grid_years[g],),
                                         min_group_support=config.axis1.min_group_support))
                    for r, a in cells
                ],
            )  # fmt: skip
            certified[g]["cells"] = len(cells)
            certified[g]["threshold"] = c
        for _ in range(looks):
            most = max(grid_years.values())
            blocks = [_block_tables(pop, rng.integers(0, n_pop, hop), config) for _ in range(most)]
            for g, (_, cells) in layers.items():
                for r, a, cell in cells:
                    spec = cell.spec
                    counts = [block_counts(b[a.name], spec) for b in blocks[: grid_years[g]]]
                    stacked = {
                        rate: (
                            np.stack([c[rate][0] for c in counts]),
                            np.stack([c[rate][1] for c in counts]),
                        )
                        for rate in spec.rates
                    }
                    cell.update(stacked, w)
                    page = (cell.last_change > 0) & (cell.last_old > 0)
                    first = (cell.last_change > 0) & (cell.last_old == 0)
                    certified[g]["pages"] += int(page.sum())
                    certified[g]["first_certifications"] += int(first.sum())
                    if page.any():
                        key = f"{pop.model_id} {r.name} x {a.name}"
                        per_cell_pages[g][key] = per_cell_pages[g].get(key, 0) + int(page.sum())
    cert_s = time.perf_counter() - t0
    for g in grids:
        model_years = grid_years[g] * len(populations)
        pages = certified[g]["pages"]
        out["grids"][g] = {
            "certified": {
                "pages": pages,
                "model_years": model_years,
                "pages_per_model_year": pages / model_years,
                "ci95": poisson_ci(pages, model_years),
                "within_budget": pages / model_years <= budget,
                "cells_per_model": certified[g]["cells"],
                "threshold_c": certified[g]["threshold"],
                "first_certifications_per_model_year": certified[g]["first_certifications"]
                / model_years,
                "pages_by_cell": per_cell_pages[g],
            }
        }
    out["certified_seconds"] = round(cert_s, 1)
    if today_years > 0:
        t1 = time.perf_counter()
        today = _today_false_pages(populations, config, today_years, seed + 1, base)
        out["today_seconds"] = round(time.perf_counter() - t1, 1)
        for g in grids:
            pages = today[g]["pages"]
            my = today_years * len(populations)
            out["grids"][g]["today"] = {
                "pages": pages,
                "model_years": my,
                "pages_per_model_year": pages / my,
                "ci95": poisson_ci(pages, my),
                "pages_by_cell": today[g]["by_cell"],
                "pages_by_model_year": today[g]["by_year"],
            }
    return out


def _today_false_pages(populations, config, years, seed, base_attributes):
    hop, size = config.window.hop_records, config.window.size
    looks = round(DEMO_RECORDS_PER_YEAR / hop)
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, Any]] = {
        g: {"pages": 0, "by_cell": {}, "by_year": []} for g in ("default", "intersections")
    }
    for pop in populations:
        n_pop = len(pop.label)
        window: list[dict[str, CountTable]] = []
        totals: dict[str, CountTable] | None = None
        trackers: dict[tuple[str, str], ReliableVerdict] = {}
        look = 0
        for _ in range(years):
            year_pages = {"default": 0, "intersections": 0}
            for _ in range(looks):
                block = _block_tables(pop, rng.integers(0, n_pop, hop), config)
                window.append(block)
                totals = (
                    {k: t.copy() for k, t in block.items()}
                    if totals is None
                    else {k: totals[k] + block[k] for k in totals}
                )
                if len(window) * hop > size:
                    old = window.pop(0)
                    totals = {k: totals[k] - old[k] for k in totals}
                look += 1
                results = run_axis1(
                    {(pop.model_id, k): t for k, t in totals.items()},
                    engine_options(config, threads=1),
                    (config.axis1.seed + look) % (2**63),
                )
                for r in results:
                    key = (r.metric, r.attribute)
                    tracker = trackers.setdefault(
                        key, ReliableVerdict(config.confirm_windows, config.axis1.tau_vfr)
                    )
                    if r.dominant_verdict not in ("pass", "fail"):
                        tracker.update("not_evaluable", None)
                        continue
                    if tracker.update(r.dominant_verdict, r.vfr) is None:
                        continue
                    grids = ["intersections"]
                    if r.attribute in base_attributes:
                        grids.append("default")
                    for g in grids:
                        out[g]["pages"] += 1
                        year_pages[g] += 1
                        name = f"{pop.model_id} {r.metric} x {r.attribute}"
                        out[g]["by_cell"][name] = out[g]["by_cell"].get(name, 0) + 1
            for g in out:
                out[g]["by_year"].append(year_pages[g])
    return out


# ------------------------------------------------------------------ detection delay
@dataclass(frozen=True)
class Crossing:
    """A planted crossing on sex (two groups): per-group rate of the metric's driver rate
    before and after, reached linearly over ``ramp_records`` (0: at once)."""

    name: str
    rule: MetricRule
    rate: str  # SR or TPR
    before: tuple[float, float]
    after: tuple[float, float]
    ramp_days: float


def crossings(config: MonitorConfig) -> list[Crossing]:
    rules = {r.name: r for r in config.metrics}
    di, spd, eopp = rules["DI"], rules["SPD"], rules["EOPP"]
    out = [
        Crossing(f"DI 0.90 -> 0.70 {label}", di, "SR", (0.45, 0.50), (0.35, 0.50), days)
        for label, days in (("at once", 0.0), ("over 30 days", 30.0), ("over 90 days", 90.0))
    ]
    out.append(Crossing("SPD 0.05 -> 0.15 at once", spd, "SR", (0.45, 0.50), (0.35, 0.50), 0))
    out.append(Crossing("EOPP 0.05 -> 0.15 at once", eopp, "TPR", (0.65, 0.70), (0.55, 0.70), 0))
    return out


def _true_crossing(c: Crossing) -> float:
    """Fraction of the ramp at which the metric reaches its threshold."""
    spec = pair_spec(c.rule)
    assert spec is not None, "the bench's cases are certifiable rules"
    # the lower group's rate moves; the pair (low, high) binds
    (a0, b0), (a1, b1) = c.before, c.after

    def slack(f):
        a, b = a0 + f * (a1 - a0), b0 + f * (b1 - b0)
        return a - (spec.theta * b - spec.eps)

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if slack(mid) >= 0 else (lo, mid)
    return hi


def _records(rng, n, share_f, rates_f, rates_m, rate, positives=0.4):
    """n records of a two-group attribute: group (0 = F), label, decision; the driver
    rate per record (arrays rates_f, rates_m of length n)."""
    g = (rng.random(n) >= share_f).astype(np.int64)
    y = (rng.random(n) < positives).astype(np.int64)
    p = np.where(g == 0, rates_f, rates_m)
    if rate == "SR":
        d = (rng.random(n) < p).astype(np.int64)
    else:  # TPR moves; negatives selected at 0.2 in both groups
        d = (rng.random(n) < np.where(y == 1, p, 0.2)).astype(np.int64)
    return g, y, d


def run_delay(
    config: MonitorConfig,
    *,
    reps: int,
    today_reps: int,
    budget: float,
    seed: int,
    records_per_year: int = DEMO_RECORDS_PER_YEAR,
    warmup_looks: int = 80,
) -> dict:
    hop, size = config.window.hop_records, config.window.size
    engine = engine_options(config, threads=1)
    per_day = records_per_year / 365.0
    looks_per_year = records_per_year / hop
    w = hop / records_per_year
    cells = len(_certified_cells(config, [a.name for a in config.attributes]))
    c = threshold_for_budget(budget, cells)
    log_a = math.log(c * looks_per_year)
    share_f = 0.42
    out: dict = {"threshold_c": c, "cusum_log_threshold": log_a, "cases": {}}
    for case in crossings(config):
        ramp = case.ramp_days * per_day
        start = warmup_looks * hop
        cross = start + _true_crossing(case) * ramp
        horizon = warmup_looks + math.ceil((ramp + 400 * hop) / hop)
        rng = np.random.default_rng(seed)

        def rates_at(pos, case=case, start=start, ramp=ramp):
            f = np.clip((pos - start) / ramp, 0, 1) if ramp > 0 else (pos >= start) * 1.0
            rf = case.before[0] + f * (case.after[0] - case.before[0])
            rm = case.before[1] + f * (case.after[1] - case.before[1])
            return rf, rm

        res: dict[str, Any] = {"true_crossing_record": cross}
        # certified layer and oracle CUSUM, reps copies in a batch
        cell = CertifiedCell(case.rule, ("F", "M"), c, batch=(reps,),
                             min_group_support=config.axis1.min_group_support)  # fmt: skip
        found = np.full(reps, np.nan)
        paged = np.zeros(reps, dtype=bool)
        cusum = np.zeros(reps)
        cusum_at = np.full(reps, np.nan)
        false_before = np.zeros(reps, dtype=bool)
        q = np.array(case.after)
        p0 = np.array(case.before)
        llr1 = np.log(q / p0)
        llr0 = np.log((1 - q) / (1 - p0))
        # the threshold oracle: the post-change rates against their KL projection onto
        # the boundary (the least favourable passing point), at the same guarantee
        p_star = _kl_projection(q, case.rule, share_f)
        tlr1 = np.log(q / p_star)
        tlr0 = np.log((1 - q) / (1 - p_star))
        tcusum = np.zeros(reps)
        tcusum_at = np.full(reps, np.nan)
        for k in range(horizon):
            pos = k * hop + np.arange(hop)
            rf, rm = rates_at(pos)
            xs, ns = [], []
            for _ in range(reps):
                g, y, d = _records(rng, hop, share_f, rf, rm, case.rate)
                t = CountTable(("F", "M"))
                t.add(g, y, d, np.full(hop, 0.5))
                x, n = block_counts(t, cell.spec)[case.rate]
                xs.append(x)
                ns.append(n)
            x, n = np.stack(xs), np.stack(ns)
            cell.update({case.rate: (x, n)}, w)
            end = (k + 1) * hop
            fail_now = (cell.last_change == 2) & np.isnan(found)
            if end < cross:
                false_before |= cell.last_change == 2
            else:
                found = np.where(fail_now, end, found)
                paged |= fail_now & (cell.last_old == 1)
            cusum = np.maximum(0.0, cusum + (x * llr1 + (n - x) * llr0).sum(axis=-1))
            tcusum = np.maximum(0.0, tcusum + (x * tlr1 + (n - x) * tlr0).sum(axis=-1))
            if end < cross:  # a false alarm: restart
                cusum = np.where(cusum >= log_a, 0.0, cusum)
                tcusum = np.where(tcusum >= log_a, 0.0, tcusum)
            else:
                cusum_at = np.where((cusum >= log_a) & np.isnan(cusum_at), end, cusum_at)
                tcusum_at = np.where((tcusum >= log_a) & np.isnan(tcusum_at), end, tcusum_at)
                if np.isfinite(found).all() and np.isfinite(cusum_at).all() and np.isfinite(
                    tcusum_at
                ).all():
                    break
        res["certified"] = _delays(found - cross, per_day)
        res["certified"]["share_paged_from_pass"] = float(paged.mean())
        res["certified"]["false_fail_before_crossing"] = float(false_before.mean())
        res["oracle_cusum"] = _delays(cusum_at - cross, per_day)
        res["threshold_oracle_cusum"] = _delays(tcusum_at - cross, per_day)
        # today's rule, fewer copies (an Axis 1 evaluation per look)
        today = np.full(today_reps, np.nan)
        rule_list = [case.rule]
        for rep in range(today_reps):
            rng_t = np.random.default_rng(seed + 1 + rep)
            tracker = ReliableVerdict(config.confirm_windows, config.axis1.tau_vfr)
            window: list[CountTable] = []
            total = None
            for k in range(horizon):
                pos = k * hop + np.arange(hop)
                rf, rm = rates_at(pos)
                g, y, d = _records(rng_t, hop, share_f, rf, rm, case.rate)
                t = CountTable(("F", "M"))
                t.add(g, y, d, np.full(hop, 0.5))
                window.append(t)
                total = t.copy() if total is None else total + t
                if len(window) * hop > size:
                    total = total - window.pop(0)
                (r,) = run_axis1({("m", "sex"): total}, engine, config.axis1.seed + k,
                                 rules=rule_list)
                if r.dominant_verdict not in ("pass", "fail"):
                    tracker.update("not_evaluable", None)
                    continue
                change = tracker.update(r.dominant_verdict, r.vfr)
                end = (k + 1) * hop
                if change == ("pass", "fail") and end >= cross:
                    today[rep] = end
                    break
        res["today"] = _delays(today - cross, per_day)
        for layer in ("certified", "today"):
            m = res[layer]["median_records"]
            for key, oracle in (("ratio_to_oracle", "oracle_cusum"),
                                ("ratio_to_threshold_oracle", "threshold_oracle_cusum")):
                base = res[oracle]["median_records"]
                res[layer][key] = None if m is None or base is None or base <= 0 else m / base
        out["cases"][case.name] = res
    return out


def _kl_projection(q: np.ndarray, rule: MetricRule, share_f: float) -> np.ndarray:
    """The passing (F, M) rates nearest to q in expected KL per block (F's share of the
    trials ``share_f``): the boundary point p_F = theta p_M - eps minimising it, on a fine
    grid of p_M."""
    spec = pair_spec(rule)
    assert spec is not None, "the bench's cases are certifiable rules"
    pm = np.linspace(1e-4, 1 - 1e-4, 200_001)
    pf = spec.theta * pm - spec.eps
    ok = (pf > 0) & (pf < 1)
    pm, pf = pm[ok], pf[ok]

    def kl(a, b):
        return a * np.log(a / b) + (1 - a) * np.log((1 - a) / (1 - b))

    cost = share_f * kl(q[0], pf) + (1 - share_f) * kl(q[1], pm)
    i = int(np.argmin(cost))
    return np.array([pf[i], pm[i]])


def _delays(values: np.ndarray, per_day: float) -> dict:
    done = values[np.isfinite(values)]
    if not len(values):
        return {"detected": None, "median_records": None, "median_days": None}
    if not len(done):
        return {"detected": 0.0, "median_records": None, "median_days": None}
    med = float(np.median(done))
    return {
        "detected": float(len(done) / len(values)),
        "median_records": med,
        "median_days": med / per_day,
        "p90_records": float(np.quantile(done, 0.9)),
    }


def run_detection_bench(
    config: MonitorConfig | None = None,
    *,
    years: int = 200,
    today_years: int = 20,
    delay_reps: int = 200,
    today_delay_reps: int = 30,
    budget: float | None = None,
    seed: int = 1,
) -> dict:
    """The whole bench (module docstring): one JSON."""
    base = config or MonitorConfig()
    cfg = MonitorConfig.model_validate({**base.model_dump(), "intersections": INTERSECTIONS})
    budget = budget if budget is not None else base.alerts.false_pages_per_year
    t0 = time.perf_counter()
    pops = demo_populations(cfg, seed=seed)
    out: dict[str, Any] = {"budget_false_pages_per_model_year": budget, "population_seed": seed}
    out["population_seconds"] = round(time.perf_counter() - t0, 1)
    out["false_pages"] = run_false_pages(
        pops, cfg, years=years, today_years=today_years, budget=budget, seed=seed
    )
    out["delay"] = run_delay(base, reps=delay_reps, today_reps=today_delay_reps,
                             budget=budget, seed=seed)  # fmt: skip
    out["calibration"] = run_calibration(base, budget=budget, seed=seed)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


# ------------------------------------------------------------------ VFR calibration
def run_calibration(
    config: MonitorConfig,
    *,
    windows: int = 200,
    budget: float | None = None,
    seed: int = 1,
    di_values: Sequence[float] = (0.70, 0.74, 0.77, 0.79, 0.80, 0.81, 0.83, 0.86, 0.90),
) -> dict:
    """How well VFR predicts a reversal (docs/method.md section 11, calibration table).

    Per true DI (sex, the demo's shares, men selected at 0.50) ``windows`` independent
    windows of ``window.size`` records, each through Axis 1 (the service's K, N, seed
    per window): its VFR and dominant verdict; its *reversal share* is the share of the
    other, independent windows of the same population whose point verdict differs from
    its dominant verdict (what a fresh audit would say). Rows by VFR band and by true
    DI: mean VFR against mean reversal share. The certified verdict on the same windows
    (ten blocks of hop records, from undetermined, the default threshold): the shares
    certified pass, fail and undetermined at the window's end.
    """
    hop, size = config.window.hop_records, config.window.size
    engine = engine_options(config, threads=1)
    rules = {r.name: r for r in config.metrics}
    rule = rules["DI"]
    budget = budget if budget is not None else config.alerts.false_pages_per_year
    cells = len(_certified_cells(config, [a.name for a in config.attributes]))
    c = threshold_for_budget(budget, cells)
    w = hop / DEMO_RECORDS_PER_YEAR
    rng = np.random.default_rng(seed)
    share_f, male = 0.42, 0.50
    by_di: list[dict[str, Any]] = []
    rows: list[tuple[float, float]] = []
    for di in di_values:
        rates = np.array([di * male, male])
        vfr = np.zeros(windows)
        dominant = np.zeros(windows, dtype=bool)
        point = np.zeros(windows, dtype=bool)
        cell = CertifiedCell(rule, ("F", "M"), c, batch=(windows,),
                             min_group_support=config.axis1.min_group_support)  # fmt: skip
        totals = [CountTable(("F", "M")) for _ in range(windows)]
        for _ in range(size // hop):
            xs, ns = [], []
            for i in range(windows):
                g = (rng.random(hop) >= share_f).astype(np.int64)
                d = (rng.random(hop) < rates[g]).astype(np.int64)
                t = CountTable(("F", "M"))
                t.add(g, np.zeros(hop, np.int64), d, np.full(hop, 0.5))
                totals[i] = totals[i] + t
                x, n = rate_counts_sr(t)
                xs.append(x)
                ns.append(n)
            cell.update({"SR": (np.stack(xs), np.stack(ns))}, w)
        for i in range(windows):
            (r,) = run_axis1({("m", "sex"): totals[i]}, engine, config.axis1.seed + i,
                             rules=[rule])
            vfr[i] = r.vfr
            dominant[i] = r.dominant_verdict == "pass"
            point[i] = r.point_verdict == "pass"
        passes = point.sum()
        # the other windows' point verdicts against each window's dominant verdict
        differ = np.where(dominant, (windows - passes) - (~point & dominant),
                          passes - (point & ~dominant))  # fmt: skip
        reversal = differ / (windows - 1)
        verdicts = np.asarray(cell.verdict)
        by_di.append({
            "true_di": di,
            "true_verdict": "pass" if di >= rule.threshold - 1e-12 else "fail",
            "mean_vfr": float(vfr.mean()),
            "mean_reversal_share": float(reversal.mean()),
            "share_dominant_pass": float(dominant.mean()),
            "certified_pass": float((verdicts == "pass").mean()),
            "certified_fail": float((verdicts == "fail").mean()),
            "undetermined": float((verdicts == "undetermined").mean()),
        })  # fmt: skip
        rows.extend(zip(vfr.tolist(), reversal.tolist(), strict=True))
    bands = [(0.0, 0.05), (0.05, 0.10), (0.10, 0.20), (0.20, 0.30), (0.30, 0.51)]
    by_band = []
    arr = np.array(rows)
    for lo, hi in bands:
        sel = (arr[:, 0] >= lo) & (arr[:, 0] < hi)
        if sel.any():
            by_band.append({
                "vfr_band": [lo, hi],
                "windows": int(sel.sum()),
                "mean_vfr": float(arr[sel, 0].mean()),
                "mean_reversal_share": float(arr[sel, 1].mean()),
            })  # fmt: skip
    return {"by_true_di": by_di, "by_vfr_band": by_band, "threshold_c": c,
            "windows_per_value": windows}  # fmt: skip


def rate_counts_sr(table: CountTable) -> tuple[np.ndarray, np.ndarray]:
    return rate_counts(table, "SR")


# ------------------------------------------------------------------ the demo's year
def run_demo_pages(
    config: MonitorConfig,
    *,
    seed: int = 0,
    scenario: str | None = "group_score_shift",
    records: int = 100_000,
    budget: float | None = None,
) -> dict:
    """The certified pages of the demo's year (``vfr-monitor demo``'s stream, the planted
    update of los-xgb-discharge by default), per model in stream order: blocks of hop
    records, each block's length its event-time span. Label-free and label-based cells
    alike take each block's records (the demo's discharges carry their outcome).
    Returns every certified change (a page) and every first certification."""
    from monitor.core.tables import attribute_groups
    from monitor.data import scorer
    from monitor.stream.schema import decision_thresholds

    budget = budget if budget is not None else config.alerts.false_pages_per_year
    hop = config.window.hop_records
    frame = scorer.synthetic_stream(records, seed, scenario).frame
    year_ns = 365.25 * 86_400 * 1e9
    out: dict = {"scenario": scenario, "seed": seed, "models": {}}
    for model_id, sub in frame.groupby("model_id", sort=True):
        cols = {c: sub[c].to_numpy() for c in sub.columns if c != "features"}
        score = sub["score"].to_numpy(np.float64)
        pop = Population(
            str(model_id), attribute_groups(sub, config), sub["label"].to_numpy(np.int64),
            (score >= decision_thresholds(cols, config)).astype(np.int64), score,
        )  # fmt: skip
        times = sub["event_time"].astype("int64").to_numpy()
        cells = _certified_cells(config, [a.name for a in config.grid_attributes])
        c = threshold_for_budget(budget, len(cells))
        state = [
            (r, a, CertifiedCell(r, a.codes, c, min_group_support=config.axis1.min_group_support))
            for r, a in cells
        ]
        pages: list[dict[str, object]] = []
        firsts: list[dict[str, object]] = []
        previous_end = times[0]
        for look, start in enumerate(range(0, len(score) - hop + 1, hop), start=1):
            idx = np.arange(start, start + hop)
            years = max(0.0, float(times[idx[-1]] - previous_end) / year_ns)
            previous_end = times[idx[-1]]
            tables = _block_tables(pop, idx, config)
            for r, a, cell in state:
                change = cell.update(block_counts(tables[a.name], cell.spec), years)
                if change is None:
                    continue
                row = {"cell": f"{r.name} x {a.name}", "look": look, "change": list(change),
                       "records": int(cell.last_records),
                       "date": str(sub["event_time"].iloc[idx[-1]].date())}  # fmt: skip
                (firsts if change[0] == "undetermined" else pages).append(row)
        final = {f"{r.name} x {a.name}": cell.verdict for r, a, cell in state}
        out["models"][str(model_id)] = {
            "threshold_c": c, "pages": pages, "first_certifications": firsts,
            "final_verdicts": final,
        }  # fmt: skip
    return out
