"""`vfr-monitor bench alerts`: how often the shipped alert rules page over the demo year.

The question is a user's one: run the demo (a synthetic year in which a model update from
2026-07-01 lowers female patients' scores in ``los-xgb-discharge`` only), put the alert
rules on it, and count what reaches a person. Everything on the path is the real thing:

1. The demo runs headless (the CLI runs :func:`monitor.demo.run_demo`: embedded source,
   DuckDB file, scheduler, as fast as it goes), or an existing demo file is read (``--db``).
2. Every evaluation's cells are read back from ``window_results`` as
   :class:`~monitor.core.results.CellEvaluation` and rendered by the service's own
   :class:`~monitor.service.exporter.Exporter` (small-cell rule included), one
   exposition per evaluation, parsed with prometheus_client's text parser.
3. The scrapes become promtool input series on the replay clock (below), and the rule
   files are evaluated by ``promtool test rules``. A bench-only recording rule marks each
   step at which an alert (a label set) starts firing; one ``count_over_time`` check per
   evaluation lists the alerts that started firing during it (the check expects nothing,
   so promtool prints what it got), and the listing is parsed.
4. Each alert's labels go through ``amtool config routes test`` on the Alertmanager
   configuration: receivers in :data:`PAGE_RECEIVERS` are pages, the others notices.

A firing *episode* is a run of consecutive rule evaluations at which an alert with the
same labels fires; counts are episodes per model and alert name. Alertmanager's grouping,
inhibition and repeats are not simulated (one episode is at least one notification). The
event sentences (``vfr_cell_last_event_info``) are not replayed: annotations do not change
what fires.

The replay clock (docs/decisions.md, "Pages and notices"): the rules are written in
wall-clock durations (``for: 10m``, ``changes(...[6h])``, ``keep_firing_for: 24h``), so the
time between evaluations decides what they mean. In the demo year one evaluation (one hop
of 1,000 records) is 83 to 123 hours of event time apart from the next, so no rule window
spans two evaluations; replayed one minute apart (the old clock), a 6-hour window spanned
the whole year. Each evaluation therefore gets its event-time gap, shortened to the rules'
*memory* (:func:`rule_memory_s`: the longest a rule's state can still change after its
inputs stopped changing) when it is longer: past that point every rule sits at a fixed
point, so the shortened replay fires exactly the episodes of the full-length one, at a
fraction of the rule evaluations. ``--gap`` sets one fixed gap instead (``--gap 60
--interval 60`` is the old clock). Samples and rule evaluations are ``--interval`` apart
(default 15 minutes, on the same grid, so no query falls between two samples).

``--rules`` and ``--alertmanager`` take other files, so the rules of an older commit can
be measured on the same DuckDB file (``git show REV:deploy/prometheus/rules/... > f``).
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pandas as pd
import yaml
from prometheus_client.parser import text_string_to_metric_families

from monitor.core.results import CellEvaluation
from monitor.data.cohort import DRIFT_START
from monitor.service.exporter import Exporter, StateSnapshot
from monitor.store.codec import evaluation_from_json

ROOT = Path(__file__).resolve().parents[2]
RULE_FILES = (
    ROOT / "deploy" / "prometheus" / "rules" / "vfr_recording.yml",
    ROOT / "deploy" / "prometheus" / "rules" / "vfr_alerts.yml",
)
ALERTMANAGER = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
#: Receivers that interrupt a person (deploy/alertmanager/alertmanager.yml); the rest are
#: notices (digest, ticket queue, low priority).
PAGE_RECEIVERS = frozenset({"pager", "governance"})
#: The planted change (monitor.data.scorer, scenario group_score_shift): this model's
#: cells by this attribute are the ones it moves.
PLANTED_MODEL, PLANTED_ATTRIBUTE = "los-xgb-discharge", "sex"
JOB, INSTANCE = "vfr-monitor", "127.0.0.1:9464"
#: Seconds between samples and between rule evaluations of the replay.
DEFAULT_INTERVAL_S = 900
#: The bench-only recording rule: 1 at the step after an alert (label set) started firing.
EDGE = "bench:alert_firing_edge"


@dataclass(frozen=True)
class Episode:
    """An alert (one label set) that started firing during an evaluation."""

    evaluation: int
    alertname: str
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Replay:
    """The replay clock of one model: where each evaluation starts, how long it lasts."""

    interval_s: int
    #: evaluation -> (start second, seconds until the next evaluation or the end)
    spans: dict[int, tuple[int, int]]

    @property
    def end_s(self) -> int:
        return max(s + g for s, g in self.spans.values())


# ------------------------------------------------------------------ input: the scrapes
def read_evaluations(
    db: str | Path,
) -> tuple[dict[str, dict[int, list[CellEvaluation]]], dict[str, dict[int, pd.Timestamp]], int]:
    """Per model, evaluation -> its cells (from window_results) and evaluation -> the event
    time of its window's last record; and the planted model's first evaluation whose
    window reaches the update (``DRIFT_START``)."""
    with duckdb.connect(str(db), read_only=True) as c:
        rows = c.execute(
            "SELECT model_id, evaluation, result FROM window_results "
            "ORDER BY model_id, evaluation, metric, attribute"
        ).fetchall()
        times = c.execute(
            "SELECT w.model_id, w.evaluation, max(d.event_time) FROM window_results w "
            "LEFT JOIN discharges d ON d.seq = w.window_last_seq GROUP BY 1, 2"
        ).fetchall()
        first = c.execute(
            "SELECT min(w.evaluation) FROM window_results w JOIN discharges d "
            "ON d.seq = w.window_last_seq WHERE w.model_id = ? AND d.event_time >= ?",
            [PLANTED_MODEL, DRIFT_START.to_pydatetime()],
        ).fetchone()
    out: dict[str, dict[int, list[CellEvaluation]]] = defaultdict(lambda: defaultdict(list))
    for model, evaluation, result in rows:
        out[model][int(evaluation)].append(evaluation_from_json(orjson.loads(result)))
    if not out:
        raise ValueError(f"{db}: window_results is empty (no evaluation to replay)")
    at: dict[str, dict[int, pd.Timestamp]] = defaultdict(dict)
    for model, evaluation, t in times:
        if t is None:
            raise ValueError(f"{db}: evaluation {evaluation} of {model} has no event time")
        at[model][int(evaluation)] = pd.Timestamp(t)
    update = -1 if first is None or first[0] is None else int(first[0])
    return {m: dict(v) for m, v in out.items()}, dict(at), update


def scrape(cells: Sequence[CellEvaluation]) -> dict[tuple[str, tuple], float]:
    """The service exporter's cell series for these cells: (name, labels) -> value."""
    snap = StateSnapshot(cells=tuple(cells))
    text = Exporter("bench", state=lambda: snap).render().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("vfr_cell_"):
                out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def _number(x: float) -> str:
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Inf" if x > 0 else "-Inf"
    return repr(float(x)) if x != int(x) else str(int(x))


def series_values(values: Sequence[float | None]) -> str:
    """promtool's expanding notation: N + 1 equal values as ``vxN``, N gaps as ``_xN``."""
    parts, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and _same(values[j + 1], values[i]):
            j += 1
        v = "_" if values[i] is None else _number(values[i])  # type: ignore[arg-type]  # None: checked on the line
        if v in ("NaN", "Inf", "-Inf"):  # promtool's "axN" takes finite numbers only
            parts.extend([v] * (j - i + 1))
        elif v == "_":  # "_xN" is N gaps
            parts.append("_" if j == i else f"_x{j - i + 1}")
        else:  # "axN" is N + 1 samples
            parts.append(v if j == i else f"{v}x{j - i}")
        i = j + 1
    return " ".join(parts)


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (a != a and b != b)


def _selector(name: str, labels: Iterable[tuple[str, str]]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in (("job", JOB), ("instance", INSTANCE), *labels))
    return f"{name}{{{inner}}}"


# ------------------------------------------------------------------ the replay clock
_DURATION = re.compile(r"([0-9.]+)(ms|y|w|d|h|m|s)")
_UNIT_S = {"y": 31_536_000.0, "w": 604_800.0, "d": 86_400.0, "h": 3600.0, "m": 60.0,
           "s": 1.0, "ms": 0.001}  # fmt: skip


def duration_s(text: str) -> float:
    """Seconds of a Prometheus or Go duration ("1h30m", "45s", "1h27m0s", "7d")."""
    return sum(float(n) * _UNIT_S[u] for n, u in _DURATION.findall(str(text)))


_RANGE = re.compile(r"\[\s*([0-9.]+[a-z]+(?:[0-9.]+[a-z]+)*)\s*(?::[^\]]*)?\]")
_OFFSET = re.compile(r"\boffset\s+([0-9.]+[a-z]+(?:[0-9.]+[a-z]+)*)")


def _rules(rule_files: Sequence[Path]) -> Iterable[dict]:
    for f in rule_files:
        for g in (yaml.safe_load(Path(f).read_text()) or {}).get("groups", []):
            yield from g.get("rules", [])


def rule_memory_s(rule_files: Sequence[Path]) -> float:
    """How long after its inputs stop changing an alert's state can still change.

    An alert expression reads at most its longest range or subquery window (plus any
    offset) into the past, on top of what a recording rule it reads looked back; once
    that is constant, the alert becomes firing within ``for`` or resolved within
    ``keep_firing_for`` and then stays. So the memory is the longest recording-rule
    window plus the largest (window + max(for, keep_firing_for)) of an alert.
    """
    alert, record = 0.0, 0.0
    for r in _rules(rule_files):
        expr = str(r.get("expr", ""))
        back = max((duration_s(d) for d in _RANGE.findall(expr)), default=0.0)
        back += max((duration_s(d) for d in _OFFSET.findall(expr)), default=0.0)
        if "alert" in r:
            hold = max(duration_s(r.get("for", "0s")), duration_s(r.get("keep_firing_for", "0s")))
            alert = max(alert, back + hold)
        else:
            record = max(record, back)
    return alert + record


def replay_clock(
    times: dict[int, pd.Timestamp], interval_s: int, memory_s: float, gap_s: int | None
) -> Replay:
    """Evaluation k starts where k - 1 ended; it lasts its event-time gap to k + 1, at most
    ``memory_s`` plus two intervals (``gap_s``: that many seconds instead), in whole
    intervals. The last evaluation gets the longest span."""
    longest = interval_s * math.ceil((memory_s + 2 * interval_s) / interval_s)
    ks = sorted(times)
    spans, start = {}, 0
    for i, k in enumerate(ks):
        if gap_s is not None:
            span = gap_s
        elif i + 1 < len(ks):
            span = min(longest, (times[ks[i + 1]] - times[k]).total_seconds())
        else:
            span = longest
        span = interval_s * max(1, math.ceil(span / interval_s))
        spans[k] = (start, span)
        start += span
    return Replay(interval_s, spans)


def build_series(by_eval: dict[int, list[CellEvaluation]], replay: Replay) -> tuple[list[str], int]:
    """promtool input series of one model on the replay clock, and the number of samples
    (one per interval; each evaluation's exposition holds until the next one)."""
    step = replay.interval_s
    n = replay.end_s // step + 1  # one more sample: the edges of the last step are read then
    in_force = [0] * n
    for k, (start, span) in replay.spans.items():
        for i in range(start // step, min(n, (start + span) // step + 1)):
            in_force[i] = k
    table: dict[tuple[str, tuple], dict[int, float]] = defaultdict(dict)
    for k, cells in by_eval.items():
        for key, v in scrape(cells).items():
            table[key][k] = v
    lines = []
    for (name, labels), by_k in sorted(table.items()):
        values = [by_k.get(k) for k in in_force]
        lines.append(f"      - series: '{_selector(name, labels)}'\n"
                     f"        values: '{series_values(values)}'")  # fmt: skip
    # the target is up for the whole replay (VFRMonitorTargetDown stays silent)
    lines.append(f"      - series: '{_selector('up', ())}'\n"
                 f"        values: '1x{n - 1}'")  # fmt: skip
    return lines, n


# ------------------------------------------------------------------ the rules
def alert_names(rule_files: Sequence[Path]) -> list[str]:
    """Every alert name in the rule files."""
    return sorted({str(r["alert"]) for r in _rules(rule_files) if "alert" in r})


def edge_rule_file(workdir: Path, interval_s: int) -> Path:
    """The bench-only rule: an alert that fires at step t - 1 and did not at t - 2, read at
    step t (both through ``offset``, so the order in which groups run does not matter)."""
    path = workdir / "bench_edges.yml"
    firing = 'ALERTS{alertstate="firing"}'
    path.write_text(yaml.safe_dump({"groups": [{"name": "bench-edges", "rules": [{
        "record": EDGE,
        "expr": f"({firing} offset {interval_s}s) unless ({firing} offset {2 * interval_s}s)",
    }]}]}))  # fmt: skip
    return path


def promtool_test(
    rule_files: Sequence[Path], series: list[str], replay: Replay
) -> tuple[str, dict[int, int]]:
    """A promtool unit-test file with one check per evaluation (expecting no alert start,
    so promtool lists the starts it got), and check time (s) -> evaluation."""
    step = replay.interval_s
    head = [
        "rule_files:",
        *(f"  - {Path(f).resolve()}" for f in rule_files),
        f"evaluation_interval: {step}s",
        "tests:",
        f"  - interval: {step}s",
        "    input_series:",
        *series,
        "    promql_expr_test:",
    ]
    checks, at = [], {}
    for k, (start, span) in sorted(replay.spans.items()):
        # edges of steps start .. start + span - step are recorded one step later
        t = start + span + step - 1
        at[t] = k
        checks.append(f"      - expr: 'count_over_time({EDGE}[{span}s])'\n"
                      f"        eval_time: {t}s\n        exp_samples: []")  # fmt: skip
    return "\n".join(head + checks) + "\n", at


_CHECK = re.compile(r'expr: ".*", time: ([0-9a-z.]+),')
_SAMPLE = re.compile(r'\{((?:[^}"]|"(?:[^"\\]|\\.)*")*)\}\s+([0-9.eE+-]+)')
_PAIR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_episodes(output: str, at: dict[int, int]) -> list[Episode]:
    """Alert starts per evaluation from promtool's failure listing (``got:`` of each check)."""
    out, evaluation = [], None
    for line in output.splitlines():
        m = _CHECK.search(line)
        if m:
            evaluation = at[round(duration_s(m.group(1)))]
            continue
        if "got:" not in line:
            continue
        if evaluation is None:  # a listing this parser cannot place would be lost
            raise RuntimeError(f"promtool output not understood: {line.strip()[:200]}")
        for inner, value in _SAMPLE.findall(line.split("got:", 1)[1]):
            labels = dict(_PAIR.findall(inner))
            labels.pop("alertstate", None)
            name = labels.pop("alertname")
            for _ in range(round(float(value))):
                out.append(Episode(evaluation, name, tuple(sorted(labels.items()))))
        evaluation = None
    return out


def replay_model(
    by_eval: dict[int, list[CellEvaluation]], replay: Replay, rule_files: Sequence[Path]
) -> list[Episode]:
    """The alert starts of one model's evaluations on this replay clock (one promtool run)."""
    with tempfile.TemporaryDirectory(prefix="vfr-bench-alerts-") as tmp:
        work = Path(tmp)
        edges = edge_rule_file(work, replay.interval_s)
        series, _ = build_series(by_eval, replay)
        test, at = promtool_test([*rule_files, edges], series, replay)
        return parse_episodes(run_promtool(test, work), at)


def run_promtool(test_yaml: str, workdir: Path) -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        raise RuntimeError("promtool not found: install the Debian package prometheus")
    path = workdir / "bench_alerts_test.yml"
    path.write_text(test_yaml)
    proc = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=3600
    )
    text = proc.stdout + proc.stderr
    # exit 0: nothing fired; exit 1 with "got:" listings: alerts fired; anything else
    # (a rule or series parse error, a crash) is an error, never "no alerts"
    if not (proc.returncode == 0 or (proc.returncode == 1 and "got: {" in text)):
        raise RuntimeError(f"promtool test rules failed to run:\n{text[-2000:]}")
    errors = [line.strip() for line in text.splitlines() if ", err: " in line]
    if errors:  # a rule that could not be evaluated would count as silent
        raise RuntimeError("promtool could not evaluate a rule: " + "; ".join(errors[:3]))
    return text


def receiver(labels: dict[str, str], alertmanager: Path) -> str:
    """The receiver Alertmanager's routing tree picks for these labels (amtool)."""
    amtool = shutil.which("amtool")
    if amtool is None:
        raise RuntimeError("amtool not found: install the Debian package prometheus-alertmanager")
    proc = subprocess.run(
        [amtool, "config", "routes", "test", f"--config.file={alertmanager}",
         *(f"{k}={v}" for k, v in sorted(labels.items()))],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"amtool routes test failed: {proc.stderr.strip()}")
    return proc.stdout.strip().split(",")[0]


# ------------------------------------------------------------------ counting
def summarise(
    eps: list[Episode], models: Sequence[str], route: dict[str, str], update_eval: int
) -> dict:
    """Pages and notices per model, and when the planted change first paged."""
    per_model: dict[str, dict[str, Any]] = {m: {"pages": {}, "notices": {}} for m in models}
    for e in eps:
        m = dict(e.labels).get("model")
        if m not in per_model:
            continue
        kind = "pages" if route[e.alertname] in PAGE_RECEIVERS else "notices"
        per_model[m][kind][e.alertname] = per_model[m][kind].get(e.alertname, 0) + 1
    for d in per_model.values():
        d["pages_total"] = sum(d["pages"].values())
        d["notices_total"] = sum(d["notices"].values())
    planted = sorted(
        (e.evaluation, e.alertname, dict(e.labels).get("metric", "")) for e in eps
        if dict(e.labels).get("model") == PLANTED_MODEL
        and dict(e.labels).get("attribute") == PLANTED_ATTRIBUTE
        and route[e.alertname] in PAGE_RECEIVERS and 0 < update_eval <= e.evaluation
    )  # fmt: skip
    first = planted[0] if planted else None
    return {
        "models": per_model,
        "planted": {
            "model": PLANTED_MODEL,
            "attribute": PLANTED_ATTRIBUTE,
            "update_starts": str(DRIFT_START.date()),
            "first_evaluation_after_update": update_eval if update_eval > 0 else None,
            "first_page_evaluation": None if first is None else first[0],
            "first_page_alert": None if first is None else first[1],
            "first_page_cell": None if first is None else f"{first[2]} x {PLANTED_ATTRIBUTE}",
            "evaluations_to_first_page": None if first is None else first[0] - update_eval,
        },
    }


# ------------------------------------------------------------------ entry point
def run_alerts_bench(
    db: str | Path,
    *,
    interval_s: int = DEFAULT_INTERVAL_S,
    gap_s: int | None = None,
    rule_files: Sequence[Path] = RULE_FILES,
    alertmanager: Path = ALERTMANAGER,
) -> dict:
    """Pages and notices per model when the rules run over the demo year (see module doc)."""
    if not 15 <= interval_s <= 3600:
        # samples and rule evaluations share one grid, so no query falls between two
        # samples; longer than an hour would round the rules' own durations too coarsely
        raise ValueError("interval_s: must be between 15 and 3600 seconds")
    if gap_s is not None and gap_s < interval_s:
        raise ValueError("gap_s: must be at least interval_s")
    rule_files = [Path(f) for f in rule_files]
    path = Path(db)
    if not path.is_file():
        raise ValueError(f"--db: no such file {path}")
    evals, times, update_eval = read_evaluations(path)
    memory = rule_memory_s(rule_files)
    eps: list[Episode] = []
    clocks = {}
    for model in sorted(evals):  # one promtool run per model: smaller queries
        clocks[model] = replay = replay_clock(times[model], interval_s, memory, gap_s)
        eps += replay_model(evals[model], replay, rule_files)
    eps.sort(key=lambda e: (e.evaluation, e.alertname, e.labels))
    static = _static_labels(rule_files)
    names = alert_names(rule_files)
    route = {n: receiver(static.get(n, {}) | {"alertname": n}, alertmanager) for n in names}
    out = summarise(eps, sorted(evals), route, update_eval)
    gaps = [
        (b - a).total_seconds() / 3600
        for t in times.values()
        for a, b in zip(sorted(t.values())[:-1], sorted(t.values())[1:], strict=True)
    ]
    out.update(
        db=str(path),
        interval_s=interval_s,
        replay={
            "gap_s": gap_s,
            "rule_memory_s": memory,
            "longest_span_s": max(max(s for _, s in c.spans.values()) for c in clocks.values()),
            "event_time_gap_hours": {
                "min": round(min(gaps), 1) if gaps else None,
                "median": round(float(pd.Series(gaps).median()), 1) if gaps else None,
                "max": round(max(gaps), 1) if gaps else None,
            },
            "rule_evaluations": {m: c.end_s // interval_s + 1 for m, c in clocks.items()},
        },
        evaluations={m: max(v) for m, v in evals.items()},
        rule_files=[str(f) for f in rule_files],
        receivers=route,
        episodes=[_episode_row(e) for e in eps],
    )
    return out


def _episode_row(e: Episode) -> dict[str, object]:
    labels = dict(e.labels)
    cell: dict[str, object] = {
        x: labels[x] for x in ("model", "metric", "attribute") if x in labels
    }
    return {"evaluation": e.evaluation, "alert": e.alertname, **cell}


def _static_labels(rule_files: Sequence[Path]) -> dict[str, dict[str, str]]:
    """Alert name -> its rule's severity and team labels (what the routing matches on)."""
    return {
        str(r["alert"]): {k: str(v) for k, v in (r.get("labels") or {}).items()}
        for r in _rules(rule_files)
        if "alert" in r
    }


def frame(result: dict) -> pd.DataFrame:
    """Pages and notices per model as a small table (for the text output)."""
    rows = []
    for m, d in result["models"].items():
        for kind in ("pages", "notices"):
            for name, n in sorted(d[kind].items()):
                rows.append({"model": m, "kind": kind[:-1], "alert": name, "episodes": n})
    return pd.DataFrame(rows, columns=["model", "kind", "alert", "episodes"])
