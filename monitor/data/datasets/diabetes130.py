"""UCI Diabetes 130-US hospitals (1999-2008), shipped with vfr-monitor for its real-data demo.

Source: Strack, B. et al. (2014), "Impact of HbA1c Measurement on Hospital Readmission Rates",
BioMed Research International; UCI Machine Learning Repository, "Diabetes 130-US hospitals for
years 1999-2008", https://doi.org/10.24432/C5230J, licensed CC BY 4.0. The zip next to this
module is the UCI file, unchanged.

What the file does and does not carry, and what the monitor makes of it:

* **Label.** ``time_in_hospital`` is the length of stay in days; label = LOS > 3 days, the
  same target as the synthetic cohort and the VFR-Audit paper.
* **Attributes.** race (``?`` becomes ``Unknown``), gender (the three ``Unknown/Invalid``
  rows are dropped and counted: no configured group can hold them) and the ten-year age
  band, grouped into under 50 / 50-69 / 70 and over.
* **No site id.** The public file has no hospital column, so Axis 3 (agreement across
  hospitals) is *not applicable*: tiers are marked partial. Hospitals are never invented.
* **No dates.** Encounters carry no admission or discharge date, so ``event_time`` is a
  replay clock: records in ``encounter_id`` order, spread evenly over a nominal year
  starting 2026-01-01. Time-based windows on it mean "that share of the file", not months.
* **Features.** Counts recorded during the encounter (lab procedures, medications,
  procedures, diagnoses) and prior-utilisation counts. Several are end-of-encounter
  quantities, so the model is a discharge-time model, as in the paper's main analysis.
"""

from __future__ import annotations

import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from monitor.data.datasets import Dataset

ZIP_PATH = Path(__file__).with_name("diabetes130.zip")
CREDIT = (
    "UCI Diabetes 130-US hospitals 1999-2008 (Strack et al. 2014, "
    "https://doi.org/10.24432/C5230J), CC BY 4.0"
)
FEATURES: tuple[str, ...] = (
    "num_lab_procedures",
    "num_procedures",
    "num_medications",
    "number_outpatient",
    "number_emergency",
    "number_inpatient",
    "number_diagnoses",
    "admission_type_id",
    "admission_source_id",
)
ATTRIBUTES: list[dict] = [
    {
        "name": "race",
        "groups": {
            "Caucasian": "Caucasian",
            "AfricanAmerican": "African American",
            "Hispanic": "Hispanic",
            "Asian": "Asian",
            "Other": "Other",
            "Unknown": "Unknown",
        },
    },
    {"name": "sex", "groups": {"Female": "Female", "Male": "Male"}},
    {
        "name": "age_group",
        "groups": {"<50": "under 50", "50-69": "50 to 69", "70+": "70 and over"},
    },
]
_AGE_BANDS: dict[str, str] = {
    **{f"[{lo}-{lo + 10})": "<50" for lo in range(0, 50, 10)},
    "[50-60)": "50-69",
    "[60-70)": "50-69",
    "[70-80)": "70+",
    "[80-90)": "70+",
    "[90-100)": "70+",
}
_REPLAY_START = pd.Timestamp("2026-01-01", tz="UTC")
_REPLAY_SPAN = pd.Timedelta(days=365)


@lru_cache(maxsize=2)
def read_raw(path: str | Path = ZIP_PATH) -> pd.DataFrame:
    """The UCI file as published (101,766 encounters)."""
    with zipfile.ZipFile(path) as z:
        name = next(
            n for n in z.namelist() if n.endswith("diabetic_data.csv") and "MACOSX" not in n
        )
        with z.open(name) as f:
            return pd.read_csv(f, low_memory=False)


def load_diabetes130(path: str | Path = ZIP_PATH) -> Dataset:
    """Diabetes-130 in the monitor's schema (see the module docstring for every choice).

    >>> ds = load_diabetes130()
    >>> len(ds.frame), ds.has_sites, ds.real_dates
    (101763, False, False)
    >>> float(ds.frame["label"].mean().round(3))
    0.517
    """
    raw = read_raw(path)
    sex_known = raw["gender"].isin(["Female", "Male"])
    raw = raw[sex_known].sort_values("encounter_id", kind="stable").reset_index(drop=True)
    n = len(raw)
    offsets = (np.arange(n) * (_REPLAY_SPAN.value // max(n, 1))).astype("timedelta64[ns]")
    frame = pd.DataFrame(
        {
            "record_id": "dia-" + raw["encounter_id"].astype(str),
            "event_time": _REPLAY_START + pd.to_timedelta(offsets),
            "race": raw["race"].replace("?", "Unknown").astype(str),
            "sex": raw["gender"].astype(str),
            "age_group": raw["age"].map(_AGE_BANDS).astype(str),
            "label": (raw["time_in_hospital"] > 3).astype(np.int64),
            **{f: pd.to_numeric(raw[f], errors="coerce").astype(float) for f in FEATURES},
        }
    )
    dropped = int((~sex_known).sum())
    return Dataset(
        name="diabetes130",
        frame=frame,
        features=FEATURES,
        attributes=ATTRIBUTES,
        has_sites=False,
        real_dates=False,
        credit=CREDIT,
        notes=[
            f"{dropped} encounters with gender 'Unknown/Invalid' dropped (no configured group)",
            "no hospital id in the public file: Axis 3 is not applicable (tiers are partial)",
            "no dates in the file: event_time is a replay clock over a nominal year",
        ],
    )
