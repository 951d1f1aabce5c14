"""Everything one night's report shows, read from the warehouse through the named queries and
the counting views; what to do first comes first (``triage``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import duckdb
import polars as pl

from ..lake import queries as Q
from . import charts, triage
from . import known as K
from .counts import counts
from .headline import SQL_MACRO, header_pattern
from .sanitize import slug

MAX_JOBS = 200  # user and scheduler failures listed (folded), each with a postmortem
MAX_LINES = 40  # postmortem timeline lines per job
MAX_CHART_DAYS = 60  # days in the timeline and heatmaps
MAX_HEATMAP_RACKS = 60  # racks per cluster in a heatmap (the most incidents first)
MAX_SIGNATURES = 50
MAX_LINE_CHARS = 400  # one log line in a page
SIGNATURE_DAYS = 7  # "new": first seen this many days up to the night
TOP_LINES = 12  # timeline lines a postmortem shows unfolded
METRICS = ("failed_jobs", "infra_failed_jobs", "gpu_hours_lost", "incidents")


@dataclass
class ReportData:
    warehouse: str
    day: dt.date
    first_day: dt.date
    last_day: dt.date
    covered_days: list[dt.date]
    generated_at: dt.datetime
    night: dict[str, Any] = field(default_factory=dict)  # counts.counts on the night
    totals: dict[str, Any] = field(default_factory=dict)  # ... over every covered day
    drain: list[dict[str, Any]] = field(default_factory=list)  # nodes and racks to drain or ticket
    headline: list[dict[str, Any]] = field(default_factory=list)
    daily: list[dict[str, Any]] = field(default_factory=list)  # one row per covered day
    scoreboard: list[dict[str, Any]] = field(default_factory=list)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    causes: list[dict[str, Any]] = field(default_factory=list)
    heatmaps: list[dict[str, Any]] = field(default_factory=list)  # one per cluster
    lemons: list[dict[str, Any]] = field(default_factory=list)
    racks: list[dict[str, Any]] = field(default_factory=list)
    infra_jobs: list[dict[str, Any]] = field(default_factory=list)  # every infrastructure failure of the night
    jobs: list[dict[str, Any]] = field(default_factory=list)  # the other failed jobs (capped)
    jobs_total: int = 0  # every failed job of the night
    other_total: int = 0  # ... of them not infrastructure
    by_cause: list[dict[str, Any]] = field(default_factory=list)  # user and scheduler failures by cause
    by_user: list[dict[str, Any]] = field(default_factory=list)  # ... by user
    node_evidence: list[dict[str, Any]] = field(default_factory=list)  # the night's incidents of listed nodes
    signatures: list[dict[str, Any]] = field(default_factory=list)
    quarantine: list[dict[str, Any]] = field(default_factory=list)
    providers: int = 0
    clusters: int = 0
    nodes: int = 0
    limits: dict[str, int] = field(default_factory=dict)
    known: dict[str, Any] = field(default_factory=dict)  # the known-issues section (known_issues())
    lottery: dict[str, Any] = field(default_factory=dict)  # "the lottery in dollars" (lottery())

    @property
    def postmortems(self) -> list[dict[str, Any]]:
        return self.infra_jobs + self.jobs


def covered_days(con: duckdb.DuckDBPyConnection) -> list[dt.date]:
    df = Q.run_sql(con, "SELECT DISTINCT date FROM ingest_audit ORDER BY date")
    return [d for d in df["date"].to_list() if d is not None]


def load(
    con: duckdb.DuckDBPyConnection,
    warehouse: str,
    day: dt.date | None = None,
    max_jobs: int = MAX_JOBS,
    max_lines: int = MAX_LINES,
) -> ReportData:
    days = covered_days(con)
    day = Q.covered_day(con, day)
    shown = [d for d in days if d <= day][-MAX_CHART_DAYS:]
    data = ReportData(
        warehouse=warehouse,
        day=day,
        first_day=days[0],
        last_day=days[-1],
        covered_days=shown,
        generated_at=dt.datetime.now(dt.timezone.utc).replace(microsecond=0),
        limits={
            "jobs": max_jobs,
            "lines": max_lines,
            "chart_days": MAX_CHART_DAYS,
            "heatmap_racks": MAX_HEATMAP_RACKS,
            "signatures": MAX_SIGNATURES,
            "signature_days": SIGNATURE_DAYS,
        },
    )
    data.night, data.totals = counts(con, day), counts(con)
    _daily_and_headline(con, data, days)
    _scoreboard(con, data)
    _causes(con, data)
    _heatmaps(con, data)
    data.lemons = [triage.explain_lemon(r) for r in _rows(Q.run_query(con, "lemon_nodes", {"max_rows": 200}))]
    hot = Q.run_query(con, "rack_hotspots", {"only_hotspots": True, "max_rows": 200})
    data.racks = [triage.explain_rack(r) for r in _rows(hot)]
    _jobs(con, data, max_jobs, max_lines)
    registry = K.load(con)
    data.signatures = _signatures(con, day, registry)
    data.quarantine = _rows(Q.run_query(con, "quarantine_summary", {"since": day, "until": day}))
    data.known = known_issues(con, day)
    incidents = _rows(
        Q.run_sql(con, "SELECT * FROM counted_incidents WHERE day = $day ORDER BY first_ts", {"day": day})
    )
    drain = triage.to_drain(data.infra_jobs, incidents, data.lemons, data.racks, registry.says_drain)
    data.drain = K.annotate_drain(drain, registry)
    data.node_evidence = triage.node_evidence(data.drain, incidents)
    fleet = Q.run_sql(
        con,
        "SELECT count(DISTINCT provider) AS p, count(DISTINCT (provider, cluster)) AS c, "
        "count(*) AS n FROM inventory_latest",
    ).row(0)
    data.providers, data.clusters, data.nodes = (int(v or 0) for v in fleet)
    data.lottery = lottery(con)
    return data


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return df.to_dicts()


def _daily_and_headline(con, data: ReportData, days: list[dt.date]) -> None:
    df = Q.run_sql(con, "SELECT * FROM daily_summary")
    per_day = (
        df.group_by("day").agg([pl.col(m).sum() for m in METRICS]).sort("day")
        if df.height
        else pl.DataFrame(schema={"day": pl.Date, **{m: pl.Float64 for m in METRICS}})
    )
    by_day = {r["day"]: r for r in per_day.to_dicts()}
    zero = {m: 0 for m in METRICS}
    data.daily = [{"day": d, **{m: (by_day.get(d) or zero)[m] for m in METRICS}} for d in data.covered_days]
    day = data.day
    prev = day - dt.timedelta(days=1)
    week = [d for d in days if day - dt.timedelta(days=7) <= d < day]
    labels = {
        "failed_jobs": "Failed jobs",
        "infra_failed_jobs": "Infrastructure failures",
        "gpu_hours_lost": "GPU-hours lost",
        "incidents": "Incidents",
    }
    for m in METRICS:
        now = (by_day.get(day) or zero)[m]
        before = (by_day.get(prev) or zero)[m] if prev in days else None
        avg = sum((by_day.get(d) or zero)[m] for d in week) / len(week) if week else None
        data.headline.append(
            {
                "metric": m,
                "label": labels[m],
                "value": now,
                "prev_day": before,
                "prev_week_avg": avg,
                "week_days": len(week),
                "delta_day": _delta(now, before),
                "delta_week": _delta(now, avg),
            }
        )


def _delta(now, before) -> float | None:
    if before is None:
        return None
    if before == 0:
        return None if now == 0 else float("inf")
    return (now - before) / before


def _scoreboard(con, data: ReportData) -> None:
    sb = Q.run_query(con, "scoreboard", {"level": "all"})
    rows = sb.to_dicts()
    providers = [r for r in rows if r["level"] == "provider"]
    clusters = [r for r in rows if r["level"] == "cluster"]
    ordered = []
    for p in sorted(providers, key=lambda r: (r["rate_per_1k"] or 0, r["provider"] or "")):
        ordered.append(p)
        ordered.extend(
            sorted(
                (c for c in clusters if c["provider"] == p["provider"]),
                key=lambda r: (r["rate_per_1k"] or 0, r["cluster"] or ""),
            )
        )
    data.scoreboard = ordered
    comp = Q.run_query(con, "provider_comparison", {"level": "provider"})
    comp_c = Q.run_query(con, "provider_comparison", {"level": "cluster", "only_distinguishable": True})
    data.comparisons = _rows(comp) + _rows(comp_c.head(20))


def _causes(con, data: ReportData) -> None:
    df = Q.run_sql(con, "SELECT * FROM daily_failures")
    if df.height == 0:
        return
    window = df.group_by("root_cause", "domain").agg(pl.col("failed_jobs").sum(), pl.col("gpu_hours_lost").sum())
    night = (
        df.filter(pl.col("day") == data.day)
        .group_by("root_cause")
        .agg(
            pl.col("failed_jobs").sum().alias("night_failed_jobs"),
            pl.col("gpu_hours_lost").sum().alias("night_gpu_hours_lost"),
        )
    )
    out = (
        window.join(night, on="root_cause", how="left")
        .with_columns(
            pl.col("night_failed_jobs").fill_null(0),
            pl.col("night_gpu_hours_lost").fill_null(0.0),
            share=pl.col("failed_jobs") / pl.col("failed_jobs").sum(),
            gpu_hours_share=pl.col("gpu_hours_lost") / pl.col("gpu_hours_lost").sum(),
        )
        .sort("failed_jobs", "gpu_hours_lost", descending=True)
    )
    data.causes = out.to_dicts()


def _heatmaps(con, data: ReportData) -> None:
    since = data.covered_days[0] if data.covered_days else data.day
    df = Q.run_query(con, "rack_days", {"since": since, "until": data.day})
    if df.height == 0:
        return
    for (provider, cluster), part in df.group_by("provider", "cluster", maintain_order=True):
        totals = (
            part.group_by("rack").agg(pl.col("incidents").sum()).sort(["incidents", "rack"], descending=[True, False])
        )
        racks_all = sorted(totals["rack"].to_list())
        keep = set(totals.head(MAX_HEATMAP_RACKS)["rack"].to_list())
        racks = [r for r in racks_all if r in keep]
        cells = {(r["rack"], r["day"]): r for r in part.to_dicts()}
        data.heatmaps.append(
            {
                "provider": provider,
                "cluster": cluster,
                "racks": racks,
                "racks_total": len(racks_all),
                "cells": cells,
                "max": int(part["incidents"].max() or 0),
            }
        )
    data.heatmaps.sort(key=lambda h: (h["provider"], h["cluster"]))


def _timelines(con, params: dict[str, Any], max_lines: int) -> dict[tuple, list[dict]]:
    lines = Q.run_query(con, "job_timeline", {**params, "max_lines": max_lines})
    by_job: dict[tuple, list[dict]] = {}
    for r in lines.to_dicts():
        if r["line"] is not None and len(r["line"]) > MAX_LINE_CHARS:
            r["line"] = r["line"][: MAX_LINE_CHARS - 1] + "\u2026"
        by_job.setdefault((r["provider"], r["cluster"], r["job_id"]), []).append(r)
    return by_job


def _jobs(con, data: ReportData, max_jobs: int, max_lines: int) -> None:
    """Every infrastructure failure of the night, and the other failed jobs (the costliest
    ``max_jobs``), each with its postmortem timeline; the others summarised by cause and user."""
    every = Q.run_query(con, "failed_jobs", {"day": data.day, "max_rows": 10_000_000})
    data.jobs_total = every.height
    infra = every.filter(pl.col("infrastructure"))
    other = every.filter(~pl.col("infrastructure"))
    data.other_total = other.height
    by_job = _timelines(con, {"day": data.day, "max_jobs": max_jobs}, max_lines)
    for j in infra.to_dicts():  # an infrastructure failure cheaper than the costliest max_jobs
        key = (j["provider"], j["cluster"], j["job_id"])
        if key not in by_job:
            by_job.update(
                _timelines(con, {"job_id": j["job_id"], "provider": j["provider"], "cluster": j["cluster"]}, max_lines)
            )
    used: set[str] = set()
    ids = every["job_id"].to_list()
    picked = [*infra.to_dicts(), *other.head(max_jobs).to_dicts()]
    for j in picked:
        anchor = "job-" + slug(j["job_id"])
        if ids.count(j["job_id"]) > 1 or anchor in used:
            anchor = f"job-{slug(j['job_id'])}-{slug(j['provider'])}-{slug(j['cluster'])}"
        base, n = anchor, 2
        while anchor in used:
            anchor, n = f"{base}-{n}", n + 1
        used.add(anchor)
        j["anchor"] = anchor
        j["timeline"] = by_job.get((j["provider"], j["cluster"], j["job_id"]), [])
        j["deciding"] = next((t for t in j["timeline"] if t["deciding"]), None)
        j["timeline_top"] = top_lines(j["timeline"])
        j["brief"] = triage.brief(j)
    data.infra_jobs = picked[: infra.height]
    data.jobs = picked[infra.height :]
    data.by_cause = triage.summarise(other, ["root_cause", "domain"])
    data.by_user = triage.summarise(other, ["user"])


def top_lines(timeline: list[dict[str, Any]], n: int = TOP_LINES) -> list[dict[str, Any]]:
    """The lines a postmortem shows unfolded: the deciding ones, then the start and end marks and
    the critical and error lines, at most ``n``, in timeline order."""
    rank = [
        (0 if t["deciding"] else 1 if t["origin"] == "scheduler" else 2, i)
        for i, t in enumerate(timeline)
        if t["deciding"] or t["origin"] == "scheduler" or t["severity"] in ("critical", "error")
    ]
    keep = {i for _, i in sorted(rank)[:n]}
    return [t for i, t in enumerate(timeline) if i in keep]


def _signatures(con, day: dt.date, registry: K.Known) -> list[dict[str, Any]]:
    """The new signatures of the week up to ``day``, each with the known issues that carry it."""
    df = Q.run_query(con, "new_signatures", {"as_of": day, "days": SIGNATURE_DAYS, "max_rows": MAX_SIGNATURES})
    ids = df["signature_id"].to_list()
    templates = Q.run_sql(
        con,
        "SELECT signature_id, templates FROM unknown_signatures WHERE list_contains($ids, signature_id)",
        {"ids": ids},
    )
    by_id = dict(zip(templates["signature_id"].to_list(), templates["templates"].to_list()))
    return K.annotate_signatures(_rows(df), registry, by_id)


# ------------------------------------------------------------------ the known-issues section
MAX_KNOWN_ROWS = 50
_NIGHT_SIGNATURES = """
WITH f AS (
    SELECT 'job' AS kind, provider, cluster, root_cause AS category,
           coalesce(nullif(regexp_extract(decided_by, '^(?:node|job):([^+]+)', 1), ''),
                    split_part(decided_by, '+', 1)) AS rule,
           known_issue_id, original_root_cause IS NOT NULL AS overridden, ended AS ts, gpu_hours_lost,
           headline(evidence, $headers) AS line
    FROM job_failures
    -- the infrastructure's failures, user-blamed ones a node's kernel decided (Xid 13/31, OOM
    -- kills), and whatever an entry covers; user code and the scheduler alone are not listed
    WHERE domain IN ('hardware', 'software', 'unknown') OR root_cause = 'collective_timeout'
       OR decided_by LIKE 'node:%' OR known_issue_id IS NOT NULL
    UNION ALL
    SELECT 'incident', provider, cluster, category, rule_ids[1], known_issue_id,
           original_category IS NOT NULL, first_ts, CAST(NULL AS DOUBLE), headline(sample, $headers)
    FROM counted_incidents
), s AS (
    SELECT *, CAST(timezone('UTC', ts) AS DATE) AS day,
           min(CAST(timezone('UTC', ts) AS DATE)) OVER (PARTITION BY provider, cluster, category, rule) AS first_day
    FROM f
)
SELECT provider, cluster, category, rule, known_issue_id, min(first_day) AS first_day,
       count(*) FILTER (WHERE kind = 'job') AS jobs, count(*) FILTER (WHERE kind = 'incident') AS incidents,
       coalesce(sum(gpu_hours_lost), 0) AS gpu_hours_lost, count(*) FILTER (WHERE overridden) AS overridden,
       arg_min(line, ts) AS example
FROM s WHERE day = $day
GROUP BY provider, cluster, category, rule, known_issue_id
ORDER BY known_issue_id IS NOT NULL, min(first_day) = $day DESC, coalesce(sum(gpu_hours_lost), 0) DESC,
         count(*) DESC, provider, cluster, category, rule
"""


def known_issues(con, day: dt.date) -> dict[str, Any]:
    """The known-issues section: the night's failures split into new (no entry; first seen
    tonight first) and known (per entry), the verdicts entries overrode, the open entries with
    their cost since opened and tickets, and the entries that ended but still match."""
    views = Q.run_sql(con, "SELECT view_name FROM duckdb_views() WHERE view_name = 'known_issues'")
    if views.is_empty():
        return {"available": False}  # analytics written before the known-issues registry
    entries = Q.run_sql(con, "SELECT * FROM known_issues ORDER BY gpu_hours_lost_since_opened DESC, known_issue_id")
    con.execute(SQL_MACRO)
    night = Q.run_sql(con, _NIGHT_SIGNATURES, {"day": day, "headers": header_pattern()})
    overridden = Q.run_sql(
        con,
        "SELECT job_id, provider, cluster, original_root_cause, root_cause, original_action, action, "
        "known_issue_id, gpu_hours_lost FROM job_failures WHERE original_root_cause IS NOT NULL "
        "AND CAST(timezone('UTC', ended) AS DATE) = $day ORDER BY gpu_hours_lost DESC, job_id LIMIT $n",
        {"day": day, "n": MAX_KNOWN_ROWS},
    )
    rows = night.to_dicts()
    new = [r for r in rows if r["known_issue_id"] is None]
    titles = {e["known_issue_id"]: e for e in entries.to_dicts()}
    known: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["known_issue_id"] is None:
            continue
        k = known.setdefault(
            r["known_issue_id"],
            {
                "known_issue_id": r["known_issue_id"],
                "jobs": 0,
                "incidents": 0,
                "gpu_hours_lost": 0.0,
                "overridden": 0,
                **{c: (titles.get(r["known_issue_id"]) or {}).get(c) for c in ("title", "ticket", "status", "hotfix")},
            },
        )
        for c in ("jobs", "incidents", "gpu_hours_lost", "overridden"):
            k[c] += r[c] or 0
    ents = entries.to_dicts()
    return {
        "available": True,
        "entries": len(ents),
        "file": ents[0]["file"] if ents else None,
        "new": new[:MAX_KNOWN_ROWS],
        "new_total": len(new),
        "new_tonight": sum(1 for r in new if r["first_day"] == day),
        "known": sorted(known.values(), key=lambda k: (-k["gpu_hours_lost"], k["known_issue_id"])),
        "overridden": overridden.to_dicts(),
        "open": [e for e in ents if e["status"] in ("open", "quiet")][:MAX_KNOWN_ROWS],
        "ended_matching": [e for e in ents if e["matches_after_end"] and e["status"] in ("expired", "closed")],
    }


def lottery(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """ "The lottery in dollars" (docs/costs.md): price paid against effective price per useful
    GPU-hour per provider, the month at each provider's effective rate, and whether the data
    tells them apart; goodput alone without prices.csv. Empty for a warehouse without the tables."""
    try:
        providers = Q.run_query(con, "provider_costs", {"level": "provider"}).to_dicts()
        clusters = Q.run_query(con, "provider_costs", {"level": "cluster"}).to_dicts()
        pairs = Q.run_query(con, "cost_comparison", {"level": "provider"}).to_dicts()
    except Q.QueryError:
        return {}
    priced = any(r["usd_paid"] is not None for r in providers)
    eff = "effective_usd_per_useful_gpu_hour"
    rows = sorted(
        providers,
        key=lambda r: (
            (r[eff] is None, r[eff] or 0.0, r["provider"]) if priced else (-(r["goodput"] or 0), r["provider"])
        ),
    )
    if priced:  # a provider some of whose node-days no price row covers has no dollars, and no bar
        chart = charts.paired_bars(
            [r for r in rows if r[eff] is not None], "usd_per_gpu_hour", eff, "effective_low", "effective_high"
        )
    else:
        chart = charts.paired_bars([{**r, "one": 1.0} for r in rows], "one", "goodput", "goodput_low", "goodput_high")
    unpriced = sorted(f"{r['provider']}/{r['cluster']}" for r in clusters if r["usd_paid"] is None)
    return {
        "priced": priced,
        "providers": rows,
        "clusters": clusters,
        "pairs": pairs,
        "chart": chart,
        "unpriced_clusters": unpriced,
        "cheapest": rows[0]["provider"] if rows and priced and rows[0][eff] is not None else None,
    }
