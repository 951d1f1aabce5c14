"""Lake writes off the parsing thread, and the frames just written kept for the next step.
The next partition parses while the last is made durable; a remembered frame is used only
while its file on disk is still that file (docs/architecture.md, "Lake files")."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import polars as pl

from . import files as lake
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
        return  # an object's version cannot be checked without a request
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


def write_many(
    warehouse: str, frames: dict[str, pl.DataFrame], provider: str, cluster: str, date: str
) -> dict[str, Path | ObjectPath]:
    """``lake.write_partitions`` (all of a partition's tables or none), remembering each frame."""
    out = {}
    for table, (path, full) in lake.write_partitions(warehouse, frames, provider, cluster, date).items():
        remember(path, full)
        out[table] = path
    return out


def read(warehouse: str, table: str, provider: str, cluster: str, date: str) -> pl.DataFrame:
    """``lake.read_partition``, from memory when this process just wrote that file."""
    hit = recent(lake.partition_dir(warehouse, table, provider, cluster, date) / lake.DATA_FILE)
    return hit if hit is not None else lake.read_partition(warehouse, table, provider, cluster, date)


class PartitionWriter:
    """Writes partitions on ``threads`` threads; use as a context manager. Each ``write`` is
    one partition's tables, all or none (``lake.write_partitions``). After a failed write no
    other is started: queued ones are cancelled, the next ``write`` raises that error."""

    def __init__(self, warehouse: str, threads: int = 2, max_pending: int = 4):
        self.warehouse, self.max_pending = warehouse, max(1, max_pending)
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="faultline-write")
        self._pending: deque[Future] = deque()
        self._failed: BaseException | None = None
        self._lock = threading.Lock()

    def _done(self, fut: Future) -> None:
        if fut.cancelled() or fut.exception() is None:
            return
        with self._lock:
            if self._failed is None:
                self._failed = fut.exception()
            queued = list(self._pending)
        for other in queued:
            other.cancel()

    def write(
        self, frames: dict[str, pl.DataFrame], provider: str, cluster: str, date: str
    ) -> dict[str, Path | ObjectPath]:
        """Queue one partition's tables; returns the paths their files will have. Raises an
        earlier write's error once it is known."""
        if self._failed is not None:
            raise self._failed
        while len(self._pending) >= self.max_pending:
            with self._lock:
                oldest = self._pending.popleft()
            oldest.result()
        fut = self._pool.submit(write_many, self.warehouse, frames, provider, cluster, date)
        with self._lock:
            self._pending.append(fut)
        fut.add_done_callback(self._done)
        return {t: lake.partition_dir(self.warehouse, t, provider, cluster, date) / lake.DATA_FILE for t in frames}

    def close(self) -> None:
        """Wait for every queued write; raise the first error."""
        try:
            with self._lock:
                pending = list(self._pending)
            for fut in pending:
                if not fut.cancelled():
                    fut.exception()  # wait
            if self._failed is not None:
                raise self._failed
        finally:
            with self._lock:
                self._pending.clear()
            self._pool.shutdown(wait=True)

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception:  # the step's own error is the one to report
            pass
