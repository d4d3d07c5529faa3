"""Typed configuration: a TOML file on top of the docs/method.md section 9 defaults.

Why a typed model: a governance team edits this file by hand, and a typo in a
threshold or a group code must stop the service at start-up with a message that
names the field, not surface weeks later as a silently wrong verdict.

Example (TOML)::

    [axis1]
    K = 500
    N = 10000

    [[attributes]]
    name = "race"
    groups = { "0" = "Native American", "1" = "Asian/Pacific Islander" }

    [metrics.DI]
    threshold = 0.8
    direction = ">="

    [[intersections]]
    attributes = ["race", "sex"]   # audited as the attribute race_x_sex
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from monitor.config.errors import ConfigError, UserError, config_error
from monitor.config.service import ServiceConfig, as_written
from monitor.config.sources import (
    SECRET_FIELDS,
    EmbeddedConfig,
    KafkaConfig,
    env_vars_set,
    kafka_table_with_env,
)

# The method's own constants and metric rule (monitor.core.method), re-exported for the
# configuration's readers: the core defines them and imports no configuration.
from monitor.core.method import (
    DEFAULT_METRIC_RULES,
    INTERSECTION_CODE_SEP,
    INTERSECTION_LABEL_SEP,
    MIN_GROUP_SUPPORT,
    SMALL_CELL_RECORDS,
    MetricRule,
    intersection_name,
)

#: Default protected attributes and their group codes (Texas-100X style codes).
DEFAULT_ATTRIBUTES: list[dict[str, Any]] = [
    {
        "name": "race",
        "groups": {
            "0": "Native American",
            "1": "Asian/Pacific Islander",
            "2": "Black",
            "3": "White",
            "4": "Other",
        },
    },
    {"name": "sex", "groups": {"0": "Male", "1": "Female"}},
    {"name": "ethnicity", "groups": {"0": "Hispanic", "1": "Not Hispanic"}},
    {
        "name": "age_group",
        "groups": {
            "0": "Pediatric (<18)",
            "1": "Young Adult (18-39)",
            "2": "Middle-Aged (40-64)",
            "3": "Elderly (65+)",
        },
    },
]


#: What a configured group code may look like: it is exported as a label value, so short and
#: printable, but otherwise free ("<50", "70+", "African American" are all real codes).
_CODE_EDGE = r"[^\s\"\\\x00-\x1f\x7f]"
_CODE_INNER = r"[^\"\\\x00-\x1f\x7f]"
GROUP_CODE = re.compile(f"{_CODE_EDGE}(?:{_CODE_INNER}{{0,62}}{_CODE_EDGE})?")

#: What an exported identifier (a model id) may look like: the exporter's label rule
#: (monitor.service.exporter uses this pattern), checked at validation so a model the
#: exporter cannot export never gets in. No spaces, no free text, at most 64 characters.
EXPORTABLE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+/-]{0,63}")

class StartupError(UserError, RuntimeError):
    """A condition that stops the service from starting (not a configuration field), with a
    message safe to print: it names files, never record values."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AttributeConfig(_Strict):
    """A protected attribute: its field name and allowed group codes -> display names."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    groups: dict[str, str]

    @field_validator("groups")
    @classmethod
    def _non_empty(cls, v: dict[str, str]) -> dict[str, str]:
        if len(v) < 2:
            raise ValueError("an attribute needs at least two group codes")
        for code in v:
            if not GROUP_CODE.fullmatch(code):
                raise ValueError(
                    "group codes are 1-64 printable characters without quotes, backslashes "
                    "or leading/trailing spaces (they become Prometheus label values)"
                )
        return v

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(self.groups)


#: The intersections `bench axis1` adds and the README's Diabetes-130 figures use
#: (docs/decisions.md "Intersectional cells"); the built-in default configures none.
DEFAULT_INTERSECTIONS: tuple[tuple[str, ...], ...] = (("race", "sex"), ("race", "age_group"))


def intersection_groups(parts: list[AttributeConfig]) -> dict[str, str]:
    """The groups of an intersection, code -> readable name, in mixed-radix order (the
    first attribute varies slowest), so a group's position is
    ``sum(index_k * stride_k)`` of its parts' positions (monitor.core.tables.grid_groups).

    The one place intersection groups are named; pooled estimates and the "what drives a
    disparity" sentences use the same names.

    >>> race = AttributeConfig(name="race", groups={"2": "Black", "3": "White"})
    >>> sex = AttributeConfig(name="sex", groups={"0": "Male", "1": "Female"})
    >>> intersection_groups([race, sex])["2:1"]
    'Black x Female'
    """
    out: dict[str, str] = {}
    for combo in itertools.product(*(list(a.groups.items()) for a in parts)):
        code = INTERSECTION_CODE_SEP.join(c for c, _ in combo)
        out[code] = INTERSECTION_LABEL_SEP.join(label for _, label in combo)
    return out


class IntersectionConfig(_Strict):
    """``[[intersections]]``: two or three configured attributes whose combinations are the
    groups of one more audited attribute (named ``race_x_sex``, groups "Black x Female")."""

    attributes: tuple[str, ...]

    @field_validator("attributes")
    @classmethod
    def _two_or_three(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not 2 <= len(v) <= 3 or len(set(v)) != len(v):
            raise ValueError("two or three different configured attribute names")
        return v

    @property
    def name(self) -> str:
        return intersection_name(self.attributes)


class Axis1Config(_Strict):
    """docs/method.md section 3 parameters."""

    K: int = Field(500, ge=10, le=100_000)
    N: int = Field(10_000, ge=1)
    tau_vfr: float = Field(0.10, ge=0.0, le=0.5)
    #: at least the small-cell threshold: no rate may rest on fewer than 11 records
    min_group_support: int = Field(MIN_GROUP_SUPPORT, ge=SMALL_CELL_RECORDS)
    score_bins: int = Field(10, ge=2, le=100)
    seed: int = Field(20_261_129, ge=0)
    threads: int = Field(2, ge=1, le=64)


class PoolingConfig(_Strict):
    """Pooled (empirical-Bayes) estimates of intersection cells, beside the raw ones
    (monitor.core.pooling; docs/method.md, "Pooled estimates"). Off by default."""

    enabled: bool = False
    #: ``[[intersections]]`` attributes to pool (by name, "race_x_sex"); empty: every one
    attributes: tuple[str, ...] = ()
    #: a fixed prior strength in records; None: method of moments in every evaluation
    prior_strength: float | None = Field(None, gt=0.0)
    #: which estimate the verdict (VFR, tier, events) rests on; "raw" keeps the method's
    verdict: Literal["raw", "pooled"] = "raw"


class DecisionConfig(_Strict):
    """How a decision is derived when a record carries none: score >= threshold."""

    threshold: float = Field(0.5, ge=0.0, le=1.0)
    #: Optional per-model, per-attribute, per-group thresholds: {"model": {"race": {"2": 0.45}}}
    per_group: dict[str, dict[str, dict[str, float]]] = Field(default_factory=dict)


class WindowConfig(_Strict):
    """Rolling window per model: last `size` records (count) or last `days` (time)."""

    kind: Literal["count", "time"] = "count"
    size: int = Field(10_000, ge=1)
    days: float = Field(30.0, gt=0)
    hop_records: int = Field(1_000, ge=1)
    #: wall-clock re-evaluation for models with new records; 0 disables it (count hops only)
    hop_seconds: float = Field(60.0, ge=0)


class OutcomesConfig(_Strict):
    """Predictions now, outcomes later: how long an outcome may take, and how
    long an outcome that came before its prediction is held. Both are event-time spans
    (the model's latest event time seen), so a replay joins and expires exactly as the
    live run did."""

    #: an outcome known more than this after its prediction's scoring time is dead-lettered
    #: ``late_outcome``; a prediction without an outcome for this long is counted expired
    max_outcome_delay_days: float = Field(30.0, gt=0)
    #: an outcome with no stored prediction is held this long (event time), then
    #: dead-lettered ``orphan_outcome``
    orphan_hold_days: float = Field(1.0, ge=0)
    #: the largest relative shortfall ``1 - min c_g / max c_g`` of an attribute's groups'
    #: outcome coverage at which its label-based cells count as resting on comparable
    #: outcomes; above it their tier reason reads "outcomes incomplete"
    #: (monitor.core.coverage). 0 flags any difference, 1 never flags.
    max_coverage_gap: float = Field(0.10, ge=0.0, le=1.0)


class Axis2Config(_Strict):
    """docs/method.md section 4 parameters."""

    sizes: tuple[int, ...] = (1_000, 2_000, 5_000, 10_000, 25_000, 50_000, 100_000)
    R: int = Field(30, ge=2, le=10_000)
    cv_cutoff: float = Field(0.05, gt=0)
    n_field: int = Field(50_000, ge=1)

    @field_validator("sizes")
    @classmethod
    def _sorted_positive(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or any(x <= 1 for x in v) or list(v) != sorted(set(v)):
            raise ValueError("sizes must be increasing integers > 1")
        return v


class Axis3Config(_Strict):
    """docs/method.md section 5 parameters."""

    folds: int = Field(20, ge=2, le=1_000)
    kappa_cutoff: float = Field(0.40, ge=-1, le=1)


class EquiLenseConfig(_Strict):
    """docs/method.md section 7: group metrics and MPPD similarity."""

    features: list[str] = Field(default_factory=list)
    scaling: Literal["minmax", "none"] = "minmax"
    threshold: float = Field(0.01, gt=0, lt=2)
    min_group_size: int = Field(10, ge=1)
    min_pairs: int = Field(30, ge=1)
    #: attribute -> reference group code (default: the largest group)
    reference: dict[str, str] = Field(default_factory=dict)
    #: MPPD's cost bound (docs/decisions.md, "EquiLense at fleet scale"): a model whose
    #: cohort has more records, or whose matched pairs a pilot puts above sample_pairs,
    #: gets MPPD on a seeded stratified sample (label x groups) of at most this many
    #: records, each figure with its standard error; 0: always all records, at any cost
    sample_records: int = Field(20_000, ge=0)
    #: at most this many matched pairs in the sample (pairs grow as records^2)
    sample_pairs: int = Field(1_500_000, ge=1_000)
    #: records of each stratum at least (a smaller stratum whole)
    sample_stratum_floor: int = Field(20, ge=1)
    #: the seed of the sample (a keyed hash of record ids: the same records each run)
    sample_seed: int = Field(0, ge=0)


class LabelRule(_Strict):
    """Derive the 0/1 label from a numeric column: label = column > greater_than."""

    column: str
    greater_than: float


class InputConfig(_Strict):
    """How an audit file's columns and codes map onto the scored-discharge schema.

    Lets a user audit e.g. Texas-100X (THCIC_ID, SEX_CODE, RACE, ETHNICITY,
    PAT_AGE) without editing code: ``columns`` maps schema field -> file column,
    ``codes`` maps attribute -> {file code: configured group code}.
    """

    columns: dict[str, str] = Field(default_factory=dict)
    codes: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: wide files: model_id -> score column (one row per patient, several models)
    score_columns: dict[str, str] = Field(default_factory=dict)
    label_from: LabelRule | None = None
    #: model id for a file with one score column and no model_id column
    model_id: str = "model"
    #: false (default): a file with any invalid row is refused, naming the faults; true:
    #: the valid rows are audited and the rest counted by reason in the output
    #: (``audit --skip-invalid-rows`` sets it for one run)
    skip_invalid_rows: bool = False


class InterventionConfig(_Strict):
    """The offline four-baseline intervention comparison (`vfr-monitor intervene`;
    docs/method.md section 8).

    Thresholds are searched on a grid of ``threshold_step`` around ``decision.threshold``;
    ``lambda_`` tempers the Kamiran-Calders weights: w = 1 + lambda (w_KC - 1), clipped.
    """

    #: train / validation / audit shares of the records (grouped by hospital when ids exist)
    split: tuple[float, float, float] = (0.70, 0.15, 0.15)
    #: attributes whose intersection defines the reweighing cells (B2)
    intersection: tuple[str, ...] = ("race", "age_group", "sex")
    lambda_: float = Field(1.0, ge=0.0, alias="lambda")
    lambda_sweep: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 5.0, 10.0)
    weight_clip: tuple[float, float] = (0.1, 10.0)
    di_target: float = Field(0.80, gt=0.0, le=1.0)
    #: B3/B4 aim at di_target + margin on validation (0: the method's rule exactly)
    di_search_margin: float = Field(0.0, ge=0.0, lt=0.5)
    threshold_step: float = Field(0.01, gt=0.0, le=0.1)
    #: greedy steps of the B3 search and of the B4 refinement (each step moves one threshold)
    search_max_steps: int = Field(2_000, ge=1)
    refine_max_steps: int = Field(300, ge=0)
    #: model features of a cohort file (empty: the synthetic cohort's features when present)
    features: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("split")
    @classmethod
    def _shares(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        if any(x <= 0 for x in v) or abs(sum(v) - 1.0) > 1e-9:
            raise ValueError("three positive shares (train, validation, audit) summing to 1")
        return v

    @field_validator("weight_clip")
    @classmethod
    def _clip(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 < v[0] <= 1 <= v[1]:
            raise ValueError("[low, high] with 0 < low <= 1 <= high")
        return v

    @field_validator("lambda_sweep")
    @classmethod
    def _sweep(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if any(x < 0 for x in v):
            raise ValueError("lambda values must be >= 0")
        return v


class ModelEntry(_Strict):
    """A monitored model of the registry (``[[models]]``): only these ids get windows,
    trackers and series unless ``[service.intake] unknown_models = "admit"``."""

    id: str
    name: str | None = None
    owner: str | None = None
    version: str | None = None

    @field_validator("id")
    @classmethod
    def _exportable(cls, v: str) -> str:
        if not EXPORTABLE_ID.fullmatch(v):
            raise ValueError(
                "a model id is 1-64 characters: letters, digits and _ . : + / - "
                "(it becomes a Prometheus label value), starting with a letter or digit"
            )
        return v


class AlertsConfig(_Strict):
    """Pages (docs/method.md section 11): the expected number of false pages a model may
    cause in a year without change, from which every certified cell's test level follows
    (``monitor.core.certify.threshold_for_budget``). Default 0.1: one false page per model
    in ten years (docs/decisions.md, "Certified pages")."""

    false_pages_per_year: float = Field(0.1, gt=0.0, le=100.0)


class MonitorConfig(_Strict):
    """The whole configuration, with docs/method.md section 9 defaults."""

    attributes: list[AttributeConfig] = Field(
        default_factory=lambda: [AttributeConfig(**a) for a in DEFAULT_ATTRIBUTES]
    )
    metrics: list[MetricRule] = Field(
        default_factory=lambda: [MetricRule(name=k, **v) for k, v in DEFAULT_METRIC_RULES.items()]
    )
    axis1: Axis1Config = Field(default_factory=Axis1Config)
    pooling: PoolingConfig = Field(default_factory=PoolingConfig)
    decision: DecisionConfig = Field(default_factory=DecisionConfig)
    #: the model registry: monitored model ids (see ``[service.intake] unknown_models``)
    models: list[ModelEntry] = Field(default_factory=list)
    window: WindowConfig = Field(default_factory=WindowConfig)
    outcomes: OutcomesConfig = Field(default_factory=OutcomesConfig)
    axis2: Axis2Config = Field(default_factory=Axis2Config)
    axis3: Axis3Config = Field(default_factory=Axis3Config)
    equilense: EquiLenseConfig = Field(default_factory=EquiLenseConfig)
    input: InputConfig = Field(default_factory=InputConfig)
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    interventions: InterventionConfig = Field(default_factory=InterventionConfig)
    #: the record sources: a Kafka consumer group (None: no Kafka, the embedded replay);
    #: [kafka] is validated with its environment overrides at load (config_from_mapping)
    kafka: KafkaConfig | None = None
    embedded: EmbeddedConfig = Field(default_factory=EmbeddedConfig)
    confirm_windows: int = Field(2, ge=1)
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    #: ``[[intersections]]``: audited as attributes of their own (see :attr:`grid_attributes`)
    intersections: list[IntersectionConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> MonitorConfig:
        names = [a.name for a in self.attributes]
        if len(set(names)) != len(names):
            raise ValueError(f"attributes: attribute names must be unique, got {names}")
        if not self.metrics:
            raise ValueError("metrics: at least one metric is required")
        for attr, mapping in self.input.codes.items():
            if attr not in names:
                raise ValueError(f"input.codes.{attr}: unknown attribute; known: {names}")
            bad = sorted(set(mapping.values()) - set(self.attribute(attr).codes))
            if bad:
                raise ValueError(
                    f"input.codes.{attr}: maps to codes not configured for {attr!r}: {bad}"
                )
        horizon = self.horizon_days
        if self.service.retention.discharge_days < horizon:
            raise ValueError(
                "service.retention.discharge_days: must cover the window and the audit cohort "
                f"({horizon} days), or windows could not be rebuilt after a restart"
            )
        if self.service.retention.discharge_days < self.outcomes.max_outcome_delay_days:
            raise ValueError(
                "service.retention.discharge_days: must cover outcomes.max_outcome_delay_days, "
                "or a prediction could be deleted while its outcome may still arrive"
            )
        unknown = sorted(set(self.interventions.intersection) - set(names))
        if unknown and "intersection" in self.interventions.model_fields_set:
            raise ValueError(f"interventions.intersection: unknown attributes {unknown}")
        for attr, code in self.equilense.reference.items():
            if attr not in names or code not in self.attribute(attr).codes:
                raise ValueError(f"equilense.reference.{attr}: unknown attribute or group code")
        self._check_models(names)
        self._check_intersections(names)
        self._check_pooling()
        return self

    def _check_pooling(self) -> None:
        """Pooling needs each combined group's parents: only ``[[intersections]]`` pool, and
        enabling it without one would do nothing, silently."""
        inters = [i.name for i in self.intersections]
        unknown = sorted(set(self.pooling.attributes) - set(inters))
        if unknown:
            raise ValueError(
                f"pooling.attributes: {unknown} are not [[intersections]] attributes; pooling "
                f"applies to intersections only (configured: {inters or 'none'})"
            )
        if self.pooling.enabled and not inters:
            raise ValueError(
                "pooling.enabled: no [[intersections]] are configured, so nothing would pool; "
                'add one (e.g. [[intersections]] attributes = ["race", "sex"]) or remove '
                "[pooling]"
            )

    def _check_intersections(self, names: list[str]) -> None:
        """Each intersection names configured attributes, once, and its name is new."""
        seen: set[str] = set()
        for i, inter in enumerate(self.intersections):
            unknown = sorted(set(inter.attributes) - set(names))
            if unknown:
                raise ValueError(
                    f"intersections.{i}.attributes: unknown attributes {unknown}; known: {names}"
                )
            if inter.name in names or inter.name in seen:
                raise ValueError(
                    f"intersections.{i}.attributes: {inter.name!r} is configured twice or "
                    "clashes with an attribute name"
                )
            seen.add(inter.name)
            parts = [self.attribute(a) for a in inter.attributes]
            if len(intersection_groups(parts)) != math.prod(len(a.groups) for a in parts):
                raise ValueError(
                    f"intersections.{i}.attributes: group codes containing "
                    f"{INTERSECTION_CODE_SEP!r} make two combinations share a code"
                )

    @property
    def grid_attributes(self) -> list[AttributeConfig]:
        """The audited attributes: the configured ones, then one per ``[[intersections]]``
        entry whose groups are the combinations (:func:`intersection_groups`). Records carry
        only :attr:`attributes`; an intersection's group is derived from them
        (monitor.core.tables.grid_groups), so it is never input nor stored."""
        derived = [
            # built without validation: joined codes may exceed the 64 characters of one
            # input code (the exporter leaves such a code out of its labels)
            AttributeConfig.model_construct(
                name=inter.name,
                groups=intersection_groups([self.attribute(a) for a in inter.attributes]),
            )
            for inter in self.intersections
        ]
        return [*self.attributes, *derived]

    def with_intersections(self, intersections: list[IntersectionConfig]) -> MonitorConfig:
        """This config with other ``[[intersections]]``, validated again (model_copy would
        not check them)."""
        data = self.model_dump(by_alias=True, exclude={"intersections"})
        return MonitorConfig.model_validate(
            {**data, "intersections": [i.model_dump() for i in intersections]}
        )

    def intersection_parts(self, name: str) -> tuple[str, ...] | None:
        """The attributes an audited attribute intersects (None: a configured attribute)."""
        for inter in self.intersections:
            if inter.name == name:
                return inter.attributes
        return None

    def _check_models(self, names: list[str]) -> None:
        """The registry and every field that names a model, attribute or group code."""
        ids = [m.id for m in self.models]
        if len(set(ids)) != len(ids):
            raise ValueError(f"models: model ids must be unique, got {ids}")
        if len(ids) > self.service.intake.max_models:
            raise ValueError(
                f"service.intake.max_models: {self.service.intake.max_models} is fewer than the "
                f"{len(ids)} registered models"
            )
        for model, by_attr in self.decision.per_group.items():
            if ids and model not in ids:
                raise ValueError(
                    f"decision.per_group.{model}: not a registered model ([[models]] id)"
                )
            for attr, by_code in by_attr.items():
                if attr not in names:
                    raise ValueError(
                        f"decision.per_group.{model}.{attr}: unknown attribute; known: {names}"
                    )
                bad = sorted(set(by_code) - set(self.attribute(attr).codes))
                if bad:
                    raise ValueError(
                        f"decision.per_group.{model}.{attr}: group codes not configured for "
                        f"{attr!r}: {bad}"
                    )
                for code, t in by_code.items():
                    if not 0.0 <= t <= 1.0:
                        raise ValueError(
                            f"decision.per_group.{model}.{attr}.{code}: a threshold in [0, 1]"
                        )
        for model in self.input.score_columns:
            if not EXPORTABLE_ID.fullmatch(model):
                raise ValueError(f"input.score_columns.{model}: not a valid model id")
        if not EXPORTABLE_ID.fullmatch(self.input.model_id):
            raise ValueError("input.model_id: not a valid model id")

    @property
    def horizon_days(self) -> float:
        """How far back the service needs a model's records to rebuild its state: the audit
        cohort of the scheduled axes, or a time window if longer (a count window has no
        time horizon of its own)."""
        window_days = self.window.days if self.window.kind == "time" else 0.0
        return max(self.service.axes.cohort_days, window_days)

    def attribute(self, name: str) -> AttributeConfig:
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(name)

    def decision_id(self) -> str:
        """A short id of the decision rule in force ([decision]: threshold and per-group
        thresholds), recorded with every event so a board can tell which decisions (say
        an intervention's B4 thresholds) a verdict was about.

        >>> MonitorConfig().decision_id() == MonitorConfig().decision_id()
        True
        """
        canonical = json.dumps(self.decision.model_dump(mode="json"), sort_keys=True)
        return "decision-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _metrics_from_toml(raw: Any) -> Any:
    """Accept ``[metrics.DI] threshold=..`` tables as well as a list of rules."""
    if isinstance(raw, Mapping):
        out = []
        for name, rule in raw.items():
            base = dict(DEFAULT_METRIC_RULES.get(name, {}))
            if isinstance(rule, Mapping):
                base.update(rule)
            out.append({"name": name, **base})
        return out
    return raw


def config_from_mapping(
    raw: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> MonitorConfig:
    """Build a config from parsed TOML/JSON, raising ConfigError naming the field.

    ``environ`` (default: the process environment) supplies the ``VFR_KAFKA_*``
    overrides of ``[kafka]`` (:mod:`monitor.config.sources`): a deployment injects its
    broker address and secrets that way, so they are part of what is validated.
    """
    env = os.environ if environ is None else environ
    data = dict(raw)
    if "metrics" in data:
        data["metrics"] = _metrics_from_toml(data["metrics"])
    kafka = kafka_table_with_env(data.pop("kafka", None), env)
    if kafka is not None:
        data["kafka"] = kafka
    try:
        return MonitorConfig(**data)
    except ValidationError as exc:
        error = config_error(exc, data, "", SECRET_FIELDS, env_vars_set(env))
        raise as_written(error, data.get("service")) from None


def load_config(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> MonitorConfig:
    """Load a TOML config file, or the defaults when path is None; either way with the
    ``VFR_KAFKA_*`` environment overrides (``environ``, default: the process environment).

    Why the environment applies without a file too: ``VFR_KAFKA_BOOTSTRAP=host:9092
    vfr-monitor run`` is the documented way to point the service at a broker (a
    container is configured by its environment), and it must not need a TOML file that
    says nothing else.
    """
    if path is None:
        return config_from_mapping({}, environ)
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("<file>", f"config file not found: {p}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("<file>", f"not valid TOML: {exc}") from None
    return config_from_mapping(raw, environ)
