"""The service's side of the exporter as an in-memory state (our own interface, not an
external system), and cells and events with sensible defaults: shared by the exporter's
tests and the dashboards' (which need an exposition holding every metric)."""

from __future__ import annotations

import math
from typing import Any

from monitor.core.cell_result import CellResult, Estimate, Evaluability
from monitor.core.coverage import AttributeCoverage, PublishedCoverage
from monitor.core.events import CellEvent, EventAxes
from monitor.core.explain import Cutoffs, explain_event
from monitor.core.results import Axis2Outcome, Axis3Outcome, CellEvaluation, CertifiedVerdict
from monitor.core.tiers import Tier, TierResult, not_evaluable_tier
from monitor.service.exporter import Exporter, GroupStat, ModelStatus, StateSnapshot

INF, NAN = math.inf, math.nan


class State:
    """The service's side of the exporter: a snapshot of cells, models and lag."""

    def __init__(self) -> None:
        self.cells: dict[tuple[str, str, str], CellEvaluation] = {}
        self.models: dict[str, ModelStatus] = {}
        self.lag: dict[str, dict[int, int]] = {}

    def snapshot(self) -> StateSnapshot:
        return StateSnapshot(list(self.cells.values()), list(self.models.values()), self.lag)

    def model(self, model_id: str = "xgb", **over) -> None:
        kw: dict[str, Any] = dict(window_records=5000, groups={}, auroc=None, accuracy=None)
        if model_id in self.models:
            m = self.models[model_id]
            kw = dict(window_records=m.window_records, groups=m.groups, auroc=m.auroc,
                      accuracy=m.accuracy, last_evaluation_at=m.last_evaluation_at)  # fmt: skip
        kw.update(over)
        self.models[model_id] = ModelStatus(model_id, **kw)

    def groups(self, model_id: str, attribute: str, groups: dict[str, tuple[int, float]]):
        current = dict(self.models[model_id].groups) if model_id in self.models else {}
        current[attribute] = {g: GroupStat(n, r) for g, (n, r) in groups.items()}
        self.model(model_id, groups=current)


def make_cell(model="xgb", metric="DI", attribute="race", **over) -> CellEvaluation:
    """A CellEvaluation with sensible defaults; keyword overrides of the exported fields."""
    kw: dict[str, Any] = dict(
        value=0.83, vfr=0.24, dominant_pass=True, point_pass=True, sigma=1.5, ci_low=0.78,
        ci_high=0.9, n_star=4000.0, kappa=0.55, tier=Tier.CAUTION_REQUIRED.value,
        partial=False, confirmed_tier=Tier.PRACTICAL_STABILITY.value, window_n=5000,
        confirmed_pass=None, not_evaluable="",
    )  # fmt: skip
    kw.update(over)
    ev = Evaluability(not kw["not_evaluable"], kw["not_evaluable"])
    result = CellResult(
        model_id=model, metric=metric, attribute=attribute, threshold=0.8, direction=">=",
        K=500, window_n=kw["window_n"], resample_n=kw["window_n"], groups_left_out=(),
        groups_left_out_point=(),
        raw=Estimate(
            kw["value"], "pass" if kw["point_pass"] else "fail", 380, kw["vfr"],
            "pass" if kw["dominant_pass"] else "fail", kw["sigma"], 0.83, 0.02, kw["ci_low"],
            kw["ci_high"], 0,
        ),
        evaluability=ev,
    )  # fmt: skip
    tier = TierResult(Tier(kw["tier"]), (), (), ("axis3",) if kw["partial"] else ())
    if kw["not_evaluable"]:
        tier = not_evaluable_tier(kw["not_evaluable"])
    cp = kw["confirmed_pass"]
    return CellEvaluation(
        result=result, evaluation=1, tier=tier, confirmed_tier=kw["confirmed_tier"],
        confirmed_verdict=None if cp is None else ("pass" if cp else "fail"),
        axis2=None if kw["n_star"] is None else Axis2Outcome(kw["n_star"]),
        axis3=None if kw["kappa"] is None else Axis3Outcome(True, kw["kappa"]),
        evaluated_at="2026-01-01 00:00:00+00:00",
        # the reliable verdict: the confirmed one unless a test says otherwise
        reliable_verdict=kw.get("reliable_verdict",
                                None if cp is None else ("pass" if cp else "fail")),
        outcome_coverage=kw.get("outcome_coverage"),
        certified=kw.get("certified"),
    )  # fmt: skip


def coverage_of(
    groups: dict[str, tuple[float | None, float | None]], max_gap: float = 0.10
) -> AttributeCoverage:
    """A label-based cell's published outcome coverage: group -> (coverage, median delay
    in days); the gap from the shown coverages, the reason as the service would give it."""
    shown = [c for c, _ in groups.values() if c is not None]
    gap = round(1 - min(shown) / max(shown), 2) if len(shown) >= 2 and max(shown) > 0 else None
    reason = "outcomes incomplete" if gap is not None and gap > max_gap else ""
    rows = tuple(PublishedCoverage(g, c, d) for g, (c, d) in groups.items())
    return AttributeCoverage(rows, gap, max_gap, reason)


def cell(st: State, model="xgb", metric="DI", attribute="race", **over) -> None:
    st.cells[(model, metric, attribute)] = make_cell(model, metric, attribute, **over)


def event(kind="verdict_flip", model="xgb", metric="DI", attribute="race", old="pass",
          new="fail", confirmed=False, direction="pass_to_fail", axes=None,
          before=None) -> CellEvent:  # fmt: skip
    return CellEvent(kind, model, metric, attribute, old, new, confirmed, direction, 1,
                     EventAxes(**(axes or {})), EventAxes(**(before or {})))  # fmt: skip


def explain(e: CellEvent) -> str:
    """The service's explain with a DI-like pass rule (the store passes its config's)."""
    return explain_event(e, Cutoffs(threshold=0.8, direction=">="))


def new_exporter(version: str = "0.1.0", **kw) -> tuple[Exporter, State]:
    st = State()
    kw.setdefault("explain", explain)
    return Exporter(version, state=st.snapshot, **kw), st


def populate(exp: Exporter, st: State) -> None:
    """Touch every metric so the exposition holds at least one series of each."""
    cell(st, sigma=INF, n_star=INF, ci_low=NAN, confirmed_pass=True,
         certified=CertifiedVerdict("fail", 1000, True, ("pass", "fail"), 8012, None, -2.0))
    cell(st, metric="SPD", partial=True, kappa=None, n_star=None, tier="Pending")
    cell(st, metric="EOPP", outcome_coverage=coverage_of({"0": (0.9, 2.5), "1": (0.63, 4.0)}))
    exp.count_event(event(), 5000)
    exp.count_event(
        event("certified_change", confirmed=True, axes={"records": 8010, "page": True}), 5000
    )
    exp.count_event(
        event("tier_change", old="Practical-Stability", new="Caution-Required", confirmed=True,
              direction="downgrade"), 5000,
    )  # fmt: skip
    st.model("xgb", window_records=5000, auroc=0.81, accuracy=0.77, last_evaluation_at=1.76e9)
    st.groups("xgb", "race", {"0": (10, 0.2), "1": (11, 0.5), "2": (500, 0.4)})
    exp.count_batch("scored", 100, 3, {"out_of_range:score": 2, "unknown_code:race": 1})
    exp.set_dominant_rejections("scored", ["unknown_model"])
    st.lag["scored"] = {0: 12, 1: 0}
    exp.count_evaluation("xgb", 1.7)
    exp.count_old_events("xgb", 4)
    exp.record_job("axis2", "success", 12.5, 1_760_000_100.0)
    exp.record_job("axis3", "failure", 2.0, 1_760_000_200.0)
    exp.count_drift("xgb", "DI", "race", 5000)
    exp.count_observer_failure()
