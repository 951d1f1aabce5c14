"""Compute every analytics table from the lake and publish them beside it (no Dagster)."""

from __future__ import annotations

import os

import polars as pl

from ..classify.model import apply_model
from ..classify.ruleset import load_ruleset
from ..lake import files as lake
from ..schema import ANALYTICS, TABLES
from .attribution import attribute_failures
from .config import DEFAULT, AnalyticsConfig
from .goodput import add_lost_work, billed_node_days, cost_comparison, downtime, job_progress, provider_costs
from .incidents import build_incidents
from .known_issues import EMPTY, Registry, load_for
from .known_matches import apply as apply_known_issues
from .prices import load_prices
from .rates import (
    covered_days,
    exposure,
    failure_causes,
    group_health,
    lemon_nodes,
    node_failures,
    node_health,
    provider_comparison,
    rack_hotspots,
    scoreboard,
)
from .signatures import node_failure_profiles, unknown_signatures

ANALYTICS_TABLES = tuple(ANALYTICS)


def latest_inventory(inventory: pl.DataFrame) -> pl.DataFrame:
    """The lake keeps a daily inventory snapshot per partition: take each node's latest."""
    if "date" in inventory.columns:
        inventory = inventory.sort("date").group_by("provider", "cluster", "node", maintain_order=True).last()
    return inventory


def compute(
    events: pl.DataFrame,
    jobs: pl.DataFrame,
    flight: pl.DataFrame | None,
    inventory: pl.DataFrame,
    days: pl.DataFrame,
    cfg: AnalyticsConfig = DEFAULT,
    known: Registry = EMPTY,
    markers: pl.DataFrame | None = None,
    prices: pl.DataFrame | None = None,
    outputs: pl.DataFrame | None = None,
) -> dict[str, pl.DataFrame]:
    """Every analytics table; ``known`` (the known-issues registry), ``markers`` (job_markers),
    ``prices`` (prices.csv) and ``outputs`` (the jobs whose output the landing folder holds:
    ``job_outputs``) may be absent."""
    domains = load_ruleset().taxonomy.domains
    rule_events = events  # the lake keeps the rules' verdicts
    events = apply_model(events)  # the model may name only what the rules call unknown
    inv = latest_inventory(inventory)
    incidents = build_incidents(events, inv, cfg)
    failures = attribute_failures(jobs, events, flight, domains, cfg, markers=markers)
    # known issues first: their verdicts count in every rate, lemon test, scoreboard and cost below
    as_of = days["date"].max() if days.height else None
    ki = apply_known_issues(known, incidents, failures, events, inv, domains, as_of)
    incidents, failures = ki["incidents"], ki["job_failures"]
    progress = job_progress(markers if markers is not None else pl.DataFrame(schema=TABLES["job_markers"]))
    failures = add_lost_work(failures, jobs, progress, outputs)
    counted = node_failures(incidents, failures, cfg)
    nodes = node_health(exposure(inv, days), incidents, failures, cfg, counted)
    sb = scoreboard(nodes, failures, cfg=cfg)
    costs = provider_costs(
        failures, jobs, downtime(events, jobs, days), billed_node_days(inv, days, prices), prices is not None
    )
    return {
        "incidents": incidents,
        "job_failures": failures,
        "node_failures": counted,
        "provider_costs": costs,
        "provider_cost_comparison": pl.concat([cost_comparison(costs, "provider"), cost_comparison(costs, "cluster")]),
        "node_health": nodes,
        "rack_health": group_health(nodes.filter(pl.col("rack").is_not_null()), ["provider", "cluster", "rack"]),
        "provider_scoreboard": sb,
        "failure_causes": failure_causes(incidents, failures),
        "provider_comparison": pl.concat([provider_comparison(sb, "provider"), provider_comparison(sb, "cluster")]),
        "lemon_nodes": lemon_nodes(nodes, incidents, events, cfg),
        "rack_hotspots": rack_hotspots(nodes, incidents, cfg),
        "unknown_signatures": unknown_signatures(rule_events),
        "node_profiles": node_failure_profiles(incidents, nodes),
        "known_issue_matches": ki["known_issue_matches"],
        "known_issues": ki["known_issues"],
    }


def job_outputs(audit: pl.DataFrame) -> pl.DataFrame:
    """The jobs whose output the landing folder holds (``<p>/<c>/<day>/jobs/<job_id>/...`` files read)."""
    return (
        audit.filter(pl.col("kind") == "job")
        .select("provider", "cluster", job_id=pl.col("source").str.extract(r"/jobs/([^/]+)/", 1))
        .drop_nulls("job_id")
        .unique()
    )


def build_analytics(
    warehouse: str | os.PathLike,
    cfg: AnalyticsConfig = DEFAULT,
    known_issues: str | os.PathLike | None = None,
    prices: str | os.PathLike | None = None,
) -> dict[str, int]:
    """Read the lake, compute, write ``<warehouse>/analytics/<table>.parquet``; row counts. The
    ``known_issues`` file (default: env, else beside the warehouse) and ``prices`` are checked
    first, so a mistake in either leaves every table as it was."""
    known = load_for(known_issues, warehouse)
    price_rows = load_prices(prices)
    present = set(lake.tables_present(warehouse))

    def table(name: str) -> pl.DataFrame | None:
        return lake.read_table(warehouse, name) if name in present else None

    events, jobs, inv, audit = (table(n) for n in ("events", "jobs", "inventory", "ingest_audit"))
    if events is None or jobs is None or inv is None or audit is None:
        raise FileNotFoundError(f"{warehouse}: the lake has no events/jobs/inventory yet; run `faultline run` first")
    days = covered_days([tuple(r) for r in audit.select("provider", "cluster", "date").unique().iter_rows()])
    out = compute(
        events,
        jobs,
        table("flight_recorder"),
        inv,
        days,
        cfg,
        known,
        table("job_markers"),
        price_rows,
        job_outputs(audit),
    )
    for name, df in out.items():
        lake.write_analytics(warehouse, name, df)
    return {name: df.height for name, df in out.items()}
