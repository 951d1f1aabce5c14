"""Fleet topology: providers -> clusters -> racks -> 8-GPU nodes, with stable GPU identities."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from .rng import stream

PROVIDER_NAMES = ("northwind", "bluepeak", "redrock", "greenfield", "silverline", "ironbay", "goldcoast", "stonegate")
KERNEL_CONVENTIONS = ("syslog_mono", "short_iso", "dmesg_T", "dmesg_raw", "rfc3339", "dmesg_iso", "syslog")
JOB_PREFIXES = ("plain", "srun", "torchrun")
GPUS_PER_NODE = 8
# Bus numbers of the 8 GPUs, their rail NICs and the 4 NVSwitches of an HGX board.
GPU_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
NIC_BUSES = (0x19, 0x2B, 0x3B, 0x5E, 0x9B, 0xAC, 0xBB, 0xDC)
NVSWITCH_BUSES = (0x05, 0x06, 0x07, 0x08)
GPU_MODELS = (  # inventory name, PCI id, usable GiB, marketing name
    ("H100-SXM5-80GB", "10de:2330", "79.10", "NVIDIA H100 80GB HBM3"),
    ("A100-SXM4-80GB", "10de:20b2", "79.15", "NVIDIA A100-SXM4-80GB"),
    ("H200-SXM5-141GB", "10de:2335", "139.81", "NVIDIA H200"),
    ("B200-180GB", "10de:2901", "178.36", "NVIDIA B200"),
)
# list price per GPU-hour (USD) of each model; a provider charges it times its price factor
GPU_LIST_PRICE = {"H100-SXM5-80GB": 2.40, "A100-SXM4-80GB": 1.50, "H200-SXM5-141GB": 3.10, "B200-180GB": 4.60}
STACKS = (  # driver, open kernel module, NCCL, CUDA, PyTorch, Python
    ("535.161.08", False, "2.18.3", "12.2", "2.1.2", "3.10"),
    ("550.54.15", True, "2.20.5", "12.4", "2.3.1", "3.10"),
    ("550.90.07", True, "2.21.5", "12.4", "2.4.1", "3.11"),
    ("560.35.03", True, "2.23.4", "12.6", "2.5.1", "3.11"),
    ("570.86.15", True, "2.26.2", "12.8", "2.7.1", "3.12"),
)


@dataclass
class Fleet:
    providers: pl.DataFrame  # provider, provider_idx, multiplier
    clusters: pl.DataFrame  # one row per cluster with its conventions and software stack
    nodes: pl.DataFrame  # node_idx, node, provider, cluster, cluster_idx, rack, rack_idx, ip, leaf_switch
    gpus: pl.DataFrame  # node_idx, gpu_index, gpu_pci, gpu_uuid, gpu_serial

    @property
    def n_nodes(self) -> int:
        return self.nodes.height


def provider_name(i: int) -> str:
    return PROVIDER_NAMES[i] if i < len(PROVIDER_NAMES) else f"provider-{i:02d}"


def _split(total: int, weights: np.ndarray) -> np.ndarray:
    """Integer split of ``total`` proportional to ``weights``, every part >= 1."""
    raw = weights / weights.sum() * total
    parts = np.maximum(1, np.floor(raw).astype(np.int64))
    for i in np.argsort(-(raw - np.floor(raw)), kind="stable")[: max(0, total - parts.sum())]:
        parts[i] += 1
    return parts


def build_fleet(scn, seed: int) -> Fleet:
    rng = stream(seed, "fleet")
    n_prov = max(1, min(scn.providers, 26))
    prov_nodes = _split(max(scn.nodes, n_prov), 1.0 / (1.0 + 0.25 * np.arange(n_prov)))
    prov_mult = np.array([scn.provider_multipliers[i % len(scn.provider_multipliers)] for i in range(n_prov)])

    cl_rows, node_cols = (
        [],
        {k: [] for k in ("node", "provider", "cluster", "cluster_idx", "rack", "rack_idx", "ip", "leaf_switch")},
    )
    ci = rack_global = 0
    for p in range(n_prov):
        pname = provider_name(p)
        n_cl = int(np.clip(round(prov_nodes[p] / scn.cluster_target), 1, 4))
        n_cl = min(n_cl, prov_nodes[p])
        rack_size = 4 if p % 2 == 0 else 8
        for k, cn in enumerate(_split(int(prov_nodes[p]), np.ones(n_cl))):
            cname = f"{chr(97 + p)}{k + 1}"
            model = GPU_MODELS[ci % len(GPU_MODELS)]
            stack = STACKS[-1] if model[0].startswith("B200") else STACKS[(ci * 3 + p) % (len(STACKS) - 1)]
            cl_rows.append(
                dict(
                    provider=pname,
                    provider_idx=p,
                    cluster=cname,
                    cluster_idx=ci,
                    cluster_multiplier=float(np.exp(rng.normal(0.0, scn.cluster_sigma))),
                    convention=KERNEL_CONVENTIONS[ci % len(KERNEL_CONVENTIONS)],
                    gzip=ci % 3 == 2,
                    job_prefix=JOB_PREFIXES[(ci // 2) % 3],
                    gpu_model=model[0],
                    gpu_pci_id=model[1],
                    gpu_mem_gib=model[2],
                    gpu_name=model[3],
                    driver=stack[0],
                    open_module=stack[1],
                    nccl=stack[2],
                    cuda=stack[3],
                    torch=stack[4],
                    python=stack[5],
                    nccl_timeout_s=1800 if ci % 4 == 3 else 600,
                    nccl_debug="WARN" if ci % 3 == 1 else "INFO",
                    nodes=int(cn),
                    rack_size=rack_size,
                )
            )
            n_racks = -(-int(cn) // rack_size)
            width = 2 if n_racks < 100 else 3
            for i in range(int(cn)):
                r, n = divmod(i, rack_size)
                node_cols["node"].append(f"{cname}-r{r + 1:0{width}d}-n{n + 1:02d}")
                node_cols["provider"].append(pname)
                node_cols["cluster"].append(cname)
                node_cols["cluster_idx"].append(ci)
                node_cols["rack"].append(f"r{r + 1:0{width}d}")
                node_cols["rack_idx"].append(rack_global + r)
                node_cols["ip"].append(f"10.{16 + ci}.{i // 250}.{i % 250 + 1}")
                node_cols["leaf_switch"].append(f"{cname}-leaf-r{r + 1:0{width}d}")
            rack_global += n_racks
            ci += 1

    clusters = pl.DataFrame(cl_rows)
    nodes = pl.DataFrame(node_cols).with_row_index("node_idx").with_columns(pl.col("node_idx").cast(pl.Int64))
    providers = pl.DataFrame(
        {
            "provider": [provider_name(p) for p in range(n_prov)],
            "provider_idx": list(range(n_prov)),
            "provider_multiplier": prov_mult,
        }
    )
    return Fleet(providers, clusters, nodes, _gpus(nodes.height, rng))


def _gpus(n_nodes: int, rng: np.random.Generator) -> pl.DataFrame:
    n = n_nodes * GPUS_PER_NODE
    hexes = np.frombuffer(rng.bytes(16 * n).hex().encode(), dtype="S32").astype(str)
    serial = rng.integers(1_650_000_000_000, 1_659_999_999_999, n)
    h = pl.col("hex")
    return (
        pl.DataFrame(
            {
                "node_idx": np.repeat(np.arange(n_nodes, dtype=np.int64), GPUS_PER_NODE),
                "gpu_index": np.tile(np.arange(GPUS_PER_NODE, dtype=np.int64), n_nodes),
                "gpu_pci": [gpu_pci(g) for g in range(GPUS_PER_NODE)] * n_nodes,
                "hex": hexes,
                "gpu_serial": serial.astype(str),
            }
        )
        .with_columns(
            gpu_uuid=pl.concat_str(
                [
                    pl.lit("GPU-"),
                    h.str.slice(0, 8),
                    pl.lit("-"),
                    h.str.slice(8, 4),
                    pl.lit("-"),
                    h.str.slice(12, 4),
                    pl.lit("-"),
                    h.str.slice(16, 4),
                    pl.lit("-"),
                    h.str.slice(20, 12),
                ]
            )
        )
        .drop("hex")
    )


def gpu_pci(gpu_index: int) -> str:
    return f"0000:{GPU_BUSES[gpu_index]:02x}:00"
