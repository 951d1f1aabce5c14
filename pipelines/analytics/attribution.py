"""Attribute each job that did not complete to a root cause and, where possible, a culprit:
the causally earliest specific fault wins over its cascade, read as docs/analytics.md says
("Root cause and culprit"); the one engine of the nightly analytics and faultline diagnose."""

from __future__ import annotations

import polars as pl

from ..classify.engine import classify_messages
from ..classify.ruleset import RuleSet, load_ruleset
from ..ingest.prefix import split_prefix
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
# a category the reading of the cascade gave (not the deciding line's rule): its action
_RELABEL_ACTION = {
    "host": "restart_job",
    "storage": "check_storage",
    "gpu_hardware": "reset_gpu",
    "collective_timeout": "restart_job",
}

# How an event takes part in the cascade, read from its text (docs/analytics.md, "Reading the
# cascade"). A transport error that only says the other side went away reports a peer's death:
PEER_GONE_RE = (
    r"(?i)connection closed by (?:remote )?peer|connection reset by peer|broken pipe|"
    r"remote process exited or there was a network error|ncclRemoteError|failed to recv, got 0 bytes|"
    r"Socket recv failed while polling|Failed to execute operation \w+ from rank \d+, retcode 6\b|"
    r"TCPStore server has shut down"
)
# ... unless the same event names the transport's own failure
TRANSPORT_FAULT_RE = (
    r"Got completion (?:from peer \S+ )?with (?:error |status=)|IBV_WC_\w+_ERR|ibv_\w+ failed|"
    r"async error event|port error|got completion with error|Couldn't open AV|"
    r"NET/OFI Request \S+ completed with error"
)
PEER_HOST_RE = r"(?:remote peer |remote=\[)([A-Za-z0-9][\w.-]*?)(?:<\d+>|\]:\d+)"
DESYNC_RE = (
    r"didn't join collective|Detected mismatch between collectives|"
    r"[Cc]ollective (?:fingerprint|sequence number) mismatch"
)
WORKER_RE = (
    r"DataLoader worker \(pid\(?s?\)? ?[\d, ]+\)? (?:is killed by signal|exited unexpectedly)|"
    r"process \d+ terminated with (?:signal|exit code)|ChildFailedError|exitcode\s*:\s*-\d+|"
    r"signal \d+ \(SIG\w+\) received by PID|Worker \S* ?(?:died|was killed|has failed)|"
    r"noticed that process rank \d+ with PID \d+ on node \S+ exited on signal|"
    r"Worker unexpectedly exits with a connection error code|Fatal Python error: Aborted\b|"
    r"\] exits with return code = -\d+"
)
EXHAUSTION_RE = (
    r"Out of memory: Kill|Memory cgroup out of memory|oom[-_]kill|Out Of Memory|"
    r"[Bb]us error|out of shared memory|insufficient shared memory|/dev/shm|shm\.h:\d+|Cannot allocate memory"
)
SAVE_RE = (
    r"PytorchStreamWriter|serialization\.py\", line \d+, in _?save\b|"
    r"\bsave_(?:checkpoint|pretrained|model|state_dict|optimizer)\b|[Ss]aving (?:the )?(?:model )?checkpoint"
)
WRITE_FAILED_RE = (
    r"No space left on device|Errno 28|ENOSPC|Input/output error|\[Errno 5\]|Stale file handle|ESTALE|"
    r"Disk quota exceeded|Read-only file system|file write failed|failed writing file"
)
# a worker killed by SIGKILL (or SIGBUS): with no scheduler notice and no other error, the host's
# OOM killer (or its shared memory, /dev/shm, run out); Ray's worker that vanished without a
# word names the first of these causes
SIGKILL_RE = (
    r"exitcode\s*:\s*-9\b|terminated with signal SIGKILL|signal 9 \(SIGKILL\) received|return code = -9\b|"
    r"exitcode\s*:\s*-7\b|terminated with signal SIGBUS|signal 7 \(SIGBUS\) received|"
    r"Worker unexpectedly exits with a connection error code \d+\. End of file\."
)
# a worker aborted (SIGABRT) with no error of its own in the output: the C++ runtime's abort,
# which is how the NCCL watchdog ends a rank whose collective timed out
PY_ABORT_RE = r"Fatal Python error: Aborted\b"
SIGABRT_RE = (
    r"exitcode\s*:\s*-6\b|terminated with signal SIGABRT|signal 6 \(SIGABRT\) received|return code = -6\b|"
    + PY_ABORT_RE
)
# CUDA's "unknown error" raised while the job ran (no rule can place it): what a GPU that
# faulted mid-run returns to every call, so the GPU is the suspect where nothing else is
CUDA_UNKNOWN_RE = r"CUDA error: unknown error|\bcudaErrorUnknown\b"
# the launcher tearing down the other workers after one failed: its reaction, not a notice of
# its own; the worker's failure it reacts to (``failed (exitcode: -6) local_rank: 3``) says more
TEARDOWN_RE = (
    r"Sending process \d+ closing signal SIG\w+|Unable to shutdown process \d+ via \d+, forcefully exit|"
    r"Closing process \d+ via signal SIG\w+|sigkill_handler\] Killing subprocess \d+"
)
# srun's report that a task's program died of itself (a non-zero exit, a segfault, an abort): the
# program's death, not the scheduler's act; the tasks srun kills after it, and the step's
# cancellation with no reason given, are its teardown
SRUN_TASK_DIED_RE = r"srun: error: \S+: tasks? [\d,-]+: (?:Exited with exit code [1-9]\d*|Segmentation fault|Aborted)"
SRUN_TASK_KILLED_RE = (
    r"srun: error: \S+: tasks? [\d,-]+: (?:Killed|Terminated)\s*$|"
    r"srun: (?:launch/slurm: _step_signal: Terminating|Force Terminated) StepId=|srun: Job step aborted"
)
RERAISE_RE = r"watchdog thread terminated with exception: (CUDA error: [^\n]*)"
RANK_IN_TEXT_RE = r"\[(?:PG [^\]]*?)?Rank (\d+)\]"
# NCCL's line header "HOST:PID:TID [CUDADEV]" (behind any launcher label): the process a line is of
NCCL_PROC_RE = r"([\w.-]+):(\d+):\d+ \[(\d+)\] (?:\S+ )?\**NCCL (?:INFO|WARN)"
#: the local rank torchrun's failure line names ("failed (exitcode: -9) local_rank: 7"); a launcher
#: label's local rank ("[default7]:") comes parsed with the event. On a one-node job it is the rank
LOCAL_RANK_RE = r"\blocal_rank: (\d+)"
SEQ_RE = r"SeqNum=(\d+)"
# a waiting rank naming the rank it waits on: gloo's monitored barrier, Horovod's stall inspector
SUSPECT_RANK_RE = r"while waiting for send/recv from rank (\d+)\b|\[missing ranks: (\d+)\]\s*$"
OP_RE = r"OpType=(\w+)"
PG_RE = r"\bPG ID \d+ PG GUID ([^\s\]]+)"
#: point-to-point operations: ranks of a pipeline legitimately wait in different ones
P2P_OPS = ["SEND", "RECV", "_COALESCED", "COALESCED", "RECVANYSOURCE"]

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
    "culprit_rank",
    "symptoms",
    "evidence_events",
]
_EV_COLS = [
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
    "local_rank",
    "event_id",
    "source",
    "line_no",
    "repeats",
]


def attribute_failures(
    jobs: pl.DataFrame,
    events: pl.DataFrame,
    flight: pl.DataFrame | None,
    domains: dict[str, str],
    cfg: AnalyticsConfig = DEFAULT,
    rs: RuleSet | None = None,
    markers: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per failed job (see ``JOB_FAILURE_COLUMNS``; docs/tables.md, ``job_failures``);
    ``markers`` (job_markers) holds the rank lines that tie a process to its rank."""
    failed = jobs.filter(~pl.col("state").is_in(NOT_FAILED) & pl.col("end").is_not_null())
    if failed.is_empty():
        return pl.DataFrame(schema=_schema())
    failed = failed.with_columns(
        start=pl.coalesce("start", "end"),
        n_gpus=pl.coalesce(pl.col("gpus"), pl.col("n_nodes") * cfg.gpus_per_node).cast(pl.Int64),
    )
    rs = rs or load_ruleset()
    ev = _roles(_reraised(_evidence(failed, events, cfg), domains, rs))
    decided = _decide(failed, ev, flight, domains, cfg, rs, _process_ranks(ev, markers))
    hours = (pl.col("end") - pl.col("start")).dt.total_seconds() / 3600.0
    out = failed.join(decided, on=JOB_KEY, how="left").with_columns(
        started=pl.col("start"),
        ended=pl.col("end"),
        nodes=pl.col("n_nodes").cast(pl.Int64),
        gpus=pl.col("n_gpus"),
        gpu_hours_lost=(hours * pl.col("n_gpus")).round(3),
        node_list=pl.col("nodelist"),
        symptoms=pl.col("symptoms").fill_null(0),
        evidence_events=pl.col("evidence_events").fill_null(pl.lit([], pl.List(pl.String))),
    )
    return out.select(JOB_FAILURE_COLUMNS).sort("ended", "provider", "cluster", "job_id")


def _evidence(failed: pl.DataFrame, events: pl.DataFrame, cfg: AnalyticsConfig) -> pl.DataFrame:
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
    side = ev.filter(pl.col("job_id").is_null() & pl.col("node").is_not_null()).select("provider", "cluster", *_EV_COLS)
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
            # a process's own fault (Xid 13, 31, 43) before the job started was another job's
            & ((pl.col("domain") != "user") | (pl.col("ts") >= pl.col("start")))
        )
        .with_columns(origin=pl.lit("node"), ts_hi=pl.col("ts"))
        .drop("start", "end", "_back")
    )
    # the job's own output, whatever its stamps say: a stamp outside the job's run (a year-less
    # stamp read in the wrong year, a skewed clock) is no time; within one file a line is never
    # earlier than the one above it, and lines before the first stamp take that stamp; a line
    # without its own stamp happened by the next stamped line (or the job's end): ``ts_hi``
    run = failed.select(
        *JOB_KEY,
        _lo=pl.col("start") - pl.duration(seconds=cfg.attribution_before_s),
        _hi=pl.col("end") + pl.duration(seconds=cfg.attribution_after_s),
    )
    in_run = pl.col("ts").is_between(pl.col("_lo"), pl.col("_hi"))
    stamped = in_run & ~pl.col("ts_source").is_in(["inherited", "none"])
    own = (
        ev.filter(pl.col("job_id").is_not_null())
        .select("provider", "cluster", "job_id", *_EV_COLS, "ts_source")
        .join(run, on=JOB_KEY, how="inner")
        .with_columns(ts=pl.when(in_run).then(pl.col("ts")), _own_ts=pl.when(stamped).then(pl.col("ts")))
        .sort(*JOB_KEY, "source", "line_no")
        .with_columns(
            ts=pl.col("ts")
            .fill_null(strategy="forward")
            .fill_null(strategy="backward")
            .cum_max()
            .over([*JOB_KEY, "source"]),
            ts_hi=pl.col("_own_ts").fill_null(strategy="backward").over([*JOB_KEY, "source"]).fill_null(pl.col("_hi")),
            origin=pl.lit("job"),
        )
        .drop("_lo", "_hi", "_own_ts", "ts_source")
    )
    out = pl.concat([near.select(own.columns), own], how="vertical_relaxed")
    # a file without a single stamp counts at the job's end
    return (
        out.join(failed.select(*JOB_KEY, pl.col("end").alias("_end")), on=JOB_KEY, how="left")
        .with_columns(ts=pl.coalesce("ts", "_end"))
        .with_columns(ts_hi=pl.max_horizontal("ts", "ts_hi"))
        .drop("_end")
    )


def deciding_lines(ev: pl.DataFrame, rs: RuleSet) -> pl.DataFrame:
    """``ev`` with ``line_offset`` and ``line``: the physical line of each (joined) event its
    category came from (a traceback's exception line, not its first line)."""
    lines = (
        ev.unique("event_id")
        .select("event_id", "category", line=pl.col("raw").fill_null("").str.split("\n"))
        .with_columns(line_offset=pl.int_ranges(pl.col("line").list.len()))
        .explode("line", "line_offset")
    )
    multi = lines.filter(pl.col("line_offset") > 0).select("event_id").unique()
    many = lines.join(multi, on="event_id", how="semi")
    if many.height:
        msg = many.select(m=pl.coalesce(split_prefix(pl.col("line")).struct.field("msg"), pl.col("line")))["m"]
        many = many.with_columns(_cat=classify_messages(msg, rs)["category"])
        hit = many.filter(pl.col("_cat") == pl.col("category")).group_by("event_id").agg(pl.col("line_offset").min())
    else:
        hit = pl.DataFrame(schema={"event_id": pl.String, "line_offset": pl.Int64})
    pick = (
        lines.select("event_id")
        .unique()
        .join(hit, on="event_id", how="left")
        .with_columns(pl.col("line_offset").fill_null(0).cast(pl.Int64))
    )
    text = lines.with_columns(pl.col("line_offset").cast(pl.Int64)).join(
        pick, on=["event_id", "line_offset"], how="semi"
    )
    return ev.join(text.select("event_id", "line_offset", "line"), on="event_id", how="left")


def _reraised(ev: pl.DataFrame, domains: dict[str, str], rs: RuleSet) -> pl.DataFrame:
    """A CUDA error that the NCCL watchdog re-raises in its termination message is that CUDA
    error, not a timeout: such a line takes the category the rules give the error itself."""
    hit = (pl.col("category") == "collective_timeout") & pl.col("raw").str.contains(RERAISE_RE)
    if not ev.height or not ev.select(hit.any()).item():
        return ev.with_columns(_reraise=pl.lit(False))
    ev = ev.with_row_index("_r")
    sub = ev.filter(hit).select("_r", _err=pl.col("raw").str.extract(RERAISE_RE, 1))
    cls = classify_messages(sub["_err"], rs)
    sub = sub.with_columns(_cat=cls["category"], _sev=cls["severity"], _act=cls["action"]).filter(
        ~pl.col("_cat").is_in(["benign", "unknown", "collective_timeout"])
    )
    ev = ev.join(sub.drop("_err"), on="_r", how="left").drop("_r")
    got = pl.col("_cat").is_not_null()
    return ev.with_columns(
        category=pl.coalesce("_cat", "category"),
        severity=pl.coalesce("_sev", "severity"),
        action=pl.coalesce("_act", "action"),
        domain=pl.when(got).then(pl.col("_cat").replace_strict(domains, default="unknown")).otherwise("domain"),
        _reraise=got,
    ).drop("_cat", "_sev", "_act")


def _roles(ev: pl.DataFrame) -> pl.DataFrame:
    """Tiers (1 hardware/driver error, 2 user-code error, 3 hardware/driver warning: throttling,
    corrected errors, which explain a job only when nothing stronger does) and the cascade roles
    read from the text; then each job's events in causal order."""
    raw, cat = pl.col("raw"), pl.col("category")
    peer_text = raw.str.contains(PEER_GONE_RE) & ~raw.str.contains(TRANSPORT_FAULT_RE)
    # the model's guess for a rule-unknown line does not outweigh what its text says of a peer
    guessed = pl.col("rule_id").fill_null("").str.starts_with("model:") & peer_text & ~cat.is_in(["network", "unknown"])
    died = (cat == "scheduler") & raw.str.contains(SRUN_TASK_DIED_RE)
    # Python's report of its own abort names no cause: the SIGABRT it reports is read below
    died = died | raw.str.contains(PY_ABORT_RE)
    ev = ev.with_columns(
        category=pl.when(guessed | died).then(pl.lit("unknown")).otherwise(cat),
        domain=pl.when(guessed | died).then(pl.lit("unknown")).otherwise(pl.col("domain")),
    )
    peer = cat.is_in(["network", "unknown"]) & peer_text
    # an error line no rule names, placed by the subsystem it mentions (models/fallback.yaml):
    # it decides only where nothing else does, as an unknown error would
    placed = pl.col("rule_id").fill_null("").str.starts_with("fallback:")
    weak = pl.col("domain").is_in(["hardware", "software"]) & (pl.col("severity") == "warning")
    tier = (
        pl.when(peer | placed)
        .then(pl.lit(None, pl.Int8))
        .when(weak)
        .then(pl.lit(3, pl.Int8))
        .otherwise(pl.col("domain").replace_strict(_TIER, default=None, return_dtype=pl.Int8))
    )
    user = cat == "user_app"
    # a worker's death as its launcher or runtime reports it (rules call those user_app,
    # scheduler or unknown): a symptom of the exhaustion that killed it, when there is one
    worker = cat.is_in(["user_app", "scheduler", "unknown"]) & raw.str.contains(WORKER_RE)
    ev = ev.with_columns(
        tier=tier,
        sev=pl.col("severity").replace_strict(_SEV, default=0, return_dtype=pl.Int8),
        rank=pl.coalesce(pl.col("rank").cast(pl.Int64), raw.str.extract(RANK_IN_TEXT_RE, 1).cast(pl.Int64)),
        _peer=peer,
        _placed=placed,
        _desync=user & raw.str.contains(DESYNC_RE),
        _worker=worker,
        _teardown=raw.str.contains(TEARDOWN_RE)
        | (
            raw.str.contains(SRUN_TASK_KILLED_RE + r"|\*\*\* STEP \S+ ON \S+ CANCELLED AT \S+ \*\*\*")
            & (
                pl.col("line_no")
                > pl.col("line_no").filter(raw.str.contains(SRUN_TASK_DIED_RE)).min().over([*JOB_KEY, "source"])
            ).fill_null(False)
        ),
        _exhausted=worker & raw.str.contains(EXHAUSTION_RE),
        _sigkill=worker & raw.str.contains(SIGKILL_RE),
        _sigabrt=worker & raw.str.contains(SIGABRT_RE),
        _cuda_unknown=cat.is_in(["unknown", "collective_timeout"]) & raw.str.contains(CUDA_UNKNOWN_RE),
        _exhaustion=cat.is_in(["host", "user_app", "unknown", "scheduler"])
        & raw.str.contains(EXHAUSTION_RE)
        & ~raw.str.contains(WORKER_RE),
        _save_failed=user & raw.str.contains(SAVE_RE) & raw.str.contains(WRITE_FAILED_RE),
    )
    # causal order: time; node-side first at equal times (the more severe first), then file
    # and line (a total order: the same data read in any order decides the same line)
    return ev.with_columns(_node_sev=pl.when(pl.col("origin") == "node").then(pl.col("sev")).otherwise(0)).sort(
        [*JOB_KEY, "ts", "origin", "_node_sev", "source", "line_no", "event_id"],
        descending=[False, False, False, False, True, True, False, False, False],
        nulls_last=True,
    )


_PICK = ("event_id", "ts", "ts_hi", "source", "origin", "tier", "category", "_worker", "_exhausted", "_save_failed")


def _first(name: str, cond: pl.Expr) -> list[pl.Expr]:
    return [pl.col(c).filter(cond).first().alias(f"{name}_{c}") for c in _PICK]


def _process_ranks(ev: pl.DataFrame, markers: pl.DataFrame | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What the job's output says of each process's rank: per (job, host, pid), the rank of its
    largest communicator's init line, else the one rank its other lines claim (a ring it set
    up, its proxy, a rank label on its NCCL line); per (job, host), ``rank - cudaDev`` where
    every init line of the host's largest communicator, of two processes or more, agrees."""
    proc = pl.col("raw").str.extract_groups(NCCL_PROC_RE)
    own = (
        ev.filter((pl.col("origin") == "job") & pl.col("rank").is_not_null())
        .with_columns(_p=proc)
        .select(
            *JOB_KEY,
            host=pl.col("_p").struct.field("1"),
            pid=pl.col("_p").struct.field("2").cast(pl.Int64, strict=False),
            rank=pl.col("rank").cast(pl.Int64),
            nranks=pl.lit(None, pl.Int64),
            cuda_dev=pl.lit(None, pl.Int64),
        )
        .drop_nulls(["host", "pid"])
    )
    claims = [own]
    if markers is not None and markers.height and "host" in markers.columns:
        claims.append(
            markers.filter(pl.col("marker") == "rank").select(
                *JOB_KEY,
                "host",
                *[pl.col(c).cast(pl.Int64) for c in ("pid", "rank", "nranks", "cuda_dev")],
            )
        )
    c = pl.concat(claims, how="vertical_relaxed").drop_nulls(["host", "pid", "rank"])
    init = c.filter(pl.col("nranks").is_not_null())
    top = init.filter(pl.col("nranks") == pl.col("nranks").max().over(*JOB_KEY, "host", "pid"))
    one = lambda col: pl.when(pl.col(col).n_unique() == 1).then(pl.col(col).first())  # noqa: E731
    by_init = top.group_by(*JOB_KEY, "host", "pid").agg(_init=one("rank"))
    by_other = c.filter(pl.col("nranks").is_null()).group_by(*JOB_KEY, "host", "pid").agg(_other=one("rank"))
    per_proc = (
        by_init.join(by_other, on=[*JOB_KEY, "host", "pid"], how="full", coalesce=True)
        .select(*JOB_KEY, "host", "pid", _proc_rank=pl.coalesce("_init", "_other"))
        .drop_nulls("_proc_rank")
    )
    host_top = init.drop_nulls("cuda_dev").filter(pl.col("nranks") == pl.col("nranks").max().over(*JOB_KEY, "host"))
    per_host = (
        host_top.with_columns(_off=pl.col("rank") - pl.col("cuda_dev"))
        .group_by(*JOB_KEY, "host")
        .agg(_off=one("_off"), _pids=pl.col("pid").n_unique())
        .filter(pl.col("_pids") >= 2)
        .drop_nulls("_off")
        .select(*JOB_KEY, "host", "_off")
    )
    return per_proc, per_host


def _decide(
    failed: pl.DataFrame,
    ev: pl.DataFrame,
    flight: pl.DataFrame | None,
    domains: dict[str, str],
    cfg: AnalyticsConfig,
    rs: RuleSet,
    ranks: tuple[pl.DataFrame, pl.DataFrame],
) -> pl.DataFrame:
    """Each job's deciding event (the first of its kind in causal order, then the readings of
    the cascade), and from it the root cause, culprit, confidence, action and evidence."""
    tier, cat = pl.col("tier"), pl.col("category")
    firsts = ev.group_by(JOB_KEY, maintain_order=True).agg(
        *_first("a", tier.is_in([1, 2])),  # the first specific error
        *_first("h", tier == 1),  # the first hardware or driver error
        *_first("n", (tier == 1) & (pl.col("origin") == "node")),  # ... on the job's nodes
        pl.col("event_id").filter(pl.col("_desync")).first().alias("d_event_id"),
        pl.col("event_id").filter(pl.col("_exhaustion")).first().alias("e_event_id"),
        pl.col("event_id").filter(pl.col("_exhausted")).first().alias("x_event_id"),
        pl.col("event_id").filter(pl.col("_worker")).first().alias("k_event_id"),
        pl.col("event_id").filter(pl.col("_sigkill")).first().alias("s_event_id"),
        pl.col("event_id").filter(pl.col("_sigabrt")).first().alias("b_event_id"),
        pl.col("event_id").filter(pl.col("_cuda_unknown")).first().alias("g_event_id"),
        pl.col("event_id")
        .filter((cat == "scheduler") & ~pl.col("_worker") & ~pl.col("_teardown") & ~pl.col("_placed"))
        .first()
        .alias("o_event_id"),
        pl.col("event_id").filter(tier == 3).first().alias("w_event_id"),
        pl.col("event_id").filter(cat == "collective_timeout").first().alias("t_event_id"),
        pl.col("event_id").filter(pl.col("_peer")).first().alias("p_event_id"),
        pl.col("raw").filter(pl.col("_peer")).str.extract(PEER_HOST_RE, 1).drop_nulls().first().alias("_peer_host"),
        pl.coalesce(
            pl.col("event_id").filter((cat == "scheduler") & ~pl.col("_teardown") & ~pl.col("_placed")).first(),
            # a teardown decides only where no error of the job's own, however unplaced, does
            pl.col("event_id")
            .filter((cat == "scheduler") & ~pl.col("_placed") & ~((cat == "unknown") | pl.col("_placed")).any())
            .first(),
        ).alias("q_event_id"),
        pl.col("event_id").filter((cat == "unknown") | pl.col("_placed")).first().alias("u_event_id"),
        pl.col("repeats").fill_null(1).sum().alias("_n_evidence"),
    )
    mask = pl.duration(seconds=cfg.hardware_masks_user_s)
    # a hardware fault beats the user-code error in another file that follows it (or precedes
    # it by less than the mask: the kernel's line may come late), and a fault on the job's nodes
    # beats the hardware error the job printed about it the same way; within a file, line order
    hw_user = (
        (pl.col("a_tier") == 2)
        & pl.col("h_event_id").is_not_null()
        & (pl.col("h_source") != pl.col("a_source"))
        & (pl.col("h_ts") <= pl.col("a_ts_hi") + mask)
    )
    hw_node = (
        (pl.col("a_tier") == 1)
        & (pl.col("a_origin") == "job")
        & pl.col("n_event_id").is_not_null()
        & (pl.col("n_ts") <= pl.col("a_ts_hi") + mask)
    )
    pick = lambda c: pl.when(hw_user).then(f"h_{c}").when(hw_node).then(f"n_{c}").otherwise(f"a_{c}")  # noqa: E731
    firsts = firsts.with_columns(
        c_event_id=pick("event_id"),
        **{f"c_{c}": pick(c) for c in ("category", "_worker", "_exhausted", "_save_failed")},
    )
    has = lambda k: pl.col(f"{k}_event_id").is_not_null()  # noqa: E731
    c_user, no_c = pl.col("c_category") == "user_app", ~has("c")
    quiet = ~has("t") & ~has("w")  # no watchdog timeout and no hardware warning in the evidence
    # the readings of the cascade (docs/analytics.md), in this order
    how = (
        pl.when(has("d") & (pl.col("c_category") == "network"))
        .then(pl.lit("desync"))
        .when((c_user & pl.col("c__exhausted")) | (no_c & has("x")))
        .then(pl.lit("exhaustion_named"))
        .when(has("e") & ((c_user & pl.col("c__worker")) | (no_c & (has("k") | quiet))))
        .then(pl.lit("exhaustion"))
        .when(c_user & pl.col("c__save_failed"))
        .then(pl.lit("checkpoint_write"))
        .when(no_c & has("s") & ~has("o") & quiet)
        .then(pl.lit("sigkill"))
        .when(no_c & has("g") & ~has("w"))
        .then(pl.lit("cuda_unknown"))
        .when(no_c & has("b") & ~has("o") & quiet)
        .then(pl.lit("sigabrt"))
    )
    dec = (
        pl.when(pl.col("_how") == "desync")
        .then("d_event_id")
        .when(pl.col("_how") == "exhaustion")
        .then("e_event_id")
        .when(pl.col("_how") == "exhaustion_named")
        .then(pl.coalesce("c_event_id", "x_event_id"))
        .when(pl.col("_how") == "sigkill")
        .then("s_event_id")
        .when(pl.col("_how") == "cuda_unknown")
        .then("g_event_id")
        .when(pl.col("_how") == "sigabrt")
        .then("b_event_id")
        .otherwise("c_event_id")
    )
    firsts = firsts.with_columns(_how=how).with_columns(
        _dec=pl.coalesce(dec, "w_event_id", "t_event_id", "p_event_id", "q_event_id", "u_event_id"),
        chosen=pl.when(pl.col("_how").is_in(["exhaustion", "exhaustion_named"]))
        .then(pl.lit("exhaustion"))
        .when(pl.col("_how").is_in(["sigkill", "cuda_unknown", "sigabrt"]))
        .then(pl.col("_how"))
        .when(has("c"))
        .then(pl.when(c_user | (pl.col("_how") == "desync")).then(pl.lit("user")).otherwise(pl.lit("hw")))
        .when(has("w"))
        .then(pl.lit("weak"))
        .when(has("t"))
        .then(pl.lit("ct"))
        .when(has("p"))
        .then(pl.lit("peer"))
        .when(has("q"))
        .then(pl.lit("sched"))
        .when(has("u"))
        .then(pl.lit("unknown")),
        # the line a reading overrode: the network error, the worker's death
        _overridden=pl.when(pl.col("_how").is_in(["desync", "exhaustion"])).then(
            pl.coalesce("c_event_id", "k_event_id")
        ),
    )
    best = firsts.select(*JOB_KEY, "chosen", "_how", "_dec", "_overridden", "_n_evidence", "_peer_host").join(
        ev.select(
            *JOB_KEY, pl.col("event_id").alias("_dec"), *[c for c in ev.columns if c not in (*JOB_KEY, "event_id")]
        ),
        on=[*JOB_KEY, "_dec"],
        how="left",
    )
    best = deciding_lines(best.filter(pl.col("_dec").is_not_null()).rename({"_dec": "event_id"}), rs).rename(
        {"event_id": "_dec"}
    )
    # a culprit rank the deciding line does not name: the first line of the same error that does
    same_rank = (
        ev.filter(pl.col("rank").is_not_null() & (pl.col("origin") == "job"))
        .group_by(*JOB_KEY, "category", maintain_order=True)
        .agg(pl.col("rank").first().alias("_same_rank"))
    )
    ct = ev.filter(pl.col("category") == "collective_timeout")
    suspect = pl.col("raw").str.extract_groups(SUSPECT_RANK_RE)
    counts = ct.group_by(JOB_KEY).agg(
        pl.col("repeats").fill_null(1).sum().alias("_n_timeouts"),
        pl.col("rank").drop_nulls().unique().alias("_timeout_ranks"),
        pl.coalesce(suspect.struct.field("1"), suspect.struct.field("2"))
        .cast(pl.Int64, strict=False)
        .drop_nulls()
        .unique()
        .alias("_named_ranks"),
    )
    # the process whose line decided (NCCL's header), and its rank as the job's output says it
    per_proc, per_host = ranks
    proc = pl.coalesce("line", "raw").str.extract_groups(NCCL_PROC_RE)
    best = (
        best.with_columns(
            host=proc.struct.field("1"),
            pid=proc.struct.field("2").cast(pl.Int64, strict=False),
            _dev=proc.struct.field("3").cast(pl.Int64, strict=False),
        )
        .join(per_proc, on=[*JOB_KEY, "host", "pid"], how="left")
        .join(per_host, on=[*JOB_KEY, "host"], how="left")
        .with_columns(_proc_rank=pl.coalesce("_proc_rank", pl.col("_off") + pl.col("_dev")))
        .drop("host", "pid", "_dev", "_off")
    )
    # hosts the job's evidence names: with the allocation, whether it ran on one node
    hosts = ev.group_by(JOB_KEY).agg(_n_hosts=pl.col("node").drop_nulls().n_unique())
    # else the worker whose failure torchrun reported first (the deciding line may name none)
    first_failed = (
        ev.filter(pl.col("origin") == "job")
        .with_columns(_f=pl.col("raw").str.extract(LOCAL_RANK_RE, 1).cast(pl.Int64, strict=False))
        .filter(pl.col("_f").is_not_null())
        .group_by(JOB_KEY, maintain_order=True)
        .agg(_first_failed=pl.col("_f").first())
    )
    best = (
        best.join(first_failed, on=JOB_KEY, how="left")
        .with_columns(
            _local=pl.coalesce(
                pl.col("local_rank").cast(pl.Int64),
                pl.coalesce("line", "raw").str.extract(LOCAL_RANK_RE, 1).cast(pl.Int64, strict=False),
                pl.col("_first_failed"),
            )
        )
        .drop("_first_failed")
    )
    d = (
        failed.select(*JOB_KEY, "state", "nodes", "n_gpus", "end")
        .join(best, on=JOB_KEY, how="left")
        .join(hosts, on=JOB_KEY, how="left")
        .join(counts, on=JOB_KEY, how="left")
        .join(same_rank, on=[*JOB_KEY, "category"], how="left")
        .join(_odd_collective(ct), on=JOB_KEY, how="left")
        .join(_mismatched_collectives(ct), on=JOB_KEY, how="left")
        .with_columns(_n_timeouts=pl.col("_n_timeouts").fill_null(0), _mismatch=pl.col("_mismatch").fill_null(False))
    )
    d = _localize_hangs(d, flight, cfg)
    st = pl.col("state").str.split(" ").list.first()
    st_cat = st.replace_strict({k: v[0] for k, v in _STATE_CAUSE.items()}, default="unknown", return_dtype=pl.String)
    st_conf = st.replace_strict({k: v[1] for k, v in _STATE_CAUSE.items()}, default=0.2, return_dtype=pl.Float64)
    st_act = st.replace_strict({k: v[2] for k, v in _STATE_CAUSE.items()}, default="none", return_dtype=pl.String)
    scheduler_ended = st.is_in(["TIMEOUT", "CANCELLED", "PREEMPTED", "DEADLINE"])
    chosen = pl.col("chosen")
    by_state = (
        chosen.is_null()
        | (chosen.is_in(["unknown", "peer"]) & st.is_in(list(_STATE_CAUSE)))
        | (chosen.is_in(["user", "sigkill", "sigabrt"]) & scheduler_ended)
    )
    # the dumps show ranks that never joined the collective the others wait in: they were
    # behind in the program, the taxonomy's collective desync, whatever the network said
    desync = (
        ~by_state
        & (pl.col("_not_joined") | pl.col("_mismatch"))
        & (chosen.is_in(["ct", "peer"]) | (pl.col("category") == "network"))
    )
    how = pl.col("_how")
    root = (
        pl.when(by_state)
        .then(st_cat)
        .when(desync)
        .then(pl.lit("user_app"))
        .when(how == "exhaustion_named")
        .then(pl.lit("host"))
        .when(how == "exhaustion")
        .then(pl.when(pl.col("category").is_in(["unknown", "scheduler"])).then(pl.lit("host")).otherwise("category"))
        .when(how == "checkpoint_write")
        .then(pl.lit("storage"))
        .when(how == "sigkill")
        .then(pl.lit("host"))
        .when(how == "cuda_unknown")
        .then(pl.lit("gpu_hardware"))
        .when(how == "sigabrt")
        .then(pl.lit("collective_timeout"))
        .when(chosen == "peer")
        .then(pl.lit("unknown"))
        .otherwise(pl.col("category"))
    )
    conf = (
        pl.when(by_state)
        .then(st_conf)
        .when(how.is_in(["sigkill", "cuda_unknown"]))
        .then(0.5)
        .when(how == "sigabrt")
        .then(0.4)
        .when(how.is_not_null())
        .then(0.8)
        .when(chosen == "hw")
        .then(pl.when(pl.col("_n_timeouts") > 0).then(0.95).otherwise(0.85))
        .when(chosen == "user")
        .then(0.85)
        .when(chosen == "weak")
        .then(0.6)
        .when(chosen == "ct")
        .then(pl.when(pl.col("_hang_node").is_not_null() | pl.col("_hang_rank").is_not_null()).then(0.6).otherwise(0.4))
        .when(chosen == "sched")
        .then(0.7)
        .otherwise(0.3)
    )
    specific = chosen.is_in(["hw", "user", "weak", "exhaustion", "sigkill", "cuda_unknown", "sigabrt"])
    # a scheduler's notice, or an error no rule can place, still says where it was printed
    located = (chosen == "sched") | ((chosen == "unknown") & ~by_state)
    one_node = (pl.col("nodes").list.len().fill_null(0) <= 1) & (pl.col("_n_hosts").fill_null(0) <= 1)
    one_node_rank = pl.when(one_node).then(pl.col("_local"))
    culprit_rank = (
        pl.when(desync & pl.col("_hang_rank").is_not_null())
        .then(pl.col("_hang_rank"))
        .when(specific | located)
        .then(pl.coalesce(pl.col("rank"), pl.col("_proc_rank"), pl.col("_same_rank"), one_node_rank))
        .when(chosen == "ct")
        .then(pl.col("_hang_rank"))
    )
    rank_node = pl.col("nodes").list.get(pl.col("_crank") // cfg.gpus_per_node, null_on_oob=True)
    culprit = (
        pl.when(desync & pl.col("_hang_node").is_not_null())
        .then(pl.col("_hang_node"))
        .when(specific)
        .then(pl.coalesce("node", rank_node))
        .when(chosen == "ct")
        .then(pl.coalesce("_hang_node", rank_node))
        .when(chosen == "peer")
        .then(pl.col("_peer_host"))
        .when(located)
        .then(pl.col("node"))
    )
    suffix = (
        pl.when(desync & pl.col("_not_joined"))
        .then(pl.lit("+flight_recorder_not_joined"))
        .when(desync)
        .then(pl.lit("+mismatched_collectives"))
        .when(chosen == "ct")
        .then(pl.when(pl.col("_hang_how").is_not_null()).then(pl.format("+{}", pl.col("_hang_how"))))
        .when(chosen == "peer")
        .then(pl.lit("+peer_gone"))
        .when(how.is_not_null())
        .then(pl.format("+{}", how.str.strip_suffix("_named")))
        .when(pl.col("_reraise"))
        .then(pl.lit("+watchdog_reraise"))
    )
    decided_by = (
        pl.when(by_state)
        .then(pl.format("state:{}", st))
        .when(desync & (chosen == "ct"))
        .then(pl.format("{}{}", pl.col("rule_id"), suffix))
        .when(chosen == "ct")
        .then(pl.concat_str([pl.col("rule_id"), suffix], ignore_nulls=True))
        .otherwise(pl.concat_str([pl.col("origin"), pl.lit(":"), pl.col("rule_id"), suffix], ignore_nulls=True))
    )
    evidence = (
        pl.when(by_state & pl.col("raw").is_null())
        .then(pl.format("sacct state {}", pl.col("state")))
        .otherwise(
            pl.concat_str(
                [
                    pl.format(
                        "[{}] {} ",
                        pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        pl.coalesce("node", "culprit_node", pl.lit("?")),
                    ),
                    pl.col("line").str.slice(0, 300),
                    pl.when(pl.col("_n_timeouts") > 0)
                    .then(
                        pl.format(
                            " (+{} watchdog timeout line(s) on {} rank(s))",
                            pl.col("_n_timeouts"),
                            pl.col("_timeout_ranks").list.len(),
                        )
                    )
                    .otherwise(pl.lit("")),
                    pl.when(pl.col("_hang_how").is_not_null() & chosen.is_in(["ct"]) | desync)
                    .then(pl.format("; culprit by {}", pl.col("_hang_how")))
                    .otherwise(pl.lit("")),
                ],
                ignore_nulls=True,
            )
        )
    )
    deciding = pl.concat_list([pl.col("_dec"), pl.col("_overridden")]).list.drop_nulls()
    return (
        d.with_columns(_crank=culprit_rank)
        .with_columns(
            root_cause=root,
            confidence=conf,
            culprit_node=culprit,
            culprit_gpu=pl.when(specific & ~desync).then(pl.col("gpu_pci")),
            culprit_rank=pl.col("_crank"),
            decided_by=decided_by,
            evidence_events=pl.when(by_state).then(pl.lit([], pl.List(pl.String))).otherwise(deciding),
            _st_act=st_act,
            _desync=desync,
            _by_state=by_state,
        )
        .with_columns(
            evidence=evidence,
            domain=pl.col("root_cause").replace_strict(domains, default="unknown", return_dtype=pl.String),
            symptoms=(
                pl.col("_n_evidence").fill_null(0)
                - pl.when(pl.col("evidence_events").list.len() > 0)
                .then(pl.col("repeats").fill_null(1) + pl.col("evidence_events").list.len() - 1)
                .otherwise(0)
            )
            .clip(lower_bound=0)
            .cast(pl.Int64),
        )
        .with_columns(
            action=pl.when(pl.col("_by_state"))
            .then(pl.col("_st_act"))
            .when(pl.col("_desync"))
            .then(pl.lit("fix_application"))
            .when(pl.col("root_cause") != pl.col("category"))
            .then(
                pl.col("root_cause").replace_strict(
                    _RELABEL_ACTION,
                    default=pl.col("domain").replace_strict(DEFAULT_ACTION, default="none", return_dtype=pl.String),
                    return_dtype=pl.String,
                )
            )
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
            "culprit_rank",
            "confidence",
            "evidence",
            "evidence_events",
            "symptoms",
            "action",
            "decided_by",
        )
    )


def _odd_collective(ct: pl.DataFrame) -> pl.DataFrame:
    """The one rank whose watchdog timed out in another collective than all the others did
    (at least two of them, agreeing): it is ahead of or behind the rest."""
    seqs = (
        ct.select(*JOB_KEY, "rank", _seq=pl.col("raw").str.extract(SEQ_RE, 1))
        .drop_nulls(["rank", "_seq"])
        .unique([*JOB_KEY, "rank", "_seq"])
    )
    per_seq = seqs.group_by(*JOB_KEY, "_seq").agg(pl.col("rank").unique().alias("_r"))
    shape = per_seq.group_by(JOB_KEY).agg(
        pl.len().alias("_k"),
        pl.col("_r").list.len().min().alias("_lo"),
        pl.col("_r").list.len().max().alias("_hi"),
        pl.col("_r").sort_by(pl.col("_r").list.len()).first().alias("_odd"),
    )
    return shape.filter((pl.col("_k") == 2) & (pl.col("_lo") == 1) & (pl.col("_hi") >= 2)).select(
        *JOB_KEY, _odd_rank=pl.col("_odd").list.first()
    )


def _mismatched_collectives(ct: pl.DataFrame) -> pl.DataFrame:
    """Jobs whose ranks timed out in different collectives of one communicator (a hang leaves all in
    the same one): a named group (PG GUID) apart in sequence or operation, or, with no group named,
    two ranks in different operations (a job's other groups keep sequences of their own)."""
    text = pl.col("raw")
    timed = (
        ct.select(
            *JOB_KEY,
            _rank=pl.coalesce(pl.col("rank").cast(pl.Int64), text.str.extract(RANK_IN_TEXT_RE, 1).cast(pl.Int64)),
            _seq=text.str.extract(SEQ_RE, 1).cast(pl.Int64, strict=False),
            _op=text.str.extract(OP_RE, 1),
            _pg=text.str.extract(PG_RE, 1),
        )
        .drop_nulls(["_rank", "_seq", "_op"])
        .filter(~pl.col("_op").is_in(P2P_OPS))
    )
    # each rank's oldest pending collective, per group
    first = timed.sort("_seq").group_by(*JOB_KEY, "_pg", "_rank").agg(pl.col("_seq", "_op").first())
    per_pg = first.group_by(*JOB_KEY, "_pg").agg(
        _n=pl.len(), _seqs=pl.col("_seq").n_unique(), _ops=pl.col("_op").n_unique()
    )
    named = pl.col("_pg").is_not_null()
    apart = named & ((pl.col("_seqs") > 1) | (pl.col("_ops") > 1))
    apart_unnamed = ~named & (pl.col("_n") == 2) & (pl.col("_ops") > 1)
    # a job that names its groups is judged by the named ones only
    return per_pg.group_by(JOB_KEY).agg(_mismatch=apart.any() | (~named.any() & apart_unnamed.any()))


def _localize_hangs(d: pl.DataFrame, flight: pl.DataFrame | None, cfg: AnalyticsConfig) -> pl.DataFrame:
    """Culprit of an all-ranks-timed-out hang: ranks that never enqueued the collective the others
    wait in (a desync, ``_not_joined``), else the lagging dumps, the ranks missing from the
    timeout reports, the one rank the waiting ranks name, the one rank in another collective, or
    the only rank that reported."""
    gpn = cfg.gpus_per_node
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
    reported = pl.col("_timeout_ranks").cast(pl.List(pl.Int64)).fill_null(pl.lit([], pl.List(pl.Int64)))
    behind_nodes = pl.col("_behind_ranks").list.eval(pl.element() // gpn).list.unique()
    lag_nodes = pl.col("_lag_ranks").list.eval(pl.element() // gpn).list.unique()
    # the ranks the allocation should have: without one (diagnose on a bare log), none is missing
    world = pl.when(pl.col("nodes").list.len() > 0).then(
        pl.max_horizontal(pl.col("nodes").list.len() * gpn, reported.list.max().fill_null(-1) + 1)
    )
    missing = pl.int_ranges(0, world.fill_null(0)).list.set_difference(reported)
    miss_nodes = missing.list.eval(pl.element() // gpn).list.unique()
    one_behind = behind_nodes.list.len() == 1
    one_lag = lag_nodes.list.len() == 1
    one_miss = (miss_nodes.list.len() == 1) & (reported.list.len() > 0)
    one_miss_rank = (missing.list.len() == 1) & (reported.list.len() > 0)
    named = pl.col("_named_ranks").cast(pl.List(pl.Int64)).fill_null(pl.lit([], pl.List(pl.Int64)))
    one_named = named.list.len() == 1
    odd = pl.col("_odd_rank").is_not_null()
    only = reported.list.len() == 1
    node_of = lambda i: pl.col("nodes").list.get(i, null_on_oob=True)  # noqa: E731
    single = lambda ranks: pl.when(pl.col(ranks).list.len() == 1).then(pl.col(ranks).list.first())  # noqa: E731
    rank = (
        pl.when(one_behind)
        .then(single("_behind_ranks"))
        .when(one_lag)
        .then(single("_lag_ranks"))
        .when(one_miss_rank)
        .then(missing.list.first())
        .when(one_named)
        .then(named.list.first())
        .when(odd)
        .then(pl.col("_odd_rank").cast(pl.Int64))
        .when(only)
        .then(reported.list.first())
    )
    rank_how = (
        pl.when(one_behind & (pl.col("_behind_ranks").list.len() == 1))
        .then(pl.lit("flight_recorder_not_joined"))
        .when(one_lag & (pl.col("_lag_ranks").list.len() == 1))
        .then(pl.lit("flight_recorder"))
        .when(one_miss_rank)
        .then(pl.lit("missing_rank"))
        .when(one_named)
        .then(pl.lit("named_rank"))
        .when(odd)
        .then(pl.lit("odd_collective"))
        .when(only)
        .then(pl.lit("only_rank"))
    )
    node_how = (
        pl.when(one_behind)
        .then(pl.lit("flight_recorder_not_joined"))
        .when(one_lag)
        .then(pl.lit("flight_recorder"))
        .when(one_miss)
        .then(pl.lit("missing_rank"))
    )
    return d.with_columns(
        _hang_node=pl.when(one_behind)
        .then(node_of(behind_nodes.list.first()))
        .when(one_lag)
        .then(node_of(lag_nodes.list.first()))
        .when(one_miss)
        .then(node_of(miss_nodes.list.first())),
        _hang_rank=rank,
        _hang_how=pl.when(one_behind)
        .then(pl.lit("flight_recorder_not_joined"))
        .otherwise(pl.coalesce(rank_how, node_how)),
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
        "culprit_rank": pl.Int64,
        "symptoms": pl.Int64,
        "evidence_events": pl.List(pl.String),
    }
