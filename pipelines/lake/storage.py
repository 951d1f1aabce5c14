"""Object storage (S3-compatible, or anything fsspec reads) for the landing folder and the lake.
Local paths never come through here: callers branch on ``is_url`` (or ``ObjectPath``). Options
and credentials: docs/object-storage.md."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
OPTIONS_ENV = "FAULTLINE_STORAGE_OPTIONS"
DUCKDB_ENV = "FAULTLINE_DUCKDB"


def scheme(location: Any) -> str | None:
    """``s3`` for ``s3://...``; None for a local path (a ``Path``, or a string without ``://``)."""
    if isinstance(location, ObjectPath):
        return location.protocol
    if not isinstance(location, str):
        return None
    m = _SCHEME.match(location)
    return m.group(1).lower() if m else None


def is_url(location: Any) -> bool:
    """True for an object-storage location (a URL with a scheme, or an ``ObjectPath``)."""
    return scheme(location) is not None


def storage_options(protocol: str) -> dict:
    """Options from ``FAULTLINE_STORAGE_OPTIONS`` for ``protocol`` (docs/object-storage.md)."""
    text = os.environ.get(OPTIONS_ENV, "").strip()
    if not text:
        return {}
    try:
        opts = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{OPTIONS_ENV} is not valid JSON: {exc}") from exc
    if not isinstance(opts, dict):
        raise ValueError(f"{OPTIONS_ENV} must be a JSON object of filesystem options")
    import fsspec

    protocols = set(fsspec.available_protocols())
    scoped = {k: v for k, v in opts.items() if k in protocols and isinstance(v, dict)}
    flat = {k: v for k, v in opts.items() if k not in scoped}
    return {**flat, **scoped.get(protocol, {})}


def filesystem(url: str) -> tuple[Any, str]:
    """``(fsspec filesystem, path without the protocol)`` for ``url``."""
    import fsspec

    proto = scheme(url)
    if proto is None:
        raise ValueError(f"{url!r} is not a URL (scheme://...)")
    # no listing cache: another process (a worker, a shipper) may write between two listings
    fs, path = fsspec.core.url_to_fs(url, **{"use_listings_cache": False, **storage_options(proto)})
    return fs, path.rstrip("/") or path


def to_path(location: str | ObjectPath) -> ObjectPath:
    """The ``ObjectPath`` of a URL (an ``ObjectPath`` passes through)."""
    if isinstance(location, ObjectPath):
        return location
    fs, path = filesystem(location)
    return ObjectPath(fs, path)


def location(value: str | os.PathLike | ObjectPath) -> Path | ObjectPath:
    """A local ``Path`` (as given, not resolved) or an ``ObjectPath`` for a URL."""
    return to_path(value) if is_url(value) else Path(value)


def abspath(value: str | os.PathLike | ObjectPath) -> str:
    """``os.path.abspath`` for local paths; a URL (or ``ObjectPath``) as its URL string."""
    if isinstance(value, ObjectPath):
        return value.url
    if is_url(value):
        return str(value)
    return os.path.abspath(value)


def join(base: str | os.PathLike | ObjectPath, *names: str) -> Path | ObjectPath:
    """``Path(base).joinpath(*names)`` locally, the same key under a URL otherwise."""
    out = location(base)
    for name in names:
        out = out / name
    return out


def isdir(value: str | os.PathLike | ObjectPath) -> bool:
    if is_url(value):
        p = to_path(value)
        p.fs.invalidate_cache(p.path)
        return p.is_dir()
    return Path(value).is_dir()


def _mtime_ns(info: dict) -> int:
    for key in ("LastModified", "mtime", "modified", "last_modified", "updated", "created", "timeCreated"):
        v = info.get(key)
        if v is None:
            continue
        if isinstance(v, dt.datetime):
            if v.tzinfo is None:
                v = v.replace(tzinfo=dt.timezone.utc)
            return int(v.timestamp() * 1_000_000_000)
        if isinstance(v, (int, float)):
            return int(v * 1_000_000_000)
        if isinstance(v, str):
            try:
                t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                continue
            return _mtime_ns({"mtime": t})
    return 0


class ObjectPath:
    """A key (or key prefix) on an fsspec filesystem with the few ``pathlib.Path`` methods the
    pipeline uses; ``str()`` is the URL. Deliberately not ``os.PathLike``, so handing one to
    ``open()`` fails loudly. ``info`` (from a listing) saves a request per ``stat``."""

    __slots__ = ("fs", "path", "info")

    def __init__(self, fs: Any, path: str, info: dict | None = None):
        self.fs, self.path, self.info = fs, path, info

    # -- names ----------------------------------------------------------------------------
    @property
    def protocol(self) -> str:
        p = self.fs.protocol
        return p if isinstance(p, str) else p[0]

    @property
    def url(self) -> str:
        return self.fs.unstrip_protocol(self.path)

    def __str__(self) -> str:
        return self.url

    def as_posix(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"ObjectPath({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and (self.protocol, self.path) == (other.protocol, other.path)

    def __lt__(self, other: ObjectPath) -> bool:
        # by segments, like pathlib (``a/b`` < ``a-b/c``), so listings sort like local paths
        return self.path.split("/") < other.path.split("/")

    def __hash__(self) -> int:
        return hash((self.protocol, self.path))

    def __truediv__(self, name: str) -> ObjectPath:
        name = str(name).strip("/")
        return ObjectPath(self.fs, f"{self.path.rstrip('/')}/{name}" if name else self.path)

    def joinpath(self, *names: str) -> ObjectPath:
        out = self
        for n in names:
            out = out / n
        return out

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.path).suffix

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.fs, str(PurePosixPath(self.path).parent))

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def relative_to(self, other: ObjectPath) -> PurePosixPath:
        """The key below ``other`` (a ``PurePosixPath``: ``.parts``, ``.as_posix()``)."""
        base = other.path.rstrip("/") + "/"
        if not self.path.startswith(base):
            raise ValueError(f"{self.url!r} is not under {other.url!r}")
        return PurePosixPath(self.path[len(base) :])

    # -- the store ------------------------------------------------------------------------
    def _info(self) -> dict:
        if self.info is None:
            self.info = self.fs.info(self.path)
        return self.info

    def stat(self) -> SimpleNamespace:
        """``st_size`` and ``st_mtime_ns`` (the object's last-modified time)."""
        info = self._info()
        return SimpleNamespace(st_size=int(info.get("size") or 0), st_mtime_ns=_mtime_ns(info))

    def exists(self) -> bool:
        return self.fs.exists(self.path)

    def is_file(self) -> bool:
        try:
            return self._info().get("type") == "file"
        except FileNotFoundError:  # like Path.is_file: a denied request still raises
            return False

    def is_dir(self) -> bool:
        return self.fs.isdir(self.path)

    def is_symlink(self) -> bool:
        return False

    def read_bytes(self) -> bytes:
        return self.fs.cat_file(self.path)

    def open(self, mode: str = "rb", **kwargs):
        return self.fs.open(self.path, mode, **kwargs)


def list_files(root: ObjectPath) -> list[ObjectPath]:
    """Every object under ``root`` (recursive; no directory markers), sorted by key, each
    carrying its listing info; a fresh listing, never the listing cache."""
    root.fs.invalidate_cache(root.path)
    try:
        found = root.fs.find(root.path, detail=True)
    except FileNotFoundError:
        return []
    out = [
        ObjectPath(root.fs, name, info)
        for name, info in found.items()
        if info.get("type", "file") == "file" and not name.endswith("/")
    ]
    return sorted(out)


def list_dir(folder: ObjectPath) -> list[ObjectPath]:
    """Direct children of ``folder`` (objects and common prefixes), fresh, sorted by key."""
    folder.fs.invalidate_cache(folder.path)
    try:
        entries = folder.fs.ls(folder.path, detail=True)
    except FileNotFoundError:
        return []
    out = [ObjectPath(folder.fs, e["name"].rstrip("/"), e) for e in entries]
    return sorted(p for p in out if p.path != folder.path.rstrip("/"))


def put_local_file(local: str | os.PathLike, dest: ObjectPath) -> ObjectPath:
    """Upload a finished local file as ``dest``: one PUT (a multipart upload past the
    filesystem's part size), which S3 makes visible only once complete."""
    dest.fs.put_file(os.fspath(local), dest.path)
    return ObjectPath(dest.fs, dest.path)


# -- DuckDB ----------------------------------------------------------------------------------


def register(con, url: str | ObjectPath) -> None:
    """Let a DuckDB connection read ``url``'s scheme through fsspec (no httpfs needed)."""
    fs = to_path(url).fs
    con.register_filesystem(fs)


def duckdb_file(warehouse: str | ObjectPath) -> Path:
    """The local view database of a URL warehouse (DuckDB cannot write a database to object
    storage): ``$FAULTLINE_DUCKDB`` when set, else
    ``${XDG_CACHE_HOME:-~/.cache}/faultline/<scheme>/<bucket>/<prefix>/faultline.duckdb``."""
    env = os.environ.get(DUCKDB_ENV, "").strip()
    if env:
        return Path(env).expanduser().resolve()
    url = abspath(warehouse)
    proto = scheme(url) or "url"
    rest = url.split("://", 1)[1].strip("/")
    parts = [re.sub(r"[^A-Za-z0-9._=-]", "_", p) for p in rest.split("/") if p not in ("", ".", "..")]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (cache / "faultline" / proto / Path(*parts or ["_"]) / "faultline.duckdb").resolve()
