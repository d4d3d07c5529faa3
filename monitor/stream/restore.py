"""A restart: the models' in-memory state rebuilt from the DuckDB file.

What a model holds in memory (:class:`~monitor.stream.model_state.ModelState`) is a
function of what the file holds: its window is its stored records (the last ``size``, or
the last ``days``), its counters and release points are its ``model_state`` row, its
trackers and latest evaluations its ``cell_state`` rows. So a restart, a model whose
partition comes back, and a batch that failed part-way (the pipeline reloads rather than
copy its state every batch) all rebuild it here, and come out as an uninterrupted run
would have been.

Two things a file may lack are made good: release points in a file written before
releases were kept (each cell's latest stored release stands in), and certified-verdict
state in a file written before those (the detector starts at the position evaluated).
Hop evaluations whose records were committed but whose evaluation was not (the process
stopped while the worker computed it) are found by :func:`missing_hop_points`; the
pipeline recomputes them before it ingests anything new.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from monitor.config import MonitorConfig
from monitor.core.results import CellEvaluation
from monitor.store import Store, queries
from monitor.stream.model_state import ModelState
from monitor.stream.publication import WindowCounts
from monitor.stream.window import ModelWindow, RecordBatch


def window_frame(
    store: Store, config: MonitorConfig, model_id: str, end: int | None
) -> pd.DataFrame:
    """The stored records of the model's window at stream position ``end`` (None: now)."""
    w = config.window
    if w.kind == "count":
        return store.window_records(model_id, end_count=end, last_n=w.size)
    return store.window_records(model_id, end_count=end, days=w.days)


def rebuilt_window(
    store: Store, config: MonitorConfig, model_id: str, end: int | None, arrivals: int
) -> ModelWindow:
    """The model's window as it was at stream position ``end`` (None: now), with
    ``arrivals`` records of the model accepted by then."""
    w = ModelWindow(model_id, config)
    frame = window_frame(store, config, model_id, end)
    if len(frame):
        w.add(RecordBatch.from_frame(frame, config))
    w.arrivals = arrivals
    return w


def restore_models(
    store: Store, config: MonitorConfig, wanted: Callable[[str], bool]
) -> dict[str, ModelState]:
    """The ``wanted`` models' states as the file holds them: windows, counters, certified
    state, trackers, latest evaluations and what each cell last published."""
    restored: dict[str, ModelState] = {}
    saved_releases: dict[str, Mapping[str, Any] | None] = {}
    saved_cells: dict[str, list[CellEvaluation]] = {}
    for model_id, st in store.read(queries.model_states).items():
        if not wanted(model_id):
            continue
        w = rebuilt_window(store, config, model_id, None, st.records)
        w.old_events = st.old_events
        held = restored[model_id] = ModelState(
            w, evaluations=st.evaluations, evaluated=st.evaluated
        )
        if st.certified is not None:
            held.certified.restore(st.certified)
        else:  # a file written before certified verdicts: from the position evaluated
            held.certified.start_at(held.evaluated or 0)
        saved_releases[model_id] = st.releases
    for cell in store.read(queries.cell_states):
        ms = restored.get(cell.model_id)
        if ms is None:  # cell states are written with their model's state: not wanted
            continue
        ms.trackers[(cell.metric, cell.attribute)] = cell.tracker
        if cell.released is not None:  # the cell's released evaluation
            saved_cells.setdefault(cell.model_id, []).append(cell.released)
        if cell.latest is not None:
            ms.latest[(cell.metric, cell.attribute)] = cell.latest
    _restore_publications(store, restored, saved_releases, saved_cells)
    return restored


def _restore_publications(
    store: Store,
    restored: dict[str, ModelState],
    saved: Mapping[str, Mapping[str, Any] | None],
    cells: dict[str, list[CellEvaluation]],
) -> None:
    """Restored models publish what they published before the stop: each cell's
    released evaluation (saved with its state; for a file written before releases
    were, its latest stored release) and release next exactly when an uninterrupted
    run would (ModelPublication.restore)."""
    fallback: dict[str, list[CellEvaluation]] = {}
    if any(m not in cells for m in restored):
        for model_id, result in store.read(queries.latest_window_results):
            if model_id in restored and model_id not in cells:
                fallback.setdefault(model_id, []).append(result)
    for model_id, ms in restored.items():
        ms.publication.restore(
            saved.get(model_id),
            cells.get(model_id, fallback.get(model_id, [])),
            WindowCounts.of(ms.window),
        )


def missing_hop_points(restored: Mapping[str, ModelState], hop: int) -> list[tuple[str, int]]:
    """(model, stream position) of each hop point whose records the file holds but whose
    evaluation it does not, in stream order per model (models by name)."""
    points = []
    for model_id, ms in sorted(restored.items()):
        done = ms.window.arrivals if ms.evaluated is None else ms.evaluated
        for end in range((done // hop + 1) * hop, ms.window.arrivals + 1, hop):
            points.append((model_id, end))
    return points
