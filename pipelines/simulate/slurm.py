"""Slurm outputs: ``sacct -P`` rows with job steps, the slurmctld log, compressed host lists."""

from __future__ import annotations

import polars as pl

from .templates import expand

S = 1_000_000
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "User",
    "Partition",
    "NodeList",
    "NNodes",
    "AllocTRES",
    "Submit",
    "Start",
    "End",
    "Elapsed",
    "State",
    "ExitCode",
    "Reason",
)
SACCT_HEADER = "|".join(SACCT_FIELDS)
CPUS_PER_NODE, MEM_GB_PER_NODE = 224, 2000


def _elapsed(sec: pl.Expr) -> pl.Expr:
    d, rem = sec // 86400, sec % 86400
    hms = pl.format(
        "{}:{}:{}",
        (rem // 3600).cast(pl.Utf8).str.zfill(2),
        (rem % 3600 // 60).cast(pl.Utf8).str.zfill(2),
        (rem % 60).cast(pl.Utf8).str.zfill(2),
    )
    return pl.when(d > 0).then(pl.format("{}-{}", d, hms)).otherwise(hms)


def _ts(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.Datetime("us")).dt.strftime("%Y-%m-%dT%H:%M:%S")


STEP_STATES = {  # job state -> (batch, extern, step 0) as (state, exit code)
    "COMPLETED": (("COMPLETED", "0:0"), ("COMPLETED", "0:0"), ("COMPLETED", "0:0")),
    "FAILED": (("FAILED", "1:0"), ("COMPLETED", "0:0"), ("FAILED", "1:0")),
    "OUT_OF_MEMORY": (("OUT_OF_MEMORY", "0:125"), ("COMPLETED", "0:0"), ("OUT_OF_MEMORY", "0:125")),
    "TIMEOUT": (("CANCELLED", "0:15"), ("COMPLETED", "0:0"), ("CANCELLED", "0:15")),
    "CANCELLED": (("CANCELLED", "0:15"), ("COMPLETED", "0:0"), ("CANCELLED", "0:15")),
    "PREEMPTED": (("CANCELLED", "0:15"), ("COMPLETED", "0:0"), ("CANCELLED", "0:15")),
    "NODE_FAIL": (("CANCELLED", "0:0"), ("CANCELLED", "0:0"), ("CANCELLED", "0:0")),
}
JOB_EXIT = {
    "COMPLETED": "0:0",
    "FAILED": "1:0",
    "OUT_OF_MEMORY": "0:125",
    "TIMEOUT": "0:0",
    "CANCELLED": "0:0",
    "PREEMPTED": "0:0",
    "NODE_FAIL": "0:0",
}


def sacct_rows(jobs: pl.DataFrame) -> pl.DataFrame:
    """One frame of sacct lines (``end``, ``order``, ``line``) for the jobs given: job row + 3 steps."""
    j = jobs.with_columns(
        base=pl.col("state").str.split(" ").list.first(),
        nn=pl.col("size").cast(pl.Utf8),
        cpus=(pl.col("size") * CPUS_PER_NODE).cast(pl.Utf8),
        gpus=(pl.col("size") * 8).cast(pl.Utf8),
        mem=(pl.col("size") * MEM_GB_PER_NODE).cast(pl.Utf8),
        sub=_ts("submit"),
        st=_ts("start"),
        en=_ts("end"),
        el=_elapsed((pl.col("end") - pl.col("start")) // S),
    ).with_columns(
        tres=pl.format("billing={},cpu={},gres/gpu={},mem={}G,node={}", "cpus", "cpus", "gpus", "mem", "nn"),
        step_tres=pl.format("cpu={},gres/gpu={},mem={}G,node={}", "cpus", "gpus", "mem", "nn"),
    )
    rows = []
    for step, (name, user, part, nodes, nn, tres, state, code, reason) in enumerate(
        (
            ("name", "user", "partition", "nodelist", "nn", "tres", "state", "job_exit", pl.lit("None")),
            (
                pl.lit("batch"),
                pl.lit(""),
                pl.lit(""),
                "host0",
                pl.lit("1"),
                pl.lit(f"cpu={CPUS_PER_NODE},gres/gpu=8,mem={MEM_GB_PER_NODE}G,node=1"),
                "s_batch",
                "c_batch",
                pl.lit(""),
            ),
            (pl.lit("extern"), pl.lit(""), pl.lit(""), "nodelist", "nn", "tres", "s_extern", "c_extern", pl.lit("")),
            (pl.lit("torchrun"), pl.lit(""), pl.lit(""), "nodelist", "nn", "step_tres", "s_0", "c_0", pl.lit("")),
        )
    ):
        suffix = ["", ".batch", ".extern", ".0"][step]
        c = lambda x: pl.col(x) if isinstance(x, str) else x
        rows.append(
            j.select(
                "end",
                "job_id_num",
                order=pl.lit(step),
                line=pl.concat_str(
                    [
                        pl.col("job_id") + suffix,
                        c(name),
                        c(user),
                        c(part),
                        c(nodes),
                        c(nn),
                        c(tres),
                        pl.col("sub"),
                        pl.col("st"),
                        pl.col("en"),
                        pl.col("el"),
                        c(state),
                        c(code),
                        c(reason),
                    ],
                    separator="|",
                ),
            )
        )
    return pl.concat(rows).sort("job_id_num", "order")


def add_step_states(jobs: pl.DataFrame) -> pl.DataFrame:
    base = pl.col("state").str.split(" ").list.first()
    exprs = {"job_exit": base.replace_strict(JOB_EXIT)}
    for k, nm in enumerate(("batch", "extern", "0")):
        exprs[f"s_{nm}"] = base.replace_strict({s: v[k][0] for s, v in STEP_STATES.items()})
        exprs[f"c_{nm}"] = base.replace_strict({s: v[k][1] for s, v in STEP_STATES.items()})
    return jobs.with_columns(**exprs)


CTLD = {
    "alloc": "sched: Allocate JobId={jobref} NodeList={nodelist} #CPUs={cpus} Partition={partition}",
    "exit": "_job_complete: JobId={jobref} WEXITSTATUS {wexit}",
    "signal": "_job_complete: JobId={jobref} WTERMSIG {wsig}",
    "done": "_job_complete: JobId={jobref} done",
    "limit": "Time limit exhausted for JobId={jobref}",
    "kill": "_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId={jobref} uid {uid}",
    "down": "error: Nodes {chost} not responding, setting DOWN",
    "killing": "Killing JobId={jobref} on failed node {chost}",
    "drain_reason": "update_node: node {host} reason set to: {reason}",
    "drain": "update_node: node {host} state set to DRAINING",
    "resume": "update_node: node {host} state set to IDLE",
}


def ctld_rows(jobs: pl.DataFrame, drains: pl.DataFrame) -> pl.DataFrame:
    """slurmctld lines (``t, seq, msg``) for jobs and node drains of one cluster."""
    j = (
        jobs.with_columns(
            cpus=pl.col("size") * CPUS_PER_NODE,
            base=pl.col("state").str.split(" ").list.first(),
            wexit=pl.when(pl.col("state") == "FAILED").then(1).otherwise(0),
            wsig=pl.when(pl.col("state") == "OUT_OF_MEMORY").then(9).otherwise(15),
        )
        .with_row_index("eseq")
        .with_columns(pl.col("eseq").cast(pl.Int64))
    )
    out = [expand(j.with_columns(t=pl.col("start")), [(0, CTLD["alloc"])], [], 1 << 50)]
    e = j.with_columns(t=pl.col("end"))
    sel = lambda *states: e.filter(pl.col("base").is_in(states))
    out.append(expand(sel("COMPLETED", "FAILED"), [(0, CTLD["exit"]), (1, CTLD["done"])], [], 2 << 50))
    out.append(expand(sel("OUT_OF_MEMORY", "PREEMPTED"), [(0, CTLD["signal"]), (1, CTLD["done"])], [], 2 << 50))
    out.append(expand(sel("TIMEOUT"), [(0, CTLD["limit"]), (1, CTLD["signal"]), (2, CTLD["done"])], [], 2 << 50))
    out.append(expand(sel("CANCELLED"), [(-S, CTLD["kill"]), (1, CTLD["signal"]), (2, CTLD["done"])], [], 2 << 50))
    out.append(
        expand(sel("NODE_FAIL"), [(-2 * S, CTLD["down"]), (-S, CTLD["killing"]), (0, CTLD["done"])], [], 2 << 50)
    )
    if drains.height:
        d = drains.with_row_index("eseq").with_columns(pl.col("eseq").cast(pl.Int64))
        out.append(expand(d, [(0, CTLD["drain_reason"]), (1, CTLD["drain"])], [], 3 << 50))
        out.append(expand(d.with_columns(t=pl.col("t_resume")), [(0, CTLD["resume"])], [], 3 << 50))
    return pl.concat([o for o in out if o.height])


def ctld_prefix() -> pl.Expr:
    return pl.concat_str(
        [
            pl.lit("["),
            pl.col("t").cast(pl.Datetime("us")).dt.strftime("%Y-%m-%dT%H:%M:%S%.3f"),
            pl.lit("] "),
            pl.col("msg"),
        ]
    )
