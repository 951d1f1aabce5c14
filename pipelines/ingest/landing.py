"""The landing folder (docs/landing.md): find its partitions, list their files, report problems.
Only plain names are read; symlinks and paths outside the landing folder are never followed.
A URL landing folder is a listing of the store, with the same rules."""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..lake import storage
from ..lake.storage import ObjectPath

NAME_RE = re.compile(r"[A-Za-z0-9._-]+")
DATE_RE = re.compile(r"\d{4}-\d\d-\d\d")
KERNEL_SUFFIXES = (".log", ".log.gz", ".log.zst")
# job output as schedulers write it (slurm-<id>.out, slurm-<id>_<task>.out, sbatch -o/-e names)
JOB_OUTPUT_SUFFIXES = tuple(f"{ext}{z}" for ext in (".log", ".out", ".err", ".txt") for z in ("", ".gz", ".zst"))
INVENTORY_REQUIRED = ("provider", "cluster", "rack", "node", "gpus")


class LandingError(ValueError):
    """The landing folder itself (not one file in it) cannot be used."""


@dataclass(frozen=True, order=True)
class Partition:
    provider: str
    cluster: str
    date: str  # YYYY-MM-DD

    @property
    def relpath(self) -> str:
        return f"{self.provider}/{self.cluster}/{self.date}"

    @property
    def cluster_key(self) -> str:
        return cluster_key(self.provider, self.cluster)


def cluster_key(provider: str, cluster: str) -> str:
    """``provider:cluster``: ``:`` cannot occur in a landing name, so the key splits back
    unambiguously (``.``, ``_`` and ``-`` can), and it is legal in a Dagster partition key."""
    return f"{provider}:{cluster}"


def split_cluster_key(key: str) -> tuple[str, str]:
    provider, sep, cluster = key.partition(":")
    if not sep or not valid_name(provider) or not valid_name(cluster):
        raise ValueError(f"not a <provider>:<cluster> key: {key!r}")
    return provider, cluster


def valid_name(name: str) -> bool:
    return bool(NAME_RE.fullmatch(name)) and name not in (".", "..") and "..." not in name


def valid_date(name: str) -> bool:
    if not DATE_RE.fullmatch(name):
        return False
    try:
        dt.date.fromisoformat(name)
    except ValueError:
        return False
    return True


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


@dataclass
class Problem:
    path: str  # relative to the landing folder
    reason: str  # symlink | outside_landing | invalid_name | invalid_date | not_a_directory


@dataclass
class Discovery:
    partitions: list[Partition] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def landing_root(landing: str | os.PathLike | ObjectPath) -> Path | ObjectPath:
    """The resolved local folder, or the ``ObjectPath`` of a URL (no existence check)."""
    return storage.to_path(landing) if storage.is_url(landing) else Path(landing).resolve()


def _root(landing: str | os.PathLike) -> Path | ObjectPath:
    if isinstance(landing, ObjectPath):
        return landing  # a root this module already checked (internal calls)
    if storage.is_url(landing):
        root = storage.to_path(landing)
        if not storage.isdir(root):
            raise LandingError(f"landing location {root.url!r} does not exist or holds no objects")
        return root
    root = Path(landing)
    if not root.is_dir():
        raise LandingError(f"landing folder {str(root)!r} does not exist or is not a directory")
    return root.resolve()


def _safe(root: Path, path: Path, problems: list[Problem]) -> bool:
    """False (and a problem reported) for a symlink or a path resolving outside ``root``."""
    rel = path.relative_to(root).as_posix()
    if path.is_symlink():
        problems.append(Problem(rel, "symlink"))
        return False
    if not path.resolve().is_relative_to(root):
        problems.append(Problem(rel, "outside_landing"))
        return False
    return True


def _key_escapes(rel: str) -> bool:
    """A key below the landing prefix with an empty, ``.`` or ``..`` segment."""
    return any(seg in ("", ".", "..") for seg in rel.split("/"))


def _object_children(root: ObjectPath, folder: ObjectPath, problems: list[Problem], *, dirs: bool) -> list[ObjectPath]:
    """``_children`` on object storage: one listing of ``folder`` (prefixes and objects)."""
    out = []
    for entry in storage.list_dir(folder):
        try:
            rel = entry.relative_to(root).as_posix()
        except ValueError:
            problems.append(Problem(entry.path, "outside_landing"))
            continue
        if _key_escapes(rel) or "/" in entry.relative_to(folder).as_posix():
            problems.append(Problem(rel, "outside_landing"))
            continue
        if _hidden(entry.name):
            continue
        if (entry.info or {}).get("type") != "directory":
            if dirs:
                continue  # stray files between partition levels are not data
            problems.append(Problem(rel, "not_a_file"))
            continue
        if not valid_name(entry.name):
            problems.append(Problem(rel, "invalid_name"))
            continue
        out.append(entry)
    return out


def _children(root: Path, folder: Path, problems: list[Problem], *, dirs: bool) -> list[Path]:
    """Visible, safe, validly named entries of ``folder`` (directories or files), sorted."""
    if isinstance(root, ObjectPath):
        return _object_children(root, folder, problems, dirs=dirs)
    out = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if _hidden(entry.name) or not _safe(root, entry, problems):
            continue
        if entry.is_dir() != dirs:
            if dirs:
                continue  # stray files between partition levels are not data
            problems.append(Problem(entry.relative_to(root).as_posix(), "not_a_file"))
            continue
        if not valid_name(entry.name):
            problems.append(Problem(entry.relative_to(root).as_posix(), "invalid_name"))
            continue
        out.append(entry)
    return out


def discover(landing: str | os.PathLike) -> Discovery:
    """Every ``provider/cluster/YYYY-MM-DD`` folder of the landing folder, sorted."""
    root = _root(landing)
    found = Discovery()
    for prov in _children(root, root, found.problems, dirs=True):
        for clus in _children(root, prov, found.problems, dirs=True):
            for day in _children(root, clus, found.problems, dirs=True):
                if valid_date(day.name):
                    found.partitions.append(Partition(prov.name, clus.name, day.name))
                else:
                    found.problems.append(Problem(day.relative_to(root).as_posix(), "invalid_date"))
    return found


@dataclass
class KernelLog:
    node: str
    path: Path
    boot: Path | None


@dataclass
class PartitionFiles:
    """A partition's files by kind; every path is absolute and inside the landing folder."""

    root: Path
    partition: Partition
    kernel: list[KernelLog] = field(default_factory=list)
    boots: list[Path] = field(default_factory=list)
    sacct: Path | None = None
    slurmctld: Path | None = None
    job_logs: list[tuple[str, Path]] = field(default_factory=list)  # (job_id, path)
    flight: list[tuple[str, Path]] = field(default_factory=list)  # (job_id, path)
    other: list[Path] = field(default_factory=list)  # not part of the contract
    problems: list[Problem] = field(default_factory=list)

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def all_files(self) -> list[Path]:
        files = [k.path for k in self.kernel] + self.boots + [p for _, p in self.job_logs]
        files += [p for _, p in self.flight] + self.other
        files += [p for p in (self.sacct, self.slurmctld) if p is not None]
        return sorted(files)


def _walk_objects(root: ObjectPath, folder: ObjectPath, problems: list[Problem]) -> list[ObjectPath]:
    """``_walk_files`` on object storage: one recursive listing; hidden segments are
    skipped (like hidden folders), keys that could escape the prefix are refused."""
    out = []
    for obj in storage.list_files(folder):
        rel = obj.relative_to(folder).as_posix()
        if _key_escapes(rel):
            problems.append(Problem(obj.relative_to(root).as_posix(), "outside_landing"))
        elif not any(_hidden(seg) for seg in rel.split("/")):
            out.append(obj)
    return out


def _walk_files(root: Path, folder: Path, problems: list[Problem]) -> list[Path]:
    """All visible regular files under ``folder`` without following links. ``folder`` is
    inside ``root`` and no link on the way down is followed, so nothing found can resolve
    outside it: each entry needs only its own ``lstat`` (``DirEntry`` caches it)."""
    out: list[Path] = []
    with os.scandir(folder) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        if _hidden(entry.name):
            continue
        path = folder / entry.name
        if entry.is_symlink():
            problems.append(Problem(path.relative_to(root).as_posix(), "symlink"))
        elif entry.is_dir(follow_symlinks=False):
            out.extend(_walk_files(root, path, problems))
        elif entry.is_file(follow_symlinks=False):
            out.append(path)
        else:
            problems.append(Problem(path.relative_to(root).as_posix(), "not_a_file"))
    return out


def _kernel_node(name: str) -> str | None:
    for suffix in KERNEL_SUFFIXES:
        if name.endswith(suffix):
            node = name[: -len(suffix)]
            return node if valid_name(node) else None
    return None


def _job_output(name: str) -> bool:
    return valid_name(name) and name.endswith(JOB_OUTPUT_SUFFIXES)


def partition_files(landing: str | os.PathLike, part: Partition) -> PartitionFiles:
    """List one partition's files by kind; a missing day folder gives an empty listing."""
    root = _root(landing)
    pf = PartitionFiles(root, part)
    folder = root / part.provider / part.cluster / part.date
    if isinstance(root, ObjectPath):
        files = _walk_objects(root, folder, pf.problems)
    else:
        for level in (folder.parent.parent, folder.parent, folder):
            if level.is_symlink() or (level.exists() and not level.resolve().is_relative_to(root)):
                pf.problems.append(Problem(level.relative_to(root).as_posix(), "symlink"))
                return pf
        if not folder.is_dir():
            return pf
        files = _walk_files(root, folder, pf.problems)
    boots: dict[str, Path] = {}
    for path in files:
        parts = path.relative_to(folder).parts
        top, name = parts[0], parts[-1]
        if top == "kernel" and len(parts) == 2 and name.endswith(".boot") and valid_name(name[:-5]):
            boots[name[:-5]] = path
            pf.boots.append(path)
        elif top == "kernel" and len(parts) == 2 and _kernel_node(name):
            pf.kernel.append(KernelLog(_kernel_node(name), path, None))
        elif parts == ("slurm", "sacct.txt"):
            pf.sacct = path
        elif parts == ("slurm", "slurmctld.log"):
            pf.slurmctld = path
        elif top == "jobs" and len(parts) == 3 and valid_name(parts[1]) and _job_output(name):
            pf.job_logs.append((parts[1], path))
        elif top == "jobs" and len(parts) == 4 and parts[2] == "flight_recorder" and valid_name(parts[1]):
            pf.flight.append((parts[1], path))
        else:
            pf.other.append(path)
    for k in pf.kernel:
        k.boot = boots.get(k.node)
    pf.problems.extend(owned_discovery_problems(root, part))
    return pf


def owned_discovery_problems(landing: str | os.PathLike, part: Partition) -> list[Problem]:
    """The problems ``discover`` found above the day folders (a symlinked folder, an invalid date)
    that ``part`` reports: each belongs to the first partition under the nearest folder above it
    that has partitions, so it is quarantined exactly once."""
    root = _root(landing)
    days = (
        [d for d in _children(root, root / part.provider / part.cluster, [], dirs=True) if valid_date(d.name)]
        if (root / part.provider / part.cluster).is_dir()
        else []
    )
    if not days or days[0].name != part.date:
        return []  # only the first day of a cluster can own anything (cheap exit)
    found = discover(root)
    owned = []
    for problem in found.problems:
        segs = problem.path.split("/")
        for k in range(len(segs) - 1, -1, -1):
            under = [q for q in found.partitions if q.relpath.split("/")[:k] == segs[:k]]
            if under:
                if under[0] == part:
                    owned.append(problem)
                break
    return owned


def fingerprint(landing: str | os.PathLike, part: Partition) -> dict[str, list[int]]:
    """``{relpath: [size, mtime_ns]}`` of a partition's files: what changes when a file does."""
    pf = partition_files(landing, part)
    out = {}
    for path in pf.all_files():
        st = path.stat()
        out[pf.rel(path)] = [st.st_size, st.st_mtime_ns]
    return out


#: an inventory bigger than this is not a list of nodes
INVENTORY_MAX_BYTES = 64 << 20


def read_inventory(landing: str | os.PathLike) -> pl.DataFrame:
    """``inventory.csv`` as a frame (``load_inventory``), its row problems left unsaid."""
    return load_inventory(landing)[0]


def load_inventory(landing: str | os.PathLike) -> tuple[pl.DataFrame, list[str]]:
    """``inventory.csv`` as a frame of the required and optional columns (absent optional
    columns are null), and one line per row left out or value ignored, naming file and line.
    Names are kept as written (text, escaped where shown): a node no log names has no logs.
    Raises ``LandingError`` when it is missing, too big, empty or lacks a column."""
    root = _root(landing)
    path = root / "inventory.csv"
    if not path.is_file() or path.is_symlink():
        raise LandingError(f"{path} is missing (or not a regular file)")
    size = path.stat().st_size if not isinstance(path, ObjectPath) else 0
    if size > INVENTORY_MAX_BYTES:
        raise LandingError(f"{path}: {size:,} bytes, more than an inventory holds ({INVENTORY_MAX_BYTES:,})")
    text = path.read_bytes().decode("utf-8", errors="replace").lstrip("\ufeff")
    rows = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(rows)
    except (StopIteration, csv.Error):
        raise LandingError(f"{path}: no header line (needs {', '.join(INVENTORY_REQUIRED)})") from None
    cols = [c.strip().lower() for c in header]
    missing = [c for c in INVENTORY_REQUIRED if c not in cols]
    if missing:
        raise LandingError(f"{path}: missing columns {missing} (needs {', '.join(INVENTORY_REQUIRED)})")
    keep: list[dict] = []
    problems: list[str] = []
    seen: dict[tuple[str, str, str], int] = {}
    while True:
        start = rows.line_num + 1
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as exc:  # an unterminated quote swallowing the rest, a NUL byte
            problems.append(f"{path}:{start}: unreadable ({exc}); the rest of the file left out")
            break
        where = f"{path}:{start}"
        if not any(f.strip() for f in row):
            continue
        if rows.line_num > start:  # a quote left open takes the lines after it into one field
            problems.append(f"{where}: a quote opened here runs to line {rows.line_num}; those lines left out")
            continue
        if len(row) != len(cols):
            problems.append(f"{where}: {len(row)} fields where the header has {len(cols)}; row left out")
            continue
        rec = dict(zip(cols, (f.strip() for f in row)))
        if not re.fullmatch(r"\d{1,4}", rec["gpus"]):
            problems.append(f"{where}: gpus {rec['gpus'][:80]!r} is not a whole number of GPUs; row left out")
            continue
        key = (rec["provider"], rec["cluster"], rec["node"])
        if key in seen:
            problems.append(f"{where}: node {rec['node']} listed again (first at line {seen[key]}); row left out")
            continue
        seen[key] = start
        for c in ("in_service_from", "in_service_to"):
            if rec.get(c) and _day(rec[c]) is None:
                problems.append(f"{where}: {c} {rec[c][:80]!r} is not a date (YYYY-MM-DD); ignored")
        keep.append(rec)
    frame = pl.DataFrame(
        {
            **{c: [r[c] for r in keep] for c in ("provider", "cluster", "rack", "node")},
            "gpus": [int(r["gpus"]) for r in keep],
            **{c: [r.get(c) or None for r in keep] for c in ("gpu_model", "leaf_switch")},
            **{c: [_day(r.get(c) or "") for r in keep] for c in ("in_service_from", "in_service_to")},
        },
        schema={
            **dict.fromkeys(("provider", "cluster", "rack", "node"), pl.String),
            "gpus": pl.Int64,
            **dict.fromkeys(("gpu_model", "leaf_switch"), pl.String),
            **dict.fromkeys(("in_service_from", "in_service_to"), pl.Date),
        },
    )
    return frame, problems


def _day(text: str) -> dt.date | None:
    """A service-window day: the date part of an ISO date or timestamp, else None."""
    try:
        return dt.date.fromisoformat(text[:10])
    except ValueError:
        return None


def inventory_warnings(landing: str | os.PathLike, most: int = 10) -> list[str]:
    """What a run says about ``inventory.csv`` before it starts: why it cannot be used (the
    logs are ingested all the same), or its first ``most`` row problems and how many more."""
    try:
        _frame, problems = load_inventory(landing)
    except LandingError as exc:
        return [f"{exc}; the logs are ingested without racks, GPU counts or service windows"]
    more = [f"... and {len(problems) - most} more problems in inventory.csv"] if len(problems) > most else []
    return problems[:most] + more
