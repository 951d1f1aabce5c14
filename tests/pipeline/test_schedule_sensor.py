"""The nightly schedule and the landing sensor, evaluated with Dagster's test contexts."""

from __future__ import annotations

import datetime as dt
import json
import os

import dagster as dg
import pytest
from helpers.landing import write

from faultline.definitions import defs as load_defs
from faultline.defs.partitions import clusters, dates
from faultline.defs.resources import LandingResource
from faultline.defs.schedules import nightly_ingest
from faultline.defs.sensors import landing_sensor

UTC = dt.timezone.utc


@pytest.fixture(scope="module")
def repo():
    return load_defs().get_repository_def()


# Instances and evaluation contexts are entered and left in nested order (``with``): each
# sets a Dagster context variable on entry, and a context closed later (when garbage
# collected) would restore a dead instance for every later test of the session.


def _tick_schedule(instance, repo, landing, when: dt.datetime):
    with dg.build_schedule_context(
        instance=instance,
        repository_def=repo,
        scheduled_execution_time=when,
        resources={"landing": LandingResource(path=str(landing))},
    ) as ctx:
        return nightly_ingest.evaluate_tick(ctx)


def _tick(instance, repo, landing, cursor=None):
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, repository_def=repo, resources={"landing": LandingResource(path=str(landing))}
    ) as ctx:
        result = landing_sensor(ctx)
    for req in result.dynamic_partitions_requests:  # what the daemon does with them
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    return result


def _keys(result) -> list[str]:
    return sorted(str(r.partition_key) for r in result.run_requests)


def test_sensor_requests_new_and_changed_partitions_only(repo, landing):
    with dg.instance_for_test() as instance:
        first = _tick(instance, repo, landing)
        assert _keys(first) == ["bluepeak:west-2|2026-11-24", "northwind:c1|2026-11-24", "northwind:c1|2026-11-25"]
        assert sorted(instance.get_dynamic_partitions(dates.name)) == ["2026-11-24", "2026-11-25"]
        assert sorted(instance.get_dynamic_partitions(clusters.name)) == ["bluepeak:west-2", "northwind:c1"]
        cursor = json.loads(first.cursor)
        assert set(cursor) == {
            "bluepeak/west-2/2026-11-24",
            "northwind/c1/2026-11-24",
            "northwind/c1/2026-11-25",
            "inventory.csv",
        }
        assert all(len(v) == 16 for v in cursor.values())
        assert all(r.job_name in (None, "ingest_job") and r.run_key for r in first.run_requests)

        quiet = _tick(instance, repo, landing, first.cursor)
        assert quiet.run_requests == [] and quiet.cursor == first.cursor
        assert quiet.dynamic_partitions_requests == []

        log = landing / "northwind" / "c1" / "2026-11-25" / "kernel" / "node-a01.log"
        with open(log, "a") as f:
            f.write("Nov 25 09:00:00 node-a01 kernel: [ 1.0] a late line\n")  # a changed file
        write(landing / "northwind" / "c2" / "2026-11-26" / "kernel" / "n1.log", "x\n")  # a new cluster and day
        changed = _tick(instance, repo, landing, quiet.cursor)
        assert _keys(changed) == ["northwind:c1|2026-11-25", "northwind:c2|2026-11-26"]
        assert "northwind:c2" in instance.get_dynamic_partitions(clusters.name)
        again = _tick(instance, repo, landing, changed.cursor)
        assert again.run_requests == []


def test_sensor_reruns_latest_days_when_the_inventory_changes(repo, landing):
    with dg.instance_for_test() as instance:
        first = _tick(instance, repo, landing)
        inv = landing / "inventory.csv"
        inv.write_text(inv.read_text() + "northwind,c1,r02,node-a03,8,H100-SXM5-80GB,leaf-2,2026-11-20\n")
        st = inv.stat()
        os.utime(inv, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        result = _tick(instance, repo, landing, first.cursor)
        assert _keys(result) == ["bluepeak:west-2|2026-11-24", "northwind:c1|2026-11-25"]


def test_sensor_run_keys_change_with_the_files(repo, landing):
    with dg.instance_for_test() as instance:
        a = _tick(instance, repo, landing)
        path = landing / "bluepeak" / "west-2" / "2026-11-24" / "kernel" / "gpu-b07.log"
        path.write_text(path.read_text() + "2026-11-24T06:00:00+0000 gpu-b07 kernel: late\n")
        b = _tick(instance, repo, landing, a.cursor)
        key_a = {str(r.partition_key): r.run_key for r in a.run_requests}
        key_b = {str(r.partition_key): r.run_key for r in b.run_requests}
        assert key_a["bluepeak:west-2|2026-11-24"] != key_b["bluepeak:west-2|2026-11-24"]


def test_nightly_schedule_requests_yesterday_for_every_cluster(repo, landing):
    with dg.instance_for_test() as instance:
        assert nightly_ingest.cron_schedule == "15 2 * * *" and nightly_ingest.execution_timezone == "UTC"
        data = _tick_schedule(instance, repo, landing, dt.datetime(2026, 11, 25, 2, 15, tzinfo=UTC))
        keys = sorted(str(r.partition_key) for r in data.run_requests)
        assert keys == ["bluepeak:west-2|2026-11-24", "northwind:c1|2026-11-24"]
        assert all(r.tags.get("dagster/partition/date") == "2026-11-24" for r in data.run_requests)
        assert len({r.run_key for r in data.run_requests}) == 2
        assert "2026-11-24" in instance.get_dynamic_partitions(dates.name)

        # a day with no folder yet still gets its (empty) partition for every known cluster
        data = _tick_schedule(instance, repo, landing, dt.datetime(2026, 11, 28, 2, 15, tzinfo=UTC))
        keys = sorted(str(r.partition_key) for r in data.run_requests)
        assert keys == ["bluepeak:west-2|2026-11-27", "northwind:c1|2026-11-27"]


def test_schedule_skips_an_empty_landing_folder(repo, tmp_path):
    with dg.instance_for_test() as instance:
        (tmp_path / "empty").mkdir()
        data = _tick_schedule(instance, repo, tmp_path / "empty", dt.datetime(2026, 11, 25, 2, 15, tzinfo=UTC))
        assert data.run_requests == [] and "no clusters" in data.skip_message
