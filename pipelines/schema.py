"""Every table faultline writes, declared once: lake, core and analytics tables, their sort
keys, the ``faultline classify`` JSON Lines contract and which tables are a public contract.
``conform`` enforces a schema on every write; ``docs/tables.md`` is generated from here."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

UTC_TS = pl.Datetime("us", "UTC")
S, I32, I64, F64, B, D = pl.String, pl.Int32, pl.Int64, pl.Float64, pl.Boolean, pl.Date
LS, LI = pl.List(pl.String), pl.List(pl.Int32)


@dataclass(frozen=True)
class Table:
    """One table: what a row is, its columns (name, type, meaning) and how it is kept."""

    name: str
    row: str
    columns: tuple[tuple[str, pl.DataType, str], ...]
    layer: str  # raw | core | analytics | output
    sort: tuple[str, ...] = ()  # the order rows are written in (lake tables)
    key: tuple[str, ...] = ()  # columns that identify a row
    public: bool = False  # a contract: names, types and meanings change only with a new version

    @property
    def schema(self) -> pl.Schema:
        return pl.Schema({c: t for c, t, _ in self.columns})


def _cols(*cols: tuple[str, pl.DataType, str]) -> tuple[tuple[str, pl.DataType, str], ...]:
    return cols


# --------------------------------------------------------------------------- column groups
_EVENT = _cols(
    ("event_id", S, "`<source>:<first line_no>`, stable across re-runs"),
    ("source", S, "file path, relative to the landing folder"),
    ("line_no", I64, "first physical line of the event (1-based)"),
    ("line_count", I32, "physical lines this row stands for (joined lines, or a flood's repeats)"),
    ("ts", UTC_TS, "when, in UTC"),
    ("ts_source", S, "how ts was derived (docs/classify.md)"),
    ("provider", S, "provider of the landing folder"),
    ("cluster", S, "cluster of the landing folder"),
    ("node", S, "host the line names, else the file's node"),
    ("gpu_pci", S, "GPU PCI address, normalized 0000:3b:00 (domain:bus:device)"),
    ("gpu_uuid", S, "GPU UUID the line names"),
    ("gpu_serial", S, "GPU board serial the line names"),
    ("job_id", S, "job the line belongs to (job output) or names"),
    ("rank", I32, "global rank the line names"),
    ("local_rank", I32, "the local rank (process on its node) a launcher label names"),
    ("family", S, "source family: nvrm, nvswitch, nic, pcie, host, storage, thermal, nccl, pytorch, cuda, slurm, boot"),
    ("xid", I32, "NVIDIA Xid code"),
    ("sxid", I32, "NVSwitch SXid code"),
    ("nccl_status", S, "NCCL result name (ncclSystemError, ...)"),
    ("category", S, "taxonomy category (docs/taxonomy.md)"),
    ("domain", S, "taxonomy domain of the category"),
    ("severity", S, "info, warning, error, critical"),
    ("action", S, "taxonomy action"),
    ("rule_id", S, "rule (or model) that decided the category"),
    ("template", S, "message with numbers, addresses, ids, host names and ranks masked"),
    ("message", S, "message without its prefix (joined lines newline-separated)"),
    ("raw", S, "the physical line(s) as read"),
    ("repeats", I32, "occurrences this row stands for: 1, or a flood's burst of one repeated message"),
    ("last_ts", UTC_TS, "a flood's last occurrence (null for one occurrence)"),
    ("last_raw", S, "a flood's last line as read (null for one occurrence)"),
)
_QUARANTINE = _cols(
    ("source", S, "file path, relative to the landing folder"),
    ("line_no", I64, "the line, or null when the problem is the file"),
    ("reason", S, "short machine-readable reason"),
    ("detail", S, "human-readable explanation"),
    ("preview", S, "first bytes of the line, escaped"),
)
_AUDIT = _cols(
    ("source", S, "file path, relative to the landing folder"),
    ("kind", S, "kernel, job, sacct, slurmctld, flight_recorder, boot"),
    ("bytes", I64, "bytes on disk"),
    ("bytes_read", I64, "decompressed bytes read"),
    ("checksum", S, "sha256 of the file as stored"),
    ("lines_read", I64, "physical lines (records for sacct and flight-recorder files)"),
    ("events", I64, "events written (an event may span several lines)"),
    ("event_lines", I64, "physical lines inside events"),
    ("benign", I64, "lines that are not events"),
    ("quarantined", I64, "lines that could not be used; lines_read = event_lines + benign + quarantined"),
    ("format", S, "dominant prefix format detected"),
    ("message", S, "what could not be read, if anything"),
)
_SACCT_JOB = _cols(
    ("job_id", S, "text exactly as in sacct (12345, 12345_7, 12345+0)"),
    ("array_job_id", S, "array job of an array task"),
    ("array_task_id", I64, "task index of an array task"),
    ("het_job_id", S, "heterogeneous job of a component"),
    ("het_job_offset", I64, "component offset of a heterogeneous job"),
    ("job_name", S, "JobName"),
    ("user", S, "User"),
    ("partition", S, "Partition"),
    ("nodelist", S, "NodeList as printed (compressed)"),
    ("nodes", LS, "NodeList expanded"),
    ("n_nodes", I64, "NNodes"),
    ("gpus", I64, "GPUs allocated (AllocTRES gres/gpu)"),
    ("submit", UTC_TS, "Submit, UTC"),
    ("start", UTC_TS, "Start, UTC"),
    ("end", UTC_TS, "End, UTC"),
    ("elapsed_s", I64, "Elapsed, seconds"),
    ("state", S, "first word of State, upper-cased"),
    ("cancelled_by", S, "uid of CANCELLED by N"),
    ("exit_code", I64, "exit code of ExitCode"),
    ("signal", I64, "signal of ExitCode"),
    ("reason", S, "Reason"),
    ("source", S, "sacct file, relative to the landing folder"),
    ("line_no", I64, "line of the row"),
)
_SACCT_STEP = _cols(
    ("job_id", S, "the step's job"),
    ("step", S, "batch, extern, 0, 1, ..."),
    ("state", S, "first word of State, upper-cased"),
    ("exit_code", I64, "exit code of ExitCode"),
    ("signal", I64, "signal of ExitCode"),
    ("start", UTC_TS, "Start, UTC"),
    ("end", UTC_TS, "End, UTC"),
    ("nodelist", S, "NodeList as printed"),
    ("source", S, "sacct file, relative to the landing folder"),
    ("line_no", I64, "line of the row"),
)
_FLIGHT_SUMMARY = _cols(
    ("rank", I64, "rank of the dump"),
    ("pg_id", S, "process group summarized (the default group)"),
    ("last_enqueued", I64, "sequence number of the last collective enqueued"),
    ("last_started", I64, "... started"),
    ("last_completed", I64, "... completed"),
    ("last_entry_seq", I64, "sequence number of the dump's last entry"),
    ("last_entry_name", S, "its collective (nccl:all_reduce, ...)"),
    ("last_entry_state", S, "its state (scheduled, started, completed)"),
    ("n_entries", I64, "entries in the dump"),
)
_PARTITION = _cols(
    ("provider", S, "partition: provider"),
    ("cluster", S, "partition: cluster"),
    ("date", D, "partition: the landing day"),
)


def _lake(name: str, row: str, layer: str, sort: tuple[str, ...], *groups) -> Table:
    cols: dict[str, tuple[str, pl.DataType, str]] = {}
    for group in (*groups, _PARTITION):
        for c in group:
            cols[c[0]] = c
    return Table(name, row, tuple(cols.values()), layer, sort=sort)


# --------------------------------------------------------------------------- lake tables
#: Every lake table carries the partition columns provider, cluster and date; the lake keeps
#: them in the hive path (provider=.../cluster=.../date=...), not in the files.
LAKE_TABLES = (
    _lake("raw_kernel_events", "event of a kernel or controller log, as parsed", "raw", ("source", "line_no"), _EVENT),
    _lake("raw_job_events", "event of a job's output, as parsed", "raw", ("source", "line_no"), _EVENT),
    _lake("raw_slurm_jobs", "Slurm allocation, as sacct printed it", "raw", ("source", "line_no"), _SACCT_JOB),
    _lake("steps", "job step (.batch, .extern, .0)", "raw", ("source", "line_no"), _SACCT_STEP),
    _lake(
        "flight_recorder",
        "rank's PyTorch flight-recorder dump, summarized",
        "raw",
        ("job_id", "rank", "source"),
        _cols(("job_id", S, "the dump's job"), ("source", S, "dump file, relative to the landing folder")),
        _FLIGHT_SUMMARY,
        _cols(
            ("suspect_rank", I64, "the job's rank whose collectives lag the others (every row of the job)"),
            ("suspect_reason", S, "why that rank"),
        ),
    ),
    _lake(
        "job_markers",
        "training-progress, checkpoint or rank line of a job's output (models/rules/progress.yaml, nccl.yaml; "
        "the line stays benign)",
        "raw",
        ("source", "line_no"),
        _cols(
            ("job_id", S, "the job whose output it is"),
            ("source", S, "file path, relative to the landing folder"),
            ("line_no", I64, "the line (1-based)"),
            ("ts", UTC_TS, "when it was printed: its stamp, else the stamp of the line before it"),
            ("ts_source", S, "how ts was derived (docs/classify.md), or in_message: a stamp inside the message"),
            ("marker", S, "checkpoint_save, checkpoint_load, progress, or rank (the line ties its process to a rank)"),
            ("marker_rule", S, "the rule that matched"),
            ("step", I64, "training step or iteration the line states"),
            ("path", S, "checkpoint path the line states"),
            ("tokens_per_s", F64, "throughput the line states, tokens (or words) per second"),
            ("samples_per_s", F64, "throughput the line states, samples per second"),
            ("host", S, "rank lines: the host of the process (NCCL's HOST:PID:TID header)"),
            ("pid", I64, "rank lines: the process id"),
            ("rank", I64, "rank lines: the process's rank"),
            ("nranks", I64, "rank lines: the size of the communicator the rank is of (init lines)"),
            ("cuda_dev", I64, "rank lines: the CUDA device index of the process (init lines)"),
        ),
    ),
    _lake("ingest_audit", "landing file read", "raw", ("source",), _AUDIT),
    _lake("quarantine", "line or file that could not be used", "raw", ("source", "line_no", "reason"), _QUARANTINE),
    _lake(
        "events",
        "classified event of every source (a multi-line message is one event)",
        "core",
        ("ts", "source", "line_no"),
        _EVENT,
    ),
    _lake(
        "jobs",
        "Slurm allocation with its steps and flight-recorder verdict folded in",
        "core",
        ("source", "line_no"),
        _SACCT_JOB,
        _cols(
            ("n_steps", I64, "steps of the job"),
            ("failed_steps", I64, "steps that did not end COMPLETED"),
            ("fr_ranks", I64, "flight-recorder dumps read for the job"),
            ("fr_suspect_rank", I64, "rank whose collectives lag the others (flight recorder)"),
            ("fr_suspect_reason", S, "why that rank"),
        ),
    ),
    _lake(
        "inventory",
        "node, per landing day (a daily snapshot of inventory.csv)",
        "core",
        ("node",),
        _cols(
            ("rack", S, "rack"),
            ("node", S, "node"),
            ("gpus", I64, "GPUs in the node"),
            ("gpu_model", S, "GPU model"),
            ("leaf_switch", S, "leaf (top-of-rack) switch"),
            ("in_service_from", D, "first day in service"),
            ("in_service_to", D, "last day in service"),
        ),
    ),
)

# --------------------------------------------------------------------------- analytics tables
_RATE = _cols(
    ("rate_per_1k", F64, "failures per 1,000 node-days"),
    ("ci_low", F64, "exact Poisson 95% interval, low"),
    ("ci_high", F64, "exact Poisson 95% interval, high"),
)
_KNOWN = _cols(
    ("known_issue_id", S, "the known issue it matched (the first in the known-issues file; docs/known-issues.md)"),
)
ANALYTICS_TABLES = (
    Table(
        "incidents",
        "node incident: a node's events of one category coalesced in time",
        _cols(
            ("incident_id", S, "stable id"),
            ("provider", S, ""),
            ("cluster", S, ""),
            ("rack", S, ""),
            ("leaf_switch", S, ""),
            ("node", S, ""),
            ("gpu_pci", S, "the GPU, when one GPU is named"),
            ("category", S, "taxonomy category"),
            ("domain", S, "taxonomy domain"),
            ("severity", S, "highest severity of its events"),
            ("action", S, "taxonomy action"),
            ("first_ts", UTC_TS, "first event"),
            ("last_ts", UTC_TS, "last event"),
            ("n_events", I64, "events coalesced"),
            ("n_bursts", I64, "bursts (events close together) coalesced"),
            ("gpus", LS, "GPUs named"),
            ("xids", LI, "Xid codes seen"),
            ("sxids", LI, "SXid codes seen"),
            ("rule_ids", LS, "rules that matched"),
            ("first_event_id", S, "the deciding event"),
            ("sample", S, "the deciding line"),
            ("rack_incident_id", S, "set when several nodes of a rack or leaf switch share it"),
            ("rack_nodes", I64, "nodes that share that rack incident"),
            *_KNOWN,
            ("original_category", S, "the category before a known issue's verdict replaced it (null: not overridden)"),
            ("original_severity", S, "the severity before the override"),
            ("original_action", S, "the action before the override"),
        ),
        "analytics",
        key=("incident_id",),
    ),
    Table(
        "job_failures",
        "job that did not complete, with its root cause and culprit",
        _cols(
            ("job_id", S, "text, exactly as in sacct (12345, 12345_7, 12345+0)"),
            ("provider", S, "from the landing folder"),
            ("cluster", S, "from the landing folder"),
            ("job_name", S, "from sacct"),
            ("user", S, "from sacct"),
            ("state", S, "from sacct"),
            ("started", UTC_TS, "UTC"),
            ("ended", UTC_TS, "UTC"),
            ("nodes", I64, "allocation size"),
            ("gpus", I64, "allocation size"),
            ("gpu_hours_lost", F64, "elapsed hours x GPUs"),
            ("root_cause", S, "taxonomy category"),
            ("domain", S, "hardware, software, user, symptom, unknown"),
            ("culprit_node", S, "the node at fault, or null"),
            ("culprit_gpu", S, "the GPU (PCI address) at fault, or null"),
            ("confidence", F64, "0-1"),
            ("evidence", S, "the deciding line with its time and node, and how many watchdog lines followed"),
            ("action", S, "taxonomy action"),
            (
                "decided_by",
                S,
                "`node:<rule>`, `job:<rule>`, `+<reading>` (docs/analytics.md), `state:<STATE>`; "
                "`+known_issue:<ID>` when a known issue's verdict replaced the rules' one",
            ),
            ("node_list", S, "the compressed node list"),
            ("culprit_rank", I64, "the global rank at fault, or null"),
            ("symptoms", I64, "evidence events of the job besides the deciding ones (the cascade)"),
            ("evidence_events", LS, "event_id of the deciding line(s), the first one deciding"),
            *_KNOWN,
            (
                "original_root_cause",
                S,
                "the root cause before a known issue's verdict replaced it (null: not overridden)",
            ),
            ("original_action", S, "the action before the override"),
            # version 2 (docs/costs.md): lost work from checkpoints and restarts; the columns above keep their meaning
            (
                "checkpoint_at",
                UTC_TS,
                "the last checkpoint save its output shows before the end (job_markers), or null",
            ),
            (
                "lost_work_gpu_hours",
                F64,
                "GPUs x (end - checkpoint_at); without a save line GPUs x elapsed (an upper bound)",
            ),
            (
                "lost_work_method",
                S,
                "checkpoint; no_checkpoint_upper_bound (output without a save line); estimated_from_attempts, "
                "estimated_no_output (no output kept: docs/costs.md)",
            ),
            (
                "resumed_by",
                S,
                "the resubmission that resumed it: same provider, cluster, user and job name, submitted within a day",
            ),
            ("restart_s", F64, "seconds from its end to the resumed job's first progress line (queue wait + startup)"),
            ("restart_wait_s", F64, "seconds from its end to the resumed job's start"),
            (
                "restart_gpu_hours",
                F64,
                "the resumed job's GPUs x its start to first progress line (the queue wait is not counted: the GPUs were free)",
            ),
            ("restart_method", S, "progress_line, estimated (the cluster's median startup), or not_resumed"),
            ("lost_gpu_hours", F64, "lost_work_gpu_hours + restart_gpu_hours: the GPU-time the failure cost"),
            (
                "lost_gpu_hours_low",
                F64,
                "lower bound: 0 for lost work not read from a checkpoint line, no startup for an estimated restart",
            ),
            (
                "lost_gpu_hours_high",
                F64,
                "upper bound: the whole run for lost work not read from a checkpoint line, the cluster's "
                "95th-percentile startup for an estimated restart",
            ),
            ("ettr", F64, "effective training time ratio: (elapsed - lost work) / (elapsed + restart)"),
        ),
        "analytics",
        key=("provider", "cluster", "job_id"),
        public=True,
    ),
    Table(
        "node_failures",
        "failure a node's rate counts: an incident its rack does not share, or a job interruption",
        _cols(
            ("provider", S, ""),
            ("cluster", S, ""),
            ("node", S, ""),
            ("kind", S, "`incident` (severity error or critical, not shared by the rack) or `interruption`"),
            ("ref", S, "the incident id, or the interrupted job's id"),
            ("category", S, "the incident's category, or the job's root cause"),
            ("ts", UTC_TS, "the incident's first event, or the job's end"),
            ("day", D, "UTC day of ts"),
        ),
        "analytics",
        key=("provider", "cluster", "node", "kind", "ref"),
    ),
    Table(
        "node_health",
        "node",
        _cols(
            ("provider", S, ""),
            ("cluster", S, ""),
            ("rack", S, ""),
            ("node", S, ""),
            ("node_days", F64, "calendar node-days in service and covered by the landing folder"),
            ("gpus", I64, "GPUs in the node"),
            ("first_day", D, "first covered day"),
            ("last_day", D, "last covered day"),
            ("incidents", I64, "serious (error, critical) hardware and driver incidents its rack does not share"),
            ("top_category", S, "most frequent incident category"),
            ("last_incident", UTC_TS, "last serious incident"),
            ("interruptions", I64, "failed jobs the node interrupted without a serious incident"),
            ("failed_jobs", I64, "failed jobs blamed on the node"),
            ("gpu_hours_lost", F64, "GPU-hours of those jobs"),
            ("failures", I64, "incidents + interruptions: what the rate counts (`node_failures` rows)"),
            *_RATE,
        ),
        "analytics",
        key=("provider", "cluster", "node"),
    ),
    Table(
        "rack_health",
        "rack",
        _cols(
            ("provider", S, ""),
            ("cluster", S, ""),
            ("rack", S, ""),
            ("node_days", F64, "node-days of its nodes"),
            ("incidents", I64, "serious incidents of its nodes"),
            ("interruptions", I64, "interruptions of its nodes"),
            ("failures", I64, "incidents + interruptions"),
            ("failed_jobs", I64, "failed jobs blamed on its nodes"),
            ("gpu_hours_lost", F64, "GPU-hours of those jobs"),
            ("n_nodes", I64, "nodes"),
            ("gpu_hours", F64, "GPU-hours in service"),
            *_RATE,
        ),
        "analytics",
        key=("provider", "cluster", "rack"),
    ),
    Table(
        "provider_scoreboard",
        "provider or cluster (level)",
        _cols(
            ("level", S, "provider or cluster"),
            ("provider", S, ""),
            ("cluster", S, "null on provider rows"),
            ("n_nodes", I64, "nodes"),
            ("node_days", F64, "node-days in service"),
            ("gpu_hours", F64, "GPU-hours in service"),
            ("incidents", I64, "serious incidents"),
            ("interruptions", I64, "interruptions"),
            ("failures", I64, "incidents + interruptions"),
            *_RATE,
            ("failed_jobs_all", I64, "every failed job"),
            ("infra_failed_jobs", I64, "failed jobs with a hardware or software root cause"),
            ("infra_gpu_hours_lost", F64, "GPU-hours of those jobs"),
            ("infra_gpu_hours_lost_per_1k_gpu_hours", F64, "the same per 1,000 GPU-hours in service"),
            ("mttf_hours_1024_gpus", F64, "mean hours between failures of a 1,024-GPU job at this rate"),
        ),
        "analytics",
        key=("level", "provider", "cluster"),
    ),
    Table(
        "failure_causes",
        "provider x root cause",
        _cols(
            ("provider", S, ""),
            ("root_cause", S, "taxonomy category"),
            ("domain", S, "taxonomy domain"),
            ("failed_jobs", I64, "failed jobs"),
            ("gpu_hours_lost", F64, "their GPU-hours"),
            ("share", F64, "share of the provider's failed jobs"),
            ("gpu_hours_share", F64, "share of the provider's GPU-hours lost"),
        ),
        "analytics",
        key=("provider", "root_cause"),
    ),
    Table(
        "provider_comparison",
        "pair of providers (or of clusters)",
        _cols(
            ("level", S, "provider or cluster"),
            ("a", S, "first of the pair"),
            ("b", S, "second of the pair"),
            ("rate_a_per_1k", F64, "a's failures per 1,000 node-days"),
            ("rate_b_per_1k", F64, "b's"),
            ("ratio", F64, "a's rate over b's"),
            ("ci_low", F64, "95% interval of the ratio, low"),
            ("ci_high", F64, "95% interval of the ratio, high"),
            ("distinguishable", B, "the interval excludes 1"),
            ("more_node_days_needed", F64, "node-days more that would tell them apart at this ratio"),
            ("statement", S, "the comparison in words"),
        ),
        "analytics",
        key=("level", "a", "b"),
    ),
    Table(
        "provider_costs",
        "provider or cluster (level): what failures cost in GPU-hours and dollars over the covered days",
        _cols(
            ("level", S, "provider or cluster"),
            ("provider", S, ""),
            ("cluster", S, "null on provider rows"),
            ("n_nodes", I64, "nodes billed"),
            ("node_days", F64, "node-days in service and covered (billed)"),
            ("billed_gpu_hours", F64, "GPUs x 24 h of every billed node-day"),
            ("allocated_gpu_hours", F64, "GPU-hours of the jobs that ended in the window"),
            ("failed_jobs_infra", I64, "failed jobs with a hardware or software root cause"),
            ("lost_gpu_hours_infra", F64, "their lost_gpu_hours (job_failures)"),
            ("upper_bound_gpu_hours_infra", F64, "the part of it that is an upper bound (no checkpoint line seen)"),
            ("lost_gpu_hours_user", F64, "lost_gpu_hours of user-caused failures"),
            (
                "lost_gpu_hours_other",
                F64,
                "lost_gpu_hours of the rest (hangs without a cause, time limits, cancels, preemption)",
            ),
            ("down_node_days", F64, "node-days drained or down (controller drain line to the next boot or job)"),
            ("down_gpu_hours", F64, "their GPU-hours"),
            ("useful_gpu_hours", F64, "billed - lost_gpu_hours_infra - down_gpu_hours"),
            ("goodput", F64, "useful / billed: the share the provider's infrastructure did not take away"),
            ("goodput_low", F64, "95% interval, low (sampling and measurement)"),
            ("goodput_high", F64, "95% interval, high"),
            ("goodput_se", F64, "its standard error"),
            ("ettr", F64, "1 - lost_gpu_hours of every cause / allocated_gpu_hours"),
            ("usd_paid", F64, "billed GPU-hours x their price (prices.csv); null without prices"),
            ("unpriced_gpu_hours", F64, "billed GPU-hours no price row covers (then the dollar columns are null)"),
            ("usd_per_gpu_hour", F64, "price paid per billed GPU-hour"),
            ("usd_lost_infra", F64, "dollars of lost_gpu_hours_infra (at the price of the day the job ended)"),
            ("usd_lost_user", F64, "dollars of lost_gpu_hours_user"),
            ("usd_down", F64, "dollars of down_gpu_hours"),
            ("effective_usd_per_useful_gpu_hour", F64, "usd_paid / useful_gpu_hours"),
            ("effective_low", F64, "95% interval, low"),
            ("effective_high", F64, "95% interval, high"),
            ("effective_se", F64, "its standard error"),
            (
                "usd_fleet_work_at_this_rate",
                F64,
                "provider rows: every provider's useful GPU-hours of the window bought at this provider's effective rate",
            ),
        ),
        "analytics",
        key=("level", "provider", "cluster"),
    ),
    Table(
        "provider_cost_comparison",
        "pair of providers (or of clusters): can the data tell their effective prices apart",
        _cols(
            ("level", S, "provider or cluster"),
            ("a", S, "first of the pair"),
            ("b", S, "second of the pair"),
            ("measure", S, "effective_usd_per_useful_gpu_hour, or goodput where either has no prices"),
            ("value_a", F64, "a's"),
            ("value_b", F64, "b's"),
            ("difference", F64, "a - b"),
            ("ci_low", F64, "95% interval of the difference, low"),
            ("ci_high", F64, "95% interval of the difference, high"),
            ("distinguishable", B, "the interval excludes 0"),
            (
                "more_node_days_needed",
                F64,
                "node-days more each that would tell them apart at this difference (80% power)",
            ),
            ("statement", S, "the comparison in words"),
        ),
        "analytics",
        key=("level", "a", "b"),
    ),
    Table(
        "lemon_nodes",
        "node flagged as a lemon",
        _cols(
            ("provider", S, ""),
            ("cluster", S, ""),
            ("rack", S, ""),
            ("node", S, ""),
            ("node_days", F64, "node-days"),
            ("incidents", I64, "serious incidents"),
            ("expected", F64, "incidents expected from its cluster's baseline (rate flags)"),
            ("p_value", F64, "the smallest p of the tests that flagged it (each flag passed a Benjamini-Hochberg cut)"),
            ("top_category", S, "most frequent incident category"),
            ("failed_jobs", I64, "failed jobs blamed on it"),
            ("gpu_hours_lost", F64, "their GPU-hours"),
            ("evidence_kind", S, "rate, repeat_signature, repeat_user_xid, repeat_gpu_fault"),
            ("reason", S, "the flag in words"),
            ("action", S, "taxonomy action"),
        ),
        "analytics",
        key=("provider", "cluster", "node", "evidence_kind"),
    ),
    Table(
        "rack_hotspots",
        "rack flagged as sharing a fault",
        _cols(
            ("provider", S, ""),
            ("cluster", S, ""),
            ("rack", S, ""),
            ("n_nodes", I64, "nodes"),
            ("node_days", F64, "node-days"),
            ("incidents", I64, "serious incidents of its nodes"),
            (
                "tested_incidents",
                I64,
                "those of every node but the one with the most: what the rate test counts (one bad node is no bad rack)",
            ),
            ("expected", F64, "tested_incidents expected from the rest of its cluster's rate"),
            ("p_value", F64, "the rate test: P(at least tested_incidents), before the Benjamini-Hochberg cut"),
            ("correlated_incidents", I64, "incidents several of its nodes shared within minutes"),
            ("correlated_category", S, "their category"),
            ("max_nodes_together", I64, "most nodes in one shared incident"),
            ("flagged_by", S, "the test that raised it: `rate`, `correlation` or `rate+correlation`"),
            ("reason", S, "the flag in words"),
            ("action", S, "taxonomy action"),
        ),
        "analytics",
        key=("provider", "cluster", "rack"),
    ),
    Table(
        "unknown_signatures",
        "signature (template group) of lines no rule names (unknown, or placed only by the subsystem they name)",
        _cols(
            ("signature_id", S, "stable id"),
            ("template", S, "representative template"),
            ("example", S, "an example message"),
            ("count", I64, "events"),
            ("n_templates", I64, "templates merged"),
            ("templates", LS, "those templates"),
            ("n_nodes", I64, "nodes it was seen on"),
            ("nodes", LS, "those nodes"),
            ("families", LS, "source families"),
            ("first_seen", UTC_TS, "first event with a time"),
            ("last_seen", UTC_TS, "last event with a time"),
            ("first_day", D, "first UTC day (partition) it was seen"),
            ("last_day", D, "last UTC day (partition) it was seen"),
            ("n_jobs", I64, "jobs whose output (or named job) it was seen in"),
            ("clusters", LS, "`provider/cluster` where it was seen"),
            ("sample_source", S, "`source:line_no` of the example"),
            ("predicted_category", S, "the learned model's category"),
            ("confidence", F64, "the model's probability"),
            ("resolved_by_model", B, "confidence above the model's threshold"),
        ),
        "analytics",
        key=("signature_id",),
    ),
    Table(
        "node_profiles",
        "node with incidents, and the failure profile it shares with others",
        _cols(
            ("provider", S, ""),
            ("cluster", S, ""),
            ("rack", S, ""),
            ("node", S, ""),
            ("n_incidents", I64, "incidents"),
            ("top_category", S, "most frequent category"),
            ("top_share", F64, "its share"),
            ("profile_cluster", I32, "profile group"),
            ("cluster_size", I64, "nodes in the group"),
            ("dominant_categories", LS, "the group's main categories"),
            ("rate_per_1k", F64, "the node's failures per 1,000 node-days"),
        ),
        "analytics",
        key=("provider", "cluster", "node"),
    ),
    Table(
        "known_issue_matches",
        "known issue x incident or failed job that meets its match and scope",
        _cols(
            ("known_issue_id", S, "the entry's id"),
            ("kind", S, "incident or job_failure"),
            ("ref", S, "incident_id, or provider/cluster/job_id"),
            ("provider", S, ""),
            ("cluster", S, ""),
            ("rack", S, "the node's rack"),
            ("node", S, "the incident's node, or the job's culprit node"),
            ("job_id", S, "the failed job (job_failure rows)"),
            ("ts", UTC_TS, "the incident's first event, or the job's deciding line (else its end)"),
            ("category", S, "the rules' category or root cause (before any override)"),
            ("severity", S, "the incident's severity (before any override)"),
            ("gpu_hours_lost", F64, "the job's GPU-hours (job_failure rows)"),
            (
                "state",
                S,
                "applied (it carries this entry), shadowed (an earlier entry took it), "
                "after_expiry / after_close (it happened after the entry's end: still matching)",
            ),
            ("overridden", B, "the entry's verdict replaced the rules' one on it"),
            ("sample", S, "the deciding line"),
        ),
        "analytics",
        key=("known_issue_id", "kind", "ref"),
    ),
    Table(
        "known_issues",
        "entry of the known-issues file, with what it matched and cost",
        _cols(
            ("known_issue_id", S, "the entry's id"),
            ("title", S, ""),
            (
                "status",
                S,
                "open; expired (past expires); closed (closed on or before as_of); "
                "quiet (no match for quiet_days: maybe fixed)",
            ),
            ("as_of", D, "the last covered day, which the status is relative to"),
            ("opened", D, ""),
            ("expires", D, "last day in force"),
            ("closed", D, "the day it was fixed (last day in force)"),
            ("ticket", S, "the provider's ticket id"),
            ("owner", S, ""),
            ("runbook", S, "text or URL"),
            ("hotfix", S, "a command or procedure for people (never run by faultline)"),
            ("drain", B, "the entry says to drain the nodes it hits"),
            ("verdict", S, "the override, in words (null: none)"),
            ("match", S, "the match criteria, in words"),
            ("scope", S, "the scope, in words"),
            ("incidents", I64, "incidents that carry it (whole history)"),
            ("jobs", I64, "failed jobs that carry it"),
            ("gpu_hours_lost", F64, "their GPU-hours"),
            ("matches_since_opened", I64, "incidents + failed jobs carrying it since opened"),
            ("jobs_since_opened", I64, "failed jobs since opened"),
            ("gpu_hours_lost_since_opened", F64, "their GPU-hours"),
            ("nodes", I64, "distinct nodes hit"),
            ("first_seen", UTC_TS, ""),
            ("last_seen", UTC_TS, ""),
            ("shadowed", I64, "matches an earlier entry took"),
            ("matches_after_end", I64, "matches after it expired or closed (it no longer applies; still happening)"),
            ("last_after_end", UTC_TS, "the last of those"),
            ("file", S, "the known-issues file applied"),
            ("file_sha256", S, "its sha256"),
            ("line", I64, "the entry's line in it"),
        ),
        "analytics",
        key=("known_issue_id",),
    ),
)

#: ``faultline classify``: one JSON object per input line, in input order
CLASSIFY_JSONL = Table(
    "classify",
    "physical input line (faultline classify, JSON Lines)",
    _cols(
        ("source", S, "the file name as given (- for stdin)"),
        ("line_no", I64, "1-based physical line number"),
        ("family", S, "source family, or the file's kind when no rule matched"),
        ("category", S, "taxonomy category; quarantined for a line that could not be read"),
        ("severity", S, "info, warning, error, critical"),
        ("action", S, "taxonomy action"),
        ("xid", I32, "NVIDIA Xid code"),
        ("sxid", I32, "NVSwitch SXid code"),
        ("node", S, "host the line names"),
        ("gpu_pci", S, "GPU PCI address, normalized 0000:3b:00"),
        ("job_id", S, "the job the line names"),
        ("rank", I32, "the rank the line names"),
        ("local_rank", I32, "the local rank (process on its node) a launcher label names"),
        ("rule_id", S, "the rule that decided (fallback:<entry> or error_words for an unmatched error-looking line)"),
        ("ts", S, "ISO-8601 UTC (2026-11-24T03:14:08.000000Z)"),
        ("ts_source", S, "how ts was derived"),
    ),
    "output",
    public=True,
)

# --------------------------------------------------------------------------- what code imports
EVENTS = pl.Schema({c: t for c, t, _ in _EVENT})
QUARANTINE = pl.Schema({c: t for c, t, _ in _QUARANTINE})
AUDIT = pl.Schema({c: t for c, t, _ in _AUDIT})
SACCT_JOBS = pl.Schema({c: t for c, t, _ in _SACCT_JOB})
SACCT_STEPS = pl.Schema({c: t for c, t, _ in _SACCT_STEP})
FLIGHT_SUMMARY = pl.Schema({c: t for c, t, _ in _FLIGHT_SUMMARY})
PARTITION = pl.Schema({c: t for c, t, _ in _PARTITION})

#: lake table -> schema; the DuckDB view file has one view per table
TABLES: dict[str, pl.Schema] = {t.name: t.schema for t in LAKE_TABLES}
#: sort keys that make every lake table's row order (and so its file) deterministic
SORT_KEYS: dict[str, list[str]] = {t.name: list(t.sort) for t in LAKE_TABLES}
RAW_JOBS, STEPS, FLIGHT, JOBS = (TABLES[n] for n in ("raw_slurm_jobs", "steps", "flight_recorder", "jobs"))
#: analytics table -> schema (``<warehouse>/analytics/<name>.parquet``)
ANALYTICS: dict[str, pl.Schema] = {t.name: t.schema for t in ANALYTICS_TABLES}
ALL_TABLES: tuple[Table, ...] = (*LAKE_TABLES, *ANALYTICS_TABLES, CLASSIFY_JSONL)


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


def _type_name(t: pl.DataType) -> str:
    return {
        UTC_TS: "timestamp (UTC)",
        S: "text",
        I32: "int32",
        I64: "int64",
        F64: "float64",
        B: "bool",
        D: "date",
        LS: "list of text",
        LI: "list of int32",
    }.get(t, str(t))


def markdown() -> str:
    """The table catalog (``docs/tables.md``), generated from the declarations above."""
    out = [
        "# Tables",
        "",
        "Generated from `pipelines/schema.py` (`python -m faultline.schema > docs/tables.md`);",
        "a test fails when the two differ. Public tables are contracts: their columns change only",
        "with a new version.",
        "",
    ]
    heads = {"raw": "Lake: raw", "core": "Lake: core", "analytics": "Analytics", "output": "Outputs"}
    for layer, head in heads.items():
        out += [f"## {head}", ""]
        for t in (t for t in ALL_TABLES if t.layer == layer):
            flags = [
                f"Sorted by `{', '.join(t.sort)}`" if t.sort else "",
                f"Key `{', '.join(t.key)}`" if t.key else "",
                "**public contract**" if t.public else "",
            ]
            out += [
                f"### `{t.name}`",
                "",
                f"One row per {t.row}." + "".join(f" {f}." for f in flags if f),
                "",
                "| column | type | meaning |",
                "| --- | --- | --- |",
            ]
            out += [f"| `{c}` | {_type_name(ty)} | {m} |" for c, ty, m in t.columns]
            out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
