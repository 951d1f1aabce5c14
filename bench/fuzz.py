"""Mutation fuzzing of the log readers: real-format lines, mutated, through ``parse_files`` and
``parse_sacct``; every case checked for exceptions, line accounting, line order and batch vs
alone (bench/README.md). Failing inputs are saved under ``--out``; exits 1 when anything failed."""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

import zstandard

from faultline.classify.ruleset import load_ruleset
from faultline.ingest.flight_recorder import FlightRecorderError, load_dump, summarize_dumps
from faultline.ingest.parse import SourceContext, parse_files
from faultline.ingest.reader import physical_lines
from faultline.ingest.sacct import parse_sacct

ROOT = Path(__file__).resolve().parents[1]

KERNEL_SEEDS = [
    "Nov 24 03:14:07 node-a17 kernel: [ 8812.334455] NVRM: Xid (PCI:0000:3b:00): 79, pid=20412, name=python3, GPU has fallen off the bus.",
    "Nov 24 03:14:07 node-a17 kernel: [ 8812.334490] NVRM: GPU at PCI:0000:3b:00: GPU-3f2a1b4c-5d6e-7f80-91a2-b3c4d5e6f708",
    "Nov 24 03:14:08 node-a17 kernel: NVRM: The NVIDIA GPU 0000:3b:00.0",
    "Nov 24 03:14:08 node-a17 kernel: NVRM: (PCI ID: 10de:2330) installed in this system has",
    "Nov 24 03:14:08 node-a17 kernel: NVRM: fallen off the bus and is not responding to commands.",
    "[Tue Nov 24 03:14:07 2026] nvidia-nvswitch2: SXid (PCI:0000:a5:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
    "[Tue Nov 24 03:14:07 2026] nvidia-nvswitch2: SXid (PCI:0000:a5:00.0): 20034, Severity 1 Engine instance 30 Sub-engine instance 00",
    "2026-11-24T05:00:01+0000 node-a02 kernel: mlx5_core 0000:5e:00.0: mlx5_port_module_event:1130:(pid 0): Port module event: module 0, Cable unplugged",
    "2026-11-24T03:14:07.123456+00:00 node-a17 kernel: EXT4-fs error (device nvme0n1p2): ext4_find_entry:1455: inode #2: comm python3: reading directory lblock 0",
    "<6>1 2026-11-24T03:14:07.123Z node-a17 kernel - - - NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, An uncorrectable double bit error",
    "kern  :warn  : 2026-11-24T03:14:07,123456+00:00 NVRM: Xid (PCI:0000:3b:00): 94, pid=1, name=x, Contained: SM (0x1).",
    "6,1234,8812334455,-;NVRM: Xid (PCI:0000:3b:00): 95, pid=1, name=x, Uncontained: FBHUB.",
    "[Nov24 03:14] NVRM: Xid (PCI:0000:3b:00): 63, pid=1, name=x, Row Remapper: New row marked for remapping",
    "[  +0.000812] NVRM: Xid (PCI:0000:3b:00): 64, pid=1, name=x, Row Remapper Error",
    "[Nov 24 2026 03:14:07] [ERROR] [tid 812] detected NVSwitch fatal error 12028 on fid 0 on NVSwitch pci bus id 0000:a5:00.0",
    "Nov 24 03:14:07 node-a17 kernel: Out of memory: Killed process 20412 (python3) total-vm:123456kB, anon-rss:1234kB",
    "Nov 24 03:14:07 node-a17 kernel: usb 1-1: new high-speed USB device number 2 using xhci_hcd",
    "Nov 24 03:14:07 node-a17 kernel: pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0",
    "Nov 24 03:14:07 node-a17 kernel: mce: [Hardware Error]: Machine check events logged",
    "[ 8812.334455] INFO: task python3:20412 blocked for more than 120 seconds.",
]
JOB_SEEDS = [
    "node-a01:20412:20412 [3] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "node-a01:20412:20533 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.2.3<51234> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
    "[rank3]:[E1124 03:24:07.123456789 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88214, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600032 milliseconds before timing out.",
    "[rank3]:Traceback (most recent call last):",
    '[rank3]:  File "/workspace/train.py", line 211, in <module>',
    "[rank3]:    loss.backward()",
    "[rank3]:RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.81 GiB",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f0 in /usr/lib/libc10.so)",
    "[2026-11-24 03:14:07,123] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 20412) of binary: /usr/bin/python3",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "============================================================",
    "Failures:",
    "Root Cause (first observed failure):",
    "[0]:",
    "  exitcode  : 1 (pid: 20412)",
    "3: srun: error: node-a17: task 3: Exited with exit code 1",
    "slurmstepd: error: *** STEP 12345.0 ON node-a17 CANCELLED AT 2026-11-24T03:14:07 ***",
    "step 1200 loss 2.3417",
    "E1124 03:14:07.123456  1234 socket.cpp:540] [c10d] The server socket has failed to listen",
]
SACCT_SEEDS = [
    "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason",
    "12345|train|alice|gpu|node-a[01-02]|2|billing=16,cpu=16,gres/gpu=16,mem=500G,node=2|2026-11-24T01:00:00|2026-11-24T01:05:00|2026-11-24T03:34:10|02:29:10|FAILED|1:0|None",
    "12345.batch|batch|||node-a01|1|cpu=8,gres/gpu=8,mem=250G,node=1|2026-11-24T01:05:00|2026-11-24T01:05:00|2026-11-24T03:34:10|02:29:10|FAILED|1:0|",
    "12345.0|python3|||node-a[01-02]|2|cpu=16,gres/gpu=16,mem=500G,node=2|2026-11-24T01:05:05|2026-11-24T01:05:05|2026-11-24T03:34:09|02:29:04|FAILED|1:0|",
    "12346_7|eval|bob|gpu|node-a02|1|billing=8,cpu=8,gres/gpu:h100=8,mem=250G,node=1|2026-11-24T04:00:00|2026-11-24T04:00:10|2026-11-24T04:30:10|1-00:30:00|CANCELLED by 1234|0:15|None",
    "12347+0|het|carol|gpu|None assigned|1|billing=8|2026-11-24T04:00:00|Unknown|Unknown|00:00:00|PENDING|0:0|Resources",
    "12348_[1-3%2]|arr|dave|gpu|gpu-b[001-004,010]|5||2026-11-24T04:00:00|Unknown|Unknown|INVALID|PENDING|0:0|Priority",
]
FR_SEED = {
    "version": "2.4",
    "rank": 0,
    "pg_config": {"0": {"desc": "default_pg"}},
    "pg_status": {
        "0": {"last_enqueued_collective": 11, "last_started_collective": 11, "last_completed_collective": 10}
    },
    "entries": [
        {"collective_seq_id": s, "profiling_name": "nccl:all_reduce", "state": "completed", "pg_id": "0"}
        for s in range(8, 12)
    ],
}


def load_seeds() -> tuple[list[bytes], list[bytes], list[bytes]]:
    """Built-in seeds plus the repository's real-format fixtures when present."""
    kernel = [s.encode() for s in KERNEL_SEEDS]
    try:
        import yaml

        cases = yaml.safe_load((ROOT / "tests" / "fixtures" / "classify_cases.yaml").read_text())["cases"]
        kernel += [c["line"].encode() for c in cases if isinstance(c.get("line"), str)]
    except (OSError, ImportError, KeyError, TypeError):
        pass
    for name in ("dmesg_T.log", "dmesg_iso.log", "dmesg_raw.log"):
        p = ROOT / "tests" / "fixtures" / "real" / name
        if p.is_file():
            kernel += p.read_bytes().splitlines()[:400]
    job = [s.encode() for s in JOB_SEEDS]
    p = ROOT / "tests" / "fixtures" / "real" / "torch_assert.log"
    if p.is_file():
        job += p.read_bytes().splitlines()
    return kernel, job, [s.encode() for s in SACCT_SEEDS]


# --------------------------------------------------------------------------- mutations

INVALID_UTF8 = [b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80\x81", b"\xf8\x88\x80\x80\x80"]


class Mutator:
    def __init__(self, rng: random.Random, kernel: list[bytes], job: list[bytes]):
        self.rng, self.all_lines = rng, kernel + job

    def line(self, ln: bytes) -> bytes:
        r = self.rng
        op = r.randrange(16)
        if not ln:
            return bytes(r.randrange(256) for _ in range(r.randrange(1, 20)))
        i = r.randrange(len(ln))
        if op == 0:  # bit flips
            b = bytearray(ln)
            for _ in range(r.randint(1, 4)):
                j = r.randrange(len(b))
                b[j] ^= 1 << r.randrange(8)
            return bytes(b)
        if op == 1:
            return ln[:i]  # truncated
        if op == 2:
            return ln[:i] + b"\x00" * r.choice([1, 7, 512, 4096]) + ln[i:]
        if op == 3:
            return ln[:i] + b"\r" + ln[i:]
        if op == 4:
            return ln[:i] + r.choice(INVALID_UTF8) + ln[i:]
        if op == 5:  # mixed prefixes: head of one line, tail of another
            other = r.choice(self.all_lines)
            return ln[:i] + other[r.randrange(len(other) + 1) :]
        if op == 6:
            return ln[:i] + bytes(r.randrange(256) for _ in range(r.randint(1, 32))) + ln[i:]
        if op == 7:
            return ln[:i] + b"\x1f" + ln[i:]  # the line splitter's separator byte
        if op == 8:
            return ln[:i] + r.choice([b"9" * 40, b"-1", b"99999999999999999999", b"0" * 19]) + ln[i:]
        if op == 9:  # impossible dates and years
            return ln.replace(b"Nov 24", r.choice([b"Feb 30", b"Dec 31", b"Jan  1", b"Xyz 99"])).replace(
                b"2026", r.choice([b"0000", b"9999", b"1969", b"2027"])
            )
        if op == 10:
            return ln[:i] + b"|" * r.randint(1, 20) + ln[i:]
        if op == 11:
            return ln * r.randint(2, 50)
        if op == 12:
            return ln[:i] + b"\x1b[31m" + ln[i:] + b"\x1b[0m"
        if op == 13:
            return ln.upper() if r.random() < 0.5 else ln.lower()
        if op == 14:
            return b" " * r.randint(1, 10) + ln
        return ln[i:]

    def document(self, seeds: list[bytes], max_lines: int = 120) -> bytes:
        r = self.rng
        lines = [r.choice(seeds) for _ in range(r.randint(0, max_lines))]
        for _ in range(r.randint(0, max(1, len(lines) // 3))):
            if lines:
                j = r.randrange(len(lines))
                lines[j] = self.line(lines[j])
        if lines and r.random() < 0.003:  # now and then a line past the 1 MiB limit (slow)
            j = r.randrange(len(lines))
            lines[j] = lines[j] + b"A" * r.choice([(1 << 20) + 1, 3 << 20])
        sep = r.choice([b"\n"] * 6 + [b"\r\n", b"\r", b"\n\n"])
        doc = sep.join(lines)
        if r.random() < 0.8:
            doc += sep
        if r.random() < 0.05:
            doc = doc.replace(b"\n", b"\r\n", r.randint(1, 5))  # mixed line ends
        return doc


def encode(rng: random.Random, doc: bytes) -> tuple[str, bytes]:
    """Plain most of the time; sometimes gzip or zstd, sometimes cut short."""
    x = rng.random()
    if x < 0.8:
        return ".log", doc
    data = gzip.compress(doc) if x < 0.9 else zstandard.ZstdCompressor().compress(doc)
    suffix = ".log.gz" if x < 0.9 else ".log.zst"
    if rng.random() < 0.3 and data:
        data = data[: rng.randrange(len(data))]
    return suffix, data


# --------------------------------------------------------------------------- checks


def check_result(res, data: bytes | None) -> list[str]:
    problems = []
    if not res.balanced:
        problems.append("imbalance")
    magic = data is not None and data.startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd"))  # sniffed as an archive
    if data is not None and not magic and res.lines_read != physical_lines(data):
        problems.append("line_count")
    ln = res.events["line_no"].to_list()
    if ln != sorted(set(ln)) or (ln and (ln[0] < 1 or ln[-1] > res.lines_read)):
        problems.append("order")
    if res.events.height and int(res.events["line_count"].sum()) != res.event_lines:
        problems.append("event_lines")
    return problems


def signature(res) -> tuple:
    return (
        res.lines_read,
        res.event_lines,
        res.benign,
        res.quarantined,
        tuple(res.events.select("line_no", "category", "line_count").rows()),
        tuple(res.quarantine.select("line_no", "reason").rows()),
    )


class Stats:
    def __init__(self):
        self.c: dict[str, Counter] = {}

    def add(self, target: str, key: str, n: int = 1) -> None:
        self.c.setdefault(target, Counter())[key] += n

    def table(self, seconds: float) -> str:
        cols = ["cases", "lines", "exceptions", "imbalance", "line_count", "order", "event_lines", "batch_mismatch"]
        rows = [["target"] + cols]
        tot = Counter()
        for t, c in sorted(self.c.items()):
            rows.append([t] + [str(c[k]) for k in cols])
            tot.update(c)
        rows.append(["total"] + [str(tot[k]) for k in cols])
        w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out = ["  ".join(x.rjust(w[i]) if i else x.ljust(w[i]) for i, x in enumerate(r)) for r in rows]
        out.insert(1, "-" * len(out[0]))
        out.append(f"seconds: {seconds:.1f}   cases/s: {tot['cases'] / max(seconds, 1e-9):.1f}")
        return "\n".join(out)

    @property
    def failures(self) -> int:
        return sum(
            c[k]
            for c in self.c.values()
            for k in ("exceptions", "imbalance", "line_count", "order", "event_lines", "batch_mismatch")
        )


def save(out: Path, kind: str, data: bytes, note: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{kind}-{int(time.time() * 1e6)}"
    (out / f"{stem}.bin").write_bytes(data)
    (out / f"{stem}.txt").write_text(note)


def fuzz_logs(rng, mut, seeds, stats, out, work: Path, rs, batch: int) -> None:
    """A batch of files through one parse_files call, each checked, and (sometimes) each
    compared with its own single-file parse."""
    items, raw = [], []
    for k in range(batch):
        kind = rng.choice(["kernel", "job"])
        doc = mut.document(seeds[kind])
        suffix, data = encode(rng, doc)
        path = work / f"f{k}{suffix}"
        path.write_bytes(data)
        ref = rng.choice([dt.date(2026, 11, 24), dt.date(2026, 12, 31), dt.date(2027, 1, 1)])
        boots = [dt.datetime(2026, 11, 24, 0, 47, 15, tzinfo=dt.timezone.utc)] if rng.random() < 0.3 else None
        ctx = SourceContext(
            source=path.name,
            kind=kind,
            ref_date=ref,
            node="node-a17" if kind == "kernel" else None,
            job_id="12345" if kind == "job" else None,
            boots=boots,
        )
        items.append((path, ctx))
        raw.append((kind, data, doc if suffix == ".log" else None))
    try:
        results = parse_files(items, rs)
    except Exception:  # noqa: BLE001 - find the file that did it
        for (path, ctx), (kind, data, _) in zip(items, raw):
            try:
                parse_files([(path, ctx)], rs)
            except Exception:  # noqa: BLE001
                stats.add(kind, "exceptions")
                save(out, kind, data, traceback.format_exc())
        return
    single = rng.random() < 0.25
    for (path, ctx), (kind, data, doc), res in zip(items, raw, results):
        stats.add(kind, "cases")
        stats.add(kind, "lines", res.lines_read)
        for p in check_result(res, doc):
            stats.add(kind, p)
            save(
                out,
                kind,
                data,
                f"{p}: lines_read={res.lines_read} event_lines={res.event_lines} "
                f"benign={res.benign} quarantined={res.quarantined} expected_lines="
                f"{physical_lines(doc) if doc is not None else '?'}",
            )
        if single:
            alone = parse_files([(path, ctx)], rs)[0]
            if signature(alone) != signature(res):
                stats.add(kind, "batch_mismatch")
                save(out, kind, data, "parsed alone differs from parsed in a batch")


def fuzz_sacct(rng, mut, seeds, stats, out) -> None:
    lines = [seeds[0]] + [rng.choice(seeds[1:]) for _ in range(rng.randint(0, 60))]
    if rng.random() < 0.1:
        lines = lines[1:]  # no header
    for _ in range(rng.randint(0, 10)):
        j = rng.randrange(len(lines)) if lines else 0
        if lines:
            lines[j] = mut.line(lines[j])
    sep = rng.choice([b"\n", b"\n", b"\r\n"])
    data = sep.join(lines) + (sep if rng.random() < 0.8 else b"")
    stats.add("sacct", "cases")
    try:
        res = parse_sacct(data)
    except Exception:  # noqa: BLE001
        stats.add("sacct", "exceptions")
        save(out, "sacct", data, traceback.format_exc())
        return
    stats.add("sacct", "lines", res.lines_read)
    if not res.balanced:
        stats.add("sacct", "imbalance")
        save(out, "sacct", data, f"imbalance: {res.accounted} lines_read={res.lines_read}")
    want = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    if res.lines_read != len(want) - (want[-1] == b""):
        stats.add("sacct", "line_count")
        save(out, "sacct", data, f"line_count: {res.lines_read}")


def random_json(rng: random.Random, depth: int = 0):
    pick = rng.randrange(9 if depth < 3 else 6)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([0, -1, 7, 2**63 - 1, 2**63, -(2**64), 10**30, True, False])
    if pick == 2:
        return rng.choice([0.5, 1e308, -0.0, 3.0, float(2**70)])
    if pick == 3:
        return rng.choice(["", "0", "completed", "started", "nccl:all_reduce", "x" * 300, "\x00", "12"])
    if pick == 4:
        return rng.randrange(-5, 20)
    if pick == 5:
        return str(rng.randrange(-5, 20))
    if pick == 6:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        rng.choice(
            [
                "0",
                "1",
                "rank",
                "entries",
                "pg_status",
                "state",
                "collective_seq_id",
                "pg_id",
                "last_completed_collective",
                "desc",
            ]
        ): random_json(rng, depth + 1)
        for _ in range(rng.randrange(4))
    }


def mutate_dump(rng: random.Random) -> dict:
    """The seed dump with a few values (at any depth) replaced by random JSON."""
    dump = json.loads(json.dumps(FR_SEED))
    for _ in range(rng.randint(1, 4)):
        node, key = dump, None
        for _ in range(rng.randint(1, 4)):
            keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
            if not keys:
                break
            key = rng.choice(keys)
            if isinstance(node[key], (dict, list)) and rng.random() < 0.7:
                node = node[key]
                key = None
            else:
                break
        if key is not None:
            node[key] = random_json(rng)
    return dump


def fuzz_flight_recorder(rng, mut, stats, out) -> None:
    """load_dump raises only FlightRecorderError; what it accepts, the pipeline can summarize
    (rank taken from the dump as ingest.partition does)."""
    if rng.random() < 0.5:
        doc = json.dumps(FR_SEED).encode()
        for _ in range(rng.randint(1, 6)):
            doc = mut.line(doc)
    else:
        doc = json.dumps(mutate_dump(rng)).encode()
    stats.add("flight_recorder", "cases")
    try:
        dump = load_dump(doc)
    except FlightRecorderError:
        return
    except Exception:  # noqa: BLE001
        stats.add("flight_recorder", "exceptions")
        save(out, "flight_recorder", doc, traceback.format_exc())
        return
    rank = dump.get("rank")
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else 0
    try:
        summarize_dumps({rank: dump})
    except Exception:  # noqa: BLE001
        stats.add("flight_recorder", "exceptions")
        save(out, "flight_recorder", doc, "summarize_dumps: " + traceback.format_exc())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--batch", type=int, default=8, help="files per parse_files call")
    ap.add_argument(
        "--out", default=os.path.join(tempfile.gettempdir(), "faultline-fuzz"), help="where failing inputs are saved"
    )
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    kernel, job, sacct = load_seeds()
    mut = Mutator(rng, kernel, job)
    rs = load_ruleset()
    stats, out = Stats(), Path(args.out)
    print(
        f"fuzzing for {args.seconds:.0f} s, seed {seed}, {len(kernel)} kernel / {len(job)} job / "
        f"{len(sacct)} sacct seed lines; failing inputs go to {out}",
        flush=True,
    )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="faultline-fuzz-") as tmp:
        work = Path(tmp)
        while time.perf_counter() - t0 < args.seconds:
            x = rng.random()
            if x < 0.3:
                fuzz_logs(rng, mut, {"kernel": kernel, "job": job}, stats, out, work, rs, args.batch)
            elif x < 0.7:
                fuzz_sacct(rng, mut, sacct, stats, out)
            else:
                fuzz_flight_recorder(rng, mut, stats, out)
    print(stats.table(time.perf_counter() - t0))
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())
