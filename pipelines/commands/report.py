"""``faultline report``: one night as a self-contained HTML page (or Markdown for tickets)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from ._options import check_out, mkdir_option, parse_date
from .sql import warehouse_option


@click.command("report")
@warehouse_option
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="File to write (report.html, or report.md with --format md).",
)
@click.option(
    "--date",
    "day",
    callback=parse_date,
    help="UTC night to report (YYYY-MM-DD). Default: the last day in the warehouse.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    default=None,
    help="html (default) or md; inferred from --out ending in .md.",
)
@mkdir_option
def report(warehouse: Path, out: Path, day, fmt, mkdir: bool):
    """Write the nightly report: what to do first (nodes and racks to drain or ticket, the night's
    infrastructure failures, new signatures), then the numbers, known issues, scoreboard, causes, racks,
    lemons and postmortems. The HTML page needs no scripts, fonts or network (docs/queries.md)."""
    from ..lake.queries import QueryError, db_exists_hint
    from ..report import build_report

    check_out(out, mkdir)
    fmt = fmt or ("md" if out.suffix.lower() in (".md", ".markdown") else "html")
    hint = db_exists_hint(warehouse)
    if hint:
        raise click.ClickException(hint)
    started = time.perf_counter()
    try:
        path = build_report(warehouse, out, day, fmt)
    except QueryError as exc:
        raise click.ClickException(str(exc)) from exc
    size = path.stat().st_size
    click.echo(
        f"{fmt} report for {day or 'the last day'}: {path} ({size / 1e6:.2f} MB, {time.perf_counter() - started:.1f}s)",
        err=True,
    )
