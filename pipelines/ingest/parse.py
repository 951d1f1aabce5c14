"""Parse one log file (or stream) into events, benign counts and quarantine rows.

The hot path is per block of ~32 MB: polars splits the block into lines, a literal
prefilter picks the few lines that can matter, and only those get their prefix parsed,
their timestamp derived and their message classified. Multi-line messages (wrapped NVRM
notices, SXid continuations, tracebacks, the ChildFailedError table) become one event.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

import polars as pl

from ..classify.engine import classify_messages, evidence_rank, mask_template
from ..classify.ruleset import GROUP_NAMES, RuleSet, load_ruleset
from ..schema import EVENTS, QUARANTINE, conform
from . import reader
from .prefix import derive_timestamps, split_prefix

# Job output: lines that continue the message above them (traceback bodies, C++ frames,
# the torchrun failure table).
JOB_CONT_RE = (r"^(?:\[(?:rank|default)\d+\]:)?(?:[ \t]+\S|frame #\d+|Exception raised from|[=-]{10,}"
               r"|Failures:|Root Cause|\[\d+\]:\s*$|\S+ FAILED\s*$)")
EXC_LINE_RE = r"^(?:\[(?:rank|default)\d+\]:)?[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b"
GARBAGE_RE = "[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f\ufffd]"
DMESG_H_RE = r"^\[[A-Z][a-z]{2}\d{1,2} \d\d:\d\d\]"
KERNEL_JOIN_GAP = 3      # physical lines an NVRM/SXid continuation may trail its start by
PREFIX_FORMATS = [       # (format name, prefix field that identifies it), first hit wins
    ("rfc5424", "iso5424"), ("dmesg_iso", "diso"), ("rfc3339_syslog", "iso"), ("bsd_syslog", "bsd"),
    ("kmsg", "kmsg_us"), ("raw_dmesg", "mono"), ("dmesg_T", "ctime"), ("dmesg_H", "hmon"),
    ("dmesg_relative", "rel"), ("slurm", "slurm"), ("fabric_manager", "fm"), ("python_logging", "pylog"),
    ("glog", "glog"),
]


@dataclass
class SourceContext:
    """What the pipeline knows about a file before reading it."""

    source: str                          # stable id (path relative to the landing folder)
    kind: str = "kernel"                 # kernel | job | slurmctld
    ref_date: dt.date | None = None      # partition date: year for year-less stamps
    node: str | None = None
    provider: str | None = None
    cluster: str | None = None
    job_id: str | None = None
    boots: list[dt.datetime] | None = None
    full: bool = False                   # classify every line (CLI), not just prefiltered ones

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
    per_line: pl.DataFrame | None = None     # full mode: one row per physical line

    @property
    def balanced(self) -> bool:
        return self.lines_read == self.event_lines + self.benign + self.quarantined


@dataclass
class _State:
    fmt: str | None = None
    last_ts: object = None
    event_lines: int = 0
    quarantined: int = 0
    events: list = field(default_factory=list)
    quarantine: list = field(default_factory=list)
    per_line: list = field(default_factory=list)


def _frame(data: bytes, skip_first: bool) -> pl.Series:
    if not data:
        return pl.Series("raw", [], pl.String)
    if b"\x1f" in data:   # the splitter's separator byte: split in Python (rare, garbage only)
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
    df = pl.read_csv(io.BytesIO(data), skip_lines=1 if skip_first else 0, raise_if_empty=False, **CSV_OPTS)
    return df["raw"].fill_null("") if df.width else pl.Series("raw", [], pl.String)


def lines_frame(block: reader.Block) -> pl.DataFrame:
    """Physical lines of a block (``line_no``, ``raw``), split by polars' CSV reader."""
    head = block.head[:-1] if block.head.endswith(b"\n") else block.head
    head_s = pl.Series("raw", [head.rstrip(b"\r").decode("utf-8", "replace")], pl.String)
    body = _frame(block.body, skip_first=True)
    if block.drop_last and len(body):
        body = body.head(len(body) - 1)
    raw = pl.concat([head_s, body.rename("raw")]) if len(body) else head_s
    return pl.DataFrame({"raw": raw}).with_row_index("line_no", offset=block.first_line_no).with_columns(
        pl.col("line_no").cast(pl.Int64))


CSV_OPTS = dict(has_header=False, separator="\x1f", quote_char=None, new_columns=["raw"],
                encoding="utf8-lossy", infer_schema=False, comment_prefix=None)
CANDIDATE_BATCH = 50_000   # candidate lines gathered before they are parsed together


def parse_stream(stream: BinaryIO, ctx: SourceContext, rs: RuleSet | None = None,
                 stats: reader.ReadStats | None = None) -> ParseResult:
    """Parse any stream (plain, decompressed, stdin) block by block in bounded memory."""
    rs = rs or load_ruleset()
    stats = stats or reader.ReadStats()
    st = _State()
    lines_read = 0
    pending: list[pl.DataFrame] = []
    n_pending = 0
    for block in reader.iter_blocks(stream, stats):
        block.first_line_no = lines_read + 1
        lines = lines_frame(block)
        lines_read += lines.height
        if st.fmt is None:
            st.fmt = _detect_format(lines.head(2000)["raw"])
        dirty = (not block.isascii()) or block.has(b"\x00")
        sel = _flags(lines.lazy(), dirty, block)
        if not ctx.full:
            sel = sel.filter(_candidate_expr(ctx, rs, st.fmt))
        cand = sel.collect()
        if cand.height:
            # fresh string buffers: a filtered string view would pin the whole block in memory
            if not ctx.full:
                cand = cand.with_columns(raw=pl.Series("raw", cand["raw"].to_list(), pl.String))
            pending.append(cand)
            n_pending += cand.height
        if n_pending >= CANDIDATE_BATCH or (ctx.full and pending):
            _collect(pl.concat(pending), ctx, rs, st)
            pending, n_pending = [], 0
    if pending:
        _collect(pl.concat(pending), ctx, rs, st)
    err = getattr(getattr(stream, "raw", None), "error", None)
    return _result(st, ctx, lines_read, stats.bytes_read, err)


def parse_file(path: str | os.PathLike, ctx: SourceContext, rs: RuleSet | None = None) -> ParseResult:
    """Parse one file (plain, .gz or .zst; bounded decompression)."""
    stream, _bounded, _size = reader.open_log(path)
    with stream:
        res = parse_stream(stream, ctx, rs)
    if _bounded is not None and _bounded.error and not res.message:
        res.message = _bounded.error
    return res


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
    p = pl.DataFrame({"raw": raw}).select(p=split_prefix(pl.col("raw"))).unnest("p")
    counts = {name: p[col].is_not_null().sum() for name, col in PREFIX_FORMATS}
    best = max(counts.items(), key=lambda kv: kv[1])
    return best[0] if best[1] else "unknown"


def _result(st: _State, ctx: SourceContext, lines_read: int, bytes_read: int, err: str | None) -> ParseResult:
    qrows = []
    if err:
        qrows.append(pl.DataFrame({"source": [ctx.source], "line_no": [lines_read + 1], "reason": ["unreadable_rest"],
                                   "detail": [err], "preview": [""]}, schema=QUARANTINE))
    events = pl.concat(st.events) if st.events else pl.DataFrame(schema=EVENTS)
    quarantine = pl.concat([*st.quarantine, *qrows]) if (st.quarantine or qrows) else pl.DataFrame(schema=QUARANTINE)
    per_line = pl.concat(st.per_line) if st.per_line else None
    res = ParseResult(conform(events.drop("_grp", strict=False).sort("line_no"), EVENTS, name="events"),
                      conform(quarantine, QUARANTINE, name="quarantine"),
                      lines_read, st.event_lines, 0, st.quarantined, bytes_read, st.fmt, err, per_line)
    res.benign = lines_read - st.event_lines - st.quarantined
    return res


def file_checksum(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _collect(cand: pl.DataFrame, ctx: SourceContext, rs: RuleSet, st: _State) -> None:
    """Turn the candidate lines of a block into events and quarantine rows (kept in ``st``)."""
    if not cand.height:
        return
    ev, per_line = _events_from_candidates(cand, ctx, rs, st)
    # quarantine: overlong lines always; garbage lines unless a specific rule claimed them
    bad = per_line.filter(pl.col("_long") | (pl.col("_garbage") & pl.col("category").is_in(["unknown", "benign"])))
    if bad.height:
        st.quarantine.append(bad.select(
            source=pl.lit(ctx.source), line_no=pl.col("line_no"),
            reason=pl.when(pl.col("_long")).then(pl.lit("line_too_long")).otherwise(pl.lit("binary_or_invalid_utf8")),
            detail=pl.when(pl.col("_long"))
            .then(pl.lit(f"line longer than {reader.MAX_LINE_BYTES} bytes; only a preview is kept"))
            .otherwise(pl.lit("line holds NUL/control bytes or invalid UTF-8")),
            preview=pl.col("raw").str.slice(0, reader.PREVIEW_BYTES).str.replace_all(GARBAGE_RE, "\ufffd"),
        ))
        st.quarantined += bad.height
        per_line = per_line.with_columns(_q=pl.col("line_no").is_in(bad["line_no"].implode()))
        ev = ev.join(bad.select(pl.col("line_no").alias("_bad")), left_on="line_no", right_on="_bad", how="anti")
        counts = per_line.filter(~pl.col("_q")).group_by("_grp").len("_n")
        ev = ev.join(counts, on="_grp", how="inner").with_columns(line_count=pl.col("_n").cast(pl.Int32)).drop("_n")
    else:
        per_line = per_line.with_columns(_q=pl.lit(False))
    st.event_lines += int(ev["line_count"].sum()) if ev.height else 0
    if ev.height:
        st.events.append(ev.drop("_grp"))
    if ctx.full:
        st.per_line.append(per_line.with_columns(
            category=pl.when(pl.col("_q")).then(pl.lit("quarantined")).otherwise(pl.col("category"))))


def _events_from_candidates(c: pl.DataFrame, ctx: SourceContext, rs: RuleSet, st: _State):
    c = c.with_columns(p=split_prefix(pl.col("raw"))).unnest("p")
    c = derive_timestamps(c, ctx.ref_date or dt.datetime.now(dt.timezone.utc).date(), ctx.boots)
    msg = pl.coalesce(pl.col("msg"), pl.col("raw"))
    cls = classify_messages(c.select(msg.alias("m"))["m"], rs)
    c = pl.concat([c.drop([g for g in GROUP_NAMES if g in c.columns]), cls], how="horizontal")
    c = c.with_columns(msg=msg)

    # forward-fill times from the line before (dmesg -H relative lines, job output without
    # stamps); carried across blocks
    has_ts = pl.col("ts").is_not_null()
    c = c.with_columns(
        ts_source=pl.when(has_ts).then(pl.col("ts_source")).otherwise(pl.lit("inherited")),
        ts=pl.col("ts").fill_null(strategy="forward"),
    )
    if st.last_ts is not None:
        c = c.with_columns(ts=pl.col("ts").fill_null(pl.lit(st.last_ts, dtype=pl.Datetime("us", "UTC"))))
    c = c.with_columns(ts_source=pl.when(pl.col("ts").is_null()).then(pl.lit("none")).otherwise(pl.col("ts_source")))
    if c.height and c["ts"].drop_nulls().len():
        st.last_ts = c["ts"].drop_nulls()[-1]

    gap = 1 if ctx.kind == "job" else KERNEL_JOIN_GAP
    prev_ln = pl.col("line_no").shift(1)
    job_cont = pl.col("raw").str.contains(JOB_CONT_RE) if ctx.kind == "job" else pl.lit(False)
    c = c.with_columns(_jc=job_cont)
    exc_after = (pl.col("_jc").shift(1).fill_null(False) & pl.col("raw").str.contains(EXC_LINE_RE))
    # a rule continuation joins the line above only within its own family (an OOM report
    # line right after an SXid block is a new event)
    same_family = pl.col("family") == pl.col("family").shift(1)
    joined = (((pl.col("continues") & same_family) | pl.col("_jc") | exc_after)
              & ((pl.col("line_no") - prev_ln) <= gap)).fill_null(False)
    c = c.with_columns(_grp=(~joined).cast(pl.Int64).cum_sum())
    c = c.with_columns(_rank=evidence_rank(pl.col("category"), pl.col("rule_idx")))

    node_from_line = pl.coalesce(pl.col("node"), pl.col("pdsh"), pl.col("host_iso"), pl.col("host_bsd"), pl.col("host5424"))
    if ctx.kind == "kernel" and ctx.node:
        node = pl.coalesce(pl.col("pdsh"), pl.lit(ctx.node))
    else:
        node = pl.coalesce(node_from_line, pl.lit(ctx.node, pl.String))
    c = c.with_columns(
        node=node,
        rank=pl.coalesce(pl.col("rank"), pl.col("rank_label").cast(pl.Int32, strict=False),
                         pl.col("srun_label").cast(pl.Int32, strict=False)),
        job_id=pl.coalesce(pl.lit(ctx.job_id, pl.String), pl.col("job_id")),
        family=pl.coalesce(pl.col("family"), pl.lit(ctx.default_family)),
    )
    per_line_cols = ["line_no", "raw", "msg", "ts", "ts_source", "node", "gpu_pci", "gpu_uuid", "gpu_serial",
                     "job_id", "rank", "family", "xid", "sxid", "nccl_status", "category", "severity",
                     "action", "rule_id", "keep", "_rank", "_grp", "_long", "_garbage"]
    lines = c.select(per_line_cols)
    # one event per group: the deciding line's fields first, then the first non-null
    ordered = lines.sort(["_grp", "_rank", "line_no"])
    take_first_non_null = ["ts", "node", "gpu_pci", "gpu_uuid", "gpu_serial", "job_id", "rank", "xid", "sxid", "nccl_status"]
    ev = ordered.group_by("_grp", maintain_order=True).agg(
        [pl.col(x).drop_nulls().first() for x in take_first_non_null]
        + [pl.col(x).first() for x in ("family", "category", "severity", "action", "rule_id", "keep")]
        + [pl.col("ts_source").filter(pl.col("ts").is_not_null()).first().alias("ts_source"),
           pl.col("line_no").min().alias("line_no"), pl.len().cast(pl.Int32).alias("line_count")]
    )
    texts = lines.sort("line_no").group_by("_grp", maintain_order=True).agg(
        pl.col("raw").str.join("\n").alias("raw"), pl.col("msg").str.join("\n").alias("message"))
    ev = ev.join(texts, on="_grp", how="left")
    ev = ev.filter((pl.col("category") != "benign") | pl.col("keep"))
    ev = ev.with_columns(
        event_id=pl.format("{}:{}", pl.lit(ctx.source), pl.col("line_no")),
        source=pl.lit(ctx.source), provider=pl.lit(ctx.provider, pl.String), cluster=pl.lit(ctx.cluster, pl.String),
        ts_source=pl.col("ts_source").fill_null("none"),
        domain=pl.col("category").replace_strict(rs.taxonomy.domains, default="unknown"),
        template=mask_template(pl.col("message").str.split("\n").list.first()),
    ).drop("keep")
    # per physical line, the joined event's verdict (continuations carry it too)
    verdict = ev.select("_grp", *[pl.col(x).alias(f"_e_{x}") for x in ("category", "severity", "action", "family")])
    lines = lines.join(verdict, on="_grp", how="left").with_columns(
        [pl.coalesce(pl.col(f"_e_{x}"), pl.col(x)).alias(x) for x in ("category", "severity", "action", "family")]
    ).drop([f"_e_{x}" for x in ("category", "severity", "action", "family")])
    return ev.sort("line_no"), lines.sort("line_no")
