"""Every kernel-visible event in one table: infrastructure faults (with the job process that owned
the device), kernel lines caused by users' jobs (Xid 31 / 13, cgroup OOM) and benign Xid 63."""

from __future__ import annotations

import numpy as np
import polars as pl

from . import catalog, kernel
from . import faults as faultmod
from .downtime import DAY
from .rng import stream

S = 1_000_000


def build(fleet, scn, f, jobs, affected, killers, gaps, up_from, end, skew, seed):
    """Infra faults + user kernel events + benign Xid 63, one row each, in time order."""
    kinds = {k.name: k for k in catalog.KINDS}
    jinfo = {r[0]: r[1:] for r in jobs.select("jkey", "job_id", "nodes", "pid_base").iter_rows()}
    pid, aff_job = [], []
    for fid, node, kind, gi in f.select("fid", "node_idx", "kind", "gpu_index").iter_rows():
        jk = affected.get(fid)
        if jk is None:
            pid.append(None)
            aff_job.append(None)
            continue
        job_id, nodes, pid_base = jinfo[jk]
        pos = nodes.index(node)
        scope = kinds[kind].scope
        local = gi if scope in ("gpu", "nvswitch") else 0
        pid.append(pid_base + 97 * pos + 12 + local if scope in ("gpu", "nvswitch", "node") else None)
        aff_job.append(job_id)
    aff_key = [affected.get(x) for x in f["fid"].to_list()]
    infra = f.select(
        "fid",
        "node_idx",
        "t",
        "kind",
        "gpu_index",
        "nic_index",
        "sw_index",
        "reps",
        "period_us",
        "recover_us",
        "source",
    ).with_columns(
        pid=pl.Series(pid, dtype=pl.Int64),
        affected_job_id=pl.Series(aff_job, dtype=pl.Utf8),
        affected_jkey=pl.Series(aff_key, dtype=pl.Int64),
        kills_job=pl.col("fid").is_in(sorted(killers)),
        origin=pl.lit("infra"),
    )

    u = (
        jobs.filter(pl.col("ending").is_in(["xid31", "xid13", "cpu_oom"]) & (pl.col("t_event") < end))
        .select(
            node_idx=pl.col("nodes").list.get(pl.col("culprit_node")),
            t=pl.col("t_event"),
            kind=pl.col("ending").replace({"cpu_oom": "cgroup_oom"}),
            gpu_index=pl.col("culprit_local"),
            pid=pl.col("pid_base") + 97 * pl.col("culprit_node") + 12 + pl.col("culprit_local"),
            affected_job_id=pl.col("job_id"),
            affected_jkey=pl.col("jkey"),
        )
        .with_columns(
            nic_index=pl.lit(0, dtype=pl.Int64),
            sw_index=pl.lit(0, dtype=pl.Int64),
            reps=pl.lit(1, dtype=pl.Int64),
            period_us=pl.lit(0, dtype=pl.Int64),
            recover_us=pl.lit(60 * S, dtype=pl.Int64),
            source=pl.lit("user"),
            kills_job=pl.lit(True),
            origin=pl.lit("user"),
        )
    )
    b = faultmod.sample_benign(fleet, scn, up_from, end, seed)
    b = b.filter(pl.Series(faultmod.outside(b["node_idx"].to_numpy(), b["t"].to_numpy(), gaps)))
    b = b.with_columns(
        nic_index=pl.lit(0, dtype=pl.Int64),
        sw_index=pl.lit(0, dtype=pl.Int64),
        reps=pl.lit(1, dtype=pl.Int64),
        period_us=pl.lit(0, dtype=pl.Int64),
        recover_us=pl.lit(60 * S, dtype=pl.Int64),
        pid=pl.lit(None, dtype=pl.Int64),
        affected_job_id=pl.lit(None, dtype=pl.Utf8),
        affected_jkey=pl.lit(None, dtype=pl.Int64),
        kills_job=pl.lit(False),
        origin=pl.lit("benign"),
    )
    ev = pl.concat([infra, u, b], how="diagonal_relaxed").with_columns(
        pl.col("gpu_index").clip(lower_bound=0).cast(pl.Int64)
    )
    ev = (
        ev.sort("t", "node_idx", "kind")
        .with_row_index("event_no")
        .with_columns(
            pl.col("event_no").cast(pl.Int64),
            fault_id=pl.format("F{}", pl.int_range(1, pl.len() + 1).cast(pl.Utf8).str.zfill(6)),
        )
    )
    ev = kernel.event_fields(ev, fleet.gpus, fleet.nodes, fleet.clusters, seed)
    key_off = {k.name: (k.lines[k.key_line][0] if k.lines else None) for k in catalog.KINDS}
    ev = ev.with_columns(
        signature=kernel.signatures(ev),
        key_offset=pl.col("kind").replace_strict(key_off, return_dtype=pl.Int64),
        skew_us=pl.col("node_idx").replace_strict(dict(enumerate(skew.tolist())), return_dtype=pl.Int64),
    )
    return ev.with_columns(logged_t=pl.col("t") + pl.col("key_offset") + pl.col("skew_us"))


def missing_node_days(n: int, n_days: int, frac: float, seed: int) -> pl.DataFrame:
    rng = stream(seed, "missing")
    k = int(rng.binomial(n * n_days, frac)) if frac > 0 else 0
    pick = np.sort(rng.choice(n * n_days, size=min(k, n * n_days), replace=False)) if k else np.array([], np.int64)
    return pl.DataFrame({"node_idx": (pick // n_days).astype(np.int64), "day": (pick % n_days).astype(np.int64)})


def mark_logged(ev: pl.DataFrame, missing: pl.DataFrame, t0: int) -> pl.DataFrame:
    ev = ev.with_columns(day=((pl.col("t") - t0) // DAY).cast(pl.Int64))
    gone = missing.with_columns(_gone=pl.lit(True))
    ev = ev.join(gone, on=["node_idx", "day"], how="left")
    return ev.with_columns(logged=pl.col("signature").is_not_null() & pl.col("_gone").is_null()).drop("_gone")
