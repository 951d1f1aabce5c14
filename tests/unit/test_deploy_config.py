"""The shipped deployment configs agree: dagster.yaml (SQLite), dagster-postgres.yaml and the
Helm values carry the same instance settings, and the SQLite one loads as a Dagster instance."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import yaml

from faultline.launch.serve import prepare_home

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
#: instance settings that Helm's values carry under another path (camelCase keys below)
HELM_PATHS = {
    "concurrency": ("concurrency",),
    "run_monitoring": ("dagsterDaemon", "runMonitoring"),
    "run_retries": ("dagsterDaemon", "runRetries"),
    "retention": ("retention",),
    "telemetry": ("telemetry",),
}


def _load(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name).read_text())


def _camel(value):
    if isinstance(value, dict):
        return {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k): _camel(v) for k, v in value.items()}
    return value


def test_postgres_config_is_the_sqlite_one_plus_its_storage():
    sqlite, postgres = _load("dagster.yaml"), _load("dagster-postgres.yaml")
    assert set(postgres) - set(sqlite) == {"storage"} and "storage" not in sqlite
    assert {k: v for k, v in postgres.items() if k != "storage"} == sqlite
    db = postgres["storage"]["postgres"]["postgres_db"]
    assert {k: v["env"] for k, v in db.items() if isinstance(v, dict)} == {
        "hostname": "DAGSTER_PG_HOST",
        "port": "DAGSTER_PG_PORT",
        "db_name": "DAGSTER_PG_DB",
        "username": "DAGSTER_PG_USER",
        "password": "DAGSTER_PG_PASSWORD",
    }


def test_helm_values_carry_the_same_settings():
    instance, helm = _load("dagster-postgres.yaml"), _load("helm/values.yaml")
    for key, path in HELM_PATHS.items():
        node = helm
        for part in path:
            node = node[part]
        got = {k: v for k, v in node.items() if k != "enabled" or key in ("run_monitoring", "run_retries", "telemetry")}
        assert got == _camel(instance[key]), key
    assert helm["concurrency"]["enabled"] and helm["retention"]["enabled"]
    assert helm["postgresql"]["postgresqlScheme"] == instance["storage"]["postgres"]["postgres_db"]["scheme"]
    code = helm["dagster-user-deployments"]["deployments"][0]
    assert code["dagsterApiGrpcArgs"][:2] == ["-m", "faultline.definitions"]
    assert helm["runLauncher"]["type"] == "K8sRunLauncher"


def test_sqlite_config_loads_with_one_duckdb_writer(tmp_path):
    (tmp_path / "dagster.yaml").write_text((DEPLOY / "dagster.yaml").read_text())
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
        assert instance.run_monitoring_enabled and instance.run_retries_max_retries == 2
        assert not instance.run_retries_retry_on_asset_or_op_failure
        assert type(instance.run_storage).__name__ == "SqliteRunStorage"


def test_serve_writes_the_shipped_config_only_where_there_is_none(tmp_path):
    home, written = prepare_home(tmp_path / "home", postgres=True)
    assert written and (home / "dagster.yaml").read_text() == (DEPLOY / "dagster-postgres.yaml").read_text()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    assert prepare_home(home) == (home, False)
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"
