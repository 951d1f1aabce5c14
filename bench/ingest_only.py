"""The pipeline's ingest alone: ``run_pipeline`` (Dagster range runs, lake writes, checks, the
view file) without the analytics and the report. Prints one JSON line.
Usage: python bench/ingest_only.py LANDING WAREHOUSE [--workers N]"""

from __future__ import annotations

import argparse
import json
import time

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("landing")
    ap.add_argument("warehouse")
    ap.add_argument("--workers", type=int, default=None)
    a = ap.parse_args()
    from faultline.launch.local import run_pipeline

    t0 = time.perf_counter()
    s = run_pipeline(a.landing, a.warehouse, analytics=False, workers=a.workers)
    print(
        json.dumps(
            {
                "partitions": s["partitions"],
                "files": s["files"],
                "lines": s["lines"],
                "seconds": time.perf_counter() - t0,
            }
        )
    )
