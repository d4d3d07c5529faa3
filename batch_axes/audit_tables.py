"""An audit cohort as count tables: everything the axes read, and nothing per record.

Why this type: Axis 1, Axis 2, Axis 3 and the tiers need only counts, so an audit can be
run by whoever holds the counts (:func:`batch_axes.table_engine.run_tables`), records or
not. A network of hospitals builds these tables at each site, sums them by secure
aggregation and runs the same engine on the sum; the results are those of the pooled
audit, bit for bit, because every figure here is an exact integer and the sum of the
tables of disjoint record sets is the tables of their union.

Per model (:class:`ModelTables`):

* ``counts``: :class:`~batch_axes.cohort_counts.CohortCounts` of the records whose
  outcome is known: the per-hospital counts Axis 3 folds, and one
  :class:`~monitor.core.counts.CountTable` per audited attribute (intersections
  included), which Axis 1 and Axis 2 read;
* ``free``: while some outcomes are missing (label -1), the counts of every record at
  label 0 (the label-free metrics, DI and SPD: docs/decisions.md, "Predictions now,
  outcomes later"); None when every outcome is in;
* ``span``: the earliest and latest event time (:class:`EventSpan`), for Axis 2's time
  to reliable. The one figure that is not a sum: spans combine by their hull, and a
  network passes them in the layout, beside the summed vector.

EquiLense's MPPD and individual-fairness gap compare records pair by pair: no count
table holds them, so they are not here (docs/decisions.md, "The engine starts from count
tables").

>>> from monitor.config import config_from_mapping
>>> cfg = config_from_mapping({"attributes": [{"name": "sex", "groups": {"0": "F", "1": "M"}}]})
>>> frame = pd.DataFrame({
...     "model_id": "m", "hospital_id": ["h1", "h2", "h2", None], "label": [1, 0, 1, 0],
...     "decision": [1, 0, 0, 1], "score": [0.9, 0.2, 0.45, 0.6], "sex": ["0", "1", "1", "0"],
...     "event_time": ["2026-01-01", "2026-01-03", "2026-01-02", "2026-01-01"],
... })
>>> a, b = audit_tables_from_frame(frame[:2], cfg), audit_tables_from_frame(frame[2:], cfg)
>>> both = audit_tables_from_frame(frame, cfg)
>>> a + b == both, both.cohort_days()
(True, {'m': 2.0})
>>> vector, layout = both.to_vector()
>>> AuditTables.from_vector(vector, layout) == both
True
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from batch_axes.cohort_counts import CohortCounts, CountsLayout
from monitor.config import MonitorConfig
from monitor.core.counts import CountTable
from monitor.core.tables import attribute_groups


@dataclass(frozen=True)
class EventSpan:
    """The earliest and latest event time of a cohort (UTC timestamps, kept in nanoseconds:
    pandas picks a resolution from the strings it parses, so two sites' spans would
    otherwise differ in unit and their hull's days in the last bit)."""

    first: pd.Timestamp
    last: pd.Timestamp

    def __post_init__(self) -> None:
        for name in ("first", "last"):
            object.__setattr__(self, name, pd.Timestamp(getattr(self, name)).as_unit("ns"))

    @property
    def days(self) -> float:
        """Days from first to last: what Axis 2's time to reliable divides by."""
        return float((self.last - self.first).total_seconds()) / 86_400

    def __or__(self, other: EventSpan) -> EventSpan:
        """The hull of two spans (the span of the union of their cohorts)."""
        return EventSpan(min(self.first, other.first), max(self.last, other.last))


def _hull(a: EventSpan | None, b: EventSpan | None) -> EventSpan | None:
    return b if a is None else a if b is None else a | b


@dataclass(frozen=True)
class ModelTables:
    """One model's cohort as counts (see the module docstring)."""

    model_id: str
    counts: CohortCounts
    free: CohortCounts | None = None
    span: EventSpan | None = None

    def __add__(self, other: ModelTables) -> ModelTables:
        """The tables of both cohorts (of one model): counts added, the label-free counts
        kept while either side misses outcomes, spans joined."""
        if other.model_id != self.model_id:
            raise ValueError("tables of two models are not added; AuditTables holds both")
        free = None
        if self.free is not None or other.free is not None:
            free = self.label_free() + other.label_free()
        return ModelTables(
            self.model_id, self.counts + other.counts, free, _hull(self.span, other.span)
        )

    def layout(self) -> ModelLayout:
        """This model's place in a vector: its hospitals (those of the label-free counts
        too: a hospital may have only records whose outcome is missing) and span."""
        hospitals = self.counts.hospital_ids
        if self.free is not None:
            hospitals = tuple(dict.fromkeys(hospitals + self.free.hospital_ids))
        counts = replace(self.counts.layout(), hospitals=hospitals)
        return ModelLayout(self.model_id, counts, self.free is not None, self.span)

    def label_free(self) -> CohortCounts:
        """Every record at label 0 (``free``, or the counts with their labels merged)."""
        return self.free if self.free is not None else self.counts.merged_labels()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelTables):
            return NotImplemented
        return (self.model_id, self.span) == (other.model_id, other.span) and (
            self.counts == other.counts and self.free == other.free
        )

    __hash__ = None  # type: ignore[assignment]  # compared by value, and mutable inside


@dataclass(frozen=True)
class ModelLayout:
    """Where one model's counts sit in an :class:`AuditTables` vector, and its span."""

    model_id: str
    counts: CountsLayout
    free: bool
    span: EventSpan | None = None

    @property
    def size(self) -> int:
        return self.counts.size * (2 if self.free else 1)


@dataclass(frozen=True)
class TablesLayout:
    """The layout of :meth:`AuditTables.to_vector`: each model's counts (and label-free
    counts), in model order. Vectors in layouts that :meth:`check_compatible` accepts are
    summed element by element; their spans are joined (:meth:`union`), not summed."""

    models: tuple[ModelLayout, ...]

    @property
    def size(self) -> int:
        return sum(m.size for m in self.models)

    def check_compatible(self, other: TablesLayout) -> None:
        """Raise ValueError naming the first difference (models, then a model's attributes,
        group codes, bins, hospitals or label-free part), unless vectors in the two
        layouts can be summed; spans may differ."""
        mine, theirs = [m.model_id for m in self.models], [m.model_id for m in other.models]
        if mine != theirs:
            raise ValueError(f"table vectors of different models: {mine} here, {theirs} there")
        for a, b in zip(self.models, other.models, strict=True):
            try:
                a.counts.check_compatible(b.counts)
            except ValueError as exc:
                raise ValueError(f"model {a.model_id!r}: {exc}") from None
            if a.free != b.free:
                raise ValueError(
                    f"model {a.model_id!r}: one layout has label-free counts (missing "
                    "outcomes) and the other not: write both in the union layout"
                )

    def union(self, other: TablesLayout) -> TablesLayout:
        """A layout both sides can write their tables in: every model and hospital of
        either (this side's order first), a label-free part where either has one, spans
        joined. What a network's coordinator sends its sites."""
        by = {m.model_id: m for m in self.models}
        for m in other.models:
            mine = by.get(m.model_id)
            if mine is None:
                by[m.model_id] = m
                continue
            mine.counts.check_compatible(replace(m.counts, hospitals=mine.counts.hospitals))
            hospitals = tuple(dict.fromkeys(mine.counts.hospitals + m.counts.hospitals))
            by[m.model_id] = ModelLayout(
                m.model_id, replace(mine.counts, hospitals=hospitals),
                mine.free or m.free, _hull(mine.span, m.span),
            )  # fmt: skip
        return TablesLayout(tuple(by[k] for k in sorted(by)))


@dataclass(frozen=True)
class AuditTables:
    """Every model's :class:`ModelTables`, in model id order: the engine's whole input."""

    models: tuple[ModelTables, ...]

    def __post_init__(self) -> None:
        ids = [m.model_id for m in self.models]
        if ids != sorted(set(ids)):
            raise ValueError("audit tables hold each model once, in model id order")

    def __iter__(self) -> Iterator[ModelTables]:
        return iter(self.models)

    def model(self, model_id: str) -> ModelTables:
        for m in self.models:
            if m.model_id == model_id:
                return m
        raise KeyError(model_id)

    # ---------------------------------------------------------------- views for the axes
    def joined_tables(self) -> dict[tuple[str, str], CountTable]:
        """(model, attribute) -> count table of the records with an outcome: what Axis 1
        and Axis 2 read (the tables are this object's: read them, do not change them)."""
        return {(m.model_id, k): t for m in self.models for k, t in m.counts.tables.items()}

    def cohort_days(self) -> dict[str, float | None]:
        """Per model, the span of its event times in days (None without times)."""
        return {m.model_id: None if m.span is None else m.span.days for m in self.models}

    # ---------------------------------------------------------------- monoid
    def check_compatible(self, other: AuditTables) -> None:
        """Raise ValueError naming what differs unless the two can be added: a model in
        both must have the same attributes, group codes and bins."""
        mine = {m.model_id: m for m in self.models}
        for m in other.models:
            if m.model_id in mine:
                try:
                    mine[m.model_id].counts.check_compatible(m.counts)
                except ValueError as exc:
                    raise ValueError(f"model {m.model_id!r}: {exc}") from None

    def __add__(self, other: AuditTables) -> AuditTables:
        """Both cohorts' tables, model by model (a model in one only is kept as it is):
        for disjoint record sets, the tables of their union."""
        self.check_compatible(other)
        by = {m.model_id: m for m in self.models}
        for m in other.models:
            by[m.model_id] = by[m.model_id] + m if m.model_id in by else m
        return AuditTables(tuple(by[k] for k in sorted(by)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AuditTables):
            return NotImplemented
        return len(self.models) == len(other.models) and all(
            a == b for a, b in zip(self.models, other.models, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]

    # ---------------------------------------------------------------- vector
    def layout(self) -> TablesLayout:
        """The layout of :meth:`to_vector` with this cohort's own models and hospitals."""
        return TablesLayout(tuple(m.layout() for m in self.models))

    def to_vector(self, layout: TablesLayout | None = None) -> tuple[np.ndarray, TablesLayout]:
        """(every count as one flat int64 vector, its layout with this cohort's spans).

        ``layout``: a shared one (:meth:`TablesLayout.union` of the sites' layouts); a
        model it holds and these tables do not is written as zeros, a label-free part
        these tables do not need is the counts with their labels merged. The sum of the
        sites' vectors, read with the union of their returned layouts
        (:meth:`from_vector`), is the sum of their tables.
        """
        layout = self.layout() if layout is None else layout
        mine = {m.model_id: m for m in self.models}
        unknown = sorted(set(mine) - {m.model_id for m in layout.models})
        if unknown:
            raise ValueError(f"the layout has no place for model(s) {unknown}")
        parts, models = [], []
        for place in layout.models:
            m = mine.get(place.model_id)
            if m is None:
                c = place.counts
                empty = CohortCounts(c.attributes, c.bins, with_tables=c.with_tables)
                m = ModelTables(place.model_id, empty)
            if m.free is not None and not place.free:
                raise ValueError(
                    f"model {m.model_id!r} misses outcomes and the layout has no label-free "
                    "counts for it: write the tables in the union layout"
                )
            parts.append(m.counts.to_vector(place.counts)[0])
            if place.free:
                parts.append(m.label_free().to_vector(place.counts)[0])
            models.append(replace(place, span=m.span))
        vector = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return vector, TablesLayout(tuple(models))

    @classmethod
    def from_vector(cls, vector: np.ndarray, layout: TablesLayout) -> AuditTables:
        """The tables a :meth:`to_vector` vector (or a sum of such vectors) holds, exactly;
        raises ValueError if the integers are not the counts of any records."""
        v = np.asarray(vector)
        if v.ndim != 1 or v.size != layout.size:
            raise ValueError(f"this layout takes a flat vector of {layout.size} integers")
        models, at = [], 0
        for place in layout.models:
            n = place.counts.size
            counts = CohortCounts.from_vector(v[at : at + n], place.counts)
            at += n
            free = None
            if place.free:
                free = CohortCounts.from_vector(v[at : at + n], place.counts)
                at += n
            models.append(ModelTables(place.model_id, counts, free, place.span))
        return cls(tuple(models))


def audit_tables_from_frame(records: pd.DataFrame, config: MonitorConfig) -> AuditTables:
    """The audit tables of a frame of validated records (one row per record and model;
    label -1: outcome not known yet): per model, its counts per hospital and attribute,
    its label-free counts if some outcome is missing, its event-time span."""
    bins = config.axis1.score_bins
    times = None
    if "event_time" in records:  # parsed once: every model's times in one resolution
        times = pd.to_datetime(records["event_time"], utc=True)
    models = []
    for model_id, rows in sorted(records.groupby("model_id", sort=True).indices.items()):
        sub = records.iloc[rows]
        groups = attribute_groups(sub, config)
        hosp = _hospital_ids(sub)
        y = sub["label"].to_numpy(np.int64)
        d = sub["decision"].to_numpy(np.int64)
        s = sub["score"].to_numpy(np.float64)
        known = y >= 0
        counts = CohortCounts(config.grid_attributes, bins)
        free = None
        if known.all():
            counts.add(hosp, groups, y, d, s)
        else:
            counts.add(hosp[known], {k: g[known] for k, g in groups.items()},
                       y[known], d[known], s[known])  # fmt: skip
            free = CohortCounts(config.grid_attributes, bins)
            free.add(hosp, groups, np.zeros_like(y), d, s)
        span = None
        if times is not None:
            t = times.iloc[rows]
            span = EventSpan(t.min(), t.max())
        models.append(ModelTables(str(model_id), counts, free, span))
    return AuditTables(tuple(models))


def _hospital_ids(records: pd.DataFrame) -> np.ndarray:
    if "hospital_id" not in records:
        return np.full(len(records), None, dtype=object)
    return records["hospital_id"].to_numpy(dtype=object)

