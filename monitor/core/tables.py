"""From validated records to the (model, attribute) count tables Axis 1 works on."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from monitor.config import AttributeConfig, MonitorConfig
from monitor.core.counts import CountTable


@functools.lru_cache(maxsize=64)
def _code_index(codes: tuple[str, ...]) -> pd.Index:
    return pd.Index(list(codes), dtype=object)


def group_index(codes: np.ndarray | pd.Series, attribute: AttributeConfig) -> np.ndarray:
    """Position of each record's group code in the attribute's configured code list."""
    values = np.asarray(codes, dtype=object)
    if len(values) and set(map(type, values)) == {str}:  # the usual case, looked up in C
        index = _code_index(tuple(attribute.codes)).get_indexer(values)
        if (index < 0).any():
            raise ValueError(f"unknown group code for attribute {attribute.name!r}")
        return index.astype(np.int64)
    lookup = {c: i for i, c in enumerate(attribute.codes)}
    try:
        return np.fromiter((lookup[str(c)] for c in np.asarray(codes, dtype=object)), np.int64)
    except KeyError as exc:
        raise ValueError(f"unknown group code for attribute {attribute.name!r}") from exc


def tables_from_frame(
    frame: pd.DataFrame, config: MonitorConfig
) -> dict[tuple[str, str], CountTable]:
    """One CountTable per (model_id, attribute) from a frame of valid records."""
    out: dict[tuple[str, str], CountTable] = {}
    bins = config.axis1.score_bins
    for model_id, sub in frame.groupby("model_id", sort=True):
        y = sub["label"].to_numpy(np.int64)
        d = sub["decision"].to_numpy(np.int64)
        s = sub["score"].to_numpy(np.float64)
        for attr in config.attributes:
            g = group_index(sub[attr.name].to_numpy(), attr)
            out[(str(model_id), attr.name)] = CountTable.from_records(attr.codes, g, y, d, s, bins)
    return out
