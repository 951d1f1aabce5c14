"""Coalesce events into bursts (identical events within ``burst_window_s``), node incidents (bursts
of one node within ``node_incident_window_s``) and rack incidents (one category on several
nodes of a rack or leaf switch within ``rack_incident_window_s``; docs/analytics.md)."""

from __future__ import annotations

import numpy as np
import polars as pl

from .config import DEFAULT, AnalyticsConfig

SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2, "critical": 3}
# events that can make a node (not a job) unhealthy
NODE_DOMAINS = ("hardware", "software")


def _sessions(
    df: pl.DataFrame, keys: list[str], ts: str, window_s: float, name: str, tiebreak: tuple[str, ...] = ()
) -> pl.DataFrame:
    """Number runs of rows per key whose gaps stay within the window (0, 1, 2, ... per key).
    Rows come back sorted by key, time and ``tiebreak`` (a total order: the ``first()`` of
    a group then never depends on the order the lake was read in)."""
    gap = (pl.col(ts) - pl.col(ts).shift(1).over(keys)).dt.total_microseconds() > window_s * 1e6
    new = gap.fill_null(True)
    return df.sort([*keys, ts, *tiebreak]).with_columns(new.cast(pl.Int32).cum_sum().over(keys).alias(name))


def node_events(events: pl.DataFrame) -> pl.DataFrame:
    """Kernel-side events that speak about node health (not job output, not benign noise)."""
    for col, dtype in (("repeats", pl.Int32), ("last_ts", pl.Datetime("us", "UTC"))):
        if col not in events.columns:  # frames built before floods were collapsed
            events = events.with_columns(pl.lit(None, dtype).alias(col))
    return events.filter(
        pl.col("job_id").is_null()
        & pl.col("node").is_not_null()
        & pl.col("ts").is_not_null()
        & pl.col("domain").is_in(NODE_DOMAINS)
    ).with_columns(sev=pl.col("severity").replace_strict(SEVERITY_RANK, default=0, return_dtype=pl.Int8))


def build_incidents(events: pl.DataFrame, inventory: pl.DataFrame, cfg: AnalyticsConfig = DEFAULT) -> pl.DataFrame:
    ev = node_events(events)
    if ev.is_empty():
        return _empty()
    bkeys = ["provider", "cluster", "node", "gpu_pci", "xid", "sxid", "rule_id"]
    ev = _sessions(
        ev.with_columns(pl.col("gpu_pci").fill_null("")),
        bkeys,
        "ts",
        cfg.burst_window_s,
        "_burst",
        tiebreak=("event_id",),
    )
    bursts = ev.group_by([*bkeys, "_burst"], maintain_order=True).agg(
        pl.col("category").first(),
        pl.col("domain").first(),
        pl.col("ts").min().alias("ts"),
        pl.coalesce("last_ts", "ts").max().alias("ts_end"),
        pl.col("repeats").fill_null(1).sum().cast(pl.UInt32).alias("n_events"),
        pl.col("sev").max(),
        pl.col("action").sort_by("sev", maintain_order=True).last(),
        pl.col("event_id").first(),
        pl.col("raw").first(),
    )
    # one node, one incident window: a fault's follow-on lines (AER after an Xid 79, SXids
    # after an Xid 74) are the same incident; the earliest serious burst names it
    nkeys = ["provider", "cluster", "node"]
    bursts = _sessions(bursts, nkeys, "ts", cfg.node_incident_window_s, "_inc", tiebreak=("event_id",))
    serious = pl.col("sev") >= SEVERITY_RANK["error"]
    inc = (
        bursts.sort("ts", "event_id")
        .group_by([*nkeys, "_inc"], maintain_order=True)
        .agg(
            pl.col("category").filter(serious).first().fill_null(pl.col("category").first()).alias("category"),
            pl.col("domain").filter(serious).first().fill_null(pl.col("domain").first()).alias("domain"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts_end").max().alias("last_ts"),
            pl.col("n_events").sum(),
            pl.len().alias("n_bursts"),
            pl.col("sev").max(),
            pl.col("action").sort_by("sev", maintain_order=True).last(),
            pl.col("gpu_pci").filter(pl.col("gpu_pci") != "").unique(maintain_order=True).alias("gpus"),
            pl.col("xid").drop_nulls().unique(maintain_order=True).alias("xids"),
            pl.col("sxid").drop_nulls().unique(maintain_order=True).alias("sxids"),
            pl.col("rule_id").unique(maintain_order=True).alias("rule_ids"),
            pl.col("event_id").first().alias("first_event_id"),
            pl.col("raw").first().alias("sample"),
        )
    )
    inv = inventory.select(
        "provider",
        "cluster",
        "node",
        "rack",
        pl.col("leaf_switch") if "leaf_switch" in inventory.columns else pl.lit(None, pl.String).alias("leaf_switch"),
    )
    inc = inc.join(inv, on=["provider", "cluster", "node"], how="left")
    inc = _rack_incidents(inc, cfg)
    inv_sev = {v: k for k, v in SEVERITY_RANK.items()}
    return (
        inc.with_columns(
            severity=pl.col("sev").replace_strict(inv_sev, return_dtype=pl.String),
            gpu_pci=pl.col("gpus").list.first(),
            incident_id=pl.format(
                "{}/{}/{}/{}", "provider", "cluster", "node", pl.col("first_ts").dt.strftime("%Y%m%dT%H%M%S%.3f")
            ),
        )
        .select(INCIDENT_COLUMNS)
        .sort("first_ts", "node", "incident_id")
    )


INCIDENT_COLUMNS = [
    "incident_id",
    "provider",
    "cluster",
    "rack",
    "leaf_switch",
    "node",
    "gpu_pci",
    "category",
    "domain",
    "severity",
    "action",
    "first_ts",
    "last_ts",
    "n_events",
    "n_bursts",
    "gpus",
    "xids",
    "sxids",
    "rule_ids",
    "first_event_id",
    "sample",
    "rack_incident_id",
    "rack_nodes",
]


def _rack_incidents(inc: pl.DataFrame, cfg: AnalyticsConfig) -> pl.DataFrame:
    """Mark incidents that share a rack (or leaf switch) and category within the window, on each
    node's clock corrected by ``clock_offsets``: a node whose clock is off would otherwise drop out
    of every episode it shared and look like a node failing alone."""
    inc = inc.with_columns(_domain_key=pl.coalesce(pl.col("leaf_switch"), pl.col("rack")))
    keyed = inc.filter(pl.col("_domain_key").is_not_null())
    rkeys = ["provider", "cluster", "_domain_key", "category"]
    offsets = clock_offsets(keyed, cfg)
    keyed = keyed.join(offsets, on=["provider", "cluster", "node"], how="left").with_columns(
        _t=pl.col("first_ts") + pl.duration(microseconds=pl.col("clock_offset_us").fill_null(0))
    )
    keyed = _sessions(keyed, rkeys, "_t", cfg.rack_incident_window_s, "_rinc")
    groups = keyed.group_by([*rkeys, "_rinc"]).agg(
        pl.col("node").n_unique().alias("rack_nodes"), pl.col("_t").min().alias("_r0")
    )
    groups = groups.filter(pl.col("rack_nodes") >= cfg.rack_incident_min_nodes).with_columns(
        rack_incident_id=pl.format(
            "{}/{}/{}/{}", "provider", "cluster", "_domain_key", pl.col("_r0").dt.strftime("%Y%m%dT%H%M%S")
        )
    )
    keyed = keyed.join(
        groups.select([*rkeys, "_rinc", "rack_incident_id", "rack_nodes"]), on=[*rkeys, "_rinc"], how="left"
    )
    rest = inc.filter(pl.col("_domain_key").is_null()).with_columns(
        rack_incident_id=pl.lit(None, pl.String), rack_nodes=pl.lit(None, pl.UInt32)
    )
    return pl.concat([keyed.drop("_rinc", "_t", "clock_offset_us"), rest], how="diagonal_relaxed").drop("_domain_key")


def clock_offsets(keyed: pl.DataFrame, cfg: AnalyticsConfig = DEFAULT) -> pl.DataFrame:
    """Per node, the shift that puts its kernel clock on its rack-mates': the lag that lines up the
    most of its serious incidents with theirs (at least ``clock_offset_min_support``, within
    ``clock_offset_max_s``, more than no shift does). Columns: provider, cluster, node, clock_offset_us."""
    schema = {"provider": pl.String, "cluster": pl.String, "node": pl.String, "clock_offset_us": pl.Int64}
    tol = int(cfg.rack_incident_window_s * 1e6)
    ev = (
        keyed.filter(pl.col("sev") >= SEVERITY_RANK["error"])
        .select("provider", "cluster", "_domain_key", "category", "node", "first_ts")
        .with_row_index("_i")
    )
    if ev.height < cfg.rack_incident_min_nodes:
        return pl.DataFrame(schema=schema)
    # partners lie within clock_offset_max_s: each incident meets only those of its own and the
    # two neighbouring windows of that length, not every rack-mate's incident of the whole history
    width = int(cfg.clock_offset_max_s * 1e6)
    ev = ev.with_columns(_b=pl.col("first_ts").dt.epoch("us") // max(width, 1))
    other = ev.select("provider", "cluster", "_domain_key", "category", "_b", _other="node", _to="first_ts")
    keys = ["provider", "cluster", "_domain_key", "category", "_b"]
    near = pl.concat([other.with_columns(_b=pl.col("_b") + k) for k in (-1, 0, 1)])
    pairs = (
        ev.join(near, on=keys)
        .filter(
            (pl.col("node") != pl.col("_other"))
            & ((pl.col("_to") - pl.col("first_ts")).dt.total_microseconds().abs() <= width)
        )
        .select("provider", "cluster", "node", "_i", _d=(pl.col("_to") - pl.col("first_ts")).dt.total_microseconds())
    )
    rows = []
    for (prov, clus, node), g in pairs.sort("_d", "_i").group_by(["provider", "cluster", "node"], maintain_order=True):
        d, own = g["_d"].to_numpy(), g["_i"].to_list()
        best, best_n = _best_shift(d, own, tol)
        if abs(best) > tol and best_n >= cfg.clock_offset_min_support:
            rows.append((prov, clus, node, int(np.median(d[np.abs(d - best) <= tol]))))
    return pl.DataFrame(rows, schema=schema, orient="row")


def _best_shift(d: np.ndarray, own: list, tol: int) -> tuple[int, int]:
    """The lag ``x`` (one of the lags ``d``) at which the most distinct own incidents have a
    partner within ``tol``; ties go to the smaller lag (the negative one of two), and no shift (0)
    wins ties. Each incident's windows around its lags are merged, then counted at every lag."""
    d, own = np.asarray(d, dtype=np.int64), np.asarray(own)
    if not len(d):
        return 0, 0
    order = np.lexsort((d, own))
    lag, who = d[order], own[order]
    lo, hi = lag - tol, lag + tol
    # within one incident the windows come sorted: a window starts a merged run unless it
    # overlaps the one before (whose end is the run's end so far, the ends rising too)
    new = np.r_[True, (who[1:] != who[:-1]) | (lo[1:] > hi[:-1])]
    first = np.flatnonzero(new)
    starts, ends = np.sort(lo[first]), np.sort(hi[np.r_[first[1:] - 1, len(lag) - 1]])

    def covering(x: np.ndarray) -> np.ndarray:
        return np.searchsorted(starts, x, "right") - np.searchsorted(ends, x, "left")

    n0 = int(covering(np.array([0]))[0])
    xs = np.unique(d)
    n = covering(xs)
    top = int(n.max())
    if top <= n0:
        return 0, n0
    cand = xs[n == top]
    return int(cand[np.lexsort((cand, np.abs(cand)))[0]]), top


def _empty() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "incident_id": pl.String,
            "provider": pl.String,
            "cluster": pl.String,
            "rack": pl.String,
            "leaf_switch": pl.String,
            "node": pl.String,
            "gpu_pci": pl.String,
            "category": pl.String,
            "domain": pl.String,
            "severity": pl.String,
            "action": pl.String,
            "first_ts": pl.Datetime("us", "UTC"),
            "last_ts": pl.Datetime("us", "UTC"),
            "n_events": pl.UInt32,
            "n_bursts": pl.UInt32,
            "gpus": pl.List(pl.String),
            "xids": pl.List(pl.Int32),
            "sxids": pl.List(pl.Int32),
            "rule_ids": pl.List(pl.String),
            "first_event_id": pl.String,
            "sample": pl.String,
            "rack_incident_id": pl.String,
            "rack_nodes": pl.UInt32,
        }
    )
