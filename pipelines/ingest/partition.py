"""Ingest one landing partition (provider/cluster/day) into its tables; no Dagster. Every file
gets one balanced ``audit`` row (lines read = event lines + benign + quarantined), and every
line or file that could not be used a ``quarantine`` row with its reason."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ..classify.ruleset import RuleSet, load_ruleset
from ..lake.storage import ObjectPath
from ..schema import AUDIT, EVENTS, FLIGHT, QUARANTINE, RAW_JOBS, SORT_KEYS, STEPS, TABLES, conform
from .flight_recorder import (
    MAX_DUMP_BYTES,
    FlightRecorderError,
    FlightRecorderRefused,
    _as_int,
    load_dump,
    rank_from_filename,
    summarize_dumps,
    suspect_rank,
)
from .landing import Partition, PartitionFiles, partition_files
from .parse import ParseResult, SourceContext, file_checksum
from .pool import parse_partition_files
from .sacct import parse_sacct


@dataclass
class PartitionTables:
    kernel_events: pl.DataFrame  # kernel logs
    job_events: pl.DataFrame  # job output and the Slurm controller log
    jobs: pl.DataFrame  # sacct allocations (RAW_JOBS)
    steps: pl.DataFrame
    flight: pl.DataFrame  # one flight-recorder summary row per rank
    markers: pl.DataFrame  # progress and checkpoint lines of job output (job_markers)
    quarantine: pl.DataFrame
    audit: pl.DataFrame

    @property
    def events(self) -> pl.DataFrame:
        return finish(pl.concat([self.kernel_events, self.job_events]), "events")


def finish(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Conform to the lake schema of ``table`` and sort into its canonical order."""
    df = conform(df, TABLES[table], name=table)
    return df.sort(SORT_KEYS[table], nulls_last=False, maintain_order=True)


def _part_cols(df: pl.DataFrame, part: Partition) -> pl.DataFrame:
    return df.with_columns(
        provider=pl.lit(part.provider), cluster=pl.lit(part.cluster), date=pl.lit(dt.date.fromisoformat(part.date))
    )


class _Acc:
    """Collects the rows of one partition as its files are read."""

    def __init__(self, pf: PartitionFiles):
        self.pf = pf
        self.audit: list[dict] = []
        self.quarantine: list[pl.DataFrame] = []

    def quarantine_file(self, path: Path, reason: str, detail: str) -> None:
        self.quarantine.append(
            pl.DataFrame(
                {
                    "source": [self.pf.rel(path)],
                    "line_no": [None],
                    "reason": [reason],
                    "detail": [detail],
                    "preview": [""],
                },
                schema=QUARANTINE,
            )
        )

    def add_audit(
        self,
        path: Path,
        kind: str,
        *,
        lines: int = 0,
        events: int = 0,
        event_lines: int = 0,
        benign: int = 0,
        quarantined: int = 0,
        bytes_read: int | None = None,
        fmt: str | None = None,
        message: str | None = None,
        content_sha256: str | None = None,
    ) -> None:
        size = path.stat().st_size
        self.audit.append(
            {
                "source": self.pf.rel(path),
                "kind": kind,
                "bytes": size,
                "bytes_read": size if bytes_read is None else bytes_read,
                "checksum": content_sha256
                if content_sha256 and _stored_as_read(path, size, bytes_read)
                else _checksum(path),
                "lines_read": lines,
                "events": events,
                "event_lines": event_lines,
                "benign": benign,
                "quarantined": quarantined,
                "format": fmt,
                "message": message,
            }
        )

    def add_parse(self, path: Path, kind: str, res: ParseResult) -> None:
        self.quarantine.append(res.quarantine)
        self.add_audit(
            path,
            kind,
            lines=res.lines_read,
            events=res.events.height,
            event_lines=res.event_lines,
            benign=res.benign,
            quarantined=res.quarantined,
            bytes_read=res.bytes_read,
            fmt=res.format,
            message=res.message,
            content_sha256=res.content_sha256,
        )


def _stored_as_read(path: Path, size: int, bytes_read: int | None) -> bool:
    """A plain file read to its end: the hash of what was read is the file's checksum (no
    second pass over the file)."""
    if bytes_read != size:
        return False
    if isinstance(path, ObjectPath):
        return _object_magic(path) is None
    with open(path, "rb") as f:
        magic = f.read(4)
    return not (magic[:2] == b"\x1f\x8b" or magic == b"\x28\xb5\x2f\xfd")


def _object_magic(path: ObjectPath) -> str | None:
    """``gzip``/``zstd`` when the object starts with that magic (one small ranged read)."""
    magic = path.fs.cat_file(path.path, start=0, end=4)  # a ranged GET, no HEAD
    return "gzip" if magic[:2] == b"\x1f\x8b" else "zstd" if magic == b"\x28\xb5\x2f\xfd" else None


def _checksum(path: Path | ObjectPath) -> str:
    """sha256 of the file as stored (objects: streamed in 1 MiB pieces)."""
    if not isinstance(path, ObjectPath):
        return file_checksum(path)
    h = hashlib.sha256()
    with path.open("rb", block_size=8 << 20) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_boots(path: Path, acc: _Acc) -> list[dt.datetime]:
    """Boot times (ISO-8601, UTC when no zone) of a ``.boot`` file; bad lines quarantined."""
    boots, bad = [], []
    text = path.read_bytes().decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for i, line in enumerate(lines, start=1):
        s = line.strip()
        if not s:
            continue
        try:
            t = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
        except ValueError:
            bad.append(
                {
                    "source": acc.pf.rel(path),
                    "line_no": i,
                    "reason": "bad_boot_time",
                    "detail": "not an ISO-8601 time",
                    "preview": s[:512],
                }
            )
            continue
        boots.append(t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc))
    if bad:
        acc.quarantine.append(pl.DataFrame(bad, schema=QUARANTINE))
    acc.add_audit(path, "boot", lines=len(lines), benign=len(lines) - len(bad), quarantined=len(bad))
    return boots


def _sacct(path: Path, acc: _Acc) -> tuple[pl.DataFrame, pl.DataFrame]:
    res = parse_sacct(path.read_bytes(), source=acc.pf.rel(path))
    if res.quarantine.height:
        acc.quarantine.append(res.quarantine)
    a = res.accounted
    rows = a["jobs"] + a["steps"]
    acc.add_audit(
        path,
        "sacct",
        lines=res.lines_read,
        events=rows,
        event_lines=rows,
        benign=a["header"] + a["blank"],
        quarantined=a["quarantined"],
        fmt="sacct_pipe",
        message=res.error,
    )
    return res.jobs, res.steps


def _flight(files: list[tuple[str, Path]], acc: _Acc) -> pl.DataFrame:
    """Summaries of the readable dumps, per job; refused or broken dumps quarantined."""
    by_job: dict[str, dict[int, tuple[dict, str]]] = {}
    for job_id, path in files:
        reason = detail = None
        size = path.stat().st_size
        if size > MAX_DUMP_BYTES:
            reason, detail = "flight_recorder_too_large", f"{size:,} bytes, over the {MAX_DUMP_BYTES:,}-byte limit"
        else:
            try:
                dump = load_dump(path.read_bytes())
                rank = dump.get("rank")
                named = isinstance(rank, int) and not isinstance(rank, bool)
                rank = _as_int(rank) if named else rank_from_filename(path.name)
                if named and rank is None:
                    reason, detail = "flight_recorder_invalid", "the dump's rank is outside the int64 range"
                elif rank is None:
                    reason, detail = "flight_recorder_no_rank", "the dump names no rank and neither does its file name"
                elif rank in by_job.get(job_id, {}):
                    reason, detail = "flight_recorder_duplicate_rank", f"rank {rank} already read from another file"
            except FlightRecorderRefused as exc:
                reason, detail = "flight_recorder_refused", str(exc)
            except FlightRecorderError as exc:
                reason, detail = "flight_recorder_invalid", str(exc)
        if reason:
            acc.quarantine_file(path, reason, detail)
            acc.add_audit(path, "flight_recorder", lines=1, quarantined=1, message=detail[:200])
            continue
        by_job.setdefault(job_id, {})[rank] = (dump, acc.pf.rel(path))
        acc.add_audit(path, "flight_recorder", lines=1, events=1, event_lines=1, fmt="json")
    frames = []
    for job_id, ranks in sorted(by_job.items()):
        dumps = {r: d for r, (d, _) in ranks.items()}
        suspect, why = suspect_rank(dumps)
        sources = pl.DataFrame(
            {"rank": list(ranks), "source": [s for _, s in ranks.values()]},
            schema={"rank": pl.Int64, "source": pl.String},
        )
        frames.append(
            summarize_dumps(dumps)
            .join(sources, on="rank", how="left")
            .with_columns(job_id=pl.lit(job_id), suspect_rank=pl.lit(suspect, pl.Int64), suspect_reason=pl.lit(why))
        )
    return (
        pl.concat(frames)
        if frames
        else pl.DataFrame(schema={c: FLIGHT[c] for c in FLIGHT if c not in ("provider", "cluster", "date")})
    )


REFUSED_DETAIL = {  # per landing.Problem reason
    "symlink": "not read: symlinks are never followed",
    "outside_landing": "not read: paths resolving outside the landing folder are never followed",
    "not_a_file": "not read: not a regular file (a FIFO, socket or device)",
    "not_a_directory": "not read: not a directory",
    "invalid_name": "not read: names may only hold letters, digits, '.', '_' and '-'",
    "invalid_date": "not read: a day folder must be named YYYY-MM-DD (a valid date)",
}


def ingest_partition(
    landing: str | os.PathLike, provider: str, cluster: str, date: str | dt.date, rs: RuleSet | None = None
) -> PartitionTables:
    """Parse every file of ``landing/provider/cluster/date`` (see the module docstring)."""
    part = Partition(provider, cluster, date.isoformat() if isinstance(date, dt.date) else date)
    ref_date = dt.date.fromisoformat(part.date)
    rs = rs or load_ruleset()
    pf = partition_files(landing, part)
    acc = _Acc(pf)
    for problem in pf.problems:
        acc.quarantine.append(
            pl.DataFrame(
                {
                    "source": [problem.path],
                    "line_no": [None],
                    "reason": [f"refused_{problem.reason}"],
                    "detail": [REFUSED_DETAIL.get(problem.reason, f"not read: {problem.reason.replace('_', ' ')}")],
                    "preview": [""],
                },
                schema=QUARANTINE,
            )
        )

    def ctx(path: Path, kind: str, **kw) -> SourceContext:
        return SourceContext(
            source=pf.rel(path), kind=kind, ref_date=ref_date, provider=provider, cluster=cluster, **kw
        )

    boots = {p: _read_boots(p, acc) for p in pf.boots}
    # every log of the partition is read first, then all their candidate lines are parsed
    # in one batch (per-file overhead would dominate a night of thousands of small files)
    items = [(k.path, "kernel", ctx(k.path, "kernel", node=k.node, boots=boots.get(k.boot) or None)) for k in pf.kernel]
    items += [(path, "job", ctx(path, "job", job_id=job_id)) for job_id, path in pf.job_logs]
    if pf.slurmctld is not None:
        items.append((pf.slurmctld, "slurmctld", ctx(pf.slurmctld, "slurmctld")))
    results = parse_partition_files([(path, c) for path, _kind, c in items], rs)
    kernel, job, markers = [], [], []
    first_copy: dict[str, Path] = {}  # content sha256 -> first file delivering it
    for (path, kind, _c), res in zip(items, results):
        key = res.content_sha256 if not res.message and res.lines_read else None
        if key in first_copy:
            # the same content delivered twice (another name, or compressed): audited as
            # read (balanced), but its events and line rows are counted once, from the first
            detail = f"same content as {pf.rel(first_copy[key])}; its events are counted once"
            acc.quarantine_file(path, "duplicate_file", detail)
            res.quarantine, res.message = res.quarantine.clear(), detail
            acc.add_parse(path, kind, res)
            continue
        if key is not None:
            first_copy[key] = path
        acc.add_parse(path, kind, res)
        (kernel if kind == "kernel" else job).append(res.events)
        if res.markers is not None and res.markers.height:
            markers.append(res.markers.with_columns(job_id=pl.lit(_c.job_id), source=pl.lit(_c.source)))
    jobs, steps = (
        _sacct(pf.sacct, acc)
        if pf.sacct is not None
        else (
            pl.DataFrame(schema=RAW_JOBS).drop("provider", "cluster", "date"),
            pl.DataFrame(schema=STEPS).drop("provider", "cluster", "date"),
        )
    )
    flight = _flight(pf.flight, acc)
    for path in pf.other:
        acc.quarantine_file(path, "unexpected_file", "not part of the landing layout; not read")
        acc.add_audit(path, "other", message="not part of the landing layout")

    def events(frames: list[pl.DataFrame]) -> pl.DataFrame:
        return pl.concat(frames) if frames else pl.DataFrame(schema=EVENTS)

    audit = pl.DataFrame(acc.audit, schema=AUDIT) if acc.audit else pl.DataFrame(schema=AUDIT)
    quarantine = pl.concat(acc.quarantine) if acc.quarantine else pl.DataFrame(schema=QUARANTINE)
    return PartitionTables(
        kernel_events=finish(_part_cols(events(kernel), part), "raw_kernel_events"),
        job_events=finish(_part_cols(events(job), part), "raw_job_events"),
        jobs=finish(_part_cols(jobs, part), "raw_slurm_jobs"),
        steps=finish(_part_cols(steps, part), "steps"),
        flight=finish(_part_cols(flight, part), "flight_recorder"),
        markers=finish(
            _part_cols(
                pl.concat(markers, how="vertical_relaxed")
                if markers
                else pl.DataFrame(schema=TABLES["job_markers"]).drop("provider", "cluster", "date"),
                part,
            ),
            "job_markers",
        ),
        quarantine=finish(_part_cols(quarantine, part), "quarantine"),
        audit=finish(_part_cols(audit, part), "ingest_audit"),
    )


def core_events(kernel_events: pl.DataFrame, job_events: pl.DataFrame) -> pl.DataFrame:
    """All events of a partition, one row per ``event_id``, in time order."""
    both = pl.concat([kernel_events, job_events])
    return finish(both.unique("event_id", keep="first", maintain_order=True), "events")


def core_jobs(raw_jobs: pl.DataFrame, steps: pl.DataFrame, flight: pl.DataFrame) -> pl.DataFrame:
    """sacct allocations with their step counts and the flight recorder's suspect rank."""
    step_stats = steps.group_by("job_id").agg(
        n_steps=pl.len().cast(pl.Int64),
        failed_steps=(pl.col("state").fill_null("") != "COMPLETED").sum().cast(pl.Int64),
    )
    fr = flight.group_by("job_id").agg(
        fr_ranks=pl.len().cast(pl.Int64),
        fr_suspect_rank=pl.col("suspect_rank").first(),
        fr_suspect_reason=pl.col("suspect_reason").first(),
    )
    jobs = raw_jobs.join(step_stats, on="job_id", how="left").join(fr, on="job_id", how="left")
    jobs = jobs.with_columns(pl.col("n_steps", "failed_steps", "fr_ranks").fill_null(0))
    return finish(jobs, "jobs")
