"""Materialization metadata: row counts and a small markdown preview of a table."""

from dataclasses import dataclass

import dagster as dg
import polars as pl

PREVIEW_ROWS = 5


def _cell(v, width: int) -> str:
    s = "" if v is None else str(v)
    s = s.replace("\n", " ").replace("|", "\\|")
    return s if len(s) <= width else s[: width - 1] + "…"


def preview_md(df: pl.DataFrame, columns: list[str] | None = None, rows: int = 5, width: int = 48) -> str:
    cols = [c for c in (columns or df.columns) if c in df.columns]
    if not cols:
        return "(no columns)"
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for rec in df.select(cols).head(rows).iter_rows():
        lines.append("| " + " | ".join(_cell(v, width) for v in rec) + " |")
    if df.height == 0:
        lines.append("| " + " | ".join("" for _ in cols) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Written:
    """One partition file of a table written by a run: where, how many rows, the first rows."""

    partition: str
    path: object
    rows: int
    head: pl.DataFrame

    @classmethod
    def of(cls, partition: str, df: pl.DataFrame, path) -> "Written":
        return cls(partition, path, df.height, df.head(PREVIEW_ROWS))


def batch_metadata(written: list[Written], columns: list[str] | None = None, **extra) -> dict:
    """Metadata of one table over the partitions of a run: row count, path and preview for one
    partition. A range run gives every partition the same metadata, so it holds the per-partition
    row counts and the last partition's preview."""
    last = written[-1]
    if len(written) == 1:
        counts = {"dagster/row_count": dg.MetadataValue.int(last.rows)}
        preview = preview_md(last.head, columns, PREVIEW_ROWS)
    else:
        counts = {
            "rows": dg.MetadataValue.int(sum(w.rows for w in written)),
            "rows_by_partition": dg.MetadataValue.json({w.partition: w.rows for w in written}),
        }
        preview = f"{last.partition}\n\n" + preview_md(last.head, columns, PREVIEW_ROWS)
    return {**counts, "path": dg.MetadataValue.path(str(last.path)), "preview": dg.MetadataValue.md(preview), **extra}
