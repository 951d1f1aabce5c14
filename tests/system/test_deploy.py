"""The nightly deployment with real processes: ``faultline serve`` (one code server,
dagster-daemon, dagster-webserver) on the shipped dagster.yaml, SQLite or a PostgreSQL server
of its own; the schedule really ticked by the daemon, the sensor, a daemon and a run worker
killed with SIGKILL mid-run, and a lake identical to a clean run's at the end."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from helpers import deploy
from helpers.hashes import lake_hashes
from helpers.postgres import Postgres

from faultline.defs.resources import LandingResource
from faultline.defs.sensors import changed_partitions
from faultline.launch.serve import free_port

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 480  # generous: CI's two cores run the three processes and the runs


def _faultline(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    out = subprocess.run([str(BIN / "faultline"), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def _utc_today() -> dt.date:
    """Today (UTC), away from midnight: the tick's "yesterday" must be the one planned."""
    now = dt.datetime.now(dt.timezone.utc)
    if now.hour == 23 and now.minute >= 50:
        time.sleep((60 - now.minute) * 60 - now.second + 5)
    return dt.datetime.now(dt.timezone.utc).date()


def _late_line(landing: Path, relpath: str) -> Path:
    """Append one more line to a kernel log of a partition: a line of another of that day's
    kernel logs (the simulator's), as a shipper delivering late would."""
    files = sorted((landing / relpath / "kernel").glob("*.log"))
    line = files[-1].read_text().splitlines()[-1]
    with open(files[0], "a") as f:
        f.write(line + "\n")
    return files[0]


def _partition_of(key: str) -> str:
    """``lake`` hash key (table/provider=p/cluster=c/date=d) -> p/c/d."""
    parts = dict(p.split("=", 1) for p in key.split("/")[1:])
    return f"{parts['provider']}/{parts['cluster']}/{parts['date']}"


def _no_temp_files(warehouse: Path) -> list[Path]:
    return [p for p in (warehouse / "lake").rglob("*") if p.is_file() and not p.name.endswith(".parquet")]


DOC = ROOT / "docs" / "deployment.md"
#: what the test puts in place of the docs' example values
PLACEHOLDERS = ("DAGSTER_HOME", "FAULTLINE_LANDING", "FAULTLINE_WAREHOUSE", "DAGSTER_PG_HOST", "DAGSTER_PG_PORT")
PLACEHOLDERS += ("DAGSTER_PG_DB", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD")


def doc_commands(heading: str) -> list[str]:
    """The command lines of the first ``bash`` block under ``heading`` in docs/deployment.md."""
    section = DOC.read_text().split(f"\n{heading}\n", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def deployment_script(backend: str, values: dict[str, str], date: dt.date, port: int) -> str:
    """The docs' one-host commands (and, for PostgreSQL, its section's, before the first run)
    with this test's folders, date and port: the script ends by exec'ing ``faultline serve``."""
    one_host, postgres = doc_commands("## One host"), doc_commands("### PostgreSQL")
    assert one_host[-1].startswith("faultline serve") and postgres[-1].startswith("faultline serve")
    lines = one_host if backend == "sqlite" else one_host[:2] + postgres[:-1] + one_host[2:-1] + postgres[-1:]
    out = []
    for line in lines:
        for name in PLACEHOLDERS:
            if name in values:
                line = re.sub(rf"\b{name}=\S+", f"{name}={values[name]}", line)
        out.append(re.sub(r"--port \d+", f"--port {port}", re.sub(r"--date \S+", f"--date {date}", line)))
    out[-1] = "exec " + out[-1]  # the script's process becomes faultline serve
    return "set -euo pipefail\n" + "\n".join(out) + "\n"


class Serve:
    """The docs' commands in bash, ending as ``faultline serve``; its output in a file."""

    def __init__(self, tmp: Path, env: dict, script: str, port: int):
        self.url = f"http://127.0.0.1:{port}"
        self.out = tmp / "serve.out"
        (tmp / "deploy.sh").write_text(script)
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen(["bash", str(tmp / "deploy.sh")], env=env, cwd=ROOT, stdout=out, stderr=out)

    def log(self) -> str:
        return self.out.read_text()

    def pid_of(self, name: str) -> list[int]:
        """The pids ``name`` was started with, in order (from serve's own log)."""
        return [
            int(line.split("(pid ")[1].rstrip(")")) for line in self.log().splitlines() if f"{name} started" in line
        ]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request):
    if request.param == "sqlite":
        yield "sqlite", {}
    else:
        with Postgres() as pg:
            yield "postgres", pg.env


def _new_files() -> set[str]:
    """Untracked and ignored paths of the working tree (a temporary Dagster home would be one)."""
    out = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True)
    return {line for line in out.stdout.splitlines() if line[:2] in ("??", "!!") and "__pycache__" not in line}


def test_nightly_deployment(storage, tmp_path, monkeypatch):
    backend, pg_env = storage
    for name, value in pg_env.items():  # this process reads the instance too
        monkeypatch.setenv(name, value)
    today = _utc_today()
    yesterday, before = today - dt.timedelta(days=1), today - dt.timedelta(days=2)
    landing, warehouse, home = tmp_path / "landing", tmp_path / "warehouse", tmp_path / "dagster_home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "FAULTLINE_"))}
    env.update(pg_env, PATH=f"{BIN}:{env.get('PATH', '')}", FAULTLINE_WORKERS="2")
    days = ("--days", "2", "--start-date", str(before))
    _faultline("simulate", "--out", str(landing), "--nodes", "4", *days, env=env, cwd=tmp_path)
    clusters = sorted(
        f"{p.parent.name}/{p.name}" for p in landing.glob("*/*") if p.is_dir() and p.parent.name != "_truth"
    )
    assert len(clusters) == 3

    tree = _new_files()
    port = free_port()
    values = {"DAGSTER_HOME": str(home), "FAULTLINE_LANDING": str(landing), "FAULTLINE_WAREHOUSE": str(warehouse)}
    script = deployment_script(backend, values | pg_env, before, port)
    tick_now = {  # the daemon ticks the schedules at the next minute; the sensor every 5 s
        "FAULTLINE_INGEST_CRON": "* * * * *",
        "FAULTLINE_ANALYTICS_CRON": "* * * * *",
        "FAULTLINE_SENSOR_INTERVAL_S": "5",
    }
    serve = Serve(tmp_path, env | tick_now, script, port)
    instance = None
    try:
        deploy.wait_for("the webserver", lambda: "Dagster UI at" in serve.log() or serve.proc.poll() is not None, 600)
        assert serve.proc.poll() is None, serve.log()
        shipped = ROOT / "deploy" / ("dagster.yaml" if backend == "sqlite" else "dagster-postgres.yaml")
        assert (home / "dagster.yaml").read_text() == shipped.read_text()
        instance = dg.DagsterInstance.from_config(str(home))
        _check_deployment(instance, serve, env, tmp_path, landing, warehouse, clusters, before, yesterday)
    finally:
        code = serve.stop()
        print(serve.log())
        if instance is not None:
            instance.dispose()
    assert code == 0
    # every process serve started is gone: the code server, both daemons, the webserver, the runs
    started = {p for name in ("code-server", "daemon", "webserver") for p in serve.pid_of(name)}
    assert started and not started & set(deploy.processes()), serve.log()
    assert _new_files() == tree  # nothing written into the working tree


def _check_deployment(instance, serve, env, tmp, landing, warehouse, clusters, before, yesterday):
    # 1. the docs' `faultline run`, with DAGSTER_HOME: its runs, materializations and checks are there
    cli = [r for r in deploy.runs(instance) if r.dagster_run.job_name == "faultline_lake"]
    assert cli and all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in cli)
    cli_ids = {r.dagster_run.run_id for r in cli}
    mats = instance.fetch_materializations(dg.AssetKey("core_events"), limit=1000).records
    assert {m.partition_key for m in mats if m.run_id in cli_ids} == {
        f"{c.replace('/', ':')}|{before}" for c in clusters
    }
    checks = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("ingest_audit"), "lines_balanced"), limit=100
    )
    # a range run's result speaks for all its partitions (recorded without one)
    assert {c.run_id for c in checks if c.status.value == "SUCCEEDED" and c.partition is None} >= cli_ids
    assert not [c for c in checks if c.status.value == "FAILED"]

    # 2. the nightly schedule, ticked by the daemon: yesterday's partition of every cluster
    scheduled = {"dagster/schedule_name": "nightly_ingest"}
    first = deploy.wait_for("the nightly tick", lambda: deploy.runs(instance, **scheduled), 180)
    tick = first[0].dagster_run.tags[".dagster/scheduled_execution_time"]
    deploy.wait_for("the tick's runs", lambda: len(deploy.runs(instance, **scheduled)) >= len(clusters), 120)
    assert deploy.stop_schedule(serve.url, "nightly_ingest") == "STOPPED"  # one tick is enough
    nightly = deploy.runs(instance, **scheduled)
    assert {r.dagster_run.tags[".dagster/scheduled_execution_time"] for r in nightly} == {tick}
    assert dt.datetime.fromisoformat(tick).date() - dt.timedelta(days=1) == yesterday
    assert sorted(r.dagster_run.tags["dagster/partition"] for r in nightly) == sorted(
        f"{c.replace('/', ':')}|{yesterday}" for c in clusters
    )
    nightly = deploy.wait_for(
        "the nightly runs",
        lambda: (lambda rs: rs if deploy.finished(rs) else None)(
            [instance.get_run_record_by_id(r.dagster_run.run_id) for r in nightly]
        ),
        RUN_TIMEOUT_S,
    )
    assert [r.dagster_run.status for r in nightly] == [dg.DagsterRunStatus.SUCCESS] * 3
    # one DuckDB writer: the out_warehouse steps of the three runs never overlapped
    spans = sorted(s for r in nightly for s in deploy.step_intervals(instance, r.dagster_run.run_id, "out_warehouse"))
    assert len(spans) == 3 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    assert instance.event_log_storage.get_concurrency_info("duckdb_writer").slot_count == 1
    assert {_partition_of(k) for k in lake_hashes(warehouse)} == {
        f"{c}/{d}" for c in clusters for d in (before, yesterday)
    }
    days = json.loads(
        _faultline(
            "sql",
            "--warehouse",
            str(warehouse),
            "--format",
            "json",
            "SELECT DISTINCT CAST(date AS VARCHAR) AS d FROM events ORDER BY d",
            env=env,
            cwd=tmp,
        ).stdout
    )
    assert [d["d"] for d in days] == [str(before), str(yesterday)]

    # the analytics tick after the night's runs rewrote the report
    done = max(r.end_time for r in nightly)
    analytics = deploy.wait_for(
        "an analytics run after the nightly runs",
        lambda: [
            r
            for r in deploy.runs(instance, **{"dagster/schedule_name": "nightly_analytics"})
            if r.create_timestamp.timestamp() > done and r.dagster_run.status == dg.DagsterRunStatus.SUCCESS
        ],
        RUN_TIMEOUT_S,
    )
    assert deploy.stop_schedule(serve.url, "nightly_analytics") == "STOPPED"
    assert (warehouse / "report.html").stat().st_mtime > analytics[0].start_time
    assert str(yesterday) in (warehouse / "report.md").read_text()

    # 3. the sensor, started from the landing as it is: a late file reruns only its partition
    _, cursor = changed_partitions(LandingResource(path=str(landing)), {})
    assert deploy.start_sensor(serve.url, "landing_sensor", json.dumps(cursor, sort_keys=True)) == "RUNNING"
    before_late = lake_hashes(warehouse)
    late = f"{clusters[0]}/{yesterday}"
    _late_line(landing, late)
    sensor_run = deploy.wait_for(
        "the sensor's run", lambda: deploy.runs(instance, **{"dagster/sensor_name": "landing_sensor"}), 120
    )
    # the daemon dies mid-run: the run goes on (its worker is the code server's) and serve restarts the daemon
    deploy.wait_for(
        "the run to start",
        lambda: (
            instance.get_run_by_id(sensor_run[0].dagster_run.run_id).status
            in (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.SUCCESS)
        ),
        RUN_TIMEOUT_S,
        poll_s=0.2,
    )
    os.kill(serve.pid_of("daemon")[-1], signal.SIGKILL)
    deploy.wait_for("a new daemon", lambda: len(serve.pid_of("daemon")) == 2, 60)
    rec = deploy.wait_for(
        "the sensor's run to end",
        lambda: (lambda r: r if r.dagster_run.is_finished else None)(
            instance.get_run_record_by_id(sensor_run[0].dagster_run.run_id)
        ),
        RUN_TIMEOUT_S,
    )
    assert rec.dagster_run.status == dg.DagsterRunStatus.SUCCESS
    assert len(deploy.runs(instance, **{"dagster/sensor_name": "landing_sensor"})) == 1
    assert rec.dagster_run.tags["dagster/partition"] == f"{late.rsplit('/', 1)[0].replace('/', ':')}|{yesterday}"
    after_late = lake_hashes(warehouse)
    changed = {k for k in after_late if after_late[k] != before_late.get(k)}
    assert changed and {_partition_of(k) for k in changed} == {late}, changed

    # 4. the daemon and the run's worker die mid-run: the run is marked failed, a retry reruns it
    crashed = f"{clusters[1]}/{yesterday}"
    _late_line(landing, crashed)
    runs = deploy.wait_for(
        "the second sensor run",
        lambda: (lambda rs: rs if len(rs) == 2 else None)(
            deploy.runs(instance, **{"dagster/sensor_name": "landing_sensor"})
        ),
        120,
    )
    victim = runs[1].dagster_run.run_id
    code_server = serve.pid_of("code-server")[-1]
    step = deploy.wait_for(
        "the run's first step",
        lambda: next(
            (e for e in instance.all_logs(victim) if e.dagster_event_type == dg.DagsterEventType.STEP_START), None
        ),
        RUN_TIMEOUT_S,
        0.1,
    )
    # the process that runs the steps, not an earlier run's worker still exiting
    worker = step.dagster_event.pid
    assert worker in deploy.children(code_server, "spawn_main")
    os.kill(serve.pid_of("daemon")[-1], signal.SIGKILL)
    os.kill(worker, signal.SIGKILL)
    failed = deploy.wait_for(
        "the killed run marked failed",
        lambda: (lambda r: r if r.is_finished else None)(instance.get_run_by_id(victim)),
        120,
    )
    assert failed.status == dg.DagsterRunStatus.FAILURE
    lake_hashes(warehouse)  # every file the crash left in the lake reads whole
    retry = deploy.wait_for(
        "the retry to succeed",
        lambda: [
            r
            for r in deploy.runs(instance, **{"dagster/parent_run_id": victim})
            if r.dagster_run.status == dg.DagsterRunStatus.SUCCESS
        ],
        RUN_TIMEOUT_S,
    )
    assert retry[0].dagster_run.tags["dagster/partition"] == failed.tags["dagster/partition"]
    assert len(serve.pid_of("daemon")) == 3

    # the warehouse is a clean run's: every partition, the late lines included, no leftovers
    assert not _no_temp_files(warehouse)
    assert len(deploy.runs(instance, **scheduled)) == len(clusters)  # the stopped schedule ticked no more
    clean = tmp / "clean"
    alone = {k: v for k, v in env.items() if k != "DAGSTER_HOME"}  # an ephemeral instance
    _faultline("run", "--landing", str(landing), "--warehouse", str(clean), env=alone, cwd=tmp)
    assert lake_hashes(warehouse) == lake_hashes(clean)
    assert deploy.partitions_materialized(serve.url, "core_events") == 2 * len(clusters)  # the UI: CLI's and nightly's
