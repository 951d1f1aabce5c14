"""``simulate()``: fleet -> faults -> jobs -> logs, written as a landing folder plus ``_truth/``."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from ..ingest.hostlist import compress_hostlist
from . import catalog, downtime, landing, truth, workload
from . import events as evmod
from . import faults as faultmod
from .downtime import DAY, MIN
from .fleet import build_fleet
from .rng import stream
from .scenarios import SCENARIOS, Scenario
from .writer import Writer

S = 1_000_000


def _epoch_us(day: str) -> int:
    d = dt.date.fromisoformat(str(day))
    return int(dt.datetime(d.year, d.month, d.day, tzinfo=dt.timezone.utc).timestamp()) * S


def _prepare(root: Path, overwrite: bool) -> None:
    if root.exists() and any(root.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{root} is not empty (pass overwrite=True to replace a simulated landing folder)")
        if not ((root / "inventory.csv").exists() or (root / "_truth").exists()):
            raise FileExistsError(f"{root} does not look like a landing folder; refusing to delete it")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)


def simulate(
    out_dir,
    *,
    scenario: str | Scenario = "demo",
    providers: int | None = None,
    nodes: int | None = None,
    days: int | None = None,
    seed: int = 0,
    start_date: str | None = None,
    progress: Callable[[str], None] | None = None,
    noise: int | None = None,
    overwrite: bool = False,
) -> dict:
    """Write a simulated landing folder to ``out_dir``; same arguments and seed give identical bytes.
    ``scenario``: a name in ``SCENARIOS`` or a ``Scenario``; ``None`` keeps the scenario's default.
    Returns a small summary (files, bytes, lines, nodes, jobs, failed jobs, faults, seconds, MB/s)."""
    clock = time.perf_counter()
    say = progress or (lambda _msg: None)
    if isinstance(scenario, Scenario):
        base = scenario
    elif scenario in SCENARIOS:
        base = SCENARIOS[scenario]
    else:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
    scn = base.with_overrides(providers=providers, nodes=nodes, days=days, start_date=start_date, noise=noise)
    if scn.providers < 1 or scn.nodes < 1 or scn.days < 1:
        raise ValueError("providers, nodes and days must be at least 1")
    root = Path(out_dir)
    _prepare(root, overwrite)
    w = Writer(root)
    t0, n_days = _epoch_us(scn.start_date), int(scn.days)
    end = t0 + n_days * DAY
    dates = [(dt.date.fromisoformat(scn.start_date) + dt.timedelta(days=i)).isoformat() for i in range(n_days)]

    # --- fleet and the fault process
    fleet = build_fleet(scn, seed)
    n = fleet.n_nodes
    say(f"fleet: {fleet.providers.height} providers, {fleet.clusters.height} clusters, {n} nodes, {n * 8} GPUs")
    skew = downtime.choose_skew(n, scn.skew_fraction, seed)
    if scn.warm_start:
        boot0 = t0 - stream(seed, "boot0").integers(2 * DAY, 40 * DAY, n)
    else:
        boot0 = downtime.first_boots(n, t0, seed)
    up_from = np.maximum(boot0 + 10 * MIN, t0)
    maint = downtime.plan_maintenance(fleet.nodes, t0, n_days, seed)
    lemons = faultmod.choose_lemons(fleet, scn, seed)
    bad_racks = faultmod.choose_bad_racks(fleet, scn, seed)
    f, expect = faultmod.sample_faults(fleet, scn, up_from, end, maint, lemons, bad_racks, seed)
    f, gaps = faultmod.settle(f, boot0, maint, seed)
    f = f.with_row_index("fid").with_columns(pl.col("fid").cast(pl.Int64))
    say(f"faults: {f.height} infrastructure faults, {lemons.height} lemon nodes, {bad_racks.height} bad racks")

    # --- workload per cluster
    jobs, affected, killers = _workload(fleet, scn, f, maint, boot0, t0, end, seed)
    say(f"jobs: {jobs.height} ended in the window, {jobs.filter(pl.col('state') != 'COMPLETED').height} not completed")

    # --- every kernel-visible event, with the process that owned the device
    events = evmod.build(fleet, scn, f, jobs, affected, killers, gaps, up_from, end, skew, seed)
    missing = evmod.missing_node_days(n, n_days, scn.missing_log_fraction, seed)
    events = evmod.mark_logged(events, missing, t0)

    # --- kernel logs
    boots = landing.all_boots(boot0, maint, f)
    landing.write_kernel(w, fleet, scn, events, boots, maint, f, gaps, missing, boot0, skew, t0, end, dates, seed, say)

    # --- Slurm and job logs
    logged = landing.write_jobs(w, fleet, scn, jobs, t0, dates, seed, say)
    landing.write_slurm(w, fleet, jobs, f, t0, end, dates)
    landing.write_inventory(w, fleet)
    landing.write_prices(w, fleet, scn, dates)

    # --- the truth
    say("truth: writing _truth/*.parquet")
    tw = Writer(root)
    truth.write_all(
        tw, fleet, scn, jobs, logged, events, lemons, bad_racks, maint, boots, skew, missing, expect, t0, end, dates, f
    )
    seconds = time.perf_counter() - clock
    summary = {
        "scenario": scn.name,
        "out_dir": str(root),
        "seed": seed,
        "start_date": scn.start_date,
        "days": n_days,
        "providers": fleet.providers.height,
        "clusters": fleet.clusters.height,
        "nodes": n,
        "gpus": n * 8,
        "files": w.files,
        "bytes": w.bytes,
        "lines": w.lines,
        "truth_files": tw.files,
        "truth_bytes": tw.bytes,
        "jobs": jobs.height,
        # a failed job is one that did not complete, as in `job_failures` (docs/analytics.md)
        "failed_jobs": jobs.filter(pl.col("state") != "COMPLETED").height,
        "faults": int(events.filter(pl.col("origin") == "infra").height),
        "seconds": round(seconds, 3),
        "mb_per_s": round(w.bytes / 1e6 / max(seconds, 1e-9), 1),
        "io_seconds": round(w.io_seconds, 3),
        "generate_mb_per_s": round(w.bytes / 1e6 / max(seconds - w.io_seconds, 1e-9), 1),
    }
    (root / "_truth" / "manifest.json").write_text(
        json.dumps(
            {
                "scenario": {
                    k: (list(v) if isinstance(v, tuple) else v) for k, v in scn.__dict__.items() if k != "extra"
                },
                "summary": {
                    k: v
                    for k, v in summary.items()
                    if k not in ("seconds", "mb_per_s", "io_seconds", "generate_mb_per_s", "out_dir")
                },
            },
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )
    say(
        f"done: {w.files} files, {w.bytes / 1e6:.1f} MB, {w.lines} lines in {seconds:.1f} s ({summary['mb_per_s']} MB/s)"
    )
    return summary


# ----------------------------------------------------------------------------------------------

TORCH_V = {"2.1": 0, "2.2": 0, "2.3": 1, "2.4": 2}


def _workload(fleet, scn, f, maint, boot0, t0, end, seed):
    parts, affected, killers = [], {}, set()
    t_first = t0 - 3 * DAY if scn.warm_start else t0 + 30 * MIN
    for c in fleet.clusters.iter_rows(named=True):
        nid = fleet.nodes.filter(pl.col("cluster_idx") == c["cluster_idx"])["node_idx"].to_numpy()
        ready = np.full(len(nid), t_first) if scn.warm_start else boot0[nid] + 5 * MIN
        gen = workload.generate_jobs(len(nid), t_first, end, scn, seed, c["cluster"])
        nodes_set = nid.tolist()
        sj, aff, kil = workload.schedule(
            c,
            nid,
            ready,
            gen,
            f.filter(pl.col("node_idx").is_in(nodes_set)),
            maint.filter(pl.col("node_idx").is_in(nodes_set)),
            seed,
        )
        # each cluster's controller counts from its own base; spaced so ids are unique fleet-wide
        base = 100_000 * (c["cluster_idx"] + 1) + int(stream(seed, "jobids", c["cluster"]).integers(0, 40_000))
        sj = sj.sort("jix").with_columns(jid_raw=pl.int_range(0, pl.len()).cast(pl.Int64) + base)
        head_raw = dict(zip(sj["jix"].to_list(), sj["jid_raw"].to_list()))
        sj = sj.with_columns(
            job_id=pl.when(pl.col("array_task") >= 0)
            .then(pl.format("{}_{}", pl.col("array_head").replace_strict(head_raw), pl.col("array_task")))
            .otherwise(pl.col("jid_raw").cast(pl.Utf8)),
            cluster_idx=pl.lit(c["cluster_idx"], dtype=pl.Int64),
        )
        sj = sj.with_columns(jkey=pl.col("cluster_idx") * 10_000_000 + pl.col("jix"))
        jid_of = dict(zip(sj["jix"].to_list(), sj["job_id"].to_list()))
        sj = sj.with_columns(
            resumes_job_id=pl.col("parent_jix").replace_strict(jid_of, default=None, return_dtype=pl.Utf8)
        )
        for fid, jix in aff.items():
            affected[fid] = c["cluster_idx"] * 10_000_000 + jix
        killers |= kil
        parts.append(sj)
    jobs = pl.concat(parts).filter((pl.col("end") > t0) & (pl.col("end") <= end))
    kept = set(jobs["jkey"].to_list())
    affected = {fid: jk for fid, jk in affected.items() if jk in kept}
    killers = {fid for fid in killers if fid in affected}
    cl = fleet.clusters.select(
        "cluster_idx",
        "provider",
        "cluster",
        "torch",
        "nccl",
        "cuda",
        "python",
        "nccl_timeout_s",
        "job_prefix",
        "gpu_mem_gib",
        "nccl_debug",
    )
    kinds = {k.name: k for k in catalog.KINDS}
    host = fleet.nodes["node"].to_list()
    ips = fleet.nodes["ip"].to_list()
    jobs = (
        jobs.join(cl, on="cluster_idx", how="left")
        .with_columns(
            torch_v=pl.col("torch").str.slice(0, 3).replace_strict(TORCH_V, default=3, return_dtype=pl.Int64),
            nccl_new=pl.col("nccl").str.slice(2).str.split(".").list.first().cast(pl.Int64) >= 19,
            effect=pl.col("ending").replace_strict({k: v.effect for k, v in kinds.items()}, default=""),
            cuda_msg=pl.col("ending").replace_strict({k: v.cuda_msg for k, v in kinds.items()}, default=""),
            io_msg=pl.col("ending").replace_strict({k: v.io_msg for k, v in kinds.items()}, default=""),
            hosts=pl.col("nodes").list.eval(pl.element().replace_strict(dict(enumerate(host)), return_dtype=pl.Utf8)),
            ips=pl.col("nodes").list.eval(pl.element().replace_strict(dict(enumerate(ips)), return_dtype=pl.Utf8)),
            py=pl.col("python"),
        )
        .with_columns(glog_agent=pl.col("torch_v") >= 2)
    )
    jobs = jobs.with_columns(nodelist=pl.Series([compress_hostlist(h) for h in jobs["hosts"].to_list()], dtype=pl.Utf8))
    return jobs.sort("cluster_idx", "jid_raw"), affected, killers
