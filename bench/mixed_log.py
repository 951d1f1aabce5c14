"""Generate a large mixed GPU-cluster log (all families, several prefix formats) for benchmarks:
numpy picks templates and fields, polars formats whole columns; ~0.1% of lines are failure
lines, the rest is the benign noise real logs are made of."""

from __future__ import annotations

import argparse
import datetime as dt

import numpy as np
import polars as pl

BENIGN = [
    "mlx5_core 0000:5e:00.0: mlx5_pcie_event:301:(pid {n}): PCIe slot advertised sufficient power (75W).",
    "{host}:{n}:{n} [{d}] NCCL INFO Channel {d2}/32 : 0[{d}] -> 1[{d}] via P2P/CUMEM/read",
    "{host}:{n}:{n} [{d}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.2.3<0>",
    "2026-11-24 03:14:07,123 INFO step {n} loss 2.{n} lr 3.0e-04 tokens/s {n}",
    "systemd-journald[{n}]: Data hash table of /run/log/journal/{n}/system.journal has a fill level at 75.1",
    "pcieport 0000:16:02.0: AER: Corrected error received: 0000:17:00.0",
    "NVRM: GPU at PCI:0000:3b:00: GPU-1b9c2f7e-5d1a-4c55-9e2b-{n}",
    "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
    'audit: type=1400 audit({n}.123:{n}): apparmor="STATUS" operation="profile_load" name="nvidia_modprobe"',
    "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
]
# NCCL INFO floods and training progress dominate; corrected AER spam is rarer
BENIGN_WEIGHTS = np.array([8, 30, 10, 30, 5, 0.5, 0.05, 5, 5, 6.45]) / 100.0
FAULTS = [
    "NVRM: Xid (PCI:0000:3b:00): 79, pid={n}, name=python3, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:5d:00): 95, pid={n}, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No",
    "NVRM: Xid (PCI:0000:9a:00): 31, pid={n}, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC3 GPCCLIENT_T1_2 faulted @ 0x7f00_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    "nvidia-nvswitch2: SXid (PCI:0000:a5:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
    "mlx5_core 0000:5e:00.0 ibp94s0: Link down",
    "Out of memory: Killed process {n} (python3) total-vm:123456kB, anon-rss:1234kB, file-rss:0kB",
    "nfs: server fs-02 not responding, still trying",
    "{host}:{n}:{n} [{d}] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.2.3<51234> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
    "[Rank {d}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600032 milliseconds before timing out.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]


def _prefix(fmt: str, ts: pl.Expr, mono: pl.Expr, host: str) -> pl.Expr:
    if fmt == "bsd":
        return ts.dt.strftime("%b %e %H:%M:%S") + pl.lit(f" {host} kernel: ")
    if fmt == "journald":
        return ts.dt.strftime("%Y-%m-%dT%H:%M:%S+0000") + pl.lit(f" {host} kernel: ")
    if fmt == "dmesg_T":
        return pl.lit("[") + ts.dt.strftime("%a %b %e %H:%M:%S %Y") + pl.lit("] ")
    if fmt == "rfc3339":
        return ts.dt.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00") + pl.lit(f" {host} kernel: ")
    return pl.lit("[") + mono.round(6).cast(pl.String).str.pad_start(12) + pl.lit("] ")


def generate(path: str, target_bytes: int, *, seed: int = 0, fault_rate: float = 0.001) -> int:
    """Write about ``target_bytes`` of log to ``path``; returns bytes written."""
    rng = np.random.default_rng(seed)
    written = 0
    start = dt.datetime(2026, 11, 24, tzinfo=dt.timezone.utc)
    fmts = ["bsd", "journald", "dmesg_T", "rfc3339", "raw"]
    with open(path, "wb") as out:
        chunk_no = 0
        while written < target_bytes:
            n = 200_000
            host = f"node-{chunk_no % 64:03d}"
            is_fault = rng.random(n) < fault_rate
            b_idx = rng.choice(len(BENIGN), n, p=BENIGN_WEIGHTS)
            t_idx = np.where(is_fault, rng.integers(0, len(FAULTS), n), b_idx)
            templates = np.where(
                is_fault,
                np.array(FAULTS, dtype=object)[t_idx % len(FAULTS)],
                np.array(BENIGN, dtype=object)[t_idx % len(BENIGN)],
            )
            secs = np.sort(rng.integers(0, 86_400_000_000, n))
            df = pl.DataFrame(
                {
                    "tpl": pl.Series(templates.astype(str)),
                    "n": rng.integers(1000, 99999, n),
                    "d": rng.integers(0, 8, n),
                    "us": secs,
                }
            ).with_columns(ts=pl.lit(start) + pl.duration(microseconds=pl.col("us")), mono=pl.col("us") / 1e6 + 1234.5)
            fmt = fmts[chunk_no % len(fmts)]
            msg = (
                pl.col("tpl")
                .str.replace_all("{host}", host, literal=True)
                .str.replace_all("{n}", pl.col("n").cast(pl.String), literal=True)
                .str.replace_all("{d2}", pl.col("d").cast(pl.String).str.pad_start(2, "0"), literal=True)
                .str.replace_all("{d}", pl.col("d").cast(pl.String), literal=True)
            )
            lines = df.select(_prefix(fmt, pl.col("ts"), pl.col("mono"), host) + msg)
            data = ("\n".join(lines.to_series().to_list()) + "\n").encode()
            out.write(data)
            written += len(data)
            chunk_no += 1
    return written


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("path")
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(generate(a.path, a.mb << 20, seed=a.seed))
