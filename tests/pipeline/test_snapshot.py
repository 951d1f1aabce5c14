"""View snapshots (``faultline.lake.snapshot``): a view database reads hard links that no writer
replaces, so a file rewritten between DuckDB's bind and its scan is never read half-and-half."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest

from faultline.lake import files as lake
from faultline.lake import snapshot as S
from faultline.lake import views as W
from faultline.launch.local import run_pipeline

# a scalar subquery that rewrites files while the query runs: DuckDB has bound (read the
# footers of) every file of the query by then, and opens the other scans after it
RACE = (
    "SELECT (SELECT count(*) FROM ingest_audit WHERE rewrite(lines_read)) AS audit, "
    "(SELECT count(*) || ':' || count(DISTINCT node) FROM incidents) AS incidents, "
    "(SELECT count(*) || ':' || sum(length(raw)) FROM events) AS events"
)
RACE_ANALYTICS = RACE.rsplit(", (SELECT count(*) || ':' || sum", 1)[0]  # without the day files


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    from helpers.landing import make_landing

    base = tmp_path_factory.mktemp("snap")
    run_pipeline(make_landing(base / "landing"), base / "wh")
    return base / "wh"


@pytest.fixture
def wh(built, tmp_path) -> Path:
    out = tmp_path / "wh"
    shutil.copytree(built, out, ignore=shutil.ignore_patterns(S.SNAPSHOT_DIR, W.DB_FILE))
    return out


def _rewriter(wh: Path):
    """A DuckDB function that, on its first call, rewrites the ``incidents`` analytics file
    and the first ``events`` day file the way a re-run does, each bigger than before."""
    done: list[int] = []

    def rewrite(_x: int) -> bool:
        if not done:
            done.append(1)
            inc = pl.read_parquet(lake.analytics_root(wh) / "incidents.parquet")
            lake.write_analytics(wh, "incidents", pl.concat([inc] * 40))
            path, keys = lake.data_files(wh, "events")[0]
            ev = pl.read_parquet(path)
            lake.write_partition(
                wh, "events", pl.concat([ev] * 40), keys["provider"], keys["cluster"], str(keys["date"])
            )
        return True

    return rewrite


def _race(con: duckdb.DuckDBPyConnection, wh: Path):
    con.execute("SET threads = 1")
    con.create_function("rewrite", _rewriter(wh), ["BIGINT"], "BOOLEAN", side_effects=True)
    return con.execute(RACE).fetchone()


def _answer(wh: Path) -> tuple:
    con = W.connect_readonly(wh)
    try:
        return con.execute(RACE.replace(" WHERE rewrite(lines_read)", "")).fetchone()
    finally:
        con.close()


def test_files_rewritten_during_a_query_are_not_read(wh):
    report = W.build(wh)
    assert report.snapshot is not None and report.snapshot.parent == wh.resolve() / S.SNAPSHOT_DIR
    before = _answer(wh)
    con = W.connect_readonly(wh)
    assert _race(con, wh) == before  # the lake of the build, whole
    assert con.execute(RACE.replace(" WHERE rewrite(lines_read)", "")).fetchone() == before
    con.close()
    W.build(wh)
    after = _answer(wh)  # the next build reads the rewritten files
    assert after != before and after[1].startswith(str(40 * int(before[1].split(":")[0])) + ":")


def test_without_a_snapshot_the_same_query_reads_torn_files(built, tmp_path, monkeypatch):
    """What the snapshot prevents: views over the live files (hard links refused) read a
    file rewritten under the query with the footer of the file they bound, or fail. A race:
    on a loaded machine DuckDB may have read every file first, so up to three fresh tries."""

    def refuse(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(S.os, "link", refuse)
    answers = []
    for attempt in range(3):
        wh = tmp_path / f"wh{attempt}"
        shutil.copytree(built, wh, ignore=shutil.ignore_patterns(S.SNAPSHOT_DIR, W.DB_FILE))
        report = W.build(wh)
        assert report.snapshot is None and "cannot hard-link" in report.snapshot_error
        assert not any((wh / S.SNAPSHOT_DIR).iterdir())  # the attempt left nothing
        before = _answer(wh)
        con = W.connect_readonly(wh)
        try:
            got = _race(con, wh)
        except duckdb.Error as exc:
            got = str(exc)
        finally:
            con.close()
        answers.append((before, got))
        if got != before:
            break
    assert answers[-1][1] != answers[-1][0], answers


def test_views_name_only_snapshot_files(wh):
    report = W.build(wh)
    con = W.connect_readonly(wh)
    texts = dict(
        con.execute(
            "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal AND database_name = 'faultline'"
        ).fetchall()
    )
    con.close()
    for name in report.views:  # lake and analytics tables
        assert report.snapshot.as_posix() in texts[name], name
    live = [str(p) for p in (wh / "lake").rglob("data.parquet")]
    linked = sorted(report.snapshot.rglob("*.parquet"))
    assert len(linked) == len(live) + len(lake.analytics_present(wh))  # no month is compacted here
    for link in linked:  # the same files, not copies
        original = wh.resolve() / link.relative_to(report.snapshot)
        assert os.path.samefile(link, original)


def test_a_failed_build_leaves_no_snapshot(wh, monkeypatch):
    def boom(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(W, "_lake_views", boom)
    with pytest.raises(OSError, match="No space left"):
        W.build(wh)
    assert not (wh / S.SNAPSHOT_DIR).exists() or not any((wh / S.SNAPSHOT_DIR).iterdir())
    assert not (wh / W.DB_FILE).exists()


def _snap(root: Path, when: dt.datetime, n: int = 0) -> str:
    name = f"{when.strftime('%Y%m%dT%H%M%S%fZ')}-{4000 + n}-abcdef"
    (root / name / "lake").mkdir(parents=True)
    return name


def test_collect_keeps_the_newest_and_what_was_superseded_within_the_grace(tmp_path):
    root = tmp_path / S.SNAPSHOT_DIR
    now = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)
    names = [_snap(root, now - dt.timedelta(minutes=m), i) for i, m in enumerate((300, 200, 90, 30, 5, 1))]
    (root / "notes").mkdir()  # not a snapshot: never touched
    removed = S.collect(tmp_path, grace_s=3600, now=now)
    # 300 and 200 min old were superseded by snapshots made 200 and 90 minutes ago: gone;
    # the one of 90 minutes was superseded 30 minutes ago, within the hour: kept
    assert removed == names[:2]
    assert sorted(p.name for p in root.iterdir()) == sorted(names[2:] + ["notes"])
    assert S.collect(tmp_path, grace_s=0, now=now) == names[2:4]
    assert sorted(p.name for p in root.iterdir()) == sorted(names[4:] + ["notes"])  # KEEP = 2
    assert S.collect(tmp_path, grace_s=0, now=now) == []


def test_builds_collect_old_snapshots_and_a_reader_of_one_is_told(wh, monkeypatch):
    monkeypatch.setenv(S.GRACE_ENV, "0")
    first = W.build(wh).snapshot
    old = W.connect_readonly(wh)
    assert old.execute("SELECT count(*) FROM events").fetchone()[0] > 0
    W.build(wh)
    third = W.build(wh)
    assert third.collected == [first.name] and not first.exists()
    assert len(list((wh / S.SNAPSHOT_DIR).iterdir())) == S.KEEP
    with pytest.raises(duckdb.IOException, match="No files found"):
        old.execute("SELECT count(*) FROM events").fetchone()
    old.close()
    assert int(_answer(wh)[2].split(":")[0]) > 0  # a new connection reads the newest


@pytest.mark.parametrize("value, ok", [("", S.DEFAULT_GRACE_S), ("90", 90.0), ("1.5", 1.5)])
def test_grace_from_the_environment(monkeypatch, value, ok):
    monkeypatch.setenv(S.GRACE_ENV, value)
    assert S.grace_seconds() == ok


@pytest.mark.parametrize("value", ["an hour", "-5"])
def test_a_bad_grace_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv(S.GRACE_ENV, value)
    with pytest.raises(ValueError, match=S.GRACE_ENV):
        S.grace_seconds()


def test_faultline_run_says_when_the_views_read_live_files(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from helpers.landing import make_landing

    from faultline.cli import main

    def refuse(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(S.os, "link", refuse)
    landing, wh = make_landing(tmp_path / "landing"), tmp_path / "wh"
    args = ["run", "--landing", str(landing), "--warehouse", str(wh)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "warning: the views read the live lake files" in res.output
    assert "Invalid cross-device link" in res.output
    con = W.connect_readonly(wh)
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] > 0
    con.close()
    assert run_pipeline(landing, wh, analytics=False)["snapshot_error"].endswith("Invalid cross-device link")
    monkeypatch.undo()
    res = CliRunner().invoke(main, args)  # links work again: no warning
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    assert run_pipeline(landing, wh, analytics=False)["snapshot_error"] is None


# -- a URL warehouse: copies of the analytics objects ----------------------------------------------


@pytest.fixture
def mem_wh(built, tmp_path, monkeypatch):
    """The built warehouse's lake and analytics uploaded under a fresh ``memory://`` prefix."""
    import uuid

    import fsspec

    from faultline.lake import storage

    fs = fsspec.filesystem("memory")
    prefix = f"/snap-{uuid.uuid4().hex[:10]}"
    for sub in ("lake", "analytics"):
        for p in sorted((built / sub).rglob("*.parquet")):
            fs.pipe_file(f"{prefix}/{p.relative_to(built).as_posix()}", p.read_bytes())
    monkeypatch.setenv(storage.DUCKDB_ENV, str(tmp_path / "mem.duckdb"))
    yield f"memory://{prefix}"
    fs.rm(prefix, recursive=True)


def _mem_race(con, url):
    done: list[int] = []

    def rewrite(_x: int) -> bool:
        if not done:
            done.append(1)
            inc = pl.read_parquet(lake.analytics_root(url).joinpath("incidents.parquet").read_bytes())
            lake.write_analytics(url, "incidents", pl.concat([inc] * 40))
        return True

    con.execute("SET threads = 1")
    con.create_function("rewrite", rewrite, ["BIGINT"], "BOOLEAN", side_effects=True)
    try:
        return con.execute(RACE_ANALYTICS).fetchone()
    except duckdb.Error as exc:
        return str(exc)


def test_a_url_warehouse_reads_copies_of_the_analytics(mem_wh, monkeypatch):
    from faultline.lake import storage

    report = W.build(mem_wh)
    assert isinstance(report.snapshot, storage.ObjectPath)
    keys = sorted(p.relative_to(report.snapshot).as_posix() for p in storage.list_files(report.snapshot))
    assert keys == [f"analytics/{n}.parquet" for n in lake.analytics_present(mem_wh)]  # no day file
    con = W.connect_readonly(mem_wh)
    before = con.execute(RACE_ANALYTICS.replace(" WHERE rewrite(lines_read)", "")).fetchone()
    assert _mem_race(con, mem_wh) == before
    con.close()

    # without the copies (the store refuses them) the same race reads a torn object
    def refuse(self, *a, **k):
        raise PermissionError(13, "copy denied")

    monkeypatch.setattr(type(storage.to_path(mem_wh).fs), "copy", refuse)
    report = W.build(mem_wh)
    assert report.snapshot is None and "copy denied" in report.snapshot_error
    con = W.connect_readonly(mem_wh)
    assert _mem_race(con, mem_wh) != before
    con.close()


def test_a_url_warehouse_collects_old_snapshots(mem_wh, monkeypatch):
    from faultline.lake import storage

    monkeypatch.setenv(S.GRACE_ENV, "0")
    first = W.build(mem_wh).snapshot
    W.build(mem_wh)
    third = W.build(mem_wh)
    assert third.collected == [first.name] and not storage.list_files(first)
    assert len([p for p in storage.list_dir(S.snapshots_root(mem_wh))]) == S.KEEP
