"""The intake: a batch's payloads decoded, validated and admitted, ready to store.

Two paths judge a batch the same way. The bulk (columnar) path parses the whole batch
with Arrow and applies one rule per field on the columns; the per-message path decodes
each payload with orjson and validates the decoded objects one by one. The per-message
path is the reference: the bulk path hands a batch over whenever it cannot judge it
exactly as that path would (:mod:`monitor.stream.columnar`), and tests feed both the
same hypothesis-drawn batches (tests/stream/test_columnar.py). Either way the batch
leaves as one :class:`CheckedBatch`: the rows to store, each row's index in the batch,
the dead letters in the per-message path's order, and the admitted outcome messages.

Admission (the event-time bounds on the time known, the model registry) is one
function for both paths and for outcome messages (:mod:`monitor.stream.admission`). Bad
input never raises out of here: it becomes a dead letter with its reason.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa

from consumers.base import Origin
from monitor.config import MonitorConfig
from monitor.store import DeadLetter, Store
from monitor.stream.admission import admission_reasons, admit
from monitor.stream.columnar import parse_payloads, split_kinds, validate_table
from monitor.stream.schema import Rejection, validate_outcome_records, validate_records
from monitor.stream.stats import PipelineStats

log = logging.getLogger(__name__)


@dataclass
class CheckedBatch:
    """A batch decoded, validated and admitted, by either path: the rows to store (the
    store's Arrow table, :meth:`Store.ingest_table`), each row's index in the batch, and
    the batch's dead letters in the per-message path's order (decode faults, validation
    faults by position, admission refusals by position)."""

    rows: pa.Table
    positions: np.ndarray
    dead: list[DeadLetter]
    #: the batch's admitted outcome messages (position = payload index); None: none
    outcomes: pd.DataFrame | None = None


@dataclass(frozen=True)
class AdmittedOutcomes:
    """Outcome messages after admission: those kept (positions are payload indices) and
    the refused ones with their reasons."""

    kept: pd.DataFrame
    refused: list[Rejection]


class Intake:
    """Judges batches for one pipeline (its config, its store's row layout, its stats)."""

    def __init__(self, config: MonitorConfig, store: Store, stats: PipelineStats):
        self.config = config
        self.store = store
        self.stats = stats
        #: False: every batch takes the per-message path (the bulk path's oracle)
        self.columnar = True

    def check(
        self,
        payloads: Sequence[bytes | None],
        origins: Sequence[Origin],
        now: pd.Timestamp,
        known: Collection[str],
    ) -> CheckedBatch:
        """The batch judged (``known``: the models held now, for admission), by the bulk
        path when it can judge it exactly, else per message."""
        batch = self._columnar(payloads, origins, now, known) if self.columnar else None
        if batch is None:
            self.stats.per_message_batches += 1
            batch = self._per_message(payloads, origins, now, known)
        return batch

    # ------------------------------------------------------------------ per message
    def _decode(
        self, payloads: Sequence[bytes | None], origins: Sequence[Origin]
    ) -> tuple[list[Any], list[int], list[DeadLetter]]:
        limit = self.config.service.intake.max_payload_bytes
        if payloads and None not in payloads:
            # The usual batch: every payload a non-empty, small, valid JSON text. Checked
            # and decoded with C-level loops; any exception takes the per-payload path.
            sizes = list(map(len, payloads))  # type: ignore[arg-type]  # no None: checked above
            if min(sizes) > 0 and max(sizes) <= limit:
                try:
                    decoded = list(map(orjson.loads, payloads))  # type: ignore[arg-type]  # no None: checked above
                except (orjson.JSONDecodeError, RecursionError):
                    pass
                else:
                    return decoded, list(range(len(payloads))), []
        decoded, index, dead = [], [], []
        for i, (raw, o) in enumerate(zip(payloads, origins, strict=True)):
            reason = None
            if raw is None or len(raw) == 0:
                reason = "empty_payload"
            elif len(raw) > limit:
                reason = "oversized"
            else:
                try:
                    # orjson: strict RFC 8259 (no NaN/Infinity tokens), ~3x faster than json
                    decoded.append(orjson.loads(raw))
                    index.append(i)
                    continue
                except (orjson.JSONDecodeError, RecursionError):
                    reason = "invalid_json"
            payload = None if raw is None else bytes(raw[: 4 * limit])
            dead.append(DeadLetter(reason, payload, o.topic, o.partition, o.offset))
        return decoded, index, dead

    def _per_message(
        self,
        payloads: Sequence[bytes | None],
        origins: Sequence[Origin],
        now: pd.Timestamp,
        known: Collection[str],
    ) -> CheckedBatch:
        """Decode each payload, validate the decoded objects, admit the valid ones."""
        with self.stats.stage("decode"):
            decoded, index, dead = self._decode(payloads, origins)
        with self.stats.stage("validate"):
            checked = validate_records(decoded, self.config)
            admission = admit(checked.valid, known, now, self.config)
        valid = admission.admitted
        for r in checked.rejected + admission.refused:
            o = origins[index[r.index]]
            dead.append(DeadLetter(r.reason, payloads[index[r.index]], o.topic, o.partition,
                                   o.offset))  # fmt: skip
        positions = np.asarray(index, dtype=np.int64)[valid["position"].to_numpy(np.int64)]
        outcomes = None
        if len(checked.outcomes):
            admitted = self._admit_outcomes(
                checked.outcomes, np.asarray(index, np.int64), now, known
            )
            outcomes = admitted.kept
            for r in admitted.refused:
                o = origins[r.index]
                dead.append(DeadLetter(r.reason, payloads[r.index], o.topic, o.partition,
                                       o.offset))  # fmt: skip
        return CheckedBatch(self.store.rows_table_from_frame(valid), positions, dead, outcomes)

    def _admit_outcomes(
        self, outcomes: pd.DataFrame, index: np.ndarray, now: pd.Timestamp, known: Collection[str]
    ) -> AdmittedOutcomes:
        """The admission rules of a prediction applied to outcome messages (event-time
        bounds on the time known, the model registry); positions become payload indices."""
        out = outcomes.assign(position=index[outcomes["position"].to_numpy(np.int64)])
        reason = admission_reasons(
            out["event_time"].array, out["model_id"].to_numpy(dtype=object), known, now,
            self.config,
        )  # fmt: skip
        refused = reason != None  # noqa: E711 (elementwise)
        pos = out["position"].to_numpy(np.int64)
        return AdmittedOutcomes(
            out[~refused].reset_index(drop=True),
            [Rejection(int(pos[i]), str(reason[i])) for i in np.flatnonzero(refused)],
        )

    # ------------------------------------------------------------------ bulk
    def _columnar(
        self,
        payloads: Sequence[bytes | None],
        origins: Sequence[Origin],
        now: pd.Timestamp,
        known: Collection[str],
    ) -> CheckedBatch | None:
        """The bulk path: one Arrow parse of the batch, one rule per field, admission on the
        columns; None when the bulk parse or the rules cannot judge the batch exactly as
        the per-message path does (see :mod:`monitor.stream.columnar`), which then decides.
        The admission rules are the per-message path's own function."""
        try:
            with self.stats.stage("decode"):
                table = parse_payloads(payloads, self.config)
            if table is None:
                return None
            with self.stats.stage("validate"):
                split = split_kinds(table)
                if split is None:
                    return None
                rest, rest_pos, out_pos = split
                checked = validate_table(rest, self.config, rest_pos)
                outs = None
                if len(out_pos) and checked is not None:
                    # outcomes are judged per message, by the per-message path's function
                    # (a token orjson refuses, in a column only outcomes fill: that path)
                    try:
                        decoded = [orjson.loads(payloads[int(i)]) for i in out_pos]  # type: ignore[arg-type]  # a table: no None
                    except (orjson.JSONDecodeError, RecursionError):
                        return None
                    outs = validate_outcome_records(decoded, out_pos, self.config)
        except Exception as exc:
            # never a failed batch (the source would redeliver it for ever): the per-message
            # path, the reference, decides; counted, and logged by type only (no values)
            self.stats.columnar_errors += 1
            log.warning("columnar ingest failed (%s): batch taken per message", type(exc).__name__)
            return None
        if checked is None:
            return None
        with self.stats.stage("validate"):
            valid = checked.valid
            reason = admission_reasons(
                valid["event_time"].to_pandas(), valid["model_id"].to_numpy(zero_copy_only=False),
                known, now, self.config,
            )  # fmt: skip
            refused = reason != None  # noqa: E711 (elementwise)
            positions = valid["position"].to_numpy()
            rejected = checked.rejected
            outcomes, refused_outcomes = None, []
            if outs is not None:
                rejected = sorted(rejected + outs.rejected, key=lambda r: r.index)
                if len(outs.outcomes):
                    admitted = self._admit_outcomes(
                        outs.outcomes, np.arange(len(payloads)), now, known
                    )
                    outcomes, refused_outcomes = admitted.kept, admitted.refused
            if refused.any():
                rejected = rejected + [
                    Rejection(int(positions[i]), str(reason[i])) for i in np.flatnonzero(refused)
                ]
                valid = valid.filter(pa.array(~refused))
                positions = positions[~refused]
        dead = []
        # validation faults by position, then admission refusals, then the outcomes' ones
        for r in rejected + refused_outcomes:
            o = origins[r.index]
            dead.append(DeadLetter(r.reason, payloads[r.index], o.topic, o.partition, o.offset))
        return CheckedBatch(self.store.rows_table(valid), positions, dead, outcomes)
