"""Prometheus exporter of the streaming service: cells, events, ingest, jobs, model health.

Two kinds of series, kept apart on purpose:

* **State** (cell values, tiers, group sizes, window size, model health, consumer lag)
  is not stored here at all: a custom collector (:class:`_StateCollector`) builds it at
  scrape time from a :class:`StateSnapshot` that the service hands over (typed
  :class:`~monitor.core.results.CellEvaluation` objects, not keyword lists). What is not
  in the snapshot has no series, so there is no removal bookkeeping to get wrong: a
  model that leaves, a cell that drops below the small-cell rule, a revoked partition
  simply stop appearing.
* **Counts** (ingested records, flips, evaluations, job runs, drift) are prometheus
  counters, incremented by verbs (``count_batch``, ``count_event``, ...).

Why a class with its own ``CollectorRegistry``: the service, the tests and any
embedded tool can each hold an exporter without sharing (or polluting) the
process-global default registry.

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
* one exception, on purpose: the ``explanation`` label of
  ``vfr_cell_last_event_info`` holds the sentence :mod:`monitor.core.explain` makes of
  the cell's latest confirmed event (cell names and aggregates, never a record value),
  so an alert annotation can quote it. It is bounded as the others are: one series per
  cell and event kind (the previous sentence's series is removed when a new one is set),
  one line of at most :data:`MAX_SENTENCE` printable characters, withheld under the
  small-cell rule, and absent when the exporter was given no ``explain`` function.

Non-finite values (documented choice):

* ``vfr_cell_sigma`` is ``+Inf`` when the K metric values have zero spread (all
  resamples agree: as far from the threshold as it gets), which the text format
  allows; ``vfr_cell_n_star`` is ``+Inf`` when Axis 2 never reached its target.
* ``vfr_cell_value`` / ``_ci_low`` / ``_ci_high`` / ``_kappa`` are ``NaN`` when
  the metric is undefined on the window (e.g. DI with no positive decisions):
  the series stays, and any comparison with it is false, so no alert fires on it.
* an axis that has no result yet (``n_star`` / ``kappa`` / ``confirmed_tier`` is
  ``None``) has no series at all: "not computed" is not a number.

Releases (docs/privacy.md): the state series show what the service has *released*
(monitor.stream.publication), never the live window: cells as of their last released
evaluation, group sizes and window sizes rounded to 5, selection rates to 2 decimals,
withheld groups absent, each changing only when the records behind the change number 0 or
11+. A count below 10 is never a released one and is refused here as a second line.

Small-cell suppression (a hard rule): a statistic computed from fewer than
:data:`~monitor.core.privacy.SMALL_CELL` records is never exported. A group below
it has no group series (absent, not zeroed), a cell whose window is below it exports
no per-cell series, not even its event counters, and a model whose window is below
it exports no window size and no rolling AUROC or accuracy.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from monitor.config import EXPORTABLE_ID, GROUP_CODE
from monitor.core.events import CellEvent
from monitor.core.locks import named_lock
from monitor.core.numbers import as_float, float_or_none
from monitor.core.results import CellEvaluation
from monitor.core.tiers import EVALUABLE_TIERS, Tier
from monitor.publish.cells import cell_value
from monitor.publish.rule import SMALL_CELL, published, reportable
from monitor.publish.shown import Shown

log = logging.getLogger(__name__)

#: Fewer records than this and a statistic is not exported (the small-cell rule).
MIN_EXPORT_RECORDS = SMALL_CELL

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
        "kind",
        "explanation",
    }
)

#: Longest event sentence the exporter puts in a label (explain_event's are ~100-250).
MAX_SENTENCE = 600

#: At most this many distinct rejection reasons per exporter; the rest count as "other".
MAX_REASONS = 64

TIERS = tuple(t.value for t in EVALUABLE_TIERS)
VERDICT_DIRECTIONS = frozenset({"pass_to_fail", "fail_to_pass"})
#: directions of a certified change (monitor.stream.certified): the first two page
CERTIFIED_DIRECTIONS = frozenset(
    {"pass_to_fail", "fail_to_pass", "undetermined_to_pass", "undetermined_to_fail"}
)
JOB_STATES = ("success", "failure", "skipped")
INGEST_STATES = ("accepted", "duplicate", "rejected")

# An identifier: what configured ids, names and codes look like. No spaces, no
# free text, short. Rejection reasons are "<kind>:<field>" codes from monitor.stream.schema.
# (the config's EXPORTABLE_ID: validation refuses a model id the exporter could not export)
_IDENT = EXPORTABLE_ID
_REASON = re.compile(r"[a-z][a-z_]{0,31}(?::[A-Za-z0-9_]{1,32})?")

_CELL = ("model", "metric", "attribute")
_EVAL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def is_identifier(value: object) -> TypeGuard[str]:
    """Whether a value may be a label value: a short identifier (see module docstring)."""
    return isinstance(value, str) and _IDENT.fullmatch(value) is not None


def _sentence(text: object) -> str:
    """An event sentence fit for a label value: one line of printable text, bounded."""
    if not isinstance(text, str) or not 0 < len(text) <= MAX_SENTENCE or not text.isprintable():
        raise ValueError("label 'explanation': not a one-line sentence")
    return text


def _ident(label: str, value: object) -> str:
    """A label value that is a short identifier, or ValueError naming the label only."""
    if not is_identifier(value):
        raise ValueError(f"label {label!r}: not a short identifier")
    return value


# ----------------------------------------------------------------------------- snapshot
@dataclass(frozen=True)
class GroupStat:
    """A group's window records and share with decision 1, as released (rounded:
    monitor.stream.publication)."""

    records: int
    selection_rate: float


@dataclass(frozen=True)
class ModelStatus:
    """What the exporter shows of a model besides its cells."""

    model_id: str
    #: as released (rounded; None: withheld)
    window_records: int | None
    #: attribute -> group code -> stat (released groups only)
    groups: Mapping[str, Mapping[str, GroupStat]] = field(default_factory=dict)
    auroc: float | None = None
    accuracy: float | None = None
    last_evaluation_at: float | None = None  # Unix time


@dataclass(frozen=True)
class StateSnapshot:
    """The service's current state, as a scrape reads it."""

    cells: Sequence[CellEvaluation] = ()
    models: Sequence[ModelStatus] = ()
    #: source -> partition -> messages behind (revoked or unknown partitions absent)
    lag: Mapping[str, Mapping[int, int]] = field(default_factory=dict)


def _empty() -> StateSnapshot:
    return StateSnapshot()


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


#: (name, help, value of a cell) of the per-cell gauges built at scrape time
_CELL_GAUGES: tuple[tuple[str, str, Callable[[CellEvaluation], float | None]], ...] = (
    (
        "vfr_cell_value",
        "Point estimate of the fairness metric on the whole window (NaN: undefined).",
        lambda c: as_float(c.result.value),
    ),
    (
        "vfr_cell_vfr",
        "Verdict Flip Rate min(n_pass, K - n_pass) / K over K bootstrap resamples (0..0.5).",
        lambda c: as_float(c.result.vfr),
    ),
    (
        "vfr_cell_dominant_pass",
        "Dominant verdict over the K resamples: 1 pass, 0 fail (a tie is fail).",
        lambda c: 1.0 if c.result.dominant_verdict == "pass" else 0.0,
    ),
    (
        "vfr_cell_point_pass",
        "Verdict of the point estimate on the whole window: 1 pass, 0 fail.",
        lambda c: 1.0 if c.result.point_verdict == "pass" else 0.0,
    ),
    (
        "vfr_cell_sigma",
        "Stability margin |mean - threshold| / sd of the K metric values (+Inf: sd is 0).",
        lambda c: as_float(c.result.sigma),
    ),
    (
        "vfr_cell_ci_low",
        "2.5th percentile of the K resampled metric values.",
        lambda c: as_float(c.result.ci_low),
    ),
    (
        "vfr_cell_ci_high",
        "97.5th percentile of the K resampled metric values.",
        lambda c: as_float(c.result.ci_high),
    ),
    (
        "vfr_cell_n_star",
        "Axis 2 minimum reliable audit size N* in records (+Inf: never reached; "
        "absent: not computed yet).",
        lambda c: c.n_star,
    ),
    (
        "vfr_cell_kappa",
        "Axis 3 Fleiss kappa of hospital-fold verdicts (absent: not computed or not "
        "applicable).",
        lambda c: c.kappa,
    ),
    (
        "vfr_cell_tier_level",
        "Raw reliability tier level: 0 Practical-Stability .. 3 Catastrophic-Instability, "
        "-1 Pending.",
        lambda c: float(c.tier.tier.level),
    ),
    (
        "vfr_cell_partial",
        "1 when an axis cannot exist for this data (e.g. no hospital ids) and the tier "
        "counts only the others.",
        lambda c: 1.0 if c.tier.partial else 0.0,
    ),
    (
        "vfr_cell_confirmed_tier_level",
        "Confirmed (debounced) reliability tier level, -1 Pending.",
        lambda c: None if c.confirmed_tier is None else float(Tier(c.confirmed_tier).level),
    ),
    (
        "vfr_cell_confirmed_pass",
        "Confirmed (debounced) dominant verdict: 1 pass, 0 fail. A gauge, so that "
        "changes() sees a cell's first confirmed flip (a labelled counter starts at 1).",
        lambda c: None if c.confirmed_pass is None else (1.0 if c.confirmed_pass else 0.0),
    ),
    (
        "vfr_cell_reliable_pass",
        "Reliable verdict: the latest verdict that held for confirm_windows evaluations with "
        "VFR <= tau_vfr in each; 1 pass, 0 fail (absent: none yet). Pages on its changes.",
        lambda c: None if c.reliable_pass is None else (1.0 if c.reliable_pass else 0.0),
    ),
)


def _coverage_families(cells: Sequence[CellEvaluation]) -> Iterator[Metric]:
    """Outcome coverage per model, attribute and group (monitor.core.coverage), from the
    released label-based cells: every such cell of an attribute carries the same figures,
    published (coverage from 11+ predictions, the median delay from 11+ outcomes, rates to
    2 decimals); a cell whose window is under the small-cell rule contributes nothing."""
    ratio = GaugeMetricFamily(
        "vfr_outcome_coverage_ratio",
        "Share of the group's window predictions whose outcome has arrived (only groups "
        f"with >= {SMALL_CELL} predictions).",
        labels=("model", "attribute", "group"),
    )
    delay = GaugeMetricFamily(
        "vfr_outcome_median_delay_seconds",
        "Median time from scoring to the outcome over the group's arrived outcomes "
        f"(only groups with >= {SMALL_CELL} outcomes).",
        labels=("model", "attribute", "group"),
    )
    gap = GaugeMetricFamily(
        "vfr_outcome_coverage_gap_ratio",
        "Relative shortfall 1 - min/max of the groups' outcome coverage (groups with "
        "min_group_support predictions or more).",
        labels=("model", "attribute"),
    )
    incomplete = GaugeMetricFamily(
        "vfr_outcome_coverage_incomplete",
        "1 while the coverage gap exceeds [outcomes] max_coverage_gap: the attribute's "
        "label-based cells say 'outcomes incomplete'.",
        labels=("model", "attribute"),
    )
    seen: set[tuple[str, str]] = set()
    for c in sorted(cells, key=lambda c: c.key):
        ac = c.outcome_coverage
        key = (c.result.model_id, c.result.attribute)
        if ac is None or key in seen or not reportable(c.result.window_n):
            continue
        if not all(map(is_identifier, key)):
            continue
        seen.add(key)
        for g in ac.groups:
            if not is_identifier(g.group) and not GROUP_CODE.fullmatch(g.group):
                continue
            if float_or_none(g.coverage) is not None:
                ratio.add_metric((*key, g.group), float(g.coverage))  # type: ignore[arg-type]  # a number: checked
            if float_or_none(g.median_delay_days) is not None:
                delay.add_metric((*key, g.group), float(g.median_delay_days) * 86_400.0)  # type: ignore[arg-type]  # checked
        if ac.gap is not None:
            gap.add_metric(key, float(ac.gap))
            incomplete.add_metric(key, 1.0 if ac.gap > ac.max_gap else 0.0)
    yield from (ratio, delay, gap, incomplete)


class _StateCollector(Collector):
    """Cell, group, model and lag series, built from the service's snapshot at each scrape.

    An item whose label values are not identifiers is left out (and logged by type),
    so one bad item never costs the others their series.
    """

    def __init__(self, state: Callable[[], StateSnapshot], group_codes: frozenset[str]) -> None:
        self.state = state
        self.group_codes = group_codes
        #: the snapshot :meth:`Exporter.render` read before taking the exporter's lock
        self._given = threading.local()

    @contextlib.contextmanager
    def given(self, snap: StateSnapshot) -> Iterator[None]:
        """Collect from ``snap`` (on this thread) instead of calling ``state``."""
        self._given.snap = snap
        try:
            yield
        finally:
            self._given.snap = None

    def describe(self) -> Iterable[Metric]:
        return []  # built per scrape; nothing to pre-register

    def collect(self) -> Iterator[Metric]:
        snap = getattr(self._given, "snap", None) or self.state()
        yield from self._cells(snap.cells)
        yield from self._models(snap.models)
        lag = GaugeMetricFamily(
            "vfr_consumer_lag_messages",
            "Messages between the committed offset and the end of the partition.",
            labels=("source", "partition"),
        )
        for source, parts in sorted(snap.lag.items()):
            if not is_identifier(source):
                continue
            for p, n in sorted(parts.items()):
                if n is not None and n >= 0:
                    lag.add_metric((source, str(int(p))), float(n))
        yield lag

    def _cells(self, cells: Sequence[CellEvaluation]) -> Iterator[Metric]:
        families = [GaugeMetricFamily(n, h, labels=_CELL) for n, h, _ in _CELL_GAUGES]
        tier = GaugeMetricFamily(
            "vfr_cell_tier",
            "Raw reliability tier as an enum: 1 for the current tier, 0 for the others.",
            labels=(*_CELL, "tier"),
        )
        not_evaluable = GaugeMetricFamily(
            "vfr_cell_not_evaluable",
            "1 when the cell is not evaluable (its value is undefined: fewer than two groups "
            "reach the rate denominator); it then has no verdict, VFR, kappa or tier series. "
            "The reason and the records it needs are in /api/cells.",
            labels=_CELL,
        )
        certified = GaugeMetricFamily(
            "vfr_cell_certified_verdict",
            "Certified verdict of the cell (docs/method.md section 11): 1 pass, 0 undetermined "
            "(not certified yet), -1 fail; absent: the metric is not certifiable (TI, CAL, "
            "CAL_GAP). A change between 1 and -1 pages (VFRCertifiedVerdictChange).",
            labels=_CELL,
        )
        change_records = GaugeMetricFamily(
            "vfr_cell_certified_change_records",
            "Records (rounded to 5) whose evidence made the cell's latest certified change; "
            "absent before its first certification.",
            labels=_CELL,
        )
        for c in sorted(cells, key=lambda c: c.key):
            key = c.key
            if not all(map(is_identifier, key)):
                log.warning("cell left out of the exposition: label not an identifier")
                continue
            published = cell_value(c)
            if not isinstance(published.figures, Shown):
                continue  # the small-cell rule: no per-cell series at all
            shown = published.figures.value
            if c.certified is not None and shown.certified is not None:
                # kept while the window is not evaluable: the verdict rests on the blocks
                # since its last change, not on the window
                certified.add_metric(key, float(c.certified.code))
                n = shown.certified.last_change_records
                if isinstance(n, Shown) and n.value > 0:  # 0: no change behind it yet
                    change_records.add_metric(key, float(n.value))
            not_evaluable.add_metric(key, 0.0 if c.result.evaluable else 1.0)
            if not c.result.evaluable:
                # no verdict, VFR or tier of its own (docs/method.md section 2): no series
                # that a rule or a panel could read as one; the debounced and reliable
                # verdicts stay as the last evaluable evaluation left them and come back
                # with the cell, unchanged, so nothing pages
                continue
            for fam, (_, _, get) in zip(families, _CELL_GAUGES, strict=True):
                x = get(c)
                if x is not None:
                    fam.add_metric(key, x)
            for t in TIERS:
                tier.add_metric((*key, t), 1.0 if t == c.tier.tier.value else 0.0)
        yield from families
        yield tier
        yield not_evaluable
        yield certified
        yield change_records
        yield from _coverage_families(cells)

    def _models(self, models: Sequence[ModelStatus]) -> Iterator[Metric]:
        records = GaugeMetricFamily(
            "vfr_window_records", "Records in the model's current window.", labels=("model",)
        )
        last = GaugeMetricFamily(
            "vfr_last_evaluation_timestamp_seconds",
            "Unix time of the model's latest completed evaluation.",
            labels=("model",),
        )
        auroc = GaugeMetricFamily(
            "vfr_model_rolling_auroc", "Rolling AUROC of the model's scores.", labels=("model",)
        )
        accuracy = GaugeMetricFamily(
            "vfr_model_rolling_accuracy",
            "Rolling accuracy of the model's decisions.",
            labels=("model",),
        )
        g_rate = GaugeMetricFamily(
            "vfr_group_selection_rate",
            f"Share of the group's window records with decision 1 (only groups with "
            f">= {SMALL_CELL} records).",
            labels=("model", "attribute", "group"),
        )
        g_records = GaugeMetricFamily(
            "vfr_group_records",
            f"Window records of the group (only groups with >= {SMALL_CELL} records).",
            labels=("model", "attribute", "group"),
        )
        for m in sorted(models, key=lambda m: m.model_id):
            if not is_identifier(m.model_id):
                log.warning("model left out of the exposition: label not an identifier")
                continue
            if m.last_evaluation_at is not None:
                last.add_metric((m.model_id,), float(m.last_evaluation_at))
            if m.window_records is None or not published(m.window_records):
                continue  # a figure from fewer than SMALL_CELL records never leaves
            records.add_metric((m.model_id,), float(m.window_records))
            for fam, x in ((auroc, m.auroc), (accuracy, m.accuracy)):
                if float_or_none(x) is not None:
                    fam.add_metric((m.model_id,), float(x))  # type: ignore[arg-type]  # a number: checked
            for attr, groups in sorted(m.groups.items()):
                if not is_identifier(attr):
                    continue
                for code, st in sorted(groups.items()):
                    if code not in self.group_codes and not is_identifier(code):
                        continue
                    if published(st.records):
                        g_records.add_metric((m.model_id, attr, code), float(st.records))
                        g_rate.add_metric((m.model_id, attr, code), float(st.selection_rate))
        yield from (records, last, auroc, accuracy, g_rate, g_records)


class Exporter:
    """All vfr_ metrics of one service process, on a registry of their own.

    State series come from ``state`` (a callable returning a :class:`StateSnapshot`)
    at every scrape; counters are incremented by the ``count_*``/``record_*`` verbs,
    which take one shared lock and raise ValueError for label values that would break
    the cardinality bound.
    """

    def __init__(
        self,
        version: str,
        group_codes: Iterable[str] | None = None,
        state: Callable[[], StateSnapshot] = _empty,
        explain: Callable[[CellEvent], str] | None = None,
    ) -> None:
        #: Group label values allowed besides the identifier shape (the configured codes,
        #: which may hold spaces or '<': "African American", "<50"). A value outside both
        #: is refused, so record-level text cannot become a label even by mistake.
        self._group_codes = frozenset(c for c in group_codes or () if GROUP_CODE.fullmatch(c))
        #: What a scrape reads: the counters (through _WithoutCreated) and the state.
        self.registry = CollectorRegistry()
        self._inner = CollectorRegistry(auto_describe=True)
        self.registry.register(_WithoutCreated(self._inner))
        self.state_collector = _StateCollector(state, self._group_codes)
        self.registry.register(self.state_collector)
        self._lock = named_lock("exporter", reentrant=True)
        self._labelled: list[tuple[MetricWrapperBase, tuple[str, ...]]] = []
        self._reasons: set[str] = set()

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return self._register(Gauge(name, doc, labels, registry=self._inner), labels)

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            # prometheus_client appends "_total" itself; pass the stem.
            stem = name.removesuffix("_total")
            return self._register(Counter(stem, doc, labels, registry=self._inner), labels)

        # ---- per cell events (the small-cell rule applies: see count_event)
        self.verdict_flips = counter(
            "vfr_verdict_flips_total",
            "Changes of a cell's dominant verdict (state raw: every change; confirmed: "
            "after confirm_windows evaluations).",
            (*_CELL, "direction", "state"),
        )
        self.tier_changes = counter(
            "vfr_tier_changes_total",
            "Changes of a cell's reliability tier, raw and confirmed.",
            (*_CELL, "from_tier", "to_tier", "state"),
        )
        self.certified_changes = counter(
            "vfr_certified_changes_total",
            "Changes of a cell's certified verdict (docs/method.md section 11): kind page "
            "(pass to fail or fail to pass) or notice (a first certification).",
            (*_CELL, "kind", "direction"),
        )
        self.drift_detections = counter(
            "vfr_drift_detections_total",
            "Drift detections on the cell's metric stream.",
            _CELL,
        )
        #: The sentence of a confirmed event, for alert annotations (``explain``: the
        #: service passes its store's, which uses the configured cutoffs; without one no
        #: sentence is exported rather than one with guessed cutoffs).
        self._explain = explain
        self.last_event = gauge(
            "vfr_cell_last_event_info",
            "The cell's latest confirmed verdict flip or tier change (kind) in one sentence "
            "(label explanation); always 1, one series per cell and kind.",
            (*_CELL, "kind", "explanation"),
        )
        #: (model, metric, attribute, kind) -> the sentence its series holds now
        self._sentences: dict[tuple[str, str, str, str], str] = {}

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
        self.rejection_dominant = gauge(
            "vfr_ingest_rejection_dominant",
            "1 while the reason holds the majority of the last ~1,000 messages read (most "
            "of the input is dead-lettered for it: a setting may be missing), 0 after.",
            ("source", "reason"),
        )
        #: (source, reason label) series of rejection_dominant set to 1 now
        self._dominant: set[tuple[str, str]] = set()
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
        )
        self.old_events_counter = counter(
            "vfr_old_events_total",
            "Records whose event time was older than the window horizon (not windowed).",
            ("model",),
        )
        self.observer_failures = counter(
            "vfr_observer_failures_total",
            "Items of a committed batch whose metrics update failed (each counted, the "
            "others still published).",
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
    def _register(self, metric, labels: tuple[str, ...]):
        bad = set(labels) - ALLOWED_LABELS
        if bad:  # a programming error: fail at start-up, not at scrape time
            raise ValueError(f"label names not allowed: {sorted(bad)}")
        self._labelled.append((metric, labels))
        return metric

    # ------------------------------------------------------------------ cells
    def count_event(self, event: CellEvent, window_n: int) -> None:
        """Count a verdict flip, tier change or certified change of a cell whose window has
        ``window_n`` records;
        a confirmed one also becomes the cell's ``vfr_cell_last_event_info`` sentence.

        Neither when the window is below the small-cell rule: the event log still has it.
        """
        key = (
            _ident("model", event.model_id),
            _ident("metric", event.metric),
            _ident("attribute", event.attribute),
        )
        state = "confirmed" if event.confirmed else "raw"
        labels: tuple[str, ...]
        if event.kind == "verdict_flip":
            if event.direction not in VERDICT_DIRECTIONS:
                raise ValueError("label 'direction': not a verdict flip direction")
            counter, labels = self.verdict_flips, (*key, event.direction, state)
        elif event.kind == "tier_change":
            counter, labels = (
                self.tier_changes,
                (*key, Tier(event.old).value, Tier(event.new).value, state),
            )
        elif event.kind == "certified_change":
            if event.direction not in CERTIFIED_DIRECTIONS:
                raise ValueError("label 'direction': not a certified change direction")
            kind = "notice" if event.old == "undetermined" else "page"
            counter, labels = self.certified_changes, (*key, kind, event.direction)
        else:
            raise ValueError("kind must be verdict_flip, tier_change or certified_change")
        if not reportable(window_n):
            return
        with self._lock:
            counter.labels(*labels).inc()
        if event.confirmed and self._explain is not None:
            self._set_sentence((*key, event.kind), _sentence(self._explain(event)))

    def _set_sentence(self, key: tuple[str, str, str, str], sentence: str) -> None:
        """The cell's latest sentence of this kind; the older one's series goes."""
        with self._lock:
            old = self._sentences.get(key)
            if old is not None and old != sentence:
                self.last_event.remove(*key, old)
            self.last_event.labels(*key, sentence).set(1)
            self._sentences[key] = sentence

    def count_drift(self, model: str, metric: str, attribute: str, window_n: int) -> None:
        """One drift detection on the cell's metric stream (small cells not counted)."""
        key = (_ident("model", model), _ident("metric", metric), _ident("attribute", attribute))
        if reportable(window_n):
            with self._lock:
                self.drift_detections.labels(*key).inc()

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

    def count_batch(
        self, source: str, accepted: int, duplicates: int, rejected_by_reason: Mapping[str, int]
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

    def set_dominant_rejections(self, source: str, reasons: Iterable[str]) -> None:
        """The reasons that hold the majority of the source's recent messages now: their
        series go to 1, those that no longer do to 0 (kept, so a rule sees the fall)."""
        source = _ident("source", source)
        with self._lock:
            now = {(source, self._reason(r)) for r in reasons}
            for key in self._dominant - now:
                if key[0] == source:
                    self.rejection_dominant.labels(*key).set(0)
            for key in now:
                self.rejection_dominant.labels(*key).set(1)
            self._dominant = {k for k in self._dominant if k[0] != source} | now

    def count_evaluation(self, model: str, duration_s: float) -> None:
        """One completed evaluation of the model's grid."""
        model = _ident("model", model)
        with self._lock:
            self.evaluations.labels(model).inc()
            self.evaluation_duration.labels(model).observe(float(duration_s))

    def count_old_events(self, model: str, n: int) -> None:
        """``n`` more records arrived older than the window horizon (not windowed)."""
        model = _ident("model", model)
        if n < 0:
            raise ValueError("n must be >= 0")
        with self._lock:
            self.old_events_counter.labels(model).inc(int(n))

    def count_observer_failure(self, n: int = 1) -> None:
        """An item of a committed batch whose metrics update failed."""
        with self._lock:
            self.observer_failures.inc(n)

    # ------------------------------------------------------------------ jobs
    def record_job(
        self, job: str, state: str, duration_s: float | None, at_timestamp: float
    ) -> None:
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

    def remove_model(self, model: str) -> None:
        """Drop a model's counters (its state series go with it from the snapshot)."""
        model = _ident("model", model)
        with self._lock:
            self._sentences = {k: v for k, v in self._sentences.items() if k[0] != model}
            for metric, labels in self._labelled:
                if "model" not in labels:
                    continue
                i = labels.index("model")
                for family in metric.collect():
                    for values in {
                        tuple(s.labels[n] for n in labels) for s in family.samples
                    }:
                        if values[i] == model:
                            metric.remove(*values)

    # ------------------------------------------------------------------ exposition
    def render(self) -> bytes:
        """Text exposition format (version 0.0.4) of this exporter's registry only.

        The service's state is read first, holding none of the exporter's locks (reading
        it takes the pipeline's); only then is the exposition written, under the
        exporter's lock, from that snapshot. A scrape that held the exporter's lock while
        it waited for the pipeline's froze the service when a rebalance's flush reported
        to the exporter under the pipeline's lock (monitor.core.locks).
        """
        snap = self.state_collector.state()
        with self._lock, self.state_collector.given(snap):
            return generate_latest(self.registry)
