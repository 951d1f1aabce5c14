"""``<warehouse>/faultline.duckdb``: views over the lake, rebuilt aside and swapped in.
A read-write connection would lock readers out, so the file is built under a temporary name and
renamed into place; its views read a snapshot (docs/architecture.md, "The view file")."""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import polars as pl

from ..schema import TABLES
from . import snapshot, storage
from .compact import CompactReport, compact, compacted_months, usable
from .files import (
    DATA_FILE,
    analytics_present,
    analytics_root,
    lake_root,
    sweep_temp_files,
    tables_present,
    temp_name,
)
from .sqltext import day_scan_sql, files_uniform, quote_sql
from .sqltext import ident as _ident
from .storage import ObjectPath

if TYPE_CHECKING:
    from .compact import Usable

DB_FILE = "faultline.duckdb"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: where ``write_partition`` puts day files (``files._table_files`` reads the same set)
DAY_GLOB = f"provider=*/cluster=*/date=*/{DATA_FILE}"


@dataclass
class BuildReport:
    path: Path
    views: list[str] = field(default_factory=list)
    sql_views: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # sql view file -> error
    skipped: dict[str, str] = field(default_factory=dict)  # sql view file -> the table it lacks
    snapshot: Path | ObjectPath | None = None  # the folder of links (copies on a store) the views read
    snapshot_error: str | None = None  # why the views read the live files instead
    collected: list[str] = field(default_factory=list)  # snapshots removed after the swap


def db_path(warehouse: str | os.PathLike) -> Path:
    """The (always local) view database of ``warehouse``."""
    if storage.is_url(warehouse):
        return storage.duckdb_file(warehouse)
    return Path(warehouse).resolve() / DB_FILE


def prepare(con: duckdb.DuckDBPyConnection, warehouse: str | os.PathLike) -> None:
    """Make a URL warehouse's files readable on ``con`` through fsspec, without ever
    installing or auto-loading an extension for them (no-op for a local warehouse)."""
    if storage.is_url(warehouse):
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        storage.register(con, warehouse)


def table_view_sql(
    warehouse: str | os.PathLike, table: str, uniform: bool = False, compacted: Usable | None = None, days: bool = True
) -> str:
    """The view over one lake table. ``uniform``: every file has the same schema, so DuckDB
    may take it from one file (else ``union_by_name``). ``compacted``: its days are read from the
    month files, every other day through the glob. ``days=False``: the month files only."""
    if not (uniform and compacted and compacted.files):
        return f"CREATE OR REPLACE VIEW {table} AS {_day_select(warehouse, table, uniform)}"
    cover = _days_sql(compacted.days)
    files = "[" + ", ".join(quote_sql(p.as_posix()) for p in compacted.files) + "]"
    packed = (
        f"SELECT {', '.join(_ident(c) for c in compacted.columns)} "
        f"FROM read_parquet({files}, hive_partitioning = false)\nWHERE {cover}"
    )
    if not days:
        return f"CREATE OR REPLACE VIEW {table} AS {packed}"
    # the layout is regular (``compact.usable`` checked): the glob of the regular layout
    # finds the same files, and DuckDB expands it faster than ``**``
    base = _day_select(warehouse, table, uniform, DAY_GLOB)
    return f"CREATE OR REPLACE VIEW {table} AS {base}\nWHERE NOT ({cover})\nUNION ALL {packed}"


def _day_select(warehouse: str | os.PathLike, table: str, uniform: bool, pattern: str = f"**/{DATA_FILE}") -> str:
    return f"SELECT * FROM {day_scan_sql(quote_sql(_table_glob(warehouse, table, pattern)), uniform)}"


def _days_sql(days: dict[tuple[str, str], list[dt.date]]) -> str:
    """A condition on ``provider``, ``cluster`` and ``date`` true on exactly these days
    (runs of consecutive days as one ``BETWEEN``)."""
    terms = []
    for (provider, cluster), dates in sorted(days.items()):
        runs: list[list[dt.date]] = []
        for d in sorted(set(dates)):
            if runs and d - runs[-1][1] == dt.timedelta(days=1):
                runs[-1][1] = d
            else:
                runs.append([d, d])
        spans = " OR ".join(
            f"date = DATE '{a}'" if a == b else f"date BETWEEN DATE '{a}' AND DATE '{b}'" for a, b in runs
        )
        terms.append(f"(provider = {quote_sql(provider)} AND cluster = {quote_sql(cluster)} AND ({spans}))")
    return " OR ".join(terms) or "false"


def _table_glob(warehouse: str | os.PathLike, table: str, pattern: str = f"**/{DATA_FILE}") -> str:
    return (lake_root(warehouse) / table).as_posix() + "/" + pattern


def uniform_schema(con: duckdb.DuckDBPyConnection, warehouse: str | os.PathLike, table: str) -> bool:
    """Whether every file of ``table`` has the same columns with the same types (one pass
    over the files' footers, at build time instead of at every query)."""
    return files_uniform(con, quote_sql(_table_glob(warehouse, table)))


def sql_view_files() -> list[tuple[str, str]]:
    """``(name, text)`` of ``faultline.sql``'s ``views/*.sql``, in file-name order."""
    try:
        folder = resources.files("faultline.sql").joinpath("views")
        if not folder.is_dir():
            return []
        entries = sorted((e for e in folder.iterdir() if e.name.endswith(".sql")), key=lambda e: e.name)
    except (ModuleNotFoundError, FileNotFoundError):
        return []
    return [(e.name[:-4], e.read_text(encoding="utf-8")) for e in entries]


def _view_statement(name: str, text: str) -> str:
    """A file holding a full ``CREATE ... VIEW`` runs as is; a bare query becomes the view
    named after the file (``10_failures.sql`` -> ``failures``)."""
    body = text.strip().rstrip(";")
    if re.match(r"(?is)^\s*(--[^\n]*\n\s*)*create\b", body):
        return body
    view = re.sub(r"^\d+[_-]", "", name)
    if not _IDENT.fullmatch(view):
        raise ValueError(f"view file {name}.sql: {view!r} is not a usable view name")
    return f"CREATE OR REPLACE VIEW {view} AS\n{body}"


STORAGE_COMPATIBILITY = "v1.0.0"


def _table_view(
    con: duckdb.DuckDBPyConnection, warehouse: str | os.PathLike, table: str, snap: snapshot.Snapshot | None = None
) -> str:
    """``table_view_sql`` with the compacted months that match the lake now. With ``snap``, the
    compacted files are linked first and judged by their links, then every day file they do not
    stand in for is linked; the view reads the links only."""

    uniform = uniform_schema(con, warehouse, table)
    day_select = _day_select(warehouse, table, uniform)
    if snap is None:
        compacted = usable(con, warehouse, table, day_select) if uniform else None
        return table_view_sql(warehouse, table, uniform, compacted)
    compacted = None
    if uniform:
        months = [(key, snap.link(path)) for key, path in compacted_months(warehouse, table)]
        compacted = usable(con, warehouse, table, day_select, [(k, p) for k, p in months if p is not None])
        for _key, link in months:
            if link is not None and link not in compacted.files:
                link.unlink()  # stale: this view does not read it
    days = snap.link_days(Path(lake_root(warehouse)) / table, compacted.rels if compacted else set())
    if days:
        return table_view_sql(snap.root, table, uniform, compacted)
    if compacted and compacted.files:  # every day is in a compacted month
        return table_view_sql(snap.root, table, uniform, compacted, days=False)
    return table_view_sql(warehouse, table, uniform, compacted)  # the day files vanished meanwhile


def build(warehouse: str | os.PathLike) -> BuildReport:
    """Build the view database aside and swap it into place (docs/architecture.md)."""
    final = db_path(warehouse)
    final.parent.mkdir(parents=True, exist_ok=True)
    sweep_temp_files(final.parent)
    tmp = temp_name(final)
    report = BuildReport(final)
    snap = None
    swapped = False
    try:
        # views only: written in the oldest storage format, so DuckDB CLIs and drivers older
        # than this library (the PyPI duckdb-cli, a notebook's duckdb) can open it read-only
        con = duckdb.connect(str(tmp), config={"storage_compatibility_version": STORAGE_COMPATIBILITY})
        try:
            prepare(con, warehouse)
            snap = snapshot.ObjectSnapshot(warehouse) if storage.is_url(warehouse) else snapshot.Snapshot(warehouse)
            try:
                report.views = _lake_views(con, warehouse, snap)
            except snapshot.Unsupported as exc:
                report.snapshot_error = str(exc)
                snap.discard()
                snap = None
            if snap is None:
                report.views = _lake_views(con, warehouse, None)
            report.snapshot = snap.root if snap else None
            # a view over tables that do not exist yet (analytics before the first analytics
            # run, or a view over another such view) is skipped, not an error
            pending = list(sql_view_files())
            while pending:
                missing = []
                for name, text in pending:
                    try:
                        con.execute(_view_statement(name, text))
                        report.sql_views.append(name)
                    except duckdb.CatalogException as exc:
                        missing.append((name, text, str(exc).splitlines()[0][:300]))
                    except (duckdb.Error, ValueError) as exc:
                        report.errors[name] = str(exc).splitlines()[0][:300]
                if len(missing) == len(pending):
                    report.skipped.update({n: why for n, _t, why in missing})
                    break
                pending = [(n, t) for n, t, _w in missing]
            con.execute("CHECKPOINT")
        finally:
            con.close()
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)
        swapped = True
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            leftover.unlink(missing_ok=True)
        if snap is not None and not swapped:
            snap.discard()  # no view file names it
    report.collected = snapshot.collect(warehouse)
    return report


def publish(warehouse: str | os.PathLike) -> tuple[CompactReport, BuildReport]:
    """Compact the lake's closed months, then rebuild the view file: what every batch ends with."""
    return compact(warehouse), build(warehouse)


_DUCK = {
    pl.Int32: "INTEGER",
    pl.Int64: "BIGINT",
    pl.String: "VARCHAR",
    pl.Float64: "DOUBLE",
    pl.Boolean: "BOOLEAN",
    pl.Date: "DATE",
    pl.Datetime("us", "UTC"): "TIMESTAMPTZ",
    pl.List(pl.String): "VARCHAR[]",
}


def _with_declared_columns(con: duckdb.DuckDBPyConnection, table: str, sql: str) -> str:
    """The view again, with every declared column its files lack as NULL (a lake written before
    the column was added), so queries over old and new warehouses alike can name it."""
    have = {r[0] for r in con.execute(f"DESCRIBE {_ident(table)}").fetchall()}
    missing = [(c, t) for c, t in TABLES[table].items() if c not in have]
    head = f"CREATE OR REPLACE VIEW {table} AS "
    if not missing or not sql.startswith(head):
        return "SELECT 1"
    extra = ", ".join(f"CAST(NULL AS {_DUCK[t]}) AS {_ident(c)}" for c, t in missing)
    return f"{head}SELECT *, {extra} FROM ({sql[len(head) :]})"


def _lake_views(
    con: duckdb.DuckDBPyConnection,
    warehouse: str | os.PathLike,
    snap: snapshot.Snapshot | snapshot.ObjectSnapshot | None,
) -> list[str]:
    """Create the views over the lake tables and the analytics tables; their names.
    An ``ObjectSnapshot`` holds the analytics tables only (the day files are read in place)."""
    views = []
    for table in tables_present(warehouse):
        sql = _table_view(con, warehouse, table, snap if isinstance(snap, snapshot.Snapshot) else None)
        con.execute(sql)
        con.execute(_with_declared_columns(con, table, sql))
        views.append(table)
    for name in analytics_present(warehouse):
        path = analytics_root(warehouse) / f"{name}.parquet"
        if snap is not None:
            path = snap.link(path)
            if path is None:  # removed since it was listed
                continue
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({quote_sql(path.as_posix())})")
        views.append(name)
    return views


def connect_readonly(warehouse: str | os.PathLike) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the current view database (never blocks, never blocked).
    The file is ATTACHed to a fresh in-memory database: ``duckdb.connect(path)`` would hand back
    a database this process already has open, i.e. the file before the last swap."""
    path = db_path(warehouse)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist yet: run the pipeline first (faultline run)")
    con = duckdb.connect()
    try:
        prepare(con, warehouse)
        con.execute(f"ATTACH {quote_sql(str(path))} AS faultline (READ_ONLY)")
        con.execute("USE faultline")
    except BaseException:
        con.close()
        raise
    return con
