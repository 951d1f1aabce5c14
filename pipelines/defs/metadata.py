"""Materialization metadata: row counts and a small markdown preview of a table."""

import dagster as dg
import polars as pl


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


def table_metadata(df: pl.DataFrame, path, columns: list[str] | None = None, **extra) -> dict:
    return {
        "dagster/row_count": dg.MetadataValue.int(df.height),
        "path": dg.MetadataValue.path(str(path)),
        "preview": dg.MetadataValue.md(preview_md(df, columns)),
        **extra,
    }
