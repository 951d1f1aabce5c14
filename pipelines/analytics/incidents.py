"""Coalesce events into bursts, node incidents and rack incidents.

Bursts: identical (node, GPU, code, rule) within ``burst_window_s`` (NCSA's 5 s). Node
incidents: bursts on one node within ``node_incident_window_s``, named by the earliest
serious one. Rack
incidents: node incidents of one category on several nodes of one rack (or leaf switch)
within ``rack_incident_window_s``.
"""
from __future__ import annotations

import polars as pl

from .config import DEFAULT, AnalyticsConfig

SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2, "critical": 3}
# events that can make a node (not a job) unhealthy
NODE_DOMAINS = ("hardware", "software")


def _sessions(df: pl.DataFrame, keys: list[str], ts: str, window_s: float, name: str,
              tiebreak: tuple[str, ...] = ()) -> pl.DataFrame:
    """Number runs of rows per key whose gaps stay within the window (0, 1, 2, ... per key).
    Rows come back sorted by key, time and ``tiebreak`` (a total order: the ``first()`` of
    a group then never depends on the order the lake was read in)."""
    gap = (pl.col(ts) - pl.col(ts).shift(1).over(keys)).dt.total_microseconds() > window_s * 1e6
    new = gap.fill_null(True)
    return df.sort([*keys, ts, *tiebreak]).with_columns(new.cast(pl.Int32).cum_sum().over(keys).alias(name))


def node_events(events: pl.DataFrame) -> pl.DataFrame:
    """Kernel-side events that speak about node health (not job output, not benign noise)."""
    return events.filter(
        pl.col("job_id").is_null() & pl.col("node").is_not_null() & pl.col("ts").is_not_null()
        & pl.col("domain").is_in(NODE_DOMAINS)
    ).with_columns(sev=pl.col("severity").replace_strict(SEVERITY_RANK, default=0, return_dtype=pl.Int8))


def build_incidents(events: pl.DataFrame, inventory: pl.DataFrame,
                    cfg: AnalyticsConfig = DEFAULT) -> pl.DataFrame:
    ev = node_events(events)
    if ev.is_empty():
        return _empty()
    bkeys = ["provider", "cluster", "node", "gpu_pci", "xid", "sxid", "rule_id"]
    ev = _sessions(ev.with_columns(pl.col("gpu_pci").fill_null("")), bkeys, "ts", cfg.burst_window_s, "_burst",
                  tiebreak=("event_id",))
    bursts = ev.group_by([*bkeys, "_burst"], maintain_order=True).agg(
        pl.col("category").first(), pl.col("domain").first(), pl.col("ts").min().alias("ts"),
        pl.col("ts").max().alias("ts_end"), pl.len().alias("n_events"), pl.col("sev").max(),
        pl.col("action").sort_by("sev", maintain_order=True).last(), pl.col("event_id").first(), pl.col("raw").first(),
    )
    # one node, one incident window: a fault's follow-on lines (AER after an Xid 79, SXids
    # after an Xid 74) are the same incident; the earliest serious burst names it
    nkeys = ["provider", "cluster", "node"]
    bursts = _sessions(bursts, nkeys, "ts", cfg.node_incident_window_s, "_inc", tiebreak=("event_id",))
    serious = pl.col("sev") >= SEVERITY_RANK["error"]
    inc = bursts.sort("ts", "event_id").group_by([*nkeys, "_inc"], maintain_order=True).agg(
        pl.col("category").filter(serious).first().fill_null(pl.col("category").first()).alias("category"),
        pl.col("domain").filter(serious).first().fill_null(pl.col("domain").first()).alias("domain"),
        pl.col("ts").min().alias("first_ts"), pl.col("ts_end").max().alias("last_ts"),
        pl.col("n_events").sum(), pl.len().alias("n_bursts"), pl.col("sev").max(),
        pl.col("action").sort_by("sev", maintain_order=True).last(),
        pl.col("gpu_pci").filter(pl.col("gpu_pci") != "").unique(maintain_order=True).alias("gpus"),
        pl.col("xid").drop_nulls().unique(maintain_order=True).alias("xids"),
        pl.col("sxid").drop_nulls().unique(maintain_order=True).alias("sxids"),
        pl.col("rule_id").unique(maintain_order=True).alias("rule_ids"),
        pl.col("event_id").first().alias("first_event_id"), pl.col("raw").first().alias("sample"),
    )
    inv = inventory.select("provider", "cluster", "node", "rack",
                           pl.col("leaf_switch") if "leaf_switch" in inventory.columns else pl.lit(None, pl.String).alias("leaf_switch"))
    inc = inc.join(inv, on=["provider", "cluster", "node"], how="left")
    inc = _rack_incidents(inc, cfg)
    inv_sev = {v: k for k, v in SEVERITY_RANK.items()}
    return inc.with_columns(
        severity=pl.col("sev").replace_strict(inv_sev, return_dtype=pl.String),
        gpu_pci=pl.col("gpus").list.first(),
        incident_id=pl.format("{}/{}/{}/{}", "provider", "cluster", "node", pl.col("first_ts").dt.strftime("%Y%m%dT%H%M%S%.3f")),
    ).select(INCIDENT_COLUMNS).sort("first_ts", "node", "incident_id")


INCIDENT_COLUMNS = ["incident_id", "provider", "cluster", "rack", "leaf_switch", "node", "gpu_pci", "category",
                    "domain", "severity", "action", "first_ts", "last_ts", "n_events", "n_bursts", "gpus", "xids",
                    "sxids", "rule_ids", "first_event_id", "sample", "rack_incident_id", "rack_nodes"]


def _rack_incidents(inc: pl.DataFrame, cfg: AnalyticsConfig) -> pl.DataFrame:
    """Mark incidents that share a rack (or leaf switch) and category within the window."""
    inc = inc.with_columns(_domain_key=pl.coalesce(pl.col("leaf_switch"), pl.col("rack")))
    keyed = inc.filter(pl.col("_domain_key").is_not_null())
    rkeys = ["provider", "cluster", "_domain_key", "category"]
    keyed = _sessions(keyed, rkeys, "first_ts", cfg.rack_incident_window_s, "_rinc")
    groups = keyed.group_by([*rkeys, "_rinc"]).agg(
        pl.col("node").n_unique().alias("rack_nodes"), pl.col("first_ts").min().alias("_r0"))
    groups = groups.filter(pl.col("rack_nodes") >= cfg.rack_incident_min_nodes).with_columns(
        rack_incident_id=pl.format("{}/{}/{}/{}", "provider", "cluster", "_domain_key", pl.col("_r0").dt.strftime("%Y%m%dT%H%M%S")))
    keyed = keyed.join(groups.select([*rkeys, "_rinc", "rack_incident_id", "rack_nodes"]), on=[*rkeys, "_rinc"], how="left")
    rest = inc.filter(pl.col("_domain_key").is_null()).with_columns(
        rack_incident_id=pl.lit(None, pl.String), rack_nodes=pl.lit(None, pl.UInt32))
    return pl.concat([keyed.drop("_rinc"), rest], how="diagonal_relaxed").drop("_domain_key")


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema={
        "incident_id": pl.String, "provider": pl.String, "cluster": pl.String, "rack": pl.String,
        "leaf_switch": pl.String, "node": pl.String, "gpu_pci": pl.String, "category": pl.String,
        "domain": pl.String, "severity": pl.String, "action": pl.String,
        "first_ts": pl.Datetime("us", "UTC"), "last_ts": pl.Datetime("us", "UTC"), "n_events": pl.UInt32,
        "n_bursts": pl.UInt32, "gpus": pl.List(pl.String), "xids": pl.List(pl.Int32), "sxids": pl.List(pl.Int32),
        "rule_ids": pl.List(pl.String), "first_event_id": pl.String, "sample": pl.String,
        "rack_incident_id": pl.String, "rack_nodes": pl.UInt32})
