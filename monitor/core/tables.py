"""From validated records to the (model, attribute) count tables Axis 1 works on.

The grid (which attributes, their codes, the intersections, the score bins) is what a
configuration states; these functions read it through :class:`GridSpec`, which
:class:`monitor.config.MonitorConfig` satisfies, so the core imports no configuration.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
import pandas as pd

from monitor.core.counts import CountTable


class AttributeSpec(Protocol):
    """An audited attribute: its name and group codes in order."""

    @property
    def name(self) -> str: ...

    @property
    def codes(self) -> tuple[str, ...]: ...


class IntersectionSpec(Protocol):
    """An ``[[intersections]]`` entry: its name and the attributes it combines."""

    @property
    def name(self) -> str: ...

    @property
    def attributes(self) -> tuple[str, ...]: ...


class _Bins(Protocol):
    @property
    def score_bins(self) -> int: ...


class GridSpec(Protocol):
    """What the tables read of a configuration (:class:`monitor.config.MonitorConfig`)."""

    @property
    def attributes(self) -> Sequence[AttributeSpec]: ...

    @property
    def intersections(self) -> Sequence[IntersectionSpec]: ...

    @property
    def grid_attributes(self) -> Sequence[AttributeSpec]: ...

    @property
    def axis1(self) -> _Bins: ...

    def attribute(self, name: str) -> AttributeSpec: ...


@functools.lru_cache(maxsize=64)
def _code_index(codes: tuple[str, ...]) -> pd.Index:
    return pd.Index(list(codes), dtype=object)


def group_index(codes: np.ndarray | pd.Series, attribute: AttributeSpec) -> np.ndarray:
    """Position of each record's group code in the attribute's configured code list."""
    values = np.asarray(codes, dtype=object)
    if len(values) and set(map(type, values)) == {str}:  # the usual case, looked up in C
        index = _code_index(tuple(attribute.codes)).get_indexer(values)
        if (index < 0).any():
            raise ValueError(f"unknown group code for attribute {attribute.name!r}")
        out: np.ndarray = index.astype(np.int64)
        return out
    lookup = {c: i for i, c in enumerate(attribute.codes)}
    try:
        return np.fromiter((lookup[str(c)] for c in np.asarray(codes, dtype=object)), np.int64)
    except KeyError as exc:
        raise ValueError(f"unknown group code for attribute {attribute.name!r}") from exc


def grid_groups(groups: Mapping[str, np.ndarray], config: GridSpec) -> dict[str, np.ndarray]:
    """Every audited attribute's group index per record (``config.grid_attributes``) from
    the configured attributes' indices: an intersection's index is the mixed-radix number
    of its parts' indices (the order of :func:`monitor.config.intersection_groups`).

    The one place a record's intersection groups are derived: windows (live and rebuilt
    from the store), cohorts of the scheduled axes and the offline audit all come here,
    so an intersection is never input or stored. Cost: one multiply-add per part.

    >>> from monitor.config import config_from_mapping
    >>> cfg = config_from_mapping({"intersections": [{"attributes": ["race", "sex"]}]})
    >>> out = grid_groups({"race": np.array([2, 3]), "sex": np.array([1, 0])}, cfg)
    >>> [cfg.grid_attributes[-1].codes[i] for i in out["race_x_sex"]]
    ['2:1', '3:0']
    """
    out = dict(groups)
    for inter in config.intersections:
        index = np.zeros(len(groups[inter.attributes[0]]), dtype=np.int64)
        for name in inter.attributes:
            index = index * len(config.attribute(name).codes) + groups[name]
        out[inter.name] = index
    return out


def attribute_groups(frame: pd.DataFrame, config: GridSpec) -> dict[str, np.ndarray]:
    """Each audited attribute's group index per record of a frame of valid records."""
    return grid_groups(
        {a.name: group_index(frame[a.name].to_numpy(), a) for a in config.attributes}, config
    )


def tables_from_frame(
    frame: pd.DataFrame, config: GridSpec
) -> dict[tuple[str, str], CountTable]:
    """One CountTable per (model_id, audited attribute) from a frame of valid records."""
    out: dict[tuple[str, str], CountTable] = {}
    bins = config.axis1.score_bins
    for model_id, sub in frame.groupby("model_id", sort=True):
        y = sub["label"].to_numpy(np.int64)
        d = sub["decision"].to_numpy(np.int64)
        s = sub["score"].to_numpy(np.float64)
        groups = attribute_groups(sub, config)
        for attr in config.grid_attributes:
            g = groups[attr.name]
            out[(str(model_id), attr.name)] = CountTable.from_records(attr.codes, g, y, d, s, bins)
    return out
