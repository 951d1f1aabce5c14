"""Slurm workload: job mix, a greedy scheduler that respects maintenance and drains, and outcomes.
Outcomes follow Meta RSC-1 (60% completed, 24% failed, 10% preempted, ...); an infrastructure fault
on a running job's nodes ends it one NCCL timeout later (watchdog), or ~5 minutes for a node failure."""

from __future__ import annotations

import heapq

import numpy as np
import polars as pl

from . import catalog
from .downtime import HOUR, MIN
from .rng import stream

S = 1_000_000
SIZES = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
SIZE_W = np.array([0.50, 0.14, 0.12, 0.09, 0.06, 0.04, 0.025, 0.015, 0.007, 0.003])
LIMITS_H = np.array([4, 12, 24, 48, 72])
USERS = (
    ("ajones", 51234),
    ("bchen", 51240),
    ("cdiaz", 51311),
    ("dkim", 51377),
    ("epatel", 51402),
    ("fmuller", 51468),
    ("gsato", 51503),
    ("hnguyen", 51577),
    ("ilopez", 51620),
    ("jwang", 51699),
    ("kokafor", 51734),
    ("lrossi", 51802),
)
NAMES_SMALL = (
    "sft-llama",
    "eval-harness",
    "ablation-lr",
    "data-prep",
    "tokenize",
    "dpo-run",
    "vision-vit",
    "bench-nccl",
    "rlhf-ppo",
    "distill-3b",
)
NAMES_BIG = ("pretrain-7b", "pretrain-70b", "moe-16x8b", "pretrain-405b")
# jobs that print progress but never save a checkpoint: their whole run is lost when they fail
NO_CHECKPOINT = ("eval-harness", "data-prep", "tokenize", "bench-nccl")
CKPT_EVERY_MIN = np.array([10, 15, 20, 30, 45, 60, 90, 120])
CKPT_EVERY_W = np.array([0.08, 0.12, 0.15, 0.25, 0.12, 0.18, 0.05, 0.05])
# the training stack whose progress and checkpoint lines a job prints (simulate/joblogs_progress.py)
STACKS_BIG = ("megatron", "torchtitan", "nemo", "deepspeed")
STACKS_SMALL = ("hf-trainer", "deepspeed", "torchtitan", "nemo")
# what a user does after a job ends early: resubmit it (same name) with this probability, after a
# delay (uniform, minutes); automated requeue scripts for preemption and infrastructure failures,
# a person for their own bugs
RESUBMIT = {
    "infra": (0.85, (1, 20)),
    "preempted": (0.9, (1, 10)),
    "timeout": (0.6, (2, 30)),
    "user": (0.35, (20, 360)),
    "cancelled": (0.1, (5, 120)),
}
MAX_ATTEMPTS = 4
USER_FAILS = (
    ("py_exception", 0.38),
    ("gpu_oom", 0.20),
    ("cpu_oom", 0.09),
    ("xid31", 0.12),
    ("xid13", 0.05),
    ("device_assert", 0.10),
    ("desync", 0.06),
)


def generate_jobs(n_nodes: int, t_first: int, end: int, scn, seed: int, cluster: str) -> pl.DataFrame:
    """Submissions for one cluster, enough to keep it ~90% busy; arrays expand to one row per task."""
    rng = stream(seed, "jobs", cluster)
    max_size = max(1, n_nodes // 2)
    sizes, w = SIZES[SIZES <= max_size], SIZE_W[SIZES <= max_size]
    target = scn.utilisation * n_nodes * (end - t_first)
    batch = max(64, int(target / (6 * HOUR)))
    cols: dict[str, list] = {k: [] for k in ("size", "dur", "array_task")}
    work = 0.0
    while work < target:
        size = rng.choice(sizes, size=batch, p=w / w.sum())
        med = 90 * MIN * (1 + 0.5 * np.log2(size))
        dur = np.clip(np.exp(rng.normal(np.log(med), 1.2)), 2 * MIN, 72 * HOUR).astype(np.int64)
        arr = np.where((size == 1) & (rng.random(batch) < 0.06), rng.integers(2, 12, batch), 0)
        for s_, d_, a_ in zip(size, dur, arr):
            if a_:
                cols["size"] += [1] * int(a_)
                cols["dur"] += list((d_ * rng.uniform(0.7, 1.3, int(a_))).astype(np.int64))
                cols["array_task"] += list(range(int(a_)))
                work += float(d_) * a_
            else:
                cols["size"].append(int(s_))
                cols["dur"].append(int(d_))
                cols["array_task"].append(-1)
                work += float(s_) * float(d_)
            if work >= target:
                break
    n = len(cols["size"])
    size = np.array(cols["size"], dtype=np.int64)
    dur = np.array(cols["dur"], dtype=np.int64)
    task = np.array(cols["array_task"], dtype=np.int64)
    head = task <= 0
    sub_of_head = np.sort(rng.integers(t_first, max(t_first + 1, end - 30 * MIN), head.sum()))
    group = np.cumsum(head) - 1
    submit = sub_of_head[group] + np.where(task > 0, task * S, 0)
    user = rng.integers(0, len(USERS), head.sum())[group]
    big = size >= 64
    preempt_part = (size <= 8) & (rng.random(n) < 0.25) & (task < 0)
    partition = np.where(big, "hero", np.where(preempt_part, "preempt", "gpu"))
    name_small = rng.integers(0, len(NAMES_SMALL), head.sum())[group]
    name = np.where(
        size >= 32, np.array(NAMES_BIG)[rng.integers(0, len(NAMES_BIG), n)], np.array(NAMES_SMALL)[name_small]
    )
    ckpt_every = (CKPT_EVERY_MIN[rng.choice(len(CKPT_EVERY_MIN), size=n, p=CKPT_EVERY_W)] * MIN).astype(np.int64)
    ckpt_every[np.isin(name, NO_CHECKPOINT)] = 0
    stack = np.where(
        size >= 8,
        np.array(STACKS_BIG)[rng.integers(0, len(STACKS_BIG), n)],
        np.array(STACKS_SMALL)[rng.integers(0, len(STACKS_SMALL), n)],
    )
    # a run's name carries its own tag, as users name runs; array tasks share their head's
    tag = rng.integers(0, 16**4, head.sum())[group]
    name = np.array([f"{a}-{b:04x}" for a, b in zip(name, tag)])

    # outcomes decided up front; infrastructure faults may overrule them while the job runs
    u = rng.random(n)
    p_user = np.where(big, 0.12, 0.22)
    p_cancel, p_timeout = 0.05, 0.02
    p_preempt = np.where(preempt_part, 0.35, 0.0)
    outcome = np.full(n, "completed", dtype=object)
    c1 = p_user
    c2 = c1 + p_cancel
    c3 = c2 + p_timeout
    c4 = c3 + p_preempt
    uk = np.array([k for k, _ in USER_FAILS])
    uw = np.array([w for _, w in USER_FAILS])
    outcome[u < c1] = uk[rng.choice(len(uk), size=n, p=uw / uw.sum())][u < c1]
    outcome[(u >= c1) & (u < c2)] = "cancelled"
    outcome[(u >= c2) & (u < c3)] = "timeout"
    outcome[(u >= c3) & (u < c4)] = "preempted"
    limit_h = LIMITS_H[np.searchsorted(LIMITS_H, dur / HOUR * rng.uniform(1.2, 3.0, n)).clip(0, len(LIMITS_H) - 1)]
    limit = limit_h.astype(np.int64) * HOUR
    to = outcome == "timeout"
    limit[to] = np.maximum(10 * MIN, (dur[to] * rng.uniform(0.5, 0.95, to.sum())).astype(np.int64) // MIN * MIN)
    dur = np.where(to, dur, np.minimum(dur, limit))
    frac = np.where(np.isin(outcome, uk), rng.beta(0.7, 2.5, n), rng.uniform(0.05, 0.95, n))
    return (
        pl.DataFrame(
            {
                "submit": submit,
                "size": size,
                "dur": dur,
                "limit": limit,
                "array_task": task,
                "array_head": (np.flatnonzero(head)[group]).astype(np.int64),
                "user": np.array([USERS[i][0] for i in user]),
                "uid": np.array([USERS[i][1] for i in user]),
                "partition": partition,
                "name": name,
                "outcome": outcome.astype(str),
                "frac": frac,
                "culprit_rank": (rng.random(n) * size * 8).astype(np.int64),
                "pid_base": rng.integers(3000, 60000, n),
                "seed_": rng.integers(0, 2**31, n),
                "stack": stack,
                "ckpt_every": ckpt_every,
                "step_us": rng.integers(800_000, 12_000_000, n),
                "warm_us": rng.integers(30 * S, 240 * S, n),
                "attempt": np.ones(n, dtype=np.int64),
                "parent_jix": np.full(n, -1, dtype=np.int64),
                "resume_step": np.zeros(n, dtype=np.int64),
                "load_us": np.zeros(n, dtype=np.int64),
            }
        )
        .with_row_index("jix")
        .with_columns(pl.col("jix").cast(pl.Int64))
        .sort("submit", "jix")
    )


class _Pending:
    """Faults per node in time order, consumed as the scheduler passes them."""

    def __init__(self, n: int, node_local: np.ndarray, t: np.ndarray, rows: np.ndarray):
        self.lists = [[] for _ in range(n)]
        for i, tt, r in sorted(zip(node_local.tolist(), t.tolist(), rows.tolist()), key=lambda x: (x[0], x[1], x[2])):
            self.lists[i].append((tt, r))
        self.ptr = np.zeros(n, dtype=np.int64)
        self.next = np.array([l[0][0] if l else np.iinfo(np.int64).max for l in self.lists], dtype=np.int64)

    def head(self, i: int) -> tuple[int, int]:
        return self.lists[i][self.ptr[i]]

    def pop(self, i: int) -> None:
        self.ptr[i] += 1
        l = self.lists[i]
        self.next[i] = l[self.ptr[i]][0] if self.ptr[i] < len(l) else np.iinfo(np.int64).max

    def upcoming(self, i: int, until: int):
        p = int(self.ptr[i])
        while p < len(self.lists[i]) and self.lists[i][p][0] < until:
            yield self.lists[i][p]
            p += 1


def schedule(
    cluster: dict,
    node_idx: np.ndarray,
    ready: np.ndarray,
    jobs: pl.DataFrame,
    faults: pl.DataFrame,
    maint: pl.DataFrame,
    seed: int,
) -> tuple[pl.DataFrame, dict[int, int], set[int]]:
    """Place jobs on nodes in submit order. ``faults`` carries a ``fid`` column; returns the scheduled jobs,
    {fid: jix of the job running on the faulty node}, and the fids that killed a job."""
    rng = stream(seed, "schedule", cluster["cluster"])
    n = len(node_idx)
    local = {int(g): i for i, g in enumerate(node_idx)}
    free_at = ready.astype(np.int64).copy()
    fl = faults.with_row_index("row")
    pend = _Pending(
        n,
        np.array([local[g] for g in fl["node_idx"].to_list()], dtype=np.int64),
        fl["t"].to_numpy(),
        fl["row"].to_numpy(),
    )
    f_down, f_kind = fl["down_us"].to_numpy(), fl["kind"].to_list()
    mlist = [[] for _ in range(n)]
    for r in maint.sort("node_idx", "start").iter_rows(named=True):
        if r["node_idx"] in local:
            mlist[local[r["node_idx"]]].append((r["start"], r["end"]))
    mptr = np.zeros(n, dtype=np.int64)
    timeout = int(cluster["nccl_timeout_s"]) * S

    affected: dict[int, int] = {}
    killers: set[int] = set()
    out = {
        k: []
        for k in (
            "jix",
            "start",
            "end",
            "nodes",
            "ending",
            "state",
            "fault_row",
            "t_event",
            "culprit_node",
            "culprit_local",
            "root_cause",
            "prog0",
            "last_ckpt",
        )
    }
    resub = _Resubmitter(jobs, seed, cluster["cluster"])
    for row in resub:
        jix, submit, size, dur, limit, outcome, frac, crank, uid = (row[c] for c in _LOOP_COLS)
        k = int(size)
        while True:
            t = max(int(submit), int(np.partition(free_at, k - 1)[k - 1]))
            ch = np.flatnonzero(free_at <= t)[:k]
            pend_end = t + int(dur)
            changed = False
            for i in ch[pend.next[ch] <= t]:
                while pend.next[i] <= t:
                    ft, r = pend.head(i)
                    free_at[i] = max(free_at[i], ft + int(f_down[r]))
                    pend.pop(i)
                changed |= bool(free_at[i] > t)
            for i in ch:
                ml = mlist[i]
                while mptr[i] < len(ml) and ml[mptr[i]][1] <= t:
                    mptr[i] += 1
                if mptr[i] < len(ml) and ml[mptr[i]][0] < pend_end + 15 * MIN:
                    free_at[i] = max(free_at[i], ml[mptr[i]][1] + 2 * MIN)
                    changed = True
            if not changed:
                break

        teardown = int(rng.integers(3 * S, 25 * S))
        multi = k > 1
        if outcome == "completed":
            horizon, end, state, ending = t + dur, t + dur, "COMPLETED", "completed"
        elif outcome == "timeout":
            horizon = end = t + int(limit)
            state, ending = "TIMEOUT", "timeout"
        elif outcome in ("cancelled", "preempted"):
            horizon = end = t + int(frac * dur)
            state = f"CANCELLED by {uid}" if outcome == "cancelled" else "PREEMPTED"
            ending = outcome
        else:
            horizon = t + int(frac * dur)
            ending = outcome
            state = "OUT_OF_MEMORY" if outcome == "cpu_oom" else "FAILED"
            exits = outcome != "desync"
            end = horizon + (timeout + int(rng.integers(30_000, 900_000)) if multi or not exits else 0) + teardown
        t_event, fault_row, c_node, c_local = horizon, -1, int(crank) // 8, int(crank) % 8
        root = (
            None
            if ending == "completed"
            else ("scheduler" if ending in ("timeout", "cancelled", "preempted") else "user_app")
        )
        hits = sorted((ft, r, i) for i in ch[pend.next[ch] < horizon] for ft, r in pend.upcoming(i, horizon))
        for ft, r, i in hits:
            kind = catalog.BY_NAME[f_kind[r]]
            if kind.scope == "nic" and not multi:
                continue  # a single-node job never touches the fabric
            end, state = _fault_end(kind, ft, t, int(limit), multi, timeout, teardown, rng)
            t_event, fault_row, ending, root = ft, r, kind.name, kind.category
            c_node = int(np.flatnonzero(ch == i)[0])
            c_local = -1 if kind.scope in ("node",) else int(fl["nic_index" if kind.scope == "nic" else "gpu_index"][r])
            killers.add(r)
            break
        for i in ch:
            while pend.next[i] < end:
                ft, r = pend.head(i)
                affected[r] = int(jix)
                free_at[i] = max(free_at[i], ft + int(f_down[r]))
                pend.pop(i)
        free_at[ch] = np.maximum(free_at[ch], end)
        prog0 = t + int(row["warm_us"]) + int(row["load_us"])
        last = last_checkpoint(prog0, end if ending == "completed" else t_event, int(row["ckpt_every"]))
        resub.after(row, ending, root, t, end, prog0, last)
        for key, val in (
            ("jix", jix),
            ("start", t),
            ("end", end),
            ("nodes", node_idx[ch].tolist()),
            ("ending", ending),
            ("state", state),
            ("fault_row", fault_row),
            ("t_event", t_event),
            ("culprit_node", c_node),
            ("culprit_local", c_local),
            ("root_cause", root),
            ("prog0", prog0),
            ("last_ckpt", last),
        ):
            out[key].append(val)
    sched = pl.DataFrame(
        out,
        schema_overrides={
            "nodes": pl.List(pl.Int64),
            "root_cause": pl.Utf8,
            "start": pl.Int64,
            "end": pl.Int64,
            "t_event": pl.Int64,
            "prog0": pl.Int64,
            "last_ckpt": pl.Int64,
        },
    )
    jobs = resub.all_jobs()
    fid = fl["fid"].to_list()
    sched = sched.with_columns(
        fault_id=pl.col("fault_row").replace_strict(
            dict(enumerate(fid)) | {-1: None}, default=None, return_dtype=pl.Int64
        )
    ).drop("fault_row")
    return (jobs.join(sched, on="jix", how="left"), {fid[r]: j for r, j in affected.items()}, {fid[r] for r in killers})


_LOOP_COLS = ("jix", "submit", "size", "dur", "limit", "outcome", "frac", "culprit_rank", "uid")


def last_checkpoint(prog0: int, stop: int, every: int) -> int | None:
    """When a job last saved before ``stop``: saves come every ``every`` µs after its first
    progress line at ``prog0`` (None: it never saved, or does not checkpoint)."""
    if every <= 0 or stop - 1 < prog0 + every:
        return None
    return prog0 + (stop - 1 - prog0) // every * every


class _Resubmitter:
    """The submissions of one cluster in submit order, with the resubmissions of jobs that
    ended early (``RESUBMIT``) merged in as they are made: same name, user and size, the rest of
    the work from the last checkpoint (or from where the attempt started, without one)."""

    def __init__(self, jobs: pl.DataFrame, seed: int, cluster: str):
        self.rows = jobs.to_dicts()
        self.schema = jobs.schema
        self.heap: list[tuple[int, int, dict]] = []
        self.added: list[dict] = []
        self.next_jix = (max(r["jix"] for r in self.rows) + 1) if self.rows else 0
        self.rng = stream(seed, "resubmit", cluster)

    def __iter__(self):
        i = 0
        while i < len(self.rows) or self.heap:
            if self.heap and (i >= len(self.rows) or self.heap[0][0] < self.rows[i]["submit"]):
                yield heapq.heappop(self.heap)[2]
            else:
                i += 1
                yield self.rows[i - 1]

    def after(self, row: dict, ending: str, root, start: int, end: int, prog0: int, last: int | None) -> None:
        if ending == "completed" or row["array_task"] >= 0 or row["attempt"] >= MAX_ATTEMPTS:
            return
        why = ending if ending in ("preempted", "timeout", "cancelled") else ("user" if root == "user_app" else "infra")
        p, (lo, hi) = RESUBMIT[why]
        rng = self.rng
        if rng.random() >= p:
            return
        done = (last - prog0) if last is not None else 0
        dur = max(10 * MIN, int(row["dur"]) - done)
        limit = int(row["limit"])
        big = row["size"] >= 64
        u = rng.random()
        p_user = 0.12 if big else 0.22
        p_preempt = 0.35 if row["partition"] == "preempt" else 0.0
        kinds = [k for k, _ in USER_FAILS]
        weights = np.array([w for _, w in USER_FAILS])
        if u < p_user:
            outcome = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
        elif u < p_user + 0.05:
            outcome = "cancelled"
        elif u < p_user + 0.07 and limit < dur:
            outcome = "timeout"
        elif u < p_user + 0.07 + p_preempt:
            outcome = "preempted"
        else:
            outcome = "completed"
        resume_step = int(row["resume_step"]) + (done // int(row["step_us"]) if last is not None else 0)
        new = {
            **row,
            "jix": self.next_jix,
            "submit": int(end + rng.uniform(lo, hi) * MIN),
            "dur": min(dur, limit),
            "array_head": self.next_jix,
            "outcome": outcome,
            "frac": float(rng.beta(0.7, 2.5) if outcome in kinds else rng.uniform(0.05, 0.95)),
            "culprit_rank": int(rng.random() * row["size"] * 8),
            "pid_base": int(rng.integers(3000, 60000)),
            "seed_": int(rng.integers(0, 2**31)),
            "attempt": int(row["attempt"]) + 1,
            "parent_jix": int(row["jix"]),
            "resume_step": resume_step,
            "load_us": int(rng.integers(20 * S, 120 * S)) if resume_step > 0 or last is not None else 0,
        }
        self.next_jix += 1
        self.added.append(new)
        heapq.heappush(self.heap, (new["submit"], new["jix"], new))

    def all_jobs(self) -> pl.DataFrame:
        """The submissions with the resubmissions made."""
        if not self.added:
            return pl.DataFrame(self.rows, schema=self.schema)
        return pl.DataFrame(self.rows + self.added, schema=self.schema)


def _fault_end(kind, ft: int, start: int, limit: int, multi: bool, timeout: int, teardown: int, rng):
    if kind.effect == "node_fail":
        return ft + int(rng.integers(300 * S, 360 * S)), "NODE_FAIL"
    if kind.effect == "silent" and kind.scope == "node" and not multi:
        if kind.category == "host":  # the node stops answering slurmd
            return ft + int(rng.integers(300 * S, 360 * S)), "NODE_FAIL"
        return max(start + limit, ft + S), "TIMEOUT"  # stalls on I/O or throttling until the limit
    if multi or kind.effect == "silent":
        return ft + timeout + int(rng.integers(30_000, 900_000)) + teardown, "FAILED"
    return ft + int(rng.integers(1 * S, 5 * S)) + teardown, "FAILED"
