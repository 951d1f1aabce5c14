"""The demo warehouse as `faultline demo` builds it (default scenario and seed), once per test
session: the folder, what the command printed, and how long it took."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner


def demo_warehouse(base: Path) -> tuple[Path, Path, str, float]:
    """(work folder, warehouse, the command's stdout and stderr, seconds) of `faultline demo`
    run in ``base`` (reused when ``base`` already holds one)."""
    from faultline.cli import main

    base.mkdir(parents=True, exist_ok=True)
    wh, marker = base / "warehouse", base / "demo.json"
    if marker.is_file() and (wh / "faultline.duckdb").is_file():
        done = json.loads(marker.read_text())
        return base, wh, done["output"], done["seconds"]
    cwd = os.getcwd()
    os.chdir(base)  # the demo's defaults: ./demo and ./warehouse
    try:
        started = time.perf_counter()
        res = CliRunner().invoke(main, ["demo"], catch_exceptions=False)
        seconds = time.perf_counter() - started
    finally:
        os.chdir(cwd)
    assert res.exit_code == 0, res.output
    # the demo's own Dagster instance is for that command only: a later run in this process
    # (a killed child's claim on the writer pool in it) must not find it
    assert "DAGSTER_HOME" not in os.environ
    marker.write_text(json.dumps({"output": res.output, "seconds": seconds}))
    return base, wh, res.output, seconds


#: the lottery month of the browser test: the scenario's 5 providers and 30 days on 160 of its
#: 512 nodes (the full month takes about 6 minutes to simulate and ingest on 2 cores)
LOTTERY = {"scenario": "lottery", "nodes": 160, "days": 30, "seed": 0}


def lottery_warehouse(base: Path) -> Path:
    """The ``LOTTERY`` month simulated and run under ``base``, once."""
    from faultline.launch.local import run_pipeline
    from faultline.simulate import simulate

    wh, marker = base / "warehouse", base / "lottery.json"
    if marker.is_file() and (wh / "faultline.duckdb").is_file():
        return wh
    simulate(base / "landing", overwrite=True, **LOTTERY)
    run_pipeline(base / "landing", wh)
    marker.write_text(json.dumps(LOTTERY))
    return wh
