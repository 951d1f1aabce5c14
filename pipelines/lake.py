"""The lake: hive-partitioned Parquet under ``<warehouse>/lake``, one file per table partition.

``<warehouse>/lake/<table>/provider=<p>/cluster=<c>/date=<d>/data.parquet`` (zstd). A write
goes to a temporary file in the same directory, is fsynced, then ``os.replace``d onto
``data.parquet``: a reader sees the old file or the new one, never a partial one and never
both. Temporary names never end in ``.parquet``, so globs over ``data.parquet`` skip them;
leftovers of a killed writer are swept by the next write to that directory.
"""
from __future__ import annotations

import datetime as dt
import os
import uuid
from pathlib import Path

import polars as pl

from .tables import PARTITION, SORT_KEYS, TABLES, conform

DATA_FILE = "data.parquet"
TMP_MARK = ".tmp-"


def lake_root(warehouse: str | os.PathLike) -> Path:
    return Path(warehouse).resolve() / "lake"


def partition_dir(warehouse: str | os.PathLike, table: str, provider: str, cluster: str, date: str) -> Path:
    return lake_root(warehouse) / table / f"provider={provider}" / f"cluster={cluster}" / f"date={date}"


def table_glob(warehouse: str | os.PathLike, table: str) -> str:
    return str(lake_root(warehouse) / table / "**" / DATA_FILE)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temp_files(folder: Path) -> int:
    """Remove temporary files of writers that are no longer running; returns the count."""
    n = 0
    if not folder.is_dir():
        return 0
    for p in folder.iterdir():
        if TMP_MARK not in p.name:
            continue
        try:
            pid = int(p.name.split(TMP_MARK, 1)[1].split("-", 1)[0])
        except ValueError:
            pid = -1
        if pid != os.getpid() and (pid < 0 or not _pid_alive(pid)):
            p.unlink(missing_ok=True)
            n += 1
    return n


def temp_name(final: Path) -> Path:
    """A unique sibling of ``final`` that no reader's glob matches (pid inside for sweeping)."""
    return final.with_name(f".{final.name}{TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_partition(warehouse: str | os.PathLike, table: str, df: pl.DataFrame,
                    provider: str, cluster: str, date: str) -> Path:
    """Conform ``df`` to the table's schema and atomically replace that partition's file.

    An empty frame still writes an (empty, schema-correct) file, so a rerun that removes
    rows takes effect.
    """
    schema = TABLES[table]
    values = {"provider": provider, "cluster": cluster, "date": dt.date.fromisoformat(date)}
    df = df.with_columns([
        (pl.col(c).fill_null(pl.lit(v, PARTITION[c])) if c in df.columns else pl.lit(v, PARTITION[c])).alias(c)
        for c, v in values.items()
    ])
    df = conform(df, schema, name=table)
    wrong = df.filter(pl.any_horizontal([pl.col(c) != pl.lit(v, PARTITION[c]) for c, v in values.items()]))
    if wrong.height:
        raise ValueError(f"{table}: {wrong.height} rows belong to another partition than {provider}/{cluster}/{date}")
    body = df.sort(SORT_KEYS[table], maintain_order=True).drop(list(PARTITION))
    return atomic_write(partition_dir(warehouse, table, provider, cluster, date) / DATA_FILE, body)


def atomic_write(final: Path, df: pl.DataFrame) -> Path:
    """Write ``df`` to a temporary file beside ``final``, fsync, and rename it into place."""
    folder = final.parent
    folder.mkdir(parents=True, exist_ok=True)
    sweep_temp_files(folder)
    tmp = temp_name(final)
    try:
        with open(tmp, "wb") as f:
            df.write_parquet(f, compression="zstd", statistics=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(folder)
    return final


def atomic_write_text(final: Path, text: str) -> Path:
    """Write text beside ``final`` and rename it into place (reports, metric files)."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def analytics_root(warehouse: str | os.PathLike) -> Path:
    """Derived tables over the whole history: ``<warehouse>/analytics/<name>.parquet``."""
    return Path(warehouse).resolve() / "analytics"


def write_analytics(warehouse: str | os.PathLike, name: str, df: pl.DataFrame) -> Path:
    return atomic_write(analytics_root(warehouse) / f"{name}.parquet", df)


def analytics_present(warehouse: str | os.PathLike) -> list[str]:
    root = analytics_root(warehouse)
    return sorted(p.stem for p in root.glob("*.parquet")) if root.is_dir() else []


def data_files(warehouse: str | os.PathLike, table: str) -> list[tuple[Path, dict]]:
    """``(path, {provider, cluster, date})`` of every data file of ``table``, sorted."""
    root = lake_root(warehouse) / table
    out = []
    for path in sorted(root.glob(f"provider=*/cluster=*/date=*/{DATA_FILE}")):
        keys = dict(part.split("=", 1) for part in path.relative_to(root).parts[:3])
        out.append((path, {"provider": keys["provider"], "cluster": keys["cluster"],
                           "date": dt.date.fromisoformat(keys["date"])}))
    return out


def _scan_file(path: Path, values: dict) -> pl.LazyFrame:
    # One open per file, read through that handle: polars re-opens a *path* for the footer
    # and the pages, which can mix two versions of a file replaced in between.
    handle = open(path, "rb")  # noqa: SIM115 - lives as long as the lazy frame
    return pl.scan_parquet(handle).with_columns([pl.lit(v, PARTITION[c]).alias(c) for c, v in values.items()])


def scan_table(warehouse: str | os.PathLike, table: str) -> pl.LazyFrame:
    """The whole table (every partition) in schema column order; empty when never written.

    Safe while a writer replaces partitions: each file is read through one open handle.
    """
    schema = TABLES[table]
    frames = [_scan_file(path, values) for path, values in data_files(warehouse, table)]
    if not frames:
        return pl.DataFrame(schema=schema).lazy()
    return pl.concat(frames, how="diagonal_relaxed").select([pl.col(c).cast(t) for c, t in schema.items()])


def read_table(warehouse: str | os.PathLike, table: str) -> pl.DataFrame:
    """``scan_table`` collected, each file closed after it is read."""
    frames = []
    for path, values in data_files(warehouse, table):
        with open(path, "rb") as f:
            frames.append(pl.read_parquet(f).with_columns([pl.lit(v, PARTITION[c]).alias(c) for c, v in values.items()]))
    if not frames:
        return pl.DataFrame(schema=TABLES[table])
    return pl.concat(frames, how="diagonal_relaxed").select([pl.col(c).cast(t) for c, t in TABLES[table].items()])


def read_partition(warehouse: str | os.PathLike, table: str, provider: str, cluster: str, date: str) -> pl.DataFrame:
    """One partition's rows (with the partition columns); empty when never written."""
    path = partition_dir(warehouse, table, provider, cluster, date) / DATA_FILE
    schema = TABLES[table]
    if not path.is_file():
        return pl.DataFrame(schema=schema)
    with open(path, "rb") as f:
        df = pl.read_parquet(f)
    df = df.with_columns(provider=pl.lit(provider), cluster=pl.lit(cluster), date=pl.lit(dt.date.fromisoformat(date)))
    return conform(df, schema, name=table)


def file_schema(warehouse: str | os.PathLike, table: str, provider: str, cluster: str, date: str) -> pl.Schema | None:
    path = partition_dir(warehouse, table, provider, cluster, date) / DATA_FILE
    if not path.is_file():
        return None
    with open(path, "rb") as f:
        return pl.read_parquet_schema(f)


def tables_present(warehouse: str | os.PathLike) -> list[str]:
    """Tables with at least one partition file, in ``TABLES`` order."""
    root = lake_root(warehouse)
    return [t for t in TABLES if (root / t).is_dir() and any((root / t).glob(f"**/{DATA_FILE}"))]
