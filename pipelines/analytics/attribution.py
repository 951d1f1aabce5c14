"""Attribute each job that did not complete to a root cause and, where possible, a culprit node:
the causally earliest specific fault wins over its symptoms, and a hang is localized by the
flight recorder or the missing ranks (docs/analytics.md, "Root cause and culprit")."""

from __future__ import annotations

import polars as pl

from .config import DEFAULT, AnalyticsConfig

JOB_KEY = ["provider", "cluster", "job_id"]
NOT_FAILED = ("COMPLETED", "RUNNING", "PENDING", "REQUEUED", "RESIZING", "SUSPENDED")
_STATE_CAUSE = {  # when no evidence explains the end, the state says what the scheduler did
    "TIMEOUT": ("scheduler", 0.9, "restart_job"),
    "CANCELLED": ("scheduler", 0.8, "none"),
    "PREEMPTED": ("scheduler", 0.9, "restart_job"),
    "DEADLINE": ("scheduler", 0.9, "none"),
    "NODE_FAIL": ("scheduler", 0.5, "drain_node"),
    "BOOT_FAIL": ("scheduler", 0.5, "reboot_node"),
    "OUT_OF_MEMORY": ("user_app", 0.8, "fix_application"),
}
_TIER = {"hardware": 1, "software": 1, "user": 2}
_SEV = {"info": 0, "warning": 1, "error": 2, "critical": 3}
DEFAULT_ACTION = {
    "hardware": "drain_node",
    "software": "reboot_node",
    "user": "fix_application",
    "symptom": "restart_job",
    "unknown": "none",
}

JOB_FAILURE_COLUMNS = [
    "job_id",
    "provider",
    "cluster",
    "job_name",
    "user",
    "state",
    "started",
    "ended",
    "nodes",
    "gpus",
    "gpu_hours_lost",
    "root_cause",
    "domain",
    "culprit_node",
    "culprit_gpu",
    "confidence",
    "evidence",
    "action",
    "decided_by",
    "node_list",
]


def attribute_failures(
    jobs: pl.DataFrame,
    events: pl.DataFrame,
    flight: pl.DataFrame | None,
    domains: dict[str, str],
    cfg: AnalyticsConfig = DEFAULT,
) -> pl.DataFrame:
    """One row per failed job (see ``JOB_FAILURE_COLUMNS``; docs/tables.md, ``job_failures``)."""
    failed = jobs.filter(~pl.col("state").is_in(NOT_FAILED) & pl.col("end").is_not_null())
    if failed.is_empty():
        return pl.DataFrame(schema=_schema())
    failed = failed.with_columns(
        start=pl.coalesce("start", "end"),
        n_gpus=pl.coalesce(pl.col("gpus"), pl.col("n_nodes") * cfg.gpus_per_node).cast(pl.Int64),
    )
    ev = _evidence(failed, events, cfg)
    decided = _decide(failed, ev, flight, domains, cfg)
    hours = (pl.col("end") - pl.col("start")).dt.total_seconds() / 3600.0
    out = failed.join(decided, on=JOB_KEY, how="left").with_columns(
        started=pl.col("start"),
        ended=pl.col("end"),
        nodes=pl.col("n_nodes").cast(pl.Int64),
        gpus=pl.col("n_gpus"),
        gpu_hours_lost=(hours * pl.col("n_gpus")).round(3),
        node_list=pl.col("nodelist"),
    )
    return out.select(JOB_FAILURE_COLUMNS).sort("ended", "provider", "cluster", "job_id")


def _evidence(failed: pl.DataFrame, events: pl.DataFrame, cfg: AnalyticsConfig) -> pl.DataFrame:
    cols = [
        "ts",
        "node",
        "gpu_pci",
        "category",
        "domain",
        "severity",
        "action",
        "rule_id",
        "raw",
        "rank",
        "event_id",
        "repeats",
    ]
    if "repeats" not in events.columns:  # frames built before floods were collapsed
        events = events.with_columns(repeats=pl.lit(1, pl.Int32))
    ev = events.filter(pl.col("category") != "benign")
    # a hang lasts the job's NCCL timeout (its watchdog lines say which): look back past it
    timeouts = (
        ev.filter(pl.col("job_id").is_not_null() & (pl.col("category") == "collective_timeout"))
        .select(*JOB_KEY, _t=pl.col("raw").str.extract(r"Timeout\(ms\)=(\d+)", 1).cast(pl.Float64) / 1000.0)
        .group_by(JOB_KEY)
        .agg(pl.col("_t").max())
    )
    win = (
        failed.join(timeouts, on=JOB_KEY, how="left")
        .select(
            *JOB_KEY,
            "start",
            "end",
            pl.col("nodes").alias("node"),
            _back=pl.max_horizontal(
                pl.lit(cfg.attribution_before_s), pl.col("_t").fill_null(0) + cfg.attribution_after_s * 2
            ),
        )
        .explode("node")
    )
    # kernel and slurmctld lines about the job's nodes, in the window around its end
    side = ev.filter(pl.col("job_id").is_null() & pl.col("node").is_not_null()).select("provider", "cluster", *cols)
    near = (
        win.join(side, on=["provider", "cluster", "node"], how="inner")
        .filter(
            (
                pl.col("ts")
                >= pl.max_horizontal(
                    pl.col("end") - pl.duration(seconds=pl.col("_back")), pl.col("start") - pl.duration(seconds=60)
                )
            )
            & (pl.col("ts") <= pl.col("end") + pl.duration(seconds=cfg.attribution_after_s))
            & (pl.col("severity").is_in(["warning", "error", "critical"]) | (pl.col("domain") == "symptom"))
        )
        .with_columns(origin=pl.lit("node"))
        .drop("start", "end", "_back")
    )
    # the job's own output, whenever it was written
    own = (
        ev.filter(pl.col("job_id").is_not_null())
        .select("provider", "cluster", "job_id", *cols)
        .join(failed.select(JOB_KEY), on=JOB_KEY, how="semi")
        .with_columns(origin=pl.lit("job"))
    )
    out = pl.concat([near.select(own.columns), own], how="vertical_relaxed")
    # job output often has no stamp before its first error: such lines count at the job's end
    out = (
        out.join(failed.select(*JOB_KEY, pl.col("end").alias("_end")), on=JOB_KEY, how="left")
        .with_columns(ts=pl.coalesce("ts", "_end"))
        .drop("_end")
    )
    # tiers: 1 hardware/driver error, 2 user-code error, 3 hardware/driver warning (throttling,
    # corrected errors: they explain a job only when nothing stronger does)
    weak = pl.col("domain").is_in(["hardware", "software"]) & (pl.col("severity") == "warning")
    return out.with_columns(
        tier=pl.when(weak)
        .then(pl.lit(3, pl.Int8))
        .otherwise(pl.col("domain").replace_strict(_TIER, default=None, return_dtype=pl.Int8)),
        sev=pl.col("severity").replace_strict(_SEV, default=0, return_dtype=pl.Int8),
    )


def _decide(
    failed: pl.DataFrame, ev: pl.DataFrame, flight: pl.DataFrame | None, domains: dict[str, str], cfg: AnalyticsConfig
) -> pl.DataFrame:
    firsts = ev.group_by(JOB_KEY).agg(
        pl.col("ts").filter(pl.col("tier") == 1).min().alias("_hw"),
        pl.col("ts").filter(pl.col("tier") == 2).min().alias("_user"),
        (pl.col("tier") == 3).any().alias("_weak"),
        (pl.col("category") == "collective_timeout").any().alias("_ct"),
        (pl.col("category") == "scheduler").any().alias("_sched"),
        (pl.col("category") == "unknown").any().alias("_unk"),
    )
    mask = pl.duration(seconds=cfg.hardware_masks_user_s)
    firsts = firsts.with_columns(
        chosen=(
            pl.when(
                pl.col("_hw").is_not_null() & (pl.col("_user").is_null() | (pl.col("_hw") <= pl.col("_user") + mask))
            )
            .then(pl.lit("hw"))
            .when(pl.col("_user").is_not_null())
            .then(pl.lit("user"))
            .when(pl.col("_weak"))
            .then(pl.lit("weak"))
            .when(pl.col("_ct"))
            .then(pl.lit("ct"))
            .when(pl.col("_sched"))
            .then(pl.lit("sched"))
            .when(pl.col("_unk"))
            .then(pl.lit("unknown"))
            .otherwise(pl.lit(None, pl.String))
        )
    )
    ev = ev.join(firsts.select(*JOB_KEY, "chosen"), on=JOB_KEY, how="inner")
    pick = (
        ((pl.col("chosen") == "hw") & (pl.col("tier") == 1))
        | ((pl.col("chosen") == "user") & (pl.col("tier") == 2))
        | ((pl.col("chosen") == "weak") & (pl.col("tier") == 3))
        | ((pl.col("chosen") == "ct") & (pl.col("category") == "collective_timeout"))
        | ((pl.col("chosen") == "sched") & (pl.col("category") == "scheduler"))
        | ((pl.col("chosen") == "unknown") & (pl.col("category") == "unknown"))
    )
    # earliest deciding line; at equal times the more severe, node-side first, then by
    # event id (a total order: the same data read in any order decides the same line)
    best = (
        ev.filter(pick)
        .sort(
            [*JOB_KEY, "ts", "sev", "origin", "event_id"],
            descending=[False, False, False, False, True, True, False],
            nulls_last=True,
        )
        .group_by(JOB_KEY, maintain_order=True)
        .first()
    )
    counts = ev.group_by(JOB_KEY).agg(
        pl.col("repeats").fill_null(1).filter(pl.col("category") == "collective_timeout").sum().alias("_n_timeouts"),
        pl.col("rank").filter(pl.col("category") == "collective_timeout").drop_nulls().unique().alias("_timeout_ranks"),
    )
    d = (
        failed.select(*JOB_KEY, "state", "nodes", "n_gpus", "end")
        .join(best, on=JOB_KEY, how="left")
        .join(counts, on=JOB_KEY, how="left")
    )
    d = _localize_hangs(d, flight, cfg)
    st = pl.col("state").str.split(" ").list.first()
    st_cat = st.replace_strict({k: v[0] for k, v in _STATE_CAUSE.items()}, default="unknown", return_dtype=pl.String)
    st_conf = st.replace_strict({k: v[1] for k, v in _STATE_CAUSE.items()}, default=0.2, return_dtype=pl.Float64)
    st_act = st.replace_strict({k: v[2] for k, v in _STATE_CAUSE.items()}, default="none", return_dtype=pl.String)
    scheduler_ended = st.is_in(["TIMEOUT", "CANCELLED", "PREEMPTED", "DEADLINE"])
    by_state = (
        pl.col("chosen").is_null()
        | ((pl.col("chosen") == "unknown") & st.is_in(list(_STATE_CAUSE)))
        | ((pl.col("chosen") == "user") & scheduler_ended)
    )
    # only timeouts in the logs, but the dumps show ranks that never joined the collective the
    # others wait in: they were behind in the program, the taxonomy's collective desync
    desync = ~by_state & (pl.col("chosen") == "ct") & pl.col("_not_joined")
    root = pl.when(by_state).then(st_cat).when(desync).then(pl.lit("user_app")).otherwise(pl.col("category"))
    conf = (
        pl.when(by_state)
        .then(st_conf)
        .when(pl.col("chosen") == "hw")
        .then(pl.when(pl.col("_n_timeouts") > 0).then(0.95).otherwise(0.85))
        .when(pl.col("chosen") == "user")
        .then(0.85)
        .when(pl.col("chosen") == "weak")
        .then(0.6)
        .when(pl.col("chosen") == "ct")
        .then(pl.when(pl.col("_hang_node").is_not_null()).then(0.6).otherwise(0.4))
        .when(pl.col("chosen") == "sched")
        .then(0.7)
        .otherwise(0.3)
    )
    culprit = (
        pl.when(pl.col("chosen").is_in(["hw", "user", "weak"]))
        .then(pl.coalesce("node", "_rank_node"))
        .when(pl.col("chosen") == "ct")
        .then(pl.col("_hang_node"))
        .when(pl.col("chosen") == "sched")
        .then(pl.col("node"))
    )
    decided_by = (
        pl.when(by_state)
        .then(pl.format("state:{}", st))
        .when(pl.col("chosen") == "ct")
        .then(pl.format("{}+{}", pl.col("rule_id"), pl.col("_hang_how")))
        .otherwise(pl.format("{}:{}", pl.col("origin"), pl.col("rule_id")))
    )
    evidence = (
        pl.when(by_state & pl.col("raw").is_null())
        .then(pl.format("sacct state {}", pl.col("state")))
        .otherwise(
            pl.concat_str(
                [
                    pl.format(
                        "[{}] {} ", pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%SZ"), pl.col("node").fill_null("?")
                    ),
                    pl.col("raw").str.split("\n").list.first().str.slice(0, 300),
                    pl.when(pl.col("_n_timeouts") > 0)
                    .then(
                        pl.format(
                            " (+{} watchdog timeout line(s) on {} rank(s))",
                            pl.col("_n_timeouts"),
                            pl.col("_timeout_ranks").list.len(),
                        )
                    )
                    .otherwise(pl.lit("")),
                    pl.when(pl.col("_hang_how").is_not_null())
                    .then(pl.format("; culprit by {}", pl.col("_hang_how")))
                    .otherwise(pl.lit("")),
                ],
                ignore_nulls=True,
            )
        )
    )
    return (
        d.with_columns(
            root_cause=root,
            confidence=conf,
            culprit_node=culprit,
            culprit_gpu=pl.when(pl.col("chosen").is_in(["hw", "user", "weak"])).then(pl.col("gpu_pci")),
            evidence=evidence,
            decided_by=decided_by,
            _st_act=st_act,
            _desync=desync,
        )
        .with_columns(
            domain=pl.col("root_cause").replace_strict(domains, default="unknown", return_dtype=pl.String),
        )
        .with_columns(
            action=pl.when(by_state)
            .then(pl.col("_st_act"))
            .when(pl.col("_desync"))
            .then(pl.lit("fix_application"))
            .otherwise(
                pl.coalesce(
                    pl.when(pl.col("action") != "none").then(pl.col("action")),
                    pl.col("domain").replace_strict(DEFAULT_ACTION, default="none", return_dtype=pl.String),
                )
            ),
        )
        .select(
            *JOB_KEY,
            "root_cause",
            "domain",
            "culprit_node",
            "culprit_gpu",
            "confidence",
            "evidence",
            "action",
            "decided_by",
        )
    )


def _localize_hangs(d: pl.DataFrame, flight: pl.DataFrame | None, cfg: AnalyticsConfig) -> pl.DataFrame:
    """Culprit of an all-ranks-timed-out hang: ranks that never enqueued the collective the others
    wait in (a desync, ``_not_joined``); else ranks whose last completed collective lags; else the
    node whose ranks are missing from the timeout reports."""
    gpn = cfg.gpus_per_node
    d = d.with_columns(_rank_node=pl.col("nodes").list.get(pl.col("rank") // gpn, null_on_oob=True))
    none = pl.lit(None, pl.List(pl.Int64))
    if flight is not None and flight.height:
        f = flight.select("provider", "cluster", "job_id", "rank", "last_enqueued", "last_completed")
        hi = f.group_by(JOB_KEY).agg(
            pl.col("last_enqueued").max().alias("_enq"),
            pl.col("last_completed").min().alias("_lo"),
            pl.col("last_completed").max().alias("_hi"),
        )
        f = f.join(hi, on=JOB_KEY)
        behind = (
            f.filter(pl.col("last_enqueued") < pl.col("_enq"))
            .group_by(JOB_KEY)
            .agg(pl.col("rank").unique().sort().alias("_behind_ranks"))
        )
        lag = (
            f.filter((pl.col("last_completed") == pl.col("_lo")) & (pl.col("_lo") < pl.col("_hi")))
            .group_by(JOB_KEY)
            .agg(pl.col("rank").unique().sort().alias("_lag_ranks"))
        )
        d = d.join(behind, on=JOB_KEY, how="left").join(lag, on=JOB_KEY, how="left")
    else:
        d = d.with_columns(_behind_ranks=none, _lag_ranks=none)
    behind_nodes = pl.col("_behind_ranks").list.eval(pl.element() // gpn).list.unique()
    lag_nodes = pl.col("_lag_ranks").list.eval(pl.element() // gpn).list.unique()
    all_ranks = pl.int_ranges(0, pl.col("nodes").list.len() * gpn)
    missing = all_ranks.list.set_difference(pl.col("_timeout_ranks").cast(pl.List(pl.Int64)))
    miss_nodes = missing.list.eval(pl.element() // gpn).list.unique()
    one_behind = behind_nodes.list.len() == 1
    one_lag = lag_nodes.list.len() == 1
    one_miss = (miss_nodes.list.len() == 1) & (pl.col("_timeout_ranks").list.len() > 0)
    return d.with_columns(
        _hang_node=pl.when(one_behind)
        .then(pl.col("nodes").list.get(behind_nodes.list.first(), null_on_oob=True))
        .when(one_lag)
        .then(pl.col("nodes").list.get(lag_nodes.list.first(), null_on_oob=True))
        .when(one_miss)
        .then(pl.col("nodes").list.get(miss_nodes.list.first(), null_on_oob=True)),
        _hang_how=pl.when(one_behind)
        .then(pl.lit("flight_recorder_not_joined"))
        .when(one_lag)
        .then(pl.lit("flight_recorder"))
        .when(one_miss)
        .then(pl.lit("missing_rank")),
        _not_joined=one_behind.fill_null(False),
    )


def _schema() -> dict:
    s = pl.String
    return {
        "job_id": s,
        "provider": s,
        "cluster": s,
        "job_name": s,
        "user": s,
        "state": s,
        "started": pl.Datetime("us", "UTC"),
        "ended": pl.Datetime("us", "UTC"),
        "nodes": pl.Int64,
        "gpus": pl.Int64,
        "gpu_hours_lost": pl.Float64,
        "root_cause": s,
        "domain": s,
        "culprit_node": s,
        "culprit_gpu": s,
        "confidence": pl.Float64,
        "evidence": s,
        "action": s,
        "decided_by": s,
        "node_list": s,
    }
