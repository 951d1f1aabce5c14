"""Landing folders and lakes on object storage (fsspec URLs), against a real S3 server.

The end-to-end tests start moto's S3 server on a free localhost port and point faultline at
it only through configuration (``FAULTLINE_STORAGE_OPTIONS``, dummy ``AWS_*`` keys); the
unit tests use fsspec's in-process ``memory://`` filesystem.
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
import socket
import threading
import uuid
from pathlib import Path

import duckdb
import fsspec
import polars as pl
import pytest
import zstandard
from click.testing import CliRunner
from helpers.hashes import frame_hash
from helpers.landing import make_landing

from faultline.analytics.build import ANALYTICS_TABLES
from faultline.commands.run import run as run_command
from faultline.commands.sql import sql as sql_command
from faultline.ingest import landing, reader
from faultline.ingest.landing import Partition
from faultline.ingest.partition import ingest_partition
from faultline.lake import files as lake
from faultline.lake import queries, storage
from faultline.lake import views as warehouse
from faultline.lake.storage import ObjectPath
from faultline.launch.local import run_pipeline
from faultline.schema import ANALYTICS, TABLES

# -- unit tests: memory:// -------------------------------------------------------------------


@pytest.fixture
def mem():
    """A fresh ``memory://`` prefix, removed afterwards (the memory store is process-wide)."""
    fs = fsspec.filesystem("memory")
    prefix = f"/t-{uuid.uuid4().hex[:10]}"
    yield fs, f"memory://{prefix}"
    if fs.exists(prefix):
        fs.rm(prefix, recursive=True)


def test_is_url_and_scheme():
    assert storage.is_url("s3://bucket/x") and storage.scheme("S3://bucket") == "s3"
    assert storage.scheme("memory://a") == "memory"
    for local in ("warehouse", "/abs/path", "./s3:/x", Path("s3://bucket"), "C:\\data", "a:b"):
        assert not storage.is_url(local), local
    assert storage.abspath("s3://b/wh") == "s3://b/wh"
    assert storage.abspath("wh") == str(Path("wh").resolve())
    assert storage.join("wh", "report.html") == Path("wh") / "report.html"


def test_storage_options_from_env(monkeypatch):
    monkeypatch.delenv(storage.OPTIONS_ENV, raising=False)
    assert storage.storage_options("s3") == {}
    monkeypatch.setenv(
        storage.OPTIONS_ENV,
        json.dumps({"endpoint_url": "http://x:9000", "anon": False, "s3": {"key": "k"}, "gcs": {"project": "p"}}),
    )
    assert storage.storage_options("s3") == {"endpoint_url": "http://x:9000", "anon": False, "key": "k"}
    assert storage.storage_options("gcs") == {"endpoint_url": "http://x:9000", "anon": False, "project": "p"}
    monkeypatch.setenv(storage.OPTIONS_ENV, "[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        storage.storage_options("s3")
    monkeypatch.setenv(storage.OPTIONS_ENV, "{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        storage.storage_options("s3")


def test_object_path_behaves_like_the_paths_the_pipeline_uses(mem):
    fs, url = mem
    root = storage.to_path(url)
    f = root / "a" / "b.log.gz"
    fs.pipe_file(f.path, b"hello")
    assert str(f) == f.url == f"{url}/a/b.log.gz" and f.as_posix() == f.url
    assert (f.name, f.suffix, f.parent, f.with_name("c")) == ("b.log.gz", ".gz", root / "a", root / "a" / "c")
    assert f.relative_to(root).as_posix() == "a/b.log.gz" and f.relative_to(root).parts == ("a", "b.log.gz")
    with pytest.raises(ValueError):
        root.relative_to(f)
    assert f.is_file() and not f.is_dir() and (root / "a").is_dir() and not (root / "zz").is_file()
    st = f.stat()
    assert st.st_size == 5 and st.st_mtime_ns > 0
    assert f.read_bytes() == b"hello" and f.open().read() == b"hello"
    assert {f, root / "a/b.log.gz"} == {f} and sorted([root / "b", root / "a"]) == [root / "a", root / "b"]
    keys = ["p=a-b/x", "p=a/y", "p=a/x/z", "p=a.b/x"]  # segment order, like pathlib
    assert [p.relative_to(root).as_posix() for p in sorted(root / k for k in keys)] == [
        p.as_posix() for p in sorted(Path(k) for k in keys)
    ]
    with pytest.raises(TypeError):
        open(f)  # noqa: SIM115 - never a local path by accident
    assert [p.name for p in storage.list_files(root)] == ["b.log.gz"]
    assert [(p.name, p.info["type"]) for p in storage.list_dir(root)] == [("a", "directory")]
    assert storage.list_files(root / "missing") == [] and storage.list_dir(root / "missing") == []


def test_duckdb_file_of_a_url_warehouse(monkeypatch, tmp_path):
    monkeypatch.delenv(storage.DUCKDB_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    got = storage.duckdb_file("s3://bucket/team/wh/")
    assert got == tmp_path / "cache" / "faultline" / "s3" / "bucket" / "team" / "wh" / "faultline.duckdb"
    assert storage.duckdb_file("s3://bucket/a/../b") == tmp_path / "cache/faultline/s3/bucket/a/b/faultline.duckdb"
    monkeypatch.setenv(storage.DUCKDB_ENV, str(tmp_path / "views.duckdb"))
    assert warehouse.db_path("s3://bucket/wh") == tmp_path / "views.duckdb"
    # a local warehouse keeps its view file inside, whatever the variable says
    assert warehouse.db_path(tmp_path / "wh") == (tmp_path / "wh" / "faultline.duckdb").resolve()


def _upload(fs, local: Path, url: str) -> None:
    dest = storage.to_path(url)
    for p in sorted(local.rglob("*")):
        if p.is_file():
            fs.pipe_file((dest / p.relative_to(local).as_posix()).path, p.read_bytes())


def test_landing_on_memory_matches_local(mem, tmp_path):
    fs, url = mem
    local = make_landing(tmp_path / "landing")
    _upload(fs, local, url)
    d_local, d_obj = landing.discover(local), landing.discover(url)
    assert d_obj.partitions == d_local.partitions and d_obj.problems == d_local.problems == []
    part = Partition("northwind", "c1", "2026-11-24")
    pf_l, pf_o = landing.partition_files(local, part), landing.partition_files(url, part)
    assert [pf_o.rel(p) for p in pf_o.all_files()] == [pf_l.rel(p) for p in pf_l.all_files()]
    assert [k.node for k in pf_o.kernel] == [k.node for k in pf_l.kernel]
    assert {k.node: k.boot.name if k.boot else None for k in pf_o.kernel} == {
        k.node: k.boot.name if k.boot else None for k in pf_l.kernel
    }
    assert {f: size for f, (size, _) in landing.fingerprint(url, part).items()} == {
        f: size for f, (size, _) in landing.fingerprint(local, part).items()
    }
    assert landing.read_inventory(url).equals(landing.read_inventory(local))
    a, b = ingest_partition(local, *part.relpath.split("/")), ingest_partition(url, *part.relpath.split("/"))
    for attr in ("kernel_events", "job_events", "jobs", "steps", "flight", "quarantine", "audit"):
        assert frame_hash(getattr(a, attr)) == frame_hash(getattr(b, attr)), attr
    assert landing.partition_files(url, Partition("northwind", "c1", "2030-01-01")).all_files() == []
    with pytest.raises(landing.LandingError):
        landing.discover(url + "/nothing-here")


def test_keys_that_could_leave_the_prefix_are_refused(mem):
    fs, url = mem
    root = storage.to_path(url)
    day = root / "p" / "c" / "2026-01-01"
    fs.pipe_file((day / "kernel" / "n1.log").path, b"x\n")
    fs.pipe_file(f"{day.path}/kernel/../../../../escape.log", b"x\n")  # a literal '..' key
    fs.pipe_file((day / ".partial" / "n2.log").path, b"x\n")  # hidden: not data
    fs.pipe_file((root / "p" / "bad name").path + "/2026-01-01/kernel/n.log", b"x\n")
    fs.pipe_file((root / "p" / "c" / "2026-13-01" / "kernel" / "n.log").path, b"x\n")
    found = landing.discover(url)
    assert found.partitions == [Partition("p", "c", "2026-01-01")]
    reasons = {p.path: p.reason for p in found.problems}
    assert reasons == {"p/bad name": "invalid_name", "p/c/2026-13-01": "invalid_date"}
    pf = landing.partition_files(url, Partition("p", "c", "2026-01-01"))
    assert [pf.rel(k.path) for k in pf.kernel] == ["p/c/2026-01-01/kernel/n1.log"]
    assert pf.other == []
    assert ("p/c/2026-01-01/kernel/../../../../escape.log", "outside_landing") in [
        (p.path, p.reason) for p in pf.problems
    ]


@pytest.mark.parametrize("codec", ["plain", "gzip", "zstd"])
def test_reader_streams_objects_through_the_same_bounds(mem, codec):
    fs, url = mem
    text = b"".join(b"line %d of a kernel log\n" % i for i in range(200_000))
    body = {"plain": text, "gzip": gzip.compress(text), "zstd": zstandard.ZstdCompressor().compress(text)}[codec]
    obj = storage.to_path(url) / f"n.log{'.gz' if codec == 'gzip' else '.zst' if codec == 'zstd' else ''}"
    fs.pipe_file(obj.path, body)
    stream, bounded, size = reader.open_log(obj)
    assert size == len(body) and (bounded is None) == (codec == "plain")
    stats = reader.ReadStats()
    with stream:
        blocks = list(reader.iter_blocks(stream, stats, block_size=1 << 16))
    assert len(blocks) > 10 and stats.bytes_read == len(text)
    # bounded exactly like a local file: a tiny ratio stops decompression
    if codec != "plain":
        stream, bounded, _ = reader.open_log(obj, max_ratio=1, max_bytes=1 << 20)
        with stream:
            got = stream.read()
        assert len(got) == 1 << 20 and "decompression bound" in bounded.error


def _audit(*sources: str) -> pl.DataFrame:
    n = len(sources)
    return pl.DataFrame(
        {
            "source": list(sources),
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


def test_lake_round_trip_and_replace_on_memory(mem):
    _fs, url = mem
    df = _audit("a.log")
    path = lake.write_partition(url, "ingest_audit", df, "p", "c", "2026-01-01")
    assert (
        isinstance(path, ObjectPath)
        and path.url == f"{url}/lake/ingest_audit/provider=p/cluster=c/date=2026-01-01/data.parquet"
    )
    lake.write_partition(
        url, "ingest_audit", pl.concat([df, df.with_columns(source=pl.lit("b.log"))]), "p", "c", "2026-01-01"
    )
    got = lake.read_partition(url, "ingest_audit", "p", "c", "2026-01-01")
    assert got["source"].to_list() == ["a.log", "b.log"]
    assert (
        lake.read_table(url, "ingest_audit").height == 2 and lake.scan_table(url, "ingest_audit").collect().height == 2
    )
    assert lake.tables_present(url) == ["ingest_audit"]
    assert [v for _p, v in lake.data_files(url, "ingest_audit")][0]["provider"] == "p"
    assert lake.file_schema(url, "ingest_audit", "p", "c", "2026-01-01") is not None
    assert lake.file_schema(url, "ingest_audit", "p", "c", "2026-01-02") is None
    with pytest.raises(ValueError, match="incidents: missing columns"):  # only in its declared schema
        lake.write_analytics(url, "incidents", pl.DataFrame({"x": [1]}))
    lake.write_analytics(url, "incidents", pl.DataFrame(schema=ANALYTICS["incidents"]))
    assert lake.analytics_present(url) == ["incidents"]
    out = lake.atomic_write_text(f"{url}/report.md", "# hi\n")
    assert out.read_bytes() == b"# hi\n"
    # only data files and the report: no temporary object was ever created
    assert sorted(p.relative_to(storage.to_path(url)).as_posix() for p in storage.list_files(storage.to_path(url))) == [
        "analytics/incidents.parquet",
        "lake/ingest_audit/provider=p/cluster=c/date=2026-01-01/data.parquet",
        "report.md",
    ]


def test_views_over_a_memory_lake(mem, tmp_path, monkeypatch):
    _fs, url = mem
    monkeypatch.setenv(storage.DUCKDB_ENV, str(tmp_path / "mem.duckdb"))
    df = _audit("a.log")
    lake.write_partition(url, "ingest_audit", df, "p", "c", "2026-01-01")
    rep = warehouse.build(url)
    assert rep.path == tmp_path / "mem.duckdb" and "ingest_audit" in rep.views
    con = queries.connect(url)
    try:
        got = queries.run_sql(con, "SELECT provider, cluster, date, source FROM ingest_audit")
        assert got.rows() == [("p", "c", __import__("datetime").date(2026, 1, 1), "a.log")]
        with pytest.raises(queries.QueryError):  # outside the warehouse prefix: refused
            queries.run_sql(con, "SELECT * FROM read_parquet('memory:///elsewhere/x.parquet')")
    finally:
        con.close()
    # the same view file over a plain connection without the filesystem registered fails clearly
    con = duckdb.connect()
    con.execute("SET autoload_known_extensions = false")
    con.execute(f"ATTACH '{tmp_path / 'mem.duckdb'}' AS f (READ_ONLY)")
    with pytest.raises(duckdb.Error):
        con.sql("SELECT count(*) FROM f.ingest_audit").fetchall()
    con.close()


def test_failed_write_leaves_the_old_object(mem, monkeypatch):
    _fs, url = mem
    df = _audit("a.log")
    path = lake.write_partition(url, "ingest_audit", df, "p", "c", "2026-01-01")
    before = path.read_bytes()

    def half_then_fail(self, f, **kw):
        f.write(b"PAR1 partial")
        raise OSError("disk full")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        lake.write_partition(url, "ingest_audit", df.with_columns(source=pl.lit("z.log")), "p", "c", "2026-01-01")
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert len(storage.list_files(storage.to_path(url))) == 1


# -- end to end: a real S3 server (moto) -----------------------------------------------------

BUCKET = "faultline-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    import moto.server as server_mod

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(var, raising=False)
        mp.setenv(storage.OPTIONS_ENV, json.dumps({"s3": {"endpoint_url": f"http://127.0.0.1:{port}"}}))
        fs, _ = storage.filesystem(f"s3://{BUCKET}")
        fs.mkdir(BUCKET)
        yield fs
    server.stop()


@pytest.fixture(scope="module")
def pipelines(s3_server, tmp_path_factory):
    """The same simulated landing folder run twice: from S3 into an S3 lake, and locally."""
    from faultline.simulate import simulate

    fs = s3_server
    tmp = tmp_path_factory.mktemp("objstore")
    local = tmp / "landing"
    simulate(local, scenario="demo", nodes=12, days=2, seed=3)
    shutil.rmtree(local / "_truth")
    kernels = sorted(local.rglob("kernel/*.log"))  # compressed logs stream from S3 too
    kernels[0].with_suffix(".log.gz").write_bytes(gzip.compress(kernels[0].read_bytes()))
    kernels[1].with_suffix(".log.zst").write_bytes(zstandard.ZstdCompressor().compress(kernels[1].read_bytes()))
    kernels[0].unlink()
    kernels[1].unlink()
    fs.put(str(local), f"{BUCKET}/landing", recursive=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(storage.DUCKDB_ENV, str(tmp / "s3-views" / "faultline.duckdb"))
        s3_landing, s3_wh = f"s3://{BUCKET}/landing", f"s3://{BUCKET}/wh"
        s3_summary = run_pipeline(s3_landing, s3_wh, workers=1)
        local_summary = run_pipeline(local, tmp / "wh", workers=1)
        yield {
            "fs": fs,
            "landing": local,
            "wh": tmp / "wh",
            "s3_landing": s3_landing,
            "s3_wh": s3_wh,
            "summaries": (s3_summary, local_summary),
            "db": tmp / "s3-views" / "faultline.duckdb",
        }


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(df.columns, nulls_last=True)


def test_s3_lake_equals_local_lake(pipelines):
    s3_summary, local_summary = pipelines["summaries"]
    assert s3_summary["partitions"] == local_summary["partitions"] == 6
    for k in ("files", "lines", "events", "quarantined", "analytics"):
        assert s3_summary[k] == local_summary[k], k
    s3_wh, wh = pipelines["s3_wh"], pipelines["wh"]
    assert lake.tables_present(s3_wh) == lake.tables_present(wh) == list(TABLES)
    for table in TABLES:
        a, b = lake.read_table(s3_wh, table), lake.read_table(wh, table)
        assert a.height == b.height and frame_hash(_sorted(a)) == frame_hash(_sorted(b)), table
    assert lake.analytics_present(s3_wh) == lake.analytics_present(wh) == sorted(ANALYTICS_TABLES)
    for name in ANALYTICS_TABLES:
        a = pl.read_parquet(storage.to_path(s3_wh).joinpath("analytics", f"{name}.parquet").read_bytes())
        b = pl.read_parquet(wh / "analytics" / f"{name}.parquet")
        assert frame_hash(a) == frame_hash(b), name
    audit = lake.read_table(s3_wh, "ingest_audit")
    assert audit.filter(pl.col("source").str.contains(r"\.(gz|zst)$")).height >= 2
    assert audit.filter(pl.col("message").is_not_null()).height == 0
    # the report went to the bucket, the view file to $FAULTLINE_DUCKDB
    assert storage.to_path(s3_wh).joinpath("report.html").is_file()
    assert pipelines["db"].is_file() and not (pipelines["wh"].parent / "s3:").exists()


def test_sql_and_named_queries_match(pipelines, monkeypatch):
    monkeypatch.setenv(storage.DUCKDB_ENV, str(pipelines["db"]))
    s3_wh, wh = pipelines["s3_wh"], pipelines["wh"]
    stmt = "SELECT provider, cluster, date, category, count(*) AS n FROM events GROUP BY ALL ORDER BY ALL"
    outs = []
    for where in (s3_wh, str(wh)):
        res = CliRunner().invoke(sql_command, [stmt, "--warehouse", where, "--format", "json"])
        assert res.exit_code == 0, res.output
        outs.append(json.loads(res.output))
    assert outs[0] == outs[1] and len(outs[0]) > 5
    for name, params in (("top_failing_nodes", {}), ("scoreboard", {}), ("failure_causes_over_time", {})):
        a, b = queries.run_query(s3_wh, name, params), queries.run_query(wh, name, params)
        assert a.height and a.equals(b), name
    res = CliRunner().invoke(sql_command, ["--warehouse", s3_wh, "--query", "failed_jobs", "--format", "csv"])
    assert res.exit_code == 0 and res.output.count("\n") > 2, res.output


def _lake_keys(fs) -> list[str]:
    fs.invalidate_cache()
    return sorted(fs.find(f"{BUCKET}/wh/lake"))


def test_rerun_replaces_and_listings_show_only_whole_data_objects(pipelines):
    fs, s3_landing, s3_wh = pipelines["fs"], pipelines["s3_landing"], pipelines["s3_wh"]
    part = landing.discover(s3_landing).partitions[0]
    before = {t: lake.read_table(s3_wh, t) for t in ("events", "ingest_audit", "raw_kernel_events")}
    keys = _lake_keys(fs)
    assert keys and all(k.endswith("/data.parquet") for k in keys)
    stamp = {
        k: fs.info(k)["LastModified"] for k in keys if f"date={part.date}" in k and f"cluster={part.cluster}/" in k
    }

    seen, stop, bad = [], threading.Event(), []

    def lister():  # a reader listing and opening the lake while the partition is rewritten
        lfs = fsspec.filesystem("s3", **storage.storage_options("s3"), skip_instance_cache=True)
        while not stop.wait(0.02):
            lfs.invalidate_cache()
            for k in lfs.find(f"{BUCKET}/wh/lake"):
                seen.append(k)
                if not k.endswith("/data.parquet"):
                    bad.append(k)
                elif f"date={part.date}" in k:
                    try:
                        pl.read_parquet(lfs.cat_file(k))
                    except FileNotFoundError:
                        pass
                    except Exception as exc:  # noqa: BLE001 - a partial object would land here
                        bad.append(f"{k}: {exc}")

    t = threading.Thread(target=lister)
    t.start()
    try:
        run_pipeline(s3_landing, s3_wh, dates=[part.date], clusters=[part.cluster_key], analytics=False, workers=1)
    finally:
        stop.set()
        t.join()
    assert seen and not bad
    assert _lake_keys(fs) == keys  # same objects, no duplicates, nothing left behind
    for k, t0 in stamp.items():
        assert fs.info(k)["LastModified"] >= t0
    for table, df in before.items():
        after = lake.read_table(s3_wh, table)
        assert after.height == df.height and frame_hash(_sorted(after)) == frame_hash(_sorted(df)), table


def test_cli_names_a_missing_landing_url(pipelines):
    res = CliRunner().invoke(
        run_command, ["--landing", f"s3://{BUCKET}/no-such-landing", "--warehouse", pipelines["s3_wh"]]
    )
    assert res.exit_code != 0 and f"s3://{BUCKET}/no-such-landing" in res.output


def test_s3_keys_with_dot_segments_are_refused(pipelines):
    fs, s3_landing = pipelines["fs"], pipelines["s3_landing"]
    part = landing.discover(s3_landing).partitions[-1]
    evil = f"{BUCKET}/landing/{part.relpath}/kernel/../../../../../outside.log"
    fs.pipe_file(evil, b"Nov  1 00:00:00 x kernel: hi\n")
    try:
        pf = landing.partition_files(s3_landing, part)
        assert all("outside" not in pf.rel(p) for p in pf.all_files())
        assert any(p.reason == "outside_landing" for p in pf.problems)
    finally:
        fs.rm(evil)
