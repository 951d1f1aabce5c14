"""SQL text helpers shared by the view file and compaction: literals, identifiers, day scans."""

from __future__ import annotations

import duckdb

from ..schema import PARTITION

_DUCK_TYPES = {"provider": "VARCHAR", "cluster": "VARCHAR", "date": "DATE"}


def quote_sql(s: str) -> str:
    """``s`` as a SQL string literal."""
    return "'" + s.replace("'", "''") + "'"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def day_scan_sql(files: str, uniform: bool) -> str:
    """``read_parquet`` over day files (``files``: a quoted glob or a SQL list of paths),
    with the partition columns from the hive path as VARCHAR, VARCHAR and DATE."""
    hive = "{" + ", ".join(f"{quote_sql(c)}: {_DUCK_TYPES[c]}" for c in PARTITION) + "}"
    union = "" if uniform else "union_by_name = true, "
    return f"read_parquet({files}, hive_partitioning = true, {union}hive_types = {hive})"


def files_uniform(con: duckdb.DuckDBPyConnection, files: str) -> bool:
    """Whether the Parquet files ``files`` (a quoted glob or a SQL list) all have the same
    columns with the same types."""
    n_files, n_cols, odd = con.execute(f"""
        WITH s AS (SELECT file_name, name, type FROM parquet_schema({files})),
             c AS (SELECT name, type, count(DISTINCT file_name) AS n FROM s GROUP BY ALL)
        SELECT (SELECT count(DISTINCT file_name) FROM s), (SELECT count(*) FROM c),
               (SELECT count(*) FROM c WHERE n <> (SELECT count(DISTINCT file_name) FROM s))""").fetchone()
    return n_files > 0 and n_cols > 0 and odd == 0
