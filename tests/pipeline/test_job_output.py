"""Job output as schedulers write it, in a landing partition: every name and compression read,
and its lines counted for the job whatever their stamps. The outputs are real failed jobs'
(tests/fixtures/jobs/dev/)."""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path

import polars as pl
import pytest
import zstandard
from helpers.landing import write

from faultline.analytics.build import compute
from faultline.analytics.rates import covered_days
from faultline.ingest.landing import read_inventory
from faultline.ingest.partition import ingest_partition

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "jobs" / "dev"
DAY = "2026-11-24"
ROW = "{id}|train|alice|gpu|n1|1|cpu=8,gres/gpu=8,node=1|{day}T01:00:00|{day}T01:00:00|{day}T03:24:30|02:24:30|FAILED|1:0|None\n"


def case(name: str) -> bytes:
    return (CASES / name / "output.log").read_bytes()


# job id -> (file under jobs/<id>/, content, expected root cause)
JOBS = {
    "500": ("slurm-500.out", case("kohya-1434-ecc-2xh100-watchdog"), "gpu_memory"),
    "501_3": ("slurm-501_3.out", case("msswift-8371-device-assert-watchdog-rank11"), "user_app"),
    "502": ("train.err", case("colossalai-5798-ckpt-write-failed"), "storage"),
    "503": ("stdout.txt.gz", gzip.compress(case("nccltests-252-ib-completion-error4")), "network"),
    "504": (
        "slurm-504.out.zst",
        zstandard.ZstdCompressor().compress(case("chatglm3-681-ecc-persists-after-restart")),
        "gpu_memory",
    ),
    # stamped 2024-11-20, two years before the job's end in sacct
    "505": ("slurm-505.log", case("qwen3coder-174-cuda-oom-timestamped-rank3"), "user_app"),
}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    root = tmp_path_factory.mktemp("landing")
    day = root / "acme" / "c1" / DAY
    write(root / "inventory.csv", "provider,cluster,rack,node,gpus\nacme,c1,r1,n1,8\n")
    header = "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason\n"
    write(day / "slurm" / "sacct.txt", header + "".join(ROW.format(id=j, day=DAY) for j in JOBS))
    for job_id, (name, data, _cause) in JOBS.items():
        write(day / "jobs" / job_id / name, data)
    write(day / "jobs" / "500" / "notes.md", "not job output\n")
    pt = ingest_partition(root, "acme", "c1", DAY)
    days = covered_days([("acme", "c1", dt.date.fromisoformat(DAY))])
    return pt, compute(pt.events, pt.jobs, pt.flight, read_inventory(root), days)


def test_every_scheduler_output_name_is_read_as_the_jobs_output(ingested):
    pt, _tables = ingested
    audit = {s.split("/", 3)[3]: k for s, k in pt.audit.select("source", "kind").iter_rows()}
    for job_id, (name, _data, _cause) in JOBS.items():
        assert audit[f"jobs/{job_id}/{name}"] == "job", name
    q = dict(pt.quarantine.select("source", "reason").iter_rows())
    assert q == {f"acme/c1/{DAY}/jobs/500/notes.md": "unexpected_file"}
    got = pt.events.filter(pl.col("job_id").is_not_null()).group_by("job_id").agg(pl.len())
    assert set(got["job_id"]) == set(JOBS)


def test_job_output_lines_count_whatever_their_stamps(ingested):
    pt, tables = ingested
    f = {r["job_id"]: r for r in tables["job_failures"].iter_rows(named=True)}
    assert {j: f[j]["root_cause"] for j in JOBS} == {j: cause for j, (_n, _d, cause) in JOBS.items()}
    # kohya's traceback has no stamp at all: its lines count at the job's end, and the watchdog's
    # re-raise of the ECC error names the rank
    ev = pt.events.filter(pl.col("job_id") == "500")
    assert ev["ts"].null_count() == ev.height
    assert (f["500"]["decided_by"], f["500"]["culprit_rank"], f["500"]["culprit_node"]) == (
        "job:cuda_ecc_uncorrectable",
        1,
        "n1",
    )
    assert f["500"]["evidence"].startswith(f"[{DAY}T03:24:30Z] n1 ")
    # qwen3coder's lines are stamped two years before the job's end
    assert pt.events.filter(pl.col("job_id") == "505")["ts"].dt.year().unique().to_list() == [2024]
    assert f["505"]["decided_by"] == "job:cuda_out_of_memory"
