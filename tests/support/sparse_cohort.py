"""A seeded ICU-like cohort where deaths are rare, for the not-evaluable cells (issue 24).

In the spirit of the eICU collaborative demo (1,683 ICU stays, APACHE IVa mortality):
about 8 % die, most stays are White, and ethnicity is mostly Not Hispanic. So only one
race group and only one ethnicity group reach 20 positives: EOPP and EOD by race and by
ethnicity are undefined (fewer than two groups reach the TPR denominator), while sex and
age group stay defined. 20 hospitals of unequal size give Axis 3 its folds.
Synthetic: no patient record, figures drawn from fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Group shares (codes of the default configuration, monitor.config).
RACE = {"3": 0.77, "2": 0.11, "4": 0.05, "1": 0.04, "0": 0.03}
ETHNICITY = {"1": 0.94, "0": 0.06}
SEX = {"0": 0.54, "1": 0.46}
AGE = {"1": 0.10, "2": 0.35, "3": 0.55}
DEATH_RATE = 0.085


def icu_like_cohort(n: int = 1683, seed: int = 24, hospitals: int = 20) -> pd.DataFrame:
    """One scored model's cohort, in the scored-discharge schema (docs/method.md section 1)."""
    rng = np.random.default_rng(seed)

    def pick(shares: dict[str, float]) -> np.ndarray:
        return rng.choice(list(shares), size=n, p=list(shares.values()))

    label = (rng.random(n) < DEATH_RATE).astype(int)
    logit = -2.2 + 2.4 * label + rng.normal(0.0, 1.0, n)
    score = 1.0 / (1.0 + np.exp(-logit))
    size = rng.dirichlet(np.full(hospitals, 2.0))
    return pd.DataFrame(
        {
            "record_id": [f"stay-{i:05d}" for i in range(n)],
            "model_id": "apache-iva",
            "event_time": "2026-06-01T00:00:00Z",
            "hospital_id": rng.choice([f"h{i:02d}" for i in range(hospitals)], size=n, p=size),
            "score": np.round(score, 6),
            "label": label,
            "race": pick(RACE),
            "sex": pick(SEX),
            "ethnicity": pick(ETHNICITY),
            "age_group": pick(AGE),
        }
    )
