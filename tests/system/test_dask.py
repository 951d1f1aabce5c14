"""Partitions in parallel: on a real ``dask.distributed`` cluster (``dagster-dask``'s
executor) and with Dagster's multiprocess executor, with the same lake as in-process."""

from __future__ import annotations

import faulthandler
import os
import threading
from collections import Counter

import dagster as dg
import distributed
import pytest
from helpers.hashes import lake_hashes

from faultline.launch.dask import JOB_PREFIX, TEMP_INSTANCE, location_job, run_on_dask
from faultline.launch.local import QUIET, batches, run_pipeline, select_partitions

TOTALS = ("partitions", "files", "lines", "events", "quarantined")


#: seconds one run_on_dask call may take here (it takes a few): past it the test fails and
#: prints what the scheduler and the workers were doing, instead of holding the suite
DEADLINE_S = 300


@pytest.fixture
def dask_cluster():
    """A scheduler and two single-threaded worker processes on localhost, without memory limits
    (a paused worker would wait forever); closed even when the test fails."""
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=0,
            dashboard_address=None,
            host="127.0.0.1",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.wait_for_workers(2, timeout=60)
        yield cluster, client


def _bounded(client, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a daemon thread; past ``DEADLINE_S`` the test fails with the
    workers' status, their running tasks' stacks and every thread's stack here (on stderr)."""
    out: dict = {}

    def body():
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised in the test
            out["error"] = exc

    t = threading.Thread(target=body, name="dask-test-run", daemon=True)
    t.start()
    t.join(DEADLINE_S)
    if t.is_alive():
        faulthandler.dump_traceback(all_threads=True)
        workers = {
            a: (w.get("status"), w.get("metrics", {}).get("memory"))
            for a, w in client.scheduler_info()["workers"].items()
        }
        pytest.fail(
            f"run_on_dask still running after {DEADLINE_S} s\nworkers: {workers}\n"
            f"processing: {client.processing()}\ntask stacks: {client.call_stack()}"
        )
    if "error" in out:
        raise out["error"]
    return out["value"]


def _executed(dask_worker) -> dict[str, int]:
    """Dask's own record (on the worker) of the faultline step tasks it executed:
    {task prefix (= key: ``<job>.<step>``): 1}."""
    return {
        k[2]: 1
        for k in dask_worker.digests_total
        if isinstance(k, tuple)
        and len(k) == 5
        and k[0] == "execute"
        and k[3] == "thread-cpu"
        and str(k[2]).startswith(JOB_PREFIX)
    }


def test_dask_matches_in_process_run(dask_cluster, landing, tmp_path):
    cluster, client = dask_cluster
    before = client.run(_executed)
    seen = []
    on_dask = _bounded(
        client,
        run_on_dask,
        landing,
        tmp_path / "dask",
        cluster.scheduler_address,
        analytics=False,
        progress=lambda done, total, part, st: seen.append((done, total, part.relpath)),
    )
    local = run_pipeline(landing, tmp_path / "local", workers=1, analytics=False)

    hashes = lake_hashes(tmp_path / "dask")
    assert hashes and hashes == lake_hashes(tmp_path / "local")
    assert {k: on_dask[k] for k in TOTALS} == {k: local[k] for k in TOTALS}
    assert [r["partition"] for r in on_dask["rows"]] == [r["partition"] for r in local["rows"]]
    assert sorted(seen)[-1][:2] == (3, 3)
    assert (tmp_path / "dask" / "faultline.duckdb").is_file()  # rebuilt once, by the caller

    # both worker processes ran steps: Dagster's step events carry the pid of the process
    # that ran the step, and Dask's workers keep their own count of the tasks they executed
    workers = set(client.scheduler_info()["workers"])
    steps = on_dask["dask"]["steps"]
    assert set(steps) == workers and all(n > 0 for n in steps.values()), steps
    after = client.run(_executed)
    by_worker = {w: len(set(after[w]) - set(before.get(w, {}))) for w in workers}
    assert by_worker == steps
    assert on_dask["dask"]["runs"] == 2  # two range runs, one after the other

    # again, into the same warehouse, one run at a time, then the analytics here: the same lake
    again = _bounded(client, run_on_dask, landing, tmp_path / "dask", cluster.scheduler_address, concurrent_runs=1)
    assert lake_hashes(tmp_path / "dask") == hashes
    assert {k: again[k] for k in TOTALS} == {k: local[k] for k in TOTALS}
    assert again["analytics"] and (tmp_path / "dask" / "report.html").is_file()


def test_the_temporary_instance_captures_no_compute_logs(tmp_path):
    """Capturing a step's output spawns ``tail`` helpers that each take 30 s to die where the
    workers inherited an ignored SIGTERM; the call's own instance captures nothing."""
    from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

    with dg.DagsterInstance.local_temp(tempdir=str(tmp_path), overrides=TEMP_INSTANCE) as inst:
        assert isinstance(inst.compute_log_manager, NoOpComputeLogManager)


def test_dask_needs_a_persistent_instance(landing, tmp_path):
    with pytest.raises(ValueError, match="persistent"):  # before it contacts the scheduler
        run_on_dask(landing, tmp_path / "wh", "tcp://127.0.0.1:9", instance=dg.DagsterInstance.ephemeral())


@pytest.mark.slow
def test_ingest_job_with_the_multiprocess_executor(landing, tmp_path, monkeypatch):
    """``ingest_job`` from the code location on Dagster's multiprocess executor (a deployment's
    choice; its own is in-process): each step in its own process, the same lake as in-process."""
    from faultline.defs.partitions import range_tags

    monkeypatch.setenv("FAULTLINE_LANDING", str(landing))  # the code location's resources,
    monkeypatch.setenv("FAULTLINE_WAREHOUSE", str(tmp_path / "mp"))  # inherited by step processes
    assert location_job().executor_def is dg.in_process_executor  # the code location's own: a process per run
    (tmp_path / "dagster").mkdir()
    parts = select_partitions(landing, clusters=["c1"])  # one range run: c1's two days
    with dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "dagster")) as instance:
        (run,) = batches(parts, 1, instance)
        job = dg.build_reconstructable_job(
            "faultline.launch.dask", "location_job", reconstructable_kwargs={"per_step": True}
        )
        with dg.execute_job(job, instance=instance, tags=range_tags(run), run_config=QUIET) as result:
            assert result.success
            pids = Counter(e.pid for e in result.all_events if e.is_step_success)
            assert "out_warehouse" in {e.step_key for e in result.all_events if e.is_step_success}
    assert os.getpid() not in pids and len(pids) > 1  # steps ran in child processes
    run_pipeline(landing, tmp_path / "local", clusters=["c1"], workers=1, analytics=False)
    hashes = lake_hashes(tmp_path / "mp")
    assert hashes and hashes == lake_hashes(tmp_path / "local")
