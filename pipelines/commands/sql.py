"""``faultline sql``: ad-hoc read-only SQL and the named queries, as a table, CSV, JSON or Parquet."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ._options import LOCATION, check_out, mkdir_option

FORMATS = ("table", "csv", "json", "parquet")
TABLE_ROWS = 100

warehouse_option = click.option(
    "--warehouse",
    type=LOCATION,
    envvar="FAULTLINE_WAREHOUSE",
    default="warehouse",
    show_default=True,
    help="Warehouse folder (holds faultline.duckdb), or its s3://... URL (the view file is "
    "then $FAULTLINE_DUCKDB or a per-URL file in ~/.cache/faultline). Env: FAULTLINE_WAREHOUSE.",
)


def open_warehouse(warehouse: Path):
    """A hardened read-only connection, or a ClickException saying how to get a warehouse."""
    from ..lake.queries import connect

    try:
        return connect(warehouse)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from exc


def _params(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--param")
        if key.strip() in out:
            raise click.BadParameter(f"{key.strip()!r} given twice", param_hint="--param")
        out[key.strip()] = value
    return out


def _flat(df):
    """CSV cannot hold lists or structs: write those columns as JSON text."""
    import polars as pl

    nested = [c for c, t in df.schema.items() if isinstance(t, (pl.List, pl.Array, pl.Struct))]
    if not nested:
        return df
    return df.with_columns(
        pl.Series(c, [None if v is None else json.dumps(v, default=str) for v in df[c].to_list()], dtype=pl.String)
        for c in nested
    )


def table_width(wide: bool) -> int:
    """Characters a table may take: the terminal's width (``COLUMNS`` first, 200 when the output
    is not a terminal), or no limit with ``--wide``."""
    import shutil

    return 65_535 if wide else shutil.get_terminal_size((200, 24)).columns  # polars: at most a u16


def _table(df, rows: int, wide: bool = False) -> str:
    import polars as pl

    from ..report.sanitize import terminal

    shown = df.head(rows) if rows >= 0 else df
    width = table_width(wide)
    # log text can carry escape sequences: never let them reach the terminal
    strings = [c for c, t in shown.schema.items() if t == pl.String]
    if strings and shown.height:
        shown = shown.with_columns(pl.col(c).map_elements(terminal, return_dtype=pl.String) for c in strings)
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        fmt_str_lengths=65_535 if wide else 80,
        tbl_width_chars=width,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=False,
    ):
        text = str(shown)
    more = df.height - shown.height
    return text + (
        f"\n... {more:,} more row(s): use --rows -1, or --format csv|json|parquet --out FILE"
        if more > 0
        else f"\n({df.height:,} row(s))"
    )


def write_frame(df, fmt: str, out: Path | None, rows: int = TABLE_ROWS, wide: bool = False) -> None:
    """Print or write ``df`` in ``fmt`` (JSON: an array of objects, one per row)."""
    if fmt == "parquet":
        if out is None:
            raise click.UsageError("--format parquet needs --out FILE")
        df.write_parquet(out)
    elif fmt == "csv":
        text = _flat(df).write_csv()
    elif fmt == "json":
        text = df.write_json() if df.height else "[]"
    else:
        text = _table(df, rows, wide)
    if fmt != "parquet":
        if out is None:
            click.echo(text.rstrip("\n"))
        else:
            out.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    if out is not None:
        click.echo(f"{df.height:,} row(s) -> {out}", err=True)


def _list(fmt: str) -> None:
    from ..lake.queries import describe

    items = describe()
    if fmt == "json":
        click.echo(json.dumps(items, indent=2))
        return
    for q in items:
        click.echo(f"{q['name']}")
        click.echo(f"    {q['description']}")
        for p in q["params"]:
            click.echo(f"    --param {p}")
        click.echo("")


EXAMPLES = """\b
Examples:
  faultline sql "SELECT provider, count(*) FROM job_failures GROUP BY ALL"
  faultline sql --query top_failing_nodes --param provider=northwind --param max_rows=5
  faultline sql --query job_root_cause --param job_id=12345 --format json
  faultline sql --list"""


@click.command("sql", epilog=EXAMPLES)
@click.argument("statement", required=False)
@warehouse_option
@click.option("--query", "-q", "query_name", metavar="NAME", help="Run a named query (see --list).")
@click.option(
    "--param",
    "-p",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A named query's parameter; repeatable. NULL means null.",
)
@click.option("--list", "list_queries", is_flag=True, help="List the named queries with their parameters.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Write here instead of stdout.")
@click.option("--rows", type=int, default=TABLE_ROWS, show_default=True, help="Rows shown by --format table (-1: all).")
@click.option(
    "--wide", is_flag=True, help="--format table: no width limit and whole strings (default: the terminal's width)."
)
@mkdir_option
def sql(statement, warehouse, query_name, params, list_queries, fmt, out, rows, wide, mkdir):
    """Query the warehouse, read-only: one SELECT (or WITH/FROM/DESCRIBE/SHOW/SUMMARIZE) STATEMENT,
    '-' for stdin, or a named query. Anything that writes, attaches, installs or loads is refused,
    and the connection could not do it anyway (docs/queries.md, sql/README.md)."""
    from ..lake.queries import QueryError, get_query, run_query, run_sql

    if list_queries:
        if statement or query_name or params:
            raise click.UsageError("--list takes no statement, --query or --param")
        _list(fmt)
        return
    if statement and query_name:
        raise click.UsageError("give a SQL statement or --query NAME, not both")
    if not statement and not query_name:
        raise click.UsageError(
            'give a SQL statement (e.g. "SELECT * FROM provider_scoreboard"), --query NAME or --list'
        )
    if params and not query_name:
        raise click.UsageError("--param goes with --query NAME")
    if fmt == "parquet" and out is None:
        raise click.UsageError("--format parquet needs --out FILE")
    check_out(out, mkdir)
    if statement == "-":
        statement = sys.stdin.read()
    try:
        if query_name:
            query = get_query(query_name)  # unknown names fail before opening the warehouse
            con = open_warehouse(warehouse)
            try:
                df = run_query(con, query, _params(params))
            finally:
                con.close()
        else:
            con = open_warehouse(warehouse)
            try:
                df = run_sql(con, statement)
            finally:
                con.close()
    except QueryError as exc:
        raise click.ClickException(str(exc)) from exc
    write_frame(df, fmt, out, rows, wide)
