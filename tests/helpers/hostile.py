"""A small simulated warehouse whose landing folder carries hostile strings (markup, terminal
escapes, bidi controls) in job names, users, log lines, node and rack names."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from pathlib import Path

from faultline.lake import views as W

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
ANSI = "\x1b[31m"
BIDI = "\u202e"
HOSTILE = f"{SCRIPT}{IMG}{ANSI}red{BIDI}evil"
HOSTILE_NODE = f"n{IMG}{ANSI}{BIDI}"
HOSTILE_RACK = f"r{SCRIPT}"


def _inject(landing: Path) -> dict:
    """Put hostile strings where logs, Slurm and the inventory carry free text."""
    import polars as pl

    from faultline.ingest.hostlist import expand_hostlist

    lemons = set(pl.read_parquet(landing / "_truth" / "lemons.parquet")["node"].to_list())
    truth = pl.read_parquet(landing / "_truth" / "jobs.parquet")
    # a job the scheduler ended: its log holds no error of its own that would decide before the Xid
    ended = set(truth.filter(pl.col("root_cause") == "scheduler")["job_id"].to_list())
    day_dir = sorted((landing / "northwind" / "a1").iterdir())[-1]
    sacct = day_dir / "slurm" / "sacct.txt"
    lines = sacct.read_text().splitlines()
    head = lines[0].split("|")
    col = {c: i for i, c in enumerate(head)}
    victims = []
    for i, line in enumerate(lines[1:], 1):
        f = line.split("|")
        if "." in f[col["JobID"]] or f[col["State"]].split(" ")[0] in ("COMPLETED", "RUNNING", "PENDING"):
            continue
        if not f[col["End"]] or f[col["End"]] == "Unknown":
            continue
        if lemons & set(expand_hostlist(f[col["NodeList"]])):  # a lemon's own faults would decide
            continue
        if f[col["JobID"]] not in ended:
            continue
        f[col["JobName"]] = "job" + HOSTILE
        f[col["User"]] = "u" + IMG + ANSI + BIDI
        lines[i] = "|".join(f)
        victims.append((f[col["JobID"]], expand_hostlist(f[col["NodeList"]])[0], f[col["End"]]))
        if len(victims) == 2:
            break
    sacct.write_text("\n".join(lines) + "\n")
    for _job_id, node, end in victims:
        t = dt.datetime.fromisoformat(end) - dt.timedelta(seconds=90)
        stamp = f"{t:%b} {t.day:2d} {t:%H:%M:%S} {node} kernel: [{t.hour * 3600 + t.minute * 60 + t.second}.000000]"
        with open(day_dir / "kernel" / f"{node}.log", "a", encoding="utf-8") as fh:
            fh.write(f"{stamp} NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name={HOSTILE}, GPU has fallen off the bus.\n")
            fh.write(f"{stamp} zzdrv 0000:3b:00.0: fatal error in firmware {HOSTILE}\n")
    inv = landing / "inventory.csv"
    rows = list(csv.reader(io.StringIO(inv.read_text())))
    extra = dict.fromkeys(rows[0], "")
    extra.update(
        provider="northwind",
        cluster="a1",
        rack=HOSTILE_RACK,
        node=HOSTILE_NODE,
        gpus="8",
        gpu_model="H100" + SCRIPT,
        leaf_switch="leaf" + IMG,
    )
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerows(rows)
    w.writerow([extra[c] for c in rows[0]])
    inv.write_text(out.getvalue())
    return {"jobs": [v[0] for v in victims], "nodes": [v[1] for v in victims], "day": day_dir.name}


def build_demo_warehouse(base: Path) -> tuple[Path, dict]:
    """Simulate, inject, run the pipeline, analytics and views once under ``base``."""
    wh = base / "warehouse"
    marker = base / "injected.json"
    if (wh / "faultline.duckdb").is_file() and marker.is_file():
        return wh, json.loads(marker.read_text())
    from faultline.analytics.build import build_analytics
    from faultline.launch.local import run_pipeline
    from faultline.simulate import simulate

    landing = base / "landing"
    simulate(landing, scenario="demo", seed=1, nodes=24, days=3, overwrite=True)
    info = _inject(landing)
    run_pipeline(landing, wh)
    build_analytics(wh, prices=landing / "prices.csv")
    report = W.build(wh)
    assert not report.errors, report.errors
    marker.write_text(json.dumps(info))
    return wh, info
