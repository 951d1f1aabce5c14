"""Slurm inputs: host lists and ``sacct -P`` accounting output."""

from .hostlist import MAX_HOSTS, compress_hostlist, count_hostlist, expand_hostlist
from .sacct import (
    JOBS_SCHEMA,
    QUARANTINE_SCHEMA,
    STEPS_SCHEMA,
    SacctResult,
    parse_elapsed,
    parse_sacct,
    parse_slurm_stamp,
)

__all__ = [
    "MAX_HOSTS",
    "expand_hostlist",
    "count_hostlist",
    "compress_hostlist",
    "JOBS_SCHEMA",
    "STEPS_SCHEMA",
    "QUARANTINE_SCHEMA",
    "SacctResult",
    "parse_sacct",
    "parse_slurm_stamp",
    "parse_elapsed",
]
