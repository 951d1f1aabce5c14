"""The one definition of every table faultline writes; ``conform`` enforces it on write."""
from __future__ import annotations

import polars as pl

UTC_TS = pl.Datetime("us", "UTC")

EVENTS = pl.Schema({
    "event_id": pl.String,       # "<source>:<first line_no>", stable across re-runs
    "source": pl.String,         # file path (relative to the landing folder in the pipeline)
    "line_no": pl.Int64,         # first physical line of the event (1-based)
    "line_count": pl.Int32,      # physical lines joined into this event
    "ts": UTC_TS,
    "ts_source": pl.String,      # how ts was derived: see ingest.prefix.TS_SOURCES
    "provider": pl.String,
    "cluster": pl.String,
    "node": pl.String,
    "gpu_pci": pl.String,        # normalized 0000:3b:00 (domain:bus:device)
    "gpu_uuid": pl.String,
    "gpu_serial": pl.String,
    "job_id": pl.String,
    "rank": pl.Int32,
    "family": pl.String,         # source family: nvrm, nvswitch, nic, pcie, host, storage, ...
    "xid": pl.Int32,
    "sxid": pl.Int32,
    "nccl_status": pl.String,
    "category": pl.String,       # taxonomy category
    "domain": pl.String,         # taxonomy domain of the category
    "severity": pl.String,       # info | warning | error | critical
    "action": pl.String,         # taxonomy action
    "rule_id": pl.String,        # rule (or model) that decided the category
    "template": pl.String,       # message with numbers, addresses and ids masked
    "message": pl.String,        # message without its prefix (joined lines: "\n"-separated)
    "raw": pl.String,            # the physical line(s) as read
})

QUARANTINE = pl.Schema({
    "source": pl.String,
    "line_no": pl.Int64,         # null when the problem is the file, not a line
    "reason": pl.String,         # short machine-readable reason
    "detail": pl.String,         # human-readable explanation
    "preview": pl.String,        # first bytes of the line, escaped
})

AUDIT = pl.Schema({
    "source": pl.String,
    "kind": pl.String,           # kernel | job | sacct | slurmctld | flight_recorder | boot
    "bytes": pl.Int64,           # bytes on disk
    "bytes_read": pl.Int64,      # decompressed bytes read
    "checksum": pl.String,       # sha256 of the file as stored
    "lines_read": pl.Int64,
    "events": pl.Int64,          # events written (an event may span several lines)
    "event_lines": pl.Int64,     # physical lines inside events
    "benign": pl.Int64,
    "quarantined": pl.Int64,
    "format": pl.String,         # dominant prefix format detected
    "message": pl.String,        # what could not be read, if anything
})


def conform(df: pl.DataFrame, schema: pl.Schema, *, name: str = "table") -> pl.DataFrame:
    """Select and cast exactly the schema's columns; missing columns are an error."""
    if df.schema == schema:         # same names, order and types: the select would copy it
        return df
    missing = [c for c in schema.names() if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: missing columns {missing}")
    extra = [c for c in df.columns if c not in schema]
    if extra:
        raise ValueError(f"{name}: unexpected columns {extra}")
    return df.select([pl.col(c).cast(t, strict=True) for c, t in schema.items()])


def empty(schema: pl.Schema) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)
