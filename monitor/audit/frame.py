"""Audit a pandas DataFrame from Python: the notebook path to `vfr-monitor audit`.

Why a second entry point: a data scientist holds scored predictions in a DataFrame, with
attributes as whatever strings the data carries ("African American", "Female",
"70 and over"). Writing them to a file and a TOML code map first is friction the CLI
needs (a governance team edits that file) and a notebook does not. So the keywords
build the same :class:`~monitor.config.MonitorConfig` the CLI reads from TOML (through
the same :func:`~monitor.config.config_from_mapping`), and the frame goes through the
same engine (:func:`monitor.audit.run.run_audit`): the same setup gives the same cells,
whichever door it came through, and :attr:`FrameAudit.toml` is the CLI's config for it.

Example (a toy frame; groups of fewer than 20 records stay out of every rate, so the
example is large enough to have two)::

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({
    ...     "y": rng.integers(0, 2, 400),
    ...     "p": rng.random(400),
    ...     "sex": rng.choice(["Female", "Male"], 400),
    ... })
    >>> res = audit_frame(df, label="y", score="p", attributes=["sex"], metrics=["DI", "SPD"])
    >>> res.cells[["metric", "attribute", "verdict"]].to_string(index=False)
    'metric attribute verdict\\n    DI       sex    pass\\n   SPD       sex    pass'
    >>> res.config.attribute("sex").groups
    {'Female': 'Female', 'Male': 'Male'}
"""

from __future__ import annotations

import difflib
import html
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import tomli_w

from monitor.audit.input_mapping import AuditInputError
from monitor.audit.run import AuditReport, Progress, run_audit
from monitor.config import (
    DEFAULT_METRIC_RULES,
    EXPORTABLE_ID,
    GROUP_CODE,
    INTERSECTION_CODE_SEP,
    MonitorConfig,
    config_from_mapping,
    load_config,
)
from monitor.config.errors import ConfigError
from monitor.core.method import KNOWN_METRICS
from monitor.publish.cells import audit_cell_value
from monitor.publish.encode import WITHHELD_TEXT
from monitor.publish.rule import SMALL_CELL
from monitor.publish.shown import Shown

#: Fields of the record schema an attribute may not be named after (the engine's frame
#: holds them beside the attributes).
SCHEMA_FIELDS = frozenset(
    {"label", "score", "decision", "hospital_id", "model_id", "record_id", "event_time",
     "features", "source_row", "position"}
)  # fmt: skip
#: An attribute with more distinct values than this is almost surely an id or a number.
MAX_GROUPS = 100
#: Metrics that need a score (calibration): left out when only decisions are given.
SCORE_METRICS = ("CAL", "CAL_GAP")
#: Columns of :attr:`FrameAudit.cells`, in order.
TIDY_COLUMNS = (
    "model", "metric", "attribute", "value", "threshold", "direction", "verdict",
    "dominant_verdict", "vfr", "n_star", "kappa", "tier", "partial", "n", "groups_left_out",
    "note", "withheld",
)  # fmt: skip


def _missing_column(df: pd.DataFrame, column: str, role: str) -> AuditInputError:
    """"no column 'Race' ... did you mean 'race'?": column names are not record values."""
    names = [str(c) for c in df.columns]
    close = [c for c in names if c.lower() == str(column).lower()]
    close += [c for c in difflib.get_close_matches(str(column), names, n=3) if c not in close]
    hint = f"; did you mean {' or '.join(repr(c) for c in close[:3])}?" if close else ""
    shown = ", ".join(repr(c) for c in names[:12]) + (" ..." if len(names) > 12 else "")
    return AuditInputError(
        f"{role}: the DataFrame has no column {column!r}{hint} (its columns: {shown})"
    )


def _need(df: pd.DataFrame, column: Any, role: str) -> str:
    if not isinstance(column, str):
        raise AuditInputError(f"{role}: give a column name (a string), got {type(column).__name__}")
    if column not in df.columns:
        raise _missing_column(df, column, role)
    return column


def _binary(df: pd.DataFrame, column: str, role: str) -> pd.Series:
    """A 0/1 column as int64 (True/False accepted); the message says how to make one."""
    col = df[column]
    missing = int(col.isna().sum())
    if missing:
        raise AuditInputError(
            f"{role} column {column!r}: {missing} row(s) have no value; drop them first "
            f"(df.dropna(subset=[{column!r}])) or fill them"
        )
    if pd.api.types.is_bool_dtype(col):
        return col.astype(np.int64)
    how = (
        f"derive a 0/1 column, e.g. df[{column!r}] = (df[{column!r}] == <positive value>)"
        ".astype(int), or for a number df[... ] = (df[...] > cut).astype(int)"
    )
    if not pd.api.types.is_numeric_dtype(col):
        raise AuditInputError(
            f"{role} column {column!r} holds {col.dtype} values, not 0/1; {how}"
        )
    values = col.to_numpy(dtype=np.float64)
    ok = (values == 0) | (values == 1)
    if not ok.all():
        distinct = int(col.nunique())
        raise AuditInputError(
            f"{role} column {column!r} is not binary: {int((~ok).sum())} row(s) are neither 0 "
            f"nor 1 ({distinct} distinct values in the column); {how}"
        )
    return pd.Series(values.astype(np.int64), index=col.index)


def _score(df: pd.DataFrame, column: str, role: str) -> pd.Series:
    """A probability column in [0, 1]; a likely cause is named when it is not."""
    col = df[column]
    if not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        raise AuditInputError(
            f"{role} column {column!r} holds {col.dtype} values; a score is a probability "
            f"in [0, 1] (pd.to_numeric(df[{column!r}]) if it is numbers stored as text)"
        )
    values = col.to_numpy(dtype=np.float64)
    missing = int(np.isnan(values).sum())
    if missing:
        raise AuditInputError(
            f"{role} column {column!r}: {missing} row(s) have no score; drop them first "
            f"(df.dropna(subset=[{column!r}])): the audit needs every row scored"
        )
    bad = ~np.isfinite(values) | (values < 0) | (values > 1)
    if bad.any():
        finite = values[np.isfinite(values)]
        if finite.size and finite.min() >= 0 and finite.max() <= 100:
            cause = f"percentages? divide by 100: df[{column!r}] / 100"
        elif finite.size and finite.min() < 0:
            cause = f"log-odds? apply scipy.special.expit(df[{column!r}])"
        else:
            cause = "rescale it to a probability"
        raise AuditInputError(
            f"{role} column {column!r}: {int(bad.sum())} row(s) outside [0, 1] (a score is "
            f"a probability in [0, 1]); {cause}"
        )
    return col.astype(np.float64)


def _attribute_name(column: str) -> str:
    """The config's name of an attribute column (``^[a-z][a-z0-9_]*$``): "Race" -> "race",
    "age group" -> "age_group", "2nd lang" -> "a_2nd_lang"."""
    name = re.sub(r"[^a-z0-9_]+", "_", str(column).strip().lower()).strip("_")
    if not name or not name[0].isalpha():
        name = f"a_{name}"
    return name


def _text(x: object) -> str:
    """A value as the engine reads a code (monitor.audit.input_mapping): 3 and 3.0 are '3',
    True is 'True' (as a CSV of the frame reads back)."""
    if isinstance(x, bool | np.bool_):
        return str(bool(x))
    if isinstance(x, float | np.floating) and float(x).is_integer():
        return str(int(x))
    if isinstance(x, np.integer):
        return str(int(x))
    return str(x)


def _as_text(col: pd.Series) -> pd.Series:
    """:func:`_text` of every value, computed once per distinct value."""
    texts = {v: _text(v) for v in col.unique().tolist()}
    return col.map(texts).astype(object)


def _groups(col: pd.Series, column: str) -> tuple[dict[str, str], dict[str, str]]:
    """(groups code -> name, file text -> code) of an attribute column.

    The names are the column's own strings. The codes are the same strings where every
    one is a valid group code (printable, no quote or backslash, at most 64 characters,
    no ':' which joins intersection codes); otherwise "0", "1", ... in the column's
    order (a categorical's categories, else sorted), with the strings mapped onto them
    as ``[input.codes]`` does in a TOML config.
    """
    missing = int(col.isna().sum())
    if missing:
        raise AuditInputError(
            f"attribute column {column!r}: {missing} row(s) have no value; name them, e.g. "
            f"df[{column!r}] = df[{column!r}].astype(object).fillna('Unknown'), or drop them"
        )
    if isinstance(col.dtype, pd.CategoricalDtype):
        present = set(col.unique().tolist())
        values = [c for c in col.cat.categories if c in present]
    elif pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        values = sorted(col.unique().tolist())  # 2 before 10
    else:
        values = sorted(col.unique().tolist(), key=_text)
    texts = [_text(v) for v in values]
    if len(set(texts)) != len(texts):
        raise AuditInputError(
            f"attribute column {column!r}: two different values read as the same text "
            f"(e.g. 1 and '1'); make the column one type: df[{column!r}].astype(str)"
        )
    if len(texts) < 2:
        raise AuditInputError(
            f"attribute column {column!r} has one group only; an attribute compares at least "
            "two groups: leave it out of attributes=[...]"
        )
    if len(texts) > MAX_GROUPS:
        raise AuditInputError(
            f"attribute column {column!r} has {len(texts)} distinct values (at most "
            f"{MAX_GROUPS}): is it an id or a number? Bin it first, e.g. pd.cut(...)"
        )
    if all(GROUP_CODE.fullmatch(t) and INTERSECTION_CODE_SEP not in t for t in texts):
        return {t: t for t in texts}, {}
    codes = {t: str(i) for i, t in enumerate(texts)}
    return {codes[t]: t for t in texts}, codes


def _metric_rules(
    metrics: Sequence[str] | Mapping[str, Any] | None, has_score: bool
) -> list[dict[str, Any]] | None:
    """``metrics`` as the config's list of rules (None: the config's own)."""
    if metrics is None:
        if has_score:
            return None
        names: list[str] = [m for m in DEFAULT_METRIC_RULES if m not in SCORE_METRICS]
        return [{"name": m, **DEFAULT_METRIC_RULES[m]} for m in names]
    items = metrics.items() if isinstance(metrics, Mapping) else ((m, None) for m in metrics)
    rules = []
    for name, rule in items:
        if name not in KNOWN_METRICS:
            raise AuditInputError(
                f"metrics: unknown metric {name!r}; known: {', '.join(KNOWN_METRICS)}"
            )
        if name in SCORE_METRICS and not has_score:
            raise AuditInputError(f"metrics: {name} needs scores; give score='<column>'")
        base = dict(DEFAULT_METRIC_RULES.get(name, {}))
        if isinstance(rule, Mapping):
            base.update(rule)
        elif rule is not None:
            base["threshold"] = float(rule)
        if not {"threshold", "direction"} <= set(base):
            raise AuditInputError(
                f"metrics: {name} has no default rule; give one, e.g. "
                f"metrics={{{name!r}: {{'threshold': 0.05, 'direction': '<='}}}}"
            )
        rules.append({"name": name, **base})
    if not rules:
        raise AuditInputError("metrics: give at least one metric, e.g. metrics=['DI', 'EOPP']")
    return rules


@dataclass(frozen=True)
class FrameSetup:
    """What the keywords of :func:`audit_frame` make: the config as a TOML mapping (the
    CLI's file for the same audit), the validated config, and the frame the engine reads
    (only the columns the keywords name, labels and decisions as 0/1)."""

    mapping: dict[str, Any]
    config: MonitorConfig
    frame: pd.DataFrame
    #: attribute name in the config -> the DataFrame's column
    columns: dict[str, str]


def frame_setup(
    df: pd.DataFrame,
    *,
    label: str,
    score: str | Mapping[str, str] | None = None,
    decision: str | None = None,
    threshold: float = 0.5,
    attributes: Sequence[str],
    hospital: str | None = None,
    model: str = "model",
    model_column: str | None = None,
    metrics: Sequence[str] | Mapping[str, Any] | None = None,
    intersections: Sequence[Sequence[str]] = (),
    features: Sequence[str] = (),
    config: MonitorConfig | str | Path | None = None,
) -> FrameSetup:
    """Check the frame against the keywords and build the config (see :func:`audit_frame`).

    >>> df = pd.DataFrame({"y": [0, 1] * 20, "p": [0.2, 0.9] * 20, "Race": ["A", "B"] * 20})
    >>> s = frame_setup(df, label="y", score="p", attributes=["Race"])
    >>> s.mapping["input"]["columns"]
    {'label': 'y', 'race': 'Race', 'score': 'p'}
    >>> try:
    ...     frame_setup(df, label="y", score="P", attributes=["Race"])
    ... except AuditInputError as exc:
    ...     print(exc)
    score: the DataFrame has no column 'P'; did you mean 'p'? (its columns: 'y', 'p', 'Race')
    """
    if not isinstance(df, pd.DataFrame):
        raise AuditInputError(f"audit_frame takes a pandas DataFrame, got {type(df).__name__}")
    if df.empty:
        raise AuditInputError("the DataFrame has no rows: nothing to audit")
    if isinstance(attributes, str):
        attributes = [attributes]
    if not attributes:
        raise AuditInputError("attributes: name at least one column, e.g. attributes=['race']")
    if score is None and decision is None:
        raise AuditInputError("give score='<column of probabilities>' or decision='<0/1 column>'")
    if isinstance(score, Mapping) and (decision is not None or model_column is not None):
        raise AuditInputError(
            "score={model: column} (one score column per model) goes without decision= "
            "and model_column="
        )
    base = config if isinstance(config, MonitorConfig) else load_config(config)
    data: dict[str, Any] = base.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data.pop("kafka", None)  # a source: no part of an audit (and applied from the env)
    frame = pd.DataFrame(index=df.index)
    columns: dict[str, str] = {}
    inp: dict[str, Any] = {"columns": {}, "codes": {}}

    _need(df, label, "label")
    frame[label] = _binary(df, label, "label")
    inp["columns"]["label"] = label
    attr_columns: dict[str, str] = {}
    attrs = []
    for column in attributes:
        _need(df, column, "attributes")
        name = _attribute_name(column)
        if name in SCHEMA_FIELDS or name in attr_columns:
            raise AuditInputError(
                f"attribute column {column!r}: its name {name!r} is taken (a schema field or "
                "another attribute); rename the column, e.g. df.rename(columns=...)"
            )
        groups, codes = _groups(df[column], column)
        attrs.append({"name": name, "groups": groups})
        if codes:
            inp["codes"][name] = codes
        if column != name:
            inp["columns"][name] = column
        frame[column] = _as_text(df[column])
        attr_columns[name] = column
    columns.update(attr_columns)

    if isinstance(score, Mapping):
        inp["score_columns"] = {}
        for model_id, column in score.items():
            _check_model_id(model_id)
            _need(df, column, f"score of {model_id}")
            frame[column] = _score(df, column, "score")
            inp["score_columns"][model_id] = column
    elif score is not None:
        _need(df, score, "score")
        frame[score] = _score(df, score, "score")
        inp["columns"]["score"] = score
    if decision is not None:
        _need(df, decision, "decision")
        frame[decision] = _binary(df, decision, "decision")
        inp["columns"]["decision"] = decision
        if score is None:  # the decision stands in for the score (no calibration metric)
            inp["columns"]["score"] = decision
    if hospital is not None:
        _need(df, hospital, "hospital")
        if int(df[hospital].isna().sum()):
            raise AuditInputError(
                f"hospital column {hospital!r}: {int(df[hospital].isna().sum())} row(s) have "
                "no hospital; drop them or leave hospital= out (Axis 3 then not applicable)"
            )
        frame[hospital] = _as_text(df[hospital])
        inp["columns"]["hospital_id"] = hospital
    if model_column is not None:
        _need(df, model_column, "model_column")
        frame[model_column] = _as_text(df[model_column])
        inp["columns"]["model_id"] = model_column
    elif not isinstance(score, Mapping):
        _check_model_id(model)
        inp["model_id"] = model
    for f in features:
        frame[_need(df, f, "features")] = df[f]
    inp["columns"] = dict(sorted(inp["columns"].items()))
    if not inp["codes"]:
        del inp["codes"]
    data["attributes"] = attrs
    data["input"] = inp
    data["decision"] = {**data.get("decision", {}), "threshold": float(threshold)}
    rules = _metric_rules(metrics, has_score=score is not None)
    if rules is not None:
        data["metrics"] = rules
    if intersections:
        data["intersections"] = [
            {"attributes": [_attribute_name(_need(df, c, "intersections")) for c in parts]}
            for parts in intersections
        ]
    if features:
        data["equilense"] = {**data.get("equilense", {}), "features": list(features)}
    try:
        cfg = config_from_mapping(data)
    except ConfigError as exc:
        raise AuditInputError(f"the audit's configuration: {exc}") from None
    return FrameSetup(mapping=data, config=cfg, frame=frame, columns=columns)


def _check_model_id(model_id: str) -> None:
    if not EXPORTABLE_ID.fullmatch(str(model_id)):
        raise AuditInputError(
            f"model id {model_id!r}: letters, digits and _.:+/- only, at most 64 characters, "
            "e.g. model='los-xgb'"
        )


def audit_frame(
    df: pd.DataFrame,
    *,
    label: str,
    score: str | Mapping[str, str] | None = None,
    decision: str | None = None,
    threshold: float = 0.5,
    attributes: Sequence[str],
    hospital: str | None = None,
    model: str = "model",
    model_column: str | None = None,
    metrics: Sequence[str] | Mapping[str, Any] | None = None,
    intersections: Sequence[Sequence[str]] = (),
    features: Sequence[str] = (),
    config: MonitorConfig | str | Path | None = None,
    progress: bool = False,
) -> FrameAudit:
    """Audit a DataFrame of scored predictions: every (model, metric, attribute) cell gets
    its value and verdict, VFR (Axis 1), N* (Axis 2), hospital kappa (Axis 3) and tier,
    as ``vfr-monitor audit`` computes them.

    Args:
        df: one row per record (and model, with ``model_column``).
        label: column of outcomes, 0/1 or True/False.
        score: column of probabilities in [0, 1]; the decision is score >= ``threshold``.
            Or ``{model_id: column}`` for one score column per model.
        decision: column of 0/1 decisions, when the model's decision is not score >=
            threshold. Alone (no score) the calibration metrics are left out.
        attributes: columns of groups: any strings, categories or numbers. Names are kept;
            codes are derived (see :func:`frame_setup`).
        hospital: column of hospital or site ids (Axis 3); without it Axis 3 is not
            applicable and tiers are partial.
        model: the model id of a frame with one model; ``model_column``: a column of ids.
        metrics: names (``["DI", "EOPP"]``) or ``{name: threshold}``, ``{name: {threshold,
            direction}}``; default: the config's (docs/method.md section 2).
        intersections: e.g. ``[("race", "sex")]``, audited as one more attribute.
        features: numeric columns for EquiLense's MPPD similarity.
        config: a MonitorConfig or TOML path for everything else (K, seeds, N* sizes);
            the keywords replace its attributes, input mapping, metrics and threshold.
        progress: print the engine's progress lines to stderr.

    Only the columns named here are read. Groups with fewer than
    ``axis1.min_group_support`` (20) records stay out of every rate; a model with fewer
    than 11 records has every figure withheld (``<11``), as the CLI does.

    >>> rng = np.random.default_rng(1)
    >>> df = pd.DataFrame({
    ...     "readmitted": rng.random(600) < 0.3,
    ...     "p": rng.random(600),
    ...     "age band": rng.choice(["under 50", "50 to 69", "70 and over"], 600),
    ... })
    >>> res = audit_frame(df, label="readmitted", score="p", attributes=["age band"],
    ...                   metrics={"DI": 0.9, "EOPP": 0.1}, model="readmit-lr")
    >>> res.tiers.shape, list(res.tiers.columns)
    ((2, 1), ['age band'])
    >>> sorted(res.config.attribute("age_band").groups.values())
    ['50 to 69', '70 and over', 'under 50']
    >>> import tomllib  # res.toml: this audit's config for `vfr-monitor audit --config`
    >>> tomllib.loads(res.toml)["input"]["columns"]
    {'age_band': 'age band', 'label': 'readmitted', 'score': 'p'}
    """
    setup = frame_setup(
        df, label=label, score=score, decision=decision, threshold=threshold,
        attributes=attributes, hospital=hospital, model=model, model_column=model_column,
        metrics=metrics, intersections=intersections, features=features, config=config,
    )  # fmt: skip
    report = run_audit(setup.frame, setup.config, Progress(enabled=progress))
    sizes = _group_sizes(setup)
    return FrameAudit(
        config=setup.config,
        audit=report,
        cells=tidy_cells(report, setup.config, setup.columns, sizes),
        toml=tomli_w.dumps(setup.mapping),
    )


def _group_sizes(setup: FrameSetup) -> dict[tuple[str, str], dict[str, int]]:
    """Records per (model, attribute) and group code: which left-out groups may be named
    (a group seen in fewer than 11 records is counted, not named)."""
    cfg, frame = setup.config, setup.frame
    codes = pd.DataFrame(index=frame.index)
    for name, column in setup.columns.items():
        mapping = cfg.input.codes.get(name)  # when given, it maps every value
        codes[name] = frame[column].map(mapping) if mapping else frame[column]
    if cfg.input.score_columns:
        models = {m: np.ones(len(frame), bool) for m in cfg.input.score_columns}
    elif "model_id" in cfg.input.columns:
        ids = frame[cfg.input.columns["model_id"]]
        models = {m: (ids == m).to_numpy() for m in ids.unique()}
    else:
        models = {cfg.input.model_id: np.ones(len(frame), bool)}
    out: dict[tuple[str, str], dict[str, int]] = {}
    for attr in cfg.grid_attributes:
        parts = list(cfg.intersection_parts(attr.name) or (attr.name,))
        for m, mask in models.items():
            counts = codes.loc[mask, parts].value_counts()  # keys: tuples of the parts' codes
            out[(m, attr.name)] = {
                INTERSECTION_CODE_SEP.join(map(str, k)): int(n) for k, n in counts.items()
            }
    return out


def _named_groups(
    codes: str, names: Mapping[str, str], sizes: Mapping[str, int] | None
) -> str:
    """Space-joined group codes as names; groups of fewer than 11 records as a count."""
    shown, small = [], 0
    for code in str(codes or "").split():
        if sizes is not None and sizes.get(code, 0) < SMALL_CELL:
            small += 1
        else:
            shown.append(names.get(code, code))
    if small:
        shown.append(f"{small} group(s) under {SMALL_CELL} records")
    return "; ".join(shown)


def _figure(x: float | None) -> float:
    """A figure of a tidy row: NaN where it is undefined (None: no result)."""
    return math.nan if x is None else float(x)


def tidy_cells(
    report: AuditReport,
    config: MonitorConfig,
    columns: Mapping[str, str] | None = None,
    sizes: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
) -> pd.DataFrame:
    """The audit's cells as one tidy row each (:data:`TIDY_COLUMNS`), as they are
    published (:func:`~monitor.publish.cells.audit_cell_value`: counts rounded, a model
    of fewer than 11 records withheld): group names, not codes; NaN where a figure is
    undefined or withheld.

    ``verdict`` is the verdict of ``value`` (the whole cohort); ``dominant_verdict`` the
    majority over the K resamples, which the VFR measures flips against.
    """
    columns = columns or {}
    names = {a.name: a.groups for a in config.grid_attributes}
    rows = []
    for published in map(audit_cell_value, report.cells):
        ident = published.identity
        attr = ident.attribute
        row: dict[str, object] = {
            "model": ident.model_id,
            "metric": ident.metric,
            "attribute": columns.get(attr, attr),
            "threshold": ident.threshold,
            "direction": ident.direction,
            "groups_left_out": _named_groups(
                " ".join(ident.groups_left_out), names.get(attr, {}),
                None if sizes is None else sizes.get((ident.model_id, attr), {}),
            ),
        }  # fmt: skip
        if isinstance(published.figures, Shown):
            shown = published.figures.value
            c, r = shown.cell, shown.cell.result
            row |= {
                "value": _figure(r.value), "verdict": r.point_verdict,
                "dominant_verdict": r.dominant_verdict, "vfr": _figure(r.vfr),
                "n_star": _figure(c.n_star), "kappa": _figure(c.own_kappa),
                "tier": c.tier.tier.value, "partial": c.tier.partial,
                "n": float(shown.cohort_n), "note": r.not_evaluable_reason or r.support_note,
                "withheld": False,
            }  # fmt: skip
        else:  # fewer than 11 records in the model's cohort
            row |= {
                "value": math.nan, "verdict": WITHHELD_TEXT,
                "dominant_verdict": WITHHELD_TEXT, "vfr": math.nan, "n_star": math.nan,
                "kappa": math.nan, "tier": WITHHELD_TEXT, "partial": False, "n": math.nan,
                "note": "", "withheld": True,
            }  # fmt: skip
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(TIDY_COLUMNS))
    out["n"] = out["n"].astype("Int64")  # a count; <NA> where withheld
    return out


#: Tier badge colours: a blue-grey ramp, darker for less trustworthy, so that no tier
#: reads as the verdict's green "pass" or red "fail" (reliability is not a verdict).
_TIER_STYLE = {
    "Practical-Stability": "background:#e8eef6;color:#1f3a5f",
    "Caution-Required": "background:#b9c9de;color:#1f3a5f",
    "High-Variance": "background:#6f89ab;color:#fff",
    "Catastrophic-Instability": "background:#2b3f5c;color:#fff",
}
_VERDICT_STYLE = {
    "pass": ("&#10003; pass", "color:#1a7f37"),
    "fail": ("&#10007; fail", "color:#cf222e;font-weight:bold"),
}


def _fmt(x: float, digits: int = 3) -> str:
    if math.isnan(x):
        return "&ndash;"
    if math.isinf(x):
        return "not reached"
    return f"{x:,.{digits}f}"


@dataclass(frozen=True)
class FrameAudit:
    """The result of :func:`audit_frame`: tidy cells, the tier grid, an HTML view in
    Jupyter and the governance report (the style of fairlearn's ``MetricFrame``)."""

    #: the configuration the audit ran with (the CLI reads the same from :attr:`toml`)
    config: MonitorConfig
    #: the engine's report (its cells, EquiLense, timings, notes)
    audit: AuditReport = field(repr=False)
    #: one row per (model, metric, attribute): :data:`TIDY_COLUMNS`
    cells: pd.DataFrame = field(repr=False)
    #: the TOML config for `vfr-monitor audit --config` on the same data as a file
    toml: str = field(repr=False)

    @property
    def tiers(self) -> pd.DataFrame:
        """The tier grid: a row per (model, metric), a column per attribute."""
        c = self.cells
        grid = c.pivot(index=["model", "metric"], columns="attribute", values="tier")
        metrics = list(dict.fromkeys(c["metric"]))
        attrs = list(dict.fromkeys(c["attribute"]))
        order = sorted(grid.index, key=lambda k: (k[0], metrics.index(k[1])))
        return grid.reindex(index=order, columns=attrs).rename_axis(columns=None)

    @property
    def notes(self) -> list[str]:
        """What the engine noted (e.g. Axis 3 not applicable without hospital ids)."""
        return list(self.audit.notes)

    def report(self, path: str | Path | None = None) -> Path:
        """Write the governance report (one self-contained HTML page, as
        ``vfr-monitor report --audit-dir``) to ``path`` (a file or a directory; default:
        the current directory); an existing file is never overwritten. Returns the path."""
        from monitor.report.render import write_report as write_html

        written, _ = write_html(audit=self.audit.published(), out=path, config=self.config)
        return written

    def __repr__(self) -> str:
        counts = self.cells["tier"].value_counts()
        fails = int((self.cells["verdict"] == "fail").sum())
        return (
            f"<FrameAudit: {len(self.cells)} cells, {fails} failing; tiers: "
            + ", ".join(f"{k} {v}" for k, v in counts.items())
            + ">"
        )

    def _repr_html_(self) -> str:
        """An HTML table for Jupyter: the verdict as coloured text with a mark, the tier
        as a badge on a blue-grey ramp, so the two never read as one."""
        head = (
            "model", "metric", "attribute", "value", "rule", "verdict", "VFR", "N*",
            "kappa", "tier (reliability)",
        )  # fmt: skip
        out = [
            "<div class='vfr-frame-audit'>",
            f"<p><b>vfr-monitor audit</b>: {len(self.cells)} cells. <i>Verdict</i>: does the "
            "value pass its rule. <i>Tier</i>: how far that verdict can be trusted (VFR, "
            "N*, kappa).</p>",
            "<table><thead><tr>",
            *(f"<th>{html.escape(h)}</th>" for h in head),
            "</tr></thead><tbody>",
        ]
        for r in self.cells.itertuples(index=False):
            text, style = _VERDICT_STYLE.get(r.verdict, (html.escape(r.verdict), "color:#666"))
            tier = html.escape(r.tier + (" (partial)" if r.partial else ""))
            tstyle = _TIER_STYLE.get(r.tier, "background:#fff;color:#666")
            out.append(
                "<tr>"
                f"<td>{html.escape(r.model)}</td><td>{html.escape(r.metric)}</td>"
                f"<td>{html.escape(r.attribute)}</td><td>{_fmt(r.value)}</td>"
                f"<td>{html.escape(r.direction)} {r.threshold:g}</td>"
                f"<td style='{style}'>{text}</td><td>{_fmt(r.vfr)}</td>"
                f"<td>{_fmt(r.n_star, 0)}</td><td>{_fmt(r.kappa, 2)}</td>"
                f"<td><span style='{tstyle};border:1px solid #1f3a5f;border-radius:8px;"
                f"padding:0 6px'>{tier}</span></td></tr>"
            )
        out.append("</tbody></table>")
        out.extend(f"<p><small>{html.escape(n)}</small></p>" for n in self.notes)
        out.append("</div>")
        return "\n".join(out)
