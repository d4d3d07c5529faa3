"""Grafana dashboards of vfr-monitor, as code (grafana-foundation-sdk).

``python deploy/grafana/generate.py`` writes one JSON file per dashboard into
``deploy/grafana/dashboards/`` (provisioned by ``provisioning/dashboards/vfr.yml``);
``--check`` writes nothing and exits 1 when a committed file differs from what this
code generates (or is missing, or a stale ``*.json`` is left over).

Every query reads the Prometheus datasource with uid ``vfr-prometheus``
(``provisioning/datasources/prometheus.yml``) and only metrics exported by
``monitor/service/exporter.py`` or recorded by ``deploy/prometheus/rules/vfr_recording.yml``
(checked by ``tests/deploy/test_dashboards.py``). Output is deterministic: fixed uids,
sorted keys, two-space indent, trailing newline.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus as pb
from grafana_foundation_sdk.builders import stat as statb
from grafana_foundation_sdk.builders import statetimeline as stlb
from grafana_foundation_sdk.builders import table as tableb
from grafana_foundation_sdk.builders import timeseries as tsb
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

from monitor.config import Axis1Config
from monitor.core.tiers import TIER_LEVEL, Tier

OUT_DIR = Path(__file__).resolve().parent / "dashboards"

DATASOURCE_UID = "vfr-prometheus"
DS = dm.DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)

#: VFR above this is unstable: the service's default tau (docs/method.md section 9: 0.10).
TAU = Axis1Config().tau_vfr
#: Default fairness threshold of the drill-down (the metric's rule in monitor.toml wins).
DEFAULT_THRESHOLD = "0.8"

TAGS = ["vfr-monitor"]

#: The colour of each tier on the dashboards.
TIER_COLOR: dict[Tier, str] = {
    Tier.PENDING: "text",
    Tier.PRACTICAL_STABILITY: "green",
    Tier.CAUTION_REQUIRED: "yellow",
    Tier.HIGH_VARIANCE: "orange",
    Tier.CATASTROPHIC_INSTABILITY: "red",
}
#: Tier levels (vfr_cell_tier_level / vfr_cell_confirmed_tier_level; monitor.core.tiers)
#: -> (name, color).
TIER_LEVELS: dict[int, tuple[str, str]] = {
    TIER_LEVEL[tier]: (tier.value, color) for tier, color in TIER_COLOR.items()
}

#: Tier names (the `tier`, `from_tier`, `to_tier` labels) -> color.
TIER_COLORS = {name: color for name, color in TIER_LEVELS.values()}


# ---------------------------------------------------------------------------- helpers
def tier_level_mappings() -> list[dm.ValueMapping]:
    """Value mappings -1..3 -> tier name and color (also for the `level` label)."""
    return [
        dm.ValueMap(
            options={
                str(level): dm.ValueMappingResult(text=name, color=color, index=i)
                for i, (level, (name, color)) in enumerate(sorted(TIER_LEVELS.items()))
            }
        )
    ]


def bool_mappings(true: str, false: str) -> list[dm.ValueMapping]:
    return [
        dm.ValueMap(
            options={
                "1": dm.ValueMappingResult(text=true, color="green", index=0),
                "0": dm.ValueMappingResult(text=false, color="red", index=1),
            }
        )
    ]


def q(
    expr: str,
    legend: str = "",
    ref: str = "A",
    *,
    instant: bool = False,
    table: bool = False,
) -> pb.Dataquery:
    """A Prometheus query on the vfr datasource."""
    query = pb.Dataquery().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        query = query.legend_format(legend)
    query = query.instant() if instant else query.range()
    if table:
        query = query.format(pm.PromQueryFormat.TABLE)
    return query


def steps(*pairs: tuple[float | None, str]) -> cb.Builder:
    return (
        db.ThresholdsConfig()
        .mode(dm.ThresholdsMode.ABSOLUTE)
        .steps([dm.Threshold(value=v, color=c) for v, c in pairs])
    )


def timeseries(title: str, description: str, *targets: pb.Dataquery) -> tsb.Panel:
    panel = (
        tsb.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .height(8)
        .span(12)
        .line_width(1)
        .fill_opacity(10)
        .legend(
            cb.VizLegendOptions()
            .display_mode(cm.LegendDisplayMode.LIST)
            .placement(cm.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
    )
    for target in targets:
        panel = panel.with_target(target)
    return panel


def stat(title: str, description: str, *targets: pb.Dataquery) -> statb.Panel:
    panel = (
        statb.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .height(4)
        .span(6)
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .color_mode(cm.BigValueColorMode.BACKGROUND)
        .graph_mode(cm.BigValueGraphMode.NONE)
    )
    for target in targets:
        panel = panel.with_target(target)
    return panel


def table(title: str, description: str, *targets: pb.Dataquery) -> tableb.Panel:
    panel = tableb.Panel().title(title).description(description).datasource(DS).height(8)
    for target in targets:
        panel = panel.with_target(target)
    return panel


def organize(exclude: list[str], rename: dict[str, str] | None = None) -> dm.DataTransformerConfig:
    return dm.DataTransformerConfig(
        id_val="organize",
        options={
            "excludeByName": dict.fromkeys(exclude, True),
            "renameByName": rename or {},
        },
    )


def query_variable(name: str, label: str, query: str, *, multi: bool) -> db.QueryVariable:
    var = (
        db.QueryVariable(name)
        .label(label)
        .datasource(DS)
        .query({"query": query, "refId": f"{name}-variable"})
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
    )
    if multi:
        var = var.multi(True).include_all(True).all_value(".*")
    return var


def dashboard(uid: str, title: str, description: str) -> db.Dashboard:
    return (
        db.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .timezone("utc")
        .time("now-24h", "now")
        .refresh("1m")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .readonly()
        .link(
            db.DashboardLink("vfr-monitor")
            .type(dm.DashboardLinkType.DASHBOARDS)
            .tags(TAGS)
            .as_dropdown(True)
            .include_vars(False)
            .keep_time(True)
        )
    )


# ---------------------------------------------------------------------------- dashboards
def overview() -> db.Dashboard:
    m = 'model=~"$model"'
    grid = (
        table(
            "Confirmed tier: metric x attribute ($model)",
            "Confirmed (debounced) reliability tier of each cell of the model's grid "
            "(rows: fairness metric, columns: sensitive attribute). Empty: no confirmed "
            "tier yet, or the cell is suppressed (window below the small-cell limit).",
            q(
                f"max by (model, metric, attribute) (vfr_cell_confirmed_tier_level{{{m}}})",
                ref="A",
                instant=True,
                table=True,
            ),
        )
        .span(12)
        .repeat("model")
        .repeat_direction("h")
        .max_per_row(2)
        .with_transformation(organize(["Time", "model"]))
        .with_transformation(
            dm.DataTransformerConfig(
                id_val="groupingToMatrix",
                options={
                    "columnField": "attribute",
                    "rowField": "metric",
                    "valueField": "Value",
                    "emptyValue": "null",
                },
            )
        )
        .mappings(tier_level_mappings())
        .cell_options(
            cm.TableColoredBackgroundCellOptions(mode=cm.TableCellBackgroundDisplayMode.BASIC)
        )
        .align("center")
        .override_by_name(
            "metric\\attribute",
            [
                dm.DynamicConfigValue(id_val="displayName", value="metric \\ attribute"),
                dm.DynamicConfigValue(id_val="custom.cellOptions", value={"type": "auto"}),
                dm.DynamicConfigValue(id_val="custom.align", value="left"),
            ],
        )
    )
    return (
        dashboard(
            "vfr-overview",
            "VFR monitor / Overview",
            "Reliability tiers of every (model, metric, attribute) cell, and how often "
            "verdicts and tiers change.",
        )
        .with_variable(
            query_variable("model", "Model", "label_values(vfr_cell_tier_level, model)", multi=True)
        )
        .with_row(db.Row("Tier grid"))
        .with_panel(grid)
        .with_row(db.Row("Tiers over time"))
        .with_panel(
            stlb.Panel()
            .title("Confirmed tier per cell")
            .description("Confirmed (debounced) tier of each cell over time.")
            .datasource(DS)
            .height(10)
            .span(24)
            .with_target(
                q(
                    f"vfr_cell_confirmed_tier_level{{{m}}}",
                    "{{model}} {{metric}}/{{attribute}}",
                )
            )
            .mappings(tier_level_mappings())
            .show_value(cm.VisibilityMode.NEVER)
            .merge_values(True)
            .row_height(0.9)
            .fill_opacity(80)
        )
        .with_panel(
            timeseries(
                "Cells per raw tier",
                "Number of cells in each raw (not debounced) tier, all selected models.",
                q(
                    f"sum by (tier) (model_tier:vfr_cells:count{{{m}}})",
                    "{{tier}}",
                ),
            )
            .stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
            .fill_opacity(60)
            .min(0)
            .decimals(0)
            .overrides(
                [
                    db.DashboardFieldConfigSourceOverrides()
                    .matcher(dm.MatcherConfig(id_val="byName", options=name))
                    .properties(
                        [
                            dm.DynamicConfigValue(
                                id_val="color", value={"mode": "fixed", "fixedColor": color}
                            )
                        ]
                    )
                    for name, color in TIER_COLORS.items()
                ]
            )
        )
        .with_panel(
            table(
                "Cells per confirmed tier (now)",
                "Number of cells per confirmed tier level, per model.",
                q(
                    f"sum by (model, level) (model_level:vfr_cells_confirmed:count{{{m}}})",
                    ref="A",
                    instant=True,
                    table=True,
                ),
            )
            .span(12)
            .with_transformation(organize(["Time"], {"Value": "cells", "level": "tier"}))
            .override_by_name(
                "tier",
                [
                    dm.DynamicConfigValue("mappings", tier_level_mappings()),
                    dm.DynamicConfigValue(
                        "custom.cellOptions", {"type": "color-background", "mode": "basic"}
                    ),
                ],
            )
        )
        .with_panel(
            stat(
                "Catastrophic-Instability cells (confirmed)",
                "Cells whose confirmed tier is Catastrophic-Instability, per model.",
                q(
                    f"model:vfr_cells_confirmed_catastrophic:count{{{m}}}",
                    "{{model}}",
                    instant=True,
                ),
            )
            .span(24)
            .decimals(0)
            .thresholds(steps((None, "green"), (1, "red")))
        )
        .with_row(db.Row("Recent changes"))
        .with_panel(
            timeseries(
                "Verdict flips per hour",
                "Changes of a cell's dominant verdict in the last hour (raw: every change; "
                "confirmed: after confirm_windows evaluations).",
                q(
                    f"sum by (model, state) (model_state:vfr_verdict_flips:increase1h{{{m}}})",
                    "{{model}} {{state}}",
                ),
            )
            .min(0)
            .decimals(0)
        )
        .with_panel(
            timeseries(
                "Tier changes per hour",
                "Changes of a cell's reliability tier in the last hour, raw and confirmed.",
                q(
                    f"sum by (model, state) (model_state:vfr_tier_changes:increase1h{{{m}}})",
                    "{{model}} {{state}}",
                ),
            )
            .min(0)
            .decimals(0)
        )
        .with_panel(
            table(
                "Confirmed tier changes in the time range",
                "Confirmed tier changes per cell over the dashboard's time range. Counted on "
                "the confirmed-tier gauge: a labelled change counter first appears at 1, so "
                "increase() would miss the first change of each kind.",
                q(
                    "sum by (model, metric, attribute) "
                    f"(changes(vfr_cell_confirmed_tier_level{{{m}}}[$__range])) > 0",
                    ref="A",
                    instant=True,
                    table=True,
                ),
            )
            .span(12)
            .decimals(0)
            .with_transformation(organize(["Time"], {"Value": "changes"}))
        )
        .with_panel(
            table(
                "Cells with confirmed verdict flips (last hour)",
                "Cells whose confirmed verdict flipped in the last hour, counted on the "
                "confirmed-verdict gauge (so a cell's first flip shows at once).",
                q(
                    f"changes(vfr_cell_confirmed_pass{{{m}}}[1h]) > 0",
                    ref="A",
                    instant=True,
                    table=True,
                ),
            )
            .span(12)
            .decimals(0)
            .with_transformation(organize(["Time", "job", "instance"], {"Value": "flips"}))
        )
    )


def cell() -> db.Dashboard:
    sel = 'model="$model", metric="$metric", attribute="$attribute"'
    dashed = cb.LineStyle().fill("dash").dash([10, 10])
    return (
        dashboard(
            "vfr-cell",
            "VFR monitor / Cell drill-down",
            "One (model, metric, attribute) cell: point value and its bootstrap CI, "
            "Verdict Flip Rate, N* and hospital kappa.",
        )
        .with_variable(
            query_variable("model", "Model", "label_values(vfr_cell_value, model)", multi=False)
        )
        .with_variable(
            query_variable(
                "metric",
                "Metric",
                'label_values(vfr_cell_value{model="$model"}, metric)',
                multi=False,
            )
        )
        .with_variable(
            query_variable(
                "attribute",
                "Attribute",
                'label_values(vfr_cell_value{model="$model", metric="$metric"}, attribute)',
                multi=False,
            )
        )
        .with_variable(
            db.TextBoxVariable("threshold")
            .label("Threshold")
            .description("Pass/fail threshold of the selected metric (its rule in monitor.toml).")
            .default_value(DEFAULT_THRESHOLD)
        )
        .with_panel(
            stat(
                "Raw tier",
                "Raw reliability tier of the latest evaluation.",
                q(f"vfr_cell_tier_level{{{sel}}}", instant=True),
            )
            .mappings(tier_level_mappings())
            .thresholds(steps((None, "text")))
        )
        .with_panel(
            stat(
                "Confirmed tier",
                "Confirmed (debounced) reliability tier. No value: not confirmed yet.",
                q(f"vfr_cell_confirmed_tier_level{{{sel}}}", instant=True),
            )
            .mappings(tier_level_mappings())
            .thresholds(steps((None, "text")))
        )
        .with_panel(
            stat(
                "Dominant verdict",
                "Dominant verdict over the K bootstrap resamples.",
                q(f"vfr_cell_dominant_pass{{{sel}}}", instant=True),
            ).mappings(bool_mappings("pass", "fail"))
        )
        .with_panel(
            stat(
                "Stability margin (sigma)",
                "|mean - threshold| / sd of the K resampled values (+Inf: sd is 0).",
                q(f"vfr_cell_sigma{{{sel}}}", instant=True),
            )
            .decimals(2)
            .thresholds(steps((None, "red"), (1, "orange"), (2, "green")))
        )
        .with_panel(
            timeseries(
                "Point value with 95% bootstrap CI",
                "Point estimate on the whole window, the 2.5-97.5 percentile band of the K "
                "resampled values, and the pass/fail threshold ($threshold).",
                q(f"vfr_cell_value{{{sel}}}", "value", "A"),
                q(f"vfr_cell_ci_low{{{sel}}}", "CI low", "B"),
                q(f"vfr_cell_ci_high{{{sel}}}", "CI high", "C"),
                q("vector($threshold)", "threshold", "D"),
            )
            .span(24)
            .line_width(2)
            .fill_opacity(0)
            .override_by_name(
                "CI high",
                [
                    dm.DynamicConfigValue("custom.fillBelowTo", "CI low"),
                    dm.DynamicConfigValue("custom.fillOpacity", 20),
                    dm.DynamicConfigValue("custom.lineWidth", 0),
                    dm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "blue"}),
                ],
            )
            .override_by_name(
                "CI low",
                [
                    dm.DynamicConfigValue("custom.lineWidth", 0),
                    dm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "blue"}),
                ],
            )
            .override_by_name(
                "threshold",
                [
                    dm.DynamicConfigValue("custom.lineStyle", dashed.build()),
                    dm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "red"}),
                ],
            )
        )
        .with_panel(
            timeseries(
                "Verdict Flip Rate",
                f"min(n_pass, K - n_pass) / K over the K bootstrap resamples; above tau = "
                f"{TAU:.2f} (dashed line) the verdict is unstable.",
                q(f"vfr_cell_vfr{{{sel}}}", "VFR"),
            )
            .min(0)
            .max(0.5)
            .decimals(3)
            .thresholds(steps((None, "green"), (TAU, "red")))
            .thresholds_style(
                cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.DASHED)
            )
        )
        .with_panel(
            timeseries(
                "N* (minimum reliable audit size)",
                "Axis 2 minimum reliable audit size in records, against the records in the "
                "model's window. +Inf (not drawn): the target was never reached.",
                q(f"vfr_cell_n_star{{{sel}}}", "N*", "A"),
                q('vfr_window_records{model="$model"}', "window records", "B"),
            )
            .min(0)
            .decimals(0)
            .unit("short")
        )
        .with_panel(
            timeseries(
                "Hospital kappa (Axis 3)",
                "Fleiss kappa of the hospital-fold verdicts. No data: not computed or not "
                "applicable (no hospital ids).",
                q(f"vfr_cell_kappa{{{sel}}}", "kappa"),
            )
            .min(-1)
            .max(1)
            .decimals(2)
        )
        .with_panel(
            timeseries(
                "Verdict flips and tier changes per hour",
                "Events of this cell in the last hour, raw and confirmed.",
                q(
                    f"sum by (state) (increase(vfr_verdict_flips_total{{{sel}}}[1h]))",
                    "verdict flips {{state}}",
                    "A",
                ),
                q(
                    f"sum by (state) (increase(vfr_tier_changes_total{{{sel}}}[1h]))",
                    "tier changes {{state}}",
                    "B",
                ),
            )
            .min(0)
            .decimals(0)
        )
    )


def ingestion() -> db.Dashboard:
    s = 'source=~"$source"'
    m = 'model=~"$model"'
    return (
        dashboard(
            "vfr-ingestion",
            "VFR monitor / Ingestion health",
            "Records read from the scored-records topic, rejections, consumer lag, and "
            "freshness and cost of the window evaluations.",
        )
        .with_variable(
            query_variable(
                "source", "Source", "label_values(vfr_ingest_records_total, source)", multi=True
            )
        )
        .with_variable(
            query_variable("model", "Model", "label_values(vfr_window_records, model)", multi=True)
        )
        .with_row(db.Row("Ingest"))
        .with_panel(
            timeseries(
                "Records read per second by outcome",
                "Accepted, duplicate and rejected (dead-lettered) records per second.",
                q(
                    f"sum by (source, state) (rate(vfr_ingest_records_total{{{s}}}"
                    "[$__rate_interval]))",
                    "{{source}} {{state}}",
                ),
            )
            .unit("rps")
            .min(0)
            .override_by_name(
                "rejected", [dm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "red"})]
            )
        )
        .with_panel(
            timeseries(
                "Rejected share (15m)",
                "Share of the records read in the last 15 minutes that were rejected.",
                q(f"source:vfr_ingest_rejected:ratio_rate15m{{{s}}}", "{{source}}"),
            )
            .unit("percentunit")
            .min(0)
        )
        .with_panel(
            timeseries(
                "Rejections per second by reason",
                "Rejected records by reason code (<kind>:<field>; 'other' past the cap).",
                q(
                    f"sum by (source, reason) (rate(vfr_ingest_rejected_total{{{s}}}"
                    "[$__rate_interval]))",
                    "{{source}} {{reason}}",
                ),
            )
            .unit("rps")
            .min(0)
        )
        .with_panel(
            timeseries(
                "Consumer lag",
                "Messages between the committed offset and the end of each partition.",
                q(
                    f"vfr_consumer_lag_messages{{{s}}}",
                    "{{source}} partition {{partition}}",
                    "A",
                ),
                q(f"source:vfr_consumer_lag_messages:sum{{{s}}}", "{{source}} total", "B"),
            )
            .min(0)
            .decimals(0)
        )
        .with_row(db.Row("Evaluation"))
        .with_panel(
            timeseries(
                "Evaluation staleness",
                "Seconds since the model's latest completed evaluation; the dashed line is "
                "the VFRMonitorStale threshold.",
                q(
                    f"time() - vfr_last_evaluation_timestamp_seconds{{{m}}}",
                    "{{model}}",
                    "A",
                ),
                q("vfr:evaluation_stale_threshold:seconds", "stale threshold", "B"),
            )
            .unit("s")
            .min(0)
            .override_by_name(
                "stale threshold",
                [
                    dm.DynamicConfigValue(
                        "custom.lineStyle", cb.LineStyle().fill("dash").dash([10, 10]).build()
                    ),
                    dm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "red"}),
                    dm.DynamicConfigValue("custom.fillOpacity", 0),
                ],
            )
        )
        .with_panel(
            timeseries(
                "Evaluation duration",
                "Wall time of one evaluation of the model's whole grid: p50 / p95 from the "
                "histogram, and the mean.",
                q(
                    "histogram_quantile(0.5, sum by (model, le) "
                    f"(rate(vfr_evaluation_duration_seconds_bucket{{{m}}}[$__rate_interval])))",
                    "{{model}} p50",
                    "A",
                ),
                q(
                    "histogram_quantile(0.95, sum by (model, le) "
                    f"(rate(vfr_evaluation_duration_seconds_bucket{{{m}}}[$__rate_interval])))",
                    "{{model}} p95",
                    "B",
                ),
                q(
                    f"sum by (model) (rate(vfr_evaluation_duration_seconds_sum{{{m}}}"
                    "[$__rate_interval]))"
                    f" / sum by (model) (rate(vfr_evaluation_duration_seconds_count{{{m}}}"
                    "[$__rate_interval]))",
                    "{{model}} mean",
                    "C",
                ),
            )
            .unit("s")
            .min(0)
        )
        .with_panel(
            timeseries(
                "Evaluations per hour",
                "Completed window evaluations of each model in the last hour.",
                q(f"sum by (model) (increase(vfr_evaluations_total{{{m}}}[1h]))", "{{model}}"),
            )
            .min(0)
            .decimals(0)
        )
        .with_panel(
            timeseries(
                "Window records",
                "Records in each model's current window, and records per second that arrived "
                "older than the window horizon (right axis).",
                q(f"vfr_window_records{{{m}}}", "{{model}} window", "A"),
                q(
                    f"sum by (model) (rate(vfr_old_events_total{{{m}}}[$__rate_interval]))",
                    "{{model}} too old",
                    "B",
                ),
            )
            .min(0)
            .override_by_regexp(
                ".* too old",
                [
                    dm.DynamicConfigValue("custom.axisPlacement", "right"),
                    dm.DynamicConfigValue("unit", "rps"),
                ],
            )
        )
    )


def jobs() -> db.Dashboard:
    t = 'task=~"$task"'
    return (
        dashboard(
            "vfr-jobs",
            "VFR monitor / Scheduled jobs",
            "Scheduled jobs (axis2, axis3, equilense, retention): outcomes, duration and "
            "time since the latest success.",
        )
        .with_variable(
            query_variable("task", "Task", "label_values(vfr_job_runs_total, task)", multi=True)
        )
        .with_panel(
            stat(
                "Time since last success (in scheduling intervals)",
                "Time since each job's latest successful run, in scheduling intervals "
                "(red: more than two, see VFRAxisJobNoRecentSuccess).",
                q(
                    f"(time() - vfr_job_last_success_timestamp_seconds{{{t}}})"
                    f" / on (task) group_left () vfr:job_interval:seconds{{{t}}}",
                    "{{task}}",
                    instant=True,
                ),
            )
            .span(24)
            .unit("x")
            .decimals(2)
            .thresholds(steps((None, "green"), (1.5, "orange"), (2, "red")))
        )
        .with_panel(
            timeseries(
                "Runs per hour by outcome",
                "Runs of each job in the last hour: success, failure, skipped.",
                q(
                    f"sum by (task, state) (increase(vfr_job_runs_total{{{t}}}[1h]))",
                    "{{task}} {{state}}",
                ),
            )
            .draw_style(cm.GraphDrawStyle.BARS)
            .fill_opacity(80)
            .stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
            .min(0)
            .decimals(0)
            .override_by_regexp(
                ".* failure",
                [dm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "red"})],
            )
            .override_by_regexp(
                ".* skipped",
                [dm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "yellow"})],
            )
        )
        .with_panel(
            timeseries(
                "Duration of the latest run",
                "Wall time of each job's latest run.",
                q(f"vfr_job_duration_seconds{{{t}}}", "{{task}}"),
            )
            .unit("s")
            .min(0)
        )
        .with_panel(
            timeseries(
                "Time since last success per task",
                "Seconds since each job's latest successful run; dashed: two scheduling "
                "intervals (the alert threshold).",
                q(f"time() - vfr_job_last_success_timestamp_seconds{{{t}}}", "{{task}}", "A"),
                q(f"2 * vfr:job_interval:seconds{{{t}}}", "{{task}} alert threshold", "B"),
            )
            .unit("s")
            .min(0)
            .override_by_regexp(
                ".* alert threshold",
                [
                    dm.DynamicConfigValue(
                        "custom.lineStyle", cb.LineStyle().fill("dash").dash([10, 10]).build()
                    ),
                    dm.DynamicConfigValue("custom.fillOpacity", 0),
                ],
            )
        )
        .with_panel(
            table(
                "Runs in the time range",
                "Runs of each job by outcome over the dashboard's time range.",
                q(
                    f"sum by (task, state) (increase(vfr_job_runs_total{{{t}}}[$__range]))",
                    ref="A",
                    instant=True,
                    table=True,
                ),
            )
            .span(12)
            .decimals(0)
            .with_transformation(organize(["Time"]))
            .with_transformation(
                dm.DataTransformerConfig(
                    id_val="groupingToMatrix",
                    options={
                        "columnField": "state",
                        "rowField": "task",
                        "valueField": "Value",
                        "emptyValue": "zero",
                    },
                )
            )
        )
    )


#: file name (without .json) -> builder of the dashboard
DASHBOARDS: dict[str, Callable[[], db.Dashboard]] = {
    "vfr-overview": overview,
    "vfr-cell": cell,
    "vfr-ingestion": ingestion,
    "vfr-jobs": jobs,
}


# ---------------------------------------------------------------------------- output
def render(board: db.Dashboard) -> str:
    """Stable JSON text of one dashboard (sorted keys, indent 2, trailing newline)."""
    built = board.build()
    # Panel ids in layout order (rows included): stable, unique, and what Grafana's
    # repeat and links expect; the builder leaves them unset.
    for number, panel in enumerate(built.panels or [], start=1):
        panel.id_val = number
    return json.dumps(built, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def generate() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {f"{name}.json": render(build()) for name, build in DASHBOARDS.items()}


def check(out_dir: Path = OUT_DIR) -> list[str]:
    """Problems of the committed files (empty when they match the code)."""
    wanted = generate()
    problems = []
    for name, text in wanted.items():
        path = out_dir / name
        if not path.exists():
            problems.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{path}: differs from the generated dashboard")
    for path in sorted(out_dir.glob("*.json")):
        if path.name not in wanted:
            problems.append(f"{path}: not generated by generate.py (stale?)")
    return problems


def write(out_dir: Path = OUT_DIR) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generate().items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the committed JSON differs from the generated one",
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output directory")
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.out)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("run: python deploy/grafana/generate.py", file=sys.stderr)
            return 1
        print(f"{len(DASHBOARDS)} dashboards up to date")
        return 0
    for path in write(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
