"""One landing folder through ``ingest_partition``, the Dagster assets and ``faultline run``."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys

import dagster as dg
import polars as pl
from click.testing import CliRunner
from helpers.hashes import frame_hash, lake_hashes
from helpers.landing import KERNEL_BSD as KERNEL_BSD_TEXT
from helpers.landing import KERNEL_JOURNALD, write

from faultline.commands.run import run
from faultline.defs.jobs import INGEST_ASSETS, INGEST_CHECKS
from faultline.defs.partitions import partition_key, register
from faultline.defs.resources import LakeResource, LandingResource
from faultline.ingest.landing import Partition
from faultline.ingest.partition import ingest_partition
from faultline.lake import files as lake
from faultline.lake.views import connect_readonly
from faultline.launch.local import QUIET, run_pipeline
from faultline.schema import TABLES
from faultline.simulate import simulate

DAY = Partition("northwind", "c1", "2026-11-24")


def _materialize(landing, warehouse, part=DAY, landing_resource=None, **kw):
    instance = dg.DagsterInstance.ephemeral()
    register(instance, [part])
    res = {
        "landing": landing_resource or LandingResource(path=str(landing)),
        "lake": LakeResource(warehouse=str(warehouse)),
    }
    return dg.materialize(
        [*INGEST_ASSETS, *INGEST_CHECKS],
        partition_key=partition_key(part),
        resources=res,
        instance=instance,
        run_config=QUIET,
        **kw,
    )


def test_ingest_partition_reads_every_kind_of_file(landing):
    t = ingest_partition(landing, "northwind", "c1", "2026-11-24")
    ev = t.events
    xid = ev.filter(pl.col("xid") == 79).row(0, named=True)
    assert (xid["node"], xid["category"], xid["gpu_pci"], xid["ts"]) == (
        "node-a01",
        "gpu_bus_lost",
        "0000:3b:00",
        dt.datetime(2026, 11, 24, 3, 14, 7, tzinfo=dt.timezone.utc),
    )
    assert xid["event_id"] == "northwind/c1/2026-11-24/kernel/node-a01.log:3"
    cats = dict(ev.group_by("source").agg(pl.col("category").sort()).iter_rows())
    assert "network" in cats["northwind/c1/2026-11-24/kernel/node-a02.log"]  # journald, cable
    assert {"network", "collective_timeout"} <= set(cats["northwind/c1/2026-11-24/jobs/12345/train.log"])
    assert ev.filter(pl.col("source").str.ends_with("train.log"))["job_id"].unique().to_list() == ["12345"]
    assert "scheduler" in cats["northwind/c1/2026-11-24/slurm/slurmctld.log"]
    assert t.kernel_events.height + t.job_events.height == ev.height
    assert ev.select("provider", "cluster", "date").unique().rows() == [("northwind", "c1", dt.date(2026, 11, 24))]

    assert t.jobs.select("job_id", "state", "n_nodes").rows() == [("12345", "FAILED", 2), ("12346", "COMPLETED", 1)]
    assert t.steps.select("job_id", "step").rows() == [("12345", "batch"), ("12345", "0")]
    assert t.flight["rank"].to_list() == [0, 1, 2] and t.flight["suspect_rank"].unique().to_list() == [2]

    q = dict(t.quarantine.select("source", "reason").iter_rows())
    assert q == {
        "northwind/c1/2026-11-24/jobs/12345/flight_recorder/rank_3.pkl": "flight_recorder_refused",
        "northwind/c1/2026-11-24/slurm/sacct.txt": "sacct_bad_row",
    }
    assert t.quarantine.filter(pl.col("reason") == "sacct_bad_row")["preview"].to_list() == [
        "this line is not a sacct row"
    ]

    a = t.audit
    assert a.height == 10  # one row per file
    assert sorted(a["kind"].unique()) == ["boot", "flight_recorder", "job", "kernel", "sacct", "slurmctld"]
    assert (a["lines_read"] == a["event_lines"] + a["benign"] + a["quarantined"]).all()
    sacct = a.filter(pl.col("kind") == "sacct").row(0, named=True)
    assert (sacct["lines_read"], sacct["events"], sacct["benign"], sacct["quarantined"]) == (6, 4, 1, 1)
    assert a["checksum"].str.len_chars().unique().to_list() == [64]
    for name, table in (
        ("raw_kernel_events", t.kernel_events),
        ("raw_slurm_jobs", t.jobs),
        ("steps", t.steps),
        ("flight_recorder", t.flight),
        ("quarantine", t.quarantine),
        ("ingest_audit", t.audit),
    ):
        assert table.schema == TABLES[name], name


def test_unsafe_and_unexpected_files_are_quarantined_not_read(landing, tmp_path):
    secret = write(
        tmp_path / "secret.log",
        "Nov 24 03:14:07 h kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n",
    )
    day = landing / "northwind" / "c1" / "2026-11-24"
    (day / "kernel" / "node-zz.log").symlink_to(secret)
    write(day / "README.txt", "notes\n")
    t = ingest_partition(landing, "northwind", "c1", "2026-11-24")
    q = dict(t.quarantine.select("source", "reason").iter_rows())
    assert q["northwind/c1/2026-11-24/kernel/node-zz.log"] == "refused_symlink"
    assert q["northwind/c1/2026-11-24/README.txt"] == "unexpected_file"
    assert "node-zz" not in t.events["node"].to_list()


def test_materialize_one_partition(landing, warehouse):
    result = _materialize(landing, warehouse)
    assert result.success
    checks = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert checks[("ingest_audit", "lines_balanced")] and all(checks.values()) and len(checks) == 12
    mats = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events()}
    assert {m.partition for m in mats.values()} == {"northwind:c1|2026-11-24"}
    meta = mats["core_events"].materialization.metadata
    assert meta["dagster/row_count"].value == 7 and "| ts |" in meta["preview"].value
    con = connect_readonly(warehouse)
    assert con.execute("select count(*) from events where xid = 79").fetchone() == (1,)
    assert con.execute("select job_id, n_steps, fr_suspect_rank from jobs order by job_id").fetchall() == [
        ("12345", 2, 2),
        ("12346", 0, None),
    ]
    assert con.execute("select count(*) from inventory where cluster = 'c1'").fetchone() == (2,)
    assert con.execute("select sum(lines_read) from ingest_audit").fetchone() == (27,)
    for table in TABLES:
        assert lake.read_table(warehouse, table).schema == TABLES[table]


class UnbalancedLanding(LandingResource):
    """Loses a line in the audit, as a parser bug would."""

    def ingest(self, part):
        tables = super().ingest(part)
        tables.audit = tables.audit.with_columns(benign=pl.col("benign") + (pl.col("kind") == "kernel").cast(pl.Int64))
        return tables


def test_blocking_check_stops_the_core_tables(landing, warehouse):
    result = _materialize(
        landing, warehouse, landing_resource=UnbalancedLanding(path=str(landing)), raise_on_error=False
    )
    assert not result.success
    checks = {
        e.check_name: e for e in result.get_asset_check_evaluations() if e.asset_key.to_user_string() == "ingest_audit"
    }
    assert checks["lines_balanced"].passed is False
    assert checks["lines_balanced"].metadata["unbalanced_files"].value == 2
    done = {m.asset_key.to_user_string() for m in result.get_asset_materialization_events()}
    assert "ingest_audit" in done and not done & {"core_events", "core_jobs", "out_warehouse"}
    assert lake.read_table(warehouse, "events").height == 0


def test_rerun_is_idempotent_late_files_touch_only_their_partition_removals_apply(landing, warehouse):
    seen = []
    summary = run_pipeline(landing, warehouse, progress=lambda i, n, p, s: seen.append((i, n, p.relpath)))
    assert seen == [
        (1, 3, "bluepeak/west-2/2026-11-24"),
        (2, 3, "northwind/c1/2026-11-24"),
        (3, 3, "northwind/c1/2026-11-25"),
    ]
    assert {k: summary[k] for k in ("partitions", "files", "lines", "events", "quarantined")} == {
        "partitions": 3,
        "files": 12,
        "lines": 35,
        "events": 10,
        "quarantined": 2,
    }
    first = lake_hashes(warehouse)
    assert len(first) == 3 * len(TABLES)
    run_pipeline(landing, warehouse)
    assert lake_hashes(warehouse) == first  # idempotent

    write(
        landing / "bluepeak" / "west-2" / "2026-11-24" / "kernel" / "gpu-b08.log",
        KERNEL_JOURNALD.replace("node-a02", "gpu-b08"),
    )
    run_pipeline(landing, warehouse)
    after = lake_hashes(warehouse)
    changed = {k for k in after if after[k] != first[k]}
    assert changed and all("provider=bluepeak/cluster=west-2/date=2026-11-24" in k for k in changed)
    assert {k.split("/")[0] for k in changed} >= {"raw_kernel_events", "events", "ingest_audit"}

    shutil.rmtree(landing / "northwind" / "c1" / "2026-11-24" / "jobs")
    run_pipeline(landing, warehouse, dates=["2026-11-24"], clusters=["northwind/c1"])
    job_events = lake.read_partition(warehouse, "raw_job_events", "northwind", "c1", "2026-11-24")
    assert job_events.height and job_events.filter(pl.col("source").str.contains("/jobs/")).height == 0
    assert lake.read_partition(warehouse, "flight_recorder", "northwind", "c1", "2026-11-24").height == 0
    assert lake.read_table(warehouse, "flight_recorder").height == 0


def test_partition_filters(landing, warehouse):
    s = run_pipeline(landing, warehouse, dates=[dt.date(2026, 11, 24)], clusters=["west-2"])
    assert [r["partition"] for r in s["rows"]] == ["bluepeak/west-2/2026-11-24"]
    assert run_pipeline(landing, warehouse, clusters=["nowhere"])["partitions"] == 0


def test_run_command(landing, warehouse, tmp_path):
    r = CliRunner().invoke(run, ["--landing", str(landing), "--warehouse", str(warehouse), "--cluster", "northwind:c1"])
    assert r.exit_code == 0, r.output
    assert "northwind/c1/2026-11-25" in r.output and "total" in r.output
    assert (warehouse / "faultline.duckdb").is_file()
    r = CliRunner().invoke(run, ["--landing", str(tmp_path / "missing"), "--warehouse", str(warehouse)])
    assert r.exit_code == 1 and "does not exist" in r.output
    r = CliRunner().invoke(run, ["--landing", str(landing), "--warehouse", str(warehouse), "--date", "2030-01-01"])
    assert r.exit_code == 1 and "no partitions" in r.output


def test_events_hash_is_stable_across_ingests(landing):
    a = ingest_partition(landing, "northwind", "c1", "2026-11-24")
    b = ingest_partition(landing, "northwind", "c1", "2026-11-24")
    for name in ("events", "jobs", "steps", "flight", "quarantine", "audit"):
        assert frame_hash(getattr(a, name)) == frame_hash(getattr(b, name)), name


def test_simulated_landing_goes_through(tmp_path):
    landing = tmp_path / "landing"
    simulate(landing, scenario="demo", nodes=8, days=1, seed=3)
    summary = run_pipeline(landing, tmp_path / "warehouse")
    assert summary["partitions"] >= 1 and summary["lines"] > 0
    audit = lake.read_table(tmp_path / "warehouse", "ingest_audit")
    assert (audit["lines_read"] == audit["event_lines"] + audit["benign"] + audit["quarantined"]).all()


def test_a_day_with_no_folder_materializes_empty_tables(landing, warehouse):
    missing = Partition("northwind", "c1", "2026-11-27")  # what the nightly run asks for
    assert _materialize(landing, warehouse, part=missing).success
    for table in TABLES:
        df = lake.read_partition(warehouse, table, "northwind", "c1", "2026-11-27")
        assert df.schema == TABLES[table]
        assert df.height == (2 if table == "inventory" else 0), table


def test_parallel_workers_write_the_same_lake(landing, tmp_path):
    """Partitions are independent: two worker processes give byte-identical tables."""
    one, two = tmp_path / "one", tmp_path / "two"
    run_pipeline(landing, one, workers=1)
    run_pipeline(landing, two, workers=2)
    assert lake_hashes(one) == lake_hashes(two)
    analytics = lambda wh: {
        p.name: frame_hash(pl.read_parquet(p)) for p in sorted((wh / "analytics").glob("*.parquet"))
    }  # noqa: E731
    assert analytics(one) == analytics(two) and len(analytics(one)) >= 9


def test_one_partition_parsed_in_two_processes_writes_the_same_lake(landing, tmp_path, monkeypatch):
    """A big partition's files are split across processes (``ingest.pool``): same lake."""
    from faultline.ingest import pool

    one, two = tmp_path / "one", tmp_path / "two"
    monkeypatch.setenv(pool.WORKERS_ENV, "1")
    run_pipeline(landing, one, workers=1, analytics=False)
    monkeypatch.setenv(pool.WORKERS_ENV, "2")
    monkeypatch.setattr(pool, "SPLIT_BYTES", 1)
    calls = []
    real = pool.ProcessPoolExecutor
    monkeypatch.setattr(pool, "ProcessPoolExecutor", lambda *a, **k: calls.append(a) or real(*a, **k))
    run_pipeline(landing, two, workers=1, analytics=False)
    assert calls, "the parse was not split"
    assert lake_hashes(one) == lake_hashes(two)


def test_a_finished_command_freezes_the_heap_so_the_process_exits_at_once():
    """Every ``faultline`` command ends by freezing the GC's objects (``cli._done``): the exit
    then skips a last collection over Dagster's heap. A failing command does not get there."""
    code = (
        "import gc, sys\n"
        "from faultline.cli import main\n"
        "before = gc.get_freeze_count()\n"
        "main(sys.argv[1:], standalone_mode=False)\n"
        "print(before, gc.get_freeze_count())\n"
    )
    out = subprocess.run([sys.executable, "-c", code, "sql", "--list"], capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split()[-2:])
    assert before == 0 and after > 10_000
    bad = subprocess.run(
        [sys.executable, "-c", code, "sql", "--query", "no_such_query"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "no_such_query" in bad.stderr


def test_a_pool_worker_starts_with_dagster_built_and_frozen_and_the_gc_on(landing, tmp_path):
    """``_start_worker`` (the pool's initializer) builds the job and instance once and freezes
    them out of the cyclic GC, leaving the GC on; a failure there is left to the first run to
    report. Checked in a fresh process: freezing is for worker processes, not this one."""
    code = (
        "import gc, json, sys\n"
        "from faultline.launch import local as runner\n"
        "runner._start_worker(sys.argv[1], sys.argv[2], None, (('2026-11-24',), ('northwind:c1',)))\n"
        "ok = {'gc': gc.isenabled(), 'frozen': gc.get_freeze_count(), 'jobs': len(runner._job_cache),\n"
        "      'instances': len(runner._instance_cache)}\n"
        "def broken(*a):\n    raise OSError('no such warehouse')\n"
        "runner._lake_job, runner._job_cache = broken, {}\n"
        "runner._start_worker(sys.argv[1], sys.argv[2], None, (('2026-11-25',), ('northwind:c1',)))\n"
        "ok['gc_after_failure'] = gc.isenabled()\n"
        "print(json.dumps(ok))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(landing), str(tmp_path / "wh")], capture_output=True, text=True, check=True
    ).stdout
    got = json.loads(out)
    assert got["gc"] and got["gc_after_failure"] and got["jobs"] == 1 and got["instances"] == 1
    assert got["frozen"] > 100_000  # Dagster's objects, not a handful


def test_audit_checksum_is_the_stored_files_sha256(tmp_path):
    """Plain files reuse the hash taken while reading (no second pass); it must still be the
    checksum of the file as stored, for plain and compressed files alike."""
    import gzip

    from faultline.ingest.parse import file_checksum

    day = tmp_path / "northwind" / "c1" / "2026-11-24" / "kernel"
    write(day / "node-a01.log", KERNEL_BSD_TEXT)
    write(day / "node-a02.log.gz", gzip.compress(KERNEL_JOURNALD.encode()))
    pt = ingest_partition(tmp_path, "northwind", "c1", "2026-11-24")
    rows = pt.audit.select("source", "checksum").rows()
    assert len(rows) == 2
    for source, checksum in rows:  # one plain, one gzip
        assert checksum == file_checksum(tmp_path / source), source


def test_run_with_a_bad_prices_file_is_one_error_naming_the_line(landing, tmp_path):
    """--prices (or LANDING/prices.csv) is read before anything is ingested; a bad file stops
    the run with one line naming it, and a good one prices the analytics."""
    bad = tmp_path / "prices.csv"
    bad.write_text(
        "provider,cluster,gpu_model,usd_per_gpu_hour,valid_from,valid_to\nnorthwind,*,*,2.5,,\nbluepeak,*,*,n/a,,\n"
    )
    wh = tmp_path / "wh"
    r = CliRunner().invoke(run, ["--landing", str(landing), "--warehouse", str(wh), "--prices", str(bad)])
    assert r.exit_code == 1 and r.output.strip() == f"Error: {bad}, line 3: usd_per_gpu_hour 'n/a' is not a number"
    assert not wh.exists()
    r = CliRunner().invoke(
        run, ["--landing", str(landing), "--warehouse", str(wh), "--prices", str(tmp_path / "none.csv")]
    )
    assert r.exit_code == 1 and "none.csv: no such file" in r.output
    bad.write_text("provider,cluster,gpu_model,usd_per_gpu_hour,valid_from,valid_to\nnorthwind,*,*,2.5,,\n")
    r = CliRunner().invoke(
        run, ["--landing", str(landing), "--warehouse", str(wh), "--prices", str(bad), "--workers", "1"]
    )
    assert r.exit_code == 0, r.output
    costs = pl.read_parquet(wh / "analytics" / "provider_costs.parquet").filter(pl.col("level") == "provider")
    priced = dict(costs.select("provider", "usd_per_gpu_hour").iter_rows())
    assert priced["northwind"] == 2.5 and priced.get("bluepeak", None) is None


def test_known_apply_keeps_the_prices_of_the_run(landing, tmp_path):
    """`known apply` recomputes the analytics as `faultline run` does at its end: with the
    landing folder's prices.csv (or --prices); without one it says the dollars are gone."""
    from faultline.cli import main

    land = landing
    (land / "prices.csv").write_text(
        "provider,cluster,gpu_model,usd_per_gpu_hour,valid_from,valid_to\nnorthwind,*,*,2.5,,\n"
    )
    wh = tmp_path / "wh"
    r = CliRunner().invoke(run, ["--landing", str(land), "--warehouse", str(wh), "--workers", "1"])
    assert r.exit_code == 0, r.output

    def paid() -> dict:
        costs = pl.read_parquet(wh / "analytics" / "provider_costs.parquet").filter(pl.col("level") == "provider")
        return dict(costs.select("provider", "usd_per_gpu_hour").iter_rows())

    assert paid()["northwind"] == 2.5
    r = CliRunner().invoke(main, ["known", "apply", "--warehouse", str(wh), "--landing", str(land)])
    assert r.exit_code == 0 and "warning" not in r.output, r.output
    assert paid()["northwind"] == 2.5
    bad = tmp_path / "bad.csv"
    bad.write_text("provider,cluster,gpu_model,usd_per_gpu_hour,valid_from,valid_to\nnorthwind,*,*,n/a,,\n")
    r = CliRunner().invoke(main, ["known", "apply", "--warehouse", str(wh), "--prices", str(bad)])
    assert r.exit_code == 1 and r.output.strip() == f"Error: {bad}, line 2: usd_per_gpu_hour 'n/a' is not a number"
    assert paid()["northwind"] == 2.5
    r = CliRunner().invoke(main, ["known", "apply", "--warehouse", str(wh), "--landing", str(tmp_path / "elsewhere")])
    assert r.exit_code == 0, r.output
    assert "warning: the analytics had prices; no prices.csv at " in r.output
    assert paid()["northwind"] is None
