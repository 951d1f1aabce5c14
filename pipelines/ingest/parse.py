"""Parse log files (or streams) into events, benign counts and quarantine rows.
Files are read in blocks; a literal prefilter keeps the lines that can matter, and those of many
files are parsed together in one set of polars expressions (docs/architecture.md)."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
import polars as pl
import pyarrow as pa

from ..classify.engine import Verdicts, classify_messages, evidence_rank, mask_template
from ..classify.ruleset import GROUP_NAMES, JOB_FAMILIES, RuleSet, load_ruleset
from ..schema import EVENTS, QUARANTINE, UTC_TS, conform
from . import literal_scan, reader
from .prefix import JOB_FIELDS, derive_timestamps, job_label_prefix, split_prefix, with_job_fields
from .progress import marker_rows

# Job output: messages (prefix stripped) that continue the message above them (traceback
# bodies, C++ frames, the torchrun failure table), and the exception line that ends a traceback.
JOB_CONT_MSG_RE = (
    r"^(?:[ \t]+\S|(?:\[\d{3,7}\] )?frame #\d+|Exception raised from|[=-]{10,}"
    r"|Failures:|Root Cause|\[\d+\]:\s*$|\S+ FAILED\s*$)"
)
EXC_LINE_RE = r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b"
# NCCL's own header ("host:pid:tid [cudaDev] NCCL INFO"), and the "[Rank N]" / "[PG 1 Rank N]"
# that PyTorch, DeepSpeed and Megatron put in front of a message: the node and rank a job line
# names when no rule or launcher label does.
NCCL_HOST_RE = r"^([\w.][\w.-]*):\d+:\d+ \[\d+\] (?:\S+ )?NCCL (?:INFO|WARN)"
# UCX's logger: "[1481207870.065269] [host:pid:thread]  file.c:257  UCX  ERROR ..." (older releases
# pad the pid with spaces; the epoch stamp reads as a raw dmesg stamp and is stripped with the
# prefix; the host stays in the message)
UCX_HOST_RE = r"^\[([\w.-]+):\d+ *:\d+(?::\d+)?\]\s+[\w.]+\.[ch]:\d+\s"
MSG_RANK_RE = r"\[(?:PG (?:ID )?\d+ (?:PG GUID \d+(?:\(\w+\))? |\(\w+\) )?)?Rank (\d+)\]"
# The same continuations on raw lines, behind any launcher label and the job loggers' prefixes:
# which lines of a job log are read at all (a superset of those JOB_CONT_MSG_RE names).
JOB_CONT_RE = "^" + job_label_prefix() + JOB_CONT_MSG_RE[1:]
GARBAGE_RE = "[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f\ufffd]"
# bytes that are neither printable ASCII nor tab/LF/VT/FF/CR/ESC: what is left after deleting
# those is control bytes (GARBAGE_RE's ASCII part) or non-ASCII; bytes.translate checks a block in C
_CLEAN_BYTES = bytes(range(0x20, 0x7F)) + b"\t\n\x0b\x0c\r\x1b"
_CLEAN_NO_CR = bytes(range(0x20, 0x7F)) + b"\t\n\x0b\x0c\x1b"  # and no CR (literal_scan's fast path)
_HIGH = bytes(range(0x80, 0x100))
_REPLACEMENT = "\ufffd".encode()


def _clean(data: bytes, keep: bytes = _CLEAN_BYTES) -> bool:
    """No control byte and valid UTF-8 without U+FFFD: no line of ``data`` can be garbage
    (``GARBAGE_RE``), so the garbage check is skipped. Non-ASCII text (device names,
    localized messages) is clean."""
    rest = data.translate(None, keep)
    if not rest:
        return True
    if rest.translate(None, _HIGH) or _REPLACEMENT in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


DMESG_H_RE = r"^\[[A-Z][a-z]{2}\d{1,2} \d\d:\d\d\]"
KERNEL_JOIN_GAP = 3  # physical lines an NVRM/SXid continuation may trail its start by
PREFIX_FORMATS = [  # (format name, prefix field that identifies it), first hit wins
    ("rfc5424", "iso5424"),
    ("dmesg_iso", "diso"),
    ("rfc3339_syslog", "iso"),
    ("talos", "talos"),
    ("bsd_syslog", "bsd"),
    ("kmsg", "kmsg_us"),
    ("raw_dmesg", "mono"),
    ("dmesg_T", "ctime"),
    ("dmesg_H", "hmon"),
    ("dmesg_relative", "rel"),
    ("slurm", "slurm"),
    ("fabric_manager", "fm"),
    ("gpfs", "mmfs"),
    ("python_logging", "pylog"),
    ("glog", "glog"),
]


@dataclass
class SourceContext:
    """What the pipeline knows about a file before reading it."""

    source: str  # stable id (path relative to the landing folder)
    kind: str = "kernel"  # kernel | job | slurmctld
    ref_date: dt.date | None = None  # partition date: year for year-less stamps
    node: str | None = None
    provider: str | None = None
    cluster: str | None = None
    job_id: str | None = None
    boots: list[dt.datetime] | None = None
    full: bool = False  # classify every line (CLI), not just prefiltered ones

    @property
    def default_family(self) -> str:
        return {"kernel": "kernel", "job": "job", "slurmctld": "slurm"}.get(self.kind, self.kind)


@dataclass
class ParseResult:
    events: pl.DataFrame
    quarantine: pl.DataFrame
    lines_read: int = 0
    event_lines: int = 0
    benign: int = 0
    quarantined: int = 0
    bytes_read: int = 0
    format: str | None = None
    message: str | None = None
    per_line: pl.DataFrame | None = None  # full mode: one row per physical line
    content_sha256: str | None = None  # of the content read (decompressed); None if unread
    markers: pl.DataFrame | None = None  # job output: progress and checkpoint lines (classify.markers)

    @property
    def balanced(self) -> bool:
        return self.lines_read == self.event_lines + self.benign + self.quarantined


@dataclass
class FileScan:
    """What reading one file left for the batch step: its candidate lines and counts."""

    ctx: SourceContext
    candidates: list = field(default_factory=list)  # frames: line_no, raw, _long, _garbage
    markers: list = field(default_factory=list)  # job output: frames line_no, raw of marker lines
    lines_read: int = 0
    bytes_read: int = 0
    fmt: str | None = None
    error: str | None = None
    content_sha256: str | None = None


#: leading bytes that make polars' CSV reader decompress a buffer (gzip, zstd, zlib)
_CODEC_MAGIC = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda")


def _read_lines(data: bytes, skip: int = 0) -> pl.DataFrame:
    """``data`` split into lines by polars' CSV reader, never decompressed: content that only
    looks like an archive (a plain line starting with zlib's magic) is read as text."""
    if data.startswith(_CODEC_MAGIC):
        data, skip = b"\n" + data, skip + 1
    return pl.read_csv(io.BytesIO(data), skip_lines=skip, raise_if_empty=False, **CSV_OPTS)


def _frame(data: bytes, skip_first: bool) -> pl.Series:
    if not data:
        return pl.Series("raw", [], pl.String)
    if b"\x1f" in data:  # the splitter's separator byte: split in Python (rare, garbage only)
        parts = data.split(b"\n")
        if skip_first:
            parts = parts[1:]
        if parts and parts[-1] == b"":
            parts.pop()
        return pl.Series("raw", [p.rstrip(b"\r").decode("utf-8", "replace") for p in parts], pl.String)
    if skip_first:
        nl = data.find(b"\n")
        if nl < 0 or nl == len(data) - 1:
            return pl.Series("raw", [], pl.String)
    df = _read_lines(data, 1 if skip_first else 0)
    return df["raw"].fill_null("") if df.width else pl.Series("raw", [], pl.String)


def lines_frame(block: reader.Block) -> pl.DataFrame:
    """Physical lines of a block (``line_no``, ``raw``), split by polars' CSV reader."""
    head = block.head[:-1] if block.head.endswith(b"\n") else block.head
    head_s = pl.Series("raw", [head.rstrip(b"\r").decode("utf-8", "replace")], pl.String)
    body = _frame(block.body, skip_first=True)
    if block.drop_last and len(body):
        body = body.head(len(body) - 1)
    raw = pl.concat([head_s, body.rename("raw")]) if len(body) else head_s
    return (
        pl.DataFrame({"raw": raw})
        .with_row_index("line_no", offset=block.first_line_no)
        .with_columns(pl.col("line_no").cast(pl.Int64))
    )


CSV_OPTS = dict(
    has_header=False,
    separator="\x1f",
    quote_char=None,
    new_columns=["raw"],
    encoding="utf8-lossy",
    infer_schema=False,
    comment_prefix=None,
)
FORMAT_SAMPLE_LINES = 200
BLOCKS_IN_FLIGHT = 2  # blocks of one file split and prefiltered at once (polars drops the GIL)
_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=BLOCKS_IN_FLIGHT, thread_name_prefix="faultline-scan")
    return _POOL


def _fast_candidates(
    block: reader.Block, ctx: SourceContext, rs: RuleSet, fmt: str | None
) -> tuple[int, pl.DataFrame] | None:
    """``_scan_block`` without splitting the block: Hyperscan finds the lines that can match and
    the exact polars filter runs on those alone. None where that would not be exact (dirty bytes,
    CR, overlong lines, full mode, job logs, ``dmesg -H``: regex candidates) or without Hyperscan."""
    if (
        ctx.full
        or ctx.kind == "job"
        or fmt in ("dmesg_H", "dmesg_relative")
        or block.head_overlong
        or not literal_scan.available()
        or len(block.head) > reader.MAX_LINE_BYTES
    ):
        return None
    if block.head.translate(None, _CLEAN_NO_CR) or block.body.translate(None, _CLEAN_NO_CR):
        return None  # ASCII only: Hyperscan's caseless literals fold ASCII letters alone
    body = memoryview(block.body)
    nl = block.body.find(b"\n")
    start = nl + 1 if nl >= 0 else len(body)
    end = block.body.rfind(b"\n") + 1 if block.drop_last else len(body)
    rest = body[start : max(start, end)]  # whole lines after the head, each ending in \n
    ends = literal_scan.line_ends(rest)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    if len(ends) and int((ends - starts).max()) > reader.MAX_LINE_BYTES:
        return None
    idx = literal_scan.matching_lines(rest, ends, rs.prefilter_literals)
    head = block.head[:-1] if block.head.endswith(b"\n") else block.head
    raw = pl.concat([pl.Series("raw", [head.decode("ascii")], pl.String), _gather_lines(rest, starts, ends, idx)])
    line_no = np.concatenate([[block.first_line_no], block.first_line_no + 1 + idx.astype(np.int64)])
    cand = pl.DataFrame({"line_no": pl.Series(line_no, dtype=pl.Int64), "raw": raw}).with_columns(
        _long=pl.lit(False), _garbage=pl.lit(False)
    )
    return 1 + len(ends), cand.filter(_candidate_expr(ctx, rs, fmt))


def _gather_lines(buf: memoryview, starts: np.ndarray, ends: np.ndarray, idx: np.ndarray) -> pl.Series:
    """Lines ``idx`` of ``buf`` (ASCII, each ending in a newline at ``ends``) as fresh strings,
    without a Python loop: an Arrow view of every line, gathered, newline stripped."""
    if not len(idx):
        return pl.Series("raw", [], pl.String)
    offsets = np.concatenate([starts, [int(ends[-1]) + 1]]).astype(np.int64)
    every = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(buf))
    picked = every.take(pa.array(idx, type=pa.int64()))
    return pl.Series("raw", picked).str.strip_suffix("\n")


def _fresh(raw: pl.Series) -> pl.Series:
    """A copy of strings filtered out of a larger frame: a filtered view would keep every
    buffer of the frame alive."""
    return pl.DataFrame({"raw": raw}).select(pl.concat_str([pl.col("raw"), pl.lit("")]))["raw"]


def _scan_block(
    block: reader.Block, ctx: SourceContext, rs: RuleSet, fmt: str | None, lines: pl.DataFrame | None = None
) -> tuple[int, pl.DataFrame, pl.DataFrame | None]:
    """Split one block into lines (unless given) and keep its candidates (every line in full
    mode) and, of job output, its marker lines; line numbers count from the block's
    ``first_line_no``."""
    if lines is None:
        fast = _fast_candidates(block, ctx, rs, fmt)
        if fast is not None:
            return (*fast, None)
    lines = lines_frame(block) if lines is None else lines
    dirty = not (_clean(block.head) and _clean(block.body))
    sel = _flags(lines.lazy(), dirty, block)
    if not ctx.full:
        sel = sel.filter(_candidate_expr(ctx, rs, fmt))
    cand = sel.collect()
    if cand.height:
        # an overlong line is quarantined with a preview: rules never see megabytes of it
        cand = cand.with_columns(
            raw=pl.when(pl.col("_long")).then(pl.col("raw").str.slice(0, reader.PREVIEW_BYTES)).otherwise(pl.col("raw"))
        )
        if not ctx.full:
            # fresh strings: a filtered string view would pin the whole block in memory
            cand = cand.with_columns(raw=_fresh(cand["raw"]))
    return lines.height, cand, _marker_lines(lines, ctx, rs)


def _marker_lines(lines: pl.DataFrame, ctx: SourceContext, rs: RuleSet) -> pl.DataFrame | None:
    """The lines of job output holding a marker rule's keyword (overlong lines aside), as
    fresh strings; None for other files and in full mode."""
    if ctx.kind != "job" or ctx.full or not rs.marker_prefilter:
        return None
    raw = pl.col("raw")
    mk = lines.filter(raw.str.contains(rs.marker_prefilter) & (raw.str.len_bytes() <= reader.MAX_LINE_BYTES))
    return mk.select("line_no", raw=_fresh(mk["raw"])) if mk.height else None


def scan_stream(stream: BinaryIO, ctx: SourceContext, rs: RuleSet, *, on_block=None) -> FileScan:
    """Read a stream block by block; keep only the candidate lines (all lines in full mode). The
    first block is scanned alone (it decides the prefix format), the rest in threads, in order;
    ``on_block(scan)`` after each lets full mode emit and drop lines, so memory stays bounded."""
    scan = FileScan(ctx)
    stats = reader.ReadStats()

    def take(n_lines: int, cand: pl.DataFrame, marks: pl.DataFrame | None) -> None:
        if cand.height:
            if scan.lines_read:
                cand = cand.with_columns(line_no=pl.col("line_no") + scan.lines_read)
            scan.candidates.append(cand)
        if marks is not None:
            scan.markers.append(marks.with_columns(line_no=pl.col("line_no") + scan.lines_read))
        scan.lines_read += n_lines
        if on_block is not None:
            on_block(scan)

    pending: deque[Future] = deque()
    for block in reader.iter_blocks(stream, stats, block_size=reader.BLOCK_SIZE):
        if scan.fmt is None:
            lines = lines_frame(block)
            scan.fmt = _detect_format(lines.head(FORMAT_SAMPLE_LINES)["raw"])
            take(*_scan_block(block, ctx, rs, scan.fmt, lines))
            continue
        if len(pending) >= BLOCKS_IN_FLIGHT:
            take(*pending.popleft().result())
        pending.append(_pool().submit(_scan_block, block, ctx, rs, scan.fmt))
    while pending:
        take(*pending.popleft().result())
    scan.bytes_read = stats.bytes_read
    scan.content_sha256 = stats.digest.hexdigest()
    scan.error = getattr(getattr(stream, "raw", None), "error", None)
    return scan


def scan_file(path: str | os.PathLike, ctx: SourceContext, rs: RuleSet) -> FileScan:
    stream, bounded, _size = reader.open_log(path)
    with stream:
        scan = scan_stream(stream, ctx, rs)
    if bounded is not None and bounded.error:
        scan.error = scan.error or bounded.error
    return scan


def parse_files(items: list[tuple[str | os.PathLike, SourceContext]], rs: RuleSet | None = None) -> list[ParseResult]:
    """Parse many files: read each, then parse all their candidate lines in one batch. Small clean
    files are split and prefiltered together (``_scan_small``): per-file polars calls would cost
    more than their lines. Everything else is scanned file by file, block by block."""
    rs = rs or load_ruleset()
    scans: list[FileScan | None] = [None] * len(items)
    small: list[tuple[int, str | os.PathLike, SourceContext, bytes, str]] = []
    small_bytes = 0
    for i, (path, ctx) in enumerate(items):
        got = None if ctx.full else _read_small(path)
        if got is not None:
            small.append((i, path, ctx, *got))
            small_bytes += len(got[0])
            if small_bytes >= SMALL_BATCH_BYTES:
                _scan_small(small, rs, scans)
                small, small_bytes = [], 0
            continue
        try:
            scans[i] = scan_file(path, ctx, rs)
        except OSError as exc:
            scans[i] = FileScan(ctx, error=f"cannot read file: {exc.strerror or exc}")
    if small:
        _scan_small(small, rs, scans)
    return _parse_in_chunks(scans, rs)


#: candidate lines of many files parsed together at most (a file is never split): bounds the
#: working memory of a dense partition; files are parsed independently, so results do not change
PARSE_CHUNK_ROWS = 200_000


def _parse_in_chunks(scans: list[FileScan], rs: RuleSet) -> list[ParseResult]:
    out: list[ParseResult] = []
    chunk: list[FileScan] = []
    rows = 0
    known = Verdicts()  # each distinct message classified once, whatever chunk it is in
    for scan in scans:
        n = sum(c.height for c in scan.candidates) + sum(m.height for m in scan.markers)
        if chunk and rows + n > PARSE_CHUNK_ROWS:
            out += parse_scans(chunk, rs, known=known)
            chunk, rows = [], 0
        chunk.append(scan)
        rows += n
    return out + (parse_scans(chunk, rs, known=known) if chunk else [])


SMALL_FILE_BYTES = 8 << 20  # content of a file scanned with others (one block or less)
SMALL_BATCH_BYTES = 32 << 20  # content scanned in one go


def _read_small(path: str | os.PathLike) -> tuple[bytes, str] | None:
    """The content of a small, clean, local log (CR-only line ends made LF) and its sha256; None
    when the file is large, empty, dirty, unreadable or a broken archive, which the block scanner
    handles with its messages."""
    if not isinstance(path, (str, os.PathLike)) or os.path.getsize(path) > SMALL_FILE_BYTES:
        return None
    try:
        stream, bounded, _size = reader.open_log(path)
        with stream:
            data = stream.read(SMALL_FILE_BYTES + 1)
            error = getattr(getattr(stream, "raw", None), "error", None)
    except OSError:
        return None
    if not data or len(data) > SMALL_FILE_BYTES or error or (bounded is not None and bounded.error) or not _clean(data):
        return None
    digest = hashlib.sha256(data).hexdigest()
    if b"\n" not in data and b"\r" in data:  # CR-only line ends, as the block reader reads them
        data = data.replace(b"\r", b"\n")
    return data, digest


def _scan_small(small: list[tuple], rs: RuleSet, scans: list) -> None:
    """``scan_stream`` for many small files at once: one split, one format detection, one
    prefilter over all their lines; the candidates go back to each file's scan."""
    counts = [d.count(b"\n") + (not d.endswith(b"\n")) for _i, _p, _c, d, _h in small]
    buf = b"".join(d if d.endswith(b"\n") else d + b"\n" for _i, _p, _c, d, _h in small)
    raw = _read_lines(buf)["raw"].fill_null("")
    if len(raw) != sum(counts):  # a split that disagrees: the block scanner is the reference
        for i, path, ctx, _d, _h in small:
            scans[i] = scan_file(path, ctx, rs)
        return
    n = len(small)
    starts = np.cumsum([0, *counts[:-1]])
    lines = pl.DataFrame({"f": np.repeat(np.arange(n, dtype=np.int32), counts), "raw": raw}).with_columns(
        line_no=pl.int_range(pl.len(), dtype=pl.Int64)
        - pl.lit(pl.Series(starts, dtype=pl.Int64)).gather(pl.col("f"))
        + 1
    )
    sample = (
        lines.lazy()
        .filter(pl.col("line_no") <= FORMAT_SAMPLE_LINES)
        .select("f", p=split_prefix(pl.col("raw")))
        .unnest("p")
        .group_by("f")
        .agg([pl.col(col).is_not_null().sum().alias(name) for name, col in PREFIX_FORMATS])
        .collect()
    )
    fmts = ["unknown"] * n
    for row in sample.iter_rows(named=True):  # first format with the most hits, as _detect_format
        best = max(((name, row[name]) for name, _ in PREFIX_FORMATS), key=lambda kv: kv[1])
        fmts[row["f"]] = best[0] if best[1] else "unknown"

    def per_file(flags: list[bool]) -> pl.Expr:
        return pl.lit(pl.Series(flags, dtype=pl.Boolean)).gather(pl.col("f"))

    r = pl.col("raw")
    long_ = r.str.len_bytes() > reader.MAX_LINE_BYTES
    cand = (
        lines.lazy()
        .filter(
            r.str.contains(rs.prefilter)
            | (per_file([c.kind == "job" for _i, _p, c, _d, _h in small]) & r.str.contains(JOB_CONT_RE))
            | (per_file([f in ("dmesg_H", "dmesg_relative") for f in fmts]) & r.str.contains(DMESG_H_RE))
            | long_
        )
        .with_columns(_long=long_, _garbage=pl.lit(False))
        # an overlong line is quarantined with a preview: rules never see megabytes of it
        .with_columns(raw=pl.when(pl.col("_long")).then(r.str.slice(0, reader.PREVIEW_BYTES)).otherwise(r))
        .collect()
    )
    parts = cand.partition_by("f", as_dict=True)
    is_job = [c.kind == "job" for _i, _p, c, _d, _h in small]
    marks = {}
    if any(is_job) and rs.marker_prefilter:
        mk = lines.filter(per_file(is_job) & r.str.contains(rs.marker_prefilter) & ~long_)
        marks = mk.select("f", "line_no", raw=_fresh(mk["raw"])).partition_by("f", as_dict=True, include_key=False)
    for f, ((i, _path, ctx, data, digest), n_lines) in enumerate(zip(small, counts)):
        scan = FileScan(ctx, lines_read=n_lines, bytes_read=len(data), fmt=fmts[f], content_sha256=digest)
        if (f,) in marks:
            scan.markers.append(marks[(f,)])
        if (f,) in parts:
            c = parts[(f,)]
            # fresh strings: a slice would pin the whole batch in memory
            scan.candidates.append(
                pl.DataFrame(
                    {
                        "line_no": c["line_no"],
                        "raw": _fresh(c["raw"]),
                        "_long": c["_long"],
                        "_garbage": c["_garbage"],
                    }
                )
            )
        scans[i] = scan


def parse_file(path: str | os.PathLike, ctx: SourceContext, rs: RuleSet | None = None) -> ParseResult:
    """Parse one file (plain, .gz or .zst; bounded decompression)."""
    rs = rs or load_ruleset()
    if ctx.full:
        stream, bounded, _size = reader.open_log(path)
        with stream:
            res = parse_stream(stream, ctx, rs)
        if bounded is not None and bounded.error and not res.message:
            res.message = bounded.error
        return res
    return parse_files([(path, ctx)], rs)[0]


def parse_stream(stream: BinaryIO, ctx: SourceContext, rs: RuleSet | None = None) -> ParseResult:
    """Parse one stream. In full mode (every line classified) each block is parsed as it
    arrives and only the per-line verdicts are kept."""
    rs = rs or load_ruleset()
    if not ctx.full:
        return parse_scans([scan_stream(stream, ctx, rs)], rs)[0]
    parts: list[ParseResult] = []
    last_ts = [None]
    known = Verdicts()

    def flush(scan: FileScan) -> None:
        if scan.candidates:
            chunk = FileScan(scan.ctx, scan.candidates, fmt=scan.fmt)
            res = parse_scans([chunk], rs, last_ts=last_ts[0], known=known)[0]
            if res.per_line is not None and res.per_line.height:
                ts = res.per_line["ts"].drop_nulls()
                if len(ts):
                    last_ts[0] = ts[-1]
            parts.append(res)
            scan.candidates = []

    scan = scan_stream(stream, ctx, rs, on_block=flush)
    out = ParseResult(
        pl.concat([p.events for p in parts]) if parts else pl.DataFrame(schema=EVENTS),
        pl.concat([p.quarantine for p in parts]) if parts else pl.DataFrame(schema=QUARANTINE),
        scan.lines_read,
        sum(p.event_lines for p in parts),
        0,
        sum(p.quarantined for p in parts),
        scan.bytes_read,
        scan.fmt,
        scan.error,
        pl.concat([p.per_line for p in parts]) if parts else None,
    )
    if scan.error:
        out.quarantine = pl.concat([out.quarantine, _read_error_row(ctx, scan.lines_read, scan.error)])
    out.benign = out.lines_read - out.event_lines - out.quarantined
    return out


def _read_error_row(ctx: SourceContext, lines_read: int, err: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "source": [ctx.source],
            "line_no": [lines_read + 1],
            "reason": ["unreadable_rest"],
            "detail": [err],
            "preview": [""],
        },
        schema=QUARANTINE,
    )


def _flags(lines: pl.LazyFrame, dirty: bool, block: reader.Block | None) -> pl.LazyFrame:
    raw = pl.col("raw")
    long_ = raw.str.len_bytes() > reader.MAX_LINE_BYTES
    if block is not None and block.head_overlong:
        long_ = long_ | (pl.col("line_no") == block.first_line_no)
    garbage = raw.str.contains(GARBAGE_RE) if dirty else pl.lit(False)
    return lines.with_columns(_long=long_, _garbage=garbage)


def _candidate_expr(ctx: SourceContext, rs: RuleSet, fmt: str | None) -> pl.Expr:
    raw = pl.col("raw")
    sel = raw.str.contains(rs.prefilter)
    if ctx.kind == "job":
        sel = sel | raw.str.contains(JOB_CONT_RE)
    if fmt in ("dmesg_H", "dmesg_relative"):
        sel = sel | raw.str.contains(DMESG_H_RE)
    return sel | pl.col("_long") | pl.col("_garbage")


def _detect_format(raw: pl.Series) -> str:
    if not len(raw):
        return "unknown"
    hits = (
        pl.DataFrame({"raw": raw})
        .lazy()
        .select(p=split_prefix(pl.col("raw")))
        .unnest("p")
        .select([pl.col(col).is_not_null().sum().alias(name) for name, col in PREFIX_FORMATS])
        .collect()
    )
    counts = {name: hits[name][0] for name, _col in PREFIX_FORMATS}
    best = max(counts.items(), key=lambda kv: kv[1])
    return best[0] if best[1] else "unknown"


def file_checksum(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_CTX_SCHEMA = {
    "_file": pl.Int32,
    "_source": pl.String,
    "_kind": pl.String,
    "_node_ctx": pl.String,
    "_job_ctx": pl.String,
    "_provider": pl.String,
    "_cluster": pl.String,
    "_ref_date": pl.Date,
    "_family_default": pl.String,
}


def parse_scans(
    scans: list[FileScan], rs: RuleSet, *, last_ts=None, known: Verdicts | None = None
) -> list[ParseResult]:
    """Parse the candidate lines of many files at once; one ParseResult per scan, in order.
    ``known``: verdicts of earlier chunks (``classify_messages``)."""
    today = dt.datetime.now(dt.timezone.utc).date()
    ctx_rows = [
        (
            i,
            s.ctx.source,
            s.ctx.kind,
            s.ctx.node,
            s.ctx.job_id,
            s.ctx.provider,
            s.ctx.cluster,
            s.ctx.ref_date or today,
            s.ctx.default_family,
        )
        for i, s in enumerate(scans)
    ]
    ctxs = pl.DataFrame(ctx_rows, schema=_CTX_SCHEMA, orient="row")
    frames = [c.with_columns(_file=pl.lit(i, pl.Int32)) for i, s in enumerate(scans) for c in s.candidates]
    full = any(s.ctx.full for s in scans)
    if frames:
        cand = pl.concat(frames).join(ctxs, on="_file", how="left", maintain_order="left")
        boots = {i: s.ctx.boots for i, s in enumerate(scans) if s.ctx.boots}
        ev, lines = _events_from_candidates(cand, rs, boots, last_ts, full, known)
        bad = lines.filter(pl.col("_long") | (pl.col("_garbage") & pl.col("category").is_in(["unknown", "benign"])))
        q = bad.select(
            "_file",
            source=pl.col("_source"),
            line_no=pl.col("line_no"),
            reason=pl.when(pl.col("_long")).then(pl.lit("line_too_long")).otherwise(pl.lit("binary_or_invalid_utf8")),
            detail=pl.when(pl.col("_long"))
            .then(pl.lit(f"line longer than {reader.MAX_LINE_BYTES} bytes; only a preview is kept"))
            .otherwise(pl.lit("line holds NUL/control bytes or invalid UTF-8")),
            preview=pl.col("raw").str.slice(0, reader.PREVIEW_BYTES).str.replace_all(GARBAGE_RE, "\ufffd"),
        )
        if bad.height:
            key = ["_file", "line_no"]
            lines = lines.join(
                bad.select(key).with_columns(_q=pl.lit(True)), on=key, how="left", maintain_order="left"
            ).with_columns(pl.col("_q").fill_null(False))
            ev = ev.join(bad.select(key), on=key, how="anti", maintain_order="left")
            n = lines.filter(~pl.col("_q")).group_by("_file", "_grp").agg(pl.len().alias("_n"))
            ev = (
                ev.join(n, on=["_file", "_grp"], how="inner", maintain_order="left")
                .with_columns(line_count=(pl.col("_n") + pl.col("repeats") - 1).cast(pl.Int32))
                .drop("_n")
            )
        else:
            lines = lines.with_columns(_q=pl.lit(False))
    else:
        ev = q = lines = None
    marks = [m.with_columns(_file=pl.lit(i, pl.Int32)) for i, s in enumerate(scans) for m in s.markers]
    mk = marker_rows(pl.concat(marks).join(ctxs.select("_file", "_ref_date"), on="_file"), rs) if marks else None
    # each frame typed and split by file once (per-file polars calls would cost more than the
    # lines of a small file; filtering per file would scan every frame once a file)
    if ev is not None:
        ev = _with_file(ev.sort("_file", "line_no"), EVENTS, "events")
    if q is not None:
        q = _with_file(q, QUARANTINE, "quarantine")
    by_file = {
        name: (frame.partition_by("_file", as_dict=True, include_key=name == "lines") if frame is not None else {})
        for name, frame in (("ev", ev), ("q", q), ("lines", lines if full else None), ("mk", mk))
    }
    no_events, no_quarantine = pl.DataFrame(schema=EVENTS), pl.DataFrame(schema=QUARANTINE)
    out = []
    for i, s in enumerate(scans):
        e = by_file["ev"].get((i,), no_events)
        qq = by_file["q"].get((i,), no_quarantine)
        n_q = qq.height
        if s.error:
            qq = pl.concat([qq, _read_error_row(s.ctx, s.lines_read, s.error)])
        per_line = None
        if full and lines is not None:
            per_line = (
                by_file["lines"]
                .get((i,), lines.clear())
                .with_columns(category=pl.when(pl.col("_q")).then(pl.lit("quarantined")).otherwise(pl.col("category")))
            )
        event_lines = int(e["line_count"].sum()) if e.height else 0
        res = ParseResult(
            e,
            conform(qq, QUARANTINE, name="quarantine"),
            s.lines_read,
            event_lines,
            0,
            n_q,
            s.bytes_read,
            s.fmt,
            s.error,
            per_line,
            s.content_sha256,
            by_file["mk"].get((i,)),
        )
        res.benign = s.lines_read - event_lines - n_q
        out.append(res)
    return out


def _with_file(frame: pl.DataFrame, schema: pl.Schema, name: str) -> pl.DataFrame:
    """``frame`` as ``schema`` (``conform``) with its ``_file`` column in front."""
    return pl.concat(
        [frame.select("_file"), conform(frame.drop("_file", "_grp", strict=False), schema, name=name)], how="horizontal"
    )


TAKE_FIRST_NON_NULL = (
    "ts",
    "node",
    "gpu_pci",
    "gpu_uuid",
    "gpu_serial",
    "job_id",
    "rank",
    "local_rank",
    "xid",
    "sxid",
    "nccl_status",
)
TAKE_FIRST = (
    "_file",
    "_source",
    "_provider",
    "_cluster",
    "family",
    "category",
    "severity",
    "action",
    "rule_id",
    "keep",
)


def _templates(first_line: pl.Expr) -> pl.Expr:
    """``mask_template`` of each event's first line, computed once per distinct line."""
    return first_line.map_batches(_distinct_templates, return_dtype=pl.String)


def _distinct_templates(s: pl.Series) -> pl.Series:
    frame = pl.DataFrame({"m": s})
    uniq = frame.unique("m", maintain_order=True).with_columns(t=mask_template(pl.col("m")))
    return frame.join(uniq, on="m", how="left", maintain_order="left", nulls_equal=True)["t"]


#: a message repeated on one file's line (same rank or host label) at least this often, with
#: no more than FLOOD_LINE_GAP lines between two repeats, is one event standing for all of them
FLOOD_MIN = 50
FLOOD_LINE_GAP = 2_000


def _flood_key() -> pl.Expr:
    """One message of one file from one writer (rank, task or host label)."""
    return pl.struct("_file", "msg", "rank_label", "srun_label", "pdsh", *JOB_FIELDS).hash(seed=11)


def _collapse_floods(c: pl.DataFrame) -> pl.DataFrame:
    """Floods (an Xid 95 printed 800,000 times by one GPU) as one event per burst: the first
    and last line of each burst stay (for the times and the evidence), the lines between go,
    counted in ``_repeats``. Only one-line events collapse; joined messages stay whole."""
    grp = pl.col("_grp")
    single = ~((grp == grp.shift(1)) | (grp == grp.shift(-1))).fill_null(False)
    eligible = single & (pl.col("category") != "benign") & ~pl.col("_long") & ~pl.col("_garbage")
    key = _flood_key()
    c = c.with_columns(_fk=pl.when(eligible).then(key), _pos=pl.int_range(pl.len(), dtype=pl.Int64))
    runs = (
        c.lazy()
        .filter(pl.col("_fk").is_not_null())
        .select("_pos", "_fk", "_file", "line_no")
        .sort("_file", "_fk", "line_no")
        .with_columns(
            _burst=(
                (pl.col("_fk") != pl.col("_fk").shift(1))
                | (pl.col("_file") != pl.col("_file").shift(1))
                | ((pl.col("line_no") - pl.col("line_no").shift(1)) > FLOOD_LINE_GAP)
            )
            .fill_null(True)
            .cum_sum()
        )
        .with_columns(
            _n=pl.len().over("_burst"),
            _first=pl.col("line_no").min().over("_burst"),
            _last=pl.col("line_no").max().over("_burst"),
        )
        .filter(pl.col("_n") >= FLOOD_MIN)
        .select(
            "_pos",
            _repeats=pl.when(pl.col("line_no") == pl.col("_first")).then(pl.col("_n").cast(pl.Int32)),
            _flood_end=pl.col("line_no") == pl.col("_last"),
            _keep=(pl.col("line_no") == pl.col("_first")) | (pl.col("line_no") == pl.col("_last")),
        )
        .collect()
    )
    c = c.drop("_fk")
    if not runs.height:
        return c.drop("_pos").with_columns(_repeats=pl.lit(1, pl.Int32), _flood_end=pl.lit(False))
    c = c.join(runs, on="_pos", how="left", maintain_order="left")
    return (
        c.filter(pl.col("_keep").fill_null(True))
        .drop("_pos", "_keep")
        .with_columns(_repeats=pl.col("_repeats").fill_null(1), _flood_end=pl.col("_flood_end").fill_null(False))
    )


def _flood_ends(c: pl.DataFrame) -> pl.DataFrame:
    """Each burst's last line, once its time is known, folded into the burst's first line."""
    if not c["_flood_end"].any():
        return c.with_columns(_last_ts=pl.lit(None, UTC_TS), _last_raw=pl.lit(None, pl.String)).drop("_flood_end")
    c = c.with_columns(_fk=_flood_key())
    ends = c.filter("_flood_end").select("_fk", "_file", "line_no", _last_ts="ts", _last_raw="raw")
    starts = (
        c.filter(pl.col("_repeats") > 1)
        .select("_fk", "_file", "line_no")
        .join_asof(ends.sort("line_no"), on="line_no", by=["_file", "_fk"], strategy="forward", check_sortedness=False)
        .select("_fk", "_file", "line_no", "_last_ts", "_last_raw")
    )
    c = c.filter(~pl.col("_flood_end")).join(starts, on=["_fk", "_file", "line_no"], how="left", maintain_order="left")
    return c.drop("_fk", "_flood_end")


def _split_prefixes(c: pl.DataFrame) -> pl.DataFrame:
    """The prefix fields of every line: job output's with its launcher labels read first."""
    # a zero-filled run (left by a crash) glued in front of a line does not hide its stamp
    raw = pl.col("raw")
    if c.height and c["raw"].str.starts_with("\x00").any():
        raw = raw.str.strip_chars_start("\x00")
    job = pl.col("_kind") == "job"
    if not c.height or not (c["_kind"] == "job").any():
        return with_job_fields(c.with_columns(p=split_prefix(raw)).unnest("p"))
    parts = [
        part.with_columns(p=split_prefix(raw, job=flag)).unnest("p")
        for flag, part in ((True, c.filter(job)), (False, c.filter(~job)))
        if part.height
    ]
    parts = [with_job_fields(part) for part in parts]
    return pl.concat(parts, how="diagonal").sort("_file", "line_no") if len(parts) > 1 else parts[0]


def _adopt_orphans(c: pl.DataFrame) -> pl.DataFrame:
    """Job output: a run of benign traceback lines with nothing above to continue (the tail of
    another rank's traceback, printed first) joins the event on the very next line."""
    g = c.group_by("_grp", maintain_order=True).agg(
        orphan=(pl.col("_kind").first() == "job")
        & pl.col("_jc").first()
        & (pl.col("category") == "benign").all()
        & (pl.col("continues") & pl.col("family").is_in(JOB_FAMILIES)).fill_null(False).any(),
        _f=pl.col("_file").first(),
        first=pl.col("line_no").min(),
        last=pl.col("line_no").max(),
    )
    adopt = (
        pl.col("orphan") & (pl.col("_f").shift(-1) == pl.col("_f")) & (pl.col("first").shift(-1) == pl.col("last") + 1)
    ).fill_null(False)
    g = g.select("_grp", _to=pl.when(~adopt).then(pl.col("_grp")).fill_null(strategy="backward"))
    return c.join(g, on="_grp", how="left", maintain_order="left").with_columns(_grp=pl.col("_to")).drop("_to")


#: the syslog tag fields of the prefix (``prefix._ALTS``): the daemon that wrote the line
SYSLOG_TAGS = ("tag_bsd", "tag_iso", "tag5424")


def _with_daemon_tags(
    c: pl.DataFrame, msg: pl.Expr, cls: pl.DataFrame, rs: RuleSet, full: bool, known: Verdicts | None = None
) -> pl.DataFrame:
    """A syslog line of a daemon (``smartd[2842]: ...``) that no rule names by its message alone
    is classified again with its tag in front: rules that name the daemon read it as it printed."""
    tags = [t for t in SYSLOG_TAGS if t in c.columns]
    if not tags or not c.height:
        return cls
    placed = [i for i, r in enumerate(rs.rules) if r.placed]
    tag = pl.coalesce(*tags)
    unnamed = cls["rule_idx"].is_null() | cls["rule_idx"].is_in(placed)
    daemon = c.select(tag.is_not_null() & ~tag.is_in(["kernel:", "kern:"]) & pl.Series(unnamed)).to_series()
    if not daemon.any():
        return cls
    retry = (
        c.with_columns(_i=pl.int_range(pl.len(), dtype=pl.UInt32))
        .filter(daemon)
        .select("_i", m=pl.concat_str(tag, pl.lit(" "), msg))
    )
    alt = classify_messages(retry["m"], rs, every_line=full, known=known).with_columns(_i=retry["_i"])
    alt = alt.filter(pl.col("rule_idx").is_not_null() & ~pl.col("rule_idx").is_in(placed))
    if not alt.height:
        return cls
    return cls.with_row_index("_i").update(alt, on="_i", include_nulls=True).drop("_i")


def _events_from_candidates(
    c: pl.DataFrame, rs: RuleSet, boots: dict, last_ts, full: bool = False, known: Verdicts | None = None
):
    c = _split_prefixes(c.sort("_file", "line_no"))
    msg = pl.coalesce(pl.col("msg"), pl.col("raw"))
    cls = classify_messages(c.select(msg.alias("m"))["m"], rs, every_line=full, known=known)
    cls = _with_daemon_tags(c, msg, cls, rs, full, known)
    c = pl.concat([c.drop([g for g in GROUP_NAMES if g in c.columns]), cls], how="horizontal")
    c = c.with_columns(msg=msg)

    is_job = pl.col("_kind") == "job"
    any_job = bool((c["_kind"] == "job").any())
    same_file = pl.col("_file") == pl.col("_file").shift(1)
    gap = pl.when(is_job).then(1).otherwise(KERNEL_JOIN_GAP)
    # nothing joins a line that names another GPU than the line above it (the next GPU's own
    # failure), nor continues an overlong line (it is quarantined, and would take the event)
    other_gpu = (pl.col("gpu_pci") != pl.col("gpu_pci").shift(1)).fill_null(False)
    near = (
        same_file & ((pl.col("line_no") - pl.col("line_no").shift(1)) <= gap) & ~other_gpu & ~pl.col("_long").shift(1)
    ).fill_null(False)
    # a rule continuation joins the line above only within its own family (an OOM report
    # line right after an SXid block is a new event); dump lines (joins_any) join any event
    # and are skipped over when the next line compares families; in job output, any error
    # line above it (a CUDA error's advice under a PyTorch line, "Last error:" under a DistBackendError)
    own_family = pl.when(~pl.col("joins_any")).then(pl.col("family").fill_null(""))
    same_family = (pl.col("family") == own_family.forward_fill().over("_file").shift(1)).fill_null(False)
    # a header line (opens) takes the next line of its family, unless that is a header too
    after_header = (
        pl.col("opens").shift(1).fill_null(False) & ~pl.col("opens") & (pl.col("family") == pl.col("family").shift(1))
    ).fill_null(False)
    # a job-output line that opens an event with a cause of its own keeps its verdict
    own_cause = is_job & ~pl.col("category").is_in(["benign", "unknown"]) & ~pl.col("continues")
    if any_job:
        c = c.with_columns(_jc=is_job & pl.col("msg").str.contains(JOB_CONT_MSG_RE))
        exc_after = pl.col("_jc").shift(1).fill_null(False) & is_job & pl.col("msg").str.contains(EXC_LINE_RE)
        error_above = (pl.col("category").shift(1) != "benign").fill_null(False)
        jc_above = pl.col("_jc").shift(1).fill_null(False)
        by_rule = pl.col("continues") & (pl.col("joins_any") | same_family | (is_job & (error_above | jc_above)))
        indented = pl.col("_jc") & pl.col("msg").str.contains(r"^[ \t]")
        c = c.with_columns(
            _grp=(~(near & (by_rule | after_header | pl.col("_jc") | exc_after))).cast(pl.Int64).cum_sum()
        )
        # a merely indented line continues only an event that an error opened or a traceback
        # body (frames) makes up, not a block of indented output (nvidia-smi -q) around one match
        err_opens = (pl.col("family").is_in(JOB_FAMILIES) | (pl.col("category") != "benign")).fill_null(False)
        frames = (pl.col("continues") & pl.col("family").is_in(JOB_FAMILIES)).fill_null(False)
        body = err_opens.first().over("_grp") | frames.any().over("_grp")
        joined = near & (by_rule | after_header | (pl.col("_jc") & ~indented) | (indented & body) | exc_after)
        c = c.with_columns(_grp=(~joined).cast(pl.Int64).cum_sum(), _own=own_cause)
        c = _adopt_orphans(c)
    else:
        joined = near & ((pl.col("continues") & (pl.col("joins_any") | same_family)) | after_header)
        c = c.with_columns(_grp=(~joined).cast(pl.Int64).cum_sum(), _own=own_cause)
    c = c.with_columns(_repeats=pl.lit(1, pl.Int32), _flood_end=pl.lit(False)) if full else _collapse_floods(c)

    c = derive_timestamps(c, boots_by_file=boots or None)
    # lines without a stamp (dmesg -H relative lines, job output) take the time of the line
    # before them in the same file (in full mode, of the block before too); raw dmesg seconds
    # without a boot time keep no time and say so (no_boot_time)
    has_ts = pl.col("ts").is_not_null()
    no_boot = pl.col("ts_source") == "no_boot_time"
    c = c.with_columns(
        ts_source=pl.when(has_ts | no_boot).then(pl.col("ts_source")).otherwise(pl.lit("inherited")),
        ts=pl.when(~no_boot).then(pl.col("ts").fill_null(strategy="forward").over("_file")),
    )
    if last_ts is not None:
        c = c.with_columns(
            ts=pl.when(~no_boot).then(pl.col("ts").fill_null(pl.lit(last_ts, dtype=pl.Datetime("us", "UTC"))))
        )
    c = c.with_columns(
        ts_source=pl.when(pl.col("ts").is_null() & ~no_boot).then(pl.lit("none")).otherwise(pl.col("ts_source"))
    )
    c = _flood_ends(c)
    c = c.with_columns(_rank=evidence_rank(pl.col("category"), pl.col("rule_idx")))

    # "kernel:" in front of a stamp is the syslog tag of a line whose host was cut off
    pdsh = pl.when(pl.col("pdsh") != "kernel").then(pl.col("pdsh"))
    # job output: the NCCL header's host, slurmstepd's node, a "[Rank N]" in the message
    job_node = [
        pl.col("msg").str.extract(NCCL_HOST_RE, 1),
        pl.col("msg").str.extract(r"^slurmstepd-([\w.-]+): ", 1),
        pl.col("msg").str.extract(UCX_HOST_RE, 1),
    ]
    job_rank = [pl.col("msg").str.extract(MSG_RANK_RE, 1).cast(pl.Int32, strict=False)]
    if not any_job:
        job_node, job_rank = [], []
    node_from_line = pl.coalesce(
        pl.when(pl.col("node") != "-").then(pl.col("node")),  # NCCL prints "-" for a hidden host
        *[pl.when(is_job).then(x) for x in job_node],
        pdsh,
        pl.col("job_host"),
        pl.col("ray_ip"),
        pl.col("host_iso"),
        pl.col("host_bsd"),
        pl.col("host5424"),
        pl.col("host_ctime"),
    )
    node = (
        pl.when((pl.col("_kind") == "kernel") & pl.col("_node_ctx").is_not_null())
        .then(pl.coalesce(pdsh, pl.col("_node_ctx")))
        .otherwise(pl.coalesce(node_from_line, pl.col("_node_ctx")))
    )
    c = c.with_columns(
        node=node,
        # a launcher's rank label is the global rank; "[Rank N]" in a message may be a subgroup's
        rank=pl.coalesce(
            *[
                pl.col(f).cast(pl.Int32, strict=False)
                for f in ("job_rank", "mpi_rank", "ray_rank", "ray_tp", "sgl_tp", "srun_task")
            ],
            pl.col("rank"),
            pl.col("rank_label").cast(pl.Int32, strict=False),
            pl.col("srun_label").cast(pl.Int32, strict=False),
            *[pl.when(is_job).then(x) for x in job_rank],
        ),
        local_rank=pl.coalesce(pl.col("local_rank"), pl.col("tx_local_rank")).cast(pl.Int32, strict=False),
        job_id=pl.coalesce(pl.col("_job_ctx"), pl.col("job_id")),
        family=pl.coalesce(pl.col("family"), pl.col("_family_default")),
    )
    per_line_cols = [
        "_file",
        "_source",
        "_provider",
        "_cluster",
        "line_no",
        "raw",
        "msg",
        "ts",
        "ts_source",
        "node",
        "gpu_pci",
        "gpu_uuid",
        "gpu_serial",
        "job_id",
        "rank",
        "local_rank",
        "family",
        "xid",
        "sxid",
        "nccl_status",
        "category",
        "severity",
        "action",
        "rule_id",
        "keep",
        "_own",
        "_rank",
        "_grp",
        "_long",
        "_garbage",
        "_repeats",
        "_last_ts",
        "_last_raw",
    ]
    lines = c.select(per_line_cols)
    # most events are one line: only the lines of joined groups are aggregated
    grp = pl.col("_grp")
    multi = lines.select((grp == grp.shift(1)) | (grp == grp.shift(-1)))[:, 0].fill_null(False)
    many, one = lines.filter(multi), lines.filter(~multi)
    single = one.select(
        "_grp",
        *TAKE_FIRST_NON_NULL,
        *TAKE_FIRST,
        pl.when(pl.col("ts").is_not_null()).then(pl.col("ts_source")).alias("ts_source"),
        "line_no",
        pl.col("_repeats").alias("line_count"),
        "raw",
        pl.col("msg").alias("message"),
        pl.col("_repeats").alias("repeats"),
        pl.col("_last_ts").alias("last_ts"),
        pl.col("_last_raw").alias("last_raw"),
    )
    # a joined event: the deciding line's fields first, then the first non-null
    joined = (
        many.sort(["_grp", "_rank", "line_no"])
        .group_by("_grp", maintain_order=True)
        .agg(
            [pl.col(x).drop_nulls().first() for x in TAKE_FIRST_NON_NULL]
            + [pl.col(x).first() for x in TAKE_FIRST]
            + [
                pl.col("ts_source").filter(pl.col("ts").is_not_null()).first().alias("ts_source"),
                pl.col("line_no").min().alias("line_no"),
                pl.len().cast(pl.Int32).alias("line_count"),
                pl.lit(1, pl.Int32).alias("repeats"),
                pl.lit(None, UTC_TS).alias("last_ts"),
                pl.lit(None, pl.String).alias("last_raw"),
            ]
        )
        .join(
            many.group_by("_grp", maintain_order=True).agg(
                pl.col("raw").str.join("\n").alias("raw"), pl.col("msg").str.join("\n").alias("message")
            ),
            on="_grp",
            how="left",
            maintain_order="left",
        )
    )
    ev = pl.concat([single, joined.select(single.columns)]).sort("_grp")
    ev = ev.filter((pl.col("category") != "benign") | pl.col("keep"))
    ev = ev.with_columns(
        event_id=pl.format("{}:{}", pl.col("_source"), pl.col("line_no")),
        source=pl.col("_source"),
        provider=pl.col("_provider"),
        cluster=pl.col("_cluster"),
        ts_source=pl.col("ts_source").fill_null("none"),
        domain=pl.col("category").replace_strict(rs.taxonomy.domains, default="unknown"),
        template=_templates(pl.col("message").str.split("\n").list.first()),
    ).drop("keep", "_source", "_provider", "_cluster")
    # per physical line, the joined event's verdict: continuations carry it, a line that opens
    # an event with a cause of its own (a watchdog timeout above a desync report) keeps its own;
    # a one-line event's verdict is its line's own
    cols = ("category", "severity", "action", "family")
    verdict = ev.filter(pl.col("line_count") > 1).select("_grp", *[pl.col(x).alias(f"_e_{x}") for x in cols])
    own = pl.col("_own").fill_null(False)
    lines = (
        lines.join(verdict, on="_grp", how="left", maintain_order="left")
        .with_columns(
            [pl.when(own).then(pl.col(x)).otherwise(pl.coalesce(pl.col(f"_e_{x}"), pl.col(x))).alias(x) for x in cols]
        )
        .drop([f"_e_{x}" for x in cols])
    )
    return ev, lines
