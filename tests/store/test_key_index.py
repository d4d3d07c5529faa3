"""monitor.store.key_index: conflicting redeliveries are found against the stored content."""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor.store.key_index import conflicting_rows


def test_conflicting_rows_compare_with_the_stored_then_the_first_content():
    keys = pd.DataFrame(
        {"model_id": ["m"] * 4, "record_id": ["a", "a", "b", "b"], "pos": np.arange(4)}
    )
    content = np.array(["x", "y", "p", "p"], dtype=object)
    new = np.array([False, False, True, False])  # "a" stored before; "b" new in the batch
    got = conflicting_rows(keys, content, new, np.array([0]), np.array(["x"], dtype=object))
    assert got.tolist() == [False, True, False, False]
    # a stored record without a hash (before schema v4) cannot be compared: no conflict
    unknown = conflicting_rows(keys, content, new, np.array([0]), np.array([None], dtype=object))
    assert unknown.tolist() == [False, False, False, False]
