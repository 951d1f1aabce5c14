"""Writes the landing folder's files: kernel logs (+ .boot), job logs and flight-recorder dumps,
sacct / slurmctld, inventory.csv."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from . import catalog, flightrec, formats, joblogs, kernel, slurm
from . import faults as faultmod
from .downtime import DAY
from .prices import price_rows
from .rng import stream

S = 1_000_000


def all_boots(boot0, maint, f) -> pl.DataFrame:
    """Every boot of every node (``node_idx, t, reason``), the first one possibly before the window."""
    parts = [
        pl.DataFrame(
            {
                "node_idx": np.arange(len(boot0), dtype=np.int64),
                "t": boot0.astype(np.int64),
                "reason": ["first"] * len(boot0),
            }
        ),
        maint.select("node_idx", pl.col("boot_t").alias("t"), reason=pl.lit("maintenance")),
        f.filter(pl.col("boot_t").is_not_null()).select(
            "node_idx",
            pl.col("boot_t").alias("t"),
            reason=pl.when(pl.col("crash")).then(pl.lit("crash")).otherwise(pl.lit("repair")),
        ),
    ]
    return pl.concat(parts).unique(["node_idx", "t"], keep="first", maintain_order=True).sort("node_idx", "t")


def write_kernel(w, fleet, scn, events, boots, maint, f, gaps, missing, boot0, skew, t0, end, dates, seed, say):
    n_noise = max(0, int(scn.noise) // kernel.NOISE_LINE_BYTES)
    shut = pl.concat(
        [
            maint.select("node_idx", "shutdown_t"),
            f.filter(pl.col("shutdown_t").is_not_null() & ~pl.col("crash")).select("node_idx", "shutdown_t"),
        ]
    ).select("node_idx", t=pl.col("shutdown_t") - 2 * S)
    up_from = np.maximum(boot0, t0)
    nodes = fleet.nodes
    for c in fleet.clusters.iter_rows(named=True):
        sel = nodes.filter(pl.col("cluster_idx") == c["cluster_idx"])
        ids = sel["node_idx"].to_list()
        in_c = pl.col("node_idx").is_in(ids)
        cb = boots.filter(in_c)
        rows = _kernel_rows_for(c, sel, ids, cb, shut, events, n_noise, nodes, fleet, up_from, t0, dates, seed)
        rows = rows.filter((pl.col("t") >= t0) & (pl.col("t") < end))
        rows = rows.filter(pl.Series(faultmod.outside(rows["node_idx"].to_numpy(), rows["t"].to_numpy(), gaps)))
        rows = rows.with_columns(day=((pl.col("t") - t0) // DAY).cast(pl.Int64))
        rows = (
            rows.join(missing.with_columns(_gone=pl.lit(True)), on=["node_idx", "day"], how="left")
            .filter(pl.col("_gone").is_null())
            .drop("_gone")
        )
        conv = c["convention"]
        rows = rows.join(sel.select("node_idx", host=pl.col("node")), on="node_idx", how="left").with_columns(
            lt=pl.col("t")
            + pl.col("node_idx").replace_strict(dict(zip(ids, skew[ids].tolist())), return_dtype=pl.Int64)
        )
        if formats.needs_mono(conv):
            rows = (
                rows.sort("node_idx", "t")
                .join_asof(
                    cb.select("node_idx", boot="t"),
                    left_on="t",
                    right_on="boot",
                    by="node_idx",
                    strategy="backward",
                    check_sortedness=False,
                )
                .with_columns(mono=pl.col("t") - pl.col("boot"))
            )
        ext = ".log.gz" if c["gzip"] else ".log"
        date_of = dict(enumerate(dates))
        rows = rows.sort("day", "node_idx", "t", "seq").with_columns(
            line=formats.kernel_line(conv),
            path=pl.format(
                "{}/{}/{}/kernel/{}{}",
                pl.lit(c["provider"]),
                pl.lit(c["cluster"]),
                pl.col("day").replace_strict(date_of, return_dtype=pl.Utf8),
                pl.col("host"),
                pl.lit(ext),
            ),
        )
        w.write_groups(rows.select("path", "line"), "path", gz=bool(c["gzip"]))
        if conv == "dmesg_raw":
            _write_boot_files(
                w, c, rows.select("day", "node_idx", "host").unique(maintain_order=True), cb, skew, t0, dates
            )
        say(f"kernel: {c['provider']}/{c['cluster']} ({conv}{', gzip' if c['gzip'] else ''}): {rows.height} lines")


def _kernel_rows_for(c, sel, ids, cb, shut, events, n_noise, nodes, fleet, up_from, t0, dates, seed):
    in_c = pl.col("node_idx").is_in(ids)
    parts = [
        kernel.boot_rows(cb.filter(pl.col("t") >= t0), nodes, fleet.gpus, fleet.clusters, seed, c["cluster"]),
        kernel.shutdown_rows(shut.filter(in_c)),
        kernel.event_rows(events.filter(in_c)),
    ]
    if n_noise:
        parts.append(kernel.noise_rows(n_noise, sel, fleet.clusters, up_from[ids], t0, len(dates), seed, c["cluster"]))
    return pl.concat([p.select("node_idx", "t", "seq", "msg") for p in parts if p.height])


def _write_boot_files(w, c, files: pl.DataFrame, cb: pl.DataFrame, skew, t0, dates):
    """raw dmesg needs the boot times: the boot in effect at the start of the day plus any during it."""
    per_node: dict[int, list[int]] = {}
    for node, t in cb.select("node_idx", "t").iter_rows():
        per_node.setdefault(node, []).append(t)
    for day, node, host in files.sort("day", "node_idx").iter_rows():
        lo, hi = t0 + day * DAY, t0 + (day + 1) * DAY
        bt = per_node[node]
        before = [b for b in bt if b < lo]
        keep = ([before[-1]] if before else []) + [b for b in bt if lo <= b < hi]
        text = "".join(
            dt.datetime.fromtimestamp((b + int(skew[node])) / S, tz=dt.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S.%f+00:00"
            )
            + "\n"
            for b in keep
        )
        w.write(f"{c['provider']}/{c['cluster']}/{dates[day]}/kernel/{host}.boot", text.encode(), lines=len(keep))


def write_jobs(w, fleet, scn, jobs, t0, dates, seed, say) -> pl.DataFrame:
    u = stream(seed, "log_sample").random(jobs.height)
    other = pl.col("state").is_in(["PREEMPTED"]) | pl.col("state").str.starts_with("CANCELLED")
    # the output of a resubmitted job is always kept: it shows when the work resumed
    keep = (
        pl.when(pl.col("attempt") > 1)
        .then(True)
        .when(pl.col("state") == "COMPLETED")
        .then(pl.Series(u) < scn.completed_log_fraction)
        .when(other)
        .then(pl.Series(u) < scn.other_log_fraction)
        .otherwise(True)
    )
    logged = jobs.filter(keep).with_columns(end_day=((pl.col("end") - 1 - t0) // DAY).cast(pl.Int64))
    logged = joblogs.classify(logged)
    frr = stream(seed, "flight_recorder")
    fr = (
        (logged["cascade"] == "watchdog")
        & ~logged["exits"]
        & (logged["size"] * 8 <= 128)
        & pl.Series(frr.random(logged.height) < 0.5)
    )
    logged = logged.with_columns(
        flight_recorder=fr, culprit_missing=(pl.col("cascade") == "watchdog") & ~pl.col("exits")
    )
    date_of = dict(enumerate(dates))
    logged = logged.with_columns(
        log_dir=pl.format(
            "{}/{}/{}/jobs/{}",
            "provider",
            "cluster",
            pl.col("end_day").replace_strict(date_of, return_dtype=pl.Utf8),
            "job_id",
        )
    )
    # job logs in chunks so the row frames stay small on big fleets
    chunk = 2000
    for s in range(0, logged.height, chunk):
        part = logged.slice(s, chunk)
        rows = joblogs.job_rows(part, seed, s)
        rows = (
            rows.join(part.select("jkey", "job_prefix", "log_dir", "job_id"), on="jkey", how="left")
            .sort("jkey", "t", "seq")
            .with_columns(
                line=joblogs.prefix_expr() + pl.col("msg"),
                path=pl.format("{}/slurm-{}.log", pl.col("log_dir"), pl.col("job_id")),
            )
        )
        w.write_groups(rows.select("path", "line"), "path")
    for r in logged.filter(pl.col("flight_recorder")).iter_rows(named=True):
        first = r["culprit_node"] * 8
        culprits = set(range(first, first + 8)) if r["culprit_local"] < 0 else {first + r["culprit_local"]}
        if r["ending"] == "nccl_hang":  # stuck inside the collective: it joined like every other rank
            culprits = set()
        flightrec.write_job(
            w,
            r["log_dir"],
            r["size"] * 8,
            culprits,
            joblogs.collective_seq(r["t_event"], r["start"]),
            r["t_event"],
            r["nccl_timeout_s"] * 1000,
            "ALLREDUCE",
            262144,
        )
    say(f"jobs: {logged.height} job logs, {int(logged['flight_recorder'].sum())} with flight-recorder dumps")
    return logged


def write_slurm(w, fleet, jobs, f, t0, end, dates):
    host = dict(enumerate(fleet.nodes["node"].to_list()))
    j = slurm.add_step_states(
        jobs.with_columns(
            host0=pl.col("hosts").list.first(),
            job_id_num=pl.col("jid_raw"),
            chost=pl.col("hosts").list.get(pl.col("culprit_node").clip(0, None)),
            jobref=pl.when(pl.col("array_task") >= 0)
            .then(pl.format("{}({})", "job_id", "jid_raw"))
            .otherwise(pl.col("job_id")),
            day=((pl.col("end") - 1 - t0) // DAY).cast(pl.Int64),
        )
    )
    reason = {
        k.name: (
            f"HC: Xid {k.xid}"
            if k.xid
            else {"nvswitch": "HC: NVSwitch SXid", "nic": "HC: IB port down"}.get(
                k.scope,
                {
                    "host": "HC: node unresponsive",
                    "storage": "HC: mount check failed",
                    "thermal_power": "HC: thermal",
                    "gpu_bus_lost": "HC: GPU missing",
                }.get(k.category, "HC: failed"),
            )
        )
        for k in catalog.KINDS
    }
    drains = (
        f.filter(pl.col("kind") != "nccl_hang")
        .with_columns(
            t=pl.col("t") + 90 * S,
            t_resume=pl.col("t") + pl.col("down_us"),
            host=pl.col("node_idx").replace_strict(host, return_dtype=pl.Utf8),
            reason=pl.col("kind").replace_strict(reason, return_dtype=pl.Utf8),
        )
        .join(fleet.nodes.select("node_idx", "cluster_idx"), on="node_idx")
    )
    for c in fleet.clusters.iter_rows(named=True):
        jc = j.filter(pl.col("cluster_idx") == c["cluster_idx"])
        base = f"{c['provider']}/{c['cluster']}"
        sa = slurm.sacct_rows(jc).join(jc.select("job_id_num", "day"), on="job_id_num", how="left")
        for d, date in enumerate(dates):
            day = sa.filter(pl.col("day") == d)["line"]
            text = "\n".join([slurm.SACCT_HEADER] + ([day.str.join("\n").item()] if day.len() else [])) + "\n"
            w.write(f"{base}/{date}/slurm/sacct.txt", text.encode(), lines=day.len() + 1)
        ct = slurm.ctld_rows(jc, drains.filter(pl.col("cluster_idx") == c["cluster_idx"]))
        ct = (
            ct.filter((pl.col("t") >= t0) & (pl.col("t") < end))
            .with_columns(day=((pl.col("t") - t0) // DAY).cast(pl.Int64))
            .sort("t", "seq")
            .with_columns(
                line=slurm.ctld_prefix(),
                path=pl.format(
                    "{}/{}/slurm/slurmctld.log",
                    pl.lit(base),
                    pl.col("day").replace_strict(dict(enumerate(dates)), return_dtype=pl.Utf8),
                ),
            )
            .sort("day", "t", "seq")
        )
        w.write_groups(ct.select("path", "line"), "path")


def write_inventory(w, fleet):
    inv = (
        fleet.nodes.join(fleet.clusters.select("cluster_idx", "gpu_model"), on="cluster_idx", how="left")
        .select("provider", "cluster", "rack", "node", gpus=pl.lit(8), gpu_model="gpu_model", leaf_switch="leaf_switch")
        .sort("provider", "cluster", "node")
    )
    w.write("inventory.csv", inv.write_csv().encode(), lines=inv.height + 1)


def write_prices(w, fleet, scn, dates):
    """``prices.csv`` (docs/costs.md): what each provider charges per GPU-hour of each model."""
    rows = price_rows(fleet, scn, dates)
    w.write("prices.csv", rows.write_csv().encode(), lines=rows.height + 1)
