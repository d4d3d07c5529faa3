"""Live alerting: the service, a real Prometheus and a real Alertmanager, end to end.

The vfr-monitor service runs in-process on 127.0.0.1 (ephemeral port); Prometheus and
Alertmanager (Debian's ``prometheus`` 2.42 and ``prometheus-alertmanager`` 0.25, started
here as subprocesses on free 127.0.0.1 ports with data directories in tmp) scrape it and
evaluate the repository's rules. The test fails (never skips) when the binaries are
missing: ``make test`` installs them (``make system-deps``).

What runs, and how it differs from production:

* Prometheus scrapes every 1 s and evaluates every 1 s. Its rule files are COPIES of
  ``deploy/prometheus/rules/*.yml`` that differ ONLY in durations: every ``for:`` and
  ``keep_firing_for:`` value is replaced by a few seconds (a regex on the text; the number
  of substitutions is asserted to equal the number of such keys in the parsed YAML, and
  the parsed copies are asserted equal to the originals once those keys are removed).
  The 1h lookback of VFRConfirmedTierDowngrade is kept: the test is shorter than an hour.
* Alertmanager uses a copy of ``deploy/alertmanager/alertmanager.yml`` whose
  ``group_wait``, ``group_interval`` and ``repeat_interval`` are shortened (again only
  durations). Its webhook receivers point at an unused local port; delivery failures do
  not matter here, the test reads Alertmanager's API.

Scenario (one model, deterministic numpy records; cell DI x sex is the one watched):

* A: every group is selected at the same rate (DI = 1, VFR = 0): after Axis 2/3/EquiLense
  and retention ran (run_now_blocking) and a few evaluations, the confirmed tiers are set.
* B: sex "0" is selected at 0.8 x the rate of sex "1" (DI right at the 0.80 threshold,
  VFR ~ 0.5 > tau_VFR): Axis 1 fails too, the confirmed tier level of DI x sex goes up
  after confirm_windows evaluations. The verdict behind it is not reliable, so the
  notice VFRVerdictUnreliable fires and reaches Alertmanager's governance-notices
  receiver, and the page VFRConfirmedTierDowngrade stays silent for the cell.
* C: back to the A distribution: the confirmed tier and verdict recover and the notice
  resolves (Prometheus no longer has it firing, Alertmanager no longer lists it as active).
* B2, C2: the same downgrade and recovery again. Prometheus counters are born at 1 on
  their first inc(), so ``increase()`` only sees a (cell, from_tier, to_tier) transition
  or a (cell, direction) confirmed verdict flip the second time it happens: the repeat
  gives the "Confirmed tier changes in the time range" and "Cells with confirmed verdict
  flips" panels their data.

A few invalid records (score out of range) are sent so the rejection panels have data,
and the consumer lag is reported as the embedded source would (service.set_lag).

Checked through the HTTP APIs: the scrape target is up, every panel query of
``deploy/grafana/dashboards/*.json`` (template variables substituted) returns data, the
alert's life cycle above, and ``promtool check metrics`` accepts the service's /metrics.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml

from consumers.base import (
    Origin,
)
from monitor.config import config_from_mapping
from monitor.core.tiers import Tier
from monitor.service.app import MonitorService
from tests.support.servers import (
    PortTakenError,
    free_ports,
    get_json,
    get_text,
    panel_queries,
    shorten_durations,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "deploy" / "prometheus" / "rules"
AM_CONFIG = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"

BINARIES = {
    "prometheus": "prometheus",
    "promtool": "promtool",
    "alertmanager": "prometheus-alertmanager",
    "amtool": "amtool",
}

MODEL = "model-live"
SOURCE = "embedded"
WATCH = {"model": MODEL, "metric": "DI", "attribute": "sex"}
#: A downgrade that comes with an unreliable verdict (VFR above tau at the threshold) is a
#: notice, not a page (issue 12: pages a board can trust); the page must stay silent.
ALERT = "VFRVerdictUnreliable"
PAGE = "VFRConfirmedTierDowngrade"

CFG = config_from_mapping(
    {
        "window": {"size": 2000, "hop_records": 500, "hop_seconds": 0},
        "axis1": {"K": 200},
        "axis2": {"sizes": [200, 500, 1000], "R": 10},
        "axis3": {"folds": 5},
        "equilense": {"features": []},
        "confirm_windows": 2,
        "service": {"http": {"host": "127.0.0.1"}},
        "models": [{"id": "model-live"}],
    }
)

#: Template variables of the dashboards -> concrete values for this scenario.
TEMPLATE_VARS = {
    "model": MODEL,
    "metric": WATCH["metric"],
    "attribute": WATCH["attribute"],
    "source": SOURCE,
    "task": "axis2",
    "threshold": "0.8",
    "__range": "1h",
    "__rate_interval": "5m",
    "__interval": "15s",
}

TEST_FOR = "3s"
TEST_KEEP_FIRING_FOR = "2s"


# ----------------------------------------------------------------------------- helpers
def _binaries() -> dict[str, str]:
    found = {k: shutil.which(v) for k, v in BINARIES.items()}
    missing = [BINARIES[k] for k, v in found.items() if v is None]
    if missing:
        pytest.fail(
            f"missing {', '.join(missing)}: this test needs Prometheus and Alertmanager; "
            "`make test` installs them (Debian packages prometheus, prometheus-alertmanager)"
        )
    return found  # type: ignore[return-value]


def _records(rng, n: int, start: int, sel_rate_sex0: float, sel_rate_sex1: float) -> list[bytes]:
    """``n`` scored discharges of MODEL, in blocks of HOP records with exact sex rates.

    Every block of ``hop_records`` has exactly half of each sex and exactly
    round(rate * half) selected records per sex (order shuffled), so every evaluated window
    has the intended selection rates, hence DI, exactly; only the bootstrap varies. The
    other attributes, hospitals and labels are random (seeded).
    """
    hop = CFG.window.hop_records
    assert n % hop == 0 and hop % 2 == 0, (n, hop)
    half = hop // 2
    sex_parts, dec_parts = [], []
    for _ in range(n // hop):
        sex = np.repeat([0, 1], half)
        dec = np.concatenate(
            [np.arange(half) < round(r * half) for r in (sel_rate_sex0, sel_rate_sex1)]
        )
        order = rng.permutation(hop)
        sex_parts.append(sex[order])
        dec_parts.append(dec[order])
    sex, decision = np.concatenate(sex_parts), np.concatenate(dec_parts)
    race = rng.integers(0, 5, n)
    eth = rng.integers(0, 2, n)
    age = rng.integers(0, 4, n)
    hospital = rng.integers(0, 20, n)
    score = np.where(decision, rng.uniform(0.5, 1.0, n), rng.uniform(0.0, 0.4999, n))
    label = (rng.uniform(size=n) < np.where(decision, 0.7, 0.3)).astype(int)
    return [
        json.dumps(
            {
                "record_id": f"r{start + i}",
                "model_id": MODEL,
                "event_time": "2026-11-01T00:00:00Z",
                "hospital_id": f"h{hospital[i]}",
                "race": str(race[i]),
                "sex": str(sex[i]),
                "ethnicity": str(eth[i]),
                "age_group": str(age[i]),
                "score": float(score[i]),
                "label": int(label[i]),
            }
        ).encode()
        for i in range(n)
    ]


class Feeder:
    """Feeds the service like the embedded source: batches, offsets, lag."""

    def __init__(self, service: MonitorService, seed: int = 20261101):
        self.service = service
        self.rng = np.random.default_rng(seed)
        self.offset = 0

    def send(self, payloads: list[bytes], batch: int = 500) -> None:
        total = len(payloads)
        for i in range(0, total, batch):
            chunk = payloads[i : i + batch]
            origins = [Origin("scored", 0, self.offset + j) for j in range(len(chunk))]
            self.service.pipeline.ingest_batch(chunk, origins)
            self.offset += len(chunk)
            self.service.pipeline.flush()
            self.service.set_lag({("scored", 0): total - i - len(chunk)})

    def phase(self, n: int, sex0: float, sex1: float) -> None:
        self.send(_records(self.rng, n, self.offset, sex0, sex1))

    def invalid(self, n: int) -> None:
        bad = []
        good = _records(self.rng, CFG.window.hop_records, self.offset, 0.6, 0.6)
        for i in range(n):
            r = json.loads(good[i])
            r["record_id"] = f"bad{self.offset + i}"
            r["score"] = 1.5  # out of range
            bad.append(json.dumps(r).encode())
        self.send(bad)


class Servers:
    """Prometheus + Alertmanager subprocesses and their HTTP helpers."""

    def __init__(self, tmp: Path, service_target: str, bins: dict[str, str]):
        self.tmp, self.bins = tmp, bins
        self.procs: list[subprocess.Popen] = []
        self.target = service_target
        self._choose_ports()

    def _choose_ports(self) -> None:
        self.prom_port, self.am_port, self.webhook_port = free_ports(3)
        self.prom = f"http://127.0.0.1:{self.prom_port}"
        self.am = f"http://127.0.0.1:{self.am_port}"

    def write_configs(self) -> tuple[Path, Path]:
        rules, substituted = [], 0
        for src in sorted(RULES_DIR.glob("*.yml")):
            dst = self.tmp / "rules" / src.name
            dst.parent.mkdir(exist_ok=True)
            text, n = shorten_durations(
                src.read_text(), {"for": TEST_FOR, "keep_firing_for": TEST_KEEP_FIRING_FOR}
            )
            dst.write_text(text)
            rules.append(str(dst))
            substituted += n
        # the alert rules have durations (VFRConfirmedTierDowngrade: for and keep_firing_for)
        assert substituted >= 2 and rules, substituted
        prom_cfg = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": rules,
            "alerting": {
                "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{self.am_port}"]}]}]
            },
            "scrape_configs": [
                {
                    "job_name": "vfr-monitor",
                    "scrape_interval": "1s",
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": [self.target]}],
                }
            ],
        }
        prom_path = self.tmp / "prometheus.yml"
        prom_path.write_text(yaml.safe_dump(prom_cfg, sort_keys=False))
        am_text, n = shorten_durations(
            AM_CONFIG.read_text(),
            {"group_wait": "1s", "group_interval": "1s", "repeat_interval": "1m"},
        )
        assert n >= 3, n
        # receivers: an unused local port instead of the placeholder 5001
        am_text = am_text.replace("127.0.0.1:5001", f"127.0.0.1:{self.webhook_port}")
        am_path = self.tmp / "alertmanager.yml"
        am_path.write_text(am_text)
        for cmd in (
            [self.bins["promtool"], "check", "rules", *rules],
            [self.bins["promtool"], "check", "config", str(prom_path)],
            [self.bins["amtool"], "check-config", str(am_path)],
        ):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, (cmd, r.stdout, r.stderr)
        return prom_path, am_path

    def start(self, attempts: int = 3) -> None:
        for attempt in range(attempts):
            try:
                return self._start_once()
            except PortTakenError:
                self.stop()
                self.procs = []
                if attempt == attempts - 1:
                    raise
                self._choose_ports()

    def _start_once(self) -> None:
        prom_path, am_path = self.write_configs()
        self._spawn(
            "alertmanager",
            [
                self.bins["alertmanager"],
                f"--config.file={am_path}",
                f"--storage.path={self.tmp / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{self.am_port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
        )
        self._spawn(
            "prometheus",
            [
                self.bins["prometheus"],
                f"--config.file={prom_path}",
                f"--storage.tsdb.path={self.tmp / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{self.prom_port}",
                "--log.level=warn",
            ],
        )
        wait_for("Alertmanager ready", lambda: self._ok(self.am + "/-/ready"), timeout=30)
        wait_for("Prometheus ready", lambda: self._ok(self.prom + "/-/ready"), timeout=30)

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        proc.log_file = log  # type: ignore[attr-defined]
        self.procs.append(proc)

    def _ok(self, url: str) -> bool:
        for p in self.procs:
            if p.poll() is not None:
                log = Path(p.log_file.name).read_text()[-2000:]  # type: ignore[attr-defined]
                if "address already in use" in log:
                    raise PortTakenError(log)
                pytest.fail(f"{p.args[0]} exited with {p.returncode}:\n{log}")
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
            p.log_file.close()  # type: ignore[attr-defined]

    # ---- Prometheus API
    def query(self, expr: str) -> list[dict]:
        url = self.prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        body = get_json(url)
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def prom_alerts(self, name: str = ALERT, state: str | None = None) -> list[dict]:
        alerts = get_json(self.prom + "/api/v1/alerts")["data"]["alerts"]
        return [
            a
            for a in alerts
            if a["labels"].get("alertname") == name and (state is None or a["state"] == state)
        ]

    def am_alerts(self, name: str = ALERT) -> list[dict]:
        url = (
            self.am + "/api/v2/alerts?" + urllib.parse.urlencode({"filter": f'alertname="{name}"'})
        )
        return [a for a in get_json(url) if a["status"]["state"] == "active"]


def _selector(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _is_watched(labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in WATCH.items())


def _substitute(expr: str) -> str:
    def repl(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        assert name in TEMPLATE_VARS, f"no test value for template variable ${name} in {expr}"
        return TEMPLATE_VARS[name]

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", repl, expr)


def _confirmed_level(service: MonitorService) -> int | None:
    for c in service.cells():
        if c["model_id"] == MODEL and c["metric"] == "DI" and c["attribute"] == "sex":
            t = c.get("confirmed_tier")
            return None if t is None else Tier(t).level
    return None


# ----------------------------------------------------------------------------- the test
def test_tier_downgrade_alert_fires_reaches_alertmanager_and_resolves(tmp_path):
    bins = _binaries()
    timings: dict[str, float] = {}
    fired: set[tuple[str, str]] = set()
    t0 = time.monotonic()
    service = MonitorService(
        CFG, db_path=str(tmp_path / "live.duckdb"), http_port=0, start_scheduler=False
    )
    servers: Servers | None = None
    try:
        service.start()
        assert service.api is not None
        target = urllib.parse.urlparse(service.api.url).netloc
        servers = Servers(tmp_path, target, bins)
        servers.start()
        feed = Feeder(service)
        timings["start"] = time.monotonic() - t0

        # ---- phase A: stable, slow axes ran, confirmed tiers set
        t = time.monotonic()
        feed.phase(2000, 0.6, 0.6)
        for job in ("axis2", "axis3", "equilense", "retention"):
            outcome = service.scheduler.run_now_blocking(job)
            assert outcome.state == "success", outcome
        feed.phase(1500, 0.6, 0.6)
        feed.invalid(5)
        cells = [c for c in service.cells() if c["model_id"] == MODEL]
        assert cells and all(c["tier"] != "Pending" for c in cells), cells
        level_a = _confirmed_level(service)
        assert level_a is not None and level_a >= 0, level_a

        def target_up():
            active = get_json(servers.prom + "/api/v1/targets")["data"]["activeTargets"]
            url = service.api.url
            return [a for a in active if a["health"] == "up" and a["scrapeUrl"].startswith(url)]

        assert len(wait_for("the service target up", target_up)) == 1

        def prom_level():
            r = servers.query("vfr_cell_confirmed_tier_level" + _selector(WATCH))
            return r and float(r[0]["value"][1])

        wait_for("Prometheus to see the phase A level", lambda: prom_level() == level_a or None)
        time.sleep(3)  # a few scrapes of the stable level (the downgrade rule's baseline)
        assert not servers.prom_alerts(), servers.prom_alerts()
        timings["A"] = time.monotonic() - t

        def downgrade(label: str) -> None:
            t = time.monotonic()
            feed.phase(3500, 0.468, 0.6)  # DI = 0.78: Axis 1 fails (VFR ~ 0.3), verdict flips
            level = _confirmed_level(service)
            assert level is not None and level > level_a, (level, level_a)
            wait_for(
                f"{ALERT} firing in Prometheus ({label})",
                lambda: [
                    a for a in servers.prom_alerts(state="firing") if _is_watched(a["labels"])
                ],
            )
            fired.update(
                (a["labels"]["metric"], a["labels"]["attribute"])
                for a in servers.prom_alerts(state="firing")
            )
            am = wait_for(
                f"{ALERT} active in Alertmanager ({label})",
                lambda: [a for a in servers.am_alerts() if _is_watched(a["labels"])],
            )
            assert am[0]["labels"]["severity"] == "info"
            assert am[0]["labels"]["team"] == "governance"
            assert "governance-notices" in [r["name"] for r in am[0]["receivers"]]
            # no page for a downgrade whose verdict cannot be relied on
            pages = [a for a in servers.prom_alerts(PAGE) if _is_watched(a["labels"])]
            assert not pages, pages
            timings[label] = time.monotonic() - t

        def recovery(label: str) -> None:
            t = time.monotonic()
            feed.phase(2500, 0.6, 0.6)
            assert _confirmed_level(service) == level_a
            wait_for(
                f"{ALERT} no longer firing in Prometheus ({label})",
                lambda: not [a for a in servers.prom_alerts() if _is_watched(a["labels"])],
            )
            wait_for(
                f"{ALERT} resolved in Alertmanager ({label})",
                lambda: not [a for a in servers.am_alerts() if _is_watched(a["labels"])],
            )
            timings[label] = time.monotonic() - t

        downgrade("B")
        recovery("C")
        downgrade("B2")
        recovery("C2")

        # ---- every dashboard panel query has data
        t = time.monotonic()
        queries = panel_queries()
        assert len(queries) >= 30, len(queries)
        empty = []
        for file, title, expr in queries:
            concrete = _substitute(expr)
            if not servers.query(concrete):
                empty.append(f"{file} / {title}: {concrete}")
        if empty:  # one more scrape/evaluation round for the slowest recording rules
            time.sleep(3)
            empty = [e for e in empty if not servers.query(e.split(": ", 1)[1])]
        assert not empty, "panel queries without data:\n" + "\n".join(empty)
        timings["panels"] = time.monotonic() - t

        # ---- the exposition passes promtool
        t = time.monotonic()
        text = get_text(service.api.url + "/metrics")
        r = subprocess.run(
            [bins["promtool"], "check", "metrics"],
            input=text,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        timings["promtool"] = time.monotonic() - t
    finally:
        t = time.monotonic()
        try:  # shown by pytest on failure: the watched cell's evaluations, newest first
            history = service.windows(MODEL, "DI", "sex", 100) or []
            print(
                "DI x sex (evaluation, value, vfr, dominant verdict, raw tier):",
                [
                    (h["evaluation"], h["value"], h["vfr"], h["dominant_verdict"], h["tier"])
                    for h in history
                ],
            )
        except Exception as exc:  # never hide the test's own failure
            print("no DI x sex history:", type(exc).__name__)
        print("cells with a firing", ALERT, "(metric, attribute):", sorted(fired))
        if servers is not None:
            servers.stop()
        service.close()
        timings["stop"] = time.monotonic() - t
        timings["total"] = time.monotonic() - t0
        print("phase timings (s):", {k: round(v, 1) for k, v in timings.items()})
