"""Score the attribution on the real failed-job outputs (``tests/fixtures/jobs/<split>/``):
each case through ``faultline diagnose`` and through the nightly pipeline on a landing folder
of one partition per case, against the case's root cause and culprit and each other."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from click.testing import CliRunner

from .diagnose import UNTIMED_NOTE

PROVIDER = "eval"
KERNEL_NODE = "node01"  # the node a case's kernel.log lands as (no case's culprit)
FIRST_JOB_ID = 7000


@dataclass
class Case:
    name: str
    folder: Path
    root_cause: str
    culprit_node: str | None
    culprit_rank: int | None
    job_files: list[Path]
    kernel_files: list[Path]


def load(folder: str | os.PathLike) -> list[Case]:
    """The cases of one split folder, in ``cases.jsonl`` order."""
    folder = Path(folder)
    cases = []
    for line in (folder / "cases.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        c = json.loads(line)
        files = c["files"]
        cases.append(
            Case(
                c["case"],
                folder / c["case"],
                c["root_cause"],
                c.get("culprit_node"),
                c.get("culprit_rank"),
                [folder / c["case"] / f for f, kind in files.items() if kind == "job"],
                [folder / c["case"] / f for f, kind in files.items() if kind == "kernel"],
            )
        )
    return cases


def diagnose_args(case: Case, ref_date: dt.date | None = None) -> list[str]:
    args = ["diagnose", *map(str, case.job_files)]
    for k in case.kernel_files:
        args += ["--kernel", str(k)]
    if case.kernel_files:
        args += ["--node", KERNEL_NODE]
    if ref_date is not None:
        args += ["--date", ref_date.isoformat()]
    return [*args, "--format", "json"]


def run_diagnose(case: Case, ref_date: dt.date | None = None) -> dict:
    """``faultline diagnose ... --format json`` on the case's files, in-process."""
    from ..cli import main

    res = CliRunner().invoke(main, diagnose_args(case, ref_date), catch_exceptions=False)
    if res.exit_code != 0:
        raise RuntimeError(f"faultline diagnose failed on {case.name}: {res.output.strip()}")
    return json.loads(res.stdout)


def _sacct_time(iso: str | None) -> str:
    return iso[:19] if iso else "Unknown"


def write_landing(root: Path, case: Case, job_id: int, window: dict) -> dt.date:
    """``eval/<case>/<day>/``: a FAILED sacct row with the times diagnose read, the output as
    ``jobs/<id>/slurm-<id>.out`` and a kernel.log as ``kernel/node01.log``; returns the day
    (the job's end). bench/README.md, ``eval_jobs.py``, says why."""
    day = dt.date.fromisoformat(window["ended"][:10])
    part = root / PROVIDER / case.name / day.isoformat()
    (part / "slurm").mkdir(parents=True, exist_ok=True)
    jobs = part / "jobs" / str(job_id)
    jobs.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(case.job_files):
        name = f"slurm-{job_id}.out" if i == 0 else f.name
        (jobs / name).write_bytes(f.read_bytes())
    nodes = []
    if case.kernel_files:
        (part / "kernel").mkdir(exist_ok=True)
        (part / "kernel" / f"{KERNEL_NODE}.log").write_bytes(b"".join(k.read_bytes() for k in case.kernel_files))
        nodes = [KERNEL_NODE]
    start, end = _sacct_time(window["started"]), _sacct_time(window["ended"])
    elapsed = dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)
    secs = max(int(elapsed.total_seconds()), 0)
    (part / "slurm" / "sacct.txt").write_text(
        "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason\n"
        f"{job_id}|{case.name[:40]}|eval|gpu|{','.join(nodes) or 'None assigned'}|{len(nodes)}|cpu=1|"
        f"{start}|{start}|{end}|{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}|FAILED|1:0|None\n"
    )
    with open(root / "inventory.csv", "a") as inv:
        for n in nodes:
            inv.write(f"{PROVIDER},{case.name},r1,{n},8\n")
    return day


def run_nightly(landing: Path, warehouse: Path) -> pl.DataFrame:
    """``faultline run`` over the landing folder; its ``job_failures`` table."""
    cmd = [sys.executable, "-m", "faultline.cli", "run", "--landing", str(landing), "--warehouse", str(warehouse)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"faultline run failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}")
    return pl.read_parquet(warehouse / "analytics" / "job_failures.parquet")


_IP = re.compile(r"\d+(?:\.\d+){3}")


def same_node(pred: str | None, truth: str) -> bool:
    """Node names match, case-insensitively; a host name also by its first label (FQDN)."""
    if pred is None:
        return False
    a, b = pred.lower(), truth.lower()
    short = lambda x: x if _IP.fullmatch(x) else x.split(".")[0]  # noqa: E731
    return a == b or short(a) == short(b)


def culprit_ok(case: Case, node: str | None, rank: int | None) -> bool | None:
    """Whether every culprit field the case knows is right; None when it knows none."""
    if case.culprit_node is None and case.culprit_rank is None:
        return None
    ok = case.culprit_node is None or same_node(node, case.culprit_node)
    return ok and (case.culprit_rank is None or rank == case.culprit_rank)


def evaluate(folder: str | os.PathLike, workdir: str | os.PathLike) -> list[dict]:
    """One row per case: the truth, diagnose's verdict and the nightly verdict."""
    cases = load(folder)
    work = Path(workdir)
    landing, warehouse = work / "landing", work / "warehouse"
    landing.mkdir(parents=True, exist_ok=True)
    (landing / "inventory.csv").write_text("provider,cluster,rack,node,gpus\n")
    days, failed = {}, set()
    for i, case in enumerate(cases):
        try:  # its job window gives the partition day and the sacct times
            first = run_diagnose(case)
        except RuntimeError:
            failed.add(case.name)
            continue
        days[case.name] = write_landing(landing, case, FIRST_JOB_ID + i, first["job"])
    nightly = run_nightly(landing, warehouse)
    by_case = {r["cluster"]: r for r in nightly.iter_rows(named=True)}
    none = dict.fromkeys(("root_cause", "culprit_node", "culprit_rank", "decided_by"))
    rows = []
    for case in cases:
        d = none if case.name in failed else run_diagnose(case, days[case.name])
        n = by_case.get(case.name, {})
        rows.append(
            {
                "case": case.name,
                "truth": case.root_cause,
                "diagnose": d["root_cause"],
                "nightly": n.get("root_cause"),
                "diagnose_culprit": culprit_ok(case, d["culprit_node"], d["culprit_rank"]),
                "nightly_culprit": culprit_ok(case, n.get("culprit_node"), n.get("culprit_rank")),
                # where diagnose read kernel lines without a time (the nightly run cannot), None
                "agree": None
                if any(UNTIMED_NOTE in x for x in d.get("notes", ()))
                else (d["root_cause"], d["culprit_node"], d["culprit_rank"])
                == (n.get("root_cause"), n.get("culprit_node"), n.get("culprit_rank")),
                "decided_by": d["decided_by"],
                "culprit": (d["culprit_node"], d["culprit_rank"]),
                "truth_culprit": (case.culprit_node, case.culprit_rank),
                "failed": case.name in failed,
            }
        )
    return rows


def score(rows: list[dict]) -> dict:
    """Root-cause accuracy, culprit accuracy where the case knows one, unknown share, per path;
    and the share of cases where both paths gave the same verdict (of those both could read)."""

    def share(xs) -> float | None:
        xs = list(xs)
        return round(sum(xs) / len(xs), 3) if xs else None

    out = {
        "cases": len(rows),
        "culprit_cases": sum(r["diagnose_culprit"] is not None for r in rows),
        "diagnose_failed": sum(r["failed"] for r in rows),
    }
    for path in ("diagnose", "nightly"):
        out[path] = {
            "root_cause": share(r[path] == r["truth"] for r in rows),
            "culprit": share(r[f"{path}_culprit"] for r in rows if r[f"{path}_culprit"] is not None),
            "unknown_share": share(r[path] == "unknown" for r in rows),
        }
    out["agree"] = share(r["agree"] for r in rows if r["agree"] is not None)
    return out


#: the dev split's figures as reached, for both paths (unknown_share: at most); the goal is
#: 0.90 root cause and 0.90 culprit. tests/system/test_job_cases.py holds them.
DEV_FLOORS = {"root_cause": 0.767, "culprit": 0.667, "unknown_share": 0.090, "agree": 1.0}


def misses(s: dict, floors: dict = DEV_FLOORS) -> list[str]:
    """The figures of ``score`` that miss their floor, as text."""
    out = []
    for path in ("diagnose", "nightly"):
        for k in ("root_cause", "culprit", "unknown_share"):
            v, f = s[path][k], floors[k]
            if v is None or (v > f if k == "unknown_share" else v < f):
                out.append(f"{path} {k} {v} (floor {f})")
    if s["diagnose_failed"]:
        out.append(f"faultline diagnose failed on {s['diagnose_failed']} case(s)")
    if s["agree"] < floors["agree"]:
        out.append(f"agree {s['agree']} (floor {floors['agree']})")
    return out
