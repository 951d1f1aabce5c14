"""``faultline drain-list``: nodes to drain tonight, as scontrol lines (never run by faultline)."""

from __future__ import annotations

import json

import click

from .sql import open_warehouse, warehouse_option


@click.command("drain-list")
@warehouse_option
@click.option("--format", "fmt", type=click.Choice(["slurm", "json"]), default="slurm", show_default=True)
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=7,
    show_default=True,
    help="Faults and known-issue hits of the last N covered days count.",
)
def drain_list(warehouse, fmt: str, days: int):
    """Nodes to take out of service tonight, with their reasons: lemons, nodes whose last
    serious fault has no reboot after it, nodes an open known issue that says drain hit.
    Prints `scontrol update nodename=N state=drain reason="..."` lines for a person or a
    script to run; faultline never runs them."""
    from ..analytics.drain import drain_list as build
    from ..analytics.drain import slurm_text
    from ..lake.queries import QueryError, run_sql

    con = open_warehouse(warehouse)
    try:
        as_of = run_sql(con, "SELECT max(date) AS d FROM ingest_audit")["d"][0]
        if as_of is None:
            raise click.ClickException("the warehouse has no ingested days yet: run `faultline run` first")
        lemons = run_sql(con, "SELECT * FROM lemon_nodes")
        incidents = run_sql(
            con, "SELECT provider, cluster, node, category, severity, action, first_ts, last_ts FROM incidents"
        )
        boots = run_sql(
            con,
            "SELECT provider, cluster, node, max(ts) AS last_boot FROM events "
            "WHERE rule_id = 'nvrm_loading' AND node IS NOT NULL GROUP BY ALL",
        )
        inv = run_sql(con, "SELECT provider, cluster, node, in_service_to FROM inventory_latest")
        try:
            hits = run_sql(
                con,
                "SELECT m.provider, m.cluster, m.node, m.known_issue_id, k.ticket, m.ts "
                "FROM known_issue_matches AS m JOIN known_issues AS k USING (known_issue_id) "
                "WHERE k.drain AND k.status = 'open' AND m.state = 'applied' AND m.node IS NOT NULL",
            )
        except QueryError:
            hits = None  # analytics from before the known-issues registry
    except QueryError as exc:
        raise click.ClickException(f"{exc} (run `faultline run` first)") from exc
    finally:
        con.close()
    import polars as pl

    if hits is None:
        hits = pl.DataFrame(
            schema={
                "provider": pl.String,
                "cluster": pl.String,
                "node": pl.String,
                "known_issue_id": pl.String,
                "ticket": pl.String,
                "ts": pl.Datetime("us", "UTC"),
            }
        )
    drains = build(lemons, incidents, boots, hits, inv, as_of, days)
    if fmt == "json":
        rows = [
            {
                "provider": d.provider,
                "cluster": d.cluster,
                "node": d.node,
                "reasons": d.reasons,
                "reason": d.reason,
                "command": d.command(),
            }
            for d in drains
        ]
        click.echo(json.dumps({"as_of": as_of.isoformat(), "nodes": rows}, indent=2))
        return
    click.echo(slurm_text(drains, as_of), nl=False)
