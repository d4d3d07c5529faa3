"""Seeded synthetic multi-hospital discharge cohort calibrated to the VFR-Audit paper's Table 3.

Why this exists: the real Texas-100X records cannot ship with the monitor (their terms forbid
redistribution), yet the demo, the benchmarks and the drift tests need data whose group sizes,
base-rate gaps and hospital heterogeneity look like the cohort the paper audited.  Verdict
stability depends on exactly those quantities (small strata, base-rate gaps, skewed sites), so
they are reproduced by construction rather than approximately:

* **Composition.** Race, sex and ethnicity are drawn from the Table-3 marginals; ethnicity is
  drawn *given* race so that 99.4 % of Black-coded records are Hispanic-coded (a THCIC coding
  artefact the paper reports) while the ethnicity marginal still matches.  Age is drawn given
  the hospital (case mix), with hospital tilts centred on the volume-weighted mean so the
  pooled age marginal is unchanged.
* **Positive rate (LOS > 3 days).** A logistic model
  ``logit P(label) = c_race + c_sex + c_eth + c_age + u_hospital + BETA * severity``.
  The main-effect intercepts ``c_*`` are *calibrated numerically* by raking on an internal
  sample of the same seed's population: each sweep sets, per attribute and group,
  ``c += logit(target) - logit(mean predicted probability)``, cycling over the four
  attributes until every marginal rate matches Table 3 to 1e-6.  (A main-effects logistic
  model can match all margins at once, the same fixed point iterative proportional fitting
  reaches on the logit scale.)  The calibration sample has equal race shares, reweighted to
  Table 3, so the 0.4 % stratum is calibrated as precisely as the big ones.  The fit is
  cached per seed, so calls with different ``n`` share one population model.
  Two variance reductions then make the *realised* rates land on the targets for any seed,
  not just in expectation: severity is Latin-hypercube stratified within each demographic
  cell, and labels are drawn by systematic sampling within each cell (every label is still
  Bernoulli(p_i), but a cell's positive count is within one record of its expected value).
  Plain binomial draws would leave the 3.4k-record American Indian stratum 0.8 pp (one SE)
  from its target.
* **Hospitals.** 441 sites whose expected volume shares follow a piecewise log-linear
  rank-size curve fitted offline to the Table-3 volume facts (top-10/50/100/200 shares and
  the median).  Each site carries real random effects: a logit shift ``u`` (label), a
  severity shift (sicker populations), an age-mix tilt and a price level (charges).
* **Features.** A latent severity ``z`` drives every clinical feature and the label, and
  several features also depend on age or race directly, so a model trained on features
  alone still reproduces group disparities.  ``total_charges_log`` is a discharge-time
  quantity that depends on the stay itself (it leaks LOS, as administrative charges do);
  drop it for an admission-time-only model.

Drift scenarios (``SCENARIOS``) change the data from ``DRIFT_START`` (2026-07-01) on and
touch only what they name.  A group-specific *score* shift (``group_score_shift``) is not a
data scenario: it models a model update and belongs to the scorer, so it is not offered here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import special

N_HOSPITALS = 441
#: Records in the paper's cohort; the volume facts below are quoted at this size.
PAPER_N = 925_128
YEAR_START = pd.Timestamp("2026-01-01", tz="UTC")
YEAR_END = pd.Timestamp("2027-01-01", tz="UTC")  # exclusive: times cover 2026-01-01..2026-12-31
#: Scenarios act on records whose event_time is on or after this instant.
DRIFT_START = pd.Timestamp("2026-07-01", tz="UTC")

#: Table 3 of the VFR-Audit paper (Texas-100X, 925,128 records).  Per attribute and group code
#: (monitor.config defaults): stratum name, record count, percentage, positive rate (LOS > 3 d).
TABLE3: dict = {
    "n_records": PAPER_N,
    "attributes": {
        "race": {
            "0": {"name": "American Indian", "n": 3_474, "pct": 0.4, "pos_rate": 0.334},
            "1": {"name": "Asian / Pacific Islander", "n": 16_404, "pct": 1.8, "pos_rate": 0.410},
            "2": {"name": "Black", "n": 115_212, "pct": 12.5, "pos_rate": 0.523},
            "3": {"name": "White", "n": 603_368, "pct": 65.2, "pos_rate": 0.453},
            "4": {"name": "Other / Unknown", "n": 186_670, "pct": 20.2, "pos_rate": 0.404},
        },
        "sex": {
            "0": {"name": "Male", "n": 585_840, "pct": 63.3, "pos_rate": 0.411},
            "1": {"name": "Female", "n": 339_288, "pct": 36.7, "pos_rate": 0.518},
        },
        "ethnicity": {
            "0": {"name": "Hispanic", "n": 670_586, "pct": 72.5, "pos_rate": 0.471},
            "1": {"name": "Non-Hispanic", "n": 254_542, "pct": 27.5, "pos_rate": 0.397},
        },
        "age_group": {
            "0": {"name": "Pediatric (<18)", "n": 38_121, "pct": 4.1, "pos_rate": 0.403},
            "1": {"name": "Young Adult (18-39)", "n": 208_528, "pct": 22.5, "pos_rate": 0.207},
            "2": {"name": "Middle-Aged (40-64)", "n": 281_409, "pct": 30.4, "pos_rate": 0.418},
            "3": {"name": "Elderly (>=65)", "n": 397_070, "pct": 42.9, "pos_rate": 0.606},
        },
    },
    #: Share of Black-coded records also coded Hispanic (paper section 4.1.5).
    "black_hispanic_share": 0.994,
    "hospitals": {
        "n_hospitals": N_HOSPITALS,
        "median_records": 686,  # Figure 2(d)/Table 3; "about 700"
        "top_share": {10: 0.135, 50: 0.465, 100: 0.705, 200: 0.933},
        "top_records": {10: 124_892, 50: 430_184, 100: 652_215, 200: 862_944},
    },
}

#: Named drift scenarios (None = stationary year).  Each acts from DRIFT_START on.
SCENARIOS: dict[str, str] = {
    "demographic_shift": (
        "From 2026-07-01 the race mix moves toward Black (about 12.5 % -> 25.6 %) and the age mix "
        "toward Elderly (about 43 % -> 57 %); the label model given attributes is unchanged."
    ),
    "hospital_case_mix": (
        "From 2026-07-01 a cluster of 60-90 smaller hospitals (~15 % of volume) admits older, "
        "sicker patients: age mix 40 % toward Elderly and severity +0.6 SD (more "
        "comorbidity); other hospitals are unchanged."
    ),
    "label_rate": (
        "From 2026-07-01 the LOS > 3 days rate rises for everyone (+0.6 on the logit, about "
        "+10 pp overall); composition and severity-driven features are unchanged."
    ),
}

ATTRIBUTES: tuple[str, ...] = ("race", "sex", "ethnicity", "age_group")

#: Rank-size knots (rank, records at PAPER_N), fitted offline by least squares so that the
#: piecewise log-linear curve through them reproduces Table 3's top-10/50/100/200 shares and
#: the 686-record median exactly (the tail to rank 441 is steep: many small sites).
_VOLUME_KNOTS: tuple[tuple[int, float], ...] = (
    (1, 14786.0),
    (10, 10418.5),
    (50, 5491.3),
    (100, 3566.4),
    (200, 1132.1),
    (221, 686.0),
    (441, 24.84),
)

BETA_SEVERITY = 1.4  # severity -> logit: makes the features informative (AUROC well above 0.6)
#: Mean severity per age group: older patients are sicker, younger adults (obstetrics) less.
_AGE_SEVERITY = np.array([-0.1, -0.45, 0.0, 0.35])
#: Age-mix tilt direction per hospital (zero-sum, so centred tilts keep the pooled marginal).
_AGE_TILT = np.array([0.0, -0.08, -0.02, 0.10])
_HOSP_LOGIT_SD = 0.35
_HOSP_SEVERITY_SD = 0.25
_HOSP_PRICE_SD = 0.30
_CAL_N = 300_000

# Scenario magnitudes (see SCENARIOS).
_DEMO_RACE_PULL = 0.15  # fraction of post-drift race mass moved to Black
_DEMO_AGE_PULL = 0.25  # fraction of post-drift age mass moved to Elderly
_CASEMIX_AGE_PULL = 0.40
_CASEMIX_SEVERITY = 0.6
_CASEMIX_TARGET_SHARE = 0.15
_LABEL_RATE_SHIFT = 0.6

_CODES = {a: np.array(list(TABLE3["attributes"][a]), dtype=object) for a in ATTRIBUTES}


def _marginal(attr: str) -> np.ndarray:
    counts = np.array([g["n"] for g in TABLE3["attributes"][attr].values()], dtype=float)
    return counts / counts.sum()


def _target_rates(attr: str) -> np.ndarray:
    return np.array([g["pos_rate"] for g in TABLE3["attributes"][attr].values()])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p / (1.0 - p))


def volume_shares() -> np.ndarray:
    """Expected share of records per hospital rank (descending; sums to 1)."""
    ranks, counts = np.array(_VOLUME_KNOTS).T
    curve = np.exp(np.interp(np.arange(1, N_HOSPITALS + 1), ranks, np.log(counts)))
    return curve / curve.sum()


def _eth_given_race() -> np.ndarray:
    """P(Hispanic | race): 0.994 for Black, one common value elsewhere that keeps the marginal."""
    race = _marginal("race")
    hisp = _marginal("ethnicity")[0]
    black = TABLE3["black_hispanic_share"]
    other = (hisp - race[2] * black) / (1.0 - race[2])
    p = np.full(len(race), other)
    p[2] = black
    return p


@dataclass(frozen=True)
class _Universe:
    """The seed's hospitals: ids, volume shares and random effects (all length 441)."""

    ids: np.ndarray
    shares: np.ndarray
    logit_shift: np.ndarray
    severity_shift: np.ndarray
    age_probs: np.ndarray  # (441, 4) age mix per hospital
    price: np.ndarray
    cluster: np.ndarray  # bool: the hospital_case_mix drift cluster


def _make_universe(seed: int) -> _Universe:
    rng = np.random.default_rng([seed, 0])
    shares = volume_shares()[rng.permutation(N_HOSPITALS)]  # biggest site is not always H001

    def centred(x: np.ndarray) -> np.ndarray:
        # Volume-weighted centring keeps pooled margins where Table 3 puts them.
        return x - float(shares @ x)

    tilt = centred(np.clip(rng.normal(0.0, 0.8, N_HOSPITALS), -2.0, 2.0))
    age_probs = _marginal("age_group")[None, :] + tilt[:, None] * _AGE_TILT[None, :]
    # Case-mix cluster: random sites (largest 10 excluded) until ~15 % of expected volume.
    order = rng.permutation(N_HOSPITALS)
    big = np.argsort(-shares)[:10]
    order = order[~np.isin(order, big)]
    take = np.cumsum(shares[order]) <= _CASEMIX_TARGET_SHARE
    cluster = np.zeros(N_HOSPITALS, dtype=bool)
    cluster[order[take]] = True
    return _Universe(
        ids=np.array([f"H{i:03d}" for i in range(1, N_HOSPITALS + 1)], dtype=object),
        shares=shares,
        logit_shift=centred(rng.normal(0.0, _HOSP_LOGIT_SD, N_HOSPITALS)),
        severity_shift=centred(rng.normal(0.0, _HOSP_SEVERITY_SD, N_HOSPITALS)),
        age_probs=age_probs,
        price=rng.normal(0.0, _HOSP_PRICE_SD, N_HOSPITALS),
        cluster=cluster,
    )


def case_mix_cluster(seed: int = 0) -> list[str]:
    """Hospital ids whose case mix changes under the ``hospital_case_mix`` scenario."""
    uni = _make_universe(seed)
    return [str(h) for h in uni.ids[uni.cluster]]


def _categorical(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One draw per row of an (n, k) probability matrix (vectorised inverse CDF)."""
    cdf = np.cumsum(probs, axis=1)
    u = rng.random(len(probs)) * cdf[:, -1]
    return np.minimum((u[:, None] >= cdf).sum(axis=1), probs.shape[1] - 1)


def _pull(base: np.ndarray, toward: int, weight: float) -> np.ndarray:
    """Mix a probability vector (or rows) with a point mass on ``toward``."""
    point = np.zeros(base.shape[-1])
    point[toward] = 1.0
    return (1.0 - weight) * base + weight * point


def _draw_people(
    rng: np.random.Generator,
    n: int,
    uni: _Universe,
    scenario: str | None,
    race_mix: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Times, hospitals, attributes, severity and the label logit without group intercepts.

    ``race_mix`` overrides the race marginal; calibration uses it to oversample small races.
    """
    span = int((YEAR_END - YEAR_START).value)
    t_ns = np.sort(rng.integers(0, span, n)) + YEAR_START.value
    post = t_ns >= DRIFT_START.value
    hosp = rng.choice(N_HOSPITALS, size=n, p=uni.shares)

    race_p = np.broadcast_to(_marginal("race") if race_mix is None else race_mix, (n, 5))
    if scenario == "demographic_shift":
        race_p = np.where(post[:, None], _pull(race_p, 2, _DEMO_RACE_PULL), race_p)
    race = _categorical(rng, race_p)
    eth = (rng.random(n) >= _eth_given_race()[race]).astype(np.int64)  # 0 = Hispanic
    sex = (rng.random(n) < _marginal("sex")[1]).astype(np.int64)

    age_p = uni.age_probs[hosp]
    casemix = np.zeros(n, dtype=bool)
    if scenario == "demographic_shift":
        age_p = np.where(post[:, None], _pull(age_p, 3, _DEMO_AGE_PULL), age_p)
    elif scenario == "hospital_case_mix":
        casemix = post & uni.cluster[hosp]
        age_p = np.where(casemix[:, None], _pull(age_p, 3, _CASEMIX_AGE_PULL), age_p)
    age = _categorical(rng, age_p)

    cell = ((race * 2 + sex) * 2 + eth) * 4 + age
    strata = cell * 2 + post
    severity = _stratified_normals(rng, strata) + _AGE_SEVERITY[age] + uni.severity_shift[hosp]
    severity += casemix * _CASEMIX_SEVERITY
    offset = uni.logit_shift[hosp] + BETA_SEVERITY * severity
    if scenario == "label_rate":
        offset = offset + post * _LABEL_RATE_SHIFT
    return {
        "t_ns": t_ns,
        "post": post,
        "hospital": hosp,
        "race": race,
        "sex": sex,
        "ethnicity": eth,
        "age_group": age,
        "severity": severity,
        "offset": offset,
        "strata": strata,
    }


def _intercept_logit(people: dict[str, np.ndarray], coef: dict[str, np.ndarray]) -> np.ndarray:
    return people["offset"] + sum(coef[a][people[a]] for a in ATTRIBUTES)


@lru_cache(maxsize=16)
def _population(seed: int) -> tuple[_Universe, dict[str, np.ndarray]]:
    """The seed's hospitals plus group intercepts raked to Table 3's positive rates."""
    uni = _make_universe(seed)
    # Equal race shares in the calibration sample, reweighted to Table 3: the 0.4 % American
    # Indian stratum then gets ~60k calibration records instead of ~1.2k, which keeps the
    # calibration error of its intercept far below the 1 pp target.
    race_mix = np.full(5, 0.2)
    people = _draw_people(np.random.default_rng([seed, 1]), _CAL_N, uni, None, race_mix)
    weight = (_marginal("race") / race_mix)[people["race"]]
    coef = {a: np.zeros(len(_marginal(a))) for a in ATTRIBUTES}
    idx = {a: people[a] for a in ATTRIBUTES}
    sizes = {a: np.bincount(idx[a], weights=weight, minlength=len(coef[a])) for a in ATTRIBUTES}
    eta = _intercept_logit(people, coef)
    for _ in range(100):
        worst = 0.0
        for a in ATTRIBUTES:
            p = _sigmoid(eta) * weight
            rate = np.bincount(idx[a], weights=p, minlength=len(coef[a])) / sizes[a]
            target = _target_rates(a)
            worst = max(worst, float(np.abs(rate - target).max()))
            step = _logit(target) - _logit(rate)
            coef[a] = coef[a] + step
            eta += step[idx[a]]
        if worst < 1e-5:
            break
    return uni, coef


def _stratum_positions(rng: np.random.Generator, strata: np.ndarray) -> tuple:
    """A random order of the records grouped by stratum, plus each stratum's size and start."""
    order = np.lexsort((rng.random(len(strata)), strata))
    sizes = np.bincount(strata)
    return order, sizes, np.cumsum(sizes) - sizes


def _stratified_normals(rng: np.random.Generator, strata: np.ndarray) -> np.ndarray:
    """N(0, 1) per record, Latin-hypercube stratified within each stratum.

    Each value is still exactly N(0, 1); within a stratum the values cover the distribution
    evenly, so a small stratum's mean severity (hence its positive rate) does not wander by
    sampling luck: without this the ~3.4k American Indian records alone would move that
    stratum's rate by ~0.5 pp from seed to seed.
    """
    n = len(strata)
    if n == 0:
        return np.empty(0)
    order, sizes, starts = _stratum_positions(rng, strata)
    ordered = strata[order]
    u = (np.arange(n) - starts[ordered] + rng.random(n)) / sizes[ordered]
    out = np.empty(n)
    out[order] = special.ndtri(u)
    return out


def _systematic_bernoulli(
    rng: np.random.Generator, p: np.ndarray, strata: np.ndarray
) -> np.ndarray:
    """0/1 draws with P(1) = p_i exactly, whose total per stratum is floor or ceil of sum(p).

    Systematic sampling with a random start along a random order of each stratum: record i is
    1 when the interval (C_{i-1}, C_i] of cumulative probability holds a point v + k.  That is
    what "rates by construction" means here: each label is still a Bernoulli(p_i) draw, but a
    stratum's positive count is within one record of its expectation instead of a binomial
    standard error away (0.8 pp for the 3.4k-record American Indian stratum).
    """
    n = len(p)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    order, sizes, starts = _stratum_positions(rng, strata)
    ordered = strata[order]
    cum = np.cumsum(p[order])
    base = np.concatenate([[0.0], cum])[starts][ordered]  # cumulative mass before the stratum
    start = rng.random(len(sizes))[ordered]
    hi = np.floor(cum - base + start)
    lo = np.floor(cum - p[order] - base + start)
    out = np.empty(n, dtype=np.int64)
    out[order] = np.minimum(hi - lo, 1).astype(np.int64)  # guard float round-off
    return out


def _record_ids(seed: int, n: int) -> np.ndarray:
    """Unique, seed-prefixed ids in time order (``s<seed>-0000000``)."""
    if n == 0:
        return np.array([], dtype=str)
    return np.char.add(f"s{seed}-", np.char.zfill(np.arange(n).astype(str), 7))


def synth_cohort(n: int, seed: int = 0, scenario: str | None = None) -> pd.DataFrame:
    """Draw ``n`` discharges over 2026, sorted by event_time, optionally with a drift scenario.

    Columns: record_id, hospital_id, event_time (UTC), race, sex, ethnicity, age_group (string
    codes as in monitor.config), n_diagnoses, n_procedures, admission_type (1 emergency,
    2 urgent, 3 elective, 4 newborn), emergency (0/1), comorbidity_index, prior_admissions,
    total_charges_log, label (1 = LOS > 3 days).  Same (n, seed, scenario) -> identical frame.
    """
    if scenario is not None and scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {sorted(SCENARIOS)} or None")
    if n < 0:
        raise ValueError("n must be non-negative")
    uni, coef = _population(seed)
    rng = np.random.default_rng([seed, 2])
    pp = _draw_people(rng, n, uni, scenario)
    label = _systematic_bernoulli(rng, _sigmoid(_intercept_logit(pp, coef)), pp["strata"])

    z, age, race, hosp = pp["severity"], pp["age_group"], pp["race"], pp["hospital"]
    black = (race == 2).astype(float)
    emergency = (rng.random(n) < _sigmoid(-0.2 + 0.7 * z + 0.3 * black)).astype(np.int64)
    urgent = (z + rng.normal(0.0, 1.0, n)) > 0.3
    newborn = (age == 0) & (rng.random(n) < 0.5)
    admission_type = np.where(emergency == 1, 1, np.where(newborn, 4, np.where(urgent, 2, 3)))
    n_procedures = rng.poisson(np.exp(0.2 + 0.35 * z - 0.1 * (age == 1)))
    charges = (
        9.6
        + uni.price[hosp]
        + 0.35 * z
        + 0.55 * label
        + 0.12 * np.minimum(n_procedures, 10)
        + rng.normal(0.0, 0.45, n)
    )
    data = {
        "record_id": _record_ids(seed, n),
        "hospital_id": uni.ids[hosp],
        "event_time": pd.DatetimeIndex(pp["t_ns"].astype("datetime64[ns]")).tz_localize("UTC"),
        **{a: _CODES[a][pp[a]] for a in ATTRIBUTES},
        "n_diagnoses": np.minimum(rng.poisson(np.exp(1.7 + 0.22 * z + 0.12 * age)), 25),
        "n_procedures": n_procedures,
        "admission_type": admission_type.astype(np.int64),
        "emergency": emergency,
        "comorbidity_index": np.minimum(rng.poisson(np.exp(-0.6 + 0.45 * z + 0.35 * age)), 15),
        "prior_admissions": rng.poisson(np.exp(-1.0 + 0.35 * z + 0.15 * age + 0.25 * black)),
        "total_charges_log": charges,
        "label": label,
    }
    return pd.DataFrame(data)
