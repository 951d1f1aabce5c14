"""``faultline classify``: one JSON object per input line (JSON Lines), in input order."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import sys

import polars as pl

from ..classify.ruleset import load_ruleset
from ..schema import CLASSIFY_JSONL
from . import reader
from .parse import ParseResult, SourceContext, parse_file, parse_stream

#: the public contract of ``faultline classify`` (``schema.CLASSIFY_JSONL``)
OUTPUT_FIELDS = CLASSIFY_JSONL.schema.names()


def classify_path(
    path: str, *, kind: str, ref_date: dt.date | None, boots=None, models_dir: str | None = None
) -> ParseResult:
    rs = load_ruleset(models_dir)
    ctx = SourceContext(source=path, kind=kind, ref_date=ref_date, boots=boots, full=True)
    if path == "-":
        data = sys.stdin.buffer.read()
        return parse_stream(maybe_decompress(data), ctx, rs)
    return parse_file(path, ctx, rs)


def maybe_decompress(data: bytes):
    """stdin may carry gzip or zstd too; bound it like files."""
    import tempfile

    if data[:2] == b"\x1f\x8b" or data[:4] == b"\x28\xb5\x2f\xfd":
        tmp = tempfile.NamedTemporaryFile(suffix=".gz" if data[:2] == b"\x1f\x8b" else ".zst", delete=False)
        try:
            tmp.write(data)
            tmp.close()
            stream, _b, _s = reader.open_log(tmp.name)
        finally:  # the open stream keeps the data readable; no temp file is left behind
            os.unlink(tmp.name)
        return stream
    return io.BytesIO(data)


def per_line_records(res: ParseResult, source: str) -> pl.DataFrame:
    df = res.per_line if res.per_line is not None else pl.DataFrame()
    if not df.height:
        return pl.DataFrame(schema={f: pl.String for f in OUTPUT_FIELDS})
    return df.sort("line_no").select(
        source=pl.lit(source),
        line_no="line_no",
        family="family",
        category="category",
        severity="severity",
        action="action",
        xid="xid",
        sxid="sxid",
        node="node",
        gpu_pci="gpu_pci",
        job_id="job_id",
        rank="rank",
        local_rank="local_rank",
        rule_id="rule_id",
        ts=pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"),
        ts_source="ts_source",
    )


def write_jsonl(df: pl.DataFrame, out) -> None:
    for row in df.iter_rows(named=True):
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
