"""Exporter and read-only HTTP API: exposition contents, suppression, routes, and promtool.

The API is served for real on an ephemeral loopback port and fetched with
urllib; the StateView is an in-memory fake (it is our own interface, not an
external system). ``promtool check metrics`` is the reference linter for the
exposition format: it is required, and its absence fails the test instead of
skipping it, so a green run always means the real linter passed.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from email.message import Message

import numpy as np
import pytest
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from monitor.core.jsonable import dumps, to_jsonable
from monitor.core.results import CertifiedVerdict
from monitor.core.tiers import EVALUABLE_TIERS, Tier
from monitor.service.exporter import (
    ALLOWED_LABELS,
    MAX_REASONS,
    MIN_EXPORT_RECORDS,
    Exporter,
)
from monitor.service.http_server import serve
from tests.support.exporter_state import (
    cell,
    coverage_of,
    event,
    new_exporter,
    populate,
)

INF, NAN = math.inf, math.nan

#: name -> (type, label names): the contract with dashboards and alert rules.
EXPECTED = {
    "vfr_cell_value": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_vfr": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_dominant_pass": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_point_pass": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_sigma": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_ci_low": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_ci_high": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_n_star": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_kappa": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_tier_level": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_tier": ("gauge", {"model", "metric", "attribute", "tier"}),
    "vfr_cell_partial": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_not_evaluable": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_confirmed_tier_level": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_confirmed_pass": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_reliable_pass": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_last_event_info": (
        "gauge",
        {"model", "metric", "attribute", "kind", "explanation"},
    ),
    "vfr_cell_certified_verdict": ("gauge", {"model", "metric", "attribute"}),
    "vfr_cell_certified_change_records": ("gauge", {"model", "metric", "attribute"}),
    "vfr_certified_changes_total": (
        "counter",
        {"model", "metric", "attribute", "kind", "direction"},
    ),
    "vfr_verdict_flips_total": (
        "counter",
        {"model", "metric", "attribute", "direction", "state"},
    ),
    "vfr_tier_changes_total": (
        "counter",
        {"model", "metric", "attribute", "from_tier", "to_tier", "state"},
    ),
    "vfr_group_selection_rate": ("gauge", {"model", "attribute", "group"}),
    "vfr_group_records": ("gauge", {"model", "attribute", "group"}),
    "vfr_outcome_coverage_ratio": ("gauge", {"model", "attribute", "group"}),
    "vfr_outcome_median_delay_seconds": ("gauge", {"model", "attribute", "group"}),
    "vfr_outcome_coverage_gap_ratio": ("gauge", {"model", "attribute"}),
    "vfr_outcome_coverage_incomplete": ("gauge", {"model", "attribute"}),
    "vfr_ingest_records_total": ("counter", {"source", "state"}),
    "vfr_ingest_rejected_total": ("counter", {"source", "reason"}),
    "vfr_ingest_rejection_dominant": ("gauge", {"source", "reason"}),
    "vfr_consumer_lag_messages": ("gauge", {"source", "partition"}),
    "vfr_window_records": ("gauge", {"model"}),
    "vfr_last_evaluation_timestamp_seconds": ("gauge", {"model"}),
    "vfr_evaluations_total": ("counter", {"model"}),
    "vfr_evaluation_duration_seconds": ("histogram", {"model"}),
    "vfr_old_events_total": ("counter", {"model"}),
    "vfr_job_duration_seconds": ("gauge", {"task"}),
    "vfr_job_last_success_timestamp_seconds": ("gauge", {"task"}),
    "vfr_job_runs_total": ("counter", {"task", "state"}),
    "vfr_model_rolling_auroc": ("gauge", {"model"}),
    "vfr_model_rolling_accuracy": ("gauge", {"model"}),
    "vfr_drift_detections_total": ("counter", {"model", "metric", "attribute"}),
    "vfr_observer_failures_total": ("counter", set()),
    "vfr_build_info": ("gauge", {"version"}),
    "vfr_up": ("gauge", set()),
}


# ----------------------------------------------------------------------------- helpers
def samples(text: str | bytes, name: str) -> dict[frozenset, float]:
    """Series of one sample name: frozenset(label items) -> value."""
    if isinstance(text, bytes):
        text = text.decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out[frozenset(s.labels.items())] = s.value
    return out


def value(text: str | bytes, name: str, **labels: str) -> float | None:
    """The value of the series with exactly these labels, None when absent."""
    return samples(text, name).get(frozenset(labels.items()))


DI = {"model": "xgb", "metric": "DI", "attribute": "race"}


class FakeView:
    """In-memory StateView; records the arguments it was called with."""

    def __init__(self) -> None:
        self.is_ready = (True, "")
        self.calls: list[tuple] = []
        self.fail = False

    def ready(self) -> tuple[bool, str]:
        return self.is_ready

    def cells(self) -> list[dict]:
        if self.fail:
            raise RuntimeError("secret internal detail")
        return [
            {
                "model_id": "xgb",
                "metric": "DI",
                "attribute": "race",
                "value": NAN,
                "sigma": INF,
                "ci_low": -INF,
                "n_star": np.float64(INF),
                "kappa": np.float32(np.nan),
                "window_n": np.int64(5000),
                "stable": np.bool_(True),
                "tier": Tier.PENDING,
                "groups_left_out": ("0",),
                "counts": np.array([1, 2]),
            }
        ]

    def status_page(self) -> str:
        return "<!doctype html><title>status</title>"

    def events(self, limit: int, since_id: int | None) -> list[dict]:
        self.calls.append(("events", limit, since_id))
        return [{"id": 7, "kind": "verdict_flip", "axes": {"vfr": NAN, "n_star": INF}}]

    def windows(self, model: str, metric: str, attribute: str, limit: int) -> list[dict] | None:
        self.calls.append(("windows", model, metric, attribute, limit))
        if (model, metric, attribute) != ("xgb", "DI", "race"):
            return None
        return [{"evaluation": 3, "vfr": 0.2, "sigma": INF}]


@pytest.fixture
def api():
    exp, st = new_exporter()
    populate(exp, st)
    view = FakeView()
    server = serve(exp, view, port=0)
    try:
        yield server, exp, view
    finally:
        server.close()



def fetch(server, path: str, method: str = "GET") -> tuple[int, Message, bytes]:
    """(status, headers, body); header names are case-insensitive, as HTTP has them."""
    req = urllib.request.Request(server.url + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers, e.read()


def strict_json(body: bytes):
    """Parse as strict JSON: NaN / Infinity tokens are an error, not a float."""

    def reject(token: str):
        raise AssertionError(f"non-standard JSON constant {token}")

    return json.loads(body, parse_constant=reject)


# ----------------------------------------------------------------------------- exporter
def test_every_metric_has_the_documented_type_and_labels():
    exp, st = new_exporter()
    populate(exp, st)
    text = exp.render().decode()
    families = {}
    for f in text_string_to_metric_families(text):
        # The parser strips "_total" from counter family names; put it back.
        name = f.name + "_total" if f.type == "counter" else f.name
        labels = set()
        for s in f.samples:
            labels |= set(s.labels) - {"le"}
        families[name] = (f.type, labels)
    assert families == EXPECTED
    assert "_created" not in text  # filtered: no creation-time gauge families
    for _type, labels in families.values():
        assert labels <= ALLOWED_LABELS


def test_cell_values_and_non_finite_choices():
    exp, st = new_exporter()
    cell(st, sigma=INF, n_star=INF, ci_low=NAN, kappa=None, confirmed_tier=None)
    text = exp.render()
    assert value(text, "vfr_cell_value", **DI) == pytest.approx(0.83)
    assert value(text, "vfr_cell_vfr", **DI) == pytest.approx(0.24)
    assert value(text, "vfr_cell_dominant_pass", **DI) == 1
    assert value(text, "vfr_cell_sigma", **DI) == INF
    assert value(text, "vfr_cell_n_star", **DI) == INF
    assert math.isnan(value(text, "vfr_cell_ci_low", **DI))
    assert value(text, "vfr_cell_kappa", **DI) is None  # not computed: absent, not NaN
    assert value(text, "vfr_cell_confirmed_tier_level", **DI) is None
    assert value(text, "vfr_cell_tier_level", **DI) == 1

    cell(st, dominant_pass=False, kappa=0.3, confirmed_tier="High-Variance", partial=True)
    text = exp.render()
    assert value(text, "vfr_cell_dominant_pass", **DI) == 0
    assert value(text, "vfr_cell_kappa", **DI) == pytest.approx(0.3)
    assert value(text, "vfr_cell_confirmed_tier_level", **DI) == 2
    assert value(text, "vfr_cell_partial", **DI) == 1
    assert value(text, "vfr_cell_confirmed_pass", **DI) is None  # no confirmed verdict yet
    cell(st, confirmed_pass=False)
    assert value(exp.render(), "vfr_cell_confirmed_pass", **DI) == 0
    cell(st, confirmed_pass=True)
    assert value(exp.render(), "vfr_cell_confirmed_pass", **DI) == 1
    cell(st, confirmed_pass=True, reliable_verdict="fail")
    assert value(exp.render(), "vfr_cell_reliable_pass", **DI) == 0  # its own gauge
    cell(st, kappa=None)
    assert value(exp.render(), "vfr_cell_kappa", **DI) is None  # result withdrawn: gone


def test_tier_enum_has_exactly_one_current_tier():
    exp, st = new_exporter()
    for tier in EVALUABLE_TIERS:
        cell(st, tier=tier.value)
        series = samples(exp.render(), "vfr_cell_tier")
        assert len(series) == len(EVALUABLE_TIERS) == 5
        ones = [dict(k)["tier"] for k, v in series.items() if v == 1]
        assert ones == [tier.value]
        assert sum(series.values()) == 1
        assert value(exp.render(), "vfr_cell_tier_level", **DI) == tier.level


def test_not_evaluable_cell_has_no_verdict_vfr_or_tier_series():
    """Issue 24: an undefined cell exports only vfr_cell_not_evaluable = 1; the old code
    exported VFR 0, dominant pass 0 (fail) and a tier for it."""
    exp, st = new_exporter()
    cell(st, value=NAN, vfr=NAN, not_evaluable="fewer than two race groups have 20 positives")
    cell(st, metric="SPD")
    text = exp.render()
    assert value(text, "vfr_cell_not_evaluable", **DI) == 1
    assert value(text, "vfr_cell_not_evaluable", **{**DI, "metric": "SPD"}) == 0
    gone = ("vfr_cell_vfr", "vfr_cell_dominant_pass", "vfr_cell_point_pass",
            "vfr_cell_tier_level", "vfr_cell_confirmed_tier_level", "vfr_cell_kappa")  # fmt: skip
    for name in gone:
        assert value(text, name, **DI) is None, name
    assert not [k for k in samples(text, "vfr_cell_tier") if ("metric", "DI") in k]


def test_a_cell_the_exporter_cannot_label_does_not_cost_the_others_their_series():
    exp, st = new_exporter()
    cell(st, model="a b")  # not an identifier: left out at scrape time
    cell(st, model="xgb")
    text = exp.render()
    assert value(text, "vfr_cell_vfr", **DI) == pytest.approx(0.24)
    assert 'model="a b"' not in text.decode()


def test_event_counters_increase_per_state():
    exp, st = new_exporter()
    cell(st)
    flip = dict(DI, direction="pass_to_fail", state="raw")
    for expected in (1, 2, 3):
        exp.count_event(event(), 5000)
        assert value(exp.render(), "vfr_verdict_flips_total", **flip) == expected
    exp.count_event(event(confirmed=True), 5000)
    assert value(exp.render(), "vfr_verdict_flips_total", **dict(flip, state="confirmed")) == 1
    exp.count_event(event("tier_change", old="Pending", new="High-Variance", direction="p"), 5000)
    change = dict(DI, from_tier="Pending", to_tier="High-Variance", state="raw")
    assert value(exp.render(), "vfr_tier_changes_total", **change) == 1
    with pytest.raises(ValueError):
        exp.count_event(event(direction="sideways"), 5000)
    with pytest.raises(ValueError):
        exp.count_event(event("mood_swing", old="a", new="b"), 5000)

    exp.count_batch("scored", 5, 1, {"missing:score": 2})
    exp.count_batch("scored", 5, 0, {"missing:score": 1})
    text = exp.render()
    assert value(text, "vfr_ingest_records_total", source="scored", state="accepted") == 10
    assert value(text, "vfr_ingest_records_total", source="scored", state="duplicate") == 1
    assert value(text, "vfr_ingest_records_total", source="scored", state="rejected") == 3
    assert value(text, "vfr_ingest_rejected_total", source="scored", reason="missing:score") == 3

    exp.count_evaluation("xgb", 0.5)
    exp.count_evaluation("xgb", 2.0)
    st.model("xgb", last_evaluation_at=200.0)
    text = exp.render()
    assert value(text, "vfr_evaluations_total", model="xgb") == 2
    assert value(text, "vfr_evaluation_duration_seconds_count", model="xgb") == 2
    assert value(text, "vfr_evaluation_duration_seconds_sum", model="xgb") == pytest.approx(2.5)
    assert value(text, "vfr_last_evaluation_timestamp_seconds", model="xgb") == 200.0


def test_certified_verdicts_and_changes_are_exported_as_released():
    exp, st = new_exporter()
    cv = CertifiedVerdict  # verdict, records since, evaluable, last change, its records
    cell(st, certified=cv("fail", 1000, True, ("pass", "fail"), 8012, None, -2.0))
    cell(st, metric="SPD", certified=cv("undetermined", 4000, True, None, None, -1.0, -0.5))
    cell(st, metric="EOPP", certified=cv("pass", 300, True, ("undetermined", "pass"), 7, -3.0))
    cell(st, metric="TI")  # not certifiable: no series
    cell(st, metric="PP", window_n=7, certified=cv("pass", 0, True, ("fail", "pass"), 900))
    text = exp.render()
    got = {dict(k)["metric"]: v for k, v in samples(text, "vfr_cell_certified_verdict").items()}
    assert got == {"DI": -1.0, "SPD": 0.0, "EOPP": 1.0}  # PP: a window under the rule
    records = samples(text, "vfr_cell_certified_change_records")
    # rounded to 5; a change on fewer than 11 records has no series
    assert {dict(k)["metric"]: v for k, v in records.items()} == {"DI": 8010.0}
    page = event("certified_change", confirmed=True, axes={"records": 8010, "page": True})
    exp.count_event(page, 5000)
    exp.count_event(page, 5000)
    first = event("certified_change", old="undetermined", new="pass", confirmed=True,
                  direction="undetermined_to_pass", axes={"records": 2000, "page": False})
    exp.count_event(first, 5000)
    exp.count_event(first, 7)  # a window under the rule: not counted
    text = exp.render()
    assert value(text, "vfr_certified_changes_total", **DI, kind="page",
                 direction="pass_to_fail") == 2  # fmt: skip
    assert value(text, "vfr_certified_changes_total", **DI, kind="notice",
                 direction="undetermined_to_pass") == 1  # fmt: skip
    sentence = samples(text, "vfr_cell_last_event_info")
    said = [dict(k)["explanation"] for k in sentence if dict(k)["kind"] == "certified_change"]
    assert said == ["DI by race is certified pass for the first time, on 2000 records since "
                    "the previous change."]  # fmt: skip
    with pytest.raises(ValueError):
        exp.count_event(event("certified_change", direction="sideways"), 5000)


def test_last_confirmed_event_sentence_is_one_series_per_cell_and_kind():
    """The alert annotations quote vfr_cell_last_event_info's explanation label: the
    latest confirmed event's sentence, the older one's series removed (bounded labels)."""
    exp, st = new_exporter()
    cell(st)
    info = "vfr_cell_last_event_info"

    def sentences(text) -> dict[tuple[str, str], str]:
        out = {}
        for labels, v in samples(text, info).items():
            d = dict(labels)
            assert v == 1 and (d["kind"], d["metric"]) not in out  # one series per cell, kind
            out[(d["kind"], d["metric"])] = d["explanation"]
        return out

    exp.count_event(event(), 5000)  # a raw flip has no sentence
    assert sentences(exp.render()) == {}
    down = event("tier_change", old="Practical-Stability", new="Caution-Required",
                 confirmed=True, direction="downgrade", axes={"value": 0.81, "vfr": 0.19},
                 before={"value": 0.86, "vfr": 0.04})  # fmt: skip
    exp.count_event(down, 5000)
    first = ("DI by race moved from Stable to Caution: VFR rose from 0.04 to 0.19 (above "
             "0.10) as the value fell to 0.81, 0.01 from the threshold 0.80.")  # fmt: skip
    assert sentences(exp.render()) == {("tier_change", "DI"): first}
    flip = event(confirmed=True, axes={"value": 0.78, "vfr": 0.02}, before={"value": 0.81})
    exp.count_event(flip, 5000)
    up = event("tier_change", old="Caution-Required", new="Practical-Stability",
               confirmed=True, direction="upgrade", axes={"value": 0.9, "vfr": 0.0},
               before={"value": 0.81, "vfr": 0.19})  # fmt: skip
    for _ in range(3):  # the same event again changes nothing
        exp.count_event(up, 5000)
    text = exp.render()
    got = sentences(text)
    assert got == {
        ("verdict_flip", "DI"): "DI by race flipped from pass to fail: the value fell to "
        "0.78, 0.02 from the threshold 0.80; VFR 0.02.",
        ("tier_change", "DI"): "DI by race moved from Caution to Stable: VFR fell from 0.19 "
        "to 0.00 (at or below 0.10) as the value rose to 0.90, 0.10 from the threshold 0.80.",
    }
    assert first not in text.decode()  # the older sentence's series is gone
    # another cell has its own series; removing the model drops them all
    exp.count_event(event(metric="SPD", confirmed=True), 5000)
    assert len(sentences(exp.render())) == 3
    exp.remove_model("xgb")
    assert sentences(exp.render()) == {}
    exp.count_event(flip, 5000)  # and they come back cleanly
    assert len(sentences(exp.render())) == 1


def test_no_sentence_without_an_explain_function_or_with_a_bad_one():
    exp, _ = new_exporter(explain=None)
    exp.count_event(event(confirmed=True), 5000)
    assert samples(exp.render(), "vfr_cell_last_event_info") == {}
    for bad in ("two\nlines", "", "x" * 601):
        exp, _ = new_exporter(explain=lambda e, bad=bad: bad)
        with pytest.raises(ValueError, match="explanation"):
            exp.count_event(event(confirmed=True), 5000)
        assert samples(exp.render(), "vfr_cell_last_event_info") == {}
        # the event itself was counted before the sentence was refused
        assert value(exp.render(), "vfr_verdict_flips_total", **DI, direction="pass_to_fail",
                     state="confirmed") == 1  # fmt: skip


def test_jobs_lag_health_window():
    exp, st = new_exporter()
    exp.record_job("axis2", "success", 3.0, 1000.0)
    exp.record_job("axis2", "failure", 4.0, 2000.0)
    exp.record_job("axis2", "skipped", None, 3000.0)
    text = exp.render()
    for state in ("success", "failure", "skipped"):
        assert value(text, "vfr_job_runs_total", task="axis2", state=state) == 1
    assert value(text, "vfr_job_duration_seconds", task="axis2") == 4.0  # skipped: no duration
    assert value(text, "vfr_job_last_success_timestamp_seconds", task="axis2") == 1000.0
    with pytest.raises(ValueError):
        exp.record_job("axis2", "exploded", 1.0, 1.0)

    st.lag["scored"] = {0: 10, 1: 5, 2: 0}
    st.lag["scored"] = {0: 3, 2: -1}  # partition 1 revoked, 2 unknown
    lag = samples(exp.render(), "vfr_consumer_lag_messages")
    assert lag == {frozenset({"source": "scored", "partition": "0"}.items()): 3}

    st.model("xgb", auroc=0.8, accuracy=0.7)
    assert value(exp.render(), "vfr_model_rolling_auroc", model="xgb") == pytest.approx(0.8)
    st.model("xgb", auroc=None, accuracy=NAN)
    text = exp.render()
    assert value(text, "vfr_model_rolling_auroc", model="xgb") is None
    assert value(text, "vfr_model_rolling_accuracy", model="xgb") is None
    st.model("xgb", window_records=1234)
    exp.count_old_events("xgb", 2)
    text = exp.render()
    assert value(text, "vfr_window_records", model="xgb") == 1234
    assert value(text, "vfr_old_events_total", model="xgb") == 2


# ----------------------------------------------------------------------------- suppression
def groups_of(text, model="xgb", attribute="race") -> dict[str, tuple[float, float]]:
    rec = samples(text, "vfr_group_records")
    rate = samples(text, "vfr_group_selection_rate")
    out = {}
    for key, n in rec.items():
        d = dict(key)
        if d["model"] == model and d["attribute"] == attribute:
            out[d["group"]] = (n, rate[key])
    assert len(rate) == len(rec)  # the two gauges are suppressed together
    return out


def test_group_suppression_threshold_is_eleven_records():
    """The exporter gets released figures (rounded: 11 and 12 records show as 10; the
    release rule is monitor.stream.publication's, tested there); a count no release can
    produce (under 10) is still refused, as a second line of defence."""
    assert MIN_EXPORT_RECORDS == 11
    exp, st = new_exporter()
    st.groups("xgb", "race", {"0": (9, 0.3), "1": (10, 0.5), "2": (0, NAN)})
    text = exp.render().decode()
    assert groups_of(text) == {"1": (10, 0.5)}
    assert 'group="0"' not in text and 'group="2"' not in text


def test_group_dropping_below_threshold_disappears():
    exp, st = new_exporter()
    st.groups("xgb", "race", {"0": (20, 0.3), "1": (40, 0.6)})
    assert set(groups_of(exp.render())) == {"0", "1"}
    st.groups("xgb", "race", {"0": (5, 0.2), "1": (40, 0.6)})
    text = exp.render().decode()
    assert groups_of(text) == {"1": (40, 0.6)}
    assert 'group="0"' not in text  # removed, not set to 0 or NaN
    st.groups("xgb", "race", {})
    assert groups_of(exp.render()) == {}
    st.groups("xgb", "race", {"0": (11, 0.1)})  # and back once large enough
    assert groups_of(exp.render()) == {"0": (11, 0.1)}


def test_outcome_coverage_is_exported_per_group_from_released_label_cells():
    exp, st = new_exporter()
    cov = coverage_of({"0": (0.9, 2.5), "1": (0.63, 4.0), "2": (None, None)})
    for metric in ("EOPP", "EOD"):  # one attribute's cells carry the same figures
        cell(st, metric=metric, outcome_coverage=cov)
    cell(st, metric="DI")  # label-free: no coverage
    cell(st, metric="PP", attribute="sex", window_n=8, outcome_coverage=cov)  # under 11
    text = exp.render()
    race = {"model": "xgb", "attribute": "race"}
    assert samples(text, "vfr_outcome_coverage_ratio") == {
        frozenset({**race, "group": "0"}.items()): 0.9,
        frozenset({**race, "group": "1"}.items()): 0.63,
    }  # group 2 withheld: absent, not zeroed
    assert value(text, "vfr_outcome_median_delay_seconds", **race, group="1") == 4.0 * 86_400
    assert samples(text, "vfr_outcome_coverage_gap_ratio") == {frozenset(race.items()): 0.3}
    assert samples(text, "vfr_outcome_coverage_incomplete") == {frozenset(race.items()): 1.0}
    cell(st, metric="EOPP", outcome_coverage=coverage_of({"0": (0.9, 2.5), "1": (0.85, 3.0)}))
    cell(st, metric="EOD", outcome_coverage=coverage_of({"0": (0.9, 2.5), "1": (0.85, 3.0)}))
    assert value(exp.render(), "vfr_outcome_coverage_incomplete", **race) == 0.0


def test_small_window_cell_exports_nothing_per_cell():
    exp, st = new_exporter()
    cell(st, metric="DI", window_n=MIN_EXPORT_RECORDS - 1)
    cell(st, metric="SPD", window_n=MIN_EXPORT_RECORDS)
    exp.count_event(event(), MIN_EXPORT_RECORDS - 1)
    exp.count_event(event(confirmed=True), MIN_EXPORT_RECORDS - 1)  # no sentence either
    exp.count_drift("xgb", "DI", "race", MIN_EXPORT_RECORDS - 1)
    text = exp.render().decode()
    assert 'metric="DI"' not in text
    assert value(text, "vfr_cell_vfr", model="xgb", metric="SPD", attribute="race") is not None

    # A cell that was exported and then shrinks loses every per-cell state series.
    cell(st, metric="SPD", window_n=500)
    assert 'metric="SPD"' in exp.render().decode()
    cell(st, metric="SPD", window_n=5)
    assert "vfr_cell_vfr{" not in exp.render().decode()


def test_small_model_exports_no_window_size_or_health():
    """Released sizes are rounded to 5 (11 shows as 10); None is a withheld one, and a
    size no release can produce (under 10) is refused all the same."""
    exp, st = new_exporter()
    st.model("tiny", window_records=MIN_EXPORT_RECORDS - 2, auroc=1.0, accuracy=0.75)
    st.model("none", window_records=None, auroc=1.0, accuracy=0.75)
    st.model("xgb", window_records=MIN_EXPORT_RECORDS, auroc=0.8, accuracy=0.7)
    text = exp.render().decode()
    assert 'model="tiny"' not in text and 'model="none"' not in text
    assert value(text, "vfr_window_records", model="xgb") == MIN_EXPORT_RECORDS


# ----------------------------------------------------------------------------- cardinality
def test_label_values_are_bounded_identifiers():
    exp, st = new_exporter()
    for bad in ("John Smith, MRN 12345", "", "x" * 65, "a\nb", 'q"uote'):
        with pytest.raises(ValueError) as info:
            exp.count_event(event(model=bad), 5000)
        assert bad not in str(info.value) or not bad  # the value is never echoed
        with pytest.raises(ValueError):
            exp.record_job(bad, "success", 1.0, 1.0)
        cell(st, model=bad)  # state items with such labels never reach the exposition
        st.groups("xgb", "race", {bad: (50, 0.5)})
    text = exp.render().decode()
    assert "MRN" not in text and "uote" not in text and "xxxxx" not in text
    # Configured group codes may be any short printable text; nothing else passes.
    exp, st = new_exporter(group_codes=["<50", "African American"])
    st.groups("m", "age_group", {"<50": (50, 0.5)})
    st.groups("m", "race", {"African American": (50, 0.5), "John Smith, MRN 12345": (50, 0.5)})
    st.groups("m", "sex", {"<60": (50, 0.5)})
    got = {
        (d["model"], d["attribute"], d["group"])
        for d in (dict(k) for k in samples(exp.render(), "vfr_group_records"))
    }
    assert got == {("m", "age_group", "<50"), ("m", "race", "African American")}
    # Reasons: free text becomes "other", and at most MAX_REASONS distinct codes exist.
    for i in range(3 * MAX_REASONS):
        exp.count_batch("scored", 0, 0, {f"missing:field{i}": 1, f"free text {i}": 1})
    reasons = {dict(k)["reason"] for k in samples(exp.render(), "vfr_ingest_rejected_total")}
    assert len(reasons) == MAX_REASONS + 1 and "other" in reasons
    total = sum(samples(exp.render(), "vfr_ingest_rejected_total").values())
    assert total == 6 * MAX_REASONS  # folded, never dropped


def test_repeated_updates_do_not_grow_series_and_label_names_are_allowed():
    exp, st = new_exporter()
    populate(exp, st)
    before = len(exp.render().splitlines())
    for _ in range(50):
        populate(exp, st)
    assert len(exp.render().splitlines()) == before
    for family in text_string_to_metric_families(exp.render().decode()):
        assert family.name.startswith("vfr_")
        for s in family.samples:
            assert set(s.labels) - {"le"} <= ALLOWED_LABELS


def test_remove_model_drops_only_that_model():
    exp, st = new_exporter()
    populate(exp, st)
    cell(st, model="lgbm")
    st.model("lgbm", window_records=10)
    exp.remove_model("xgb")
    del st.models["xgb"]
    st.cells = {k: v for k, v in st.cells.items() if k[0] != "xgb"}
    text = exp.render().decode()
    assert 'model="xgb"' not in text
    assert value(text, "vfr_cell_vfr", model="lgbm", metric="DI", attribute="race") is not None
    assert value(text, "vfr_ingest_records_total", source="scored", state="accepted") == 100
    populate(exp, st)  # a redeployed model starts again cleanly
    assert 'model="xgb"' in exp.render().decode()


def test_registries_are_private():
    (a, sa), (b, _) = new_exporter("0.1.0"), new_exporter("0.2.0")  # same names twice
    populate(a, sa)
    assert b"vfr_cell_vfr{" not in b.render()
    assert value(b.render(), "vfr_build_info", version="0.2.0") == 1
    assert value(b.render(), "vfr_up") == 1
    assert not any(f.name.startswith("vfr_") for f in REGISTRY.collect())


# ----------------------------------------------------------------------------- promtool
def promtool(text: bytes) -> subprocess.CompletedProcess:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail(
            "promtool not found on PATH: it is the reference linter for /metrics. "
            "Install it (Debian: apt-get install -y prometheus) or run `make test`, "
            "which installs it."
        )
    return subprocess.run(
        [exe, "check", "metrics"], input=text, capture_output=True, timeout=60, check=False
    )


def test_promtool_catches_a_bad_exposition():
    """Guard: the linter really lints here, so the next test can fail."""
    bad = b"# HELP vfr_things Things.\n# TYPE vfr_things counter\nvfr_things 1\n"
    result = promtool(bad)
    assert result.returncode != 0 or (result.stdout + result.stderr).strip()


def test_metrics_pass_promtool_without_warnings(api):
    server, _exp, _view = api
    status, _headers, body = fetch(server, "/metrics")
    assert status == 200
    result = promtool(body)
    output = (result.stdout + result.stderr).decode()
    assert result.returncode == 0, output
    assert output.strip() == "", output


# ----------------------------------------------------------------------------- HTTP API
def test_server_binds_loopback_on_an_ephemeral_port(api):
    server, _exp, _view = api
    assert server.address[0] == "127.0.0.1"
    assert server.port > 0 and server.port != 9464
    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        pass


def test_close_releases_the_port():
    server = serve(Exporter("0.1.0"), FakeView(), port=0)
    port = server.port
    server.close()
    server.close()  # idempotent
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_metrics_healthz_readyz(api):
    server, _exp, view = api
    status, headers, body = fetch(server, "/metrics")
    assert status == 200 and headers["Content-Type"] == CONTENT_TYPE_LATEST
    assert value(body, "vfr_cell_vfr", **DI) == pytest.approx(0.24)

    status, headers, body = fetch(server, "/healthz")
    assert (status, body) == (200, b"ok\n")
    assert headers["Content-Type"].startswith("text/plain")

    status, headers, body = fetch(server, "/readyz")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert strict_json(body) == {"status": "ready"}
    view.is_ready = (False, "no evaluation yet")
    status, headers, body = fetch(server, "/readyz")
    assert status == 503 and headers["Content-Type"] == "application/json"
    assert strict_json(body) == {"status": "not ready", "reason": "no evaluation yet"}


def test_cells_json_is_strict_with_nan_and_inf(api):
    server, _exp, _view = api
    status, headers, body = fetch(server, "/api/cells")
    assert status == 200 and headers["Content-Type"] == "application/json"
    (row,) = strict_json(body)
    assert row["value"] is None  # NaN -> null
    assert row["kappa"] is None  # numpy NaN too
    assert row["sigma"] == "inf" and row["n_star"] == "inf" and row["ci_low"] == "-inf"
    assert row["window_n"] == 5000 and row["stable"] is True
    assert row["tier"] == "Pending" and row["groups_left_out"] == ["0"]
    assert row["counts"] == [1, 2]


def test_json_encoder_never_emits_invalid_json():
    nasty = {"a": [NAN, INF, -INF, np.float32(INF), np.nan], 1: (np.int64(3),)}
    assert strict_json(dumps(nasty)) == {"a": [None, "inf", "-inf", "inf", None], "1": [3]}
    assert to_jsonable(np.bool_(False)) is False


def test_events_route_and_parameters(api):
    server, _exp, view = api
    status, _headers, body = fetch(server, "/api/events")
    assert status == 200
    assert strict_json(body)[0]["axes"] == {"vfr": None, "n_star": "inf"}
    fetch(server, "/api/events?limit=5&since_id=42")
    fetch(server, "/api/events?limit=&since_id=")  # blank = not given
    assert view.calls == [("events", 100, None), ("events", 5, 42), ("events", 100, None)]
    for query, name in [
        ("limit=SECRETVALUE", "limit"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=-1", "limit"),
        ("limit=1&limit=2", "limit"),
        ("since_id=1.5", "since_id"),
        ("since_id=-3", "since_id"),
    ]:
        status, headers, body = fetch(server, "/api/events?" + query)
        assert status == 400, query
        assert headers["Content-Type"] == "application/json"
        assert strict_json(body) == {"error": "invalid parameter", "parameter": name}
        assert b"SECRETVALUE" not in body


def test_windows_route_and_parameters(api):
    server, _exp, view = api
    status, _headers, body = fetch(server, "/api/windows?model=xgb&metric=DI&attribute=race")
    assert status == 200
    assert strict_json(body) == [{"evaluation": 3, "vfr": 0.2, "sigma": "inf"}]
    fetch(server, "/api/windows?model=xgb&metric=DI&attribute=race&limit=7")
    assert view.calls[-2:] == [
        ("windows", "xgb", "DI", "race", 100),
        ("windows", "xgb", "DI", "race", 7),
    ]
    for query, name in [
        ("metric=DI&attribute=race", "model"),
        ("model=xgb&attribute=race", "metric"),
        ("model=xgb&metric=DI", "attribute"),
        ("model=xgb&metric=DI&attribute=", "attribute"),
        ("model=xgb&metric=DI&attribute=race&limit=lots", "limit"),
        ("model=" + "m" * 500 + "&metric=DI&attribute=race", "model"),
    ]:
        status, _headers, body = fetch(server, "/api/windows?" + query)
        assert status == 400, query
        assert strict_json(body) == {"error": "invalid parameter", "parameter": name}
    status, _headers, body = fetch(server, "/api/windows?model=SECRETVALUE&metric=DI&attribute=r")
    assert status == 404
    assert strict_json(body) == {"error": "unknown cell"}
    assert b"SECRETVALUE" not in body


def test_unknown_routes_and_methods(api):
    server, _exp, _view = api
    status, headers, body = fetch(server, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    for path in ("/metrics/", "/api", "/api/cells/x", "/SECRETVALUE", "/../etc/passwd"):
        status, headers, body = fetch(server, path)
        assert status == 404, path
        assert strict_json(body) == {"error": "not found"}
        assert b"SECRETVALUE" not in body
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"):
        for path in ("/metrics", "/api/cells", "/nope"):
            status, headers, body = fetch(server, path, method=method)
            assert status == 405, (method, path)
            assert headers["Allow"] == "GET"
            assert strict_json(body) == {"error": "method not allowed"}
    status, headers, body = fetch(server, "/healthz", method="HEAD")
    assert status == 405 and body == b""


def test_internal_errors_hide_details(api, caplog):
    server, _exp, view = api
    view.fail = True
    status, _headers, body = fetch(server, "/api/cells")
    assert status == 500
    assert strict_json(body) == {"error": "internal error"}
    assert b"secret internal detail" not in body and b"Traceback" not in body
    # the log names the failing route and exception type, never its text (it may quote data)
    assert "RuntimeError" in caplog.text and "secret internal detail" not in caplog.text


def test_malformed_request_line_is_not_echoed(api):
    server, _exp, _view = api
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"GET /SECRETVALUE HTTP/9x\r\n\r\n")
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and b" 400 " in head.split(b"\r\n")[0]
    assert b"SECRETVALUE" not in reply
    assert strict_json(body) == {"error": "bad request"}


def test_nothing_is_printed(api, capfd):
    server, _exp, _view = api
    for path in ("/metrics", "/healthz", "/nope", "/api/events?limit=x"):
        fetch(server, path)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
