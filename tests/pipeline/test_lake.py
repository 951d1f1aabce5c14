"""The landing listing, the Parquet lake and the DuckDB view file (real files, no mocks)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading

import duckdb
import polars as pl
import pytest

from faultline.ingest import landing as landing_mod
from faultline.ingest.landing import Partition, cluster_key, split_cluster_key
from faultline.lake import files as lake
from faultline.lake import views as wh
from faultline.schema import TABLES

P = ("northwind", "c1", "2026-11-24")


def _audit(n: int, source: str = "a.log") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "source": [f"{source}{i}" for i in range(n)],
            "kind": ["kernel"] * n,
            "bytes": [10] * n,
            "bytes_read": [10] * n,
            "checksum": ["x"] * n,
            "lines_read": [3] * n,
            "events": [1] * n,
            "event_lines": [1] * n,
            "benign": [2] * n,
            "quarantined": [0] * n,
            "format": [None] * n,
            "message": [None] * n,
        }
    )


# ---------------------------------------------------------------- landing


def test_discover_ignores_hidden_and_reports_unsafe(landing, tmp_path):
    (landing / "northwind" / "bad name").mkdir()
    (landing / "northwind" / "c1" / "2026-13-45").mkdir()
    outside = tmp_path / "elsewhere" / "x" / "2026-11-24"
    outside.mkdir(parents=True)
    (landing / "evil").symlink_to(tmp_path / "elsewhere")
    found = landing_mod.discover(landing)
    assert [p.relpath for p in found.partitions] == [
        "bluepeak/west-2/2026-11-24",
        "northwind/c1/2026-11-24",
        "northwind/c1/2026-11-25",
    ]
    reasons = {p.path: p.reason for p in found.problems}
    assert reasons == {
        "evil": "symlink",
        "northwind/bad name": "invalid_name",
        "northwind/c1/2026-13-45": "invalid_date",
    }


def test_partition_files_by_kind(landing, tmp_path):
    day = landing / "northwind" / "c1" / "2026-11-24"
    (day / "notes.txt").write_text("hello\n")
    secret = tmp_path / "secret.log"
    secret.write_text("x\n")
    (day / "kernel" / "node-zz.log").symlink_to(secret)
    pf = landing_mod.partition_files(landing, Partition(*P))
    assert [(k.node, k.path.name, k.boot and k.boot.name) for k in pf.kernel] == [
        ("node-a01", "node-a01.log", "node-a01.boot"),
        ("node-a02", "node-a02.log", None),
    ]
    assert pf.sacct.name == "sacct.txt" and pf.slurmctld.name == "slurmctld.log"
    assert [(j, p.name) for j, p in pf.job_logs] == [("12345", "train.log")]
    assert [p.name for _, p in pf.flight] == ["rank_0.json", "rank_1.json", "rank_2.json", "rank_3.pkl"]
    assert [pf.rel(p) for p in pf.other] == ["northwind/c1/2026-11-24/notes.txt"]
    assert [(p.path, p.reason) for p in pf.problems] == [("northwind/c1/2026-11-24/kernel/node-zz.log", "symlink")]
    assert all(p.resolve().is_relative_to(landing.resolve()) for p in pf.all_files())


def test_missing_day_folder_is_an_empty_listing(landing):
    pf = landing_mod.partition_files(landing, Partition("northwind", "c1", "2026-12-01"))
    assert pf.all_files() == [] and pf.problems == []


def test_missing_landing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(landing_mod.LandingError, match="does not exist"):
        landing_mod.discover(tmp_path / "nope")


def test_read_inventory(landing):
    inv = landing_mod.read_inventory(landing)
    assert inv.columns == [
        "provider",
        "cluster",
        "rack",
        "node",
        "gpus",
        "gpu_model",
        "leaf_switch",
        "in_service_from",
        "in_service_to",
    ]
    assert inv["gpus"].to_list() == [8, 8, 8]
    assert inv["in_service_from"].to_list() == [dt.date(2026, 1, 1), dt.date(2026, 1, 1), None]
    (landing / "inventory.csv").write_text("provider,cluster,node\nx,y,z\n")
    with pytest.raises(landing_mod.LandingError, match=r"missing columns \['rack', 'gpus'\]"):
        landing_mod.read_inventory(landing)


INVENTORY_HEAD = "provider,cluster,rack,node,gpus,in_service_from\n"


def test_inventory_rows_with_problems_are_left_out_by_line(tmp_path):
    (tmp_path / "inventory.csv").write_text(
        INVENTORY_HEAD
        + "acme,c1,r1,n1,8,2026-01-01\n"
        + "acme,c1,r1,n2,8,2026-01-01,surplus\n"
        + "acme,c1,r1,n3,eight,\n"
        + "\n"
        + "acme,c1,r1,n1,4,\n"
        + "acme,c1,r2,n4,8,soon\n"
    )
    inv, problems = landing_mod.load_inventory(tmp_path)
    assert inv.select("node", "gpus", "in_service_from").rows() == [("n1", 8, dt.date(2026, 1, 1)), ("n4", 8, None)]
    where = str(tmp_path / "inventory.csv")
    assert problems == [
        f"{where}:3: 7 fields where the header has 6; row left out",
        f"{where}:4: gpus 'eight' is not a whole number of GPUs; row left out",
        f"{where}:6: node n1 listed again (first at line 2); row left out",
        f"{where}:7: in_service_from 'soon' is not a date (YYYY-MM-DD); ignored",
    ]


def test_inventory_unterminated_quote_keeps_the_rows_above_it(tmp_path):
    (tmp_path / "inventory.csv").write_text(
        INVENTORY_HEAD + "acme,c1,r1,n1,8,\n" + 'acme,c1,"r1,n2,8,\n' + "acme,c1,r1,n3,8,\nacme,c1,r1,n4,8,\n"
    )
    inv, problems = landing_mod.load_inventory(tmp_path)
    assert inv["node"].to_list() == ["n1"]
    assert problems == [f"{tmp_path / 'inventory.csv'}:3: a quote opened here runs to line 5; those lines left out"]
    assert landing_mod.inventory_warnings(tmp_path) == problems
    (tmp_path / "inventory.csv").write_text("provider,cluster\n")
    (why,) = landing_mod.inventory_warnings(tmp_path)
    assert why.endswith(
        "missing columns ['rack', 'node', 'gpus'] (needs provider, cluster, rack, node, gpus); "
        "the logs are ingested without racks, GPU counts or service windows"
    )


@pytest.mark.parametrize("provider,cluster", [("a.b", "c.d"), ("aws_us-east-1", "p5.48x"), ("x", "y__z")])
def test_cluster_key_round_trips(provider, cluster):
    assert split_cluster_key(cluster_key(provider, cluster)) == (provider, cluster)


# ---------------------------------------------------------------- lake


def test_write_read_round_trip_with_partition_columns_from_the_path(warehouse):
    path = lake.write_partition(warehouse, "ingest_audit", _audit(3), *P)
    assert path == warehouse.resolve() / "lake/ingest_audit/provider=northwind/cluster=c1/date=2026-11-24/data.parquet"
    assert "provider" not in pl.read_parquet_schema(path)  # kept in the path only
    back = lake.read_table(warehouse, "ingest_audit")
    assert back.schema == TABLES["ingest_audit"]
    assert back["date"].unique().to_list() == [dt.date(2026, 11, 24)]
    assert lake.read_partition(warehouse, "ingest_audit", *P).equals(back)


def test_cluster_names_that_look_like_numbers_stay_strings(warehouse):
    lake.write_partition(warehouse, "ingest_audit", _audit(1), "p", "001", "2026-11-24")
    assert lake.read_table(warehouse, "ingest_audit")["cluster"].to_list() == ["001"]


def test_schema_is_enforced_on_write(warehouse):
    with pytest.raises(ValueError, match="missing columns"):
        lake.write_partition(warehouse, "ingest_audit", _audit(1).drop("checksum"), *P)
    with pytest.raises(ValueError, match="another partition"):
        lake.write_partition(warehouse, "ingest_audit", _audit(1).with_columns(provider=pl.lit("other")), *P)
    assert not (warehouse / "lake").exists() or not list((warehouse / "lake").rglob("data.parquet"))


def test_partition_columns_given_absent_or_null_come_out_the_same():
    """The parser's frames carry the partition columns already in the table's schema (the
    one-query path); hand-made frames lack them or leave them null: all three are stored
    alike, sorted, and a row of another date is refused whichever path it takes."""
    base = _audit(3).reverse()
    want = lake.partition_frame("ingest_audit", base, *P)
    assert want.schema == TABLES["ingest_audit"] and want["source"].to_list() == ["a.log0", "a.log1", "a.log2"]
    assert want["date"].unique().to_list() == [dt.date(2026, 11, 24)]
    assert lake.partition_frame("ingest_audit", want.reverse(), *P).equals(want)  # conformed input
    nulls = want.with_columns(
        date=pl.when(pl.col("source") == "a.log1").then(None).otherwise(pl.col("date")),
        provider=pl.lit(None, pl.String),
    )
    assert lake.partition_frame("ingest_audit", nulls, *P).equals(want)
    other = want.with_columns(
        date=pl.when(pl.col("source") == "a.log2").then(dt.date(2026, 11, 25)).otherwise(pl.col("date"))
    )
    with pytest.raises(ValueError, match="1 rows belong to another partition"):
        lake.partition_frame("ingest_audit", other, *P)
    with pytest.raises(ValueError, match="another partition"):
        lake.partition_frame("ingest_audit", base.with_columns(cluster=pl.lit("c2")), *P)


def test_rerun_replaces_and_empty_still_writes(warehouse):
    lake.write_partition(warehouse, "ingest_audit", _audit(5), *P)
    lake.write_partition(warehouse, "ingest_audit", _audit(0), *P)
    back = lake.read_table(warehouse, "ingest_audit")
    assert back.height == 0 and back.schema == TABLES["ingest_audit"]
    files = [p.name for p in lake.partition_dir(warehouse, "ingest_audit", *P).iterdir()]
    assert files == ["data.parquet"]


def test_scan_of_a_table_never_written_is_empty(warehouse):
    assert lake.read_table(warehouse, "events").schema == TABLES["events"]


def test_temp_files_are_invisible_and_swept(warehouse):
    folder = lake.partition_dir(warehouse, "ingest_audit", *P)
    folder.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = folder / f".data.parquet{lake.TMP_MARK}{int(dead.stdout)}-abcd1234"
    stale.write_bytes(b"PAR1 half a file")
    live = folder / f".data.parquet{lake.TMP_MARK}{os.getppid()}-abcd1234"  # a running writer's
    live.write_bytes(b"PAR1 still writing")
    lake.write_partition(warehouse, "ingest_audit", _audit(2), *P)
    assert not stale.exists() and live.exists()
    assert lake.read_table(warehouse, "ingest_audit").height == 2
    con = duckdb.connect()
    n = con.execute(f"select count(*) from read_parquet('{lake.table_glob(warehouse, 'ingest_audit')}')").fetchone()[0]
    assert n == 2


def test_reader_sees_old_or_new_file_never_a_mix(warehouse):
    sizes = (1000, 3000)
    lake.write_partition(warehouse, "ingest_audit", _audit(sizes[0]), *P)
    seen, errors, stop = set(), [], threading.Event()
    glob = lake.table_glob(warehouse, "ingest_audit")

    def reader():
        con = duckdb.connect()
        readers = [
            lambda: lake.read_table(warehouse, "ingest_audit").height,
            lambda: lake.scan_table(warehouse, "ingest_audit").select(pl.len()).collect().item(),
            lambda: con.execute(f"select count(*) from read_parquet('{glob}')").fetchone()[0],
        ]
        i = 0
        while not stop.is_set():
            i += 1
            try:
                seen.add(readers[i % 3]())
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))

    t = threading.Thread(target=reader)
    t.start()
    for i in range(40):
        lake.write_partition(warehouse, "ingest_audit", _audit(sizes[i % 2], source=f"s{i % 2}"), *P)
    stop.set()
    t.join()
    assert errors == [] and seen <= set(sizes)


# ---------------------------------------------------------------- DuckDB views


def test_warehouse_views_and_readonly_connections(warehouse):
    lake.write_partition(warehouse, "ingest_audit", _audit(2), *P)
    rep = wh.build(warehouse)
    assert rep.views == ["ingest_audit"] and rep.errors == {}
    old = wh.connect_readonly(warehouse)  # held open across a rebuild
    assert old.execute("select count(*), any_value(cluster), any_value(date) from ingest_audit").fetchone() == (
        2,
        "c1",
        dt.date(2026, 11, 24),
    )
    lake.write_partition(warehouse, "ingest_audit", _audit(4), "bluepeak", "west-2", "2026-11-24")
    lake.write_partition(
        warehouse, "quarantine", pl.DataFrame(schema={c: t for c, t in TABLES["quarantine"].items()}), *P
    )
    rep = wh.build(warehouse)
    assert rep.views == ["ingest_audit", "quarantine"]
    assert old.execute("select count(*) from ingest_audit").fetchone() == (2,)  # its build's snapshot
    new = wh.connect_readonly(warehouse)
    assert new.execute("select count(*) from ingest_audit").fetchone() == (6,)
    assert new.execute("select count(*) from quarantine").fetchone() == (0,)
    with pytest.raises(duckdb.Error):
        new.execute("create table x as select 1")
    assert sorted(p.name for p in warehouse.iterdir()) == ["faultline.duckdb", "lake", "snapshots"]


def test_views_read_one_schema_unless_the_files_differ(warehouse):
    lake.write_partition(warehouse, "ingest_audit", _audit(2), *P)
    lake.write_partition(warehouse, "ingest_audit", _audit(3), "northwind", "c1", "2026-11-25")
    wh.build(warehouse)
    con = wh.connect_readonly(warehouse)
    sql = con.execute("select sql from duckdb_views() where view_name = 'ingest_audit'").fetchone()[0]
    assert "union_by_name" not in sql
    con.close()
    # a file written before a column existed (an older faultline): the view unions by name
    old = lake.partition_dir(warehouse, "ingest_audit", "northwind", "c1", "2026-11-23") / lake.DATA_FILE
    old.parent.mkdir(parents=True)
    _audit(1).drop("message").write_parquet(old)
    wh.build(warehouse)
    con = wh.connect_readonly(warehouse)
    sql = con.execute("select sql from duckdb_views() where view_name = 'ingest_audit'").fetchone()[0]
    assert "union_by_name = true" in sql
    assert con.execute("select count(*), count(message) from ingest_audit").fetchone() == (6, 0)
    assert con.execute("select count(*) from ingest_audit where date = '2026-11-23'").fetchone() == (1,)


def test_connect_readonly_before_any_build(warehouse):
    with pytest.raises(FileNotFoundError, match="run the pipeline first"):
        wh.connect_readonly(warehouse)


def test_sql_view_files():
    assert wh._view_statement("10_failures", "select 1 as x;") == "CREATE OR REPLACE VIEW failures AS\nselect 1 as x"
    text = "-- keeps its own name\ncreate or replace view y as select 2"
    assert wh._view_statement("y", text) == text
    with pytest.raises(ValueError):
        wh._view_statement("bad-name", "select 1")
    assert all(isinstance(n, str) and isinstance(t, str) for n, t in wh.sql_view_files())


def test_files_written_before_a_column_was_added_read_it_as_null(warehouse):
    """A lake from before floods were collapsed (no repeats, last_ts, last_raw): read_table and
    the views give the columns as null, and the queries that count repeats still run."""
    from faultline.lake import queries

    part = lake.partition_dir(warehouse, "events", "p", "c", "2026-01-01")
    part.mkdir(parents=True)
    row = {c: None for c in TABLES["events"] if c not in ("provider", "cluster", "date")}
    row.update(event_id="k.log:1", source="k.log", line_no=1, line_count=1, node="n1", xid=79, category="gpu_bus_lost")
    old = pl.DataFrame(
        [row], schema={c: t for c, t in TABLES["events"].items() if c not in ("provider", "cluster", "date")}
    )
    old.drop("repeats", "last_ts", "last_raw").write_parquet(part / lake.DATA_FILE)
    got = lake.read_table(warehouse, "events")
    assert got.schema == TABLES["events"] and got["repeats"].to_list() == [None]
    wh.build(warehouse)
    con = wh.connect_readonly(warehouse)
    assert con.execute("SELECT repeats, last_ts FROM events").fetchall() == [(None, None)]
    assert con.execute("SELECT sum(coalesce(repeats, 1)) FROM events").fetchone() == (1,)
    con.close()
    assert queries.run_sql(queries.connect(warehouse), "SELECT count(*) AS n FROM events")["n"].to_list() == [1]
