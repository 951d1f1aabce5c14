"""``faultline ticket node NAME``: the provider ticket / RMA evidence pack of one node."""

from __future__ import annotations

from pathlib import Path

import click

from ._options import parse_date
from .sql import open_warehouse, warehouse_option


@click.group("ticket")
def ticket() -> None:
    """Evidence packs for a provider ticket or an RMA."""


@ticket.command("node")
@click.argument("name")
@warehouse_option
@click.option("--since", callback=parse_date, help="First UTC day (YYYY-MM-DD). Default: the last 30 covered days.")
@click.option("--provider", help="Only this provider (when the name exists in several clusters).")
@click.option("--cluster", help="Only this cluster.")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the pack to this file (atomically) instead of stdout: evidence kept before remediation.",
)
def ticket_node(name: str, warehouse, since, provider, cluster, fmt: str, out: Path | None):
    """Node NAME's pack: provider, cluster, rack, leaf switch; GPU PCI slots, UUIDs and board
    serials; the deciding lines (UTC); incidents; the jobs it interrupted and the GPU-hours lost;
    how often other nodes' errors named it; its timeline; its known issue and ticket id.
    Markdown (escaped, ready to paste) or JSON."""
    from ..lake.files import atomic_write_text
    from ..lake.queries import QueryError
    from ..report.ticket import TicketError, gather, markdown, to_json

    con = open_warehouse(warehouse)
    try:
        pack = gather(con, name, since, provider, cluster)
    except (TicketError, QueryError) as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        con.close()
    text = markdown(pack) if fmt == "md" else to_json(pack)
    if out is None:
        click.echo(text, nl=False)
        return
    atomic_write_text(out, text)
    click.echo(f"{fmt} ticket pack for {name}: {out} ({len(text.encode()):,} bytes)", err=True)
