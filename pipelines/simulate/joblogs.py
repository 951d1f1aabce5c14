"""Job stdout/stderr rows (``jkey, node_i, lr, t, seq, msg``) for every logged job, built per line
shape over whole frames. The failure cascade: the culprit's error, torchrun tearing down its node,
watchdog timeouts one NCCL timeout later, ChildFailedError tables, then srun / slurmstepd."""

# node_i: the node's position in the job (-1: srun / slurmstepd itself); lr: the local rank (-1: the torchrun agent)
from __future__ import annotations

import numpy as np
import polars as pl

from . import joblogs_text as T
from .fleet import GPU_BUSES
from .kernel import hexs
from .rng import stream
from .templates import empty_rows, expand

S, MS = 1_000_000, 1_000
KEYS = ["jkey", "node_i", "lr"]
_SCHEMA = {"jkey": pl.Int64, "node_i": pl.Int64, "lr": pl.Int64}
C_INIT, C_PROG, C_CULPRIT, C_AGENT, C_WATCH, C_SRUN = (1 << 52), (2 << 52), (3 << 52), (4 << 52), (5 << 52), (6 << 52)

USER_OUT = {  # ending -> (what the culprit prints, its process exits, exit code)
    "py_exception": ("py", True, 1),
    "gpu_oom": ("gpu_oom", True, 1),
    "cpu_oom": ("", True, -9),
    "xid31": ("cuda", True, 1),
    "xid13": ("cuda", True, 1),
    "device_assert": ("assert", True, 1),
    "desync": ("", False, 0),
}
EFFECT_OUT = {
    "silent": ("", False, 0),
    "cuda": ("cuda", True, 1),
    "nccl_ib": ("nccl_ib", True, 1),
    "io": ("io", True, 1),
    "oom_kill": ("", True, -9),
}


def collective_seq(t_event, start):
    """The collective a job was in when it failed: ~3 collectives a second after warm-up."""
    return 1000 + (t_event - start) // 330_000


def classify(jobs: pl.DataFrame) -> pl.DataFrame:
    """Decide the shape of each job's log: cascade, culprit output, whether the culprit exits."""
    cascade, cout, exits, ec = [], [], [], []
    for ending, state, effect in jobs.select("ending", "state", "effect").iter_rows():
        if ending == "completed":
            c = ("none", "", False, 0)
        elif state in ("TIMEOUT", "PREEMPTED") or state.startswith("CANCELLED"):
            c = ("stepd", "", False, 0)
        elif state == "NODE_FAIL":
            c = ("node_fail", "", False, 0)
        else:
            c = ("watchdog",) + (USER_OUT[ending] if ending in USER_OUT else EFFECT_OUT[effect])
        cascade.append(c[0])
        cout.append(c[1])
        exits.append(c[2])
        ec.append(c[3])
    return jobs.with_columns(
        cascade=pl.Series(cascade, dtype=pl.Utf8),
        cout=pl.Series(cout, dtype=pl.Utf8),
        exits=pl.Series(exits, dtype=pl.Boolean),
        ec=pl.Series(ec, dtype=pl.Int64),
    )


def _frames(jobs: pl.DataFrame, rng) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    j = jobs.with_columns(
        nranks=pl.col("size") * 8,
        culprit_rank=pl.col("culprit_node") * 8 + pl.col("culprit_local").clip(lower_bound=0),
        seq=collective_seq(pl.col("t_event"), pl.col("start")).cast(pl.Int64),
        tms=pl.col("nccl_timeout_s") * 1000,
        host0=pl.col("hosts").list.first(),
        jid=pl.col("jid_raw").cast(pl.Utf8),
    ).with_columns(seqm1=pl.col("seq") - 1)
    n = j.height
    j = j.with_columns(
        op=pl.Series(rng.choice(["ALLREDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE"], n, p=[0.6, 0.2, 0.2])),
        numel=pl.Series(rng.choice([262144, 1048576, 4194304, 16777216], n)),
        commid=hexs(rng, n, 16),
        shard=pl.Series(rng.integers(0, 100000, n)).cast(pl.Utf8).str.zfill(5),
        chost=pl.col("hosts").list.get(pl.col("culprit_node")),
        peer_ip=pl.col("ips").list.get((pl.col("culprit_node") + 1) % pl.col("size")),
        port=pl.Series(rng.integers(30000, 60000, n)),
        ib_file=pl.when(pl.col("nccl_new")).then(pl.lit("transport/net_ib.cc:1696 ")).otherwise(pl.lit("")),
        cuda_file=pl.when(pl.col("nccl_new")).then(pl.lit("enqueue.cc:1455 ")).otherwise(pl.lit("")),
    )
    jn = (
        j.select("jkey", "size", "hosts", "ips", "pid_base", "py", "glog_agent", "torch_v")
        .with_columns(node_i=pl.int_ranges(0, "size"))
        .explode("hosts", "ips", "node_i")
        .rename({"hosts": "host", "ips": "ip"})
        .with_columns(node_i=pl.col("node_i").cast(pl.Int64), apid=pl.col("pid_base") + 97 * pl.col("node_i"))
    )
    lr = pl.DataFrame({"lr": np.arange(8, dtype=np.int64), "busid": [f"{b:x}000" for b in GPU_BUSES]})
    jr = jn.join(lr, how="cross").with_columns(
        rank=pl.col("node_i") * 8 + pl.col("lr"), pid=pl.col("apid") + 12 + pl.col("lr")
    )
    m = jr.height
    jr = jr.with_columns(
        tid=pl.col("pid") + pl.Series(rng.integers(60, 400, m)),
        comm="55" + hexs(rng, m, 6) + "c3d0",
        netdev0=pl.lit("ibp25s0"),
    )
    return j, jn, jr


def job_rows(jobs: pl.DataFrame, seed: int, key: object = "") -> pl.DataFrame:
    """All job-log rows of ``jobs`` (already classified)."""
    if jobs.height == 0:
        return empty_rows(_SCHEMA)
    rng = stream(seed, "joblogs", key)
    j, jn, jr = _frames(jobs, rng)
    rows = [_nccl_init(j, jr, rng), _agent_start(j, jn), _progress(j, rng), _endings(j, jn)]
    w = j.filter(pl.col("cascade") == "watchdog")
    if w.height:
        rows += _cascade(w, jn, jr, rng)
    return pl.concat([r.select(*KEYS, "t", "seq", "msg") for r in rows if r.height])


def _nccl_init(j, jr, rng):
    """NCCL_DEBUG=INFO start-up lines of every rank (clusters running NCCL_DEBUG=WARN print none)."""
    j = j.filter(pl.col("nccl_debug") == "INFO")
    jr = jr.join(j.select("jkey"), on="jkey", how="semi")
    r = (
        jr.join(j.select("jkey", "start", "nranks", "nccl", "cuda", "commid"), on="jkey")
        .with_columns(
            t=pl.col("start")
            + 8 * S
            + pl.col("node_i") * MS
            + pl.col("lr") * 300
            + pl.Series(rng.integers(0, 2 * S, jr.height)),
            channel=pl.when(pl.col("rank") == 0)
            .then(pl.lit("Channel 00/32 :    0   1   2   3   4   5   6   7"))
            .otherwise(
                pl.format(
                    "Channel 00/0 : {}[{}] -> {}[{}] via P2P/CUMEM/read",
                    pl.col("rank"),
                    pl.col("lr"),
                    (pl.col("rank") + 1) % pl.col("nranks"),
                    (pl.col("lr") + 1) % 8,
                )
            ),
        )
        .with_row_index("eseq")
        .with_columns(pl.col("eseq").cast(pl.Int64))
    )
    return pl.concat(
        [
            expand(r.filter(pl.col("rank") == 0).with_columns(t=pl.col("t") - 5 * MS), T.NCCL_RANK0, KEYS, C_INIT),
            expand(r, T.NCCL_RANK, KEYS, C_INIT),
        ]
    )


def _agent_start(j, jn):
    a = (
        jn.join(j.select("jkey", "start"), on="jkey")
        .with_columns(t=pl.col("start") + 2 * S + pl.col("node_i") * 1500, lr=pl.lit(-1, dtype=pl.Int64))
        .with_row_index("eseq")
        .with_columns(pl.col("eseq").cast(pl.Int64))
    )
    return _by_flag(a, "glog_agent", lambda v: [(0, T.AGENT_START[v])], C_AGENT)


def _by_flag(frame, col, lines_for, base):
    parts = [
        expand(frame.filter(pl.col(col) == v), lines_for(v), KEYS, base) for v in frame[col].unique().sort().to_list()
    ]
    return pl.concat(parts) if parts else empty_rows(_SCHEMA)


def _progress(j, rng):
    """Rank 0's progress lines (~200 a run, a minute apart at least) from ``prog0``, a save every
    ``ckpt_every`` right after a progress line, and a resumed job's checkpoint load just before its
    first progress line, in its stack's real line shapes (``joblogs_text``)."""
    stop = pl.when(pl.col("cascade") == "none").then(pl.col("end") - 10 * S).otherwise(pl.col("t_event"))
    base = j.select(
        "jkey",
        "start",
        "name",
        "stack",
        "ckpt_every",
        "step_us",
        "resume_step",
        "load_us",
        "prog0",
        "dur",
        "size",
        stop=stop,
    ).with_columns(interval=pl.max_horizontal(60 * S, (pl.col("stop") - pl.col("prog0")) // 200))
    prog = base.with_columns(
        k=pl.int_ranges(0, ((pl.col("stop") - pl.col("prog0") - 1) // pl.col("interval")).clip(-1) + 1)
    )
    prog = prog.explode("k").drop_nulls("k").with_columns(pl.col("k").cast(pl.Int64))
    prog = prog.with_columns(
        t=pl.col("prog0")
        + pl.col("k") * pl.col("interval")
        + pl.when(pl.col("k") > 0).then(pl.Series(rng.integers(0, S, prog.height))).otherwise(0)
    )
    ck = base.filter(pl.col("ckpt_every") > 0).with_columns(
        k=pl.int_ranges(1, ((pl.col("stop") - 1 - pl.col("prog0")) // pl.col("ckpt_every")).clip(0) + 1)
    )
    ck = (
        ck.explode("k")
        .drop_nulls("k")
        .with_columns(t=pl.col("prog0") + pl.col("k").cast(pl.Int64) * pl.col("ckpt_every"))
    )
    # the progress line a save follows, a second before it (its stamp dates an unstamped save)
    prog = pl.concat([prog.drop("k"), ck.drop("k").with_columns(t=pl.col("t") - S)], how="vertical_relaxed")
    prog = _line_values(prog, rng)
    ck = _line_values(ck.drop("k"), rng)
    load = _line_values(
        base.filter(pl.col("load_us") > 0).with_columns(t=pl.col("prog0") - 5 * S, step=pl.col("resume_step")), rng
    )
    out = []
    for stack in sorted(T.PROGRESS):
        for frame, lines in ((prog, T.PROGRESS), (ck, T.SAVE), (load, T.LOAD)):
            part = frame.filter(pl.col("stack") == stack)
            if part.height:
                part = part.sort("jkey", "t").with_row_index("eseq").with_columns(pl.col("eseq").cast(pl.Int64))
                out.append(expand(part, lines[stack], KEYS, C_PROG))
    return pl.concat(out) if out else empty_rows(_SCHEMA)


def _line_values(p: pl.DataFrame, rng) -> pl.DataFrame:
    """The numbers a progress or checkpoint line states at its time ``t``: the step (from the
    resumed step on, one every ``step_us``), loss, throughput, padded as the stack prints them."""
    m = p.height
    if "step" not in p.columns:
        p = p.with_columns(step=pl.col("resume_step") + ((pl.col("t") - pl.col("prog0")).clip(0) // pl.col("step_us")))
    total = ((pl.col("resume_step") + pl.col("dur") // pl.col("step_us")) // 1000 + 1) * 1000
    tps = pl.Series(rng.integers(4_000, 12_000, m)) * pl.col("size")
    pad = lambda e, w: e.cast(pl.Utf8).str.pad_start(w)  # noqa: E731
    return p.with_columns(
        node_i=pl.lit(0, dtype=pl.Int64),
        lr=pl.lit(0, dtype=pl.Int64),
        total=total,
        loss=(2.0 + 7.0 * (-pl.col("step") / 4000.0).exp() + pl.Series(rng.normal(0, 0.03, m))).round(4),
        gnorm=pl.Series(rng.uniform(0.2, 1.5, m)).round(3),
        tps=tps,
        sps=(pl.Series(rng.uniform(120.0, 220.0, m)) * pl.col("size")).round(3),
        sps_avg=(pl.Series(rng.uniform(150.0, 180.0, m)) * pl.col("size")).round(3),
        samples=pl.col("step") * 512,
        tokens=pl.col("step") * 4096,
        ms_per_it=(pl.col("step_us") / 1000.0 + pl.Series(rng.normal(0, 5.0, m))).round(1),
        s_per_it=(pl.col("step_us") / 1e6).round(3),
        runtime=((pl.col("t") - pl.col("start")) / 1e6).round(4),
        epoch=(pl.col("step") / 10_000.0).round(2),
        epoch_s=(pl.col("t") / 1e6).round(3),
    ).with_columns(
        tps_comma=_thousands(pl.col("tps")),
        loss_e=pl.format("{}E+00", _decimals(pl.col("loss"), 6)),
        step_r6=pad(pl.col("step"), 6),
        step_r7=pad(pl.col("step"), 7),
        step_r8=pad(pl.col("step"), 8),
        total_r8=pad(pl.col("total"), 8),
        samples_r12=pad(pl.col("samples"), 12),
        gbs_r5=pad(pl.lit(512), 5),
    )


def _thousands(v: pl.Expr) -> pl.Expr:
    """An integer below 10^9 with thousands separators (``7,094``)."""
    z = lambda e: e.cast(pl.Utf8).str.pad_start(3, "0")  # noqa: E731
    return (
        pl.when(v >= 1_000_000)
        .then(pl.format("{},{},{}", v // 1_000_000, z(v // 1000 % 1000), z(v % 1000)))
        .when(v >= 1000)
        .then(pl.format("{},{}", v // 1000, z(v % 1000)))
        .otherwise(v.cast(pl.Utf8))
    )


def _decimals(v: pl.Expr, n: int) -> pl.Expr:
    """A positive number with exactly ``n`` decimals (``8.482397``)."""
    scaled = (v * 10**n).round(0).cast(pl.Int64)
    return pl.format("{}.{}", scaled // 10**n, (scaled % 10**n).cast(pl.Utf8).str.pad_start(n, "0"))


def _endings(j, jn):
    """Lines at the very end: success messages, or slurmstepd for limits, cancels, node failures."""
    out = []
    done = j.filter(pl.col("cascade") == "none").with_row_index("eseq").with_columns(pl.col("eseq").cast(pl.Int64))
    if done.height:
        a = (
            jn.join(done.select("jkey", "end"), on="jkey")
            .with_columns(t=pl.col("end") - 3 * S + pl.col("node_i") * 700, lr=pl.lit(-1, dtype=pl.Int64))
            .with_row_index("eseq")
            .with_columns(pl.col("eseq").cast(pl.Int64))
        )
        out.append(_by_flag(a, "glog_agent", lambda v: [(0, T.AGENT_DONE[v])], C_AGENT))
    sd = (
        j.filter(pl.col("cascade") == "stepd")
        .with_columns(
            t=pl.col("end"),
            node_i=pl.lit(-1, dtype=pl.Int64),
            lr=pl.lit(-1, dtype=pl.Int64),
            kind=pl.when(pl.col("state") == "TIMEOUT")
            .then(pl.lit("timeout"))
            .when(pl.col("state") == "PREEMPTED")
            .then(pl.lit("preempted"))
            .otherwise(pl.lit("cancelled")),
        )
        .with_row_index("eseq")
        .with_columns(pl.col("eseq").cast(pl.Int64))
    )
    for kind in ("timeout", "cancelled", "preempted"):
        out.append(
            expand(sd.filter(pl.col("kind") == kind), [(0, T.STEPD[kind]), (100 * MS, T.SRUN_ABORT)], KEYS, C_SRUN)
        )
    nf = (
        j.filter(pl.col("cascade") == "node_fail")
        .with_columns(t=pl.col("end"), node_i=pl.lit(-1, dtype=pl.Int64), lr=pl.lit(-1, dtype=pl.Int64))
        .with_row_index("eseq")
        .with_columns(pl.col("eseq").cast(pl.Int64))
    )
    out.append(expand(nf, [(-S, T.SRUN_NODE_FAIL), (0, T.STEPD["node_fail"])], KEYS, C_SRUN))
    return pl.concat([o for o in out if o.height]) if any(o.height for o in out) else empty_rows(_SCHEMA)


CULPRIT_LINES = {  # cout -> (lines before the traceback, lines after it)
    "py": ((), ("{tbp}{exc}",)),
    "gpu_oom": ((), ("{tbp}{oom}",)),
    "cuda": ((), ("{tbp}RuntimeError: CUDA error: {cuda_msg}",) + tuple("{tbp}" + h for h in T.CUDA_HINTS)),
    "assert": (
        (T.DEVICE_ASSERT, T.DEVICE_ASSERT.replace("{thr}", "{thr2}")),
        ("{tbp}RuntimeError: CUDA error: device-side assert triggered",) + tuple("{tbp}" + h for h in T.CUDA_HINTS),
    ),
    "io": ((), ("{tbp}{io_msg}",)),
    "nccl_ib": ((T.NCCL_IB_WARN,), tuple("{tbp}" + x for x in T.NCCL_IB_ERR)),
}
CODE = {
    "py": None,
    "gpu_oom": "loss.backward()",
    "cuda": "loss.backward()",
    "assert": "logits = model(input_ids)",
    "io": "batch = next(data_iter)",
    "nccl_ib": "dist.all_reduce(grads, group=dp_group)",
}


def _cascade(w, jn, jr, rng):
    out = []
    m = w.height
    w = w.with_columns(t_c=pl.col("t_event") + pl.Series(rng.integers(200 * MS, 1500 * MS, m)))
    # 1. the culprit's own error, printed by its rank
    exc_i = rng.integers(0, len(T.PY_EXCEPTIONS), m)
    cap = pl.col("gpu_mem_gib").cast(pl.Float64)
    alloc = pl.Series(rng.choice([1.0, 2.0, 4.0, 8.0, 16.0], m))
    cul = jr.join(
        w.select(
            "jkey",
            "culprit_rank",
            "cout",
            "t_c",
            "t_event",
            "cuda_msg",
            "io_msg",
            "torch_v",
            "gpu_mem_gib",
            "peer_ip",
            "port",
            "nccl",
            "ib_file",
            "cuda_file",
            "ending",
            "shard",
            code_py=pl.Series([T.PY_EXCEPTIONS[i][0] for i in exc_i]),
            exc_t=pl.Series([T.PY_EXCEPTIONS[i][1] for i in exc_i]),
            alloc=alloc,
        ),
        left_on=["jkey", "rank"],
        right_on=["jkey", "culprit_rank"],
    ).filter(pl.col("cout") != "")
    if cul.height:
        k = cul.height
        cul = (
            cul.with_columns(
                t=pl.col("t_c"),
                tbp=pl.when(pl.col("torch_v") >= 2).then(pl.format("[rank{}]: ", pl.col("rank"))).otherwise(pl.lit("")),
                code=pl.when(pl.col("cout") == "py")
                .then(pl.col("code_py"))
                .otherwise(pl.col("cout").replace_strict({c: v for c, v in CODE.items() if v}, default="")),
                exc=pl.col("exc_t").str.replace("{shard}", pl.col("shard"), literal=True),
                free=pl.Series(rng.integers(200, 1500, k)),
                blk=pl.Series(rng.integers(0, 4096, k)),
                thr=pl.Series(rng.integers(0, 128, k)),
                thr2=pl.Series(rng.integers(0, 128, k)),
            )
            .with_columns(
                used=(cap - pl.col("free") / 1024.0).round(2),
                a1=(cap * 0.93).round(2),
                a2=(cap * 0.05).round(2),
                alloc=pl.col("alloc").round(2),
            )
            .with_columns(oom=pl.when(pl.col("torch_v") == 0).then(pl.lit(T.OOM_OLD)).otherwise(pl.lit(T.OOM_NEW)))
        )
        cul = cul.with_columns(
            oom=_fill(
                pl.col("oom"), ("alloc", "lr", "cap", "free", "pid", "used", "a1", "a2"), cap=pl.col("gpu_mem_gib")
            )
        )
        cul = cul.with_row_index("eseq").with_columns(pl.col("eseq").cast(pl.Int64))
        for cout, (pre, post) in CULPRIT_LINES.items():
            sub = cul.filter(pl.col("cout") == cout)
            lines = [(-10 * MS + i, x) for i, x in enumerate(pre)]
            lines += [(i, "{tbp}" + x) for i, x in enumerate(T.TB_HEAD)]
            lines += [(100 + i, x) for i, x in enumerate(post)]
            out.append(expand(sub, lines, KEYS, C_CULPRIT))
            x31 = sub.filter(pl.col("ending") == "xid31")
            if cout == "cuda" and x31.height:
                out.append(expand(x31, [(-20 * MS, T.CUDA_NCCL_WARN)], KEYS, C_CULPRIT))

    # 2. torchrun on the culprit's node tears down its other workers and reports the culprit
    ex = w.filter(pl.col("exits"))
    if ex.height:
        sig = (
            jr.join(ex.select("jkey", "culprit_node", "culprit_rank", "t_c", "glog_agent"), on="jkey")
            .filter((pl.col("node_i") == pl.col("culprit_node")) & (pl.col("rank") != pl.col("culprit_rank")))
            .with_columns(t=pl.col("t_c") + 600 * MS + pl.col("lr") * 200, lr=pl.lit(-1, dtype=pl.Int64))
            .with_row_index("eseq")
            .with_columns(pl.col("eseq").cast(pl.Int64))
        )
        out.append(_by_flag(sig, "glog_agent", lambda v: [(0, T.AGENT_SIGTERM[v])], C_AGENT))
        ag = (
            jn.join(ex.select("jkey", "culprit_node", "culprit_rank", "culprit_local", "t_c", "ec", "tms"), on="jkey")
            .filter(pl.col("node_i") == pl.col("culprit_node"))
            .with_columns(
                t=pl.col("t_c") + 2 * S,
                lr=pl.lit(-1, dtype=pl.Int64),
                frank=pl.col("culprit_rank"),
                flr=pl.col("culprit_local").clip(lower_bound=0),
            )
            .with_columns(fpid=pl.col("apid") + 12 + pl.col("flr"))
        )
        out.append(_child_failed(ag))

    # 3. watchdog timeouts on the surviving ranks, one NCCL timeout after the fault
    rep = jr.join(
        w.select(
            "jkey",
            "culprit_node",
            "culprit_rank",
            "culprit_local",
            "exits",
            "t_event",
            "tms",
            "seq",
            "seqm1",
            "op",
            "numel",
            "ending",
            "torch_v",
        ),
        on="jkey",
        suffix="_j",
    ).filter(
        pl.when(pl.col("exits"))
        .then(pl.col("node_i") != pl.col("culprit_node"))
        .when(pl.col("culprit_local") < 0)
        .then(pl.col("node_i") != pl.col("culprit_node"))
        .otherwise(pl.col("rank") != pl.col("culprit_rank"))
    )
    if rep.height:
        jit = rng.integers(30 * MS, 900 * MS, rep.height)
        rep = rep.with_columns(
            t=pl.col("t_event") + pl.col("tms") * MS + pl.Series(jit), ran=pl.col("tms") + pl.Series(jit // MS)
        )
        rep = rep.with_row_index("eseq").with_columns(pl.col("eseq").cast(pl.Int64))
        out.append(_by_flag(rep, "torch_v", lambda v: list(T.WATCHDOG[v]), C_WATCH))
        # every rank whose watchdog fired prints the desync report; the log keeps the lowest one's
        # (rank 0, or rank 1 when rank 0 is the rank that never joined)
        ds = rep.filter(pl.col("ending") == "desync").filter(pl.col("rank") == pl.col("rank").min().over("jkey"))
        out.append(_by_flag(ds, "torch_v", lambda v: [(-MS, T.DESYNC[v])], C_WATCH))
        # their agents: first failing local rank per node, SIGABRT
        first = (
            rep.sort("jkey", "node_i", "t", "lr")
            .group_by("jkey", "node_i", maintain_order=True)
            .agg(
                pl.first("t"),
                pl.first("lr").alias("flr"),
                pl.first("pid").alias("fpid"),
                pl.first("rank").alias("frank"),
            )
        )
        rag = jn.join(first, on=["jkey", "node_i"]).with_columns(
            t=pl.col("t") + 1500 * MS, lr=pl.lit(-1, dtype=pl.Int64), ec=pl.lit(-6, dtype=pl.Int64)
        )
        out.append(_child_failed(rag))

    # 4. srun / slurmstepd at the end: one line per node whose agent reported a failure
    agent_nodes = [rag.select("jkey", "node_i")] if rep.height else []
    if ex.height:
        agent_nodes.append(ex.select("jkey", node_i=pl.col("culprit_node")))
    failing = (
        pl.concat(agent_nodes).unique() if agent_nodes else pl.DataFrame(schema={"jkey": pl.Int64, "node_i": pl.Int64})
    )
    failing = (
        failing.join(jn.select("jkey", "node_i", "host"), on=["jkey", "node_i"])
        .join(w.select("jkey", "culprit_node", "end", "ending"), on="jkey")
        .sort("jkey", "node_i")
        .with_columns(
            t=pl.col("end") - 500 * MS + pl.col("node_i"),
            lr=pl.lit(-1, dtype=pl.Int64),
            oom=(pl.col("ending") == "cpu_oom") & (pl.col("node_i") == pl.col("culprit_node")),
        )
        .with_row_index("eseq")
        .with_columns(pl.col("eseq").cast(pl.Int64))
    )
    base = failing.with_columns(node_i=pl.lit(-1, dtype=pl.Int64), task=pl.col("node_i"))
    out.append(expand(base.filter(~pl.col("oom")), [(0, T.SRUN_EXIT.replace("{node_i}", "{task}"))], KEYS, C_SRUN))
    out.append(expand(base.filter(pl.col("oom")), [(0, T.SRUN_OOM.replace("{node_i}", "{task}"))], KEYS, C_SRUN))
    tail = (
        w.with_columns(node_i=pl.lit(-1, dtype=pl.Int64), lr=pl.lit(-1, dtype=pl.Int64), t=pl.col("end") - 400 * MS)
        .with_row_index("eseq")
        .with_columns(pl.col("eseq").cast(pl.Int64))
    )
    out.append(expand(tail, [(0, T.SRUN_ABORT)], KEYS, C_SRUN))
    out.append(expand(tail.filter(~pl.col("exits")), [(100 * MS, T.STEPD["step_cancel"])], KEYS, C_SRUN))
    oom = tail.filter(pl.col("ending") == "cpu_oom").with_columns(t=pl.col("t_c") + S)
    out.append(expand(oom, [(0, T.STEPD["oom"])], KEYS, C_SRUN))
    return [o for o in out if o.height]


def _fill(expr: pl.Expr, names, **override) -> pl.Expr:
    """Literal-replace ``{name}`` in a per-row template column with that row's value."""
    for nm in names:
        val = override.get(nm, pl.col(nm))
        expr = expr.str.replace_all("{" + nm + "}", val.cast(pl.Utf8), literal=True)
    return expr


def _child_failed(ag: pl.DataFrame) -> pl.DataFrame:
    ag = (
        ag.with_columns(
            tb=pl.when(pl.col("ec") == -6)
            .then(pl.format("Signal 6 (SIGABRT) received by PID {}", pl.col("fpid")))
            .when(pl.col("ec") == -9)
            .then(pl.format("Signal 9 (SIGKILL) received by PID {}", pl.col("fpid")))
            .otherwise(pl.lit("To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")),
        )
        .with_row_index("eseq")
        .with_columns(pl.col("eseq").cast(pl.Int64))
    )
    lines = lambda v: [(0, T.AGENT_FAILED[v])] + [(1 + i, x) for i, x in enumerate(T.CHILD_FAILED)]
    return _by_flag(ag, "glog_agent", lines, C_AGENT)


def prefix_expr() -> pl.Expr:
    """srun --label puts ``<task>: `` before task output; torchrun --tee puts ``[default<r>]:`` before a rank's."""
    return (
        pl.when((pl.col("job_prefix") == "srun") & (pl.col("node_i") >= 0))
        .then(pl.format("{}: ", pl.col("node_i")))
        .when((pl.col("job_prefix") == "torchrun") & (pl.col("lr") >= 0))
        .then(pl.format("[default{}]:", pl.col("lr")))
        .otherwise(pl.lit(""))
    )
