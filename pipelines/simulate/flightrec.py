"""PyTorch flight-recorder dumps (JSON form), one per rank, for hung jobs. In a desync or a
GPU death the culprit's ring buffer stops one collective before the others'; in an NCCL hang
every dump is the same. Ranks record the same collectives, so a job needs only two documents."""

from __future__ import annotations

import json

OPS = {
    "ALLREDUCE": "nccl:all_reduce",
    "_ALLGATHER_BASE": "nccl:_allgather_base",
    "_REDUCE_SCATTER_BASE": "nccl:_reduce_scatter_base",
}
FRAMES = [
    {
        "name": "all_reduce",
        "filename": "/usr/local/lib/python3/dist-packages/torch/distributed/distributed_c10d.py",
        "line": 2501,
    },
    {"name": "train_step", "filename": "/workspace/train.py", "line": 201},
    {"name": "main", "filename": "/workspace/train.py", "line": 388},
]
DEPTH = 8
STEP_US = 330_000


def dump(
    nranks: int, seq: int, culprit: bool, t_event_us: int, timeout_ms: int, op: str = "ALLREDUCE", numel: int = 262144
) -> bytes:
    last = seq - 1 if culprit else seq
    entries = []
    for s in range(last - DEPTH + 1, last + 1):
        t_ns = (t_event_us - (seq - 1 - s) * STEP_US) * 1000
        hung = (not culprit) and s == seq
        entries.append(
            {
                "record_id": s * 2,
                "pg_id": 0,
                "process_group": ["0", "default_pg"],
                "collective_seq_id": s,
                "p2p_seq_id": 0,
                "op_id": s,
                "profiling_name": OPS.get(op, "nccl:all_reduce"),
                "time_created_ns": t_ns,
                "duration_ms": None if hung else 11.2,
                "input_sizes": [[numel]],
                "input_dtypes": ["BFloat16"],
                "output_sizes": [[numel]],
                "output_dtypes": ["BFloat16"],
                "state": "started" if hung else "completed",
                "time_discovered_started_ns": t_ns + 40_000,
                "time_discovered_completed_ns": None if hung else t_ns + 11_200_000,
                "retired": not hung,
                "timeout_ms": timeout_ms,
                "is_p2p": False,
                "frames": FRAMES,
            }
        )
    doc = {
        "version": "2.4",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": f"[0, ..., {nranks - 1}]"}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": last,
                "last_started_collective": last,
                "last_completed_collective": seq - 1,
            }
        },
        "entries": entries,
    }
    return (json.dumps(doc) + "\n").encode()


def write_job(
    w,
    log_dir: str,
    nranks: int,
    culprit_ranks: set[int],
    seq: int,
    t_event_us: int,
    timeout_ms: int,
    op: str,
    numel: int,
) -> None:
    docs = {c: dump(nranks, seq, c, t_event_us, timeout_ms, op, numel) for c in (False, True)}
    for rank in range(nranks):
        w.write(f"{log_dir}/flight_recorder/rank_{rank}.json", docs[rank in culprit_ranks])
