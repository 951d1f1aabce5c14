"""The warehouse's headline counts, read from the counting views (sql/views): what the demo
prints, the report's headline and `faultline explain` say, from one set of definitions."""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb

from ..lake import queries as Q

_SQL = """
SELECT
    (SELECT count(*) FROM counted_failed_jobs WHERE $day IS NULL OR day = $day) AS failed_jobs,
    (SELECT count(*) FROM counted_failed_jobs WHERE infrastructure AND ($day IS NULL OR day = $day))
        AS infra_failed_jobs,
    (SELECT coalesce(round(sum(gpu_hours_lost), 1), 0) FROM counted_failed_jobs
      WHERE infrastructure AND ($day IS NULL OR day = $day)) AS infra_gpu_hours_lost,
    (SELECT count(*) FROM counted_incidents WHERE $day IS NULL OR day = $day) AS incidents,
    (SELECT count(*) FROM counted_incidents WHERE rack_shared AND ($day IS NULL OR day = $day)) AS rack_shared,
    (SELECT count(*) FROM node_failures WHERE $day IS NULL OR day = $day) AS node_failures,
    (SELECT count(DISTINCT (provider, cluster, node)) FROM lemon_nodes) AS lemons,
    (SELECT count(*) FROM rack_hotspots) AS bad_racks
"""


def counts(con: duckdb.DuckDBPyConnection, day: dt.date | None = None) -> dict[str, Any]:
    """Failed jobs (and the infrastructure ones, their GPU-hours), incidents (and those a rack
    shares), node failures, over every covered day or on the UTC day ``day``; lemons and bad
    racks flagged (whole history either way)."""
    row = Q.run_sql(con, _SQL, {"day": day}).row(0, named=True)
    return {k: (float(v) if k == "infra_gpu_hours_lost" else int(v)) for k, v in row.items()}


def sentence(c: dict[str, Any]) -> str:
    """The counts in one line, as the demo prints them."""
    return (
        f"{c['failed_jobs']:,} failed jobs ({c['infra_failed_jobs']:,} infrastructure, "
        f"{c['infra_gpu_hours_lost']:,.1f} GPU-hours), {c['incidents']:,} incidents "
        f"({c['rack_shared']:,} shared by a rack), {c['node_failures']:,} node failures, "
        f"{c['lemons']:,} lemon node(s), {c['bad_racks']:,} bad rack(s)"
    )
