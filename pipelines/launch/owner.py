"""Which process owns a CLI run in a shared Dagster instance, and release of the runs whose
process died (killed, out of memory): marked failed, their DuckDB writer slot freed, so the
next ``faultline run`` does not wait for a slot no one will give back."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import dagster as dg

PID, HOST, STARTED = "faultline/pid", "faultline/host", "faultline/pid_started"
POOL = "duckdb_writer"  # the one DuckDB writer's concurrency pool (out_warehouse, out_analytics)


def _started(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux ``/proc``), else ""."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def tags() -> dict[str, str]:
    """Tags for a run this process executes; no run retries (the daemon cannot re-execute a CLI run)."""
    pid = os.getpid()
    return {PID: str(pid), HOST: socket.gethostname(), STARTED: _started(pid), "dagster/max_retries": "0"}


def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process of that pid
        pass
    return not started or _started(pid) in ("", started)  # a reused pid started later


def dead_owner(run: dg.DagsterRun | None) -> str | None:
    """Why ``run`` (a run of this host's CLI) is owned by no live process, else None."""
    t = run.tags if run is not None else {}
    if t.get(HOST) != socket.gethostname() or not t.get(PID, "").isdigit():
        return None
    pid = int(t[PID])
    return None if _alive(pid, t.get(STARTED, "")) else f"its faultline process (pid {pid}) is gone"


def release_dead(instance: dg.DagsterInstance, pool: str = POOL) -> list[tuple[str, str]]:
    """Mark failed this host's started CLI runs whose process died, and free ``pool``'s slots
    they or ended runs still hold; returns (run id, why) for each run released."""
    import dagster as dg

    events = instance.event_log_storage
    live = dg.RunsFilter(
        statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING], tags={HOST: socket.gethostname()}
    )
    runs = {r.run_id: r for r in instance.get_runs(live)}
    if events.supports_global_concurrency_limits:
        info = events.get_concurrency_info(pool)
        for run_id in {s.run_id for s in info.claimed_slots} | {s.run_id for s in info.pending_steps}:
            runs.setdefault(run_id, instance.get_run_by_id(run_id))
    released = []
    for run_id, run in sorted(runs.items()):
        if run is None:
            why = "the run is no longer in the instance"
        else:
            why = "the run has ended" if run.is_finished else dead_owner(run)
        if why is None:
            continue
        if run is not None and not run.is_finished:
            instance.report_run_failed(run, f"faultline: {why}")
            why += "; marked failed"
        if events.supports_global_concurrency_limits:
            events.free_concurrency_slots_for_run(run_id)
        released.append((run_id, why))
    return released


def holders(instance: dg.DagsterInstance, pool: str = POOL) -> list[str]:
    """The runs that hold ``pool``'s slots now (a run waiting for the pool waits for them)."""
    events = instance.event_log_storage
    if not events.supports_global_concurrency_limits:
        return []
    return sorted({s.run_id for s in events.get_concurrency_info(pool).claimed_slots})
