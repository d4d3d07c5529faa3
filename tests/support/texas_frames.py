"""A file in the Texas-100X (THCIC PUDF) layout, made here: every code of every attribute.

Shared by the loader's tests, the demo's and the README example's (the real file is not
shipped).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

N = 405  # 15 full cycles of the 27 PAT_AGE codes


def clean_texas_frame(n: int = N, seed: int = 0) -> pd.DataFrame:
    """Every code of every attribute, cycled independently (codes as zero-padded text)."""
    rng = np.random.default_rng(seed)
    i = np.arange(n)
    return pd.DataFrame(
        {
            "THCIC_ID": np.array(["000107", "1200", "4500", "7001"], dtype=object)[i % 4],
            "SEX_CODE": (i % 2).astype(str),
            "TYPE_OF_ADMISSION": rng.integers(0, 5, n),
            "SOURCE_OF_ADMISSION": rng.integers(0, 9, n),
            "LENGTH_OF_STAY": (i % 9).astype(str),
            "PAT_AGE": np.char.zfill((i % 27).astype(str), 2).astype(object),
            "PAT_STATUS": rng.integers(0, 20, n),
            "RACE": ((i // 2) % 5).astype(str),
            "ETHNICITY": ((i // 10) % 2).astype(str),
            "TOTAL_CHARGES": np.round(rng.gamma(2.0, 9000.0, n), 2),
            "ADMITTING_DIAGNOSIS": rng.integers(0, 4000, n),
            "PRINC_SURG_PROC_CODE": rng.integers(0, 100, n),
        }
    )
