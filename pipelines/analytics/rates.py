"""Exposure and failure rates per node, rack, cluster and provider, with exact intervals."""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import polars as pl

from .config import DEFAULT, AnalyticsConfig
from .counting import counted_incident, infrastructure, utc_day
from .stats import bh_reject, node_days_to_separate, poisson_ci, poisson_excess_p, rate_ratio_ci

PER = 1000.0  # rates are failures per 1,000 node-days
# float sums are rounded: their last bits depend on the order rows arrive in (the lake's
# file order, polars' chunks), and the same data must give the same tables
SUM_DECIMALS = 6


def fsum(col: str | pl.Expr) -> pl.Expr:
    """A float column's sum, rounded so it does not depend on the order of the rows."""
    e = pl.col(col) if isinstance(col, str) else col
    return e.sum().round(SUM_DECIMALS)


def exposure(inventory: pl.DataFrame, days: pl.DataFrame) -> pl.DataFrame:
    """Node-days per node: the covered days of its cluster inside its service window.

    ``days``: (provider, cluster, date) for every day the landing folder holds.
    """
    inv = inventory
    for col in ("in_service_from", "in_service_to"):
        if col not in inv.columns:
            inv = inv.with_columns(pl.lit(None, pl.Date).alias(col))
        else:
            inv = inv.with_columns(pl.col(col).cast(pl.Date, strict=False))
    j = inv.join(days, on=["provider", "cluster"], how="inner").filter(
        (pl.col("in_service_from").is_null() | (pl.col("date") >= pl.col("in_service_from")))
        & (pl.col("in_service_to").is_null() | (pl.col("date") <= pl.col("in_service_to")))
    )
    return j.group_by("provider", "cluster", "rack", "node").agg(
        pl.len().cast(pl.Float64).alias("node_days"),
        pl.col("gpus").first().cast(pl.Int64),
        pl.col("date").min().alias("first_day"),
        pl.col("date").max().alias("last_day"),
    )


def _with_ci(df: pl.DataFrame, k: str = "failures", e: str = "node_days") -> pl.DataFrame:
    lo, hi = poisson_ci(df[k].to_numpy(), df[e].to_numpy())
    return df.with_columns(
        rate_per_1k=(pl.col(k) / pl.col(e) * PER), ci_low=pl.Series(lo * PER), ci_high=pl.Series(hi * PER)
    )


def job_interruptions(incidents: pl.DataFrame, failures: pl.DataFrame, cfg: AnalyticsConfig = DEFAULT) -> pl.DataFrame:
    """Failed jobs a node interrupted without a serious incident to show for it: a node-side warning
    (thermal throttling, a hung task) or an NCCL hang localized to it, with no serious incident of
    that node (or its rack) from the job's start to ``attribution_after_s`` after its end."""
    keys = ["provider", "cluster", "node"]
    f = failures.filter(
        pl.col("culprit_node").is_not_null() & (infrastructure() | (pl.col("root_cause") == "collective_timeout"))
    ).select("provider", "cluster", "job_id", pl.col("culprit_node").alias("node"), "started", "ended", "root_cause")
    serious = incidents.filter(counted_incident()).select(*keys, "first_ts")
    after = pl.duration(seconds=cfg.attribution_after_s)
    explained = (
        f.join(serious, on=keys, how="inner")
        .filter((pl.col("first_ts") >= pl.col("started")) & (pl.col("first_ts") <= pl.col("ended") + after))
        .select("provider", "cluster", "job_id")
        .unique()
    )
    return f.join(explained, on=["provider", "cluster", "job_id"], how="anti")


NODE_FAILURE_SCHEMA = pl.Schema(
    {
        "provider": pl.String,
        "cluster": pl.String,
        "node": pl.String,
        "kind": pl.String,
        "ref": pl.String,
        "category": pl.String,
        "ts": pl.Datetime("us", "UTC"),
        "day": pl.Date,
    }
)


def node_failures(incidents: pl.DataFrame, failures: pl.DataFrame, cfg: AnalyticsConfig = DEFAULT) -> pl.DataFrame:
    """One row per failure a node's rate counts (``counting``): ``kind`` ``incident`` (a
    counted incident its rack does not share; ``ref`` its incident id) or ``interruption``
    (``job_interruptions``; ``ref`` the job id, ``ts`` the job's end)."""
    own = incidents.filter(counted_incident() & pl.col("rack_incident_id").is_null()).select(
        "provider",
        "cluster",
        "node",
        kind=pl.lit("incident"),
        ref=pl.col("incident_id") if "incident_id" in incidents.columns else pl.lit(None, pl.String),
        category=pl.col("category"),
        ts=pl.col("first_ts"),
    )
    cut = job_interruptions(incidents, failures, cfg).select(
        "provider",
        "cluster",
        "node",
        kind=pl.lit("interruption"),
        ref=pl.col("job_id"),
        category=pl.col("root_cause"),
        ts=pl.col("ended"),
    )
    out = pl.concat([own.cast(dict(own.schema)), cut.cast(dict(own.schema))]).with_columns(day=utc_day("ts"))
    return out.select([pl.col(c).cast(t) for c, t in NODE_FAILURE_SCHEMA.items()]).sort(
        "provider", "cluster", "node", "ts", "kind", "ref"
    )


def node_health(
    expo: pl.DataFrame,
    incidents: pl.DataFrame,
    failures: pl.DataFrame,
    cfg: AnalyticsConfig = DEFAULT,
    counted: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per node: independent serious incidents (not the rack's), job interruptions without one,
    failures (the two together: what the rate counts, one ``node_failures`` row each), failed jobs
    it caused, GPU-hours lost, and the rate with its exact interval."""
    keys = ["provider", "cluster", "node"]
    counted = node_failures(incidents, failures, cfg) if counted is None else counted
    inc = incidents.filter(counted_incident() & pl.col("rack_incident_id").is_null())
    per_node = inc.group_by(keys).agg(
        pl.col("category").mode().sort().first().alias("top_category"),
        pl.col("first_ts").max().alias("last_incident"),
    )
    tally = counted.group_by(keys).agg(
        (pl.col("kind") == "incident").sum().alias("incidents"),
        (pl.col("kind") == "interruption").sum().alias("interruptions"),
    )
    hits = (
        failures.filter(pl.col("culprit_node").is_not_null() & infrastructure())
        .group_by("provider", "cluster", pl.col("culprit_node").alias("node"))
        .agg(pl.len().alias("failed_jobs"), fsum("gpu_hours_lost").alias("gpu_hours_lost"))
    )
    df = (
        expo.join(per_node, on=keys, how="left")
        .join(tally, on=keys, how="left")
        .join(hits, on=keys, how="left")
        .with_columns(
            pl.col("incidents").fill_null(0).cast(pl.Int64),
            pl.col("interruptions").fill_null(0).cast(pl.Int64),
            pl.col("failed_jobs").fill_null(0).cast(pl.Int64),
            pl.col("gpu_hours_lost").fill_null(0.0),
        )
        .with_columns(failures=pl.col("incidents") + pl.col("interruptions"))
    )
    return _with_ci(df).sort("provider", "cluster", "node")


def group_health(nodes: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    g = nodes.group_by(keys).agg(
        fsum("node_days").alias("node_days"),
        pl.col("incidents").sum(),
        pl.col("interruptions").sum(),
        pl.col("failures").sum(),
        pl.col("failed_jobs").sum(),
        fsum("gpu_hours_lost").alias("gpu_hours_lost"),
        pl.len().alias("n_nodes"),
        fsum(pl.col("node_days") * pl.col("gpus") * 24).alias("gpu_hours"),
    )
    return _with_ci(g).sort(keys)


def scoreboard(
    nodes: pl.DataFrame, failures: pl.DataFrame, job_gpus: int = 1024, cfg: AnalyticsConfig = DEFAULT
) -> pl.DataFrame:
    """Provider and cluster rows: rates, intervals, GPU-hours lost, projected MTTF."""
    rows = []
    for level, keys in (("provider", ["provider"]), ("cluster", ["provider", "cluster"])):
        g = group_health(nodes, keys)
        f = failures.group_by(keys).agg(
            pl.len().alias("failed_jobs_all"),
            infrastructure().sum().alias("infra_failed_jobs"),
            fsum(pl.col("gpu_hours_lost").filter(infrastructure())).alias("infra_gpu_hours_lost"),
        )
        g = g.drop("failed_jobs").join(f, on=keys, how="left").with_columns(level=pl.lit(level))
        if level == "provider":
            g = g.with_columns(cluster=pl.lit(None, pl.String))
        rows.append(g)
    sb = pl.concat(rows, how="diagonal_relaxed")
    nodes_per_job = job_gpus / cfg.gpus_per_node
    per_hour = pl.col("rate_per_1k") / PER / 24.0
    return (
        sb.with_columns(
            pl.col("failed_jobs_all").fill_null(0),
            pl.col("infra_failed_jobs").fill_null(0),
            pl.col("infra_gpu_hours_lost").fill_null(0.0),
            infra_gpu_hours_lost_per_1k_gpu_hours=pl.col("infra_gpu_hours_lost").fill_null(0.0)
            / pl.col("gpu_hours")
            * 1000,
            mttf_hours_1024_gpus=pl.when(per_hour > 0).then(1.0 / (per_hour * nodes_per_job)),
        )
        .select(
            "level",
            "provider",
            "cluster",
            "n_nodes",
            "node_days",
            "gpu_hours",
            "incidents",
            "interruptions",
            "failures",
            "rate_per_1k",
            "ci_low",
            "ci_high",
            "failed_jobs_all",
            "infra_failed_jobs",
            "infra_gpu_hours_lost",
            "infra_gpu_hours_lost_per_1k_gpu_hours",
            "mttf_hours_1024_gpus",
        )
        .sort("level", "provider", "cluster", nulls_last=False)
    )


def failure_causes(incidents: pl.DataFrame, failures: pl.DataFrame) -> pl.DataFrame:
    """Share of job failures by root cause per provider (like Llama 3's interruption table)."""
    f = failures.group_by("provider", "root_cause", "domain").agg(
        pl.len().alias("failed_jobs"), fsum("gpu_hours_lost").alias("gpu_hours_lost")
    )
    return f.with_columns(
        share=pl.col("failed_jobs") / pl.col("failed_jobs").sum().over("provider"),
        gpu_hours_share=(
            pl.col("gpu_hours_lost") / pl.col("gpu_hours_lost").sum().over("provider").round(SUM_DECIMALS)
        ),
    ).sort("provider", "failed_jobs", "root_cause", "domain", descending=[False, True, False, False])


def provider_comparison(sb: pl.DataFrame, level: str = "provider", conf: float = 0.95) -> pl.DataFrame:
    """Pairwise rate ratios with exact intervals, and whether the data can tell them apart."""
    rows = sb.filter(pl.col("level") == level).to_dicts()
    out = []
    for a, b in itertools.combinations(rows, 2):
        name_a = a["provider"] if level == "provider" else f"{a['provider']}/{a['cluster']}"
        name_b = b["provider"] if level == "provider" else f"{b['provider']}/{b['cluster']}"
        ratio, lo, hi = rate_ratio_ci(a["failures"], a["node_days"], b["failures"], b["node_days"], conf)
        ra, rb = a["failures"] / max(a["node_days"], 1e-9), b["failures"] / max(b["node_days"], 1e-9)
        need = node_days_to_separate(ra, rb)
        distinct = bool(np.isfinite(lo) and (lo > 1 or hi < 1))
        have = min(a["node_days"], b["node_days"])
        more = 0.0 if distinct else max(need - have, 0.0)
        verdict = (
            f"{name_a} fails {ratio:.2f}x as often as {name_b} (95% CI {lo:.2f}-{hi:.2f}): a real difference"
            if distinct
            else f"cannot tell {name_a} and {name_b} apart yet (ratio {ratio:.2f}, 95% CI {lo:.2f}-{hi:.2f}); "
            f"about {more:,.0f} more node-days each would be needed"
            if np.isfinite(more)
            else f"cannot tell {name_a} and {name_b} apart: rates look equal"
        )
        out.append(
            {
                "level": level,
                "a": name_a,
                "b": name_b,
                "rate_a_per_1k": ra * PER,
                "rate_b_per_1k": rb * PER,
                "ratio": ratio,
                "ci_low": lo,
                "ci_high": hi,
                "distinguishable": distinct,
                "more_node_days_needed": more if np.isfinite(more) else None,
                "statement": verdict,
            }
        )
    schema = {
        "level": pl.String,
        "a": pl.String,
        "b": pl.String,
        "rate_a_per_1k": pl.Float64,
        "rate_b_per_1k": pl.Float64,
        "ratio": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "distinguishable": pl.Boolean,
        "more_node_days_needed": pl.Float64,
        "statement": pl.String,
    }
    return pl.DataFrame(out, schema=schema)


def _loo_test(df: pl.DataFrame, k: str, e: str, by: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Expected count and P(X >= k) of each row against the rest of its group (leave-one-out,
    so a lemon does not raise its own baseline)."""
    rest_k = (df[k].sum() if not by else df.select(pl.col(k).sum().over(by))[k]) - df[k]
    rest_e = (df[e].sum() if not by else df.select(pl.col(e).sum().over(by))[e]) - df[e]
    base = (np.asarray(rest_k, dtype=float) + 0.5) / np.maximum(np.asarray(rest_e, dtype=float), 1e-9)
    expected = base * df[e].to_numpy()
    return expected, poisson_excess_p(df[k].to_numpy(), expected)


def lemon_nodes(
    nodes: pl.DataFrame, incidents: pl.DataFrame, events: pl.DataFrame, cfg: AnalyticsConfig = DEFAULT
) -> pl.DataFrame:
    """Nodes that fail more than the rest of their cluster, tested four ways (all serious incidents,
    one repeating signature, one GPU failing the same hardware way again, Xid 13/31 repeating on one
    GPU), each kind Benjamini-Hochberg corrected over everything it could have flagged."""
    keys = ["provider", "cluster", "node"]
    expected, p_all = _loo_test(nodes, "incidents", "node_days", ["provider", "cluster"])
    t_all = nodes.select(*keys, "node_days", "incidents").with_columns(
        expected=pl.Series(expected),
        p_value=pl.Series(p_all),
        kind=pl.lit("rate"),
        detail=pl.format(
            "{} serious incidents in {} node-days vs {} expected",
            "incidents",
            pl.col("node_days").round(1),
            pl.Series(expected).round(2),
        ),
    )
    # a signature is the incident's category and the rule that named it (MCE, Xid 79, ...)
    serious = incidents.filter(counted_incident() & pl.col("rack_incident_id").is_null()).with_columns(
        sig=pl.format("{}/{}", "category", pl.col("rule_ids").list.first())
    )
    per_sig = (
        nodes.select(*keys, "node_days")
        .join(serious.select("provider", "cluster", "sig").unique(), on=["provider", "cluster"])
        .join(serious.group_by(*keys, "sig").len("k"), on=[*keys, "sig"], how="left")
        .with_columns(pl.col("k").fill_null(0).cast(pl.Int64))
    )
    exp_c, p_c = _loo_test(per_sig, "k", "node_days", ["provider", "cluster", "sig"])
    t_cat = per_sig.with_columns(
        expected=pl.Series(exp_c),
        p_value=pl.Series(p_c),
        kind=pl.lit("repeat_signature"),
        detail=pl.format(
            "{} x {} in {} node-days vs {} expected",
            "k",
            "sig",
            pl.col("node_days").round(1),
            pl.Series(exp_c).round(2),
        ),
    )
    t_cat = t_cat.rename({"k": "incidents"}).drop("sig")
    # the per-GPU tests list only GPUs that had an incident; their families are every GPU
    n_gpus = int(nodes["gpus"].fill_null(cfg.gpus_per_node).sum()) if nodes.height else 0
    families = {"repeat_gpu_fault": n_gpus * len(cfg.repeat_gpu_fault_categories), "repeat_user_xid": n_gpus}
    minimum = {"repeat_gpu_fault": cfg.repeat_gpu_fault_incidents}
    tests = pl.concat(
        [
            t.select(*keys, "node_days", "incidents", "expected", "p_value", "kind", "detail")
            for t in (t_all, t_cat, _repeat_gpu_faults(incidents, nodes, cfg), _repeat_user_xids(events, nodes))
        ],
        how="vertical_relaxed",
    )
    # one Benjamini-Hochberg family per kind of test (a node-level rate test should not have
    # to beat the thousands of per-signature and per-GPU tests)
    rej = np.zeros(tests.height, dtype=bool)
    kinds = tests["kind"].to_numpy()
    for kind in np.unique(kinds):
        sel = kinds == kind
        rej[sel] = bh_reject(tests["p_value"].to_numpy()[sel], cfg.fdr, n_tests=families.get(kind))
        rej[sel] &= tests["incidents"].to_numpy()[sel] >= minimum.get(kind, cfg.lemon_min_incidents)
    hits = tests.filter(pl.Series(rej)).sort("p_value")
    lem = hits.group_by(keys, maintain_order=True).agg(
        pl.col("p_value").min(),
        pl.col("kind").unique().sort().str.join("+").alias("evidence_kind"),
        pl.col("detail").str.join("; ").alias("reason"),
    )
    ctx = nodes.select(*keys, "rack", "node_days", "incidents", "top_category", "failed_jobs", "gpu_hours_lost")
    return (
        lem.join(ctx, on=keys, how="left")
        .with_columns(
            expected=pl.Series(
                dict(zip(zip(t_all["provider"], t_all["cluster"], t_all["node"]), expected)).get(k, None)
                for k in zip(lem["provider"], lem["cluster"], lem["node"])
            ),
            action=pl.lit("drain_node"),
        )
        .select(
            "provider",
            "cluster",
            "rack",
            "node",
            "node_days",
            "incidents",
            "expected",
            "p_value",
            "top_category",
            "failed_jobs",
            "gpu_hours_lost",
            "evidence_kind",
            "reason",
            "action",
        )
        .sort("p_value")
    )


def _repeat_gpu_faults(incidents: pl.DataFrame, nodes: pl.DataFrame, cfg: AnalyticsConfig) -> pl.DataFrame:
    """Per GPU and serious hardware category, the most separate incidents inside any window-long
    stretch, against its cluster's other GPUs (per GPU-day): a failing part the node-level tests
    would dilute. The caller corrects over every GPU."""
    keys = ["provider", "cluster", "node"]
    cols = {
        **{k: pl.String for k in keys},
        "node_days": pl.Float64,
        "incidents": pl.Int64,
        "expected": pl.Float64,
        "p_value": pl.Float64,
        "kind": pl.String,
        "detail": pl.String,
    }
    need = {"gpu_pci", "category", "severity", "first_ts", "rack_incident_id"}
    if incidents.is_empty() or not need <= set(incidents.columns):
        return pl.DataFrame(schema=cols)
    inc = incidents.filter(
        counted_incident()
        & pl.col("gpu_pci").is_not_null()
        & pl.col("category").is_in(list(cfg.repeat_gpu_fault_categories))
        & pl.col("rack_incident_id").is_null()
    )
    # per GPU and category, the most incidents inside any window-long stretch (a sliding
    # window over each GPU's few incident times: one row per GPU that had any)
    grouped = inc.group_by(*keys, "gpu_pci", "category").agg(pl.col("first_ts").sort().alias("ts"))
    rows = []
    win = dt.timedelta(days=cfg.repeat_gpu_fault_window_days)
    for r in grouped.iter_rows(named=True):
        ts, best, j = r["ts"], 0, 0
        for i in range(len(ts)):
            while ts[i] - ts[j] > win:
                j += 1
            best = max(best, i - j + 1)
        rows.append(
            {
                **{k: r[k] for k in keys},
                "gpu_pci": r["gpu_pci"],
                "category": r["category"],
                "incidents": best,
                "_own": len(ts),
            }
        )
    if not rows:
        return pl.DataFrame(schema=cols)
    rep = pl.DataFrame(rows)
    # the rest of the cluster's rate of that category per GPU-day
    gpus = nodes.select(*keys, "node_days", pl.col("gpus").fill_null(cfg.gpus_per_node))
    gpu_days = gpus.group_by("provider", "cluster").agg((pl.col("node_days") * pl.col("gpus")).sum().alias("_e"))
    # a node with no exposure (not in the inventory's service window) cannot be tested, nor
    # count towards the rate it is tested against
    exposed = gpus.filter(pl.col("node_days") > 0).select(*keys, "node_days")
    per_cat = inc.join(exposed, on=keys, how="semi").group_by("provider", "cluster", "category").len("_k")
    rep = (
        rep.join(exposed, on=keys, how="inner")
        .join(gpu_days, on=["provider", "cluster"], how="left")
        .join(per_cat, on=["provider", "cluster", "category"], how="left")
    )
    rest_k = rep["_k"].fill_null(0).to_numpy() - rep["_own"].to_numpy()
    rest_e = rep["_e"].to_numpy() - rep["node_days"].to_numpy()
    base = (rest_k + 0.5) / np.maximum(rest_e, 1e-9)
    expected = base * np.minimum(cfg.repeat_gpu_fault_window_days, rep["node_days"].to_numpy())
    p = poisson_excess_p(rep["incidents"].to_numpy(), expected)
    return rep.with_columns(
        node_days=pl.col("node_days").cast(pl.Float64),
        incidents=pl.col("incidents").cast(pl.Int64),
        expected=pl.Series(expected),
        p_value=pl.Series(p),
        kind=pl.lit("repeat_gpu_fault"),
        detail=pl.format(
            "GPU {} had {} separate {} incidents within {} days vs {} expected",
            "gpu_pci",
            "incidents",
            "category",
            pl.lit(int(cfg.repeat_gpu_fault_window_days)),
            pl.Series(expected).round(3),
        ),
    ).select(list(cols))


def _repeat_user_xids(events: pl.DataFrame, nodes: pl.DataFrame) -> pl.DataFrame:
    """Per GPU: Xid 13/31 bursts (an hour apart count as separate) against its cluster."""
    x = events.filter(
        pl.col("xid").is_in([13, 31])
        & pl.col("gpu_pci").is_not_null()
        & pl.col("node").is_not_null()
        & pl.col("ts").is_not_null()
    )
    keys = ["provider", "cluster", "node"]
    per_gpu = (
        x.with_columns(_h=pl.col("ts").dt.truncate("1h"))
        .group_by(*keys, "gpu_pci")
        .agg(pl.col("_h").n_unique().alias("incidents"))
    )
    # every GPU of every node is at risk: exposure in GPU-days
    gpus = nodes.select(*keys, "node_days", pl.col("gpus").fill_null(8))
    cl = gpus.group_by("provider", "cluster").agg((pl.col("node_days") * pl.col("gpus")).sum().alias("_e"))
    tot = per_gpu.group_by("provider", "cluster").agg(pl.col("incidents").sum().alias("_k"))
    t = (
        per_gpu.join(gpus.select(*keys, "node_days"), on=keys, how="left")
        .join(cl, on=["provider", "cluster"])
        .join(tot, on=["provider", "cluster"])
    )
    if t.is_empty():
        return pl.DataFrame(
            schema={
                **{k: pl.String for k in keys},
                "node_days": pl.Float64,
                "incidents": pl.Int64,
                "expected": pl.Float64,
                "p_value": pl.Float64,
                "kind": pl.String,
                "detail": pl.String,
            }
        )
    base = (t["_k"].to_numpy() - t["incidents"].to_numpy() + 0.5) / np.maximum(
        t["_e"].to_numpy() - t["node_days"].to_numpy(), 1e-9
    )
    expected = base * t["node_days"].to_numpy()
    p = poisson_excess_p(t["incidents"].to_numpy(), expected)
    return t.with_columns(
        expected=pl.Series(expected),
        p_value=pl.Series(p),
        kind=pl.lit("repeat_user_xid"),
        incidents=pl.col("incidents").cast(pl.Int64),
        detail=pl.format(
            "GPU {} raised Xid 13/31 in {} separate hours vs {} expected",
            "gpu_pci",
            "incidents",
            pl.Series(expected).round(2),
        ),
    )


def rack_hotspots(nodes: pl.DataFrame, incidents: pl.DataFrame, cfg: AnalyticsConfig = DEFAULT) -> pl.DataFrame:
    """Racks failing more than their cluster (the rate test, on every node of the rack but the
    one with the most incidents), or whose nodes failed together (the correlation test: rack
    incidents); ``flagged_by`` says which."""
    keys = ["provider", "cluster", "rack"]
    racked = nodes.filter(pl.col("rack").is_not_null())
    racks = group_health(racked, keys)
    # the rate test leaves out the rack's worst node: one bad node (a lemon) is not a bad rack
    worst = (
        racked.sort(["incidents", "node"], descending=[True, False])
        .group_by(keys, maintain_order=True)
        .agg(pl.col("incidents").first().alias("_wk"), pl.col("node_days").first().alias("_we"))
    )
    racks = racks.join(worst, on=keys, how="left").with_columns(
        _k=pl.col("incidents").sum().over("provider", "cluster") - pl.col("incidents"),
        _e=pl.col("node_days").sum().over("provider", "cluster") - pl.col("node_days"),
        tested_incidents=(pl.col("incidents") - pl.col("_wk")).cast(pl.Int64),
    )
    tested = racks["tested_incidents"].to_numpy()
    exposure = racks["node_days"].to_numpy() - racks["_we"].to_numpy()
    expected = (racks["_k"].to_numpy() + 0.5) / np.maximum(racks["_e"].to_numpy(), 1e-9) * exposure
    p = poisson_excess_p(tested, expected)
    rej = bh_reject(p, cfg.fdr) & (tested >= cfg.rack_min_incidents)
    corr = (
        incidents.filter(pl.col("rack_incident_id").is_not_null())
        .group_by("provider", "cluster", "rack")
        .agg(
            pl.col("rack_incident_id").n_unique().alias("correlated_incidents"),
            pl.col("category").mode().sort().first().alias("correlated_category"),
            pl.col("rack_nodes").max().alias("max_nodes_together"),
        )
    )
    racks = (
        racks.with_columns(expected=pl.Series(expected), p_value=pl.Series(p), _stat=pl.Series(rej))
        .join(corr, on=["provider", "cluster", "rack"], how="left")
        .with_columns(pl.col("correlated_incidents").fill_null(0))
    )
    hot = racks.filter(pl.col("_stat") | (pl.col("correlated_incidents") > 0))
    return (
        hot.with_columns(
            reason=pl.concat_str(
                [
                    pl.when(pl.col("_stat")).then(
                        pl.format(
                            "{} incidents on its nodes but the worst vs {} expected (p={})",
                            "tested_incidents",
                            pl.col("expected").round(2),
                            pl.col("p_value").round_sig_figs(2),
                        )
                    ),
                    pl.when(pl.col("correlated_incidents") > 0).then(
                        pl.format(
                            "{} times {} or more of its nodes failed together (up to {} at once, {})",
                            "correlated_incidents",
                            pl.lit(cfg.rack_incident_min_nodes),
                            "max_nodes_together",
                            "correlated_category",
                        )
                    ),
                ],
                separator="; ",
                ignore_nulls=True,
            ),
            flagged_by=pl.concat_str(
                [
                    pl.when(pl.col("_stat")).then(pl.lit("rate")),
                    pl.when(pl.col("correlated_incidents") > 0).then(pl.lit("correlation")),
                ],
                separator="+",
                ignore_nulls=True,
            ),
            action=pl.when(pl.col("correlated_category") == "network")
            .then(pl.lit("check_network"))
            .otherwise(pl.lit("contact_provider")),
        )
        .select(
            "provider",
            "cluster",
            "rack",
            "n_nodes",
            "node_days",
            "incidents",
            "tested_incidents",
            "expected",
            "p_value",
            "correlated_incidents",
            "correlated_category",
            "max_nodes_together",
            "flagged_by",
            "reason",
            "action",
        )
        .sort("p_value")
    )


def covered_days(partitions: list[tuple[str, str, dt.date]]) -> pl.DataFrame:
    return pl.DataFrame(
        partitions, schema={"provider": pl.String, "cluster": pl.String, "date": pl.Date}, orient="row"
    ).unique()
