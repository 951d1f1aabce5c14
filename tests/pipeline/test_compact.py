"""Monthly compaction (``faultline.lake.compact``) and the views over it, on a real simulated lake.

One small warehouse is built per module by the real pipeline (``faultline simulate`` logs,
``run_pipeline``): 2 clusters, 2026-01-28 to 2026-02-02, so January is a closed month and
February the open one. Each test works on its own copy. "Truth" is what the views return
without any compacted file (the day files only): with compaction every view, named query,
column and type must be the same, whatever happened to the day files since.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from helpers.hashes import frame_hash

from faultline.lake import compact as C
from faultline.lake import files as lake
from faultline.lake import queries as Q
from faultline.lake import snapshot as S
from faultline.lake import storage
from faultline.lake import views as W
from faultline.launch.local import run_pipeline
from faultline.schema import TABLES
from faultline.simulate import simulate

START, DAYS = "2026-01-28", 6
JAN = [f"2026-01-{d}" for d in range(28, 32)]
CLUSTERS = [("bluepeak", "b1"), ("northwind", "a1")]
DUCKDB_CLI = shutil.which("duckdb", path=str(Path(sys.executable).parent)) or shutil.which("duckdb")
MARK = "rerun_marker_7f3a"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("compact")
    simulate(base / "landing", scenario="demo", providers=2, nodes=8, days=DAYS, seed=5, start_date=START, noise=500)
    run_pipeline(base / "landing", base / "wh")
    return base


@pytest.fixture
def site(built, tmp_path) -> tuple[Path, Path]:
    """``(landing, warehouse)``: fresh copies, no compacted file, views built over the copy."""
    landing, wh = tmp_path / "landing", tmp_path / "wh"
    shutil.copytree(built / "landing", landing)
    shutil.copytree(built / "wh", wh, ignore=shutil.ignore_patterns(C.COMPACT_DIR, W.DB_FILE, S.SNAPSHOT_DIR))
    W.build(wh)
    return landing, wh


def _views(wh: Path, con: duckdb.DuckDBPyConnection | None = None) -> dict[str, tuple]:
    """Every view: its columns with DuckDB types, row count and a row-order-free content hash."""
    own = con is None
    con = con or W.connect_readonly(wh)
    try:
        con.execute("SET TimeZone = 'UTC'")
        names = [
            r[0]
            for r in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = 'faultline' ORDER BY 1"
            ).fetchall()
        ]
        out = {}
        for name in names:
            cols = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {name}").fetchall()]
            df = con.sql(f"SELECT * FROM {name}").pl()
            out[name] = (cols, df.height, frame_hash(df))
        return out
    finally:
        if own:
            con.close()


def _truth(wh: Path) -> dict[str, tuple]:
    """The views over the day files alone (the compacted files set aside, then put back)."""
    aside = wh.parent / "compact-aside"
    moved = (wh / C.COMPACT_DIR).is_dir()
    if moved:
        os.rename(wh / C.COMPACT_DIR, aside)
    try:
        W.build(wh)
        return _views(wh)
    finally:
        if moved:
            os.rename(aside, wh / C.COMPACT_DIR)
        W.build(wh)


def _view_sql(wh: Path, name: str) -> str:
    con = W.connect_readonly(wh)
    try:
        return con.execute("SELECT sql FROM duckdb_views() WHERE view_name = ?", [name]).fetchone()[0]
    finally:
        con.close()


def _month_file(wh: Path, table: str, provider: str, cluster: str, month: str = "2026-01") -> Path:
    return C.month_file(wh, table, provider, cluster, month)


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    return con.execute(sql).fetchone()[0]


def _query_results(wh: Path) -> dict[str, str]:
    con = Q.connect(wh)
    try:
        fill = {
            "job_id": con.execute(
                "SELECT job_id FROM job_failures ORDER BY gpu_hours_lost DESC NULLS LAST, job_id LIMIT 1"
            ).fetchone()[0],
            "node": con.execute(
                "SELECT node FROM events WHERE node IS NOT NULL GROUP BY node ORDER BY count(*) DESC, node LIMIT 1"
            ).fetchone()[0],
        }
    finally:
        con.close()
    out = {}
    for q in Q.load_queries().values():
        df = Q.run_query(wh, q, {p.name: fill[p.name] for p in q.params if p.required})
        out[q.name] = f"{df.height}:{frame_hash(df)}"
    return out


def _rewrite_day(wh: Path, table: str, provider: str, cluster: str, date: str, extra_from: str | None = None) -> int:
    """Re-write a day file the way a re-run does (``write_partition``), with the rows of
    ``extra_from`` (another real day, re-dated) added; returns the new row count."""
    df = lake.read_partition(wh, table, provider, cluster, date)
    if extra_from:
        more = lake.read_partition(wh, table, provider, cluster, extra_from).drop(["provider", "cluster", "date"])
        df = pl.concat([df.drop(["provider", "cluster", "date"]), more], how="vertical")
    lake.write_partition(wh, table, df, provider, cluster, date)
    return df.height


# -- compaction changes nothing a reader can see --------------------------------------------------


def test_compacted_views_and_queries_equal_the_day_files(site):
    _landing, wh = site
    truth, answers = _views(wh), _query_results(wh)
    rep = C.compact(wh)
    assert not rep.failed and not rep.skipped, (rep.failed, rep.skipped)
    tables = lake.tables_present(wh)
    # January (closed) is compacted for every table and cluster, February (open) is not
    assert sorted(rep.written) == sorted(
        f"{t}/provider={p}/cluster={c}/month=2026-01" for t in tables for p, c in CLUSTERS
    )
    assert not list((wh / C.COMPACT_DIR).rglob("month=2026-02"))
    W.build(wh)
    for table in tables:
        assert f"{C.COMPACT_DIR}/{table}/" in _view_sql(wh, table), table
    after = _views(wh)
    assert after == truth
    assert after["events"][0][-3:] == [("cluster", "VARCHAR"), ("date", "DATE"), ("provider", "VARCHAR")]
    assert _query_results(wh) == answers
    # the compacted file really holds the month, partition columns included
    f = pl.read_parquet(_month_file(wh, "events", "northwind", "a1"))
    assert sorted(f["date"].unique().to_list()) == [dt.date.fromisoformat(d) for d in JAN]
    assert set(f["provider"]) == {"northwind"} and set(f["cluster"]) == {"a1"}
    assert f.height == sum(lake.read_partition(wh, "events", "northwind", "a1", d).height for d in JAN)


def test_compact_is_idempotent_and_cheap_when_nothing_changed(site):
    _landing, wh = site
    first = C.compact(wh)
    stamps = {p: p.stat().st_mtime_ns for p in (wh / C.COMPACT_DIR).rglob(lake.DATA_FILE)}
    again = C.compact(wh)
    assert again.written == [] and sorted(again.current) == sorted(first.written)
    assert {p: p.stat().st_mtime_ns for p in (wh / C.COMPACT_DIR).rglob(lake.DATA_FILE)} == stamps
    # deterministic: the same day files give the same bytes
    path = _month_file(wh, "jobs", "bluepeak", "b1")
    before = path.read_bytes()
    path.unlink()
    assert C.compact(wh, ["jobs"]).written == ["jobs/provider=bluepeak/cluster=b1/month=2026-01"]
    assert path.read_bytes() == before


def test_duckdb_shell_reads_the_compacted_views(site):
    assert DUCKDB_CLI, "the duckdb shell (dev dependency duckdb-cli) is not installed"
    _landing, wh = site
    C.compact(wh)
    W.build(wh)
    con = W.connect_readonly(wh)
    want = con.execute("SELECT count(*), count(DISTINCT date), sum(line_no) FROM events").fetchone()
    con.close()
    out = subprocess.run(
        [
            DUCKDB_CLI,
            "-readonly",
            "-csv",
            "-noheader",
            str(W.db_path(wh)),
            "-c",
            "SELECT count(*), count(DISTINCT date), sum(line_no) FROM events",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()
    assert out == ",".join(str(v) for v in want)


# -- the day files stay the truth -------------------------------------------------------------------


def test_rerun_of_a_day_in_a_compacted_month_shows_its_new_rows_once(site):
    landing, wh = site
    C.compact(wh)
    W.build(wh)
    old = W.connect_readonly(wh)  # a reader holding the view file of before the re-run
    assert _count(old, f"SELECT count(*) FROM events WHERE raw LIKE '%{MARK}%'") == 0
    # a late log line for a January day, then that day re-run by the pipeline
    log = landing / "northwind" / "a1" / "2026-01-29" / "kernel" / "a1-r01-n01.log"
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(
            f"Jan 29 23:10:00 a1-r01-n01 kernel: [170000.000000] NVRM: Xid (PCI:0000:3b:00): 79, "
            f"pid=4242, name={MARK}, GPU has fallen off the bus.\n"
        )
    run_pipeline(landing, wh, dates=["2026-01-29"], clusters=["northwind:a1"], analytics=False)
    sql = f"SELECT count(*) FROM events WHERE raw LIKE '%{MARK}%'"
    dupes = "SELECT count(*) FROM (SELECT event_id FROM events GROUP BY ALL HAVING count(*) > 1)"
    con = W.connect_readonly(wh)  # the view file the run rebuilt
    assert _count(con, sql) == 1 and _count(con, dupes) == 0
    con.close()
    W.build(wh)  # stale month: read from its day files
    assert _views(wh) == _truth(wh)
    # recompacted: the compacted file is used again
    assert not C.compact(wh).failed
    W.build(wh)
    assert "cluster=a1/month=2026-01" in _view_sql(wh, "events")
    new = W.connect_readonly(wh)
    assert _count(new, sql) == 1 and _count(new, dupes) == 0
    # the reader of before still reads the lake as it was when it connected: once, no marker
    assert _count(old, sql) == 0 and _count(old, dupes) == 0
    old.close()
    new.close()
    assert _views(wh) == _truth(wh)


def test_a_reader_keeps_its_snapshot_while_days_change_under_it(site):
    """A reader keeps the lake of its view file while days are re-run, late days arrive and
    months are recompacted; the next build shows each new day once."""
    _landing, wh = site
    C.compact(wh)
    W.build(wh)
    old = W.connect_readonly(wh)

    def per_day(con):
        return dict(
            con.execute(
                "SELECT date::VARCHAR, count(*) FROM events WHERE provider = 'northwind' GROUP BY ALL"
            ).fetchall()
        )

    before = per_day(old)
    assert "2026-01-15" not in before
    # a re-run adds rows to a compacted day; a late day arrives in the compacted month
    n29 = _rewrite_day(wh, "events", "northwind", "a1", "2026-01-29", extra_from="2026-01-30")
    n15 = _rewrite_day(wh, "events", "northwind", "a1", "2026-01-15", extra_from="2026-01-28")
    assert per_day(old) == before
    W.build(wh)  # the month is stale: day files
    assert per_day(W.connect_readonly(wh)) == {**before, "2026-01-15": n15, "2026-01-29": n29}
    assert C.compact(wh, ["events"]).written == ["events/provider=northwind/cluster=a1/month=2026-01"]
    assert per_day(old) == before
    W.build(wh)  # recompacted
    assert "cluster=a1/month=2026-01" in _view_sql(wh, "events")
    assert per_day(W.connect_readonly(wh)) == {**before, "2026-01-15": n15, "2026-01-29": n29}
    assert per_day(old) == before
    assert _views(wh) == _truth(wh)


def test_late_day_in_a_compacted_month_keeps_the_rest_compacted(site):
    _landing, wh = site
    C.compact(wh)
    _rewrite_day(wh, "events", "bluepeak", "b1", "2026-01-20", extra_from="2026-01-28")
    W.build(wh)
    text = _view_sql(wh, "events")
    assert "cluster=b1/month=2026-01" in text and "2026-01-20" not in text
    assert _views(wh) == _truth(wh)
    rep = C.compact(wh)
    assert rep.written == ["events/provider=bluepeak/cluster=b1/month=2026-01"]
    W.build(wh)
    text = _view_sql(wh, "events")  # the single day beside the run of four
    assert "CAST('2026-01-20' AS DATE)" in text and "CAST('2026-01-28' AS DATE) AND CAST('2026-01-31' AS DATE)" in text
    assert _views(wh) == _truth(wh)


def test_stale_or_unreadable_compacted_files_fall_back(site):
    _landing, wh = site
    C.compact(wh)
    truth = _truth(wh)
    # the same bytes written again (a re-run that changed nothing): a new file, so stale
    day = lake.partition_dir(wh, "jobs", "northwind", "a1", "2026-01-30") / lake.DATA_FILE
    data = day.read_bytes()
    day.unlink()
    day.write_bytes(data)
    # a truncated compacted file, and one whose manifest names another cluster's days
    bad = _month_file(wh, "steps", "bluepeak", "b1")
    bad.write_bytes(bad.read_bytes()[:100])
    shutil.copy(_month_file(wh, "ingest_audit", "northwind", "a1"), _month_file(wh, "ingest_audit", "bluepeak", "b1"))
    rep = W.build(wh)
    assert not rep.errors
    assert "cluster=a1/month=2026-01" not in _view_sql(wh, "jobs")
    assert "cluster=b1/month=2026-01" in _view_sql(wh, "jobs")
    assert f"{C.COMPACT_DIR}/steps/provider=bluepeak" not in _view_sql(wh, "steps")
    assert f"{C.COMPACT_DIR}/ingest_audit/provider=bluepeak" not in _view_sql(wh, "ingest_audit")
    assert _views(wh) == truth
    rep = C.compact(wh)
    assert sorted(rep.written) == [
        "ingest_audit/provider=bluepeak/cluster=b1/month=2026-01",
        "jobs/provider=northwind/cluster=a1/month=2026-01",
        "steps/provider=bluepeak/cluster=b1/month=2026-01",
    ]
    W.build(wh)
    assert _views(wh) == truth


def test_a_schema_change_is_not_mixed_with_compacted_months(site):
    """A day file with another column set (an older faultline): the view unions by name over
    the day files and ignores the compacted files; compaction leaves that month alone."""
    _landing, wh = site
    C.compact(wh)
    path = lake.partition_dir(wh, "ingest_audit", "northwind", "a1", "2026-01-29") / lake.DATA_FILE
    pl.read_parquet(path).drop("message").write_parquet(path)
    rep = C.compact(wh, ["ingest_audit"])
    assert rep.skipped == {
        "ingest_audit/provider=northwind/cluster=a1/month=2026-01": "its day files differ in columns or types"
    }
    W.build(wh)
    text = _view_sql(wh, "ingest_audit")
    assert "union_by_name" in text and C.COMPACT_DIR not in text
    assert _views(wh) == _truth(wh)


# -- crashes --------------------------------------------------------------------------------------

CRASH = """
import os, sys
from faultline.lake import compact
real = os.replace
def replace(src, dst):
    if compact.COMPACT_DIR in str(dst):
        os._exit(9)                  # killed after the new file is written, before the rename
    return real(src, dst)
os.replace = replace
compact.compact(sys.argv[1])
"""


def test_a_killed_compaction_leaves_the_previous_month_readable(site):
    _landing, wh = site
    C.compact(wh)
    W.build(wh)
    reader = W.connect_readonly(wh)
    target = _month_file(wh, "events", "northwind", "a1")
    previous = target.read_bytes()
    _rewrite_day(wh, "events", "northwind", "a1", "2026-01-31", extra_from="2026-01-29")
    proc = subprocess.run([sys.executable, "-c", CRASH, str(wh)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 9, proc.stderr
    assert target.read_bytes() == previous  # the old month, whole
    left = [p for p in target.parent.iterdir() if p.name != lake.DATA_FILE]
    assert len(left) == 1 and lake.TMP_MARK in left[0].name  # the dead writer's file, not data.parquet
    assert _count(reader, "SELECT count(*) FROM events") > 0  # the reader of before still reads
    W.build(wh)
    assert "cluster=a1/month=2026-01" not in _view_sql(wh, "events")  # stale: day files
    truth = _views(wh)
    rep = C.compact(wh)
    assert rep.written == ["events/provider=northwind/cluster=a1/month=2026-01"] and not rep.failed
    assert [p.name for p in target.parent.iterdir()] == [lake.DATA_FILE]  # swept
    W.build(wh)
    assert "cluster=a1/month=2026-01" in _view_sql(wh, "events")
    assert _views(wh) == truth
    reader.close()


def test_a_failed_compaction_keeps_the_old_file_and_reports_it(site, monkeypatch):
    _landing, wh = site
    C.compact(wh)
    target = _month_file(wh, "jobs", "bluepeak", "b1")
    previous = target.read_bytes()
    _rewrite_day(wh, "jobs", "bluepeak", "b1", "2026-01-28", extra_from="2026-01-29")
    real = os.replace

    def replace(src, dst):
        if C.COMPACT_DIR in str(dst):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    rep = C.compact(wh)
    monkeypatch.setattr(os, "replace", real)
    assert list(rep.failed) == ["jobs/provider=bluepeak/cluster=b1/month=2026-01"]
    assert "No space left" in rep.failed["jobs/provider=bluepeak/cluster=b1/month=2026-01"]
    assert target.read_bytes() == previous and [p.name for p in target.parent.iterdir()] == [lake.DATA_FILE]
    W.build(wh)
    assert "cluster=b1/month=2026-01" not in _view_sql(wh, "jobs")
    assert _views(wh) == _truth(wh)


# -- what is not compacted ------------------------------------------------------------------------


def test_only_closed_months_are_compacted():
    def day(date, cluster="a1"):
        return C.DayFile(
            "p", cluster, dt.date.fromisoformat(date), f"provider=p/cluster={cluster}/date={date}/data.parquet", 1, 1, 1
        )

    week = [day(f"2026-11-{d:02d}") for d in range(1, 8)]
    assert C.closed_months(week) == {}  # the demo's week
    span = [day("2026-01-30"), day("2026-01-31"), day("2026-02-01"), day("2026-03-01", "b2")]
    assert C.closed_months(span) == {("p", "a1", "2026-01"): span[:2]}  # per cluster
    assert C._day_key(("provider=p", "cluster=NULL", "date=2026-01-01", "data.parquet")) is None
    assert C._day_key(("provider=p", "cluster=c", "date=20260101", "data.parquet")) is None
    assert C._day_key(("provider=p", "cluster=001", "date=2026-01-01", "data.parquet")) == (
        "p",
        "001",
        dt.date(2026, 1, 1),
    )


def test_a_single_month_lake_writes_nothing(site):
    _landing, wh = site
    for table in lake.tables_present(wh):
        for p, c in CLUSTERS:
            for d in JAN:
                shutil.rmtree(lake.partition_dir(wh, table, p, c, d))
    rep = C.compact(wh)
    assert rep.written == [] and rep.current == [] and not (wh / C.COMPACT_DIR).exists()
    W.build(wh)
    assert C.COMPACT_DIR not in _view_sql(wh, "events")


def test_a_month_without_day_files_is_removed_and_readers_keep_their_snapshot(site):
    """A cluster's January deleted from the lake (and a whole table's days): their compacted
    months are caches of nothing and go; the rest stays; a reader of before still reads them."""
    _landing, wh = site
    C.compact(wh)
    W.build(wh)
    old = W.connect_readonly(wh)
    before = _count(old, "SELECT count(*) FROM events WHERE cluster = 'a1' AND date < DATE '2026-02-01'")
    assert before > 0
    for table in lake.tables_present(wh):
        for d in JAN:
            shutil.rmtree(lake.partition_dir(wh, table, "northwind", "a1", d))
    shutil.rmtree(wh / "lake" / "steps")  # every day of one table
    rep = C.compact(wh)
    gone = sorted(
        f"{t}/provider=northwind/cluster=a1/month=2026-01"
        for t in TABLES
        if t != "steps" and (wh / C.COMPACT_DIR / t / "provider=bluepeak").is_dir()
    )
    assert sorted(r for r in rep.removed if not r.startswith("steps/")) == gone and gone
    assert sorted(r for r in rep.removed if r.startswith("steps/")) == [
        "steps/provider=bluepeak/cluster=b1/month=2026-01",
        "steps/provider=northwind/cluster=a1/month=2026-01",
    ]
    assert not _month_file(wh, "events", "northwind", "a1").exists() and not (wh / C.COMPACT_DIR / "steps").exists()
    assert _month_file(wh, "events", "bluepeak", "b1").exists()
    assert rep.written == [] and C.compact(wh).removed == []
    assert _count(old, "SELECT count(*) FROM events WHERE cluster = 'a1' AND date < DATE '2026-02-01'") == before
    old.close()
    W.build(wh)
    assert _views(wh) == _truth(wh)


def test_a_file_outside_the_layout_turns_compaction_off_for_its_table(site):
    _landing, wh = site
    C.compact(wh)
    stray = lake.partition_dir(wh, "steps", "northwind", "a1", "2026-01-29") / "old" / lake.DATA_FILE
    stray.parent.mkdir()
    shutil.copy(stray.parent.parent / lake.DATA_FILE, stray)
    rep = C.compact(wh)
    assert "steps" in rep.skipped and not rep.written
    W.build(wh)
    assert C.COMPACT_DIR not in _view_sql(wh, "steps") and C.COMPACT_DIR in _view_sql(wh, "jobs")
    assert _views(wh) == _truth(wh)


def test_url_warehouse_is_left_alone(tmp_path, monkeypatch):
    import fsspec

    url = f"memory:///compact-{os.getpid()}"
    monkeypatch.setenv(storage.DUCKDB_ENV, str(tmp_path / "mem.duckdb"))
    try:
        for date in ("2026-01-30", "2026-02-01"):
            lake.write_partition(url, "ingest_audit", pl.DataFrame(schema=TABLES["ingest_audit"]), "p", "c", date)
        rep = C.compact(url)
        assert rep.written == [] and "*" in rep.skipped
        assert not fsspec.filesystem("memory").exists(f"/compact-{os.getpid()}/{C.COMPACT_DIR}")
        W.build(url)
        con = Q.connect(url)
        try:
            assert con.execute("SELECT count(*) FROM ingest_audit").fetchone() == (0,)
            text = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'ingest_audit'").fetchone()[0]
            assert C.COMPACT_DIR not in text
        finally:
            con.close()
    finally:
        fs = fsspec.filesystem("memory")
        if fs.exists(f"/compact-{os.getpid()}"):
            fs.rm(f"/compact-{os.getpid()}", recursive=True)


def test_the_pipeline_compacts_closed_months_before_it_builds_the_views(built, tmp_path):
    """``faultline run`` (``launch.local.finish``) compacts; the views it leaves read January compacted."""
    months = sorted(
        p.parent.relative_to(built / "wh" / C.COMPACT_DIR).as_posix()
        for p in (built / "wh" / C.COMPACT_DIR / "events").rglob(lake.DATA_FILE)
    )
    assert months == [
        "events/provider=bluepeak/cluster=b1/month=2026-01",
        "events/provider=northwind/cluster=a1/month=2026-01",
    ]
    assert "cluster=a1/month=2026-01" in _view_sql(built / "wh", "events")
    wh = tmp_path / "wh"
    shutil.copytree(built / "wh", wh, ignore=shutil.ignore_patterns(C.COMPACT_DIR))
    summary = run_pipeline(built / "landing", wh, dates=["2026-02-01"], analytics=False)
    assert summary["compaction"]["written"] == len(C.compact(wh).current) > 0
    assert summary["compaction"]["failed"] == {}


def test_the_view_asset_compacts_before_it_rebuilds_the_views(built, tmp_path):
    """The Dagster path (``out_warehouse``) compacts as ``faultline run`` does."""
    import dagster as dg

    from faultline.defs.partitions import partition_key, register
    from faultline.defs.resources import LakeResource
    from faultline.defs.views.assets import out_warehouse
    from faultline.ingest.landing import Partition
    from faultline.launch.local import QUIET

    wh = tmp_path / "wh"
    shutil.copytree(built / "wh", wh, ignore=shutil.ignore_patterns(C.COMPACT_DIR))
    inst, part = dg.DagsterInstance.ephemeral(), Partition("northwind", "a1", "2026-02-01")
    register(inst, [part])
    r = dg.materialize(
        [out_warehouse],
        partition_key=partition_key(part),
        instance=inst,
        run_config=QUIET,
        resources={"lake": LakeResource(warehouse=str(wh))},
    )
    meta = r.asset_materializations_for_node("out_warehouse")[0].metadata
    assert meta["compacted_months_written"].value == len(C.compact(wh).current) > 0
    assert "cluster=a1/month=2026-01" in _view_sql(wh, "events")
