"""`vfr-monitor demo`: the whole service on one machine, on data that drifts, in under 3 minutes.

What runs is the product, not a mock-up of it: the embedded source replays a scored stream
into the same Pipeline the Kafka consumer feeds (validation, DuckDB, windows, Axis 1 per
hop, tiers, debounced events), APScheduler runs Axis 2, Axis 3 and EquiLense/MPPD on a short
cadence, and /metrics and the API are served on 127.0.0.1 while it runs. The terminal shows
progress, the tier grid per model and the latest confirmed events; the summary at the end
lists every confirmed verdict flip and tier downgrade and says where the DuckDB file is.

Default data: the seeded Texas-calibrated synthetic cohort (monitor.data.cohort) scored by two
XGBoost models (monitor.data.scorer) under the ``group_score_shift`` scenario, a model update
that lowers female patients' scores from July on. Disparate Impact by sex of the updated
model walks down through 0.80, so that cell's verdict flips and, while it sits near the
threshold, its flip rate rises and its tier is downgraded. ``--dataset diabetes130``
replays the shipped UCI file instead (no hospital ids: Axis 3 not applicable), and
``--dataset texas100x --data FILE`` a Texas-100X file the user has.
"""

from __future__ import annotations

import logging
import math
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson
import pandas as pd

from monitor.config import ConfigError, MonitorConfig
from monitor.core.events import CERTIFIED_CHANGE, CellEvent
from monitor.core.numbers import float_or_none
from monitor.core.results import CellEvaluation
from monitor.data.scorer import ScoredStream
from monitor.store import queries

TIER_MARK = {
    "Practical-Stability": "S",
    "Caution-Required": "C",
    "High-Variance": "H",
    "Catastrophic-Instability": "X",
    "Pending": "?",
    "Not-Evaluable": "-",
}
DEFAULT_SCENARIO = "group_score_shift"
#: the cell the default scenario's model update flips (DI by sex of the updated model)
PLANTED_CELL = ("los-xgb-discharge", "DI", "sex")


@dataclass(frozen=True)
class DemoOptions:
    """What `vfr-monitor demo` was asked for (CLI flags)."""

    dataset: str = "synthetic"
    data: str | None = None
    records: int = 100_000
    seed: int = 0
    scenario: str | None = DEFAULT_SCENARIO
    #: messages per second into the pipeline (None: as fast as it goes)
    rate: float | None = 3_000.0
    axes_interval_s: float = 6.0
    out_dir: str = "demo-output"
    port: int = 0
    follow: bool = False
    #: seconds between terminal refreshes
    refresh_s: float = 1.0
    live: bool | None = None  # None: redraw in place only when stdout is a terminal
    #: predictions now, outcomes later: "none" (scored discharges), "joined" (scored at admission,
    #: sent at discharge with the outcome) or "delayed" (prediction at admission, outcome at
    #: discharge); monitor.data.outcomes
    outcomes: str = "none"
    #: with delayed outcomes: a share of one group's outcomes missing or late
    outcome_bias: Any = None


def demo_config(
    base: MonitorConfig,
    attributes: list[dict] | None,
    opts: DemoOptions,
    features: tuple[str, ...],
    models: tuple[str, ...] = (),
    oldest_event_time: pd.Timestamp | None = None,
) -> MonitorConfig:
    """The user's config with the demo's short cadence, attributes and EquiLense features.

    The demo registers the models it trains (``[[models]]``), so the registry's default
    (unknown models dead-lettered) stays in force; and it replays data whose event times
    are a fixed 2026 calendar or a replay clock, so it turns the wall-clock bounds off
    (``event_time_bounds = "none"``: only times every layer can hold are accepted).
    For the same reason the discharge retention is stretched to cover the oldest replayed
    event (``oldest_event_time``) plus 30 days: the retention job deletes by wall-clock
    age, and on a replay of 2006 records (Texas-100X) it deleted whatever had arrived when
    it first ran, so what the demo kept depended on timing.
    """
    data = base.model_dump()
    if attributes is not None:
        data["attributes"] = attributes
    known = {m["id"] for m in data["models"]}
    data["models"] = [*data["models"], *({"id": m} for m in models if m not in known)]
    svc = data["service"]
    svc["intake"]["event_time_bounds"] = "none"
    svc["axes"] |= {
        "axis2_interval_s": opts.axes_interval_s,
        "axis3_interval_s": opts.axes_interval_s,
        # EquiLense matches pairs over the whole cohort: seconds, not tenths.
        "equilense_interval_s": 2.5 * opts.axes_interval_s,
        "early_run_min_interval_s": opts.axes_interval_s,
    }
    if oldest_event_time is not None:
        age_days = (pd.Timestamp.now(tz="UTC") - oldest_event_time).total_seconds() / 86_400
        kept = svc["retention"]
        kept["discharge_days"] = max(kept["discharge_days"], math.ceil(age_days) + 30)
    data["equilense"] = {**data["equilense"], "features": list(features)}
    return MonitorConfig.model_validate(data)


def build_stream(opts: DemoOptions) -> tuple[ScoredStream, Any]:
    """The scored stream and the dataset description (None for the synthetic cohort)."""
    from monitor.data import scorer

    if opts.dataset == "synthetic":
        at_admission = opts.outcomes != "none"
        return scorer.synthetic_stream(opts.records, opts.seed, opts.scenario, at_admission), None
    if opts.dataset == "diabetes130":
        from monitor.data.datasets.diabetes130 import load_diabetes130

        ds = load_diabetes130()
    elif opts.dataset == "texas100x":
        from monitor.data.datasets.texas100x import load_texas100x

        if not opts.data:
            raise ConfigError("--data", "--dataset texas100x needs --data FILE (not shipped)")
        ds = load_texas100x(opts.data)
    else:
        raise ConfigError("--dataset", f"unknown dataset {opts.dataset!r}")
    return scorer.dataset_stream(ds, opts.seed), ds


def poison_payloads() -> list[bytes]:
    """Three broken messages, so the dead-letter path shows in the summary."""
    return [b"{not json", b'{"record_id": "bad-1", "score": "high"}', b"[1, 2, 3]"]


def payload_stream(stream: ScoredStream, opts: DemoOptions | None = None) -> list[bytes]:
    """The stream as the JSON payloads a producer sends, with the poison messages early on
    (predictions and outcomes apart when ``opts.outcomes`` is "delayed")."""
    from monitor.data.outcomes import iter_messages, message_frame

    o = opts or DemoOptions()
    frame = message_frame(stream.frame, o.outcomes, o.seed, o.outcome_bias)
    out = [orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY) for r in iter_messages(frame)]
    at = min(len(out), 500)
    return out[:at] + poison_payloads() + out[at:]


# ---------------------------------------------------------------------- terminal view


def tier_grid(
    cells: list[CellEvaluation], config: MonitorConfig, models: list[str]
) -> list[str]:
    """Per model: metric rows x attribute columns, 'verdict/tier' ('~' = flip rate above tau)."""
    attrs = [a.name for a in config.grid_attributes]
    by_key = {c.key: c for c in cells}
    lines = []
    for model in models:
        lines.append(f"  {model:<26}" + "".join(f"{a:>13}" for a in attrs))
        for rule in config.metrics:
            row = f"    {rule.name:<24}"
            for a in attrs:
                c = by_key.get((model, rule.name, a))
                if c is None:
                    row += f"{'.':>13}"
                    continue
                noisy = "~" if c.result.vfr > config.axis1.tau_vfr else " "
                mark = TIER_MARK.get(c.tier.tier.value, "?")
                verdict = c.result.dominant_verdict if c.result.evaluable else "n/e"
                row += f"{verdict:>8}{noisy}/{mark:<3}"
            lines.append(row)
    lines.append(
        "  tiers: S stable · C caution · H high-variance · X catastrophic · ? pending"
        " · - not evaluable (n/e)"
    )
    return lines


def event_line(e: CellEvent) -> str:
    what = {"verdict_flip": "verdict", CERTIFIED_CHANGE: "certified"}.get(e.kind, "tier")
    return (
        f"  #{e.evaluation:<4} {e.model_id} {e.metric} x {e.attribute}: "
        f"{what} {e.old} -> {e.new} ({e.direction.replace('_', ' ')})"
    )


class View:
    """Redraws the status block in place on a terminal, else prints a line every 5 s."""

    def __init__(self, out: TextIO, live: bool | None):
        self.out = out
        self.live = out.isatty() if live is None else live
        self._last_line = 0.0

    def show(self, header: list[str], body: list[str]) -> None:
        if self.live:
            self.out.write("\x1b[H\x1b[J" + "\n".join(header + body) + "\n")
            self.out.flush()
        elif time.monotonic() - self._last_line >= 5.0:
            self._last_line = time.monotonic()
            print(header[1].strip(), file=self.out, flush=True)


# ---------------------------------------------------------------------- the run


def _confirmed_events(service: Any) -> list[CellEvent]:
    """Confirmed events in order (raw events are many; the view shows what a board acts on)."""
    cur = service.store.cursor()
    try:
        return queries.confirmed_events(cur)
    finally:
        cur.close()


def run_demo(config: MonitorConfig, opts: DemoOptions, out: TextIO = sys.stdout) -> int:
    """Build the stream, run the service on it with a live view, print the summary."""
    from consumers.embedded import EmbeddedSource
    from monitor.service.app import MonitorService, run_until_stopped

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # our scheduler logs its own
    t0 = time.perf_counter()
    print(f"vfr-monitor demo: preparing the {opts.dataset} stream ...", file=out, flush=True)
    stream, ds = build_stream(opts)
    features = ds.features if ds is not None else tuple(stream.models[0].features)
    cfg = demo_config(
        config, ds.attributes if ds is not None else None, opts, features,
        tuple(m.model_id for m in stream.models),
        oldest_event_time=_oldest(stream),
    )  # fmt: skip
    for m in stream.models:
        print(
            f"  trained {m.model_id} (XGBoost, {m.n_train:,} records): held-out AUROC "
            f"{m.auroc:.3f}",
            file=out,
        )
    if ds is not None:
        print(f"  data: {ds.credit}", file=out)
        for note in ds.notes:
            print(f"  note: {note}", file=out)
    payloads = payload_stream(stream, opts)
    total = len(payloads)

    out_dir = Path(opts.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    db_path = out_dir / f"{opts.dataset}.duckdb"
    for p in (db_path, Path(f"{db_path}.wal")):
        p.unlink(missing_ok=True)  # each demo starts from an empty store
    service = MonitorService(cfg, source_name="embedded", db_path=str(db_path), http_port=opts.port)
    source = EmbeddedSource(payloads, service.pipeline, rate=opts.rate, batch_size=1000)
    stop = threading.Event()
    service.start()
    assert service.api is not None
    url = service.api.url
    print(
        f"  serving {url}/metrics and {url}/api/cells, /api/events, /api/windows "
        f"(127.0.0.1 only)\n  DuckDB file: {db_path.resolve()}\n  replaying {total:,} messages"
        + (f" at {opts.rate:,.0f}/s" if opts.rate else " as fast as they go")
        + f"; slow axes every {opts.axes_interval_s:g} s",
        file=out,
        flush=True,
    )
    runner = threading.Thread(
        target=run_until_stopped, args=(service, source, stop), name="vfr-demo-source", daemon=True
    )
    models = [m.model_id for m in stream.models]
    view = View(out, opts.live)
    t_stream = time.perf_counter()
    runner.start()
    try:
        while runner.is_alive():
            runner.join(timeout=opts.refresh_s)
            _draw(view, service, cfg, models, source.stats.messages, total, t_stream, stream)
            if source.exhausted:
                stop.set()
        _draw(view, service, cfg, models, source.stats.messages, total, t_stream, stream)
        summary = _summary(
            service, cfg, models, stream, ds, time.perf_counter() - t0, db_path, url, opts
        )
        print("\n".join(summary), file=out, flush=True)
        if opts.follow:
            print("  --follow: still serving; Ctrl-C to stop", file=out, flush=True)
            _wait_for_interrupt()
    finally:
        stop.set()
        runner.join(timeout=10)
        service.close()
    _write_report(db_path, out_dir, cfg, out)
    return 0


def _outcome_lines(
    service: Any, cells: list[CellEvaluation], opts: DemoOptions, events: list[CellEvent]
) -> list[str]:
    """With ``--outcomes``: how the feed was sent, when the planted DI flip was confirmed
    (in stream time: the time of the window's last message), and what the label-based
    cells rest on (predictions now, outcomes later)."""
    from monitor.core.coverage import needs_outcome

    if opts.outcomes == "none":
        return []
    how = {
        "joined": "scored at admission, sent with the outcome at discharge",
        "delayed": "predictions at admission, outcomes at discharge",
    }[opts.outcomes]
    if opts.outcome_bias is not None:
        how += f"; {opts.outcome_bias.describe()}"
    lines = [f"  outcomes: {how}"]
    cur = service.store.cursor()
    try:
        times = queries.evaluation_times(cur)
    finally:
        cur.close()
    planted = next(
        (e for e in events if e.kind == "verdict_flip" and e.direction == "pass_to_fail"
         and (e.model_id, e.metric, e.attribute) == PLANTED_CELL),
        None,
    )  # fmt: skip
    if planted is not None:
        at = times.get((planted.model_id, planted.evaluation))
        lines.append(
            f"  planted DI x sex flip of {planted.model_id} confirmed at evaluation "
            f"{planted.evaluation}, stream time {'n/a' if at is None else str(at)[:16]}"
        )
    label = [c for c in cells if needs_outcome(c.result.metric) and c.with_outcome is not None]
    if opts.outcomes == "delayed" and label:
        c = label[0]
        lines.append(
            f"  label-based cells wait for outcomes: they rest on the window's predictions "
            f"with an outcome (e.g. {c.result.model_id}: {c.with_outcome:,} of "
            f"{c.predictions:,}); DI and SPD on every prediction"
        )
        waiting = sorted({(c.result.model_id, c.result.attribute) for c in label
                          if c.coverage_reason})  # fmt: skip
        for model, attr in waiting:
            ac = next(c.outcome_coverage for c in label
                      if (c.result.model_id, c.result.attribute) == (model, attr))  # fmt: skip
            shown = ", ".join(
                f"{g.group} {'<11' if g.coverage is None else f'{g.coverage:.2f}'}"
                for g in ac.groups  # type: ignore[union-attr]  # waiting: a cell with coverage
            )
            lines.append(
                f"  {model} x {attr}: outcomes incomplete (coverage gap {ac.gap:.2f}; "  # type: ignore[union-attr]  # as above
                f"coverage {shown})"
            )
    return lines


def _oldest(stream: ScoredStream) -> pd.Timestamp:
    """The stream's oldest message time (an admission, when the stream has them)."""
    col = "admitted_at" if "admitted_at" in stream.frame else "event_time"
    return pd.to_datetime(stream.frame[col], utc=True).min()


def _write_report(db_path: Path, out_dir: Path, cfg: MonitorConfig, out: TextIO) -> None:
    """The governance report of the run, next to the DuckDB file (never overwriting one)."""
    from monitor.report.data import ReportInputError
    from monitor.report.render import write_report

    try:
        path, note = write_report(db=db_path, out=out_dir, config=cfg)
    except ReportInputError as exc:  # e.g. a run stopped before any evaluation
        print(f"  no report: {exc}", file=out, flush=True)
        return
    if note:
        print(f"  {note}", file=out)
    print(f"  governance report: {path.resolve()}", file=out, flush=True)


def _wait_for_interrupt() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


def _draw(
    view: View,
    service: Any,
    cfg: MonitorConfig,
    models: list[str],
    done: int,
    total: int,
    t_stream: float,
    stream: ScoredStream,
) -> None:
    elapsed = time.perf_counter() - t_stream
    evals = service.pipeline.evaluation_total()
    times = stream.frame["event_time"]
    at = times.iloc[min(done, len(times) - 1)].strftime("%Y-%m-%d") if len(times) else "-"
    header = [
        f"vfr-monitor demo · {stream.dataset} · scenario {stream.scenario or 'none'} · "
        f"{elapsed:5.1f} s",
        f"  messages {done:,}/{total:,} ({done / max(total, 1):.0%}), "
        f"{done / max(elapsed, 1e-9):,.0f}/s · event time {at} · evaluations {evals}",
    ]
    body = [*tier_grid(service.released_cells(), cfg, models), "  latest confirmed events:"]
    body += [event_line(e) for e in _confirmed_events(service)[-8:]] or ["    (none yet)"]
    view.show(header, body)


def _store_counts(service: Any) -> dict[str, int]:
    cur = service.store.cursor()
    try:
        return queries.counts(cur)
    finally:
        cur.close()


@dataclass(frozen=True)
class CellStory:
    """One cell's confirmed history over the run, for the summary."""

    model_id: str
    metric: str
    attribute: str
    flips: list[CellEvent]
    tiers: list[CellEvent]
    final: CellEvaluation | None

    @property
    def name(self) -> str:
        return f"{self.model_id} {self.metric} x {self.attribute}"

    def settled(self, tau: float) -> bool:
        """The confirmed verdict changed over the run and the final verdict is reliable:
        flip rate at most tau and a tier that is not High variance or Catastrophic (the
        report's rule, :func:`monitor.report.changes.reliable_verdict`)."""
        from monitor.report.changes import reliable_verdict

        if self.final is None:
            return False
        changed = bool(self.flips) and self.flips[0].old != self.final.confirmed_verdict
        tiers = {self.final.tier.tier.value, self.final.confirmed_tier}
        return changed and all(reliable_verdict(self.final.result.vfr, tau, t) for t in tiers)


def cell_stories(events: list[CellEvent], cells: list[CellEvaluation]) -> list[CellStory]:
    """Group confirmed events by cell; cells without confirmed flips or downgrades are left out."""
    by_cell: dict[tuple[str, str, str], list[CellEvent]] = {}
    for e in events:
        by_cell.setdefault((e.model_id, e.metric, e.attribute), []).append(e)
    final = {c.key: c for c in cells}
    out = []
    for key, evs in sorted(by_cell.items()):
        flips = [e for e in evs if e.kind == "verdict_flip"]
        tiers = [e for e in evs if e.kind == "tier_change" and e.direction != "pending"]
        if flips or any(e.direction == "downgrade" for e in tiers):
            out.append(CellStory(*key, flips, tiers, final.get(key)))
    return out


def certified_lines(events: list[CellEvent]) -> list[str]:
    """The certified pages (a certified verdict changed between pass and fail:
    docs/method.md section 11) per model, and the first certifications (notices)."""
    certified = [e for e in events if e.kind == CERTIFIED_CHANGE]
    pages = [e for e in certified if e.old != "undetermined"]
    lines = [
        f"  certified pages: {len(pages)}; first certifications (notices): "
        f"{len(certified) - len(pages)}"
    ]
    lines += [
        f"    {e.model_id} {e.metric} x {e.attribute}: {e.old} -> {e.new} at evaluation "
        f"{e.evaluation} (on {e.axes.get('records')} records)"
        for e in pages
    ]
    return lines


def _story_line(st: CellStory) -> str:
    path = " -> ".join([st.flips[0].old, *(e.new for e in st.flips)]) if st.flips else ""
    tiers = ""
    if st.tiers:
        names = [st.tiers[0].old, *(e.new for e in st.tiers)]
        tiers = " · tier " + " -> ".join(TIER_MARK[t] for t in names)
    value = None if st.final is None else float_or_none(st.final.result.value)
    shown = "n/a" if value is None else f"{value:.3f}"
    vfr = math.nan if st.final is None else st.final.result.vfr
    return (
        f"  {st.name}: verdict {path} (flip at evaluation "
        f"{', '.join(str(e.evaluation) for e in st.flips)}){tiers}; now {shown}, "
        f"VFR {vfr:.3f}"
    )


def _summary(
    service: Any,
    cfg: MonitorConfig,
    models: list[str],
    stream: ScoredStream,
    ds: Any,
    wall_s: float,
    db_path: Path,
    url: str,
    opts: DemoOptions,
) -> list[str]:
    counts = _store_counts(service)
    events = _confirmed_events(service)
    cells = service.released_cells()
    tau = cfg.axis1.tau_vfr
    stories = cell_stories(events, cells)
    settled = [st for st in stories if st.settled(tau)]
    noisy = [st for st in stories if st.flips and not st.settled(tau)]
    n_flips = sum(len(st.flips) for st in stories)
    n_down = sum(1 for e in events if e.kind == "tier_change" and e.direction == "downgrade")
    partial = sum(1 for c in cells if c.tier.partial)
    lines = [
        "",
        "=" * 72,
        f"vfr-monitor demo summary ({stream.dataset}, scenario {stream.scenario or 'none'})",
        f"  wall time {wall_s:.1f} s · {stream.n_discharges:,} discharges x {len(models)} "
        f"model(s) · {counts['discharges']:,} records stored · {counts['dead_letters']} dead "
        f"letters · {counts['window_results']:,} window results",
        *(f"  {m.model_id}: held-out AUROC {m.auroc:.3f}" for m in stream.models),
        f"  confirmed verdict flips: {n_flips} in {sum(1 for st in stories if st.flips)} cells;"
        f" confirmed tier downgrades: {n_down}",
        f"  verdicts that changed and are stable now (final VFR <= {tau:g}, tier not High "
        f"variance or Catastrophic): {len(settled)}",
        *(_story_line(st) for st in settled),
        f"  cells whose verdict flipped but is not trustworthy (VFR > {tau:g} or tier High "
        f"variance or Catastrophic now, or flipped back): {len(noisy)}",
        *(_story_line(st) for st in noisy[:8]),
        *(
            [f"  ... and {len(noisy) - 8} more (events table; /api/events with --follow)"]
            if len(noisy) > 8
            else []
        ),
        *certified_lines(events),
        *_outcome_lines(service, cells, opts, events),
        "  final grid (dominant verdict / tier; '~' = VFR above tau):",
        *tier_grid(cells, cfg, models),
    ]
    if partial:
        lines.append(f"  {partial} cells are partial: Axis 3 does not apply to this data")
    if ds is not None and not ds.real_dates:
        lines.append("  event_time is a replay clock (the file has no dates)")
    py = Path(sys.executable)
    lines += [
        f"  DuckDB file: {db_path.resolve()}",
        "  look at it (after the demo; DuckDB allows one writer process):",
        f"    {py} -c \"import duckdb; duckdb.connect('{db_path}', read_only=True)"
        ".sql('select * from events where confirmed order by id').show()\"",
        "  tables: discharges, dead_letters, window_results, cell_state, events, "
        "axis_results, job_runs",
    ]
    if opts.follow:
        lines.append(f"  metrics: {url}/metrics · API: {url}/api/cells")
    if shutil.which("duckdb"):
        lines.append(f"    or: duckdb -readonly {db_path}")
    return lines
