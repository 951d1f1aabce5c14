"""Write one cluster-day landing folder for the event-density sweep or the flood day.

    python bench/density_day.py OUT --density 0.1 [--nodes 1024] [--mb 1024]
    python bench/density_day.py OUT --flood [--nodes 32]

The density day's lines are real kernel messages of the corpus's dev split under a syslog
prefix with the node's name; ``--density`` is the share of lines drawn from those faultline
makes events of, 2% from benign ones holding an error word, the rest from other benign ones. The flood day holds 800,000 Xid 95
lines from one GPU in 20 minutes and, after one NVLink Xid 74, 150,000 Xid 45 lines on the
job's three nodes (the faulting one naming the Xid 74), among ordinary noise. Prints one JSON line (files, lines, bytes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl

DAY = dt.date(2026, 11, 24)
PROVIDER, CLUSTER = "bench", "c1"
NOISY_SHARE = 0.02  # benign lines that hold an error word (the prefilter hands them to the rules)
XID95 = "NVRM: Xid (PCI:0000:5d:00): 95, pid={pid}, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No"
XID74 = (
    "NVRM: Xid (PCI:0000:3b:00): 74, pid={pid}, name=python3, NVLink: fatal error detected on link 14"
    "(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
)
XID45_CAUSED = "NVRM: Xid (PCI:0000:{bus}:00): 45, pid={pid}, name=python3, Ch 0000000{ch} caused by previous Xid 74"
XID45 = "NVRM: Xid (PCI:0000:{bus}:00): 45, pid={pid}, name=python3, Ch 0000000{ch}"


def corpus_messages() -> tuple[list[str], list[str], list[str]]:
    """Messages of the dev split's kernel lines, prefixes removed: (events, benign lines the
    prefilter passes over, benign lines it hands to the rules)."""
    from faultline.classify import corpus
    from faultline.ingest.prefix import split_prefix

    rows = [r for r in corpus.load("dev") if r["kind"] == "kernel" and not r["context"]]
    df = pl.DataFrame({"raw": [r["text"] for r in rows], "cat": [r["category"] for r in rows]})
    df = df.with_columns(msg=split_prefix(pl.col("raw")).struct.field("msg")).with_columns(
        msg=pl.coalesce("msg", "raw").str.strip_chars()
    )
    df = df.filter(pl.col("msg").str.len_bytes().is_between(20, 400)).unique("msg", maintain_order=True)
    # by faultline's own verdict, so that --density is the share of lines that become events
    from faultline.classify.engine import classify_messages
    from faultline.classify.ruleset import load_ruleset

    verdict = classify_messages(df["msg"], load_ruleset())
    df = df.with_columns(event=(verdict["category"] != "benign") | verdict["keep"], cand=verdict["cand"])
    benign = df.filter(~pl.col("event"))
    return (
        df.filter("event")["msg"].to_list(),
        benign.filter(~pl.col("cand"))["msg"].to_list(),
        benign.filter("cand")["msg"].to_list(),
    )


def _syslog(node: str, secs: np.ndarray, msgs: list[str] | np.ndarray) -> pl.Series:
    base = dt.datetime(DAY.year, DAY.month, DAY.day)
    start = np.datetime64(base)
    stamps = pl.Series((start + np.asarray(secs, dtype="timedelta64[ms]")).astype("datetime64[ms]"))
    frame = pl.DataFrame({"t": stamps, "m": pl.Series(msgs, dtype=pl.String)})
    return frame.select(
        (pl.col("t").dt.strftime("%b %e %H:%M:%S") + pl.lit(f" {node} kernel: ") + pl.col("m")).alias("line")
    )["line"]


def _write(path: Path, lines: pl.Series) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines.to_list()) + "\n").encode()
    path.write_bytes(data)
    return len(data)


def _inventory(root: Path, nodes: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    rows = [f"{PROVIDER},{CLUSTER},r{i // 32:03d},{n},8,H100-SXM5-80GB,leaf-{i // 32}" for i, n in enumerate(nodes)]
    (root / "inventory.csv").write_text(
        "provider,cluster,rack,node,gpus,gpu_model,leaf_switch\n" + "\n".join(rows) + "\n"
    )


def density_day(out: Path, density: float, nodes: int, mb: int, seed: int = 0) -> dict:
    fail, quiet, noisy = corpus_messages()
    rng = np.random.default_rng(seed)
    names = [f"node-{i:04d}" for i in range(nodes)]
    day = out / PROVIDER / CLUSTER / DAY.isoformat() / "kernel"
    _inventory(out, names)
    per_node = mb * 2**20 // nodes
    avg = 40 + np.mean([len(m) for m in quiet + fail])
    n_lines = max(1, int(per_node / avg))
    total = lines = 0
    pools = [np.array(p, dtype=object) for p in (fail, noisy, quiet)]
    for node in names:
        u = rng.random(n_lines)  # events, then benign lines that look like errors, then the rest
        kind = np.where(u < density, 0, np.where(u < density + NOISY_SHARE, 1, 2))
        msgs = np.empty(n_lines, dtype=object)
        for k, pool in enumerate(pools):
            sel = kind == k
            msgs[sel] = pool[rng.integers(0, len(pool), int(sel.sum()))]
        secs = np.sort(rng.integers(0, 86_400_000, n_lines))
        total += _write(day / f"{node}.log", _syslog(node, secs, msgs))
        lines += n_lines
    return {"files": nodes, "lines": lines, "bytes": total, "density": density}


def flood_day(out: Path, nodes: int, seed: int = 0, scale: float = 1.0) -> dict:
    _fail, benign, _noisy = corpus_messages()
    rng = np.random.default_rng(seed)
    names = [f"node-{i:04d}" for i in range(nodes)]
    day = out / PROVIDER / CLUSTER / DAY.isoformat() / "kernel"
    _inventory(out, names)
    benign_a = np.array(benign, dtype=object)
    total = lines = 0
    for i, node in enumerate(names):
        n = 6_000
        secs = list(rng.integers(0, 86_400_000, n))
        msgs = list(benign_a[rng.integers(0, len(benign_a), n)])
        if i == 0:  # one GPU's uncontained-ECC flood: 800,000 lines in 20 minutes from 03:00
            k = int(800_000 * scale)
            secs += list(10_800_000 + np.sort(rng.integers(0, 1_200_000, k)))
            msgs += [XID95.format(pid=20412)] * k  # one process on the failing GPU
        if i in (1, 2, 3):  # one NVLink fault, then the job's three nodes print Xid 45 storms
            if i == 1:
                secs.append(18_000_000)
                msgs.append(XID74.format(pid=4242))
            k = int(50_000 * scale)
            secs += list(18_000_500 + np.sort(rng.integers(0, 600_000, k)))
            buses = rng.choice(["3b", "5d", "9a", "ba"], k)
            tpl = XID45_CAUSED if i == 1 else XID45  # the faulting node names its Xid; the others clean up
            msgs += [tpl.format(bus=b, pid=4242, ch=c) for b, c in zip(buses, rng.integers(1, 9, k))]
        order = np.argsort(np.asarray(secs), kind="stable")
        total += _write(
            day / f"{node}.log", _syslog(node, np.asarray(secs)[order], np.asarray(msgs, dtype=object)[order])
        )
        lines += len(secs)
    return {"files": nodes, "lines": lines, "bytes": total, "flood": True}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--density", type=float, default=0.1, help="share of lines that are events")
    ap.add_argument("--nodes", type=int, default=None, help="node files (default 1024; 32 with --flood)")
    ap.add_argument("--mb", type=int, default=1024, help="approximate size of the day")
    ap.add_argument("--flood", action="store_true", help="the flood day instead of a density day")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="flood day: share of its flood lines to write")
    a = ap.parse_args(argv)
    if a.flood:
        res = flood_day(a.out, a.nodes or 32, a.seed, a.scale)
    else:
        res = density_day(a.out, a.density, a.nodes or 1024, a.mb, a.seed)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
