"""``<warehouse>/faultline.duckdb``: views over the lake, rebuilt aside and swapped in.

DuckDB lets one process write a database file, and a read-write connection locks readers
out. So the file is never opened read-write in place: a new one is built under a temporary
name in the same folder, checkpointed, closed and ``os.replace``d onto ``faultline.duckdb``.
Readers (``duckdb -readonly``, ``connect_readonly``) keep the file they opened and the next
connection gets the new one; nobody waits and nobody sees a half-built file. The views hold
no data, only ``read_parquet`` over the lake's ``data.parquet`` files.

A URL warehouse (``s3://bucket/wh``) keeps its lake and analytics in the bucket, but the
view file is always local (DuckDB cannot write a database to object storage):
``$FAULTLINE_DUCKDB``, else a per-URL file under ``~/.cache/faultline/`` (``storage.duckdb_file``).
Its views read ``s3://...`` globs: connections made here register the fsspec filesystem
(``con.register_filesystem``), so they need no httpfs extension; the DuckDB CLI needs
``LOAD httpfs`` and an S3 secret instead (see the README).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import duckdb

from . import storage
from .lake import DATA_FILE, analytics_present, analytics_root, lake_root, sweep_temp_files, tables_present, temp_name
from .tables import PARTITION

DB_FILE = "faultline.duckdb"
_DUCK_TYPES = {"provider": "VARCHAR", "cluster": "VARCHAR", "date": "DATE"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class BuildReport:
    path: Path
    views: list[str] = field(default_factory=list)
    sql_views: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)   # sql view file -> error
    skipped: dict[str, str] = field(default_factory=dict)  # sql view file -> the table it lacks


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


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def table_view_sql(warehouse: str | os.PathLike, table: str, uniform: bool = False) -> str:
    """The view over one lake table. ``uniform``: every file has the same columns and types
    (the usual case: the schema is enforced on write), so DuckDB may take the schema from one
    file; otherwise it reads every file's schema at every query (``union_by_name``: files
    written before a column was added read as NULL there), about twice the time over a year."""
    glob = _table_glob(warehouse, table)
    hive = "{" + ", ".join(f"{_quote(c)}: {_DUCK_TYPES[c]}" for c in PARTITION) + "}"
    union = "" if uniform else "union_by_name = true, "
    return (f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM read_parquet({_quote(glob)}, "
            f"hive_partitioning = true, {union}hive_types = {hive})")


def _table_glob(warehouse: str | os.PathLike, table: str) -> str:
    return (lake_root(warehouse) / table).as_posix() + f"/**/{DATA_FILE}"


def uniform_schema(con: duckdb.DuckDBPyConnection, warehouse: str | os.PathLike, table: str) -> bool:
    """Whether every file of ``table`` has the same columns with the same types (one pass
    over the files' footers, at build time instead of at every query)."""
    glob = _quote(_table_glob(warehouse, table))
    n_files, n_cols, odd = con.execute(f"""
        WITH s AS (SELECT file_name, name, type FROM parquet_schema({glob})),
             c AS (SELECT name, type, count(DISTINCT file_name) AS n FROM s GROUP BY ALL)
        SELECT (SELECT count(DISTINCT file_name) FROM s), (SELECT count(*) FROM c),
               (SELECT count(*) FROM c WHERE n <> (SELECT count(DISTINCT file_name) FROM s))""").fetchone()
    return n_files > 0 and n_cols > 0 and odd == 0


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


def build(warehouse: str | os.PathLike) -> BuildReport:
    """Build the view database aside and swap it into place (see the module docstring)."""
    final = db_path(warehouse)
    final.parent.mkdir(parents=True, exist_ok=True)
    sweep_temp_files(final.parent)
    tmp = temp_name(final)
    report = BuildReport(final)
    try:
        # views only: written in the oldest storage format, so DuckDB CLIs and drivers older
        # than this library (the PyPI duckdb-cli, a notebook's duckdb) can open it read-only
        con = duckdb.connect(str(tmp), config={"storage_compatibility_version": STORAGE_COMPATIBILITY})
        try:
            prepare(con, warehouse)
            for table in tables_present(warehouse):
                con.execute(table_view_sql(warehouse, table, uniform_schema(con, warehouse, table)))
                report.views.append(table)
            for name in analytics_present(warehouse):
                path = (analytics_root(warehouse) / f"{name}.parquet").as_posix()
                con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({_quote(path)})")
                report.views.append(name)
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
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            leftover.unlink(missing_ok=True)
    return report


def connect_readonly(warehouse: str | os.PathLike) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the current view database (never blocks, never blocked).

    The file is ATTACHed to a fresh in-memory database: ``duckdb.connect(path)`` would hand
    back a database this process already has open, i.e. the file before the last swap.
    """
    path = db_path(warehouse)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist yet: run the pipeline first (faultline run)")
    con = duckdb.connect()
    try:
        prepare(con, warehouse)
        con.execute(f"ATTACH {_quote(str(path))} AS faultline (READ_ONLY)")
        con.execute("USE faultline")
    except BaseException:
        con.close()
        raise
    return con
