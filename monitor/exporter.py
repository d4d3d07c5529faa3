"""Prometheus exporter of the streaming service: cells, events, ingest, jobs, model health.

Why a class with its own ``CollectorRegistry``: the service, the tests and any
embedded tool can each hold an exporter without sharing (or polluting) the
process-global default registry, and ``remove_model`` can drop a model's series
without touching anybody else's.

Conventions (checked by ``promtool check metrics`` in the tests):

* every name starts with ``vfr_``; base units in the name (``_seconds``,
  ``_timestamp_seconds``); counters end in ``_total``; every metric has help text.
* label names come only from :data:`ALLOWED_LABELS`, and every label value is a
  short identifier from a configured, bounded set (model ids, metric and
  attribute names, tier names, group codes, reason codes, job names). Never a
  hospital, a record or free text: a value that does not look like an
  identifier is refused (``ValueError`` naming the label, never the value),
  and rejection reasons beyond :data:`MAX_REASONS` distinct codes are folded
  into ``other``.

Non-finite values (documented choice):

* ``vfr_cell_sigma`` is ``+Inf`` when the K metric values have zero spread (all
  resamples agree: as far from the threshold as it gets), which the text format
  allows; ``vfr_cell_n_star`` is ``+Inf`` when Axis 2 never reached its target.
* ``vfr_cell_value`` / ``_ci_low`` / ``_ci_high`` / ``_kappa`` are ``NaN`` when
  the metric is undefined on the window (e.g. DI with no positive decisions):
  the series stays, and any comparison with it is false, so no alert fires on it.
* an axis that has no result yet (``n_star`` / ``kappa`` / ``confirmed_tier`` is
  ``None``) has no series at all: "not computed" is not a number.

Small-cell suppression (a hard rule): a statistic computed from fewer than
:data:`MIN_EXPORT_RECORDS` records is never exported. Group-level series of a
group below it are removed (not zeroed), and a cell whose window is below it
exports no per-cell series, not even its event counters.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from monitor.config import GROUP_CODE
from monitor.tiers import Tier

#: Fewer records than this and a statistic is not exported (small-cell suppression).
MIN_EXPORT_RECORDS = 11

#: The only label names any vfr_ series may carry. ``group`` (a configured group
#: code) and ``partition`` (a Kafka partition number) are bounded by configuration.
ALLOWED_LABELS = frozenset(
    {
        "model",
        "metric",
        "attribute",
        "tier",
        "from_tier",
        "to_tier",
        "reason",
        "task",
        "direction",
        "source",
        "state",
        "group",
        "partition",
        "version",
    }
)

#: At most this many distinct rejection reasons per exporter; the rest count as "other".
MAX_REASONS = 64

TIERS = tuple(t.value for t in Tier)
VERDICT_DIRECTIONS = frozenset({"pass_to_fail", "fail_to_pass"})
JOB_STATES = ("success", "failure", "skipped")
INGEST_STATES = ("accepted", "duplicate", "rejected")
EVENT_KINDS = frozenset({"verdict_flip", "tier_change"})

# An identifier: what configured ids, names and codes look like. No spaces, no
# free text, short. Rejection reasons are "<kind>:<field>" codes from monitor.schema.
_IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+/-]{0,63}")
_REASON = re.compile(r"[a-z][a-z_]{0,31}:[A-Za-z0-9_]{1,32}")

_CELL = ("model", "metric", "attribute")
_EVAL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def _ident(label: str, value: object) -> str:
    """A label value that is a short identifier, or ValueError naming the label only."""
    if not isinstance(value, str) or not _IDENT.fullmatch(value):
        raise ValueError(f"label {label!r}: not a short identifier")
    return value


def _num(x: float | int | bool | None) -> float:
    """Plain float for a gauge; None (and anything unusable) becomes NaN."""
    if x is None:
        return math.nan
    return float(x)


def _discard(metric: MetricWrapperBase, *labelvalues: str) -> None:
    """Remove one series if present (older prometheus_client raise KeyError when absent)."""
    with contextlib.suppress(KeyError):
        metric.remove(*labelvalues)


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


class _WithoutCreated(Collector):
    """Everything in ``inner`` except the ``*_created`` samples of counters and histograms.

    In the text format 0.0.4 prometheus_client writes each counter's creation
    time as an extra gauge family (``vfr_x_created``): it doubles the series
    count, its name breaks the ``_timestamp_seconds`` convention, and
    Prometheus ignores it. Filtering here, instead of the process-wide
    ``disable_created_metrics()``, leaves every other registry in the process alone.
    """

    def __init__(self, inner: CollectorRegistry) -> None:
        self.inner = inner

    def collect(self) -> Iterable[Metric]:
        for family in self.inner.collect():
            out = Metric(family.name, family.documentation, family.type, family.unit)
            out.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield out


class Exporter:
    """All vfr_ metrics of one service process, on a registry of their own.

    Methods take plain Python values (the integrator converts service objects),
    take one shared lock so that a scrape (:meth:`render`) never sees half of an
    update (e.g. two tiers at 1), and never raise for a value the service can
    legitimately produce; they raise ValueError for label values that would
    break the cardinality bound.
    """

    def __init__(self, version: str, group_codes: Iterable[str] | None = None) -> None:
        #: Group label values allowed besides the identifier shape (the configured codes,
        #: which may hold spaces or '<': "African American", "<50"). A value outside both
        #: is refused, so record-level text cannot become a label even by mistake.
        self._group_codes = frozenset(c for c in group_codes or () if GROUP_CODE.fullmatch(c))
        #: What a scrape reads. The metrics live in ``_inner`` (which also
        #: rejects duplicate names) and reach it through _WithoutCreated.
        self.registry = CollectorRegistry()
        self._inner = CollectorRegistry(auto_describe=True)
        self.registry.register(_WithoutCreated(self._inner))
        self._lock = threading.RLock()
        self._labelled: list[tuple[MetricWrapperBase, tuple[str, ...]]] = []
        self._cell_metrics: list[tuple[MetricWrapperBase, tuple[str, ...]]] = []
        self._suppressed_cells: set[tuple[str, str, str]] = set()
        self._groups: dict[tuple[str, str], set[str]] = {}
        self._partitions: dict[str, set[str]] = {}
        self._reasons: set[str] = set()

        def gauge(name: str, doc: str, labels: tuple[str, ...] = (), cell: bool = False) -> Gauge:
            return self._register(Gauge(name, doc, labels, registry=self._inner), labels, cell)

        def counter(
            name: str, doc: str, labels: tuple[str, ...] = (), cell: bool = False
        ) -> Counter:
            # prometheus_client appends "_total" itself; pass the stem.
            stem = name.removesuffix("_total")
            return self._register(Counter(stem, doc, labels, registry=self._inner), labels, cell)

        # ---- per cell (grid-level: computed over all groups of the attribute)
        self.cell_value = gauge(
            "vfr_cell_value",
            "Point estimate of the fairness metric on the whole window (NaN: undefined).",
            _CELL,
            cell=True,
        )
        self.cell_vfr = gauge(
            "vfr_cell_vfr",
            "Verdict Flip Rate min(n_pass, K - n_pass) / K over K bootstrap resamples (0..0.5).",
            _CELL,
            cell=True,
        )
        self.cell_dominant_pass = gauge(
            "vfr_cell_dominant_pass",
            "Dominant verdict over the K resamples: 1 pass, 0 fail (a tie is fail).",
            _CELL,
            cell=True,
        )
        self.cell_point_pass = gauge(
            "vfr_cell_point_pass",
            "Verdict of the point estimate on the whole window: 1 pass, 0 fail.",
            _CELL,
            cell=True,
        )
        self.cell_sigma = gauge(
            "vfr_cell_sigma",
            "Stability margin |mean - threshold| / sd of the K metric values (+Inf: sd is 0).",
            _CELL,
            cell=True,
        )
        self.cell_ci_low = gauge(
            "vfr_cell_ci_low",
            "2.5th percentile of the K resampled metric values.",
            _CELL,
            cell=True,
        )
        self.cell_ci_high = gauge(
            "vfr_cell_ci_high",
            "97.5th percentile of the K resampled metric values.",
            _CELL,
            cell=True,
        )
        self.cell_n_star = gauge(
            "vfr_cell_n_star",
            "Axis 2 minimum reliable audit size N* in records (+Inf: never reached; "
            "absent: not computed yet).",
            _CELL,
            cell=True,
        )
        self.cell_kappa = gauge(
            "vfr_cell_kappa",
            "Axis 3 Fleiss kappa of hospital-fold verdicts (absent: not computed or not "
            "applicable).",
            _CELL,
            cell=True,
        )
        self.cell_tier_level = gauge(
            "vfr_cell_tier_level",
            "Raw reliability tier level: 0 Practical-Stability .. 3 Catastrophic-Instability, "
            "-1 Pending.",
            _CELL,
            cell=True,
        )
        self.cell_tier = gauge(
            "vfr_cell_tier",
            "Raw reliability tier as an enum: 1 for the current tier, 0 for the others.",
            (*_CELL, "tier"),
            cell=True,
        )
        self.cell_partial = gauge(
            "vfr_cell_partial",
            "1 when an axis cannot exist for this data (e.g. no hospital ids) and the tier "
            "counts only the others.",
            _CELL,
            cell=True,
        )
        self.cell_confirmed_tier_level = gauge(
            "vfr_cell_confirmed_tier_level",
            "Confirmed (debounced) reliability tier level, -1 Pending.",
            _CELL,
            cell=True,
        )
        self.cell_confirmed_pass = gauge(
            "vfr_cell_confirmed_pass",
            "Confirmed (debounced) dominant verdict: 1 pass, 0 fail. A gauge, so that "
            "changes() sees a cell's first confirmed flip (a labelled counter starts at 1).",
            _CELL,
            cell=True,
        )
        self.verdict_flips = counter(
            "vfr_verdict_flips_total",
            "Changes of a cell's dominant verdict (state raw: every change; confirmed: "
            "after confirm_windows evaluations).",
            (*_CELL, "direction", "state"),
            cell=True,
        )
        self.tier_changes = counter(
            "vfr_tier_changes_total",
            "Changes of a cell's reliability tier, raw and confirmed.",
            (*_CELL, "from_tier", "to_tier", "state"),
            cell=True,
        )

        # ---- group level (small-cell suppressed)
        self.group_selection_rate = gauge(
            "vfr_group_selection_rate",
            f"Share of the group's window records with decision 1 (only groups with "
            f">= {MIN_EXPORT_RECORDS} records).",
            ("model", "attribute", "group"),
        )
        self.group_records = gauge(
            "vfr_group_records",
            f"Window records of the group (only groups with >= {MIN_EXPORT_RECORDS} records).",
            ("model", "attribute", "group"),
        )

        # ---- ingest
        self.ingest_records = counter(
            "vfr_ingest_records_total",
            "Scored records read, by outcome: accepted, duplicate or rejected.",
            ("source", "state"),
        )
        self.ingest_rejected = counter(
            "vfr_ingest_rejected_total",
            "Rejected records by reason code (e.g. out_of_range:score).",
            ("source", "reason"),
        )
        self.consumer_lag = gauge(
            "vfr_consumer_lag_messages",
            "Messages between the committed offset and the end of the partition.",
            ("source", "partition"),
        )
        self.window_records = gauge(
            "vfr_window_records", "Records in the model's current window.", ("model",)
        )
        self.last_evaluation = gauge(
            "vfr_last_evaluation_timestamp_seconds",
            "Unix time of the model's latest completed evaluation.",
            ("model",),
        )
        self.evaluations = counter(
            "vfr_evaluations_total", "Completed window evaluations of the model.", ("model",)
        )
        self.evaluation_duration = self._register(
            Histogram(
                "vfr_evaluation_duration_seconds",
                "Wall time of one evaluation of the model's whole grid.",
                ("model",),
                buckets=_EVAL_BUCKETS,
                registry=self._inner,
            ),
            ("model",),
            False,
        )
        self.old_events_counter = counter(
            "vfr_old_events_total",
            "Records whose event time was older than the window horizon (not windowed).",
            ("model",),
        )

        # ---- scheduled jobs
        self.job_duration = gauge(
            "vfr_job_duration_seconds", "Wall time of the job's latest run.", ("task",)
        )
        self.job_last_success = gauge(
            "vfr_job_last_success_timestamp_seconds",
            "Unix time of the job's latest successful run.",
            ("task",),
        )
        self.job_runs = counter(
            "vfr_job_runs_total",
            "Runs of the job by outcome: success, failure, skipped.",
            ("task", "state"),
        )

        # ---- model health (river)
        self.model_auroc = gauge(
            "vfr_model_rolling_auroc", "Rolling AUROC of the model's scores.", ("model",)
        )
        self.model_accuracy = gauge(
            "vfr_model_rolling_accuracy", "Rolling accuracy of the model's decisions.", ("model",)
        )
        self.drift_detections = counter(
            "vfr_drift_detections_total",
            "Drift detections on the cell's metric stream.",
            _CELL,
            cell=True,
        )

        # ---- process
        self.build_info = Gauge(
            "vfr_build_info",
            "Version of vfr-monitor; always 1.",
            ("version",),
            registry=self._inner,
        )
        self.build_info.labels(_ident("version", version)).set(1)
        self.up = Gauge("vfr_up", "1 while the exporter is serving.", registry=self._inner)
        self.up.set(1)

    # ------------------------------------------------------------------ bookkeeping
    def _register(self, metric, labels: tuple[str, ...], cell: bool):
        bad = set(labels) - ALLOWED_LABELS
        if bad:  # a programming error: fail at start-up, not at scrape time
            raise ValueError(f"label names not allowed: {sorted(bad)}")
        self._labelled.append((metric, labels))
        if cell:
            self._cell_metrics.append((metric, labels))
        return metric

    @staticmethod
    def _series(metric: MetricWrapperBase, labels: tuple[str, ...]) -> set[tuple[str, ...]]:
        """Label-value tuples of the metric's live children (public collect() API only)."""
        out = set()
        for family in metric.collect():
            for s in family.samples:
                out.add(tuple(s.labels[name] for name in labels))
        return out

    def _remove_where(
        self, metrics: Iterable[tuple[MetricWrapperBase, tuple[str, ...]]], **match: str
    ) -> None:
        for metric, labels in metrics:
            if not all(k in labels for k in match):
                continue
            idx = {k: labels.index(k) for k in match}
            for values in self._series(metric, labels):
                if all(values[i] == match[k] for k, i in idx.items()):
                    _discard(metric, *values)

    def _remove_cell(self, model: str, metric: str, attribute: str) -> None:
        self._remove_where(self._cell_metrics, model=model, metric=metric, attribute=attribute)

    # ------------------------------------------------------------------ cells
    def update_cell(
        self,
        model: str,
        metric: str,
        attribute: str,
        *,
        value: float | None,
        vfr: float | None,
        dominant_pass: bool,
        point_pass: bool,
        sigma: float | None,
        ci_low: float | None,
        ci_high: float | None,
        n_star: float | None,
        kappa: float | None,
        tier: str,
        tier_level: int,
        partial: bool,
        confirmed_tier: str | None,
        window_n: int,
        confirmed_pass: bool | None = None,
    ) -> None:
        """Publish one cell's latest evaluation (or remove it if its window is too small)."""
        key = (_ident("model", model), _ident("metric", metric), _ident("attribute", attribute))
        current = Tier(tier)
        if current.level != tier_level:
            raise ValueError("tier_level does not match tier")
        confirmed = None if confirmed_tier is None else Tier(confirmed_tier)
        with self._lock:
            if window_n < MIN_EXPORT_RECORDS:
                self._suppressed_cells.add(key)
                self._remove_cell(*key)
                return
            self._suppressed_cells.discard(key)
            self.cell_value.labels(*key).set(_num(value))
            self.cell_vfr.labels(*key).set(_num(vfr))
            self.cell_dominant_pass.labels(*key).set(1 if dominant_pass else 0)
            self.cell_point_pass.labels(*key).set(1 if point_pass else 0)
            self.cell_sigma.labels(*key).set(_num(sigma))
            self.cell_ci_low.labels(*key).set(_num(ci_low))
            self.cell_ci_high.labels(*key).set(_num(ci_high))
            for gauge, x in ((self.cell_n_star, n_star), (self.cell_kappa, kappa)):
                if x is None:
                    _discard(gauge, *key)
                else:
                    gauge.labels(*key).set(float(x))
            self.cell_tier_level.labels(*key).set(current.level)
            for t in TIERS:
                self.cell_tier.labels(*key, t).set(1 if t == current.value else 0)
            self.cell_partial.labels(*key).set(1 if partial else 0)
            if confirmed is None:
                _discard(self.cell_confirmed_tier_level, *key)
            else:
                self.cell_confirmed_tier_level.labels(*key).set(confirmed.level)
            if confirmed_pass is None:
                _discard(self.cell_confirmed_pass, *key)
            else:
                self.cell_confirmed_pass.labels(*key).set(1 if confirmed_pass else 0)

    def record_event(
        self,
        kind: str,
        model: str,
        metric: str,
        attribute: str,
        old: str,
        new: str,
        confirmed: bool,
        direction: str,
    ) -> None:
        """Count a verdict flip or tier change (a CellEvent's fields).

        Not counted while the cell is suppressed (its window has fewer than
        MIN_EXPORT_RECORDS records): the event log still has it.
        """
        key = (_ident("model", model), _ident("metric", metric), _ident("attribute", attribute))
        state = "confirmed" if confirmed else "raw"
        if kind == "verdict_flip":
            if direction not in VERDICT_DIRECTIONS:
                raise ValueError("label 'direction': not a verdict flip direction")
            counter, labels = self.verdict_flips, (*key, direction, state)
        elif kind == "tier_change":
            counter, labels = self.tier_changes, (*key, Tier(old).value, Tier(new).value, state)
        else:
            raise ValueError("kind must be verdict_flip or tier_change")
        with self._lock:
            if key not in self._suppressed_cells:
                counter.labels(*labels).inc()

    def update_groups(
        self, model: str, attribute: str, groups: dict[str, tuple[int, float]]
    ) -> None:
        """Group records and selection rates: code -> (records, rate), small cells removed.

        Groups below MIN_EXPORT_RECORDS, and groups no longer reported, lose
        their series (absent, never 0 or NaN, which would still say "there is a
        tiny group here").
        """
        model, attribute = _ident("model", model), _ident("attribute", attribute)
        keep = {}
        for code, (records, rate) in groups.items():
            if code not in self._group_codes:
                code = _ident("group", code)
            if int(records) >= MIN_EXPORT_RECORDS:
                keep[code] = (int(records), float(rate))
        with self._lock:
            previous = self._groups.get((model, attribute), set())
            for code in previous - keep.keys():
                for gauge in (self.group_records, self.group_selection_rate):
                    _discard(gauge, model, attribute, code)
            for code, (records, rate) in keep.items():
                self.group_records.labels(model, attribute, code).set(records)
                self.group_selection_rate.labels(model, attribute, code).set(rate)
            self._groups[(model, attribute)] = set(keep)

    # ------------------------------------------------------------------ ingest
    def _reason(self, reason: str) -> str:
        """A bounded reason label: schema codes, at most MAX_REASONS of them, else 'other'."""
        if not isinstance(reason, str) or not _REASON.fullmatch(reason):
            return "other"
        if reason not in self._reasons:
            if len(self._reasons) >= MAX_REASONS:
                return "other"
            self._reasons.add(reason)
        return reason

    def ingest(
        self, source: str, accepted: int, duplicates: int, rejected_by_reason: dict[str, int]
    ) -> None:
        """Count one batch of consumed records by outcome (and rejections by reason)."""
        source = _ident("source", source)
        counts = [int(accepted), int(duplicates), *map(int, rejected_by_reason.values())]
        if any(c < 0 for c in counts):
            raise ValueError("counts must be >= 0")
        with self._lock:
            rejected = 0
            for reason, n in rejected_by_reason.items():
                self.ingest_rejected.labels(source, self._reason(reason)).inc(int(n))
                rejected += int(n)
            for state, n in zip(INGEST_STATES, (accepted, duplicates, rejected), strict=True):
                self.ingest_records.labels(source, state).inc(int(n))

    def set_lag(self, source: str, lag_by_partition: dict[int, int]) -> None:
        """Consumer lag per partition; partitions not reported (or lag unknown, < 0) vanish."""
        source = _ident("source", source)
        lags = {str(int(p)): int(n) for p, n in lag_by_partition.items() if n is not None}
        lags = {p: n for p, n in lags.items() if n >= 0}
        with self._lock:
            for p in self._partitions.get(source, set()) - lags.keys():
                _discard(self.consumer_lag, source, p)
            for p, n in lags.items():
                self.consumer_lag.labels(source, p).set(n)
            self._partitions[source] = set(lags)

    def window(self, model: str, records: int) -> None:
        """Size of the model's current window."""
        model = _ident("model", model)
        with self._lock:
            self.window_records.labels(model).set(int(records))

    def evaluation(self, model: str, duration_s: float, at_timestamp: float) -> None:
        """One completed evaluation of the model's grid."""
        model = _ident("model", model)
        with self._lock:
            self.evaluations.labels(model).inc()
            self.evaluation_duration.labels(model).observe(float(duration_s))
            self.last_evaluation.labels(model).set(float(at_timestamp))

    def old_events(self, model: str, n: int) -> None:
        """Records that arrived older than the window horizon and were not windowed."""
        model = _ident("model", model)
        if n < 0:
            raise ValueError("n must be >= 0")
        with self._lock:
            self.old_events_counter.labels(model).inc(int(n))

    # ------------------------------------------------------------------ jobs / health
    def job(self, job: str, state: str, duration_s: float | None, at_timestamp: float) -> None:
        """One run of a scheduled job (state success | failure | skipped)."""
        job = _ident("task", job)
        if state not in JOB_STATES:
            raise ValueError("state must be success, failure or skipped")
        with self._lock:
            for s in JOB_STATES:  # all three exist from the first run, so rate() works
                self.job_runs.labels(job, s)
            self.job_runs.labels(job, state).inc()
            if duration_s is not None:
                self.job_duration.labels(job).set(float(duration_s))
            if state == "success":
                self.job_last_success.labels(job).set(float(at_timestamp))

    def model_health(self, model: str, auroc: float | None, accuracy: float | None) -> None:
        """Rolling AUROC / accuracy; None or NaN (no data yet) removes the series."""
        model = _ident("model", model)
        with self._lock:
            for gauge, x in ((self.model_auroc, auroc), (self.model_accuracy, accuracy)):
                if _missing(x):
                    _discard(gauge, model)
                else:
                    gauge.labels(model).set(float(x))

    def drift(self, model: str, metric: str, attribute: str) -> None:
        """One drift detection on the cell's metric stream."""
        key = (_ident("model", model), _ident("metric", metric), _ident("attribute", attribute))
        with self._lock:
            if key in self._suppressed_cells:
                return
            self.drift_detections.labels(*key).inc()

    def remove_model(self, model: str) -> None:
        """Drop every series of a model (it was undeployed)."""
        model = _ident("model", model)
        with self._lock:
            self._remove_where(self._labelled, model=model)
            self._suppressed_cells = {k for k in self._suppressed_cells if k[0] != model}
            self._groups = {k: v for k, v in self._groups.items() if k[0] != model}

    # ------------------------------------------------------------------ exposition
    def render(self) -> bytes:
        """Text exposition format (version 0.0.4) of this exporter's registry only."""
        with self._lock:
            return generate_latest(self.registry)
