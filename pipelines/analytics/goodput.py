"""What failures cost: each failed job's lost work (since its last checkpoint, plus the
restart until its resubmission printed progress), drained nodes, goodput and the effective
price per useful GPU-hour per provider and cluster, with 95% intervals (docs/costs.md)."""

from __future__ import annotations

import itertools
import math

import polars as pl
from scipy import stats

from .prices import price_days

KEY = ["provider", "cluster", "job_id"]
INFRA_DOMAINS = ("hardware", "software")  # hardware (network included) and driver/firmware
# a resubmission with the same name counts as the failed job's restart when submitted from a
# minute before its end to a day after it
RESUME_BEFORE_S, RESUME_WITHIN_S = 60.0, 86_400.0
# controller lines that drain a node or mark it down (models/rules/slurm.yaml), and the line a
# boot prints once per GPU (models/rules/nvrm.yaml): the end of a repair
DRAIN_RULES = ("slurmctld_node_reason_set", "slurmctld_nodes_not_responding_down")
BOOT_RULE = "nvrm_gpu_identity"
Z = float(stats.norm.ppf(0.975))
Z_POWER = float(stats.norm.ppf(0.8))
LOST_COLUMNS = (
    "checkpoint_at",
    "lost_work_gpu_hours",
    "lost_work_method",
    "resumed_by",
    "restart_s",
    "restart_wait_s",
    "restart_gpu_hours",
    "restart_method",
    "lost_gpu_hours",
    "lost_gpu_hours_low",
    "lost_gpu_hours_high",
    "ettr",
)


def _secs(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    return (a - b).dt.total_microseconds() / 1e6


SAVE_GAP_S = 120.0  # save lines closer than this are one save (a stack prints several per save)


def job_progress(markers: pl.DataFrame) -> pl.DataFrame:
    """Per job with markers: the time of its first progress line (null when that line has no
    time: a later line's stamp says nothing about it), its last progress line, last checkpoint
    save and first load, its saves (``SAVE_GAP_S`` apart) and their median interval."""
    m = pl.col("marker")
    ts = pl.col("ts")
    markers = markers.filter(m.is_in(["progress", "checkpoint_save", "checkpoint_load"]))  # not rank lines
    per = (
        markers.sort("line_no")
        .group_by(KEY)
        .agg(
            first_progress=ts.filter(m == "progress").first(),
            last_progress=ts.filter(m == "progress").max(),
            last_save=ts.filter(m == "checkpoint_save").max(),
            n_saves=(m == "checkpoint_save").sum().cast(pl.Int64),
            first_load=ts.filter(m == "checkpoint_load").min(),
        )
    )
    saves = markers.filter((m == "checkpoint_save") & ts.is_not_null()).sort(*KEY, "ts")
    gap = _secs(ts, ts.shift(1).over(KEY))
    saves = saves.with_columns(_gap=gap).filter(pl.col("_gap").is_null() | (pl.col("_gap") > SAVE_GAP_S))
    saves = saves.with_columns(_gap=gap)  # between the first lines of consecutive saves
    cadence = saves.group_by(KEY).agg(
        first_save=ts.min(),
        save_every_s=pl.col("_gap").drop_nulls().median(),
    )
    return per.join(cadence, on=KEY, how="left")


def add_lost_work(
    failures: pl.DataFrame, jobs: pl.DataFrame, progress: pl.DataFrame, outputs: pl.DataFrame | None = None
) -> pl.DataFrame:
    """``failures`` (job_failures) with ``LOST_COLUMNS``: lost work since the last save (else the
    whole run, an upper bound; estimated without kept output), the restart of the same-named
    resubmission, lost GPU-hours with bounds, ETTR. ``outputs``: jobs with output (default: markers)."""
    have = (outputs if outputs is not None else progress).select(KEY).unique().with_columns(_out=pl.lit(True))
    f = failures.join(progress.select(*KEY, "last_save"), on=KEY, how="left")
    f = f.join(have, on=KEY, how="left").with_columns(pl.col("_out").fill_null(False))
    slack = pl.duration(seconds=RESUME_BEFORE_S)
    saved = (
        pl.col("last_save").is_not_null()
        & (pl.col("last_save") >= pl.col("started") - slack)
        & (pl.col("last_save") <= pl.col("ended") + slack)
    )
    elapsed = _secs(pl.col("ended"), pl.col("started")).clip(lower_bound=0)
    f = f.with_columns(
        checkpoint_at=pl.when(saved).then(pl.min_horizontal("last_save", "ended")),
        _elapsed=elapsed,
    ).with_columns(
        _lost_s=pl.when(pl.col("checkpoint_at").is_not_null())
        .then(_secs(pl.col("ended"), pl.col("checkpoint_at")).clip(lower_bound=0))
        .otherwise(pl.col("_elapsed")),
        lost_work_method=pl.when(pl.col("checkpoint_at").is_not_null())
        .then(pl.lit("checkpoint"))
        .when(pl.col("_out"))
        .then(pl.lit("no_checkpoint_upper_bound"))
        .otherwise(pl.lit("estimated_no_output")),
    )

    # the resubmission: the first job of the same name and user submitted around or after the end
    cand = jobs.filter(pl.col("start").is_not_null() & pl.col("job_name").is_not_null()).select(
        "provider",
        "cluster",
        "user",
        "job_name",
        pl.col("job_id").alias("_rid"),
        pl.col("submit").alias("_rsub"),
        pl.col("start").alias("_rstart"),
        pl.coalesce(pl.col("gpus"), pl.col("n_nodes") * 8).alias("_rgpus"),
    )
    pairs = (
        f.select(*KEY, "user", "job_name", "ended")
        .join(cand, on=["provider", "cluster", "user", "job_name"], how="inner")
        .filter(
            (pl.col("_rid") != pl.col("job_id"))
            & (pl.col("_rsub") >= pl.col("ended") - slack)
            & (pl.col("_rsub") <= pl.col("ended") + pl.duration(seconds=RESUME_WITHIN_S))
        )
        .sort([*KEY, "_rsub", "_rid"])
        .group_by(KEY, maintain_order=True)
        .first()
        .select(*KEY, "_rid", "_rstart", "_rgpus")
    )
    f = _no_output(_from_attempts(f, jobs, progress), progress, jobs)
    f = f.with_columns(lost_work_gpu_hours=(pl.col("gpus") * pl.col("_lost_s") / 3600).round(6))
    first = progress.select(
        "provider", "cluster", pl.col("job_id").alias("_rid"), pl.col("first_progress").alias("_rprog")
    )
    startup = _startup_by_cluster(jobs, progress)
    f = (
        f.join(pairs, on=KEY, how="left")
        .join(first, on=["provider", "cluster", "_rid"], how="left")
        .join(startup, on=["provider", "cluster"], how="left")
    )
    seen = pl.col("_rprog").is_not_null() & (pl.col("_rprog") >= pl.col("_rstart") - slack)
    f = f.with_columns(
        restart_method=pl.when(pl.col("_rid").is_null())
        .then(pl.lit("not_resumed"))
        .when(seen)
        .then(pl.lit("progress_line"))
        .otherwise(pl.lit("estimated")),
        restart_wait_s=pl.when(pl.col("_rid").is_not_null()).then(
            _secs(pl.col("_rstart"), pl.col("ended")).clip(lower_bound=0)
        ),
    ).with_columns(
        _startup_s=pl.when(pl.col("restart_method") == "progress_line")
        .then(_secs(pl.col("_rprog"), pl.col("_rstart")).clip(lower_bound=0))
        .when(pl.col("restart_method") == "estimated")
        .then(pl.col("_startup_median_s").fill_null(0.0)),
        _startup_hi_s=pl.when(pl.col("restart_method") == "estimated").then(pl.col("_startup_p95_s").fill_null(0.0)),
    )
    restart_h = (pl.col("_rgpus") * pl.col("_startup_s") / 3600).fill_null(0.0)
    restart_hi = pl.when(pl.col("restart_method") == "estimated").then(
        pl.col("_rgpus") * pl.col("_startup_hi_s") / 3600
    )
    upper = pl.col("lost_work_method") != "checkpoint"
    full_run = pl.col("gpus") * pl.col("_elapsed") / 3600
    f = f.with_columns(
        resumed_by=pl.col("_rid"),
        restart_s=(pl.col("restart_wait_s") + pl.col("_startup_s")).round(3),
        restart_wait_s=pl.col("restart_wait_s").round(3),
        restart_gpu_hours=pl.when(pl.col("_rid").is_not_null()).then(restart_h.round(6)),
        lost_gpu_hours=(pl.col("lost_work_gpu_hours") + restart_h).round(6),
        lost_gpu_hours_low=(
            pl.when(upper).then(0.0).otherwise(pl.col("lost_work_gpu_hours"))
            + pl.when(pl.col("restart_method") == "progress_line").then(restart_h).otherwise(0.0)
        ).round(6),
        lost_gpu_hours_high=(
            pl.when(upper).then(full_run).otherwise(pl.col("lost_work_gpu_hours")) + pl.coalesce(restart_hi, restart_h)
        ).round(6),
    )
    # ETTR: the share of the job's time in flight (its run, then the wait until its work
    # resumed) that produced work it kept
    wall = pl.col("_elapsed") + pl.col("restart_s").fill_null(0.0)
    f = f.with_columns(
        ettr=pl.when(wall > 0).then(((pl.col("_elapsed") - pl.col("_lost_s")) / wall).clip(0.0, 1.0).round(6))
    )
    return f.drop(
        "last_save",
        "_out",
        "_elapsed",
        "_lost_s",
        "_rid",
        "_rstart",
        "_rgpus",
        "_rprog",
        "_startup_s",
        "_startup_hi_s",
        "_startup_median_s",
        "_startup_p95_s",
    )


def _from_attempts(f: pl.DataFrame, jobs: pl.DataFrame, progress: pl.DataFrame) -> pl.DataFrame:
    """For a job without kept output: the loss its run's other attempts' checkpoint cadence implies
    (first save as long after the start as theirs, then one each interval), in ``_cad_lost_s``."""
    att = (
        jobs.select(*KEY, "user", "job_name", pl.col("start").alias("_s"))
        .join(progress.select(*KEY, "first_save", "save_every_s"), on=KEY, how="inner")
        .filter(pl.col("save_every_s").is_not_null())
        .with_columns(_off=_secs(pl.col("first_save"), pl.col("_s")) - pl.col("save_every_s"))
        .group_by("provider", "cluster", "user", "job_name")
        .agg(_every=pl.col("save_every_s").median(), _off=pl.col("_off").median())
    )
    f = f.join(att, on=["provider", "cluster", "user", "job_name"], how="left")
    run = pl.col("_elapsed") - pl.col("_off").clip(lower_bound=0)
    k = (run / pl.col("_every")).floor()
    cad = pl.when(pl.col("_every") > 0).then(
        pl.when(k >= 1).then(run - k * pl.col("_every")).otherwise(pl.col("_elapsed"))
    )
    return f.with_columns(_cad_lost_s=cad).drop("_every", "_off")


# a run's name without its trailing tag (``eval-harness-7f3a`` -> ``eval-harness``): runs of one
# family check-point alike (an eval or data job rarely does, a training run does)
NAME_TAG = r"[-_.](?:[0-9a-f]{4,}|[0-9]+)$"
MIN_FAMILY_RUNS = 3  # long runs with output a family needs for its own never-saves share


def _no_output(f: pl.DataFrame, progress: pl.DataFrame, jobs: pl.DataFrame) -> pl.DataFrame:
    """The lost work of a job without kept output: by its attempts' cadence (``_from_attempts``),
    else the loss expected of a run that long under the fleet's cadences and its name family's
    share of runs that never save (docs/costs.md; outputs assumed to go missing at random)."""
    seen = jobs.select(*KEY, "start", "end", "job_name").join(
        progress.select(*KEY, "first_save", "save_every_s", "n_saves", "first_progress"), on=KEY, how="inner"
    )
    cad = (
        seen.filter(pl.col("save_every_s").is_not_null())
        .select(_c=pl.col("save_every_s"), _w=(_secs(pl.col("first_save"), pl.col("start")) - pl.col("save_every_s")))
        .drop_nulls()
        .with_columns(pl.col("_w").clip(lower_bound=0))
    )
    estimated = pl.col("lost_work_method") == "estimated_no_output"
    by_attempts = estimated & pl.col("_cad_lost_s").is_not_null()
    family = pl.col("job_name").str.replace(NAME_TAG, "")
    todo = f.filter(estimated & pl.col("_cad_lost_s").is_null()).select(*KEY, "_elapsed", _fam=family)
    if cad.height and todo.height:
        long_s = float(cad["_c"].quantile(0.95) + cad["_w"].median())
        ran = seen.filter(pl.col("first_progress").is_not_null() & (_secs(pl.col("end"), pl.col("start")) > long_s))
        ran = ran.with_columns(_fam=family, _never=(pl.col("n_saves") == 0).cast(pl.Float64))
        fleet = float(ran["_never"].mean()) if ran.height else 0.0
        fam = ran.group_by("_fam").agg(_pf=pl.col("_never").mean(), _nf=pl.len())
        todo = todo.join(fam, on="_fam", how="left").with_columns(
            _p=pl.when(pl.col("_nf") >= MIN_FAMILY_RUNS).then(pl.col("_pf")).otherwise(pl.lit(fleet))
        )
        e, c, w = pl.col("_elapsed"), pl.col("_c"), pl.col("_w")
        lost = pl.when(e < w + c).then(e).otherwise((e - w) % c)
        exp = (
            todo.join(cad, how="cross")
            .group_by(KEY)
            .agg(_mean=lost.mean(), _e=pl.col("_elapsed").first(), _p=pl.col("_p").first())
            .select(*KEY, _exp=pl.col("_p") * pl.col("_e") + (1 - pl.col("_p")) * pl.col("_mean"))
        )
        f = f.join(exp, on=KEY, how="left")
    else:
        f = f.with_columns(_exp=pl.lit(None, pl.Float64))
    return f.with_columns(
        _lost_s=pl.when(by_attempts)
        .then(pl.col("_cad_lost_s").clip(0.0, None))
        .when(estimated)
        .then(pl.coalesce(pl.col("_exp"), pl.col("_elapsed")))
        .otherwise(pl.col("_lost_s")),
        lost_work_method=pl.when(by_attempts)
        .then(pl.lit("estimated_from_attempts"))
        .otherwise(pl.col("lost_work_method")),
    ).drop("_exp", "_cad_lost_s")


def _startup_by_cluster(jobs: pl.DataFrame, progress: pl.DataFrame) -> pl.DataFrame:
    """Median and 95th percentile of start to first progress line, per cluster: the startup of
    a resubmission whose output shows no progress line (or was not kept)."""
    j = jobs.select(*KEY, "start").join(progress.select(*KEY, "first_progress"), on=KEY, how="inner")
    s = j.with_columns(_s=_secs(pl.col("first_progress"), pl.col("start"))).filter(pl.col("_s") >= 0)
    return s.group_by("provider", "cluster").agg(
        _startup_median_s=pl.col("_s").median(), _startup_p95_s=pl.col("_s").quantile(0.95)
    )


def downtime(events: pl.DataFrame, jobs: pl.DataFrame, days: pl.DataFrame) -> pl.DataFrame:
    """Per drained stretch of a node: drain (or DOWN) line to its next boot or job (``end``), certainly
    until that boot (``end_low``), at most until its next job (``end_high``), never past the covered
    days; overlaps merged. Without the resume line an idle node released unbooted counts as down."""
    ts = pl.Datetime("us", "UTC")
    cols = {"provider": pl.String, "cluster": pl.String, "node": pl.String, "start": ts}
    out_schema = {**cols, "end": ts, "end_low": ts, "end_high": ts}
    node_keys = ["provider", "cluster", "node"]
    d = (
        events.filter(pl.col("rule_id").is_in(DRAIN_RULES) & pl.col("node").is_not_null() & pl.col("ts").is_not_null())
        .select(*node_keys, start=pl.col("ts"))
        .unique()
        .sort("start")
    )
    if d.is_empty():
        return pl.DataFrame(schema=out_schema)
    boots = (
        events.filter((pl.col("rule_id") == BOOT_RULE) & pl.col("node").is_not_null() & pl.col("ts").is_not_null())
        .select(*node_keys, boot=pl.col("ts"))
        .unique()
        .sort("boot")
    )
    starts = (
        jobs.filter(pl.col("start").is_not_null())
        .select("provider", "cluster", pl.col("nodes").alias("node"), job_start=pl.col("start"))
        .explode("node")
        .drop_nulls("node")
        .unique()
        .sort("job_start")
    )
    last = days.group_by("provider", "cluster").agg(
        _cover=(pl.col("date").max() + pl.duration(days=1)).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    )
    asof = dict(by=node_keys, strategy="forward", check_sortedness=False)  # sorted by time above
    d = d.join_asof(boots, left_on="start", right_on="boot", **asof)
    d = d.join_asof(starts, left_on="start", right_on="job_start", **asof)
    d = d.join(last, on=["provider", "cluster"], how="left")
    high = pl.min_horizontal("job_start", "_cover")
    d = d.with_columns(end=pl.min_horizontal("boot", high), end_high=high).filter(pl.col("end") > pl.col("start"))
    d = d.with_columns(end_low=pl.when(pl.col("boot") <= pl.col("end")).then(pl.col("boot")).otherwise(pl.col("start")))
    # merge overlapping stretches of one node
    d = d.sort(*node_keys, "start").with_columns(_reach=pl.col("end_high").cum_max().over(node_keys))
    d = d.with_columns(_new=(pl.col("start") > pl.col("_reach").shift(1).over(node_keys)).fill_null(True))
    d = d.with_columns(_g=pl.col("_new").cast(pl.Int64).cum_sum())
    d = d.group_by(*node_keys, "_g").agg(
        pl.col("start").min(), pl.col("end").max(), pl.col("end_low").max(), pl.col("end_high").max()
    )
    return d.select(list(out_schema)).sort(*node_keys, "start")


def billed_node_days(inventory: pl.DataFrame, days: pl.DataFrame, prices: pl.DataFrame | None) -> pl.DataFrame:
    """Every node-day in service and covered by the landing folder, with its price per GPU-hour."""
    inv = inventory
    for col in ("in_service_from", "in_service_to"):
        inv = (
            inv.with_columns(pl.col(col).cast(pl.Date, strict=False))
            if col in inv.columns
            else inv.with_columns(pl.lit(None, pl.Date).alias(col))
        )
    if "gpu_model" not in inv.columns:
        inv = inv.with_columns(gpu_model=pl.lit(None, pl.String))
    nd = inv.select("provider", "cluster", "node", "gpus", "gpu_model", "in_service_from", "in_service_to").join(
        days, on=["provider", "cluster"], how="inner"
    )
    nd = nd.filter(
        (pl.col("in_service_from").is_null() | (pl.col("date") >= pl.col("in_service_from")))
        & (pl.col("in_service_to").is_null() | (pl.col("date") <= pl.col("in_service_to")))
    ).select("provider", "cluster", "node", pl.col("gpus").fill_null(8).cast(pl.Int64), "gpu_model", "date")
    return price_days(nd, prices)


def _cause(domain: pl.Expr) -> pl.Expr:
    return (
        pl.when(domain.is_in(INFRA_DOMAINS))
        .then(pl.lit("infra"))
        .when(domain == "user")
        .then(pl.lit("user"))
        .otherwise(pl.lit("other"))
    )


def provider_costs(
    failures: pl.DataFrame,
    jobs: pl.DataFrame,
    down: pl.DataFrame,
    billed: pl.DataFrame,
    priced: bool,
) -> pl.DataFrame:
    """Provider and cluster rows of ``schema.provider_costs``: billed GPU-hours, lost GPU-hours by
    cause, drained nodes, goodput and the effective price per useful GPU-hour with 95% intervals
    (sampling, as a compound Poisson sum over the failures, and the bounds of estimated losses)."""
    cluster_day = billed.group_by("provider", "cluster", "date").agg(
        _day_price=((pl.col("gpus") * pl.col("usd_per_gpu_hour")).sum() / pl.col("gpus").sum()),
        _unpriced=pl.col("usd_per_gpu_hour").is_null().any(),
    )
    node_price = billed.select("provider", "cluster", "node", "date", "gpus", "usd_per_gpu_hour")
    bill = billed.group_by("provider", "cluster").agg(
        n_nodes=pl.col("node").n_unique().cast(pl.Int64),
        node_days=pl.len().cast(pl.Float64),
        billed_gpu_hours=(pl.col("gpus") * 24.0).sum(),
        usd_paid=(pl.col("gpus") * 24.0 * pl.col("usd_per_gpu_hour")).sum(),
        unpriced_gpu_hours=(pl.col("gpus") * 24.0).filter(pl.col("usd_per_gpu_hour").is_null()).sum(),
    )
    f = failures.with_columns(
        cause=_cause(pl.col("domain")),
        date=pl.col("ended").dt.date(),
        _var=((pl.col("lost_gpu_hours_high") - pl.col("lost_gpu_hours_low")) / (2 * Z)) ** 2,
    ).join(
        cluster_day.select("provider", "cluster", "date", "_day_price"), on=["provider", "cluster", "date"], how="left"
    )
    lost = f.group_by("provider", "cluster").agg(
        failed_jobs_infra=(pl.col("cause") == "infra").sum().cast(pl.Int64),
        **{
            f"lost_gpu_hours_{c}": pl.col("lost_gpu_hours").filter(pl.col("cause") == c).sum()
            for c in ("infra", "user", "other")
        },
        usd_lost_infra=(pl.col("lost_gpu_hours") * pl.col("_day_price")).filter(pl.col("cause") == "infra").sum(),
        usd_lost_user=(pl.col("lost_gpu_hours") * pl.col("_day_price")).filter(pl.col("cause") == "user").sum(),
        upper_bound_gpu_hours_infra=pl.col("lost_gpu_hours")
        .filter((pl.col("cause") == "infra") & (pl.col("lost_work_method") != "checkpoint"))
        .sum(),
        _x2=(pl.col("lost_gpu_hours") ** 2).filter(pl.col("cause") == "infra").sum(),
        _m2=pl.col("_var").filter(pl.col("cause") == "infra").sum(),
    )
    dn = down.with_columns(
        _h=_secs(pl.col("end"), pl.col("start")) / 3600,
        _hl=_secs(pl.col("end_low"), pl.col("start")) / 3600,
        _hh=_secs(pl.col("end_high"), pl.col("start")) / 3600,
        date=pl.col("start").dt.date(),
    ).join(node_price, on=["provider", "cluster", "node", "date"], how="left")
    g = pl.col("gpus").fill_null(8)
    dn = dn.with_columns(_gh=pl.col("_h") * g, _ghl=pl.col("_hl") * g, _ghh=pl.col("_hh") * g)
    downs = dn.group_by("provider", "cluster").agg(
        down_node_days=(pl.col("_h").sum() / 24.0),
        down_gpu_hours=pl.col("_gh").sum(),
        usd_down=(pl.col("_gh") * pl.col("usd_per_gpu_hour")).sum(),
        _dx2=(pl.col("_gh") ** 2).sum(),
        _dm2=(((pl.col("_ghh") - pl.col("_ghl")) / (2 * Z)) ** 2).sum(),
    )
    alloc = (
        jobs.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())
        .select(
            "provider",
            "cluster",
            _gh=pl.coalesce(pl.col("gpus"), pl.col("n_nodes") * 8) * _secs(pl.col("end"), pl.col("start")) / 3600,
        )
        .group_by("provider", "cluster")
        .agg(allocated_gpu_hours=pl.col("_gh").sum())
    )
    per = (
        bill.join(lost, on=["provider", "cluster"], how="left")
        .join(downs, on=["provider", "cluster"], how="left")
        .join(alloc, on=["provider", "cluster"], how="left")
    )
    zero = [c for c in per.columns if c not in ("provider", "cluster", "n_nodes", "usd_paid")]
    per = per.with_columns([pl.col(c).fill_null(0) for c in zero])
    if not priced:
        per = per.with_columns(
            [pl.lit(None, pl.Float64).alias(c) for c in ("usd_paid", "usd_lost_infra", "usd_lost_user", "usd_down")]
        )
    # a cluster with unpriced node-days has no price (rather than a wrong one)
    per = per.with_columns(
        [
            pl.when(pl.col("unpriced_gpu_hours") > 0).then(None).otherwise(pl.col(c)).alias(c)
            for c in ("usd_paid", "usd_lost_infra", "usd_lost_user", "usd_down")
        ]
    )
    sums = [
        "node_days",
        "billed_gpu_hours",
        "usd_paid",
        "unpriced_gpu_hours",
        "failed_jobs_infra",
        "lost_gpu_hours_infra",
        "lost_gpu_hours_user",
        "lost_gpu_hours_other",
        "usd_lost_infra",
        "usd_lost_user",
        "upper_bound_gpu_hours_infra",
        "down_node_days",
        "down_gpu_hours",
        "usd_down",
        "allocated_gpu_hours",
        "_x2",
        "_m2",
        "_dx2",
        "_dm2",
    ]
    prov = per.group_by("provider").agg(
        pl.col("n_nodes").sum(),
        *[pl.col(c).sum() if c.startswith("_") or "usd" not in c else _sum_or_null(c) for c in sums],
    )
    out = pl.concat(
        [
            prov.with_columns(level=pl.lit("provider"), cluster=pl.lit(None, pl.String)),
            per.with_columns(level=pl.lit("cluster")),
        ],
        how="diagonal_relaxed",
    )
    out = _derived(out)
    fleet_useful = out.filter(pl.col("level") == "provider")["useful_gpu_hours"].sum()
    out = out.with_columns(
        usd_fleet_work_at_this_rate=pl.when(pl.col("level") == "provider").then(
            pl.col("effective_usd_per_useful_gpu_hour") * fleet_useful
        )
    )
    return out.select(list(COST_COLUMNS)).sort("level", "provider", "cluster", descending=[True, False, False])


def _sum_or_null(col: str) -> pl.Expr:
    """A dollar sum over clusters: null when any cluster's is (an unpriced cluster)."""
    return pl.when(pl.col(col).is_null().any()).then(None).otherwise(pl.col(col).sum()).alias(col)


def _derived(df: pl.DataFrame) -> pl.DataFrame:
    """Useful GPU-hours, goodput, ETTR and the effective price, with their 95% intervals."""
    x = pl.col("lost_gpu_hours_infra") + pl.col("down_gpu_hours")
    se = (pl.col("_x2") + pl.col("_m2") + pl.col("_dx2") + pl.col("_dm2")).sqrt()
    b = pl.col("billed_gpu_hours")
    x_lo = (x - Z * se).clip(lower_bound=0)
    x_hi = pl.min_horizontal(x + Z * se, b)
    price = pl.col("usd_paid") / b
    df = df.with_columns(
        useful_gpu_hours=b - x,
        _x=x,
        _se=se,
        goodput=pl.when(b > 0).then(1 - x / b),
        goodput_low=pl.when(b > 0).then(1 - x_hi / b),
        goodput_high=pl.when(b > 0).then(1 - x_lo / b),
        ettr=pl.when(pl.col("allocated_gpu_hours") > 0).then(
            1
            - (pl.col("lost_gpu_hours_infra") + pl.col("lost_gpu_hours_user") + pl.col("lost_gpu_hours_other"))
            / pl.col("allocated_gpu_hours")
        ),
        usd_per_gpu_hour=pl.when(b > 0).then(price),
        effective_usd_per_useful_gpu_hour=pl.when(b - x > 0).then(pl.col("usd_paid") / (b - x)),
        effective_low=pl.when(b - x_lo > 0).then(pl.col("usd_paid") / (b - x_lo)),
        effective_high=pl.when(b - x_hi > 0).then(pl.col("usd_paid") / (b - x_hi)),
    )
    return df.with_columns(
        effective_se=pl.when(b - pl.col("_x") > 0).then(pl.col("usd_paid") * pl.col("_se") / (b - pl.col("_x")) ** 2),
        goodput_se=pl.when(b > 0).then(pl.col("_se") / b),
    )


COST_COLUMNS = (
    "level",
    "provider",
    "cluster",
    "n_nodes",
    "node_days",
    "billed_gpu_hours",
    "allocated_gpu_hours",
    "failed_jobs_infra",
    "lost_gpu_hours_infra",
    "upper_bound_gpu_hours_infra",
    "lost_gpu_hours_user",
    "lost_gpu_hours_other",
    "down_node_days",
    "down_gpu_hours",
    "useful_gpu_hours",
    "goodput",
    "goodput_low",
    "goodput_high",
    "goodput_se",
    "ettr",
    "usd_paid",
    "unpriced_gpu_hours",
    "usd_per_gpu_hour",
    "usd_lost_infra",
    "usd_lost_user",
    "usd_down",
    "effective_usd_per_useful_gpu_hour",
    "effective_low",
    "effective_high",
    "effective_se",
    "usd_fleet_work_at_this_rate",
)


def cost_comparison(costs: pl.DataFrame, level: str = "provider") -> pl.DataFrame:
    """Pairs of providers (or clusters): the difference of their effective prices (goodput
    where there are no prices) with its 95% interval, whether the data tells them apart, and
    how many more node-days each would need (the sampling error shrinks as 1/sqrt(node-days))."""
    rows = costs.filter(pl.col("level") == level).to_dicts()
    out = []
    for a, b in itertools.combinations(rows, 2):
        na = a["provider"] if level == "provider" else f"{a['provider']}/{a['cluster']}"
        nb = b["provider"] if level == "provider" else f"{b['provider']}/{b['cluster']}"
        priced = (
            a["effective_usd_per_useful_gpu_hour"] is not None and b["effective_usd_per_useful_gpu_hour"] is not None
        )
        measure = "effective_usd_per_useful_gpu_hour" if priced else "goodput"
        se_col = "effective_se" if priced else "goodput_se"
        va, vb = a[measure], b[measure]
        if va is None or vb is None:
            continue
        diff = va - vb
        se = math.sqrt((a[se_col] or 0.0) ** 2 + (b[se_col] or 0.0) ** 2)
        lo, hi = diff - Z * se, diff + Z * se
        distinct = bool(lo > 0 or hi < 0)
        have = min(a["node_days"], b["node_days"])
        if distinct:
            more = 0.0
        elif diff == 0 or se == 0:
            more = None
        else:
            more = max(have * ((Z + Z_POWER) * se / abs(diff)) ** 2 - have, 0.0)
        unit = "per useful GPU-hour" if priced else "goodput"
        fmt = (lambda v: f"${v:,.3f}") if priced else (lambda v: f"{100 * v:.2f}%")
        cheaper = (na if diff < 0 else nb) if priced else (na if diff > 0 else nb)
        if distinct:
            text = (
                f"{cheaper} {'is cheaper per useful GPU-hour' if priced else 'delivers more useful work'}: "
                f"{na} {fmt(va)} vs {nb} {fmt(vb)} {unit}, difference 95% CI {fmt(lo) if priced else f'{100 * lo:.2f} pts'}"
                f" to {fmt(hi) if priced else f'{100 * hi:.2f} pts'}"
            )
        elif more is None:
            text = f"cannot tell {na} and {nb} apart: {fmt(va)} vs {fmt(vb)} {unit}"
        else:
            text = (
                f"cannot tell {na} and {nb} apart yet ({fmt(va)} vs {fmt(vb)} {unit}); about {more:,.0f} more "
                "node-days each would be needed"
            )
        out.append(
            {
                "level": level,
                "a": na,
                "b": nb,
                "measure": measure,
                "value_a": va,
                "value_b": vb,
                "difference": diff,
                "ci_low": lo,
                "ci_high": hi,
                "distinguishable": distinct,
                "more_node_days_needed": more,
                "statement": text,
            }
        )
    schema = dict(COMPARISON_SCHEMA)
    return pl.DataFrame(out, schema=schema) if out else pl.DataFrame(schema=schema)


COMPARISON_SCHEMA = {
    "level": pl.String,
    "a": pl.String,
    "b": pl.String,
    "measure": pl.String,
    "value_a": pl.Float64,
    "value_b": pl.Float64,
    "difference": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "distinguishable": pl.Boolean,
    "more_node_days_needed": pl.Float64,
    "statement": pl.String,
}
