"""The lake: hive-partitioned Parquet under ``<warehouse>/lake``, one file per table partition.
Writes are atomic (temporary file, fsync, rename; one PUT on object storage), so a reader sees
the old file or the new one (docs/architecture.md, "Lake files"; docs/object-storage.md)."""

from __future__ import annotations

import datetime as dt
import io
import os
import tempfile
import uuid
from pathlib import Path

import polars as pl

from ..schema import ANALYTICS, PARTITION, SORT_KEYS, TABLES, conform
from . import storage
from .storage import ObjectPath

DATA_FILE = "data.parquet"
TMP_MARK = ".tmp-"


def warehouse_root(warehouse: str | os.PathLike | ObjectPath) -> Path | ObjectPath:
    """The resolved local folder, or the ``ObjectPath`` of a URL warehouse."""
    if storage.is_url(warehouse):
        return storage.to_path(warehouse)
    return Path(warehouse).resolve()


def lake_root(warehouse: str | os.PathLike) -> Path | ObjectPath:
    return warehouse_root(warehouse) / "lake"


def partition_dir(
    warehouse: str | os.PathLike, table: str, provider: str, cluster: str, date: str
) -> Path | ObjectPath:
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


def write_partition(
    warehouse: str | os.PathLike, table: str, df: pl.DataFrame, provider: str, cluster: str, date: str
) -> Path:
    """Conform ``df`` to the table's schema and atomically replace that partition's file.
    An empty frame still writes an empty, schema-correct file, so a rerun that removes rows
    takes effect."""
    return write_partitions(warehouse, {table: df}, provider, cluster, date)[table][0]


def partition_frame(table: str, df: pl.DataFrame, provider: str, cluster: str, date: str) -> pl.DataFrame:
    """``df`` as ``write_partition`` stores it and ``read_partition`` returns it: the table's
    schema (partition columns filled in), in canonical order. Raises ``ValueError`` for rows of
    another partition. A frame already in the table's schema costs one query, the sort."""
    values = {"provider": provider, "cluster": cluster, "date": dt.date.fromisoformat(date)}
    fills = []
    for c, v in values.items():
        if c not in df.columns:
            fills.append(pl.lit(v, PARTITION[c]).alias(c))
            continue
        col = df.get_column(c)
        wrong = int((col.cast(PARTITION[c]) != v).sum())  # nulls are filled, not wrong
        if wrong:
            raise ValueError(f"{table}: {wrong} rows belong to another partition than {provider}/{cluster}/{date}")
        if col.null_count():
            fills.append(pl.col(c).fill_null(pl.lit(v, PARTITION[c])))
    df = conform(df.with_columns(fills) if fills else df, TABLES[table], name=table)
    return df.sort(SORT_KEYS[table], maintain_order=True)


def _open_read(path: Path | ObjectPath):
    return path.open("rb") if isinstance(path, ObjectPath) else open(path, "rb")  # noqa: SIM115


def _read_object(path: ObjectPath) -> pl.DataFrame | None:
    """An object's frame from one GET (one version of it), None when there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return pl.read_parquet(io.BytesIO(data))


def _put_parquet(final: ObjectPath, df: pl.DataFrame) -> ObjectPath:
    """Write ``df`` to a local temporary file, then upload it as ``final`` in one PUT."""
    with tempfile.TemporaryDirectory(prefix="faultline-put-") as tmpdir:
        tmp = Path(tmpdir) / DATA_FILE
        with open(tmp, "wb") as f:
            df.write_parquet(f, compression="zstd", statistics=True)
        return storage.put_local_file(tmp, final)


def atomic_write(final: Path | ObjectPath, df: pl.DataFrame) -> Path | ObjectPath:
    """Write ``df`` to a temporary file beside ``final``, fsync, and rename it into place
    (object storage: a local temporary file uploaded as one object)."""
    if isinstance(final, ObjectPath):
        return _put_parquet(final, df)
    return atomic_produce(final, _parquet(df))


def _parquet(df: pl.DataFrame):
    """A ``produce`` for ``stage``: ``df`` as a zstd Parquet file at the given path."""

    def produce(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            df.write_parquet(f, compression="zstd", statistics=True)

    return produce


def stage(final: Path, produce) -> Path:
    """``produce(tmp)`` writes a temporary sibling of the local file ``final`` (no reader's
    glob matches it), which is then fsynced; ``commit`` renames it into place. Nothing is
    left on error (a file left by a killed process is swept by the next write to the folder)."""
    folder = final.parent
    folder.mkdir(parents=True, exist_ok=True)
    sweep_temp_files(folder)
    tmp = temp_name(final)
    try:
        produce(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def commit(tmp: Path, final: Path) -> Path:
    """Rename a ``stage``d file onto ``final`` and make the rename durable."""
    try:
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(final.parent)
    return final


def write_partitions(
    warehouse: str | os.PathLike, frames: dict[str, pl.DataFrame], provider: str, cluster: str, date: str
) -> dict[str, tuple[Path | ObjectPath, pl.DataFrame]]:
    """Several tables of one partition, all or none: every file is staged before any is renamed,
    so a failed write leaves the partition as it was. Returns ``{table: (path, frame as read back)}``.
    Object storage: one PUT per table, in order."""
    full = {t: partition_frame(t, df, provider, cluster, date) for t, df in frames.items()}
    finals = {t: partition_dir(warehouse, t, provider, cluster, date) / DATA_FILE for t in full}
    if any(isinstance(f, ObjectPath) for f in finals.values()):
        return {t: (_put_parquet(finals[t], df.drop(list(PARTITION))), df) for t, df in full.items()}
    staged: list[tuple[str, Path]] = []
    try:
        for t, df in full.items():
            staged.append((t, stage(finals[t], _parquet(df.drop(list(PARTITION))))))
        out = {}
        while staged:
            t, tmp = staged.pop(0)
            out[t] = (commit(tmp, finals[t]), full[t])
        return out
    finally:
        for _t, tmp in staged:
            tmp.unlink(missing_ok=True)


def atomic_write_text(final: Path, text: str) -> Path:
    """Write text beside ``final`` and rename it into place (reports, metric files); a URL
    is written as one object."""
    if storage.is_url(final):
        obj = storage.to_path(final)
        obj.fs.pipe_file(obj.path, text.encode("utf-8"))
        return ObjectPath(obj.fs, obj.path)
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def analytics_root(warehouse: str | os.PathLike) -> Path | ObjectPath:
    """Derived tables over the whole history: ``<warehouse>/analytics/<name>.parquet``."""
    return warehouse_root(warehouse) / "analytics"


def write_analytics(warehouse: str | os.PathLike, name: str, df: pl.DataFrame) -> Path:
    """One analytics table, in its declared schema (``schema.ANALYTICS``)."""
    return atomic_write(analytics_root(warehouse) / f"{name}.parquet", conform(df, ANALYTICS[name], name=name))


def analytics_present(warehouse: str | os.PathLike) -> list[str]:
    root = analytics_root(warehouse)
    if isinstance(root, ObjectPath):
        return sorted(
            p.name[: -len(".parquet")]
            for p in storage.list_dir(root)
            if p.name.endswith(".parquet") and (p.info or {}).get("type") == "file"
        )
    return sorted(p.stem for p in root.glob("*.parquet")) if root.is_dir() else []


def data_files(warehouse: str | os.PathLike, table: str) -> list[tuple[Path, dict]]:
    """``(path, {provider, cluster, date})`` of every data file of ``table``, sorted."""
    root = lake_root(warehouse) / table
    out = []
    for path in _table_files(root):
        keys = dict(part.split("=", 1) for part in path.relative_to(root).parts[:3])
        out.append(
            (
                path,
                {"provider": keys["provider"], "cluster": keys["cluster"], "date": dt.date.fromisoformat(keys["date"])},
            )
        )
    return out


def _table_files(root: Path | ObjectPath) -> list[Path | ObjectPath]:
    """``provider=*/cluster=*/date=*/data.parquet`` under a table's folder, sorted."""
    if not isinstance(root, ObjectPath):
        return sorted(root.glob(f"provider=*/cluster=*/date=*/{DATA_FILE}"))
    out = []
    for path in storage.list_files(root):
        parts = path.relative_to(root).parts
        if (
            len(parts) == 4
            and parts[3] == DATA_FILE
            and all(p.startswith(f"{k}=") for p, k in zip(parts, ("provider", "cluster", "date")))
        ):
            out.append(path)
    return out


def _scan_file(path: Path | ObjectPath, values: dict) -> pl.LazyFrame:
    # One open per file, read through that handle: polars re-opens a *path* for the footer
    # and the pages, which can mix two versions of a file replaced in between.
    handle = _open_read(path)  # lives as long as the lazy frame
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
        if isinstance(path, ObjectPath):
            df = _read_object(path)
            if df is not None:  # removed since the listing
                frames.append(df.with_columns([pl.lit(v, PARTITION[c]).alias(c) for c, v in values.items()]))
            continue
        with open(path, "rb") as f:
            frames.append(
                pl.read_parquet(f).with_columns([pl.lit(v, PARTITION[c]).alias(c) for c, v in values.items()])
            )
    if not frames:
        return pl.DataFrame(schema=TABLES[table])
    df = pl.concat(frames, how="diagonal_relaxed")
    # files written before a column was added read it as null
    return df.select(
        [pl.col(c).cast(t) if c in df.columns else pl.lit(None, t).alias(c) for c, t in TABLES[table].items()]
    )


def read_partition(warehouse: str | os.PathLike, table: str, provider: str, cluster: str, date: str) -> pl.DataFrame:
    """One partition's rows (with the partition columns); empty when never written."""
    path = partition_dir(warehouse, table, provider, cluster, date) / DATA_FILE
    schema = TABLES[table]
    if isinstance(path, ObjectPath):
        df = _read_object(path)
        if df is None:
            return pl.DataFrame(schema=schema)
    elif not path.is_file():
        return pl.DataFrame(schema=schema)
    else:
        with open(path, "rb") as f:
            df = pl.read_parquet(f)
    df = df.with_columns(provider=pl.lit(provider), cluster=pl.lit(cluster), date=pl.lit(dt.date.fromisoformat(date)))
    return conform(df, schema, name=table)


def file_schema(warehouse: str | os.PathLike, table: str, provider: str, cluster: str, date: str) -> pl.Schema | None:
    path = partition_dir(warehouse, table, provider, cluster, date) / DATA_FILE
    if isinstance(path, ObjectPath):
        try:
            with path.open("rb") as f:
                return pl.read_parquet_schema(f)
        except FileNotFoundError:
            return None
    if not path.is_file():
        return None
    with open(path, "rb") as f:
        return pl.read_parquet_schema(f)


def tables_present(warehouse: str | os.PathLike) -> list[str]:
    """Tables with at least one partition file, in ``TABLES`` order."""
    root = lake_root(warehouse)
    if isinstance(root, ObjectPath):
        have = {p.relative_to(root).parts[0] for p in storage.list_files(root) if p.name == DATA_FILE}
        return [t for t in TABLES if t in have]
    return [t for t in TABLES if (root / t).is_dir() and any((root / t).glob(f"**/{DATA_FILE}"))]


def atomic_produce(final: Path, produce) -> Path:
    """``produce(tmp)`` writes a temporary sibling of the local file ``final`` (a DuckDB
    ``COPY ... TO``, say), which is fsynced and renamed onto ``final``. When ``produce`` raises,
    ``final`` is left as it was."""
    final = Path(final)
    return commit(stage(final, produce), final)
