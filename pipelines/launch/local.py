"""Run the ingest assets in-process or in worker processes (what ``faultline run`` does).
The same lake job as the code location, cut into range runs (``plan``), recorded in the instance of
``$DAGSTER_HOME`` when set (each worker opens it); the view file is rebuilt once, here (one writer)."""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TYPE_CHECKING

from ..analytics.prices import default_location
from ..ingest.landing import Partition, discover
from ..ingest.pool import WORKERS_ENV as PARSE_WORKERS_ENV
from ..lake import storage
from ..lake import writer as lake_writer
from . import owner, plan

if TYPE_CHECKING:  # Dagster is imported where a run starts: planning and spawning need none of it
    import dagster as dg

ProgressFn = Callable[[int, int, Partition, dict], None]
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _wanted(part: Partition, dates: set[str] | None, clusters: set[str] | None) -> bool:
    if dates and part.date not in dates:
        return False
    if clusters and not clusters & {part.cluster, f"{part.provider}/{part.cluster}", part.cluster_key}:
        return False
    return True


def select_partitions(
    landing: str | os.PathLike, dates: Iterable[str | dt.date] | None = None, clusters: Iterable[str] | None = None
) -> list[Partition]:
    """Landing partitions, filtered by dates and clusters (``cluster``, ``provider/cluster``
    or ``provider:cluster``)."""
    ds = {d.isoformat() if isinstance(d, dt.date) else str(d) for d in dates} if dates else None
    cs = set(clusters) if clusters else None
    return [p for p in discover(landing).partitions if _wanted(p, ds, cs)]


def partition_stats(warehouse: str | os.PathLike, part: Partition) -> dict:
    audit = lake_writer.read(str(warehouse), "ingest_audit", part.provider, part.cluster, part.date)
    return {
        "files": audit.height,
        "lines": int(audit["lines_read"].sum()),
        "events": int(audit.filter(audit["kind"].is_in(["kernel", "job", "slurmctld"]))["events"].sum()),
        "quarantined": int(audit["quarantined"].sum()),
    }


def default_workers() -> int:
    """Worker processes for a batch: env ``FAULTLINE_WORKERS``, else the CPU count (max 8)."""
    env = os.environ.get("FAULTLINE_WORKERS")
    return int(env) if env else min(os.cpu_count() or 1, 8)


#: per process: the lake job of the last (landing, warehouse, rule data), and the instance
#: of the last batch's keys (or of DAGSTER_HOME); a worker reuses both for every run it is given
_job_cache: dict[tuple, object] = {}
_instance_cache: dict[tuple, dg.DagsterInstance] = {}
_home_cache: dict[str, dg.DagsterInstance] = {}


def configured_instance() -> dg.DagsterInstance | None:
    """The instance of ``$DAGSTER_HOME`` (its dagster.yaml, else SQLite files there), opened
    once per process; None without DAGSTER_HOME."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        return None
    if home not in _home_cache:
        import dagster as dg

        _home_cache[home] = dg.DagsterInstance.get()
    return _home_cache[home]


def _lake_job(landing: str, warehouse: str, models_dir: str | None):
    """The lake job (``defs.ingest.lake_job``), resolved once per process."""
    from ..defs.ingest.lake_job import build_lake_job

    key = (landing, warehouse, models_dir)
    if key not in _job_cache:
        _job_cache.clear()
        _job_cache[key] = build_lake_job(landing, warehouse, models_dir)
    return _job_cache[key]


def _batch_instance(keys: tuple[tuple[str, ...], tuple[str, ...]]) -> dg.DagsterInstance:
    """The configured instance (``configured_instance``: the caller registered the keys), else
    an ephemeral one that knows ``keys`` (every date and cluster key of the batch, sorted, as
    ``batches`` ordered them): a range is read in the instance's order of keys."""
    import dagster as dg

    from ..defs.partitions import clusters as cluster_dim
    from ..defs.partitions import dates as date_dim

    home = configured_instance()
    if home is not None:
        return home
    if keys not in _instance_cache:
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions(date_dim.name, list(keys[0]))
        instance.add_dynamic_partitions(cluster_dim.name, list(keys[1]))
        for old in _instance_cache.values():
            old.dispose()
        _instance_cache.clear()
        _instance_cache[keys] = instance
    return _instance_cache[keys]


def _start_worker(
    landing: str, warehouse: str, models_dir: str | None, keys: tuple[tuple[str, ...], tuple[str, ...]]
) -> None:
    """A pool worker's start: Dagster, the lake job and the batch's instance, built with the
    garbage collector paused, then frozen (``gc.freeze``): they live as long as the worker, so
    no later collection, nor the one at the worker's exit, walks them."""
    gc.disable()
    try:
        _lake_job(storage.abspath(landing), storage.abspath(warehouse), models_dir)
        _batch_instance(keys)
    except Exception:  # noqa: BLE001 - the first run builds them again and reports what failed
        return
    finally:
        gc.enable()
    gc.freeze()


def batch_keys(parts: list[Partition]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The sorted date and cluster keys of a batch (the order ``plan`` plans in)."""
    return tuple(sorted({p.date for p in parts})), tuple(sorted({p.cluster_key for p in parts}))


def _materialize_run(
    landing: str,
    warehouse: str,
    models_dir: str | None,
    run: list[Partition],
    instance: dg.DagsterInstance | None = None,
    keys: tuple[tuple[str, ...], tuple[str, ...]] | None = None,
) -> list[dict]:
    """One Dagster run over ``run`` (consecutive clusters x consecutive days): its ingest assets
    and checks; also the body of a worker. ``instance``: the caller's (its keys registered here),
    else this process's instance for the batch's ``keys`` (default: ``run``'s own)."""
    from ..defs.partitions import range_tags, register

    t1 = time.perf_counter()
    if instance is None:
        instance = _batch_instance(keys or batch_keys(run))
    else:
        register(instance, run)
    # the view file is rebuilt once at the end of a batch, not after every partition
    _lake_job(storage.abspath(landing), storage.abspath(warehouse), models_dir).execute_in_process(
        instance=instance,
        run_config=QUIET,
        tags={
            **range_tags(run),
            **owner.tags(),
            "faultline/partitions": f"{run[0].relpath}..{run[-1].relpath}",
        },
    )
    share = round((time.perf_counter() - t1) / len(run), 3)  # the run's time, split evenly
    return [partition_stats(warehouse, part) | {"seconds": share} for part in run]


#: partitions per Dagster run at most (memory does not grow with a run: partitions are read
#: one by one; a run's cost is in ``plan``)
RUN_PARTITIONS = 64


def batches(parts: list[Partition], workers: int, instance: dg.DagsterInstance | None = None) -> list[list[Partition]]:
    """The Dagster runs for ``parts`` on ``workers`` workers, largest first (``plan.plan``). Keys are
    ordered as ``instance`` lists them (registered there first), else sorted, as the fresh
    instance of each worker's run registers them."""
    orders = (None, None)
    if instance is not None:
        from ..defs.partitions import key_orders, register

        register(instance, parts)
        orders = key_orders(instance)
    return plan.plan(parts, workers, RUN_PARTITIONS, *orders)


class Tally:
    """Per-partition rows and the totals of a batch; calls ``progress`` as partitions finish."""

    COUNTS = ("files", "lines", "events", "quarantined")

    def __init__(self, total: int, progress: ProgressFn | None = None):
        self.total, self.progress, self.rows = total, progress, []
        self.totals: dict = {"partitions": 0, **{k: 0 for k in self.COUNTS}}

    def add(self, run: list[Partition], stats: list[dict]) -> None:
        for part, st in zip(run, stats):
            self.rows.append({"partition": part.relpath, **st})
            self.totals["partitions"] += 1
            for k in self.COUNTS:
                self.totals[k] += st[k]
            if self.progress:
                self.progress(self.totals["partitions"], self.total, part, st)

    def summary(self, t0: float, **extra) -> dict:
        return {
            **self.totals,
            "seconds": round(time.perf_counter() - t0, 3),
            "rows": sorted(self.rows, key=lambda r: r["partition"]),
            **extra,
        }


def run_pipeline(
    landing: str | os.PathLike,
    warehouse: str | os.PathLike,
    dates=None,
    clusters=None,
    progress: ProgressFn | None = None,
    models_dir: str | None = None,
    instance: dg.DagsterInstance | None = None,
    analytics: bool = True,
    workers: int | None = None,
    prices: str | os.PathLike | None = None,
    notice: Callable[[str], None] | None = None,
) -> dict:
    """Materialize every selected partition (``progress(done, total, partition, stats)`` after
    each) and return a summary; a failure raises the step's error, partitions written before it
    stay written. ``prices``: the cost analytics' prices.csv (default: ``prices.default_location``);
    ``notice(text)``: what the run waits for or cleaned up in a shared instance."""
    t0 = time.perf_counter()
    parts = select_partitions(landing, dates, clusters)
    tally = Tally(len(parts), progress)
    # a caller's instance (tests) sees every run only when they run here; the configured one
    # (DAGSTER_HOME) is opened by every worker
    home = configured_instance() if instance is None else None
    if home is not None:
        release(home, notice)
    workers = 1 if instance is not None else max(1, min(workers or default_workers(), len(parts)))
    keys = batch_keys(parts)
    jobs = [(str(landing), str(warehouse), models_dir, run) for run in batches(parts, workers, instance or home)]
    done = tally.add

    if workers == 1:
        for job in jobs:
            done(job[3], _materialize_run(*job, instance=instance, keys=keys))
    else:
        ctx = multiprocessing.get_context("spawn")  # polars and Dagster threads do not survive fork
        # the CPUs are shared out between the runs: a partition's parse splits only its share
        share = str(max(1, (os.cpu_count() or 1) // workers))
        saved = os.environ.get(PARSE_WORKERS_ENV)
        os.environ[PARSE_WORKERS_ENV] = saved or share
        try:
            _run_pool(ctx, workers, landing, warehouse, models_dir, keys, jobs, done)
        finally:
            if saved is None:
                os.environ.pop(PARSE_WORKERS_ENV, None)
    if tally.rows:
        tally.totals.update(
            finish(warehouse, analytics, instance or home, prices or default_location(landing), notice=notice)
        )
    return tally.summary(t0)


def release(instance: dg.DagsterInstance, notice: Callable[[str], None] | None = None) -> None:
    """Release the instance's runs of dead faultline processes (``owner.release_dead``), saying so."""
    for run_id, why in owner.release_dead(instance):
        if notice:
            notice(f"released run {run_id} ({owner.POOL} slots freed): {why}")


#: seconds between two looks at the pool's holders while a run waits for it
RELEASE_EVERY_S = 5.0


@contextlib.contextmanager
def _releasing(instance: dg.DagsterInstance, notice: Callable[[str], None] | None):
    """While the body waits for the pool, release the holders whose process dies meanwhile."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(RELEASE_EVERY_S):
            release(instance, notice)

    watcher = threading.Thread(target=loop, name="faultline-release", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()


def _run_pool(ctx, workers: int, landing, warehouse, models_dir, keys, jobs: list, done) -> None:
    """The runs on a pool of worker processes, each with Dagster and the lake job prebuilt."""
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=ctx,
        initializer=_start_worker,
        initargs=(str(landing), str(warehouse), models_dir, keys),
    ) as pool:
        futures = {pool.submit(_materialize_run, *job, keys=keys): job[3] for job in jobs}
        for fut in as_completed(futures):
            done(futures[fut], fut.result())


def finish(
    warehouse: str | os.PathLike,
    analytics: bool = True,
    instance: dg.DagsterInstance | None = None,
    prices: str | os.PathLike | None = None,
    notice: Callable[[str], None] | None = None,
) -> dict:
    """After a batch, in the calling process (the one DuckDB writer): rebuild the view file, or
    materialize ``out_analytics`` and ``out_report`` (which rebuild it) with ``prices`` (None: no
    dollars). Returns ``compaction``, ``snapshot_error`` and, when it ran them, ``analytics``."""
    from ..lake import compact
    from ..lake import views as view_file

    warehouse = str(storage.abspath(warehouse))
    if not analytics:
        packed, report = view_file.publish(warehouse)
        return {"compaction": packed.summary(), "snapshot_error": report.snapshot_error}
    extra = {"compaction": compact.compact(warehouse).summary()}  # out_analytics rebuilds the views
    import dagster as dg

    from ..defs.analytics.assets import out_analytics, out_report
    from ..defs.resources import LakeResource

    lake_resource = LakeResource(warehouse=warehouse, prices=str(prices) if prices else None)
    held = []
    if instance is not None:
        release(instance, notice)
        held = owner.holders(instance)
        if held and notice:
            notice(f"waiting for the {owner.POOL} pool (one DuckDB writer): held by run {', '.join(held)}")

    t1 = time.perf_counter()
    with _releasing(instance, notice) if held else contextlib.nullcontext():
        res = dg.materialize(
            [out_analytics, out_report],
            resources={"lake": lake_resource},
            instance=instance or dg.DagsterInstance.ephemeral(),
            run_config=QUIET,
            tags=owner.tags(),
        )
    mat = res.asset_materializations_for_node("out_analytics")
    meta = mat[0].metadata if mat else {}
    return {
        "analytics": {k[5:]: v.value for k, v in meta.items() if k.startswith("rows_")},
        "analytics_seconds": round(time.perf_counter() - t1, 3),
        "snapshot_error": getattr(meta.get("snapshot_error"), "value", None) or None,
        **extra,
    }
