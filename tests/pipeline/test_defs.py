"""A snapshot of the Dagster code location, so an accidental rename shows up here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from faultline.definitions import defs as load_defs
from faultline.defs.resources import LakeResource, LandingResource, from_env

ROOT = Path(__file__).resolve().parents[2]

ASSETS = {  # key: (group, kinds, upstream)
    "raw_kernel_events": ("raw", {"polars", "parquet"}, set()),
    "raw_job_events": ("raw", {"polars", "parquet"}, set()),
    "raw_slurm_accounting": ("raw", {"polars", "parquet"}, set()),
    "raw_flight_recorder": ("raw", {"polars", "parquet"}, set()),
    "raw_job_markers": ("raw", {"polars", "parquet"}, set()),
    "ingest_audit": ("ingest", {"polars", "parquet"}, set()),
    "quarantine": ("ingest", {"polars", "parquet"}, set()),
    "core_events": ("core", {"polars", "parquet"}, {"raw_kernel_events", "raw_job_events", "ingest_audit"}),
    "core_jobs": ("core", {"polars", "parquet"}, {"raw_slurm_accounting", "raw_flight_recorder", "ingest_audit"}),
    "core_inventory": ("core", {"polars", "parquet"}, set()),
    "out_warehouse": (
        "out",
        {"duckdb"},
        {
            "core_events",
            "core_jobs",
            "core_inventory",
            "raw_slurm_accounting",
            "raw_flight_recorder",
            "raw_job_markers",
            "ingest_audit",
            "quarantine",
        },
    ),
    "out_analytics": (
        "out",
        {"polars", "parquet"},
        {"core_events", "core_jobs", "core_inventory", "raw_job_markers", "ingest_audit"},
    ),
    "out_report": ("out", {"html"}, {"out_analytics"}),
}
CHECKS = {("ingest_audit", "lines_balanced"), ("core_events", "lake_fresh")} | {
    (a, "lake_schema") for a in ASSETS if a not in ("out_warehouse", "out_analytics", "out_report")
}


@pytest.fixture(scope="module")
def repo():
    return load_defs().get_repository_def()


def test_asset_graph_snapshot(repo):
    g = repo.asset_graph
    got = {
        k.to_user_string(): (
            g.get(k).group_name,
            set(g.get(k).kinds),
            {p.to_user_string() for p in g.get(k).parent_keys},
        )
        for k in g.get_all_asset_keys()
    }
    assert got == ASSETS
    checks = {(k.asset_key.to_user_string(), k.name) for k in g.asset_check_keys}
    assert checks == CHECKS
    blocking = {(k.asset_key.to_user_string(), k.name) for k in g.asset_check_keys if g.get_check_spec(k).blocking}
    assert blocking == {("ingest_audit", "lines_balanced")}


def test_jobs_schedules_sensors_snapshot(repo):
    assert sorted(j.name for j in repo.get_all_jobs() if not j.name.startswith("__")) == ["analytics_job", "ingest_job"]
    job = repo.get_job("ingest_job")
    assert {k.to_user_string() for k in job.asset_layer.asset_graph.get_all_asset_keys()} >= set(ASSETS) - {
        "out_analytics",
        "out_report",
    }
    assert [(s.name, s.cron_schedule, s.execution_timezone, s.job_name) for s in repo.schedule_defs] == [
        ("nightly_analytics", "45 3 * * *", "UTC", "analytics_job"),
        ("nightly_ingest", "15 2 * * *", "UTC", "ingest_job"),
    ]
    assert [(s.name, s.job_name) for s in repo.sensor_defs] == [("landing_sensor", "ingest_job")]


def test_partitions_defined_once(repo):
    g = repo.asset_graph
    whole_history = {dg.AssetKey("out_analytics"), dg.AssetKey("out_report")}
    partitioned = [g.get(k).partitions_def for k in g.get_all_asset_keys() if k not in whole_history]
    assert len({id(p) for p in partitioned}) == 1  # one object, imported everywhere
    (landing_partitions,) = {id(p): p for p in partitioned}.values()
    assert [(d.name, d.partitions_def.name) for d in landing_partitions.partitions_defs] == [
        ("cluster", "faultline_cluster"),
        ("date", "faultline_date"),
    ]
    assert all(g.get(k).partitions_def is None for k in whole_history)


def test_one_duckdb_writer_at_a_time(repo):
    (ad,) = [a for a in repo.assets_defs_by_key.values() if dg.AssetKey("out_warehouse") in a.keys]
    assert ad.op.pool == "duckdb_writer"


def test_resources_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("FAULTLINE_LANDING", "/data/landing")
    monkeypatch.setenv("FAULTLINE_WAREHOUSE", "/data/wh")
    monkeypatch.delenv("FAULTLINE_PRICES", raising=False)
    res = from_env()
    assert res["landing"] == LandingResource(path="/data/landing")
    assert res["lake"] == LakeResource(warehouse="/data/wh", prices="/data/landing/prices.csv")
    monkeypatch.setenv("FAULTLINE_PRICES", "/etc/prices.csv")
    assert from_env()["lake"].prices == "/etc/prices.csv"
    monkeypatch.delenv("FAULTLINE_LANDING")
    monkeypatch.delenv("FAULTLINE_WAREHOUSE")
    monkeypatch.delenv("FAULTLINE_PRICES")
    assert from_env()["landing"].path == "./landing" and from_env()["lake"].warehouse == "./warehouse"


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGSTER_DISABLE_TELEMETRY": "1", "DAGSTER_HOME": ""}
    env.pop("DAGSTER_HOME")
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_code_location_loads_from_the_command_line():
    """``dg check defs`` loads the code location (dg finds ``pipelines/`` through
    ``[tool.dg.project]``)."""
    bindir = Path(sys.executable).parent
    dg_cli = _run([str(bindir / "dg"), "check", "defs"])
    assert dg_cli.returncode == 0 and "All definitions loaded successfully" in dg_cli.stdout + dg_cli.stderr, (
        dg_cli.stdout + dg_cli.stderr
    )[-3000:]
