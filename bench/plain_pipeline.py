"""The ingest's own work without Dagster: the runs ``faultline run`` would make, each doing what its
Dagster steps do with the same plain functions, in plain worker processes, so that Dagster's share
of the overhead can be told apart from the lake's. Usage: python bench/plain_pipeline.py LANDING WAREHOUSE"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bare_parse import per_partition  # noqa: E402

_RS = None


def run(landing: str, warehouse: str, parts: list) -> list[dict]:
    """One of ``faultline run``'s range runs without Dagster: the steps of ``raw_landing``,
    ``core_inventory``, ``core_events``, ``core_jobs`` and the reads of ``lines_balanced``,
    ``lake_schema`` and ``lake_fresh``, each over every partition of the run, in that order."""
    global _RS
    from faultline.classify.ruleset import load_ruleset
    from faultline.ingest import landing as landing_mod
    from faultline.ingest import partition as ingest
    from faultline.lake import files as lake
    from faultline.lake import writer as lake_writer

    if _RS is None:
        _RS = load_ruleset()
    keys = [(p.provider, p.cluster, p.date) for p in parts]
    stats = []
    with lake_writer.PartitionWriter(warehouse) as out:
        for key in keys:
            t = ingest.ingest_partition(landing, *key, _RS)
            out.write(
                {
                    "raw_kernel_events": t.kernel_events,
                    "raw_job_events": t.job_events,
                    "raw_slurm_jobs": t.jobs,
                    "steps": t.steps,
                    "flight_recorder": t.flight,
                    "ingest_audit": t.audit,
                    "quarantine": t.quarantine,
                },
                *key,
            )
            stats.append({"files": t.audit.height, "lines": int(t.audit["lines_read"].sum())})
    inv = landing_mod.read_inventory(landing)
    with lake_writer.PartitionWriter(warehouse) as out:
        for key in keys:
            out.write({"inventory": inv.filter((inv["provider"] == key[0]) & (inv["cluster"] == key[1]))}, *key)
    read = lambda table, key: lake_writer.read(warehouse, table, *key)  # noqa: E731
    with lake_writer.PartitionWriter(warehouse) as out:
        for key in keys:
            out.write({"events": ingest.core_events(read("raw_kernel_events", key), read("raw_job_events", key))}, *key)
    with lake_writer.PartitionWriter(warehouse) as out:
        for key in keys:
            out.write(
                {
                    "jobs": ingest.core_jobs(
                        read("raw_slurm_jobs", key), read("steps", key), read("flight_recorder", key)
                    )
                },
                *key,
            )
    for part, key in zip(parts, keys):
        read("ingest_audit", key)
        for table in (
            "raw_kernel_events",
            "raw_job_events",
            "raw_slurm_jobs",
            "steps",
            "flight_recorder",
            "ingest_audit",
            "quarantine",
            "events",
            "jobs",
            "inventory",
        ):
            lake.file_schema(warehouse, table, *key)
        landing_mod.fingerprint(landing, part)
    return stats


def plain_pipeline(landing: str, warehouse: str, workers: int) -> dict:
    from faultline.launch.local import batches, select_partitions

    t0 = time.perf_counter()
    parts = select_partitions(landing)
    runs = batches(parts, workers)  # the runs ``faultline run`` would make
    rows, workers = per_partition(run, [(landing, warehouse, r) for r in runs], workers)
    from faultline.lake import compact
    from faultline.lake import views as view_file

    compact.compact(warehouse)  # what ``launch.local.finish`` does after the runs
    view_file.build(warehouse)
    out = {"partitions": len(parts), "runs": len(runs), "workers": workers, "seconds": time.perf_counter() - t0}
    for k in ("files", "lines"):
        out[k] = sum(st[k] for stats in rows for st in stats)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("landing")
    ap.add_argument("warehouse")
    ap.add_argument("--workers", type=int, default=None, help="default: FAULTLINE_WORKERS, else the CPU count (max 8)")
    a = ap.parse_args()
    from faultline.launch.local import default_workers

    print(
        json.dumps(
            plain_pipeline(os.path.abspath(a.landing), os.path.abspath(a.warehouse), a.workers or default_workers())
        )
    )
