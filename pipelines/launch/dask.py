"""Run the ingest assets on a Dask cluster (Dagster's ``dask_executor``, from ``dagster-dask``).
The same assets and range runs as ``faultline run``; only the executor differs. How the job
reaches the workers: docs/deployment.md, "Dask"."""

from __future__ import annotations

import datetime as dt
import functools
import os
import pickle
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

import dagster as dg

from ..analytics.prices import default_location
from ..ingest.landing import Partition
from ..lake import storage
from .local import QUIET, ProgressFn, Tally, batches, finish, partition_stats, select_partitions

JOB_PREFIX = "faultline_dask_ingest"
#: the default instance lives only as long as the call: no telemetry, and no compute-log capture
#: (nobody could read it; its `tail` helpers wait 30 s each to die where SIGTERM is ignored)
TEMP_INSTANCE = {
    "telemetry": {"enabled": False},
    "compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"},
}
#: one Dagster run at a time in this process: a starting run reconfigures Python logging
#: process-wide, which deadlocks against a running one's log handler (their steps still run on Dask)
_RUN_LOCK = threading.Lock()


def _register_sizeof() -> None:
    """Teach Dask the size of a ``DagsterEvent`` (a step's result is a list of them): Dask's
    default iterates them, which Dagster's metadata refuses, with a warning per step. Registered
    on import: a worker imports this module to rebuild the job before it measures the result."""
    try:
        from dask.sizeof import sizeof
    except ImportError:  # dask not installed: nothing to teach
        return

    @sizeof.register(dg.DagsterEvent)
    def _event_size(event: dg.DagsterEvent) -> int:
        try:
            return len(pickle.dumps(event, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:
            return 1024


_register_sizeof()


@functools.lru_cache(maxsize=32)  # a worker rebuilds it for every step it runs
def dask_ingest_job(landing: str, warehouse: str, models_dir: str | None = None, run_id: str = "") -> dg.JobDefinition:
    """The lake job (``defs.ingest.lake_job``) with ``dask_executor``. Module level so that
    ``dg.build_reconstructable_job`` can name it; ``run_id`` only makes the job name unique."""
    from dagster_dask import dask_executor

    from ..defs.ingest.lake_job import build_lake_job

    name = f"{JOB_PREFIX}_{run_id}" if run_id else JOB_PREFIX
    return build_lake_job(
        landing,
        warehouse,
        models_dir,
        name=name,
        executor_def=dask_executor,
        description="Ingest landing partitions on a Dask cluster.",
    )


def location_job(name: str = "ingest_job", per_step: bool = False) -> dg.JobDefinition:
    """A job of the code location, for ``dg.build_reconstructable_job("faultline.launch.dask",
    "location_job")`` outside ``dg dev``; ``per_step``: Dagster's multiprocess executor (a process
    per step) instead of its own in-process one. Resources from ``FAULTLINE_LANDING`` / ``_WAREHOUSE``."""
    from ..definitions import defs

    job = defs().resolve_job_def(name)
    return job.with_executor_def(dg.multiprocess_executor) if per_step else job


def _scheduler_info(address: str) -> tuple[int, dict[int, str]]:
    """(threads of all workers, {worker pid: worker address}) of the scheduler at ``address``."""
    from dask.distributed import Client

    with Client(address, timeout="30s") as client:
        threads = sum(client.nthreads().values())
        pids = {pid: addr for addr, pid in client.run(os.getpid).items()}
    return threads, pids


def _root_cause(error) -> str:
    """The innermost error of a step failure (the asset's own, not Dagster's wrapper)."""
    while error is not None and (error.cause or error.context) is not None:
        error = error.cause or error.context
    return error.message.strip() if error is not None else "unknown error"


def _dask_run(
    landing: str, warehouse: str, models_dir: str | None, address: str, run: list[Partition], instance_ref
) -> tuple[list[dict], Counter]:
    """One Dagster run over ``run`` whose steps are Dask tasks; returns the per-partition
    stats and {pid: steps} of the processes that ran its steps."""
    from ..defs.partitions import range_tags

    t1 = time.perf_counter()
    run_id = uuid.uuid4().hex[:16]
    job = dg.build_reconstructable_job(
        __name__,
        dask_ingest_job.__name__,
        reconstructable_kwargs={"landing": landing, "warehouse": warehouse, "models_dir": models_dir, "run_id": run_id},
    )
    run_config = {**QUIET, "execution": {"config": {"cluster": {"existing": {"address": address}}}}}
    tags = {**range_tags(run), "faultline/partitions": f"{run[0].relpath}..{run[-1].relpath}"}
    with _RUN_LOCK, dg.DagsterInstance.from_ref(instance_ref) as instance:
        with dg.execute_job(job, instance=instance, run_config=run_config, tags=tags) as result:
            if not result.success:
                failures = [
                    f"{e.step_key}: {_root_cause(e.step_failure_data.error)}"
                    for e in result.all_events
                    if e.is_step_failure
                ]
                raise RuntimeError(
                    f"Dask run {result.run_id} over {tags['faultline/partitions']} failed: "
                    + ("; ".join(failures) or "see the run's event log")
                )
            pids = Counter(e.pid for e in result.all_events if e.is_step_success)
    share = round((time.perf_counter() - t1) / len(run), 3)
    return [partition_stats(warehouse, part) | {"seconds": share} for part in run], pids


def run_on_dask(
    landing: str | os.PathLike,
    warehouse: str | os.PathLike,
    address: str,
    dates: Iterable[str | dt.date] | None = None,
    clusters: Iterable[str] | None = None,
    models_dir: str | None = None,
    progress: ProgressFn | None = None,
    concurrent_runs: int | None = None,
    instance: dg.DagsterInstance | None = None,
    analytics: bool = True,
    prices: str | None = None,
) -> dict:
    """Materialize the selected partitions on the Dask scheduler at ``address``; a summary like
    ``local.run_pipeline``'s, plus ``dask`` (address, runs, steps per worker). ``instance``: one the
    workers can reach (default: a temporary one here). ``concurrent_runs``: the range runs to cut
    the partitions into (default: the workers' threads); they run one at a time (``_RUN_LOCK``)."""
    if instance is not None and not instance.is_persistent:
        raise ValueError("Dask execution needs a persistent DagsterInstance (the workers open its storage)")
    t0 = time.perf_counter()
    landing, warehouse = str(storage.abspath(landing)), str(storage.abspath(warehouse))
    parts = select_partitions(landing, dates, clusters)
    tally = Tally(len(parts), progress)
    threads, worker_pids = _scheduler_info(address)
    concurrent_runs = max(1, concurrent_runs or threads)
    steps: Counter = Counter()
    with tempfile.TemporaryDirectory(prefix="faultline-dask-") as tmp:
        inst = instance or dg.DagsterInstance.local_temp(tempdir=tmp, overrides=TEMP_INSTANCE)
        try:
            runs = batches(parts, concurrent_runs, inst) if parts else []
            ref = inst.get_ref()
            with ThreadPoolExecutor(max_workers=concurrent_runs, thread_name_prefix="faultline-dask") as pool:
                futures = {
                    pool.submit(_dask_run, landing, warehouse, models_dir, address, run, ref): run for run in runs
                }
                pending = set(futures)
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                    for fut in finished:
                        if fut.exception() is not None:
                            for other in pending:
                                other.cancel()  # runs not started yet; running ones finish
                            raise fut.exception()
                        stats, pids = fut.result()
                        steps.update(pids)
                        tally.add(futures[fut], stats)
        finally:
            if instance is None:
                inst.dispose()
    if tally.rows:
        # this process is the one DuckDB writer
        tally.totals.update(finish(warehouse, analytics, prices=prices or default_location(landing)))
    return tally.summary(
        t0,
        dask={
            "address": address,
            "runs": len(runs),
            "steps": {worker_pids.get(pid, pid): n for pid, n in sorted(steps.items())},
        },
    )
