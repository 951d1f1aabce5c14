"""Bad-input corpus for the hardening tests: builders that write each bad case into a landing
folder, always beside good real-format files (the "good neighbours") whose events are known.

Nothing large or binary is committed: every case is generated at test time (seeded, so the
bytes are the same on every run). Each case gets its own cluster under provider ``hard`` so
one pipeline run over one landing folder covers all of them and a test reads back just its
partition. ``build_corpus(root)`` writes every case plus ``inventory.csv``.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import random
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

from helpers.landing import fr_dump, write

PROVIDER = "hard"
DAY = "2026-11-24"

# --------------------------------------------------------------------------- good lines

# BSD syslog (year-less) with raw dmesg stamps inside: 5 lines, 3 events (Xid 79, the GPU
# identity line, the NIC cable event), 2 benign lines.
GOOD_KERNEL = """\
{mon} {day:>2} 03:10:00 {node} kernel: [ 8565.112233] IPv6: ADDRCONF(NETDEV_CHANGE): veth1a2b3c: link becomes ready
{mon} {day:>2} 03:14:07 {node} kernel: [ 8812.334455] NVRM: Xid (PCI:0000:3b:00): 79, pid=20412, name=python3, GPU has fallen off the bus.
{mon} {day:>2} 03:14:07 {node} kernel: [ 8812.334490] NVRM: GPU at PCI:0000:3b:00: GPU-3f2a1b4c-5d6e-7f80-91a2-b3c4d5e6f708
{mon} {day:>2} 04:00:01 {node} kernel: [11446.000001] mlx5_core 0000:5e:00.0: mlx5_port_module_event:1130:(pid 0): Port module event: module 0, Cable unplugged
{mon} {day:>2} 05:00:00 {node} kernel: [15045.000001] perf: interrupt took too long (2502 > 2500), lowering kernel.perf_event_max_sample_rate to 79750
"""
GOOD_KERNEL_EVENTS = [(2, "gpu_bus_lost"), (3, "benign"), (4, "network")]  # (line_no, category); the GPU
# identity line is a kept benign event

XID79 = "{mon} {day:>2} {hms} {node} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus."
EXT4 = (
    "{mon} {day:>2} {hms} {node} kernel: EXT4-fs error (device nvme0n1p2): ext4_find_entry:1455: "
    "inode #2: comm python3: reading directory lblock 0"
)
BENIGN = "{mon} {day:>2} {hms} {node} kernel: usb 1-1: new high-speed USB device number 2 using xhci_hcd"

# job stdout/stderr: NCCL network error and a watchdog timeout (2 events), 3 benign lines
GOOD_JOB = """\
node-a01:20412:20412 [3] NCCL INFO NCCL version 2.21.5+cuda12.4
node-a01:20412:20533 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.2.3<51234> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.2.4 remoteGid ::ffff:10.1.2.3
[rank3]:[E1124 03:24:07.123456789 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88214, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600032 milliseconds before timing out.
step 1200 loss 2.3417
step 1300 loss 2.3001
"""
GOOD_JOB_CATEGORIES = ["network", "collective_timeout"]

SACCT_HEADER = "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason"
SACCT_GOOD_ROWS = [
    "12345|train|alice|gpu|{n1},{n2}|2|billing=16,cpu=16,gres/gpu=16,mem=500G,node=2|2026-11-24T01:00:00|2026-11-24T01:05:00|2026-11-24T03:34:10|02:29:10|FAILED|1:0|None",
    "12345.batch|batch|||{n1}|1|cpu=8,gres/gpu=8,mem=250G,node=1|2026-11-24T01:05:00|2026-11-24T01:05:00|2026-11-24T03:34:10|02:29:10|FAILED|1:0|",
    "12346|eval|bob|gpu|{n2}|1|billing=8,cpu=8,gres/gpu=8,mem=250G,node=1|2026-11-24T04:00:00|2026-11-24T04:00:10|2026-11-24T04:30:10|00:30:00|COMPLETED|0:0|None",
]

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def _md(date: str) -> dict:
    y, m, d = (int(x) for x in date.split("-"))
    return {"mon": MONTHS[m - 1], "day": d}


def good_kernel(node: str, date: str = DAY) -> str:
    return GOOD_KERNEL.format(node=node, **_md(date))


def line(template: str, node: str, hms: str, date: str = DAY) -> str:
    return template.format(node=node, hms=hms, **_md(date))


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    """Where a case lives and which files in it are its good neighbours."""

    name: str  # also the cluster name
    dates: list[str] = field(default_factory=lambda: [DAY])
    nodes: list[str] = field(default_factory=list)  # inventory nodes of the cluster
    good: list[str] = field(default_factory=list)  # good kernel logs (source paths)

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def cluster(self) -> str:
        return self.name

    def day(self, root: Path, date: str | None = None) -> Path:
        return root / PROVIDER / self.name / (date or self.dates[0])

    def source(self, rel: str, date: str | None = None) -> str:
        """The ``source`` column of a file of this case (relative to the landing folder)."""
        return f"{PROVIDER}/{self.name}/{date or self.dates[0]}/{rel}"


def _case(root: Path, name: str, dates: list[str] | None = None, n_good: int = 1) -> Case:
    """A case folder with ``n_good`` good kernel logs in each of its days."""
    case = Case(name, dates or [DAY])
    for i in range(1, n_good + 1):
        node = f"{name}-good{i}"
        case.nodes.append(node)
        for date in case.dates:
            write(case.day(root, date) / "kernel" / f"{node}.log", good_kernel(node, date))
            case.good.append(case.source(f"kernel/{node}.log", date))
    return case


def case_control(root: Path) -> Case:
    """Nothing bad: the reference the other cases' good neighbours are compared with."""
    case = _case(root, "control")
    write(case.day(root) / "jobs" / "777" / "train.log", GOOD_JOB)
    return case


def case_binary(root: Path) -> Case:
    """A file of random bytes, and good lines with binary garbage lines between them."""
    case = _case(root, "binary")
    node = "binary-n1"
    rng = random.Random(1)
    write(case.day(root) / "kernel" / "binary-junk.log", rng.randbytes(64 << 10))
    junk = rng.randbytes(300).replace(b"\n", b"").replace(b"\r", b"")
    blob = (
        (line(XID79, node, "03:00:00") + "\n").encode()  # line 1: event
        + b"\x00\x01\x02\x03\xff\xfe\x80garbage\n"  # line 2
        + (line(EXT4, node, "03:00:01") + "\n").encode()  # line 3: event
        + junk
        + b"\n"  # line 4
        + (line(BENIGN, node, "03:00:02") + "\n").encode()
    )  # line 5
    write(case.day(root) / "kernel" / f"{node}.log", blob)
    case.nodes += ["binary-junk", node]
    return case


def case_nul(root: Path) -> Case:
    """NUL bytes: a zero-filled run (what a crash leaves in a log file) glued to the next
    line, a line of NULs only, a NUL inside a benign line."""
    case = _case(root, "nul")
    node = "nul-n1"
    blob = (
        (line(BENIGN, node, "03:00:00") + "\n").encode()
        + b"\x00" * 4096
        + (line(XID79, node, "03:00:01") + "\n").encode()  # line 2
        + b"\x00" * 100
        + b"\n"  # line 3
        + (line(BENIGN, node, "03:00:02").replace("usb", "usb\x00") + "\n").encode()  # line 4
        + (line(EXT4, node, "03:00:03") + "\n").encode()
    )  # line 5
    write(case.day(root) / "kernel" / f"{node}.log", blob)
    case.nodes.append(node)
    return case


def case_utf8(root: Path) -> Case:
    """Invalid UTF-8 (lone continuation bytes, overlong encodings, surrogates, a multibyte
    sequence cut at the end of the file) and an Xid line with a Latin-1 byte in it."""
    case = _case(root, "utf8")
    node = "utf8-n1"
    blob = (
        (line(EXT4, node, "03:00:00") + "\n").encode()
        + b"\xc0\xaf\xe0\x80\xaf overlong\n"  # line 2
        + b"\xed\xa0\x80 surrogate\n"  # line 3
        + b"\x80\x81\x82 continuation\n"  # line 4
        + line(XID79, node, "03:00:01").replace("python3", "pyth\xf6n").encode("latin-1")
        + b"\n"  # line 5
        + b"ends in a cut sequence \xe2\x82"
    )  # line 6
    write(case.day(root) / "kernel" / f"{node}.log", blob)
    write(case.day(root) / "kernel" / f"{node}.boot", b"2026-11-24T00:00:00Z\n\xff\xfenot a time\n")
    case.nodes.append(node)
    return case


def _line_ends(root: Path, name: str, eol: str) -> Case:
    """A kernel log and a job log whose lines end in ``eol``."""
    case = _case(root, name)
    node = f"{name}-n1"
    write(case.day(root) / "kernel" / f"{node}.log", good_kernel(node).replace("\n", eol))
    write(case.day(root) / "jobs" / "777" / "train.log", GOOD_JOB.replace("\n", eol))
    case.nodes.append(node)
    return case


def case_crlf(root: Path) -> Case:
    """CRLF line ends in a kernel log, a job log and sacct.txt."""
    case = _line_ends(root, "crlf", "\r\n")
    rows = [SACCT_HEADER] + [r.format(n1=case.nodes[-1], n2=case.nodes[0]) for r in SACCT_GOOD_ROWS]
    write(case.day(root) / "slurm" / "sacct.txt", "\r\n".join(rows) + "\r\n")
    return case


def case_cr_only(root: Path) -> Case:
    """Old-Mac CR-only line ends (what some serial-console captures give)."""
    return _line_ends(root, "cronly", "\r")


LONG_LINE_BYTES = 10 << 20


def case_long_line(root: Path) -> Case:
    """A 10 MB single-line file, and a 10 MB line between two good lines."""
    case = _case(root, "longline")
    write(case.day(root) / "kernel" / "longline-n1.log", b"A" * LONG_LINE_BYTES)
    node = "longline-n2"
    write(
        case.day(root) / "kernel" / f"{node}.log",
        (line(XID79, node, "03:00:00") + "\n").encode()
        + b"B" * LONG_LINE_BYTES
        + b"\n"
        + (line(EXT4, node, "03:00:01") + "\n").encode(),
    )
    case.nodes += ["longline-n1", node]
    return case


def case_empty(root: Path) -> Case:
    """Empty files of every kind."""
    case = _case(root, "empty")
    day = case.day(root)
    for rel in (
        "kernel/empty-n1.log",
        "kernel/empty-n2.log.gz",
        "kernel/empty-n3.log.zst",
        "kernel/empty-n1.boot",
        "jobs/777/train.log",
        "slurm/sacct.txt",
        "slurm/slurmctld.log",
        "jobs/777/flight_recorder/rank_0.json",
    ):
        write(day / rel, b"")
    case.nodes += ["empty-n1", "empty-n2", "empty-n3"]
    return case


def _kernel_body(node: str, n: int) -> bytes:
    """``n`` lines, every 10th an Xid 79 (so n // 10 events)."""
    out = []
    for i in range(n):
        hms = f"03:{(i // 60) % 60:02d}:{i % 60:02d}"
        out.append(line(XID79 if i % 10 == 0 else BENIGN, node, hms))
    return ("\n".join(out) + "\n").encode()


def noisy_kernel_body(node: str, n: int, seed: int = 5) -> bytes:
    """``n`` benign lines carrying random hex (compresses only ~3:1, unlike ``_kernel_body``)."""
    rng = random.Random(seed)
    return "".join(
        line(BENIGN, node, f"03:{i // 60 % 60:02d}:{i % 60:02d}") + f" id={rng.randbytes(24).hex()}\n" for i in range(n)
    ).encode()


def case_gzip(root: Path) -> Case:
    """Truncated, corrupt and mislabelled gzip."""
    case = _case(root, "gz")
    day = case.day(root) / "kernel"
    body = _kernel_body("gz-n1", 20000)
    blob = gzip.compress(body, 6)
    write(day / "gz-n1.log.gz", blob[: len(blob) * 2 // 3])  # truncated
    bad = bytearray(gzip.compress(_kernel_body("gz-n2", 2000), 6))
    bad[40:80] = bytes(40)  # corrupt deflate data
    write(day / "gz-n2.log.gz", bytes(bad))
    write(day / "gz-n3.log.gz", _kernel_body("gz-n3", 10))  # plain text named .gz
    write(day / "gz-n4.log.gz", gzip.compress(_kernel_body("gz-n4", 10)))  # fine
    case.nodes += ["gz-n1", "gz-n2", "gz-n3", "gz-n4"]
    return case


def case_gzip_trailing_garbage(root: Path) -> Case:
    """A complete gzip member followed by junk (``gzip -d`` keeps the data and warns)."""
    case = _case(root, "gztrail")
    write(
        case.day(root) / "kernel" / "gztrail-n1.log.gz",
        gzip.compress(_kernel_body("gztrail-n1", 100)) + b"trailing junk from a broken shipper\n",
    )
    case.nodes.append("gztrail-n1")
    return case


def case_zstd(root: Path) -> Case:
    """Corrupt and mislabelled zstd."""
    case = _case(root, "zst")
    day = case.day(root) / "kernel"
    bad = bytearray(zstandard.ZstdCompressor().compress(_kernel_body("zst-n1", 2000)))
    bad[len(bad) // 2 : len(bad) // 2 + 32] = bytes(32)
    write(day / "zst-n1.log.zst", bytes(bad))  # corrupt
    write(day / "zst-n2.log.zst", _kernel_body("zst-n2", 10))  # plain text named .zst
    write(day / "zst-n3.log.zst", zstandard.ZstdCompressor().compress(_kernel_body("zst-n3", 10)))  # fine
    case.nodes += ["zst-n1", "zst-n2", "zst-n3"]
    return case


def truncated_zstd(n_lines: int = 20000) -> bytes:
    """A zstd archive cut at two thirds: its first blocks are readable, its end is missing."""
    rng = random.Random(3)
    lines = [
        line(XID79 if i % 10 == 0 else BENIGN, f"n{rng.randrange(10**6)}", f"03:{i // 60 % 60:02d}:{i % 60:02d}")
        for i in range(n_lines)
    ]
    blob = zstandard.ZstdCompressor(level=1).compress(("\n".join(lines) + "\n").encode())
    return blob[: len(blob) * 2 // 3]


def case_zstd_truncated(root: Path) -> Case:
    case = _case(root, "zsttrunc")
    write(case.day(root) / "kernel" / "zsttrunc-n1.log.zst", truncated_zstd())
    case.nodes.append("zsttrunc-n1")
    return case


BOMB_LINE = b"Nov 24 03:00:00 bomb-n1 kernel: usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
BOMB_BYTES = 64 << 20  # what the bombs expand to; the reader stops long before


def zstd_bomb(size: int = BOMB_BYTES) -> bytes:
    """Highly repetitive log lines, streamed into a small zstd frame (ratio in the thousands)."""
    out = zstandard.ZstdCompressor(level=3).compressobj()
    chunk = BOMB_LINE * ((1 << 20) // len(BOMB_LINE))
    parts = [out.compress(chunk) for _ in range(size // len(chunk))]
    return b"".join(parts) + out.flush()


def gzip_bomb(size: int = BOMB_BYTES) -> bytes:
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = BOMB_LINE * ((1 << 20) // len(BOMB_LINE))
    return b"".join(c.compress(chunk) for _ in range(size // len(chunk))) + c.flush()


def case_bomb(root: Path) -> Case:
    case = _case(root, "bomb")
    day = case.day(root) / "kernel"
    write(day / "bomb-n1.log.zst", zstd_bomb())
    write(day / "bomb-n2.log.gz", gzip_bomb())
    case.nodes += ["bomb-n1", "bomb-n2"]
    return case


def case_duplicate(root: Path) -> Case:
    """One job log delivered twice under two names (a shipper retry), and one node's kernel
    log delivered both plain and gzipped."""
    case = _case(root, "dup")
    day = case.day(root)
    write(day / "jobs" / "777" / "train.log", GOOD_JOB)
    write(day / "jobs" / "777" / "train-retry1.log", GOOD_JOB)
    node = "dup-n1"
    write(day / "kernel" / f"{node}.log", good_kernel(node))
    write(day / "kernel" / f"{node}.log.gz", gzip.compress(good_kernel(node).encode(), mtime=0))
    case.nodes.append(node)
    return case


def case_unknown_format(root: Path) -> Case:
    """Logs in formats faultline does not know, and files outside the layout."""
    case = _case(root, "unknown")
    day = case.day(root)
    logfmt = (
        "\n".join(f'time=2026-11-24T03:00:{i:02d}Z level=info msg="heartbeat {i}" node=unknown-n1' for i in range(20))
        + "\n"
    )
    write(day / "kernel" / "unknown-n1.log", logfmt)
    jsonl = (
        "\n".join(json.dumps({"@timestamp": f"2026-11-24T03:00:{i:02d}Z", "message": f"tick {i}"}) for i in range(10))
        + "\n"
    )
    write(day / "kernel" / "unknown-n2.log", jsonl)
    write(day / "kernel" / "unknown-n3.log.bz2", b"BZh91AY&SY" + bytes(range(64)))
    write(day / "kernel" / "unknown-n3.txt", "not a log name\n")
    write(day / "README.md", "dropped here by someone\n")
    write(day / "slurm" / "sacct.csv", "JobID,State\n1,FAILED\n")
    write(day / "kernel" / "bad name.log", line(XID79, "bad-name", "03:00:00") + "\n")  # not a valid name
    case.nodes += ["unknown-n1", "unknown-n2", "unknown-n3"]
    return case


def case_time_jumps(root: Path) -> Case:
    """Stamps that jump backwards and forwards by hours, days and years inside one file."""
    case = _case(root, "timejump")
    node = "timejump-n1"
    iso = "{ts} {node} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus."
    stamps = [
        "2026-11-24T03:00:00+00:00",
        "2026-11-24T01:00:00+00:00",
        "2026-11-24T23:59:59+00:00",
        "2026-11-27T03:00:00+00:00",
        "2025-11-24T03:00:00+00:00",
        "2026-11-24T02:00:00+00:00",
        "1970-01-01T00:00:01+00:00",
        "2099-12-31T23:59:59+00:00",
    ]
    write(case.day(root) / "kernel" / f"{node}.log", "".join(iso.format(ts=s, node=node) + "\n" for s in stamps))
    case.nodes.append(node)
    return case


TIME_JUMP_STAMPS = [
    "2026-11-24T03:00:00",
    "2026-11-24T01:00:00",
    "2026-11-24T23:59:59",
    "2026-11-27T03:00:00",
    "2025-11-24T03:00:00",
    "2026-11-24T02:00:00",
    "1970-01-01T00:00:01",
    "2099-12-31T23:59:59",
]


def case_clock_skew(root: Path) -> Case:
    """Two nodes whose clocks are hours off (+7 h, -9 h): their lines stray into the next
    and the previous day, yet belong to this day's partition."""
    case = _case(root, "skew")
    for node, hms in (("skew-ahead", ["22:00:00", "23:59:59"]), ("skew-behind", ["00:00:01", "01:30:00"])):
        date = "2026-11-25" if node == "skew-ahead" else "2026-11-23"
        # ahead: the node thinks it is tomorrow already; behind: still yesterday
        body = [line(XID79, node, hms[0], date), line(BENIGN, node, hms[1], date)]
        write(case.day(root) / "kernel" / f"{node}.log", "\n".join(body) + "\n")
        case.nodes.append(node)
    return case


def case_year_boundary(root: Path) -> Case:
    """Year-less stamps across New Year: the 2026-12-31 partition holds Jan 1 lines (late
    flush), the 2027-01-01 partition holds Dec 31 lines (early start, clock skew)."""
    case = Case("yearend", ["2026-12-31", "2027-01-01"])
    node = "yearend-n1"
    dec31 = [line(XID79, node, "23:59:58", "2026-12-31"), line(EXT4, node, "00:00:05", "2027-01-01")]
    write(case.day(root, "2026-12-31") / "kernel" / f"{node}.log", "\n".join(dec31) + "\n")
    jan1 = [line(XID79, node, "23:59:59", "2026-12-31"), line(EXT4, node, "00:00:07", "2027-01-01")]
    write(case.day(root, "2027-01-01") / "kernel" / f"{node}.log", "\n".join(jan1) + "\n")
    glog = (
        "[rank0]:[E{md} {hms}.123456789 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600032 milliseconds before timing out.\n"
    )
    write(case.day(root, "2026-12-31") / "jobs" / "888" / "train.log", glog.format(md="0101", hms="00:10:00"))
    write(case.day(root, "2027-01-01") / "jobs" / "889" / "train.log", glog.format(md="1231", hms="23:50:00"))
    case.nodes.append(node)
    return case


def case_not_in_inventory(root: Path) -> Case:
    """Logs of a node the inventory does not list (the good node is listed)."""
    case = _case(root, "noinv")
    node = "noinv-ghost"
    write(case.day(root) / "kernel" / f"{node}.log", good_kernel(node))
    rows = [SACCT_HEADER] + [r.format(n1=node, n2="noinv-ghost2") for r in SACCT_GOOD_ROWS]
    write(case.day(root) / "slurm" / "sacct.txt", "\n".join(rows) + "\n")
    return case  # ghost nodes deliberately not in case.nodes


# sacct rows that must be quarantined, with the reason parse_sacct gives (line_no in file)
SACCT_BAD_ROWS = [
    ("12347|short|row", "expected 14 '|'-separated fields, got 3"),
    (
        "abc|train|alice|gpu|n1|1|gres/gpu=8|2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T02:00:00|01:00:00|FAILED|1:0|None",
        "bad JobID 'abc'",
    ),
    (
        "12348|train|alice|gpu|n1|1|gres/gpu=8|2026-13-45T99:00:00|2026-11-24T01:00:00|2026-11-24T02:00:00|01:00:00|FAILED|1:0|None",
        "bad Submit time '2026-13-45T99:00:00'",
    ),
    (
        "12349|train|alice|gpu|n1|1|gres/gpu=8|2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T02:00:00|soon|FAILED|1:0|None",
        "bad Elapsed 'soon'",
    ),
    (
        "12350|train|alice|gpu|n[1-|1|gres/gpu=8|2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T02:00:00|01:00:00|FAILED|1:0|None",
        None,
    ),  # bad NodeList: ...
    (
        "12351|train|alice|gpu|n1|x|gres/gpu=8|2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T02:00:00|01:00:00|FAILED|1:0|None",
        "bad NNodes 'x'",
    ),
    (
        "12352|train|alice|gpu|n1|1|gres/gpu=8|2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T02:00:00|01:00:00|FAILED|one|None",
        "bad ExitCode 'one'",
    ),
    ("\x00\x01\xff binary|||", "expected 14 '|'-separated fields, got 4"),
]


def case_sacct(root: Path) -> Case:
    """Malformed sacct rows between good ones; a second day whose header is garbled."""
    case = _case(root, "sacct", dates=[DAY, "2026-11-25"])
    n1, n2 = "sacct-good1", "sacct-n2"
    good = [r.format(n1=n1, n2=n2) for r in SACCT_GOOD_ROWS]
    rows = [SACCT_HEADER, good[0]] + [r for r, _ in SACCT_BAD_ROWS] + good[1:] + [""]
    write(case.day(root) / "slurm" / "sacct.txt", "\n".join(rows) + "\n")
    garbled = ["Jo\x00bID|Na me|" + "\xff" * 3] + good
    write(case.day(root, "2026-11-25") / "slurm" / "sacct.txt", "\n".join(garbled) + "\n")
    case.nodes.append(n2)
    return case


class PicklePayload:
    """Unpickling this creates ``marker``: proof that a pickle's code ran."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def evil_pickle(marker: Path) -> bytes:
    """A pickle shaped like a flight-recorder dump whose loading runs ``os.mkdir(marker)``."""
    return pickle.dumps(
        {"version": "2.4", "rank": 3, "entries": [], "pg_status": {"0": {}}, "x": PicklePayload(str(marker))},
        protocol=4,
    )


def case_pickle(root: Path, marker: Path) -> Case:
    """Flight-recorder pickles (one with a payload, one disguised as .json, one protocol-0
    pickle) and a torch.save zip, beside good JSON dumps of the same job."""
    case = _case(root, "pickle")
    fr = case.day(root) / "jobs" / "12345" / "flight_recorder"
    write(case.day(root) / "jobs" / "12345" / "train.log", GOOD_JOB)
    for rank, done in ((0, 88214), (1, 88214), (2, 88213)):
        write(fr / f"rank_{rank}.json", fr_dump(rank, done))
    write(fr / "rank_3.pkl", evil_pickle(marker))
    write(fr / "rank_4.json", evil_pickle(marker))
    write(fr / "rank_5.json", pickle.dumps({"entries": [], "x": PicklePayload(str(marker))}, protocol=0))
    write(fr / "rank_6.pt", b"PK\x03\x04" + bytes(60))
    write(fr / "rank_7.json", b'{"rank": 7, "entries": [1, 2')  # broken JSON
    return case


def case_links(root: Path, outside: Path) -> Case:
    """Symlinks (absolute, relative with ``..``, to a directory, back inside the landing
    folder) and a FIFO, none of which may be read."""
    case = _case(root, "links")
    day = case.day(root)
    secret = write(outside / "secret.log", line(XID79, "secret", "03:00:00") + "\n")
    write(outside / "job" / "leak.log", GOOD_JOB)
    (day / "kernel" / "links-abs.log").symlink_to(secret)
    rel = os.path.relpath(secret, day / "kernel")  # ../../../../../outside/secret.log
    assert ".." in rel
    (day / "kernel" / "links-rel.log").symlink_to(rel)
    (day / "kernel" / "links-inside.log").symlink_to(f"{case.nodes[0]}.log")
    (day / "jobs").mkdir(parents=True, exist_ok=True)
    (day / "jobs" / "999").symlink_to(outside / "job", target_is_directory=True)
    os.mkfifo(day / "kernel" / "links-fifo.log")
    return case


def case_linked_day(root: Path, outside: Path) -> Case:
    """A whole day folder that is a symlink to a folder outside the landing folder."""
    case = _case(root, "linkday")
    target = outside / "day"
    write(target / "kernel" / "linkday-x.log", line(XID79, "linkday-x", "03:00:00", "2026-11-25") + "\n")
    (root / PROVIDER / "linkday" / "2026-11-25").symlink_to(target, target_is_directory=True)
    return case


def case_control_bytes(root: Path) -> Case:
    """ASCII control bytes (no NUL, nothing above 0x7f): terminal escape junk, a bell, a
    form of binary that is still pure ASCII."""
    case = _case(root, "ctrl")
    node = "ctrl-n1"
    blob = (
        (line(BENIGN, node, "03:00:00") + "\n").encode()
        + b"\x01\x02\x03\x04\x05\x06\x07\x08 ascii control junk\n"  # line 2
        + b"\x7f\x7f\x1c\x1d\x1e\n"  # line 3
        + (line(EXT4, node, "03:00:01") + "\n").encode()
    )
    write(case.day(root) / "kernel" / f"{node}.log", blob)
    case.nodes.append(node)
    return case


# --------------------------------------------------------------------------- the corpus

BUILDERS = [
    case_control,
    case_binary,
    case_nul,
    case_utf8,
    case_crlf,
    case_cr_only,
    case_long_line,
    case_empty,
    case_gzip,
    case_gzip_trailing_garbage,
    case_zstd,
    case_zstd_truncated,
    case_bomb,
    case_duplicate,
    case_unknown_format,
    case_time_jumps,
    case_clock_skew,
    case_year_boundary,
    case_not_in_inventory,
    case_sacct,
    case_control_bytes,
]


def write_inventory(root: Path, cases: list[Case]) -> None:
    rows = ["provider,cluster,rack,node,gpus,gpu_model,leaf_switch,in_service_from"]
    for case in cases:
        for i, node in enumerate(case.nodes):
            rows.append(f"{PROVIDER},{case.cluster},r{i // 4:02d},{node},8,H100-SXM5-80GB,leaf-{i // 4},2026-01-01")
    write(root / "inventory.csv", "\n".join(rows) + "\n")


def build_corpus(root: Path, outside: Path, marker: Path) -> dict[str, Case]:
    """Every case under ``root`` (the landing folder); ``outside`` holds symlink targets
    (never read), ``marker`` is the path a pickle payload would create."""
    cases = [b(root) for b in BUILDERS]
    cases += [case_pickle(root, marker), case_links(root, outside), case_linked_day(root, outside)]
    write_inventory(root, cases)
    return {c.name: c for c in cases}
