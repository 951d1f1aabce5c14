"""Lake writes off the parsing thread, and the frames just written kept for the next step.

A partition's tables are small Parquet files, and each write waits for its ``fsync`` (the
atomic-replace protocol of ``lake.atomic_write``): on a busy disk that wait is as long as
parsing the partition. ``PartitionWriter`` hands the writes to a few threads (``fsync``
and Parquet encoding release the GIL, and concurrent fsyncs share the file system's journal
commits), so the next partition parses while the last one is made durable. At most
``max_pending`` frames wait in memory; ``close`` waits for every write and raises the first
error, so a step never reports a table it did not write.

The core step reads back what the raw step of the same run wrote a moment earlier. Each
written frame is remembered (``recent``) with the identity of its file (inode, size,
mtime): a read gets the frame only while the file on disk is still that file, and anything
else (another process replaced it, it was never written here) reads the file.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import polars as pl

from . import lake
from .storage import ObjectPath

#: frames remembered per process, by estimated size (the oldest are dropped first)
RECENT_BYTES = 256 * 2**20

_recent: OrderedDict[str, tuple[tuple[int, int, int], pl.DataFrame, int]] = OrderedDict()
_recent_bytes = 0
_lock = threading.Lock()


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def remember(path: Path | ObjectPath, df: pl.DataFrame) -> None:
    """Keep ``df`` as the contents of the local file ``path`` (just written)."""
    global _recent_bytes
    if isinstance(path, ObjectPath):
        return                      # an object's version cannot be checked without a request
    ident, size = _identity(path), int(df.estimated_size())
    if ident is None or size > RECENT_BYTES:
        return
    with _lock:
        old = _recent.pop(str(path), None)
        if old is not None:
            _recent_bytes -= old[2]
        _recent[str(path)] = (ident, df, size)
        _recent_bytes += size
        while _recent_bytes > RECENT_BYTES:
            _recent_bytes -= _recent.popitem(last=False)[1][2]


def recent(path: Path | ObjectPath) -> pl.DataFrame | None:
    """The frame last written to ``path`` by this process, if the file is still that one."""
    if isinstance(path, ObjectPath):
        return None
    with _lock:
        hit = _recent.get(str(path))
    if hit is None or _identity(path) != hit[0]:
        return None
    return hit[1]


def forget() -> None:
    """Drop every remembered frame."""
    global _recent_bytes
    with _lock:
        _recent.clear()
        _recent_bytes = 0


def write(warehouse: str, table: str, df: pl.DataFrame, provider: str, cluster: str, date: str) -> Path | ObjectPath:
    """``lake.write_partition``, remembering the frame as ``read_partition`` would return it."""
    full = lake.partition_frame(table, df, provider, cluster, date)
    path = lake.atomic_write(lake.partition_dir(warehouse, table, provider, cluster, date) / lake.DATA_FILE,
                             full.drop(list(lake.PARTITION)))
    remember(path, full)
    return path


def read(warehouse: str, table: str, provider: str, cluster: str, date: str) -> pl.DataFrame:
    """``lake.read_partition``, from memory when this process just wrote that file."""
    hit = recent(lake.partition_dir(warehouse, table, provider, cluster, date) / lake.DATA_FILE)
    return hit if hit is not None else lake.read_partition(warehouse, table, provider, cluster, date)


class PartitionWriter:
    """Writes partition files on ``threads`` threads; use as a context manager."""

    def __init__(self, warehouse: str, threads: int = 4, max_pending: int = 16):
        self.warehouse, self.max_pending = warehouse, max(1, max_pending)
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="faultline-write")
        self._pending: deque[Future] = deque()

    def write(self, table: str, df: pl.DataFrame, provider: str, cluster: str, date: str) -> Path | ObjectPath:
        """Queue the write; returns the path the file will have (raises here an earlier
        write's error once it is known)."""
        while len(self._pending) >= self.max_pending:
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(write, self.warehouse, table, df, provider, cluster, date))
        return lake.partition_dir(self.warehouse, table, provider, cluster, date) / lake.DATA_FILE

    def close(self) -> None:
        """Wait for every queued write; raise the first error."""
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            for fut in self._pending:      # after an error: let the others finish, unreported
                fut.exception()
            self._pool.shutdown(wait=True)

    def __enter__(self) -> "PartitionWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception:           # the step's own error is the one to report
            pass
