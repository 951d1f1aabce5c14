"""Catalog of injectable events: taxonomy category, kernel-log lines, and what each does to a job.
The ``infra`` weights follow the Llama 3 unexpected-interruption counts (docs/taxonomy.md,
"Published reference points"); placeholders are columns of ``kernel.event_fields``."""

from __future__ import annotations

from dataclasses import dataclass

S = 1_000_000  # one second in µs


@dataclass(frozen=True)
class Kind:
    name: str
    category: str
    origin: str  # infra | user | benign
    weight: float  # share of independent infra faults (0: never sampled directly)
    scope: str  # gpu | nic | node | nvswitch
    effect: str  # silent | cuda | nccl_ib | node_fail | oom_kill | io | none
    lines: tuple  # ((offset: µs after the event, or a column holding it; template), ...)
    xid: int | None = None
    key_line: int = 0  # which line identifies the event (its time is the logged time)
    cuda_msg: str = ""
    io_msg: str = ""
    down_min: tuple = (20, 90)  # node drained this long after the event (minutes)
    reboot: bool = True  # the drain ends with a reboot (boot block in the kernel log)
    crash: bool = False  # the node dies at the event: nothing logged until it boots again
    models: tuple = ()  # GPU models this kind applies to ('' prefix match); empty: all
    not_models: tuple = ()
    description: str = ""


# {pidname}: "pid=20412, name=python3" (a job's process was on the GPU) or "pid='<unknown>', name=<unknown>"
def _xid(xid: int, text: str, pidname: str = "{pidname}") -> str:
    return f"NVRM: Xid (PCI:{{gpu_pci}}): {xid}, {pidname}, {text}"


def _recovery(action: str) -> str:
    return f"NVRM: Xid (PCI:{{gpu_pci}}): 154, GPU recovery action changed from 0x0 (None) to {action}"


ECC = "uncorrectable ECC error encountered"
LAUNCH = "unspecified launch failure"

KINDS: tuple[Kind, ...] = (
    # --- gpu_bus_lost
    Kind(
        "xid79",
        "gpu_bus_lost",
        "infra",
        48,
        "gpu",
        "silent",
        (
            (0, "NVRM: GPU at PCI:{gpu_pci}: {gpu_uuid}"),
            (0, "NVRM: GPU Board Serial Number: {gpu_serial}"),
            (0, _xid(79, "GPU has fallen off the bus.")),
            (1, "NVRM: GPU {gpu_pcif}: GPU has fallen off the bus."),
            (1, "NVRM: GPU {gpu_pcif}: GPU serial number is {gpu_serial}."),
            (2, "NVRM: A GPU crash dump has been created. If possible, please run"),
            (2, "NVRM: nvidia-bug-report.sh as root to collect this data before"),
            (2, "NVRM: the NVIDIA kernel module is unloaded."),
        ),
        xid=79,
        key_line=2,
        down_min=(60, 240),
        description="GPU fell off the bus (Xid 79)",
    ),
    Kind(
        "pcie_surprise_down",
        "gpu_bus_lost",
        "infra",
        6,
        "gpu",
        "silent",
        (
            (0, "pcieport {rootport}: AER: Uncorrected (Fatal) error received: {rootport}"),
            (
                1,
                "pcieport {rootport}: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)",
            ),
            (2, "pcieport {rootport}:   device [8086:352a] error status/mask=00000020/00000000"),
            (3, "pcieport {rootport}:    [ 5] Surprise Down Error    (First)"),
            (40_000, "NVRM: The NVIDIA GPU {gpu_pcif}"),
            (40_001, "NVRM: (PCI ID: {pci_id}) installed in this system has"),
            (40_002, "NVRM: fallen off the bus and is not responding to commands."),
        ),
        down_min=(90, 300),
        description="PCIe surprise down on the GPU's root port, GPU lost without an Xid",
    ),
    # --- nvlink
    Kind(
        "xid74",
        "nvlink",
        "infra",
        35,
        "gpu",
        "cuda",
        (
            (0, _xid(74, "NVLink: fatal error detected on link {link}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")),
            (30_000, _xid(45, "Preemptive Cleanup, caused by previous Xid 74")),
        ),
        xid=74,
        cuda_msg="uncorrectable NVLink error detected during the execution",
        not_models=("B200",),
        description="NVLink fatal error (Xid 74) with sympathetic Xid 45",
    ),
    Kind(
        "xid149",
        "nvlink",
        "infra",
        35,
        "gpu",
        "cuda",
        (
            (
                0,
                "NVRM: Xid (PCI:{gpu_pci}): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link {link2} "
                "(0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
            ),
            (5_000, _recovery("0x4 (Drain and Reset)")),
        ),
        xid=149,
        cuda_msg="uncorrectable NVLink error detected during the execution",
        models=("B200",),
        description="NVLink5 NETIR link event (Xid 149) and recovery action",
    ),
    Kind(
        "sxid_fatal",
        "nvlink",
        "infra",
        13,
        "nvswitch",
        "silent",
        (
            (
                -3 * S,
                "nvidia-nvswitch{sw_n}: SXid (PCI:{sw_pci}): 12028, Non-fatal, Link {port} egress non-posted PRIV error (First)",
            ),
            (
                -3 * S + 1,
                "nvidia-nvswitch{sw_n}: SXid (PCI:{sw_pci}): 12028, Severity 0 Engine instance {port} Sub-engine instance 00",
            ),
            (0, "nvidia-nvswitch{sw_n}: SXid (PCI:{sw_pci}): 20034, Fatal, Link {port} LTSSM Fault Up"),
            (
                1,
                "nvidia-nvswitch{sw_n}: SXid (PCI:{sw_pci}): 20034, Severity 1 Engine instance {port} Sub-engine instance 00",
            ),
            (
                2,
                "nvidia-nvswitch{sw_n}: SXid (PCI:{sw_pci}): 20034, Data {0x00000000, 0x00000000, 0x00000001, "
                "0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000}",
            ),
            (200_000, _xid(74, "NVLink: fatal error detected on link {link}(0x0, 0x0, 0x0, 0x0, 0x0, 0x1, 0x0)")),
        ),
        key_line=2,
        down_min=(60, 240),
        description="NVSwitch fatal SXid 20034 (link LTSSM fault) with continuation lines",
    ),
    Kind(
        "sxid_soe",
        "nvlink",
        "infra",
        2,
        "nvswitch",
        "silent",
        (
            (0, "nvidia-nvswitch{sw_n}: SXid (PCI:{sw_pci}): 26006, SOE HALTED"),
            (1, "nvidia-nvswitch{sw_n}: SXid (PCI:{sw_pci}): 26006, Data {0x00000000, 0x00000000}"),
        ),
        down_min=(60, 240),
        description="NVSwitch SOE halted (SXid 26006)",
    ),
    # --- gpu_hardware
    Kind(
        "xid109",
        "gpu_hardware",
        "infra",
        20,
        "gpu",
        "cuda",
        (
            (0, _xid(109, "Ch 00000010, errorString CTX SWITCH TIMEOUT, Info 0x3c041")),
            (500_000, _recovery("0x1 (GPU Reset Required)")),
        ),
        xid=109,
        cuda_msg=LAUNCH,
        description="context switch timeout (Xid 109), GPU reset required (Xid 154)",
    ),
    Kind(
        "xid62",
        "gpu_hardware",
        "infra",
        15,
        "gpu",
        "silent",
        (
            (0, _xid(62, "0000d16c 0000d0a2 000000b3 000000b1")),
            (800_000, _recovery("0x2 (Node Reboot Required)")),
        ),
        xid=62,
        description="PMU halt (Xid 62), node reboot required (Xid 154)",
    ),
    Kind(
        "xid119",
        "gpu_hardware",
        "infra",
        17,
        "gpu",
        "silent",
        (
            (
                0,
                _xid(
                    119,
                    "Timeout after 6s of waiting for RPC response from GPU{gpu_n} GSP! Expected function 76 "
                    "(GSP_RM_CONTROL) (0x20800a4c 0x4).",
                ),
            ),
            (
                1,
                "NVRM: GPU{gpu_n} GSP RPC buffer contains function 76 (GSP_RM_CONTROL) and data 0x0000000020800a4c 0x0000000000000004.",
            ),
            (2, "NVRM: GPU{gpu_n} RPC history (CPU -> GSP):"),
            (
                3,
                "NVRM:     entry function                   data0              data1              ts_start           ts_end             duration actively_polling",
            ),
            (
                4,
                "NVRM:      0    76   GSP_RM_CONTROL           0x0000000020800a4c 0x0000000000000004 0x{ts_hex} 0x0000000000000000          y",
            ),
            (
                5,
                "NVRM:     -1    10   FREE                     0x00000000c1d00052 0x0000000000000000 0x{ts_hex} 0x{ts_hex}     12us  ",
            ),
            (
                6,
                "NVRM: GPU{gpu_n} GSP RPC buffer contains function 76 (GSP_RM_CONTROL) and data 0x0000000020800a4c 0x0000000000000004.",
            ),
            (2 * S, _recovery("0x2 (Node Reboot Required)")),
        ),
        xid=119,
        down_min=(45, 180),
        description="GSP RPC timeout (Xid 119) with RPC history dump",
    ),
    # --- gpu_memory
    Kind(
        "xid48",
        "gpu_memory",
        "infra",
        22,
        "gpu",
        "cuda",
        (
            (
                0,
                _xid(
                    48,
                    "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
                    "partition {part}, subpartition {subpart}.",
                ),
            ),
            (10_000, _xid(63, "Row Remapper: New row (0x{rowaddr}) is marked for remapping, reset gpu to activate.")),
            (20_000, _recovery("0x1 (GPU Reset Required)")),
        ),
        xid=48,
        cuda_msg=ECC,
        description="double-bit ECC error (Xid 48), row marked for remapping",
    ),
    Kind(
        "xid95",
        "gpu_memory",
        "infra",
        30,
        "gpu",
        "cuda",
        ((0, _xid(95, "Uncontained: FBHUB. RST: Yes, D-RST: No")),),
        xid=95,
        cuda_msg=ECC,
        description="uncontained memory error (Xid 95); sometimes a burst",
    ),
    Kind(
        "xid94",
        "gpu_memory",
        "infra",
        20,
        "gpu",
        "cuda",
        ((0, _xid(94, "Contained: SM (0x1). RST: Yes, D-RST: No")),),
        xid=94,
        cuda_msg=ECC,
        down_min=(15, 45),
        description="contained memory error (Xid 94)",
    ),
    Kind(
        "xid64",
        "gpu_memory",
        "infra",
        8,
        "gpu",
        "cuda",
        (
            (
                0,
                _xid(
                    64,
                    "Row Remapper Error: (0x{rowaddr}) - All reserved rows for bank are remapped",
                    "pid='<unknown>', name=<unknown>",
                ),
            ),
            (100_000, _recovery("0x4 (Drain and Reset)")),
        ),
        xid=64,
        cuda_msg=ECC,
        down_min=(120, 480),
        description="row remapping failure (Xid 64)",
    ),
    Kind(
        "xid140",
        "gpu_memory",
        "infra",
        11,
        "gpu",
        "cuda",
        (
            (
                0,
                _xid(
                    140,
                    "An unrecovered ECC error has been detected on GPU in the framebuffer at partition {part}, "
                    "subpartition {subpart}.",
                ),
            ),
        ),
        xid=140,
        cuda_msg=ECC,
        description="unrecovered ECC escape (Xid 140)",
    ),
    # --- driver_firmware
    Kind(
        "xid44",
        "driver_firmware",
        "infra",
        28,
        "gpu",
        "cuda",
        (
            (0, _xid(44, "Ch 00000018, intr 00000000")),  # the real line carries no description text
            (1, "NVRM: nvAssertFailedNoLog: Assertion failed: 0 @ kernel_channel.c:1345"),
        ),
        xid=44,
        cuda_msg=LAUNCH,
        down_min=(15, 40),
        description="fault during context switch (Xid 44), driver assertion",
    ),
    Kind(
        "xid38",
        "driver_firmware",
        "infra",
        14,
        "gpu",
        "silent",
        ((0, _xid(38, "0000 0000c5b0 00000000 00000000 00000000")),),
        xid=38,
        down_min=(15, 40),
        description="FECS watchdog (Xid 38)",
    ),
    Kind(
        "xid8",
        "driver_firmware",
        "infra",
        12,
        "gpu",
        "silent",
        ((0, _xid(8, "Channel 00000010")),),
        xid=8,
        down_min=(15, 40),
        description="GPU stopped processing (Xid 8)",
    ),
    # --- network
    Kind(
        "mlx5_link_down",
        "network",
        "infra",
        35,
        "nic",
        "nccl_ib",
        (
            (
                0,
                "mlx5_core {nic_pci}: mlx5_port_module_event:1130:(pid 0): Port module event[error]: module {nic_n}, "
                "Cable error, Bad or shorted cable/module",
            ),
            (2_000, "mlx5_core {nic_pci} {netdev}: Link down"),
            ("recover_us", "mlx5_core {nic_pci} {netdev}: Link up"),
        ),
        down_min=(30, 180),
        reboot=False,
        description="IB cable/optics error, link down then up",
    ),
    Kind(
        "mlx5_nic_fatal",
        "network",
        "infra",
        7,
        "nic",
        "nccl_ib",
        (
            (0, "mlx5_core {nic_pci}: poll_health:800:(pid 0): Fatal error 1 detected"),
            (1, "mlx5_core {nic_pci}: print_health_info:431:(pid 0): assert_var[0] 0x00000000"),
            (2, "mlx5_core {nic_pci}: print_health_info:436:(pid 0): assert_exit_ptr 0x00abcdef"),
            (5_000, "mlx5_core {nic_pci} {netdev}: Link down"),
        ),
        down_min=(60, 240),
        description="ConnectX NIC fatal health error",
    ),
    Kind(
        "link_flap",
        "network",
        "infra",
        0,
        "nic",
        "nccl_ib",
        (
            (0, "mlx5_core {nic_pci} {netdev}: Link down"),
            ("recover_us", "mlx5_core {nic_pci} {netdev}: Link up"),
        ),
        down_min=(10, 30),
        reboot=False,
        description="link flap on a bad rack (leaf switch / cabling)",
    ),
    # --- host
    Kind(
        "soft_lockup",
        "host",
        "infra",
        10,
        "node",
        "silent",
        (
            (0, "watchdog: BUG: soft lockup - CPU#{cpu} stuck for {stuck}s! [python3:{pid}]"),
            (
                1,
                "Modules linked in: nvidia_uvm(POE) nvidia_drm(POE) nvidia_modeset(POE) nvidia(POE) mlx5_ib ib_uverbs mlx5_core",
            ),
            (2, "CPU: {cpu} PID: {pid} Comm: python3 Tainted: P           OE      5.15.0-105-generic #115-Ubuntu"),
        ),
        down_min=(30, 120),
        description="soft lockup",
    ),
    Kind(
        "hung_task",
        "host",
        "infra",
        8,
        "node",
        "silent",
        (
            (0, "INFO: task python3:{pid} blocked for more than 122 seconds."),
            (1, "      Tainted: P           OE     5.15.0-105-generic #115-Ubuntu"),
            (2, '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.'),
        ),
        down_min=(30, 120),
        description="hung task",
    ),
    Kind(
        "mce_panic",
        "host",
        "infra",
        12,
        "node",
        "node_fail",
        (
            (0, "mce: [Hardware Error]: CPU {cpu}: Machine Check Exception: 5 Bank 7: be00000000800400"),
            (1, "mce: [Hardware Error]: RIP !INEXACT! 10:<ffffffff8a1c2d3e> {intel_idle+0x85/0x130}"),
            (2, "mce: [Hardware Error]: TSC 0 ADDR 3ffd8d5c0 MISC 9001001086 "),
            (3, "mce: [Hardware Error]: Machine check: Processor context corrupt"),
            (4, "Kernel panic - not syncing: Fatal machine check"),
        ),
        crash=True,
        down_min=(60, 300),
        description="fatal machine check, kernel panic",
    ),
    Kind(
        "mce_memory",
        "host",
        "infra",
        4,
        "node",
        "node_fail",
        (
            (0, "mce: [Hardware Error]: Machine check events logged"),
            (
                1,
                "EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#0_Chan#{chan}_DIMM#0 (channel:{chan} slot:0 "
                "page:0x{page} offset:0x0 grain:32 - err_code:0x0000:0x009f socket:1 imc:0 rank:0 bg:1 ba:2 row:0x{page})",
            ),
            (2, "Kernel panic - not syncing: Fatal hardware error!"),
        ),
        crash=True,
        down_min=(120, 480),
        description="uncorrectable DIMM error, kernel panic",
    ),
    Kind(
        "host_oom",
        "host",
        "infra",
        6,
        "node",
        "oom_kill",
        (
            (
                0,
                "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
            ),
            (
                1,
                "Out of memory: Killed process {pid} (python3) total-vm:{tvm}kB, anon-rss:{rss}kB, file-rss:{frss}kB, "
                "shmem-rss:0kB, UID:{uid} pgtables:{pgt}kB oom_score_adj:0",
            ),
        ),
        key_line=1,
        down_min=(10, 30),
        reboot=False,
        description="host (global) OOM killer",
    ),
    # --- storage
    Kind(
        "nfs_timeout",
        "storage",
        "infra",
        4,
        "node",
        "silent",
        (
            (0, "nfs: server {nfs_server} not responding, still trying"),
            (30 * S, "nfs: server {nfs_server} not responding, still trying"),
            (90 * S, "nfs: server {nfs_server} not responding, still trying"),
            ("recover_us", "nfs: server {nfs_server} OK"),
        ),
        down_min=(20, 60),
        reboot=False,
        description="NFS server not responding",
    ),
    Kind(
        "lustre_error",
        "storage",
        "infra",
        4,
        "node",
        "io",
        (
            (0, "LustreError: 11-0: {ost}: operation ost_read to node {peer_ip}@o2ib failed: rc = -107"),
            (
                1,
                "Lustre: {ost}: Connection to {ost_name} (at {peer_ip}@o2ib) was lost; in progress operations using "
                "this service will wait for recovery to complete",
            ),
            ("recover_us", "Lustre: {ost}: Connection restored to {ost_name} (at {peer_ip}@o2ib)"),
        ),
        io_msg="OSError: [Errno 108] Cannot send after transport endpoint shutdown",
        down_min=(20, 60),
        reboot=False,
        description="Lustre OST connection lost",
    ),
    Kind(
        "nvme_io",
        "storage",
        "infra",
        3,
        "node",
        "io",
        (
            (0, "nvme nvme1: I/O {io_tag} QID 12 timeout, aborting"),
            (
                30 * S,
                "blk_update_request: I/O error, dev nvme1n1, sector {sector} op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 0",
            ),
            (
                30 * S + 5,
                "EXT4-fs error (device nvme1n1p1): ext4_find_entry:1455: inode #2: comm python3: reading directory lblock 0",
            ),
        ),
        io_msg="OSError: [Errno 5] Input/output error",
        down_min=(60, 240),
        description="local NVMe timeout and I/O error",
    ),
    # --- thermal_power
    Kind(
        "cpu_thermal",
        "thermal_power",
        "infra",
        9,
        "node",
        "silent",
        (
            (0, "CPU{cpu}: Core temperature above threshold, cpu clock throttled (total events = {events})"),
            (1, "CPU{cpu}: Package temperature above threshold, cpu clock throttled (total events = {events})"),
            (5 * S, "CPU{cpu2}: Core temperature above threshold, cpu clock throttled (total events = {events})"),
            ("recover_us", "CPU{cpu}: Core temperature/speed normal"),
        ),
        down_min=(30, 120),
        reboot=False,
        description="CPU over temperature, clocks throttled",
    ),
    # --- collective_timeout: no kernel evidence at all
    Kind(
        "nccl_hang",
        "collective_timeout",
        "infra",
        7,
        "gpu",
        "silent",
        (),
        down_min=(10, 20),
        reboot=False,
        description="NCCL hang with no hardware signal (software / unknown)",
    ),
    # --- user-caused kernel events (placed by the workload at the job's failure time)
    Kind(
        "xid31",
        "user_app",
        "user",
        0,
        "gpu",
        "cuda",
        (
            (
                0,
                _xid(
                    31,
                    "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC{gpc} GPCCLIENT_T1_{tpc} faulted "
                    "@ 0x7f{addr}_{addr2}. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
                ),
            ),
            (2 * S, _xid(43, "Ch 00000008")),
        ),
        xid=31,
        cuda_msg="an illegal memory access was encountered",
        down_min=(0, 0),
        reboot=False,
        description="MMU fault from user code (Xid 31), channel reset (Xid 43)",
    ),
    Kind(
        "xid13",
        "user_app",
        "user",
        0,
        "gpu",
        "cuda",
        (
            (0, _xid(13, "Graphics SM Warp Exception on (GPC {gpc}, TPC {tpc}, SM 0): Out Of Range Address")),
            (1, _xid(13, "Graphics Exception: ESR 0x514730=0x201000e 0x514734=0x20 0x514728=0x4c1eb72 0x51472c=0x0")),
        ),
        xid=13,
        cuda_msg="an illegal memory access was encountered",
        down_min=(0, 0),
        reboot=False,
        description="graphics engine exception from user code (Xid 13)",
    ),
    Kind(
        "cgroup_oom",
        "user_app",
        "user",
        0,
        "node",
        "oom_kill",
        (
            (0, "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"),
            (
                1,
                "Memory cgroup out of memory: Killed process {pid} (python3) total-vm:{tvm}kB, anon-rss:{rss}kB, "
                "file-rss:{frss}kB, shmem-rss:0kB, UID:{uid} pgtables:{pgt}kB oom_score_adj:0",
            ),
        ),
        key_line=1,
        down_min=(0, 0),
        reboot=False,
        description="job exceeded its cgroup memory (Slurm OUT_OF_MEMORY)",
    ),
    # --- benign but recorded
    Kind(
        "xid63",
        "gpu_memory",
        "benign",
        0,
        "gpu",
        "none",
        (
            (
                0,
                _xid(
                    63,
                    "Row Remapper: New row (0x{rowaddr}) is marked for remapping, reset gpu to activate.",
                    "pid='<unknown>', name=<unknown>",
                ),
            ),
        ),
        xid=63,
        down_min=(0, 0),
        reboot=False,
        description="row remapping event (benign, recorded)",
    ),
)

BY_NAME = {k.name: k for k in KINDS}

# Lemon nodes fail over and over through one component (Meta's lemon root causes, coarsely).
LEMON_COMPONENTS = {  # component -> (weight, kinds it fails through)
    "gpu": (0.30, ("xid79", "xid119", "xid62")),
    "hbm": (0.15, ("xid95", "xid48")),
    "dimm": (0.20, ("mce_memory",)),
    "pcie": (0.15, ("pcie_surprise_down",)),
    "nic": (0.12, ("mlx5_link_down",)),
    "nvlink": (0.08, ("xid74",)),
}


def applies(kind: Kind, gpu_model: str) -> bool:
    if kind.models and not any(gpu_model.startswith(m) for m in kind.models):
        return False
    return not any(gpu_model.startswith(m) for m in kind.not_models)


def infra_kinds(gpu_model: str) -> list[Kind]:
    return [k for k in KINDS if k.origin == "infra" and k.weight > 0 and applies(k, gpu_model)]
