"""Parse ``sacct -P`` accounting output into jobs, steps and quarantined rows, vectorized with
polars; only node lists call Python, once per distinct list. Columns by header name, every line
accounted for; conventions (times, states, node lists): docs/landing.md, "slurm/sacct.txt"."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from ..schema import QUARANTINE, SACCT_JOBS, SACCT_STEPS
from .hostlist import count_hostlist, expand_hostlist

__all__ = [
    "KNOWN_COLUMNS",
    "MAX_TOTAL_NODES",
    "SacctResult",
    "parse_sacct",
    "parse_slurm_stamp",
    "parse_elapsed",
]

#: Header names (lower-cased) this parser reads, mapped to internal field names.
KNOWN_COLUMNS = {
    "jobid": "jobid",
    "jobname": "jobname",
    "user": "user",
    "partition": "partition",
    "nodelist": "nodelist",
    "nnodes": "nnodes",
    "alloctres": "alloctres",
    "submit": "submit",
    "start": "start",
    "end": "end",
    "elapsed": "elapsed",
    "state": "state",
    "exitcode": "exitcode",
    "reason": "reason",
}

#: Budget of expanded host names over the whole jobs table of one file; job rows past it
#: are quarantined (protects memory against hostile node lists repeated on many rows).
MAX_TOTAL_NODES = 5_000_000

RAW_LIMIT = 512

_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S")
_TIME_NULLS = ["Unknown", "None", "N/A", "(null)"]
_ELAPSED_NULLS = ["Unknown", "INVALID", "N/A"]
_NODELIST_EMPTY = ["None assigned", "(null)", "None", "N/A"]

_JOBID_RE = (
    r"^(?P<base>\d{1,18})"
    r"(?:_(?P<task>\d{1,18}|\[[0-9,%\-]*\]))?"
    r"(?:\+(?P<het>\d{1,9}))?"
    r"(?:\.(?P<step>[A-Za-z0-9_+\-]{1,64}))?$"
)
_ELAPSED_RE = r"^(?:(?P<d>\d{1,6})-)?(?:(?P<h>\d{1,3}):)?(?P<m>\d{1,2}):(?P<s>\d{1,2})(?:\.\d{1,6})?$"
_EXIT_RE = r"^(?P<code>\d{1,9}):(?P<sig>\d{1,9})$"
_HEADER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_:]*")


@dataclass
class SacctResult:
    """What ``parse_sacct`` returns."""

    jobs: pl.DataFrame
    steps: pl.DataFrame
    quarantine: pl.DataFrame
    lines_read: int
    accounted: dict[str, int]
    source: str = "sacct.txt"
    columns: list[str] = field(default_factory=list)  # header names as printed
    error: str | None = None  # set when the whole file was rejected (no usable header)

    @property
    def balanced(self) -> bool:
        return sum(self.accounted.values()) == self.lines_read


# --------------------------------------------------------------------------- scalar helpers


def _zone(tz: str):
    if tz in ("UTC", "utc", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {tz!r}") from exc


def parse_slurm_stamp(s: str | None, tz: str = "UTC") -> datetime | None:
    """``2026-11-24T03:14:07`` (local time in ``tz``) -> aware UTC datetime. Empty and the null
    words (``Unknown``, ``None``, ``N/A``, ``(null)``) give ``None``; anything else that is not a
    Slurm timestamp raises ``ValueError``."""
    if s is None:
        return None
    s = s.strip()
    if not s or s in _TIME_NULLS:
        return None
    for fmt in _TIME_FORMATS:
        try:
            naive = datetime.strptime(s, fmt)
        except ValueError:
            continue
        return naive.replace(tzinfo=_zone(tz)).astimezone(timezone.utc)
    raise ValueError(f"not a Slurm timestamp: {s[:80]!r}")


def parse_elapsed(s: str | None) -> int | None:
    """``[D-][HH:]MM:SS[.fff]`` -> whole seconds; null-ish values give ``None``; else
    ``ValueError``."""
    if s is None:
        return None
    s = s.strip()
    if not s or s in _ELAPSED_NULLS:
        return None
    m = re.match(_ELAPSED_RE, s)
    if m is None:
        raise ValueError(f"not a Slurm elapsed time: {s[:80]!r}")
    d, h, mi, se = (int(m.group(k) or 0) for k in ("d", "h", "m", "s"))
    return d * 86400 + h * 3600 + mi * 60 + se


# --------------------------------------------------------------------------- node lists


def _count_or_error(nodelist: str) -> tuple[int | None, str | None]:
    try:
        return count_hostlist(nodelist), None
    except ValueError as exc:
        return None, str(exc)[:200]


def _nodelist_table(values: list[str]) -> pl.DataFrame:
    counts, errors = [], []
    for v in values:
        c, e = _count_or_error(v)
        counts.append(c)
        errors.append(e)
    return pl.DataFrame(
        {"nodelist": values, "nl_count": counts, "nl_error": errors},
        schema={"nodelist": pl.String, "nl_count": pl.Int64, "nl_error": pl.String},
    )


# --------------------------------------------------------------------------- polars helpers


def _null_if_empty(e: pl.Expr) -> pl.Expr:
    return pl.when(e.is_null() | (e == "")).then(None).otherwise(e)


def _stamp(name: str, tz: str) -> tuple[pl.Expr, pl.Expr]:
    """(parsed UTC datetime, bad flag) for a raw time column."""
    raw = pl.col(name)
    parsed = pl.coalesce([raw.str.strptime(pl.Datetime("us"), fmt, strict=False) for fmt in _TIME_FORMATS])
    bad = raw.is_not_null() & ~raw.is_in(_TIME_NULLS) & parsed.is_null()
    if tz in ("UTC", "utc", "Z"):
        value = parsed.dt.replace_time_zone("UTC")
    else:
        value = parsed.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null").dt.convert_time_zone("UTC")
    return value, bad


def _empty(schema: pl.Schema) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def _quarantine_frame(df: pl.DataFrame, reason: pl.Expr, source: str) -> pl.DataFrame:
    return df.select(
        pl.lit(source, pl.String).alias("source"),
        pl.col("line_no").cast(pl.Int64),
        pl.lit("sacct_bad_row", pl.String).alias("reason"),
        reason.cast(pl.String).alias("detail"),
        pl.col("raw").str.slice(0, RAW_LIMIT).alias("preview"),
    )


# --------------------------------------------------------------------------- main entry


def parse_sacct(data: bytes | str, *, source: str = "sacct.txt", tz: str = "UTC") -> SacctResult:
    """Parse ``sacct -P`` output into jobs, steps and quarantined rows. Never raises on bad
    data (only on a bad ``tz`` argument)."""
    _zone(tz)  # validate the argument up front: a caller error, not a data error
    text = data.decode("utf-8", errors="replace") if isinstance(data, (bytes, bytearray, memoryview)) else str(data)
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it does not start a new one
    lines_read = len(lines)

    df = pl.DataFrame(
        {"line_no": pl.Series(range(1, lines_read + 1), dtype=pl.Int64), "raw": pl.Series(lines, dtype=pl.String)}
    ).with_columns(pl.col("raw").str.strip_suffix("\r"))
    df = df.with_columns(blank=pl.col("raw").str.strip_chars().str.len_chars() == 0)
    n_blank = int(df["blank"].sum())
    content = df.filter(~pl.col("blank")).drop("blank")

    accounted = {"header": 0, "jobs": 0, "steps": 0, "quarantined": 0, "blank": n_blank}

    def _result(jobs, steps, quar, cols=None, error=None) -> SacctResult:
        accounted["jobs"] = jobs.height
        accounted["steps"] = steps.height
        accounted["quarantined"] = quar.height
        return SacctResult(jobs, steps, quar, lines_read, dict(accounted), source, cols or [], error)

    if content.height == 0:
        err = "empty file" if lines_read == 0 else "no content (only blank lines)"
        return _result(_empty(SACCT_JOBS), _empty(SACCT_STEPS), _empty(QUARANTINE), error=err)

    # ---- header
    header_line = int(content["line_no"][0])
    header_raw = content["raw"][0]
    fields = header_raw.split("|")
    trailing_pipe = len(fields) > 1 and fields[-1].strip() == ""
    if trailing_pipe:
        fields = fields[:-1]
    names = [f.strip() for f in fields]
    lower = [n.lower() for n in names]
    header_ok = all(_HEADER_NAME.fullmatch(n) for n in names) and ("jobid" in lower or "jobidraw" in lower)
    if not header_ok:
        error = (
            f"missing or garbled sacct header: line {header_line} does not name the columns "
            "('|'-separated names including JobID, as printed by `sacct -P --format=...`)"
        )
        reason = (
            pl.when(pl.col("line_no") == header_line)
            .then(pl.lit(error))
            .otherwise(pl.lit(f"no usable sacct header in file (see line {header_line})"))
        )
        quar = _quarantine_frame(content, reason, source)
        return _result(_empty(SACCT_JOBS), _empty(SACCT_STEPS), quar, names, error)

    col_index: dict[str, int] = {}
    for i, n in enumerate(lower):
        key = KNOWN_COLUMNS.get(n)
        if key is not None and key not in col_index:
            col_index[key] = i
    if "jobid" not in col_index:
        col_index["jobid"] = lower.index("jobidraw")
    n_fields = len(names)

    header_key = header_raw.strip()
    is_header = pl.col("raw").str.strip_chars() == header_key
    accounted["header"] = int(content.select(is_header.sum()).item())
    rows = content.filter(~is_header)

    # ---- split fields
    body = pl.col("raw")
    if trailing_pipe:
        body = body.str.strip_suffix("|")
    rows = rows.with_columns(
        n_fields=body.str.count_matches("|", literal=True).cast(pl.Int64) + 1,
        parts=body.str.split("|"),
    )
    rows = rows.with_columns(
        [
            _null_if_empty(pl.col("parts").list.get(col_index[k], null_on_oob=True).str.strip_chars()).alias(f"f_{k}")
            if k in col_index
            else pl.lit(None, pl.String).alias(f"f_{k}")
            for k in KNOWN_COLUMNS.values()
        ]
    ).drop("parts")
    good_count = pl.col("n_fields") == n_fields

    # ---- job id
    rows = rows.with_columns(jid=pl.col("f_jobid").str.extract_groups(_JOBID_RE)).unnest("jid")
    bad_jobid = pl.col("base").is_null()

    # ---- times, elapsed, numbers
    submit, bad_submit = _stamp("f_submit", tz)
    start, bad_start = _stamp("f_start", tz)
    end, bad_end = _stamp("f_end", tz)
    el = pl.col("f_elapsed").str.extract_groups(_ELAPSED_RE)
    elapsed = (
        el.struct.field("d").cast(pl.Int64, strict=False).fill_null(0) * 86400
        + el.struct.field("h").cast(pl.Int64, strict=False).fill_null(0) * 3600
        + el.struct.field("m").cast(pl.Int64, strict=False) * 60
        + el.struct.field("s").cast(pl.Int64, strict=False)
    )
    ex = pl.col("f_exitcode").str.extract_groups(_EXIT_RE)
    rows = rows.with_columns(
        submit=submit,
        start=start,
        end=end,
        bad_submit=bad_submit,
        bad_start=bad_start,
        bad_end=bad_end,
        elapsed_s=elapsed,
        nnodes=pl.col("f_nnodes").cast(pl.Int64, strict=False),
        exit_code=ex.struct.field("code").cast(pl.Int64, strict=False),
        signal=ex.struct.field("sig").cast(pl.Int64, strict=False),
    )
    bad_elapsed = (
        pl.col("f_elapsed").is_not_null() & ~pl.col("f_elapsed").is_in(_ELAPSED_NULLS) & pl.col("elapsed_s").is_null()
    )
    bad_nnodes = pl.col("f_nnodes").is_not_null() & pl.col("nnodes").is_null()
    bad_exit = pl.col("f_exitcode").is_not_null() & (pl.col("exit_code").is_null() | pl.col("signal").is_null())

    # ---- node lists: validate once per distinct value
    nl_real = pl.col("f_nodelist").is_not_null() & ~pl.col("f_nodelist").is_in(_NODELIST_EMPTY)
    distinct = rows.filter(good_count & nl_real).get_column("f_nodelist").unique(maintain_order=True).to_list()
    nl = _nodelist_table(distinct).rename({"nodelist": "f_nodelist"})
    rows = rows.join(nl, on="f_nodelist", how="left").sort("line_no")
    bad_nodelist = nl_real & pl.col("nl_error").is_not_null()

    reason = pl.coalesce(
        pl.when(~good_count).then(
            pl.format("expected {} '|'-separated fields, got {}", pl.lit(n_fields), pl.col("n_fields"))
        ),
        pl.when(pl.col("f_jobid").is_null()).then(pl.lit("empty JobID")),
        pl.when(bad_jobid).then(pl.format("bad JobID '{}'", pl.col("f_jobid").str.slice(0, 40))),
        pl.when(pl.col("bad_submit")).then(pl.format("bad Submit time '{}'", pl.col("f_submit").str.slice(0, 40))),
        pl.when(pl.col("bad_start")).then(pl.format("bad Start time '{}'", pl.col("f_start").str.slice(0, 40))),
        pl.when(pl.col("bad_end")).then(pl.format("bad End time '{}'", pl.col("f_end").str.slice(0, 40))),
        pl.when(bad_elapsed).then(pl.format("bad Elapsed '{}'", pl.col("f_elapsed").str.slice(0, 40))),
        pl.when(bad_nnodes).then(pl.format("bad NNodes '{}'", pl.col("f_nnodes").str.slice(0, 40))),
        pl.when(bad_exit).then(pl.format("bad ExitCode '{}'", pl.col("f_exitcode").str.slice(0, 40))),
        pl.when(bad_nodelist).then(pl.format("bad NodeList: {}", pl.col("nl_error"))),
    )
    is_step = pl.col("step").is_not_null()
    rows = rows.with_columns(qreason=reason)
    # expansion budget over the jobs table, in file order
    budget_use = (
        pl.when(pl.col("qreason").is_null() & ~is_step & nl_real)
        .then(pl.col("nl_count").fill_null(0))
        .otherwise(0)
        .cum_sum()
    )
    rows = rows.with_columns(
        qreason=pl.coalesce(
            pl.col("qreason"),
            pl.when(~is_step & nl_real & (budget_use > MAX_TOTAL_NODES)).then(
                pl.lit(f"node list expansion budget exceeded (over {MAX_TOTAL_NODES:,} host names in this file)")
            ),
        )
    )

    quar = _quarantine_frame(rows.filter(pl.col("qreason").is_not_null()), pl.col("qreason"), source)
    ok = rows.filter(pl.col("qreason").is_null())

    state_word = pl.col("f_state").str.extract(r"^([A-Za-z_]+)").str.to_uppercase()
    state = pl.coalesce(state_word, pl.col("f_state").str.strip_suffix("+"))

    # ---- steps
    steps = ok.filter(is_step).select(
        job_id=pl.col("f_jobid").str.replace(r"\.[^.]*$", ""),
        step=pl.col("step"),
        state=state,
        exit_code=pl.col("exit_code"),
        signal=pl.col("signal"),
        start=pl.col("start"),
        end=pl.col("end"),
        nodelist=pl.col("f_nodelist"),
        source=pl.lit(source),
        line_no=pl.col("line_no"),
    )
    steps = steps.select([pl.col(c).cast(t) for c, t in SACCT_STEPS.items()])

    # ---- jobs
    jobs = ok.filter(~is_step)
    job_lists = jobs.filter(nl_real).get_column("f_nodelist").unique(maintain_order=True).to_list()
    expanded = pl.DataFrame(
        {
            "f_nodelist": job_lists,
            "nodes": [expand_hostlist(v) for v in job_lists],  # once per distinct list
        },
        schema={"f_nodelist": pl.String, "nodes": pl.List(pl.String)},
    )
    jobs = jobs.join(expanded, on="f_nodelist", how="left").sort("line_no")
    nodes = (
        pl.when(pl.col("f_nodelist").is_in(_NODELIST_EMPTY))
        .then(pl.lit([], pl.List(pl.String)))
        .otherwise(pl.col("nodes"))
    )
    gpus = pl.coalesce(
        pl.col("f_alloctres").str.extract(r"(?:^|,)gres/gpu=(\d{1,9})(?:,|$)"),
        pl.col("f_alloctres").str.extract(r"(?:^|,)gres/gpu:[^=,]+=(\d{1,9})(?:,|$)"),
    ).cast(pl.Int64, strict=False)
    n_nodes = pl.col("nnodes")
    if "nnodes" not in col_index:
        n_nodes = pl.col("nodes").list.len().cast(pl.Int64)
    jobs = jobs.with_columns(nodes=nodes).select(
        job_id=pl.col("f_jobid"),
        array_job_id=pl.when(pl.col("task").is_not_null()).then(pl.col("base")),
        array_task_id=pl.col("task").cast(pl.Int64, strict=False),
        het_job_id=pl.when(pl.col("het").is_not_null()).then(pl.col("base")),
        het_job_offset=pl.col("het").cast(pl.Int64, strict=False),
        job_name=pl.col("f_jobname"),
        user=pl.col("f_user"),
        partition=pl.col("f_partition"),
        nodelist=pl.col("f_nodelist"),
        nodes=pl.col("nodes"),
        n_nodes=n_nodes,
        gpus=gpus,
        submit=pl.col("submit"),
        start=pl.col("start"),
        end=pl.col("end"),
        elapsed_s=pl.col("elapsed_s"),
        state=state,
        cancelled_by=pl.col("f_state").str.extract(r"(?i)^CANCELLED\s+by\s+(\S+)"),
        exit_code=pl.col("exit_code"),
        signal=pl.col("signal"),
        reason=pl.when(pl.col("f_reason") == "None").then(None).otherwise(pl.col("f_reason")),
        source=pl.lit(source),
        line_no=pl.col("line_no"),
    )
    jobs = jobs.select([pl.col(c).cast(t) for c, t in SACCT_JOBS.items()])
    quar = quar.select([pl.col(c).cast(t) for c, t in QUARANTINE.items()])
    return _result(jobs, steps, quar, names)
