"""The bare parse of a landing folder: ``ingest_partition`` for every partition, in worker
processes like the pipeline's, with no Dagster and no lake writes. Prints one JSON line.
Usage: python bench/bare_parse.py LANDING [--workers N]"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

_RS = None


def parse_one(landing: str, provider: str, cluster: str, date: str) -> dict:
    """One partition, parsed and tabled; only its counts travel back."""
    global _RS
    from faultline.classify.ruleset import load_ruleset
    from faultline.ingest.partition import ingest_partition

    if _RS is None:
        _RS = load_ruleset()
    t = ingest_partition(landing, provider, cluster, date, _RS)
    return {
        "files": t.audit.height,
        "lines": int(t.audit["lines_read"].sum()),
        "bytes": int(t.audit["bytes"].sum()),
        "events": t.kernel_events.height + t.job_events.height,
        "event_lines": int(t.audit.filter(t.audit["kind"] != "sacct")["event_lines"].sum()),
    }


def per_partition(fn, jobs: list[tuple], workers: int) -> tuple[list, int]:
    """``fn(*job)`` for every job, on up to ``workers`` spawned processes (as the pipeline
    starts its workers: polars threads do not survive fork). Returns (results, workers)."""
    workers = max(1, min(workers, len(jobs) or 1))
    if workers == 1:
        return [fn(*j) for j in jobs], 1
    # as faultline run: the CPUs shared out between the processes (ingest.pool)
    os.environ.setdefault("FAULTLINE_PARSE_WORKERS", str(max(1, (os.cpu_count() or 1) // workers)))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(fn, *zip(*jobs))), workers


def bare_parse(landing: str, workers: int) -> dict:
    from faultline.ingest.landing import discover

    t0 = time.perf_counter()
    parts = discover(landing).partitions
    rows, workers = per_partition(parse_one, [(landing, p.provider, p.cluster, p.date) for p in parts], workers)
    out = {"partitions": len(parts), "workers": workers, "seconds": time.perf_counter() - t0}
    for k in ("files", "lines", "bytes", "events", "event_lines"):
        out[k] = sum(r[k] for r in rows)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("landing")
    ap.add_argument("--workers", type=int, default=None, help="default: FAULTLINE_WORKERS, else the CPU count (max 8)")
    a = ap.parse_args()
    from faultline.launch.local import default_workers

    print(json.dumps(bare_parse(os.path.abspath(a.landing), a.workers or default_workers())))
