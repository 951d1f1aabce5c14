"""Kernel-log messages (boot blocks, benign noise, fault lines) as rows ``node_idx, t, seq, msg``,
built per template over whole columns. Prefixes are added later by ``formats.kernel_line``."""

from __future__ import annotations

import numpy as np
import polars as pl

from . import catalog
from .fleet import GPU_BUSES, GPUS_PER_NODE, NIC_BUSES, NVSWITCH_BUSES
from .rng import stream
from .templates import empty_rows, expand, render

S = 1_000_000
KEYS = {"node_idx": pl.Int64}
SRC_BOOT, SRC_SHUTDOWN, SRC_NOISE, SRC_EVENT = (1 << 56), (2 << 56), (3 << 56), (4 << 56)


def hexs(rng: np.random.Generator, n: int, width: int) -> pl.Series:
    """``n`` random lowercase hex strings of ``width`` digits, without a Python loop."""
    if n == 0:
        return pl.Series([], dtype=pl.Utf8)
    w2 = width + (width % 2)
    raw = np.frombuffer(rng.bytes(w2 // 2 * n).hex().encode(), dtype=f"S{w2}").astype(str)
    return pl.Series(raw).str.slice(0, width)


# --- boot --------------------------------------------------------------------------------------

BOOT_NODE = (
    (
        0,
        "Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, "
        "GNU ld (GNU Binutils for Ubuntu) 2.38) #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024 (Ubuntu 5.15.0-105.115-generic 5.15.149)",
    ),
    (
        1,
        "Command line: BOOT_IMAGE=/vmlinuz-5.15.0-105-generic root=UUID={root_uuid} ro pci=realloc=off iommu=pt "
        "init_on_alloc=0 nvidia.NVreg_RestrictProfilingToAdminUsers=0",
    ),
    (2, "DMI: {dmi}, BIOS 1.5.2 01/09/2024"),
    (3_000, "smpboot: Allowing 224 CPUs, 0 hotplug CPUs"),
    (
        40_000,
        "Memory: 2113311292K/2147003724K available (16393K kernel code, 4383K rwdata, 10864K rodata, "
        "3432K init, 6072K bss, 33692432K reserved, 0K cma-reserved)",
    ),
    (2_950_000, "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Opts: (null). Quota mode: none."),
    (
        4_100_000,
        "systemd[1]: systemd 249.11-0ubuntu3.12 running in system mode (+PAM +AUDIT +SELINUX +APPARMOR +IMA "
        "+SMACK +SECCOMP +GCRYPT +GNUTLS +OPENSSL +ACL +BLKID +CURL +ELFUTILS +FIDO2 +IDN2 -IDN +IPTC +KMOD "
        "+LIBCRYPTSETUP +LIBFDISK +PCRE2 -PWQUALITY -P11KIT -QRENCODE +BZIP2 +LZ4 +XZ +ZLIB +ZSTD -XKBCOMMON "
        "+UTMP +SYSVINIT default-hierarchy=unified)",
    ),
    (4_100_100, "systemd[1]: Detected architecture x86-64."),
    (11_500_000, "nvidia: loading out-of-tree module taints kernel."),
    (11_500_100, "nvidia-nvlink: Nvlink Core is being initialized, major device number 508"),
    (11_900_000, "{nvrm_loading}"),
    (
        13_800_000,
        "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  {driver}  "
        "Release Build  (dvs-builder@U16-I3-B03-4-3)  {driver_date}",
    ),
    (14_000_000, "nvidia-uvm: Loaded the UVM driver, major device number 506."),
    (
        31_000_000,
        "NVRM: Persistence mode is deprecated and will be removed in a future release. "
        "Please use nvidia-persistenced instead.",
    ),
)
BOOT_GPU = (  # offsets are added to 12.2 s + 0.15 s per GPU
    (-12_100_000, "pci {gpu_pcif}: [{pci_id}] type 00 class 0x030200"),
    (0, "NVRM: GPU at PCI:{gpu_pci}: {gpu_uuid}"),
    (1, "NVRM: GPU Board Serial Number: {gpu_serial}"),
)
BOOT_NIC = (  # offsets are added to 3.1 s + 0.08 s per NIC
    (0, "mlx5_core {nic_pci}: firmware version: 28.39.1002"),
    (1_000, "mlx5_core {nic_pci}: Rate limit: 127 rates are supported, range: 0Mbps to 97656Mbps"),
    (22_000_000, "mlx5_core {nic_pci} {netdev}: Link up"),
    (22_000_500, "IPv6: ADDRCONF(NETDEV_CHANGE): {netdev}: link becomes ready"),
)
SHUTDOWN = (
    (0, "sd 0:0:0:0: [sda] Synchronizing SCSI cache"),
    (900_000, "reboot: Restarting system"),
)
DRIVER_DATES = {
    "535": "Thu Feb 22 02:25:46 UTC 2024",
    "550": "Tue Feb 20 20:12:03 UTC 2024",
    "560": "Wed Aug 14 19:50:49 UTC 2024",
    "570": "Thu Jan 23 02:05:50 UTC 2025",
}


def nic_pci(i: int) -> str:
    return f"0000:{NIC_BUSES[i]:02x}:00.0"


def netdev(i: int) -> str:
    return f"ibp{NIC_BUSES[i]}s0"


def cluster_consts(clusters: pl.DataFrame) -> pl.DataFrame:
    """Per-cluster strings used by boot and fault templates."""
    drv = pl.col("driver")
    date = drv.str.slice(0, 3).replace_strict(DRIVER_DATES, default="Tue Feb 20 20:12:03 UTC 2024")
    loading = (
        pl.when(pl.col("open_module"))
        .then(
            pl.format(
                "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {}  Release Build  (dvs-builder@U16-I3-B03-4-3)  {}",
                drv,
                date,
            )
        )
        .otherwise(pl.format("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {}  {}", drv, date))
    )
    return clusters.select(
        "cluster_idx",
        "driver",
        "gpu_pci_id",
        driver_date=date,
        nvrm_loading=loading,
        dmi=pl.lit("Supermicro SYS-821GE-TNHR/X13DEG-OAD"),
    )


def boot_rows(
    boots: pl.DataFrame, nodes: pl.DataFrame, gpus: pl.DataFrame, clusters: pl.DataFrame, seed: int, key: str = ""
) -> pl.DataFrame:
    """``boots``: node_idx, t. Each boot prints the kernel banner, GPU identities and NIC links."""
    if boots.height == 0:
        return empty_rows(KEYS)
    rng = stream(seed, "boot", key)
    b = (
        boots.sort("node_idx", "t")
        .with_row_index("eseq")
        .with_columns(pl.col("eseq").cast(pl.Int64))
        .join(nodes.select("node_idx", "cluster_idx"), on="node_idx", how="left")
        .join(cluster_consts(clusters), on="cluster_idx", how="left")
        .with_columns(
            root_uuid=hexs(rng, boots.height, 8)
            + "-"
            + hexs(rng, boots.height, 4)
            + "-4"
            + hexs(rng, boots.height, 3)
            + "-a"
            + hexs(rng, boots.height, 3)
            + "-"
            + hexs(rng, boots.height, 12)
        )
    )
    parts = [expand(b, BOOT_NODE, ["node_idx"], SRC_BOOT)]
    g = (
        b.select("eseq", "node_idx", "t", "gpu_pci_id")
        .join(gpus, on="node_idx", how="left")
        .with_columns(
            t=pl.col("t") + 12_200_000 + pl.col("gpu_index") * 150_000,
            eseq=pl.col("eseq") * 64 + 1 + pl.col("gpu_index"),
            gpu_pcif=pl.col("gpu_pci") + ".0",
            pci_id=pl.col("gpu_pci_id"),
        )
    )
    parts.append(expand(g, BOOT_GPU, ["node_idx"], SRC_BOOT))
    nic = (
        b.select("eseq", "node_idx", "t")
        .join(pl.DataFrame({"nic": np.arange(GPUS_PER_NODE, dtype=np.int64)}), how="cross")
        .with_columns(
            t=pl.col("t") + 3_100_000 + pl.col("nic") * 80_000,
            eseq=pl.col("eseq") * 64 + 32 + pl.col("nic"),
            nic_pci=pl.col("nic").replace_strict({i: nic_pci(i) for i in range(8)}),
            netdev=pl.col("nic").replace_strict({i: netdev(i) for i in range(8)}),
        )
    )
    parts.append(expand(nic, BOOT_NIC, ["node_idx"], SRC_BOOT))
    return pl.concat(parts)


def shutdown_rows(shutdowns: pl.DataFrame) -> pl.DataFrame:
    if shutdowns.height == 0:
        return empty_rows(KEYS)
    s = shutdowns.sort("node_idx", "t").with_row_index("eseq").with_columns(pl.col("eseq").cast(pl.Int64))
    return expand(s, SHUTDOWN, ["node_idx"], SRC_SHUTDOWN)


# --- benign noise ------------------------------------------------------------------------------

NOISE = (  # weight, lines (offset µs, template)
    (
        3.0,
        (
            (0, "pcieport {rootport}: AER: Corrected error received: {gpu_pcif}"),
            (1, "nvidia {gpu_pcif}: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"),
            (2, "nvidia {gpu_pcif}:   device [{pci_id}] error status/mask=00000001/0000e000"),
            (3, "nvidia {gpu_pcif}:    [ 0] RxErr                  (First)"),
        ),
    ),
    (
        4.0,
        (
            (0, "docker0: port {port_n}(veth{veth}) entered blocking state"),
            (5, "docker0: port {port_n}(veth{veth}) entered disabled state"),
            (10, "device veth{veth} entered promiscuous mode"),
            (420_000, "IPv6: ADDRCONF(NETDEV_CHANGE): veth{veth}: link becomes ready"),
            (420_010, "docker0: port {port_n}(veth{veth}) entered forwarding state"),
        ),
    ),
    (
        1.0,
        (
            (
                0,
                "perf: interrupt took too long ({perf_a} > {perf_b}), lowering kernel.perf_event_max_sample_rate to {perf_c}",
            ),
        ),
    ),
    (
        2.0,
        (
            (
                0,
                'audit: type=1400 audit({epoch}.{ms3}:{serial}): apparmor="DENIED" operation="open" class="file" '
                'profile="snap.lxd.daemon" name="/proc/{pidn}/mounts" pid={pidn} comm="lxd" requested_mask="r" '
                'denied_mask="r" fsuid=0 ouid=0',
            ),
        ),
    ),
    (1.0, ((0, "kauditd_printk_skb: {small} callbacks suppressed"),)),
    (0.5, ((0, "INFO: NMI handler (perf_event_nmi_handler) took too long to run: {small}.{ms3} msecs"),)),
    (
        0.5,
        (
            (
                0,
                "NVRM: Persistence mode is deprecated and will be removed in a future release. "
                "Please use nvidia-persistenced instead.",
            ),
        ),
    ),
    (
        0.3,
        ((0, "TCP: request_sock_TCP: Possible SYN flooding on port {port}. Sending cookies.  Check SNMP counters."),),
    ),
    (0.3, ((0, "hrtimer: interrupt took {ns} ns"),)),
)
NOISE_LINE_BYTES = 120  # average bytes a noise line takes with its prefix, to turn bytes into counts


def noise_rows(
    n_per_node_day: int,
    nodes: pl.DataFrame,
    clusters: pl.DataFrame,
    up_from: np.ndarray,
    t0: int,
    days: int,
    seed: int,
    key: str = "",
) -> pl.DataFrame:
    """Benign lines spread uniformly over each node-day of the ``nodes`` given (gaps are cut out later);
    ``up_from`` is aligned with ``nodes``."""
    if n_per_node_day <= 0:
        return empty_rows(KEYS)
    rng = stream(seed, "noise", key)
    n_nodes = nodes.height
    w = np.array([x[0] for x in NOISE])
    lines_per = np.array([len(x[1]) for x in NOISE])
    events_per_day = max(1, int(n_per_node_day / (w @ lines_per / w.sum())))
    day_len = 86_400 * S
    node = np.repeat(np.arange(n_nodes, dtype=np.int64), events_per_day * days)
    day = np.tile(np.repeat(np.arange(days, dtype=np.int64), events_per_day), n_nodes)
    t = t0 + day * day_len + rng.integers(0, day_len, len(node))
    keep = t >= up_from[node]
    node, t = node[keep], t[keep]
    tpl = rng.choice(len(NOISE), size=len(node), p=w / w.sum())
    gid = nodes["node_idx"].to_numpy()
    pci_id = nodes.join(clusters.select("cluster_idx", "gpu_pci_id"), on="cluster_idx", how="left")[
        "gpu_pci_id"
    ].to_numpy()
    parts = []
    for k, (_, lines) in enumerate(NOISE):
        sel = np.flatnonzero(tpl == k)
        m = len(sel)
        if m == 0:
            continue
        g = rng.integers(0, GPUS_PER_NODE, m)
        bus = np.array(GPU_BUSES)[g]
        frame = pl.DataFrame({"node_idx": gid[node[sel]], "t": t[sel], "eseq": sel.astype(np.int64)})
        text = " ".join(x[1] for x in lines)
        extra = {}
        if "{gpu_pcif}" in text or "{rootport}" in text:
            extra["gpu_pcif"] = pl.Series(np.array([f"0000:{b:02x}:00.0" for b in range(256)])[bus])
            extra["rootport"] = pl.Series(np.array([f"0000:{(b - 2) & 0xFF:02x}:02.0" for b in range(256)])[bus])
            extra["pci_id"] = pl.Series(pci_id[node[sel]])
        if "{veth}" in text:
            extra["veth"] = hexs(rng, m, 7)
            extra["port_n"] = pl.Series(rng.integers(1, 33, m))
        if "{perf_a}" in text:
            a = rng.integers(2501, 9000, m)
            extra.update(
                perf_a=pl.Series(a),
                perf_b=pl.Series(a - rng.integers(1, 500, m)),
                perf_c=pl.Series((25_000_000 // a) * 4),
            )
        if "{epoch}" in text:
            extra.update(
                epoch=pl.Series(t[sel] // S),
                ms3=pl.Series(rng.integers(0, 1000, m)).cast(pl.Utf8).str.zfill(3),
                serial=pl.Series(rng.integers(100, 99_999, m)),
                pidn=pl.Series(rng.integers(1000, 400_000, m)),
            )
        if "{small}" in text:
            extra.update(
                small=pl.Series(rng.integers(1, 40, m)),
                ms3=pl.Series(rng.integers(0, 1000, m)).cast(pl.Utf8).str.zfill(3),
            )
        if "{port}" in text:
            extra["port"] = pl.Series(rng.choice([22, 8080, 29500, 6443], m))
        if "{ns}" in text:
            extra["ns"] = pl.Series(rng.integers(100_000, 3_000_000, m))
        parts.append(expand(frame.with_columns(**extra), lines, ["node_idx"], SRC_NOISE))
    return pl.concat(parts) if parts else empty_rows(KEYS)


# --- fault / event lines -----------------------------------------------------------------------


def event_fields(
    ev: pl.DataFrame, gpus: pl.DataFrame, nodes: pl.DataFrame, clusters: pl.DataFrame, seed: int
) -> pl.DataFrame:
    """Add every column the catalog templates use. ``ev`` has node_idx, t, kind, gpu_index, nic_index,
    sw_index and pid (null when no job process was on the device)."""
    rng = stream(seed, "event_fields")
    n = ev.height
    ev = (
        ev.join(gpus, on=["node_idx", "gpu_index"], how="left")
        .join(nodes.select("node_idx", "cluster_idx"), on="node_idx", how="left")
        .join(clusters.select("cluster_idx", pl.col("gpu_pci_id").alias("pci_id")), on="cluster_idx", how="left")
    )
    bus = np.array(GPU_BUSES)[ev["gpu_index"].to_numpy()]
    nic = ev["nic_index"].to_numpy()
    sw = ev["sw_index"].to_numpy()
    return ev.with_columns(
        gpu_pcif=pl.col("gpu_pci") + ".0",
        gpu_n=pl.col("gpu_index"),
        rootport=pl.Series([f"0000:{(b - 2) & 0xFF:02x}:02.0" for b in bus], dtype=pl.Utf8),
        pidname=pl.when(pl.col("pid").is_null())
        .then(pl.lit("pid='<unknown>', name=<unknown>"))
        .otherwise(pl.format("pid={}, name=python3", pl.col("pid"))),
        pid=pl.coalesce(pl.col("pid"), pl.Series(rng.integers(3000, 60000, n))),
        nic_pci=pl.Series([nic_pci(i) for i in nic], dtype=pl.Utf8),
        netdev=pl.Series([netdev(i) for i in nic], dtype=pl.Utf8),
        nic_n=pl.lit(0),
        sw_n=pl.Series(sw),
        sw_pci=pl.Series([f"0000:{NVSWITCH_BUSES[i]:02x}:00.0" for i in sw], dtype=pl.Utf8),
        port=pl.Series(rng.integers(0, 64, n)),
        link=pl.Series(rng.integers(0, 18, n)),
        link2=pl.Series(rng.integers(0, 18, n)).cast(pl.Utf8).str.zfill(2),
        cpu=pl.Series(rng.integers(0, 224, n)),
        cpu2=pl.Series(rng.integers(0, 224, n)),
        stuck=pl.Series(rng.integers(22, 28, n)),
        events=pl.Series(rng.integers(1, 5000, n)),
        tvm=pl.Series(rng.integers(80_000_000, 200_000_000, n)),
        rss=pl.Series(rng.integers(40_000_000, 120_000_000, n)),
        frss=pl.Series(rng.integers(100_000, 900_000, n)),
        pgt=pl.Series(rng.integers(100_000, 400_000, n)),
        uid=pl.Series(rng.integers(51000, 52000, n)),
        nfs_server=pl.format("fs-{}", pl.Series(rng.integers(1, 9, n)).cast(pl.Utf8).str.zfill(2)),
        ost_name=pl.format("scratch-OST{}", hexs(rng, n, 4)),
        ost_mem=hexs(rng, n, 12),
        peer_ip=pl.format(
            "10.{}.{}.{}",
            pl.Series(rng.integers(1, 8, n)),
            pl.Series(rng.integers(0, 4, n)),
            pl.Series(rng.integers(1, 250, n)),
        ),
        io_tag=pl.Series(rng.integers(1, 1024, n)),
        sector=pl.Series(rng.integers(10_000, 2_000_000_000, n)),
        part=pl.Series(rng.integers(0, 8, n)),
        subpart=pl.Series(rng.integers(0, 2, n)),
        rowaddr=hexs(rng, n, 16),
        chan=pl.Series(rng.integers(0, 8, n)),
        page=hexs(rng, n, 6),
        ts_hex=hexs(rng, n, 16),
        gpc=pl.Series(rng.integers(0, 8, n)),
        tpc=pl.Series(rng.integers(0, 9, n)),
        addr=hexs(rng, n, 2),
        addr2=hexs(rng, n, 8),
    ).with_columns(ost=pl.format("{}-osc-ffff{}", pl.col("ost_name"), pl.col("ost_mem")))


def event_rows(ev: pl.DataFrame) -> pl.DataFrame:
    """Kernel lines of every event; bursts and flaps repeat their lines ``reps`` times."""
    ev = ev.with_columns(eseq=pl.col("event_no").cast(pl.Int64))
    rep = ev.filter(pl.col("reps") > 1)
    if rep.height:
        rep = (
            rep.with_columns(r=pl.int_ranges(0, "reps"))
            .explode("r")
            .with_columns(
                t=pl.col("t")
                + pl.col("r") * pl.col("period_us")
                + (pl.col("r") * 7919 % 997) * (pl.col("period_us") // 4000),
                eseq=pl.col("eseq") * 16384 + pl.col("r"),
            )
            .drop("r")
        )
        ev = pl.concat(
            [ev.filter(pl.col("reps") <= 1).with_columns(eseq=pl.col("eseq") * 16384), rep], how="diagonal_relaxed"
        )
    else:
        ev = ev.with_columns(eseq=pl.col("eseq") * 16384)
    parts = []
    for kind in catalog.KINDS:
        sub = ev.filter(pl.col("kind") == kind.name)
        if sub.height and kind.lines:
            parts.append(expand(sub, kind.lines, ["node_idx"], SRC_EVENT))
    return pl.concat(parts) if parts else empty_rows(KEYS)


def signatures(ev: pl.DataFrame) -> pl.Series:
    """The key line of each event as written (without prefix): tests and the truth use it."""
    out = pl.Series("signature", [None] * ev.height, dtype=pl.Utf8)
    frames = []
    for kind in catalog.KINDS:
        sub = ev.with_row_index("_i").filter(pl.col("kind") == kind.name)
        if sub.height == 0:
            continue
        if not kind.lines:
            frames.append(sub.select("_i", signature=pl.lit(None, dtype=pl.Utf8)))
            continue
        frames.append(sub.select("_i", signature=render(kind.lines[kind.key_line][1])))
    if frames:
        got = pl.concat(frames).sort("_i")
        out = got["signature"]
    return out
