"""Job output's progress and checkpoint lines -> ``job_markers`` rows: the marker rules'
verdict (``classify.markers``) and when each line was printed."""

from __future__ import annotations

import polars as pl

from ..classify.markers import MARKER_COLUMNS, marker_fields, stamp_in_message
from ..classify.ruleset import RuleSet
from .prefix import derive_timestamps, split_prefix

#: the channel's number of NCCL's ring and channel lines (rank lines of models/rules/nccl.yaml)
CHANNEL_RE = r"NCCL INFO (?:Ring|Channel) \d+(?:/\d+)? :"
#: what ``marker_rows`` returns per marker line (besides the caller's ``_file``)
ROW_COLUMNS = {
    "line_no": pl.Int64,
    "ts": pl.Datetime("us", "UTC"),
    "ts_source": pl.String,
    **MARKER_COLUMNS,
}


def marker_rows(lines: pl.DataFrame, rs: RuleSet) -> pl.DataFrame:
    """The marker lines among ``lines`` (``_file``, ``line_no``, ``raw``, ``_ref_date``), with their
    time: the prefix stamp, else a stamp in the message, else the time of the line before it in
    the file (``inherited``). Launcher labels and job loggers' prefixes are read as the events' are."""
    if lines.is_empty():
        return pl.DataFrame(schema={"_file": pl.Int32, **ROW_COLUMNS})
    # NCCL prints a ring or channel line per channel: those differing only in the channel's
    # number make one rank claim, so only the first of them is read
    chan = pl.col("raw").str.replace(CHANNEL_RE, "NCCL INFO :")
    lines = lines.sort("_file", "line_no")
    lines = lines.filter(~pl.col("raw").str.contains(CHANNEL_RE) | chan.is_first_distinct().over("_file"))
    # a zero-filled run (left by a crash) glued in front of a line does not hide its stamp
    raw = pl.col("raw").str.strip_chars_start("\x00")
    c = lines.with_columns(p=split_prefix(raw, job=True)).unnest("p")
    c = derive_timestamps(c)
    msg = pl.coalesce(pl.col("msg"), pl.col("raw"))
    own = stamp_in_message(msg)
    c = c.with_columns(
        ts_source=pl.when(pl.col("ts").is_not_null())
        .then(pl.col("ts_source"))
        .when(own.is_not_null())
        .then(pl.lit("in_message"))
        .otherwise(pl.lit("inherited")),
        ts=pl.coalesce(pl.col("ts"), own),
    )
    c = c.with_columns(ts=pl.col("ts").fill_null(strategy="forward").over("_file"))
    c = c.with_columns(ts_source=pl.when(pl.col("ts").is_null()).then(pl.lit("none")).otherwise(pl.col("ts_source")))
    fields = marker_fields(c.select(msg.alias("m"))["m"], rs)
    # a line whose message says nothing the rules know may be a tqdm bar the job split read as
    # a label (another line glued behind it): its rules then read the line as the kernel split does
    miss = fields["marker"].is_null()
    if miss.any():
        plain = c.filter(miss).select(m=pl.coalesce(split_prefix(raw).struct.field("msg"), pl.col("raw")))["m"]
        again = marker_fields(plain, rs)
        idx = pl.Series(range(c.height)).filter(miss)
        fields = fields.with_row_index("_i").update(again.with_columns(_i=idx.cast(pl.UInt32)), on="_i").drop("_i")
    out = pl.concat([c.select("_file", "line_no", "ts", "ts_source"), fields], how="horizontal")
    out = out.filter(pl.col("marker").is_not_null())
    # a rank line repeats its claim once per channel: the first line of each claim stays
    rank = pl.col("marker") == "rank"
    claim = ["_file", "marker_rule", "host", "pid", "rank", "nranks", "cuda_dev"]
    out = pl.concat([out.filter(~rank), out.filter(rank).unique(claim, keep="first", maintain_order=True)])
    return out.sort("_file", "line_no").select(
        pl.col("_file").cast(pl.Int32), *[pl.col(k).cast(t) for k, t in ROW_COLUMNS.items()]
    )
