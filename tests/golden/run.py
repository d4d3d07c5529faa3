"""The golden run: one deterministic end-to-end run of the product, hashed artefact by artefact.

Why: issue 31 refactors the read path, the publication rules and the pipeline without
changing behaviour. This run is the proof: the same seeded stream through the same
service, the same offline audit, the same fleet view; every output hashed; the hashes
stored in ``tests/golden/hashes.json``. A refactor that changes any output changes a hash,
and the check names which artefact changed.

What runs (all in this process; no broker, no wall clock):

* a seeded synthetic stream (two XGBoost models, the demo's ``group_score_shift``
  scenario, the demo's poison messages) through :class:`MonitorService`'s pipeline by the
  embedded source, in batches, with Axis 2, Axis 3 and EquiLense run synchronously at
  fixed stream positions;
* every API route of the running service (the real HTTP server on an ephemeral port),
  ``/metrics`` included, and the status page;
* the DuckDB file's tables, read after the service closed;
* the governance report from that file and from an audit directory;
* ``vfr-monitor audit`` and ``vfr-monitor intervene`` on the shipped Diabetes-130 file;
* a fleet view fed in-process with the results topic's messages (the service's outbox).

What is injected or normalised, never hashed (docs/decisions.md, "Golden run"):

* time: one :class:`StepClock` (unix seconds, advanced by hand between batches) is the
  service's, the scheduler's, the status page's and the reports' clock;
* evaluation: synchronous (``service.evaluation_worker = false``); with the worker
  process, *when* an evaluation is written depends on the worker's speed;
* durations measured with ``perf_counter`` (job and evaluation durations, audit step
  timings): their values are dropped, their presence kept;
* the time zone: UTC while the run lasts (the API prints stored times in the host's);
* temporary directories and ports: replaced by fixed words;
* ``prometheus_client``'s ``_created`` samples (wall-clock creation times) are dropped;
* the numerical libraries' CPU-dependent code paths (:data:`PINNED_ENV`): the run
  re-executes itself with them set, since they are read when numpy loads.

Commands::

    python -m tests.golden.run            # print every artefact's hash
    python -m tests.golden.run --check    # compare with hashes.json, list what changed
    python -m tests.golden.run --write    # regenerate hashes.json (after a behaviour change)
    python -m tests.golden.run --dump DIR # also write each artefact's canonical text to DIR
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

HASHES = Path(__file__).with_name("hashes.json")
#: the repository (the pinned re-run starts here, so ``-m tests.golden.run`` resolves)
ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "python -m tests.golden.run --write"

#: 2026-12-01T00:00:00Z: where the injected clock starts
CLOCK_START = 1_796_083_200.0
#: seconds the clock moves between two ingest batches
BATCH_SECONDS = 30.0
#: synthetic discharges drawn (about 7/8 of them stream, each scored by two models)
RECORDS = 12_000
SEED = 0
BATCH = 500
#: the scheduled axes run after these shares of the stream (and once more at its end)
AXES_AT = (0.25, 0.5, 0.75)
#: a fixed HMAC key for dead-letter payload hashes (else a random key is kept in the file)
PAYLOAD_HASH_KEY = "00112233445566778899aabbccddeeff"


class StepClock:
    """Unix seconds that move only when told to: the one clock of the golden run."""

    def __init__(self, start: float = CLOCK_START):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def at(self) -> datetime:
        """The clock's time as a UTC datetime (what a report's header shows)."""
        return datetime.fromtimestamp(self.now, UTC)


# ----------------------------------------------------------------------------- canonical forms


def _plain(x: Any) -> Any:
    """A JSON-ready value with one spelling: JSON text parsed, times in ISO 8601 (UTC),
    floats by repr (non-finite ones as strings), dict keys sorted when dumped."""
    if isinstance(x, str):
        s = x.strip()
        if s[:1] in "[{":
            try:
                return _plain(json.loads(s))
            except ValueError:
                return x
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else repr(x)
    if isinstance(x, Decimal):
        return str(x)
    if isinstance(x, datetime):  # DuckDB hands TIMESTAMPTZ in the session's time zone
        return (x.astimezone(UTC) if x.tzinfo is not None else x).isoformat()
    if isinstance(x, date):
        return x.isoformat()
    if isinstance(x, bytes | bytearray | memoryview):
        return "bytes:" + hashlib.sha256(bytes(x)).hexdigest()
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


def canonical_json(x: Any) -> str:
    return json.dumps(_plain(x), sort_keys=True, ensure_ascii=False, allow_nan=False)


#: tables not hashed: the migrations' own log (applied_at is DuckDB's now()) and the
#: secrets table (a key, fixed by the config here)
SKIPPED_TABLES = frozenset({"schema_migrations", "secrets"})
#: columns whose values are measured durations (perf_counter), not the product's results
VOLATILE_COLUMNS = {"job_runs": frozenset({"duration_s"})}


def table_texts(path: Path, prefix: str) -> dict[str, str]:
    """Every table of the file, one artefact each: its rows as canonical JSON, sorted."""
    out: dict[str, str] = {}
    with duckdb.connect(str(path), read_only=True) as c:
        names = sorted(
            r[0] for r in c.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        )  # fmt: skip
        for name in names:
            if name in SKIPPED_TABLES:
                continue
            cur = c.execute(f'SELECT * FROM "{name}"')
            cols = [d[0] for d in cur.description]
            drop = VOLATILE_COLUMNS.get(name, frozenset())
            rows = sorted(
                canonical_json({k: v for k, v in zip(cols, row, strict=True) if k not in drop})
                for row in cur.fetchall()
            )
            out[f"{prefix}.{name}"] = "\n".join([",".join(cols), *rows])
    return out


#: series whose values are wall times measured with perf_counter: kept, value dropped
_DURATION_SERIES = ("vfr_evaluation_duration_seconds", "vfr_job_duration_seconds")
#: collectors of the process or platform (values vary run to run), should any be registered
_PROCESS_PREFIXES = ("process_", "python_gc_", "python_info", "platform_")


def normalised_metrics(text: str) -> str:
    """The Prometheus exposition with its lines sorted; ``_created`` samples and process
    collectors dropped; durations' values dropped (their series kept, and the histogram's
    ``_count``, which counts evaluations, kept whole)."""
    out = []
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if line.startswith("#"):
            parts = line.split(" ", 3)
            name = parts[2] if len(parts) > 2 else ""
        if name.startswith(_PROCESS_PREFIXES) or name.endswith("_created"):
            continue
        timed = name.startswith(_DURATION_SERIES) and not name.endswith("_count")
        if timed and not line.startswith("#"):
            line = line.rsplit(" ", 1)[0] + " <duration>"
        out.append(line)
    return "\n".join(sorted(out))


def _scrub(text: str, words: Mapping[str, str]) -> str:
    for old, new in words.items():
        text = text.replace(old, new)
    return text


# ----------------------------------------------------------------------------- the service


def golden_config(features: Iterable[str], models: Iterable[str], worker: bool = False) -> Any:
    """The demo's configuration (its attributes, EquiLense features, registered models),
    smaller windows and resample counts so the run takes seconds, synchronous
    evaluation (``worker``: the evaluation worker process instead, for ``--worker``), no
    wall-clock hops or bounds, and a fixed payload-hash key."""
    from monitor.config import MonitorConfig
    from monitor.demo import DemoOptions, demo_config

    base = demo_config(MonitorConfig(), None, DemoOptions(), tuple(features), tuple(models))
    data = base.model_dump(by_alias=True)
    data["window"] = {**data["window"], "size": 3000, "hop_records": 500, "hop_seconds": 0}
    data["axis1"] = {**data["axis1"], "K": 100}
    data["axis2"] = {**data["axis2"], "sizes": [500, 1000, 2000], "R": 10}
    data["axis3"] = {**data["axis3"], "folds": 5}
    data["service"]["evaluation_worker"] = worker
    data["service"]["dead_letters"]["payload_hash_key"] = PAYLOAD_HASH_KEY
    return MonitorConfig.model_validate(data)


def _body(url: str) -> str:
    """A response as hashed: its status on the first line, then its body."""
    status, text = _get(url)
    return f"{status}\n{text}"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _route_texts(url: str, cells: list[tuple[str, str, str]], prefix: str) -> dict[str, str]:
    """The body (and status) of every route, one artefact each (``/api/windows``: every
    cell's history, and one page of the first cell before its latest evaluation)."""

    def get(path: str) -> str:
        return _body(url + path)

    out = {
        f"{prefix}./healthz": get("/healthz"),
        f"{prefix}./readyz": get("/readyz"),
        f"{prefix}./api/cells": get("/api/cells"),
        f"{prefix}./api/cells?limit&offset": get("/api/cells?limit=5&offset=3"),
        f"{prefix}./api/events": get("/api/events?limit=1000"),
        f"{prefix}./api/events?since_id": get("/api/events?limit=7&since_id=5"),
        f"{prefix}./api/models": get("/api/models"),
        f"{prefix}./api/unknown (404)": get("/api/nothing"),
    }
    for axis in ("axis2", "axis3", "equilense"):
        out[f"{prefix}./api/axes?axis={axis}"] = get(f"/api/axes?axis={axis}&limit=1000")
    windows = []
    for model, metric, attribute in cells:
        q = urllib.parse.urlencode(
            {"model": model, "metric": metric, "attribute": attribute, "limit": 1000}
        )
        windows.append(f"{model} {metric} {attribute}\n" + get(f"/api/windows?{q}"))
    out[f"{prefix}./api/windows"] = "\n".join(windows)
    if cells:
        model, metric, attribute = cells[0]
        q = urllib.parse.urlencode(
            {"model": model, "metric": metric, "attribute": attribute, "limit": 3, "before": 6}
        )
        out[f"{prefix}./api/windows?before"] = get(f"/api/windows?{q}")
    return out


def _cell_keys(url: str) -> list[tuple[str, str, str]]:
    status, body = _get(url + "/api/cells")
    assert status == 200, body
    return sorted({(c["model_id"], c["metric"], c["attribute"]) for c in json.loads(body)})


def service_run(tmp: Path, worker: bool = False) -> dict[str, str]:
    """The stream through the service; its routes, its file, its reports, its fleet view."""
    from consumers.embedded import EmbeddedSource
    from monitor.data.scorer import synthetic_stream
    from monitor.demo import DEFAULT_SCENARIO, payload_stream
    from monitor.report.render import render_report
    from monitor.service.app import MonitorService

    stream = synthetic_stream(RECORDS, SEED, DEFAULT_SCENARIO)
    cfg = golden_config(stream.models[0].features, [m.model_id for m in stream.models], worker)
    payloads = payload_stream(stream)
    clock = StepClock()
    db = tmp / "golden.duckdb"
    service = MonitorService(
        cfg, db_path=str(db), http_port=0, start_scheduler=False, clock=clock,
        results_outbox=True,
    )  # fmt: skip
    # the status page's age line: drawn "0 s ago" at the injected time
    service.page.clock = service.page.wall_clock = clock
    out: dict[str, str] = {}
    service.start()
    try:
        assert service.api is not None
        url = service.api.url
        # the embedded source, one batch a call (it continues where it stopped), so the
        # clock moves between batches and the axes run at fixed stream positions
        source = EmbeddedSource(payloads, service.pipeline, rate=None, batch_size=BATCH)
        stops = {int(len(payloads) * s) // BATCH for s in AXES_AT}
        stop = threading.Event()
        batches = 0
        while source.run(stop, max_messages=BATCH):
            batches += 1
            clock.advance(BATCH_SECONDS)
            if batches in stops:
                _run_axes(service, clock)
        assert source.exhausted and source.stats.messages == len(payloads)
        service.pipeline.flush()
        _run_axes(service, clock)
        assert service.page.wait_drawn(120), "the status page was not drawn"
        out["service./"] = _body(url + "/")
        status, text = _get(url + "/metrics")
        out["service./metrics"] = f"{status}\n" + normalised_metrics(text)
        out |= _route_texts(url, _cell_keys(url), "service")
        cur = service.store.cursor()
        try:
            outbox = cur.execute("SELECT key, value FROM results_outbox ORDER BY id").fetchall()
        finally:
            cur.close()
    finally:
        service.close()
    out |= table_texts(db, "db")
    out["report.from_db"] = render_report(db, config=cfg, generated_at=clock.at())
    out |= fleet_run(tmp, cfg, outbox, clock)
    return out


def _run_axes(service: Any, clock: StepClock) -> None:
    """Axis 2, Axis 3 and EquiLense now, in this thread, as the scheduler would run them."""
    for job in ("axis2", "axis3", "equilense"):
        outcome = service.scheduler.run_now_blocking(job)
        assert outcome.state == "success", outcome
        clock.advance(1.0)


def fleet_run(tmp: Path, cfg: Any, outbox: list[tuple[str, str]], clock: StepClock) -> dict:
    """A fleet view fed with the results topic's messages (the service's outbox, in the
    order the relay would publish them), then its routes and its file."""
    from monitor.service.fleet_view import FleetView

    path = tmp / "fleet.duckdb"
    view = FleetView(cfg, str(path), clock=clock)
    view.page.clock = view.page.wall_clock = clock
    out: dict[str, str] = {}
    try:
        for i in range(0, len(outbox), 250):
            view.apply([(k.encode(), v.encode()) for k, v in outbox[i : i + 250]])
        view.set_caught_up(True)
        view.start(0)
        assert view.api is not None
        url = view.api.url
        assert view.page.wait_drawn(120), "the fleet view's page was not drawn"
        out["fleet./"] = _body(url + "/")
        status, text = _get(url + "/metrics")
        out["fleet./metrics"] = f"{status}\n" + normalised_metrics(text)
        out |= _route_texts(url, _cell_keys(url), "fleet")
    finally:
        view.close()
    out |= table_texts(path, "fleet.db")
    return out


# ----------------------------------------------------------------------------- offline tools


#: `vfr-monitor intervene` smaller than its defaults (logistic regression, three lambdas,
#: a short refinement), so the run takes seconds; every table still has rows
INTERVENE_TOML = """\
[interventions]
lambda_sweep = [0.0, 1.0, 2.0]
refine_max_steps = 20
"""


def _cli(argv: list[str]) -> tuple[int, str]:
    from monitor.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    return rc, buf.getvalue()


def _files(directory: Path, prefix: str, words: Mapping[str, str]) -> dict[str, str]:
    return {
        f"{prefix}/{p.name}": _scrub(p.read_text(), words)
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


def offline_run(tmp: Path, clock: StepClock) -> dict[str, str]:
    """`audit` and `intervene` on the shipped Diabetes-130 file (their printed output and
    every file), and the report of the audit directory."""
    from monitor.report.render import write_report

    words = {str(tmp): "<tmp>"}
    out: dict[str, str] = {}
    audit_dir = tmp / "audit"
    rc, text = _cli(["audit", "--input", "diabetes130", "--out", str(audit_dir), "--quiet"])
    out["audit.stdout"] = f"{rc}\n" + _scrub(text, words)
    files = _files(audit_dir, "audit", words)
    # cells.json carries each step's duration (perf_counter): the steps kept, not the times
    raw = json.loads(files["audit/cells.json"])
    raw["timings_s"] = sorted(raw.get("timings_s", {}))
    files["audit/cells.json"] = canonical_json(raw)
    out |= files
    path, note = write_report(
        audit_dir=audit_dir, out=tmp / "reports/", generated_at=clock.at()
    )
    out["report.from_audit_dir"] = f"{path.name}\n{note}\n" + _scrub(path.read_text(), words)

    toml = tmp / "intervene.toml"
    toml.write_text(INTERVENE_TOML)
    iv_dir = tmp / "intervene"
    rc, text = _cli([
        "intervene", "--input", "diabetes130", "--model", "logreg", "--config", str(toml),
        "--out", str(iv_dir), "--quiet",
    ])  # fmt: skip
    out["intervene.stdout"] = f"{rc}\n" + _scrub(text, words)
    out |= _files(iv_dir, "intervene", words)
    return out


# ----------------------------------------------------------------------------- hashes


@contextlib.contextmanager
def utc_process() -> Iterator[None]:
    """The process's local time zone set to UTC while the run opens its DuckDB
    connections (and restored after: the tests that follow in the process keep theirs).

    Why: DuckDB hands TIMESTAMPTZ values in the session's time zone, which defaults to
    the host's, and the API prints them as they come (``/api/events``' ``created_at``,
    ``/api/axes``' ``computed_at``): under TZ=Europe/Paris the same instant reads
    "01:00:30+01:00". A finding about the product (docs/decisions.md, "Golden run"); here
    the zone is fixed, as the clock is.
    """
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def artefacts(only: str | None = None, worker: bool = False) -> dict[str, str]:
    """Every artefact's canonical text, by name (``only``: "service" or "offline";
    ``worker``: evaluations in the worker process, not the golden configuration)."""
    with utc_process(), tempfile.TemporaryDirectory(prefix="vfr-golden-") as d:
        tmp = Path(d)
        out: dict[str, str] = {}
        if only in (None, "service"):
            (tmp / "service").mkdir()
            out |= service_run(tmp / "service", worker)
        if only in (None, "offline"):
            (tmp / "offline").mkdir()
            out |= offline_run(tmp / "offline", StepClock())
        words = {d: "<tmp>"}
        return {k: _scrub(v, words) for k, v in sorted(out.items())}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def hashes(texts: Mapping[str, str]) -> dict[str, str]:
    return {name: digest(text) for name, text in sorted(texts.items())}


def differences(expected: Mapping[str, str], actual: Mapping[str, str]) -> list[str]:
    """One line per artefact that changed, appeared or disappeared."""
    lines = []
    for name in sorted(expected.keys() | actual.keys()):
        if name not in actual:
            lines.append(f"  missing now: {name}")
        elif name not in expected:
            lines.append(f"  new:         {name}")
        elif expected[name] != actual[name]:
            lines.append(f"  changed:     {name}")
    return lines


def check_message(diff: list[str]) -> str:
    return (
        f"{len(diff)} golden artefact(s) differ from tests/golden/hashes.json:\n"
        + "\n".join(diff)
        + "\nIf the change is intended (a behaviour change), regenerate with:\n"
        f"  {REGENERATE}\n"
        "and look at what changed with: python -m tests.golden.run --dump DIR "
        "(before and after, then diff -r)."
    )


#: What the numerical libraries decide by the CPU they run on, pinned for the run.
#:
#: Why: OpenBLAS picks its kernels at load time by CPU, and kernels sum in different
#: orders. The hashes were first written on an Intel machine (OpenBLAS's SkylakeX
#: kernels); on an AMD EPYC (Haswell kernels) the synthetic cohort's features and the
#: intervention audit's logistic regression differed in their last bits, so
#: ``db.discharges`` and ``intervene/cells.csv`` changed with no change to the code
#: (found 2026-12-07: ``OPENBLAS_CORETYPE=SkylakeX`` on the AMD machine gave the stored
#: hashes back). numpy's own SIMD dispatch (``NPY_DISABLE_CPU_FEATURES``) and numba's
#: target CPU are the same kind of choice. The pins name what every x86-64 machine of the
#: last decade runs (numpy's baseline, OpenBLAS's Haswell kernels, numba's generic
#: target), and BLAS runs on one thread, so the run gives the same bits wherever it runs.
#: The product itself is not pinned: these are last-bit differences, not behaviour.
PINNED_ENV = {
    "OPENBLAS_CORETYPE": "Haswell",
    "OPENBLAS_NUM_THREADS": "1",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "NUMBA_CPU_NAME": "generic",
}


def pinned() -> bool:
    """Whether this process runs with :data:`PINNED_ENV` (it must be set before numpy
    loads, so only a fresh process can take it)."""
    return all(os.environ.get(k) == v for k, v in PINNED_ENV.items())


def run_pinned(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -m tests.golden.run ARGV`` in a process with :data:`PINNED_ENV` (the test's
    way to run the check from a process whose numpy is loaded already)."""
    return subprocess.run(
        [sys.executable, "-m", "tests.golden.run", *argv], cwd=ROOT,
        env={**os.environ, **PINNED_ENV}, capture_output=True, text=True, check=False,
    )  # fmt: skip


def load_expected() -> dict[str, str]:
    return json.loads(HASHES.read_text())["artefacts"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.golden.run", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="regenerate tests/golden/hashes.json")
    mode.add_argument("--check", action="store_true", help="compare with hashes.json")
    p.add_argument("--dump", default=None, help="write each artefact's canonical text here")
    p.add_argument("--only", choices=["service", "offline"], default=None,
                   help="run one half (printing hashes; not with --write or --check)")  # fmt: skip
    p.add_argument("--worker", action="store_true",
                   help="evaluate in the worker process (a diagnosis: its outputs depend on "
                   "the worker's timing; not with --write or --check)")  # fmt: skip
    args = p.parse_args(argv)
    if not pinned():
        # numpy (imported above) read its dispatch choice already: run again, pinned
        args_given = sys.argv[1:] if argv is None else argv
        rerun = [sys.executable, "-m", "tests.golden.run", *args_given]
        os.execve(sys.executable, rerun, {**os.environ, **PINNED_ENV})
    if (args.only or args.worker) and (args.write or args.check):
        p.error("--only and --worker print hashes; --write and --check need the golden run")
    t0 = time.perf_counter()
    texts = artefacts(args.only, args.worker)
    seconds = time.perf_counter() - t0
    actual = hashes(texts)
    if args.dump:
        d = Path(args.dump)
        d.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            safe = re.sub(r"[^A-Za-z0-9._=-]+", "_", name).strip("_")
            (d / f"{safe}.txt").write_text(text)
    if args.write:
        HASHES.write_text(
            json.dumps(
                {"regenerate": REGENERATE, "artefacts": actual}, indent=1, sort_keys=True
            ) + "\n"
        )  # fmt: skip
        print(f"wrote {len(actual)} hashes to {HASHES} ({seconds:.1f} s)")
        return 0
    if args.check:
        diff = differences(load_expected(), actual)
        if diff:
            print(check_message(diff))
            return 1
        print(f"all {len(actual)} golden artefacts unchanged ({seconds:.1f} s)")
        return 0
    for name, h in actual.items():
        print(f"{h}  {name}")
    print(f"# {len(actual)} artefacts in {seconds:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

