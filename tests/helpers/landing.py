"""A small landing folder written by hand with real-format lines, and its builders."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

INVENTORY = """provider,cluster,rack,node,gpus,gpu_model,leaf_switch,in_service_from
northwind,c1,r01,node-a01,8,H100-SXM5-80GB,leaf-1,2026-01-01
northwind,c1,r01,node-a02,8,H100-SXM5-80GB,leaf-1,2026-01-01
bluepeak,west-2,r7,gpu-b07,8,H200-SXM5-141GB,leaf-9,
"""

# BSD syslog with the raw dmesg stamp inside, an Xid 79 and its GPU identity lines
KERNEL_BSD = """\
Nov 24 00:47:15 node-a01 kernel: [    0.000000] Linux version 5.15.0-122-generic (buildd@lcy02-amd64-106)
Nov 24 03:10:00 node-a01 kernel: [ 8565.112233] IPv6: ADDRCONF(NETDEV_CHANGE): veth1a2b3c: link becomes ready
Nov 24 03:14:07 node-a01 kernel: [ 8812.334455] NVRM: Xid (PCI:0000:3b:00): 79, pid=20412, name=python3, GPU has fallen off the bus.
Nov 24 03:14:07 node-a01 kernel: [ 8812.334490] NVRM: GPU at PCI:0000:3b:00: GPU-3f2a1b4c-5d6e-7f80-91a2-b3c4d5e6f708
Nov 24 03:14:07 node-a01 kernel: [ 8812.334501] NVRM: GPU Board Serial Number: 1654321098765
Nov 24 03:20:41 node-a01 kernel: [ 9206.000001] perf: interrupt took too long (2502 > 2500), lowering kernel.perf_event_max_sample_rate to 79750
"""

# journalctl -o short-iso, NIC cable event and a benign line
KERNEL_JOURNALD = """\
2026-11-24T05:00:01+0000 node-a02 kernel: mlx5_core 0000:5e:00.0: mlx5_port_module_event:1130:(pid 0): Port module event: module 0, Cable unplugged
2026-11-24T05:00:02+0000 node-a02 kernel: IPv6: ADDRCONF(NETDEV_UP): ib0: link is not ready
"""

SACCT = """\
JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason
12345|train|alice|gpu|node-a[01-02]|2|billing=16,cpu=16,gres/gpu=16,mem=500G,node=2|2026-11-24T01:00:00|2026-11-24T01:05:00|2026-11-24T03:34:10|02:29:10|FAILED|1:0|None
12345.batch|batch|||node-a01|1|cpu=8,gres/gpu=8,mem=250G,node=1|2026-11-24T01:05:00|2026-11-24T01:05:00|2026-11-24T03:34:10|02:29:10|FAILED|1:0|
12345.0|python3|||node-a[01-02]|2|cpu=16,gres/gpu=16,mem=500G,node=2|2026-11-24T01:05:05|2026-11-24T01:05:05|2026-11-24T03:34:09|02:29:04|FAILED|1:0|
12346|eval|bob|gpu|node-a02|1|billing=8,cpu=8,gres/gpu=8,mem=250G,node=1|2026-11-24T04:00:00|2026-11-24T04:00:10|2026-11-24T04:30:10|00:30:00|COMPLETED|0:0|None
this line is not a sacct row
"""

SLURMCTLD = """\
[2026-11-24T03:15:00.123] error: Nodes node-a01 not responding, setting DOWN
[2026-11-24T03:15:00.456] Killing JobId=12345 on failed node node-a01
[2026-11-24T03:16:00.000] sched: Allocate JobId=12347 NodeList=node-a02 #CPUs=8 Partition=gpu
"""

JOB_LOG = """\
node-a01:20412:20412 [3] NCCL INFO NCCL version 2.21.5+cuda12.4
node-a01:20412:20533 [3] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
node-a01:20412:20533 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.2.3<51234> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.2.4 remoteGid ::ffff:10.1.2.3
[rank3]:[E1124 03:24:07.123456789 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88214, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600032 milliseconds before timing out.
step 1200 loss 2.3417
"""


def fr_dump(rank: int, last_completed: int) -> str:
    entries = [
        {
            "collective_seq_id": s,
            "profiling_name": "nccl:all_reduce",
            "state": "completed" if s <= last_completed else "started",
            "pg_id": "0",
        }
        for s in range(last_completed - 2, last_completed + 2)
    ]
    return json.dumps(
        {
            "version": "2.4",
            "rank": rank,
            "pg_config": {"0": {"desc": "default_pg"}},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": last_completed + 1,
                    "last_started_collective": last_completed + 1,
                    "last_completed_collective": last_completed,
                }
            },
            "entries": entries,
        }
    )


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def make_landing(root: Path) -> Path:
    """Three partitions over two providers, every kind of file, plus things to ignore."""
    write(root / "inventory.csv", INVENTORY)
    day = root / "northwind" / "c1" / "2026-11-24"
    write(day / "kernel" / "node-a01.log", KERNEL_BSD)
    write(day / "kernel" / "node-a01.boot", "2026-11-24T00:47:15Z\n")
    write(day / "kernel" / "node-a02.log", KERNEL_JOURNALD)
    write(day / "slurm" / "sacct.txt", SACCT)
    write(day / "slurm" / "slurmctld.log", SLURMCTLD)
    write(day / "jobs" / "12345" / "train.log", JOB_LOG)
    for rank, done in ((0, 88214), (1, 88214), (2, 88213)):
        write(day / "jobs" / "12345" / "flight_recorder" / f"rank_{rank}.json", fr_dump(rank, done))
    write(day / "jobs" / "12345" / "flight_recorder" / "rank_3.pkl", pickle.dumps({"entries": []}, protocol=4))
    write(root / "northwind" / "c1" / "2026-11-25" / "kernel" / "node-a01.log", KERNEL_BSD.replace("Nov 24", "Nov 25"))
    write(
        root / "bluepeak" / "west-2" / "2026-11-24" / "kernel" / "gpu-b07.log",
        KERNEL_JOURNALD.replace("node-a02", "gpu-b07"),
    )
    write(root / "_truth" / "northwind" / "c1" / "2026-11-24" / "labels.csv", "x\n")
    write(root / ".staging" / "partial.log", "x\n")
    return root
