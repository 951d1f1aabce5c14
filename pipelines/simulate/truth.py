"""The ``_truth/`` folder: what was really injected, for evaluation only (the pipeline never reads it).
Columns are documented in TRUTH.md."""

from __future__ import annotations

import numpy as np
import polars as pl

from . import catalog
from .downtime import DAY
from .fleet import gpu_pci
from .kernel import netdev
from .prices import cluster_day_prices
from .slurm import JOB_EXIT

S = 1_000_000
UTC = pl.Datetime("us", "UTC")
INFRA_CATEGORIES = (
    "gpu_bus_lost",
    "gpu_memory",
    "nvlink",
    "gpu_hardware",
    "driver_firmware",
    "network",
    "host",
    "storage",
    "thermal_power",
    "collective_timeout",
)
FAILED_STATES = ("FAILED", "NODE_FAIL", "OUT_OF_MEMORY")
GPU_ENDINGS = ("gpu_oom", "xid31", "xid13", "device_assert")
# A lemon has manifested when its failing part showed itself at least this often in the logs.
# Two is not enough: on the lottery fleet, healthy nodes with two same-category faults in 30
# days outnumber lemons with exactly two (TRUTH.md, "Which lemons count").
MANIFESTED_MIN_FAULTS = 3


def _ts(col: str) -> pl.Expr:
    return pl.col(col).cast(UTC)


def jobs_table(
    jobs: pl.DataFrame, logged: pl.DataFrame, events: pl.DataFrame, gpus: pl.DataFrame, dates: list[str]
) -> pl.DataFrame:
    kinds = {k.name: k for k in catalog.KINDS}
    scope = pl.col("ending").replace_strict({k: v.scope for k, v in kinds.items()}, default="")
    failed = pl.col("root_cause").is_not_null() & (pl.col("root_cause") != "scheduler")
    failed_or_ended = pl.col("root_cause").is_not_null()  # every job that did not complete
    gpu_culprit = failed & ((scope.is_in(["gpu", "nvswitch"])) | pl.col("ending").is_in(GPU_ENDINGS))
    ev_job = events.filter(pl.col("kills_job") & pl.col("affected_jkey").is_not_null()).select(
        pl.col("affected_jkey").alias("jkey"),
        pl.col("fault_id").alias("_fid"),
        pl.col("fid").alias("_infra_fid"),
        pl.col("origin").alias("_origin"),
    )
    by_infra = ev_job.filter(pl.col("_origin") == "infra").select(
        pl.col("_infra_fid").alias("fault_id_num"), pl.col("_fid").alias("_fid_i")
    )
    by_user = ev_job.filter(pl.col("_origin") == "user").select("jkey", pl.col("_fid").alias("_fid_u"))
    lg = logged.select(
        "jkey",
        "flight_recorder",
        "culprit_missing",
        log_day=pl.col("end_day").replace_strict(dict(enumerate(dates)), return_dtype=pl.Utf8),
    )
    j = (
        jobs.rename({"fault_id": "fault_id_num"})
        .join(by_infra, on="fault_id_num", how="left")
        .join(by_user, on="jkey", how="left")
        .join(lg, on="jkey", how="left")
        .with_columns(
            gpu_index=pl.col("culprit_local").clip(lower_bound=0),
            culprit_node_idx=pl.col("nodes").list.get(pl.col("culprit_node").clip(lower_bound=0)),
        )
    )
    j = j.join(
        gpus.select(pl.col("node_idx").alias("culprit_node_idx"), "gpu_index", "gpu_uuid"),
        on=["culprit_node_idx", "gpu_index"],
        how="left",
    )
    return (
        j.select(
            "job_id",
            "provider",
            "cluster",
            "partition",
            "user",
            "name",
            "state",
            exit_code=pl.col("state").str.split(" ").list.first().replace_strict(JOB_EXIT),
            submit=_ts("submit"),
            start=_ts("start"),
            end=_ts("end"),
            nodes=pl.col("hosts"),
            nodelist="nodelist",
            nnodes="size",
            gpus=pl.col("size") * 8,
            gpu_hours=(pl.col("size") * 8 * (pl.col("end") - pl.col("start")) / 3.6e9).round(3),
            root_cause="root_cause",
            failure_kind=pl.when(pl.col("ending") == "completed").then(None).otherwise(pl.col("ending")),
            culprit_node=pl.when(failed).then(pl.col("hosts").list.get(pl.col("culprit_node").clip(lower_bound=0))),
            culprit_gpu=pl.when(gpu_culprit).then(
                pl.col("gpu_index").replace_strict({i: gpu_pci(i) for i in range(8)}, return_dtype=pl.Utf8)
            ),
            culprit_gpu_uuid=pl.when(gpu_culprit).then(pl.col("gpu_uuid")),
            culprit_rank=pl.when(failed & (pl.col("culprit_local") >= 0)).then(
                pl.col("culprit_node") * 8 + pl.col("culprit_local")
            ),
            fault_id=pl.coalesce("_fid_i", "_fid_u"),
            fault_time=pl.when(failed).then(_ts("t_event")),
            hang_s=pl.when(failed).then(((pl.col("end") - pl.col("t_event")) / S).round(3)),
            has_log=pl.col("log_day").is_not_null(),
            log_day="log_day",
            flight_recorder=pl.col("flight_recorder").fill_null(False),
            culprit_missing_from_watchdog=pl.col("culprit_missing").fill_null(False),
            stack="stack",
            checkpoint_every_s=pl.when(pl.col("ckpt_every") > 0).then(pl.col("ckpt_every") / S),
            attempt="attempt",
            resumes_job_id="resumes_job_id",
            first_progress=_ts("prog0"),
            last_checkpoint=pl.when(failed_or_ended).then(_ts("last_ckpt")),
            lost_work_s=pl.when(failed_or_ended).then(
                ((pl.col("end") - pl.coalesce("last_ckpt", "start")) / S).clip(lower_bound=0).round(3)
            ),
        )
        .pipe(_restarts)
        .sort("provider", "cluster", "end", "job_id")
    )


def _restarts(j: pl.DataFrame) -> pl.DataFrame:
    """The resubmission that resumed each job that ended early (same cluster, in the window),
    the restart time until its first progress line (queue wait, then startup) and the job's
    lost GPU-hours (TRUTH.md, "Lost work")."""
    nxt = j.filter(pl.col("resumes_job_id").is_not_null()).select(
        "provider",
        "cluster",
        pl.col("resumes_job_id").alias("job_id"),
        pl.col("job_id").alias("resumed_by_job_id"),
        pl.col("start").alias("_rs"),
        pl.col("first_progress").alias("_rp"),
        pl.col("gpus").alias("_rg"),
    )
    j = j.join(nxt, on=["provider", "cluster", "job_id"], how="left")
    secs = lambda a, b: ((pl.col(a) - pl.col(b)).dt.total_microseconds() / S).round(3)  # noqa: E731
    ended = pl.col("lost_work_s").is_not_null()
    j = j.with_columns(
        restart_s=pl.when(ended).then(secs("_rp", "end")),
        restart_wait_s=pl.when(ended).then(secs("_rs", "end")),
        restart_startup_s=pl.when(ended).then(secs("_rp", "_rs")),
    )
    # GPU-time the failure cost: the run since the last save, and the resumed job holding its
    # GPUs until its first progress line (the queue wait between them costs the job time, not GPUs)
    startup_h = (pl.col("restart_startup_s") * pl.col("_rg")).fill_null(0.0) / 3600
    lost = (pl.col("gpus") * pl.col("lost_work_s") / 3600 + startup_h).round(6)
    return j.with_columns(lost_gpu_hours=lost).drop("_rs", "_rp", "_rg")


def faults_table(events: pl.DataFrame, nodes: pl.DataFrame, lemons: pl.DataFrame, dates: list[str]) -> pl.DataFrame:
    kinds = {k.name: k for k in catalog.KINDS}
    scope = pl.col("kind").replace_strict({k: v.scope for k, v in kinds.items()})
    n_lines = {k: len(v.lines) for k, v in kinds.items()}
    lemon_nodes = lemons["node_idx"].to_list()
    e = events.join(nodes.select("node_idx", "provider", "cluster", "rack", "node"), on="node_idx", how="left")
    return e.select(
        "fault_id",
        time=_ts("t"),
        logged_time=pl.when(pl.col("logged_t").is_not_null()).then(_ts("logged_t")),
        provider="provider",
        cluster="cluster",
        rack="rack",
        node="node",
        gpu_pci=pl.when(scope.is_in(["gpu", "nvswitch"])).then(pl.col("gpu_pci")),
        gpu_uuid=pl.when(scope.is_in(["gpu", "nvswitch"])).then(pl.col("gpu_uuid")),
        nic=pl.when(scope == "nic").then(pl.col("netdev")),
        category=pl.col("kind").replace_strict({k: v.category for k, v in kinds.items()}),
        kind="kind",
        xid=pl.col("kind").replace_strict({k: v.xid for k, v in kinds.items()}, return_dtype=pl.Int64),
        description=pl.col("kind").replace_strict({k: v.description for k, v in kinds.items()}),
        origin="origin",
        source=pl.when(pl.col("source").str.starts_with("flap:")).then(pl.lit("bad_rack")).otherwise(pl.col("source")),
        is_lemon=pl.col("node_idx").is_in(lemon_nodes),
        bad_rack=pl.col("source").str.starts_with("flap:"),
        episode=pl.when(pl.col("source").str.starts_with("flap:")).then(pl.col("source")),
        burst_lines=pl.when((pl.col("kind") == "xid95") & (pl.col("reps") > 1)).then(pl.col("reps")),
        n_lines=pl.col("reps") * pl.col("kind").replace_strict(n_lines, return_dtype=pl.Int64),
        affected_job_id="affected_job_id",
        kills_job="kills_job",
        logged="logged",
        day=pl.col("day").replace_strict(dict(enumerate(dates)), default=None, return_dtype=pl.Utf8),
        signature="signature",
        skew_s=(pl.col("skew_us") / S),
    )


def write_all(
    w, fleet, scn, jobs, logged, events, lemons, bad_racks, maint, boots, skew, missing, expect, t0, end, dates, f
):
    nodes = fleet.nodes
    jt = jobs_table(jobs, logged, events, fleet.gpus, dates)
    ft = faults_table(events, nodes, lemons, dates)
    w.write_frame("_truth/jobs.parquet", jt)
    w.write_frame("_truth/faults.parquet", ft)
    w.write_frame("_truth/goodput.parquet", goodput_table(fleet, jt, f, cluster_day_prices(fleet, scn, dates), t0, end))

    host = nodes.select("node_idx", "provider", "cluster", "rack", "node", "leaf_switch", "rack_idx", "cluster_idx")
    lem = lemons.join(host, on="node_idx", how="left").join(fleet.gpus, on=["node_idx", "gpu_index"], how="left")
    lem_faults = lemon_fault_counts(ft)
    kills = (
        jt.filter(pl.col("root_cause").is_in(INFRA_CATEGORIES))
        .group_by(pl.col("culprit_node").alias("node"))
        .agg(n_job_failures=pl.len())
    )
    comp_gpu = pl.col("component").is_in(["gpu", "hbm", "nvlink", "pcie"])
    w.write_frame(
        "_truth/lemons.parquet",
        lem.select(
            "provider",
            "cluster",
            "rack",
            "node",
            "component",
            gpu_pci=pl.when(comp_gpu).then(pl.col("gpu_pci")),
            gpu_uuid=pl.when(comp_gpu).then(pl.col("gpu_uuid")),
            nic=pl.when(pl.col("component") == "nic").then(
                pl.col("gpu_index").replace_strict({i: netdev(i) for i in range(8)}, return_dtype=pl.Utf8)
            ),
            rate_multiplier=pl.col("multiplier").round(2),
        )
        .join(lem_faults, on="node", how="left")
        .join(kills, on="node", how="left")
        .with_columns(
            pl.col("n_faults").fill_null(0).cast(pl.Int64),
            pl.col("n_logged_faults").fill_null(0).cast(pl.Int64),
            pl.col("n_job_failures").fill_null(0).cast(pl.Int64),
        )
        .with_columns(manifested=pl.col("n_logged_faults") >= MANIFESTED_MIN_FAULTS),
    )

    flaps = ft.filter(pl.col("bad_rack"))
    br = bad_racks.join(
        host.group_by("rack_idx").agg(pl.first("provider", "cluster", "rack", "leaf_switch"), nodes=pl.len()),
        on="rack_idx",
        how="left",
    )
    stats = flaps.group_by("cluster", "rack").agg(
        episodes=pl.col("episode").n_unique(), flap_faults=pl.len(), job_failures=pl.col("kills_job").sum()
    )
    w.write_frame(
        "_truth/bad_racks.parquet",
        br.join(stats, on=["cluster", "rack"], how="left")
        .select(
            "provider",
            "cluster",
            "rack",
            "leaf_switch",
            "mode",
            pl.col("nodes").cast(pl.Int64),
            pl.col("episodes").fill_null(0).cast(pl.Int64),
            pl.col("flap_faults").fill_null(0).cast(pl.Int64),
            pl.col("job_failures").fill_null(0).cast(pl.Int64),
        )
        .sort("provider", "cluster", "rack"),
    )

    w.write_frame("_truth/rates.parquet", rates_table(fleet, jt, ft, bad_racks, expect, t0, end))
    sk = nodes.with_columns(skew_s=pl.Series(skew / S)).filter(pl.col("skew_s") != 0)
    w.write_frame(
        "_truth/skew.parquet", sk.select("provider", "cluster", "node", "skew_s").sort("provider", "cluster", "node")
    )
    w.write_frame(
        "_truth/maintenance.parquet",
        maint.join(host, on="node_idx", how="left")
        .select(
            "provider",
            "cluster",
            "node",
            start=_ts("start"),
            end=_ts("end"),
            shutdown=_ts("shutdown_t"),
            boot=_ts("boot_t"),
        )
        .sort("start", "provider", "cluster", "node"),
    )
    w.write_frame(
        "_truth/boots.parquet",
        boots.join(host, on="node_idx", how="left")
        .with_columns(skew_us=pl.col("node_idx").replace_strict(dict(enumerate(skew.tolist())), return_dtype=pl.Int64))
        .select(
            "provider",
            "cluster",
            "node",
            "reason",
            time=_ts("t"),
            logged_time=(pl.col("t") + pl.col("skew_us")).cast(UTC),
            day=((pl.col("t") - t0) // DAY).replace_strict(dict(enumerate(dates)), default=None, return_dtype=pl.Utf8),
        )
        .sort("time", "provider", "cluster", "node"),
    )
    w.write_frame(
        "_truth/missing_logs.parquet",
        missing.join(host, on="node_idx", how="left")
        .select(
            "provider",
            "cluster",
            "node",
            day=pl.col("day").replace_strict(dict(enumerate(dates)), return_dtype=pl.Utf8),
        )
        .sort("day", "provider", "cluster", "node"),
    )


# the cost split of TRUTH.md "Goodput and cost": taxonomy domains hardware and software
INFRA_DOMAIN = (
    "gpu_bus_lost",
    "gpu_memory",
    "nvlink",
    "gpu_hardware",
    "network",
    "host",
    "storage",
    "thermal_power",
    "driver_firmware",
)
DRAIN_AFTER_US = 90 * S  # the health check drains a node this long after its fault (slurm.CTLD)


def down_intervals(fleet, f: pl.DataFrame, t0: int, end: int) -> pl.DataFrame:
    """Per node, the union of its drains (health-check drain to resume) inside the window."""
    d = (
        f.filter(pl.col("kind") != "nccl_hang")
        .select(
            "node_idx",
            a=(pl.col("t") + DRAIN_AFTER_US).clip(t0, end),
            b=(pl.col("t") + pl.col("down_us")).clip(t0, end),
        )
        .filter(pl.col("b") > pl.col("a"))
        .sort("node_idx", "a")
    )
    # merge overlapping drains of one node
    d = d.with_columns(_reach=pl.col("b").cum_max().over("node_idx"))
    d = d.with_columns(_new=(pl.col("a") > pl.col("_reach").shift(1).over("node_idx")).fill_null(True))
    d = d.with_columns(_g=pl.col("_new").cum_sum())
    d = d.group_by("node_idx", "_g").agg(a=pl.col("a").min(), b=pl.col("b").max())
    return d.join(fleet.nodes.select("node_idx", "provider", "cluster"), on="node_idx").drop("_g")


def goodput_table(fleet, jt: pl.DataFrame, f: pl.DataFrame, prices: pl.DataFrame, t0: int, end: int) -> pl.DataFrame:
    """Per provider and cluster: billed GPU-hours (every node is in service the whole window),
    GPU-hours lost to job failures by cause (each failed job's ``lost_gpu_hours``), GPU-hours of
    drained nodes, goodput and the effective price per useful GPU-hour (TRUTH.md)."""
    n_days = (end - t0) // DAY
    gpus = fleet.nodes.group_by("provider", "cluster").agg(nodes=pl.len()).with_columns(gpus=pl.col("nodes") * 8)
    billed = (
        gpus.join(prices, on=["provider", "cluster"])
        .group_by("provider", "cluster")
        .agg(
            billed_gpu_hours=(pl.col("gpus") * 24.0).sum(),
            usd_paid=(pl.col("gpus") * 24.0 * pl.col("usd_per_gpu_hour")).sum(),
        )
    )
    cause = (
        pl.when(pl.col("root_cause").is_in(INFRA_DOMAIN))
        .then(pl.lit("infra"))
        .when(pl.col("root_cause") == "user_app")
        .then(pl.lit("user"))
        .otherwise(pl.lit("other"))
    )
    lost = (
        jt.filter(pl.col("lost_gpu_hours").is_not_null())
        .with_columns(cause=cause, day=((pl.col("end").dt.epoch("us") - 1 - t0) // DAY).clip(0, n_days - 1))
        .join(prices, on=["provider", "cluster", "day"], how="left")
        .group_by("provider", "cluster")
        .agg(
            *[
                pl.col("lost_gpu_hours").filter(pl.col("cause") == c).sum().alias(f"lost_gpu_hours_{c}")
                for c in ("infra", "user", "other")
            ],
            *[
                (pl.col("lost_gpu_hours") * pl.col("usd_per_gpu_hour"))
                .filter(pl.col("cause") == c)
                .sum()
                .alias(f"usd_lost_{c}")
                for c in ("infra", "user")
            ],
        )
    )
    down = (
        down_intervals(fleet, f, t0, end)
        .with_columns(day=((pl.col("a") - t0) // DAY).clip(0, n_days - 1), h=(pl.col("b") - pl.col("a")) / 3.6e9 * 8)
        .join(prices, on=["provider", "cluster", "day"], how="left")
        .group_by("provider", "cluster")
        .agg(down_gpu_hours=pl.col("h").sum(), usd_down=(pl.col("h") * pl.col("usd_per_gpu_hour")).sum())
    )
    per = (
        billed.join(lost, on=["provider", "cluster"], how="left")
        .join(down, on=["provider", "cluster"], how="left")
        .fill_null(0.0)
    )
    sums = [
        "billed_gpu_hours",
        "usd_paid",
        "lost_gpu_hours_infra",
        "lost_gpu_hours_user",
        "lost_gpu_hours_other",
        "usd_lost_infra",
        "usd_lost_user",
        "down_gpu_hours",
        "usd_down",
    ]
    levels = [
        per.with_columns(level=pl.lit("cluster")),
        per.group_by("provider")
        .agg([pl.col(c).sum() for c in sums])
        .with_columns(level=pl.lit("provider"), cluster=pl.lit(None, pl.Utf8)),
    ]
    out = pl.concat([x.select("level", "provider", "cluster", *sums) for x in levels])
    useful = pl.col("billed_gpu_hours") - pl.col("lost_gpu_hours_infra") - pl.col("down_gpu_hours")
    return (
        out.with_columns(
            lost_gpu_hours=pl.col("lost_gpu_hours_infra")
            + pl.col("lost_gpu_hours_user")
            + pl.col("lost_gpu_hours_other"),
            useful_gpu_hours=useful,
            goodput=useful / pl.col("billed_gpu_hours"),
            usd_per_gpu_hour=pl.col("usd_paid") / pl.col("billed_gpu_hours"),
            effective_usd_per_useful_gpu_hour=pl.col("usd_paid") / useful,
        )
        .with_columns([pl.col(c).round(6) for c in (*sums, "lost_gpu_hours", "useful_gpu_hours")])
        .sort("level", "provider", "cluster", descending=[True, False, False], nulls_last=False)
    )


def lemon_fault_counts(faults: pl.DataFrame) -> pl.DataFrame:
    """Per lemon node: its failing part's faults (``n_faults``) and those whose key line is in the
    logs (``n_logged_faults``; a fault on a node-day whose log never arrived is invisible)."""
    return (
        faults.filter(pl.col("source") == "lemon")
        .group_by("node")
        .agg(n_faults=pl.len(), n_logged_faults=pl.col("logged").sum().cast(pl.Int64))
    )


def busy_days(jt: pl.DataFrame, t0: int, end: int) -> pl.DataFrame:
    """Per node: days some job of the truth's ``jobs`` ran on it inside the window."""
    lo, hi = pl.lit(t0).cast(UTC), pl.lit(end).cast(UTC)
    run = jt.select("nodes", _s=pl.max_horizontal("start", lo), _e=pl.min_horizontal("end", hi)).explode("nodes")
    return run.group_by(pl.col("nodes").alias("node")).agg(
        busy_days=((pl.col("_e") - pl.col("_s")).dt.total_microseconds().clip(lower_bound=0).sum() / DAY)
    )


def idle_hang_share(models: list[str]) -> np.ndarray:
    """Per node: the share of its independent faults that are ``nccl_hang`` (by its GPU model's mix)."""
    share = {}
    for m in set(models):
        ks = catalog.infra_kinds(m)
        share[m] = sum(k.weight for k in ks if not k.lines) / sum(k.weight for k in ks)
    return np.array([share[m] for m in models])


def rates_table(
    fleet, jt: pl.DataFrame, ft: pl.DataFrame, bad_racks: pl.DataFrame, expect: dict, t0: int, end: int
) -> pl.DataFrame:
    nodes = fleet.nodes
    rate, expo, lemx = expect["rate"], expect["exposure_days"], expect["lemon_expected"]
    flapx = np.zeros(nodes.height)
    rack_of = nodes["rack_idx"].to_numpy()
    for r, x in expect["flap_expected"].items():
        members = np.flatnonzero(rack_of == r)
        flapx[members] = x / len(members)
    # interruptions (TRUTH.md, "Which faults are interruptions"): a fault that prints nothing
    # (an NCCL hang) exists only inside a running collective, so one drawn while no job ran on
    # the node is no event at all; the rest of the expectation stands
    models = nodes.join(fleet.clusters.select("cluster_idx", "gpu_model"), on="cluster_idx", how="left")["gpu_model"]
    busy = nodes.select("node").join(busy_days(jt, t0, end), on="node", how="left")["busy_days"].fill_null(0.0)
    idle_hangs = rate / 1000.0 * idle_hang_share(models.to_list()) * np.maximum(expo - busy.to_numpy(), 0.0)
    per_node = nodes.select("provider", "cluster", "node").with_columns(
        node_days=pl.Series(expo),
        expected=pl.Series(rate / 1000.0 * expo + lemx),
        base_expected=pl.Series(rate / 1000.0 * expo),
        flap_expected=pl.Series(flapx),
        calendar_days=pl.lit((end - t0) / DAY),
        expected_interruptions=pl.Series(rate / 1000.0 * expo + lemx - idle_hangs),
    )
    indep = ft.filter((pl.col("origin") == "infra") & pl.col("source").is_in(["independent", "lemon"]))
    silent = [k.name for k in catalog.KINDS if k.origin == "infra" and not k.lines]
    interrupting = indep.filter(~pl.col("kind").is_in(silent) | pl.col("affected_job_id").is_not_null())
    flap = ft.filter(pl.col("source") == "bad_rack")
    failed = pl.col("state").str.split(" ").list.first().is_in(FAILED_STATES)
    infra_fail = pl.col("root_cause").is_in(INFRA_CATEGORIES)
    mult = fleet.clusters.join(fleet.providers, on=["provider", "provider_idx"]).select(
        "provider", "cluster", "provider_multiplier", "cluster_multiplier"
    )

    def level(keys: list[str], name: str) -> pl.DataFrame:
        g = keys if keys else [pl.lit("fleet").alias("_all")]
        a = per_node.group_by(g).agg(
            nodes=pl.len(),
            node_days=pl.col("node_days").sum(),
            expected_faults=pl.col("expected").sum(),
            base_expected=pl.col("base_expected").sum(),
            expected_bad_rack_faults=pl.col("flap_expected").sum(),
            calendar_node_days=pl.col("calendar_days").sum(),
            expected_interruptions=pl.col("expected_interruptions").sum(),
        )
        b = (
            indep.group_by(g)
            .agg(faults=pl.len())
            .join(interrupting.group_by(g).agg(interruptions=pl.len()), on=keys if keys else ["_all"], how="left")
        )
        c = flap.group_by(g).agg(bad_rack_faults=pl.len())
        d = jt.group_by(g).agg(
            jobs=pl.len(),
            failed_jobs=failed.sum(),
            fault_job_failures=infra_fail.sum(),
            user_failures=(pl.col("root_cause") == "user_app").sum(),
            gpu_hours=pl.col("gpu_hours").sum(),
            failed_gpu_hours=pl.col("gpu_hours").filter(failed).sum(),
            fault_failed_gpu_hours=pl.col("gpu_hours").filter(infra_fail).sum(),
        )
        on = keys if keys else ["_all"]
        out = a.join(b, on=on, how="left").join(c, on=on, how="left").join(d, on=on, how="left")
        out = out.with_columns(
            level=pl.lit(name),
            rate_per_1k=(pl.col("expected_faults") / pl.col("node_days") * 1000).round(4),
            base_rate_per_1k=(pl.col("base_expected") / pl.col("node_days") * 1000).round(4),
            observed_per_1k=(pl.col("faults").fill_null(0) / pl.col("node_days") * 1000).round(4),
            interruption_rate_per_1k=(pl.col("expected_interruptions") / pl.col("calendar_node_days") * 1000).round(4),
        )
        for k in ("provider", "cluster"):
            if k not in out.columns:
                out = out.with_columns(pl.lit(None, dtype=pl.Utf8).alias(k))
        return out

    cols = [
        "level",
        "provider",
        "cluster",
        "nodes",
        "node_days",
        "rate_per_1k",
        "base_rate_per_1k",
        "expected_faults",
        "faults",
        "observed_per_1k",
        "expected_bad_rack_faults",
        "bad_rack_faults",
        "jobs",
        "failed_jobs",
        "fault_job_failures",
        "user_failures",
        "gpu_hours",
        "failed_gpu_hours",
        "fault_failed_gpu_hours",
        "calendar_node_days",
        "expected_interruptions",
        "interruptions",
        "interruption_rate_per_1k",
    ]
    out = pl.concat(
        [
            level([], "fleet").select(cols),
            level(["provider"], "provider").select(cols),
            level(["provider", "cluster"], "cluster").select(cols),
        ]
    )
    int_cols = [
        "nodes",
        "faults",
        "bad_rack_faults",
        "jobs",
        "failed_jobs",
        "fault_job_failures",
        "user_failures",
        "interruptions",
    ]
    out = out.with_columns(
        [pl.col(c).fill_null(0).cast(pl.Int64) for c in int_cols]
        + [
            pl.col(c).fill_null(0.0).round(3)
            for c in (
                "gpu_hours",
                "failed_gpu_hours",
                "fault_failed_gpu_hours",
                "node_days",
                "expected_faults",
                "expected_bad_rack_faults",
                "calendar_node_days",
                "expected_interruptions",
            )
        ]
    )
    prov = fleet.providers.select("provider", "provider_multiplier")
    out = out.join(prov, on="provider", how="left").join(
        mult.select("cluster", "cluster_multiplier"), on="cluster", how="left"
    )
    order = {"fleet": 0, "provider": 1, "cluster": 2}
    return (
        out.with_columns(_o=pl.col("level").replace_strict(order, return_dtype=pl.Int64))
        .sort("_o", "provider", "cluster", nulls_last=False)
        .drop("_o")
    )
