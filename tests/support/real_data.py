"""Scored cohorts built from the real data the project ships, for end-to-end tests.

UCI Diabetes-130 (CC BY 4.0, Strack et al. 2014): label = time_in_hospital > 3
days; a logistic regression on admission-time counts gives the scores. The data
has no site id, so any audit of it must report Axis 3 as not applicable.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from monitor.data.datasets.diabetes130 import FEATURES, ZIP_PATH, read_raw

#: The UCI file as the product ships it (a test checks it is byte for byte the UCI file).
DIABETES_ZIP = ZIP_PATH

#: The attribute set and code map a user would write for this file.
DIABETES_CONFIG = """
[[attributes]]
name = "race"
[attributes.groups]
Caucasian = "Caucasian"
AfricanAmerican = "African American"
Hispanic = "Hispanic"
Asian = "Asian"
Other = "Other"
Unknown = "Unknown"

[[attributes]]
name = "sex"
groups = { Female = "Female", Male = "Male" }

[[attributes]]
name = "age_group"
groups = { "<50" = "under 50", "50-69" = "50 to 69", "70+" = "70 and over" }

[input]
model_id = "los-logreg"

[input.columns]
sex = "gender"
age_group = "age"
score = "score"

[input.label_from]
column = "time_in_hospital"
greater_than = 3

[input.codes.race]
"?" = "Unknown"

[input.codes.age_group]
"[0-10)" = "<50"
"[10-20)" = "<50"
"[20-30)" = "<50"
"[30-40)" = "<50"
"[40-50)" = "<50"
"[50-60)" = "50-69"
"[60-70)" = "50-69"
"[70-80)" = "70+"
"[80-90)" = "70+"
"[90-100)" = "70+"

[equilense]
features = ["num_lab_procedures", "num_procedures", "num_medications", "number_diagnoses"]
"""


def diabetes_raw() -> pd.DataFrame:
    return read_raw(DIABETES_ZIP)


@lru_cache(maxsize=1)
def diabetes_scored(seed: int = 0) -> pd.DataFrame:
    """The audit split of Diabetes-130 with a logistic-regression score column.

    The three records with gender 'Unknown/Invalid' are dropped (no configured group).
    """
    raw = diabetes_raw()
    raw = raw[raw["gender"].isin(["Female", "Male"])].reset_index(drop=True)
    y = (raw["time_in_hospital"] > 3).astype(int).to_numpy()
    X = raw[list(FEATURES)].to_numpy(dtype=float)
    idx_train, idx_audit = train_test_split(
        np.arange(len(raw)), test_size=0.3, random_state=seed, stratify=y
    )
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))
    model.fit(X[idx_train], y[idx_train])
    audit = raw.iloc[idx_audit].reset_index(drop=True).copy()
    audit["score"] = model.predict_proba(X[idx_audit])[:, 1]
    return audit
