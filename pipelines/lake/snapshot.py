"""Snapshots: hard links to every file one view database reads, under names never replaced.
DuckDB binds a Parquet file and scans it in two opens, so a file renamed over in between would
be read with another's footer (docs/architecture.md, "Snapshots"). URL warehouses copy instead."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import uuid
from pathlib import Path

from . import storage
from .files import DATA_FILE, warehouse_root

SNAPSHOT_DIR = "snapshots"
GRACE_ENV = "FAULTLINE_SNAPSHOT_GRACE_S"
DEFAULT_GRACE_S = 3600.0
KEEP = 2
_STAMP = "%Y%m%dT%H%M%S%fZ"
_ID = re.compile(r"(\d{8}T\d{12}Z)-\d+-[0-9a-f]{6}")


class Unsupported(OSError):
    """The warehouse's filesystem cannot hard-link a file into the snapshot."""


def grace_seconds() -> float:
    """``$FAULTLINE_SNAPSHOT_GRACE_S`` (seconds), else ``DEFAULT_GRACE_S``."""
    text = os.environ.get(GRACE_ENV, "").strip()
    if not text:
        return DEFAULT_GRACE_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{GRACE_ENV} must be a number of seconds, got {text!r}") from None
    if value < 0:
        raise ValueError(f"{GRACE_ENV} must not be negative, got {text!r}")
    return value


def snapshots_root(warehouse: str | os.PathLike) -> Path | storage.ObjectPath:
    return warehouse_root(warehouse) / SNAPSHOT_DIR


def _new_id(now: dt.datetime | None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"{now.strftime(_STAMP)}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _created(name: str) -> dt.datetime | None:
    m = _ID.fullmatch(name)
    if not m:
        return None
    return dt.datetime.strptime(m.group(1), _STAMP).replace(tzinfo=dt.timezone.utc)


class Snapshot:
    """A new snapshot folder of a local warehouse; ``link`` fills it."""

    def __init__(self, warehouse: str | os.PathLike, now: dt.datetime | None = None):
        self.warehouse = Path(warehouse_root(warehouse))
        self.id = _new_id(now)
        self.root = snapshots_root(warehouse) / self.id
        self.root.mkdir(parents=True)

    def link(self, src: Path) -> Path | None:
        """Hard-link ``src`` (a file under the warehouse) at the same relative path in the
        snapshot; that path, or None when ``src`` is gone (removed since it was listed)."""
        dst = self.root / Path(src).relative_to(self.warehouse)
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except FileNotFoundError:
            if Path(src).exists():
                raise
            return None
        except OSError as exc:  # EXDEV, EPERM, EMLINK, ENOTSUP ...
            raise Unsupported(exc.errno, f"cannot hard-link {src} into {self.root}: {exc.strerror}") from exc
        return dst

    def link_days(self, table_root: Path, skip: set[str]) -> int:
        """Link every ``data.parquet`` under a lake table's folder whose path relative to it
        is not in ``skip`` (days read from a compacted month); how many were linked."""
        n = 0
        for folder, dirs, names in os.walk(table_root):
            dirs.sort()
            if DATA_FILE not in names:
                continue
            src = Path(folder) / DATA_FILE
            if src.relative_to(table_root).as_posix() in skip:
                continue
            n += self.link(src) is not None
        return n

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class ObjectSnapshot:
    """A new snapshot of a URL warehouse: ``link`` copies an object inside the store."""

    def __init__(self, warehouse: str, now: dt.datetime | None = None):
        self.warehouse = warehouse_root(warehouse)
        self.id = _new_id(now)
        self.root = snapshots_root(warehouse) / self.id

    def link(self, src: storage.ObjectPath) -> storage.ObjectPath | None:
        """Copy ``src`` to the same key below the snapshot (a server-side copy on S3);
        that object, or None when ``src`` is gone."""
        dst = self.root.joinpath(*src.relative_to(self.warehouse).parts)
        try:
            src.fs.copy(src.path, dst.path)
        except FileNotFoundError:
            return None
        except OSError as exc:  # denied, unsupported
            raise Unsupported(getattr(exc, "errno", None) or 0, f"cannot copy {src} into {self.root}: {exc}") from exc
        return dst

    def discard(self) -> None:
        _remove(self.root)


def _remove(path: Path | storage.ObjectPath) -> None:
    if isinstance(path, storage.ObjectPath):
        try:
            path.fs.rm(path.path, recursive=True)
        except FileNotFoundError:
            pass
    else:
        shutil.rmtree(path, ignore_errors=True)


def _children(root: Path | storage.ObjectPath) -> list[str]:
    if isinstance(root, storage.ObjectPath):
        return [p.name for p in storage.list_dir(root) if (p.info or {}).get("type") == "directory"]
    return [p.name for p in root.iterdir() if p.is_dir()] if root.is_dir() else []


def collect(
    warehouse: str | os.PathLike, grace_s: float | None = None, keep: int = KEEP, now: dt.datetime | None = None
) -> list[str]:
    """Remove every snapshot but the newest ``keep`` whose successor was created more than
    ``grace_s`` seconds ago (no reader has opened a view file naming it since then);
    returns the removed ids. Folders with other names are left alone."""
    root = snapshots_root(warehouse)
    grace = dt.timedelta(seconds=grace_seconds() if grace_s is None else grace_s)
    now = now or dt.datetime.now(dt.timezone.utc)
    snaps = sorted((created, name) for name in _children(root) if (created := _created(name)) is not None)
    removed = []
    for (_c, name), (successor, _n) in zip(snaps[: max(len(snaps) - keep, 0)], snaps[1:]):
        if successor <= now - grace:
            _remove(root / name)
            removed.append(name)
    return removed
