"""A two-cluster landing day of real kernel and NCCL lines, and a known-issues file for it.

Messages are verbatim real lines (models/corpus/dev.jsonl: NVIDIA/nvidia-docker#1553 for the
Xid 79 with its GPU identity lines, leptonai/gpud's xid testdata for the GSP timeout with its
board serial, rupalis-nv/NVSentinel's Xid 31, leptonai/gpud's pstore dmesg for the driver
banner; the NCCL lines are rule examples of models/rules/nccl.yaml); the syslog prefixes,
inventory and sacct rows around them are the landing format (docs/landing.md)."""

from __future__ import annotations

from pathlib import Path

DAY = "2026-11-24"
INVENTORY = """provider,cluster,rack,node,gpus,gpu_model,leaf_switch
acme,c1,r1,node-a17,8,H100-SXM5-80GB,leaf-1
acme,c1,r1,node-b02,8,H100-SXM5-80GB,leaf-1
acme,c1,r2,n3,8,H100-SXM5-80GB,leaf-2
bolt,c2,r1,m1,8,H200-SXM5-141GB,leaf-x
"""
DRIVER = "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03  Mon Dec 30 17:44:08 UTC 2024"
XID31 = "NVRM: Xid (PCI:0000:b5:00): 31, pid=2079991, name=pt_main_thread, Ch 00000007, intr 00000000."
GSP = [
    "NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d",
    "NVRM: GPU Board Serial Number: 1650124014249",
    "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting for RPC response "
    "from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
]
XID79 = [
    "NVRM: GPU at PCI:0000:09:00: GPU-26fba6b2-9e52-006e-68db-4ce18382a5ea",
    "NVRM: GPU Board Serial Number:",
    "NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.",
]
PEER_HOST = "node-a17:20412:20540 [3] NCCL WARN Connection closed by remote peer node-b02<38812>"
PEER_IB = (
    "node-a17:20412:20533 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.2.3<51234> "
    "with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.2.4 remoteGid ::ffff:10.1.2.3"
)
SACCT_HEAD = "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason\n"


def _job(job: str, nodes: str, n: int, start: str, end: str, elapsed: str) -> str:
    g = 8 * n
    return (
        f"{job}|train|alice|gpu|{nodes}|{n}|cpu={g},gres/gpu={g},node={n}|{DAY}T{start}|{DAY}T{start}|"
        f"{DAY}T{end}|{elapsed}|FAILED|1:0|None\n"
    )


def _syslog(node: str, lines: list[tuple[str, str]]) -> str:
    return "".join(f"Nov 24 {t} {node} kernel: {m}\n" for t, m in lines)


def make_known_landing(root: Path) -> Path:
    """acme/c1: an Xid 31 kills job 101 on node-a17; node-b02 (driver 550.144.03) has a GSP
    timeout, then an Xid 79 that kills jobs 100 and 102, whose log on node-a17 names node-b02
    as its peer. bolt/c2: the same Xid 31 kills job 200 on m1."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "inventory.csv").write_text(INVENTORY)
    c1 = root / "acme" / "c1" / DAY
    c2 = root / "bolt" / "c2" / DAY
    for d in (c1, c2):
        (d / "kernel").mkdir(parents=True)
        (d / "slurm").mkdir()
    (c1 / "kernel" / "node-a17.log").write_text(_syslog("node-a17", [("01:00:00", XID31)]))
    (c1 / "kernel" / "node-b02.log").write_text(
        _syslog(
            "node-b02",
            [("00:10:00", DRIVER)] + [("02:00:00", m) for m in GSP] + [("03:00:00", m) for m in XID79],
        )
    )
    (c1 / "slurm" / "sacct.txt").write_text(
        SACCT_HEAD
        + _job("100", "node-b02", 1, "01:00:00", "03:05:00", "02:05:00")
        + _job("101", "node-a17", 1, "00:30:00", "01:02:00", "00:32:00")
        + _job("102", "node-a17,node-b02", 2, "02:00:00", "03:06:00", "01:06:00")
    )
    (c1 / "jobs" / "102").mkdir(parents=True)
    (c1 / "jobs" / "102" / "slurm-102.log").write_text(f"{PEER_HOST}\n{PEER_IB}\n")
    (c2 / "kernel" / "m1.log").write_text(_syslog("m1", [("01:00:00", XID31)]))
    (c2 / "slurm" / "sacct.txt").write_text(SACCT_HEAD + _job("200", "m1", 1, "00:30:00", "01:02:00", "00:32:00"))
    return root


KNOWN_ISSUES = """\
version: 1
issues:
  - id: KI-31
    title: "Xid 31 on acme/c1 is the driver's bug, not <b>user</b> code"
    match: {xid: 31}
    scope: {provider: acme, cluster: c1}
    verdict: {root_cause: driver_firmware, action: contact_provider}
    runbook: https://wiki.example/ki-31
    hotfix: "nvidia-smi -r -i 0 && echo '$(whoami)'"
    ticket: ACME-4411
    owner: alice
    opened: 2026-11-20
  - id: KI-79-old
    title: GPUs falling off the bus after the firmware update
    match: {category: gpu_bus_lost}
    opened: 2026-11-01
    expires: 2026-11-20
  - id: KI-gsp
    title: GSP timeouts on node-b02
    match: {rule: nvrm_xid, xid: 119}
    scope: {node: node-b02, driver: 550.144.03}
    ticket: ACME-4500
    drain: true
    opened: 2026-11-20
"""
