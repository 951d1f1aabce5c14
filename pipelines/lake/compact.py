"""Monthly compaction of the lake: one file per table, cluster and closed month, a read cache.
The day files stay the source of truth: a view reads a month file only while the day files its
footer names are unchanged (docs/architecture.md, "Compaction")."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from ..schema import TABLES
from . import storage
from .files import DATA_FILE, atomic_produce, lake_root, tables_present, warehouse_root
from .sqltext import day_scan_sql, files_uniform, quote_sql

COMPACT_DIR = "lake_compact"
MANIFEST_KEY = "faultline.lake.compact"
FORMAT = 1  # of the compacted files and their manifest; another value is stale
_NAME = re.compile(r"[A-Za-z0-9._-]+")
_DATE = re.compile(r"\d{4}-\d\d-\d\d")
_MONTH = re.compile(r"\d{4}-\d\d")
# partition values DuckDB's hive parsing may read as NULL instead of as the text
_NULLISH = {"null", "__hive_default_partition__"}


@dataclass(frozen=True)
class DayFile:
    """One day file of a table, as found on disk."""

    provider: str
    cluster: str
    date: dt.date
    rel: str  # provider=P/cluster=C/date=D/data.parquet, under the table's folder
    size: int
    mtime_ns: int
    ino: int

    @property
    def month(self) -> str:
        return self.date.strftime("%Y-%m")

    def entry(self) -> dict:
        return {"path": self.rel, "size": self.size, "mtime_ns": self.mtime_ns, "ino": self.ino}

    def restat(self, root: Path) -> DayFile | None:
        try:
            st = os.stat(root / self.rel)
        except FileNotFoundError:
            return None
        return DayFile(self.provider, self.cluster, self.date, self.rel, st.st_size, st.st_mtime_ns, st.st_ino)


MonthKey = tuple[str, str, str]  # (provider, cluster, YYYY-MM)


@dataclass
class CompactReport:
    """What one ``compact`` call did; months are named ``table/provider=P/cluster=C/month=M``."""

    written: list[str] = field(default_factory=list)  # (re)compacted now
    current: list[str] = field(default_factory=list)  # already matched their day files
    skipped: dict[str, str] = field(default_factory=dict)  # month or table -> why not compacted
    failed: dict[str, str] = field(default_factory=dict)  # month -> the error (its old file stays)
    removed: list[str] = field(default_factory=list)  # no day file of that month is left
    seconds: float = 0.0

    def summary(self) -> dict:
        return {
            "written": len(self.written),
            "current": len(self.current),
            "removed": len(self.removed),
            "failed": self.failed,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Usable:
    """The compacted files a view may read for one table, and the days they stand in for."""

    columns: list[str] = field(default_factory=list)  # the view's, in order
    files: list[Path] = field(default_factory=list)
    days: dict[tuple[str, str], list[dt.date]] = field(default_factory=dict)  # (provider, cluster) -> days
    rels: set[str] = field(default_factory=set)  # those days' files, relative to the table's folder


def compact_root(warehouse: str | os.PathLike) -> Path:
    return Path(warehouse_root(warehouse)) / COMPACT_DIR


def month_file(warehouse: str | os.PathLike, table: str, provider: str, cluster: str, month: str) -> Path:
    return (
        compact_root(warehouse) / table / f"provider={provider}" / f"cluster={cluster}" / f"month={month}" / DATA_FILE
    )


def _label(table: str, key: MonthKey) -> str:
    return f"{table}/provider={key[0]}/cluster={key[1]}/month={key[2]}"


def _plain(value: str) -> bool:
    return bool(_NAME.fullmatch(value)) and value.lower() not in _NULLISH


def _key_value(part: str, key: str) -> str | None:
    name, sep, value = part.partition("=")
    return value if sep and name == key else None


def _day_key(parts: tuple[str, ...]) -> tuple[str, str, dt.date] | None:
    """``(provider, cluster, date)`` of a regular day file's relative path, else None."""
    if len(parts) != 4 or parts[3] != DATA_FILE:
        return None
    provider, cluster, date = (_key_value(p, k) for p, k in zip(parts, ("provider", "cluster", "date")))
    if provider is None or cluster is None or date is None:
        return None
    if not (_plain(provider) and _plain(cluster) and _DATE.fullmatch(date)):
        return None
    try:
        return provider, cluster, dt.date.fromisoformat(date)
    except ValueError:
        return None


def scan_days(warehouse: str | os.PathLike, table: str) -> tuple[list[DayFile], list[str]]:
    """The table's day files with their identity (sorted by path), and the relative paths
    of data files outside the regular layout (any: the table is then not compacted)."""
    root = Path(lake_root(warehouse)) / table
    days, odd = [], []
    for folder, _dirs, names in os.walk(root):
        if DATA_FILE not in names:
            continue
        path = Path(folder) / DATA_FILE
        parts = path.relative_to(root).parts
        key = _day_key(parts)
        if key is None:
            odd.append("/".join(parts))
            continue
        try:
            st = os.stat(path)
        except FileNotFoundError:  # replaced or removed since the listing
            continue
        days.append(DayFile(*key, "/".join(parts), st.st_size, st.st_mtime_ns, st.st_ino))
    days.sort(key=lambda d: d.rel)
    return days, sorted(odd)


def by_month(days: list[DayFile]) -> dict[MonthKey, list[DayFile]]:
    out: dict[MonthKey, list[DayFile]] = defaultdict(list)
    for d in days:
        out[(d.provider, d.cluster, d.month)].append(d)
    return dict(out)


def closed_months(days: list[DayFile]) -> dict[MonthKey, list[DayFile]]:
    """Day files by month, for the months before the month of each cluster's newest date."""
    newest: dict[tuple[str, str], str] = {}
    for d in days:
        newest[(d.provider, d.cluster)] = max(newest.get((d.provider, d.cluster), ""), d.month)
    return {k: v for k, v in by_month(days).items() if k[2] < newest[k[:2]]}


def read_manifest(path: Path) -> dict | None:
    """The manifest in a compacted file's footer; None when there is no readable one."""
    try:
        meta = pl.read_parquet_metadata(path)
        manifest = json.loads(meta[MANIFEST_KEY])
    except (OSError, KeyError, ValueError, pl.exceptions.PolarsError):
        return None
    return manifest if isinstance(manifest, dict) else None


def _manifest_ok(manifest: dict | None, table: str, key: MonthKey) -> bool:
    return (
        manifest is not None
        and manifest.get("format") == FORMAT
        and manifest.get("table") == table
        and [manifest.get("provider"), manifest.get("cluster"), manifest.get("month")] == list(key)
        and isinstance(manifest.get("files"), list)
    )


def manifest_matches(manifest: dict | None, table: str, key: MonthKey, days: list[DayFile]) -> bool:
    """The manifest names exactly these day files, each with the identity it has now."""
    return _manifest_ok(manifest, table, key) and manifest["files"] == [d.entry() for d in days]


def still_current(manifest: dict | None, table: str, key: MonthKey, days: list[DayFile]) -> list[DayFile] | None:
    """The day files the manifest names, when every one of them is still on disk with the
    identity it had when it was compacted (``days``: the month's day files now); else None."""
    if not _manifest_ok(manifest, table, key) or not manifest["files"]:
        return None
    now = {d.rel: d for d in days}
    named = [now.get(e.get("path")) if isinstance(e, dict) else None for e in manifest["files"]]
    if any(d is None or d.entry() != e for d, e in zip(named, manifest["files"])):
        return None
    return named


class _Changed(Exception):
    """A day file was replaced while its month was being compacted."""


def _write_month(
    con: duckdb.DuckDBPyConnection, warehouse: str | os.PathLike, table: str, key: MonthKey, days: list[DayFile]
) -> str | None:
    """Compact one month; the reason when it was not (the previous file, if any, stays)."""
    root = Path(lake_root(warehouse)) / table
    files = "[" + ", ".join(quote_sql((root / d.rel).as_posix()) for d in days) + "]"
    if not files_uniform(con, files):
        return "its day files differ in columns or types"
    manifest = {
        "format": FORMAT,
        "table": table,
        "provider": key[0],
        "cluster": key[1],
        "month": key[2],
        "files": [d.entry() for d in days],
    }
    kv = "{" + quote_sql(MANIFEST_KEY) + ": " + quote_sql(json.dumps(manifest, sort_keys=True)) + "}"

    def produce(tmp: Path) -> None:
        # rows in file (= date) order, each file's rows in its own (sorted) order
        con.execute(
            f"COPY (SELECT * FROM {day_scan_sql(files, uniform=True)}) TO {quote_sql(tmp.as_posix())} "
            f"(FORMAT parquet, COMPRESSION zstd, KV_METADATA {kv})"
        )
        # same size, mtime and inode after the copy as before it: the copy read those files
        if [d.restat(root) for d in days] != days:
            raise _Changed

    atomic_produce(month_file(warehouse, table, *key), produce)
    return None


def compact(warehouse: str | os.PathLike, tables: list[str] | None = None) -> CompactReport:
    """(Re)compact every closed month whose compacted file is missing or stale; idempotent. Call it
    before ``views.build``. A month that cannot be written keeps its previous file (``failed``); one
    none of whose day files is left is removed. A URL warehouse is left alone."""
    t0 = time.perf_counter()
    report = CompactReport()
    if storage.is_url(warehouse):
        report.skipped["*"] = "URL warehouse: compaction is local-only"
        return report
    con = None
    try:
        for table in tables if tables is not None else _tables(warehouse):
            days, odd = scan_days(warehouse, table)
            if odd:
                report.skipped[table] = f"{len(odd)} data file(s) outside provider=/cluster=/date=, e.g. {odd[0]}"
                continue
            _remove_orphans(warehouse, table, days, report)
            for key, group in closed_months(days).items():
                label = _label(table, key)
                if manifest_matches(read_manifest(month_file(warehouse, table, *key)), table, key, group):
                    report.current.append(label)
                    continue
                con = con or duckdb.connect()
                try:
                    why = _write_month(con, warehouse, table, key, group)
                except _Changed:
                    why = "a day file changed while the month was read: left for the next run"
                except (OSError, duckdb.Error) as exc:  # the previous file (if any) stays
                    report.failed[label] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                    continue
                if why:
                    report.skipped[label] = why
                else:
                    report.written.append(label)
    finally:
        if con is not None:
            con.close()
    report.seconds = time.perf_counter() - t0
    return report


def _tables(warehouse: str | os.PathLike) -> list[str]:
    """Tables with day files, and tables with compacted files (their days may all be gone)."""
    root = compact_root(warehouse)
    packed = {p.name for p in root.iterdir() if p.is_dir() and p.name in TABLES} if root.is_dir() else set()
    present = tables_present(warehouse)
    return present + sorted(packed - set(present))


def _remove_orphans(warehouse: str | os.PathLike, table: str, days: list[DayFile], report: CompactReport) -> None:
    """Delete the table's compacted months that no day file of the lake belongs to any more."""
    have = {(d.provider, d.cluster, d.month) for d in days}
    root = compact_root(warehouse)
    for key, path in compacted_months(warehouse, table):
        if key in have:
            continue
        label = _label(table, key)
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            report.failed[label] = f"{type(exc).__name__}: {exc}"
            continue
        for folder in path.parents:  # month=, cluster=, provider= and table folders left empty
            if folder == root:
                break
            try:
                folder.rmdir()
            except OSError:  # not empty (or already gone)
                break
        report.removed.append(label)


def compacted_months(warehouse: str | os.PathLike, table: str) -> list[tuple[MonthKey, Path]]:
    """``((provider, cluster, month), path)`` of the table's compacted files, sorted."""
    root = compact_root(warehouse) / table
    out = []
    for path in sorted(root.glob(f"provider=*/cluster=*/month=*/{DATA_FILE}")):
        provider, cluster, month = (
            _key_value(p, k) for p, k in zip(path.relative_to(root).parts, ("provider", "cluster", "month"))
        )
        if provider and cluster and month and _MONTH.fullmatch(month):
            out.append(((provider, cluster, month), path))
    return out


def usable(
    con: duckdb.DuckDBPyConnection,
    warehouse: str | os.PathLike,
    table: str,
    day_select: str,
    months: list[tuple[MonthKey, Path]] | None = None,
) -> Usable:
    """The compacted files of ``table`` a view may read now, and the days each stands in for:
    those whose manifest's day files are unchanged on disk and whose columns match ``day_select``.
    ``months``: the files to consider (a snapshot passes its links), by default the warehouse's."""
    out = Usable()
    if months is None:
        if storage.is_url(warehouse) or not (compact_root(warehouse) / table).is_dir():
            return out
        months = compacted_months(warehouse, table)
    if not months:
        return out
    days, odd = scan_days(warehouse, table)
    if odd:
        return out
    by_key = by_month(days)
    described = con.execute(f"DESCRIBE {day_select}").fetchall()
    out.columns = [r[0] for r in described]
    want = sorted((r[0], r[1]) for r in described)
    for key, path in months:
        named = still_current(read_manifest(path), table, key, by_key.get(key, []))
        if named is None:
            continue
        try:
            got = con.execute(
                f"DESCRIBE SELECT * FROM read_parquet({quote_sql(path.as_posix())}, hive_partitioning = false)"
            ).fetchall()
        except duckdb.Error:
            continue
        if sorted((r[0], r[1]) for r in got) != want:
            continue
        out.files.append(path)
        out.days.setdefault(key[:2], []).extend(d.date for d in named)
        out.rels.update(d.rel for d in named)
    return out
