"""Schemas of the lake tables that ``schema.py`` does not define, and of every lake table.

Every lake table carries the partition columns ``provider``, ``cluster`` and ``date``; the
lake keeps them in the hive path (``provider=.../cluster=.../date=...``), not in the files.
``conform`` (schema.py) enforces these schemas on every write.

In ``ingest_audit``, sacct and flight-recorder files count records, not log lines: a job or
step row (a readable dump) is an ``event`` of one line, so ``lines_read = event_lines +
benign + quarantined`` holds for every file.
"""
from __future__ import annotations

import polars as pl

from .flight_recorder import SUMMARY_SCHEMA
from .schema import AUDIT, EVENTS, QUARANTINE, conform  # noqa: F401  (conform re-exported)
from .slurm.sacct import JOBS_SCHEMA, STEPS_SCHEMA

PARTITION = pl.Schema({"provider": pl.String, "cluster": pl.String, "date": pl.Date})


def _with_partition(*parts: pl.Schema | dict) -> pl.Schema:
    cols: dict = {}
    for p in parts:
        cols.update(p)
    cols.update(PARTITION)
    return pl.Schema(cols)


RAW_JOBS = _with_partition(JOBS_SCHEMA)
STEPS = _with_partition(STEPS_SCHEMA)
JOBS = _with_partition(JOBS_SCHEMA, {
    "n_steps": pl.Int64,
    "failed_steps": pl.Int64,        # steps that did not end COMPLETED
    "fr_ranks": pl.Int64,            # flight-recorder dumps read for the job
    "fr_suspect_rank": pl.Int64,     # rank whose collectives lag the others (flight recorder)
    "fr_suspect_reason": pl.String,
})
FLIGHT = _with_partition({"job_id": pl.String, "source": pl.String}, SUMMARY_SCHEMA, {
    "suspect_rank": pl.Int64,        # the job's suspect (same on every row of the job)
    "suspect_reason": pl.String,
})
INVENTORY = _with_partition({
    "rack": pl.String, "node": pl.String, "gpus": pl.Int64, "gpu_model": pl.String,
    "leaf_switch": pl.String, "in_service_from": pl.Date, "in_service_to": pl.Date,
})

#: lake table -> schema; the DuckDB warehouse has one view per table
TABLES: dict[str, pl.Schema] = {
    "raw_kernel_events": _with_partition(EVENTS),
    "raw_job_events": _with_partition(EVENTS),
    "raw_slurm_jobs": RAW_JOBS,
    "steps": STEPS,
    "flight_recorder": FLIGHT,
    "ingest_audit": _with_partition(AUDIT),
    "quarantine": _with_partition(QUARANTINE),
    "events": _with_partition(EVENTS),
    "jobs": JOBS,
    "inventory": INVENTORY,
}

#: sort keys that make every table's row order (and so its file) deterministic
SORT_KEYS: dict[str, list[str]] = {
    "raw_kernel_events": ["source", "line_no"],
    "raw_job_events": ["source", "line_no"],
    "events": ["ts", "source", "line_no"],
    "raw_slurm_jobs": ["source", "line_no"],
    "jobs": ["source", "line_no"],
    "steps": ["source", "line_no"],
    "flight_recorder": ["job_id", "rank", "source"],
    "ingest_audit": ["source"],
    "quarantine": ["source", "line_no", "reason"],
    "inventory": ["node"],
}
