"""Every table faultline writes, declared once: lake, core and analytics tables, sort keys, the
``faultline classify`` JSON Lines contract and which columns are public. ``conform`` enforces a
schema on every write."""

from __future__ import annotations

import polars as pl

UTC_TS = pl.Datetime("us", "UTC")

EVENTS = pl.Schema(
    {
        "event_id": pl.String,  # "<source>:<first line_no>", stable across re-runs
        "source": pl.String,  # file path (relative to the landing folder in the pipeline)
        "line_no": pl.Int64,  # first physical line of the event (1-based)
        "line_count": pl.Int32,  # physical lines joined into this event
        "ts": UTC_TS,
        "ts_source": pl.String,  # how ts was derived: see ingest.prefix.TS_SOURCES
        "provider": pl.String,
        "cluster": pl.String,
        "node": pl.String,
        "gpu_pci": pl.String,  # normalized 0000:3b:00 (domain:bus:device)
        "gpu_uuid": pl.String,
        "gpu_serial": pl.String,
        "job_id": pl.String,
        "rank": pl.Int32,
        "family": pl.String,  # source family: nvrm, nvswitch, nic, pcie, host, storage, ...
        "xid": pl.Int32,
        "sxid": pl.Int32,
        "nccl_status": pl.String,
        "category": pl.String,  # taxonomy category
        "domain": pl.String,  # taxonomy domain of the category
        "severity": pl.String,  # info | warning | error | critical
        "action": pl.String,  # taxonomy action
        "rule_id": pl.String,  # rule (or model) that decided the category
        "template": pl.String,  # message with numbers, addresses and ids masked
        "message": pl.String,  # message without its prefix (joined lines: "\n"-separated)
        "raw": pl.String,  # the physical line(s) as read
    }
)

QUARANTINE = pl.Schema(
    {
        "source": pl.String,
        "line_no": pl.Int64,  # null when the problem is the file, not a line
        "reason": pl.String,  # short machine-readable reason
        "detail": pl.String,  # human-readable explanation
        "preview": pl.String,  # first bytes of the line, escaped
    }
)

AUDIT = pl.Schema(
    {
        "source": pl.String,
        "kind": pl.String,  # kernel | job | sacct | slurmctld | flight_recorder | boot
        "bytes": pl.Int64,  # bytes on disk
        "bytes_read": pl.Int64,  # decompressed bytes read
        "checksum": pl.String,  # sha256 of the file as stored
        "lines_read": pl.Int64,
        "events": pl.Int64,  # events written (an event may span several lines)
        "event_lines": pl.Int64,  # physical lines inside events
        "benign": pl.Int64,
        "quarantined": pl.Int64,
        "format": pl.String,  # dominant prefix format detected
        "message": pl.String,  # what could not be read, if anything
    }
)

# --------------------------------------------------------------------------- parsed inputs
#: ``sacct -P`` job allocations and steps as ``ingest.sacct`` returns them
SACCT_JOBS = pl.Schema(
    {
        "job_id": pl.String,
        "array_job_id": pl.String,
        "array_task_id": pl.Int64,
        "het_job_id": pl.String,
        "het_job_offset": pl.Int64,
        "job_name": pl.String,
        "user": pl.String,
        "partition": pl.String,
        "nodelist": pl.String,
        "nodes": pl.List(pl.String),
        "n_nodes": pl.Int64,
        "gpus": pl.Int64,
        "submit": UTC_TS,
        "start": UTC_TS,
        "end": UTC_TS,
        "elapsed_s": pl.Int64,
        "state": pl.String,
        "cancelled_by": pl.String,
        "exit_code": pl.Int64,
        "signal": pl.Int64,
        "reason": pl.String,
        "source": pl.String,
        "line_no": pl.Int64,
    }
)

SACCT_STEPS = pl.Schema(
    {
        "job_id": pl.String,
        "step": pl.String,
        "state": pl.String,
        "exit_code": pl.Int64,
        "signal": pl.Int64,
        "start": UTC_TS,
        "end": UTC_TS,
        "nodelist": pl.String,
        "source": pl.String,
        "line_no": pl.Int64,
    }
)

#: one rank's PyTorch flight-recorder dump, summarized (``ingest.flight_recorder``)
FLIGHT_SUMMARY = pl.Schema(
    {
        "rank": pl.Int64,
        "pg_id": pl.String,
        "last_enqueued": pl.Int64,
        "last_started": pl.Int64,
        "last_completed": pl.Int64,
        "last_entry_seq": pl.Int64,
        "last_entry_name": pl.String,
        "last_entry_state": pl.String,
        "n_entries": pl.Int64,
    }
)

# --------------------------------------------------------------------------- lake tables
#: Every lake table carries the partition columns ``provider``, ``cluster`` and ``date``; the
#: lake keeps them in the hive path (``provider=.../cluster=.../date=...``), not in the files.
#: In ``ingest_audit``, sacct and flight-recorder files count records, not log lines, so
#: ``lines_read = event_lines + benign + quarantined`` holds for every file.

PARTITION = pl.Schema({"provider": pl.String, "cluster": pl.String, "date": pl.Date})


def _with_partition(*parts: pl.Schema | dict) -> pl.Schema:
    cols: dict = {}
    for p in parts:
        cols.update(p)
    cols.update(PARTITION)
    return pl.Schema(cols)


RAW_JOBS = _with_partition(SACCT_JOBS)
STEPS = _with_partition(SACCT_STEPS)
JOBS = _with_partition(
    SACCT_JOBS,
    {
        "n_steps": pl.Int64,
        "failed_steps": pl.Int64,  # steps that did not end COMPLETED
        "fr_ranks": pl.Int64,  # flight-recorder dumps read for the job
        "fr_suspect_rank": pl.Int64,  # rank whose collectives lag the others (flight recorder)
        "fr_suspect_reason": pl.String,
    },
)
FLIGHT = _with_partition(
    {"job_id": pl.String, "source": pl.String},
    FLIGHT_SUMMARY,
    {
        "suspect_rank": pl.Int64,  # the job's suspect (same on every row of the job)
        "suspect_reason": pl.String,
    },
)
INVENTORY = _with_partition(
    {
        "rack": pl.String,
        "node": pl.String,
        "gpus": pl.Int64,
        "gpu_model": pl.String,
        "leaf_switch": pl.String,
        "in_service_from": pl.Date,
        "in_service_to": pl.Date,
    }
)

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


def conform(df: pl.DataFrame, schema: pl.Schema, *, name: str = "table") -> pl.DataFrame:
    """Select and cast exactly the schema's columns; missing columns are an error."""
    if df.schema == schema:  # same names, order and types: the select would copy it
        return df
    missing = [c for c in schema.names() if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: missing columns {missing}")
    extra = [c for c in df.columns if c not in schema]
    if extra:
        raise ValueError(f"{name}: unexpected columns {extra}")
    return df.select([pl.col(c).cast(t, strict=True) for c, t in schema.items()])
