"""A faultline process killed (kill -9) while its run holds the one DuckDB writer slot of a shared
Dagster instance: the next ``faultline run`` marks that run failed, frees the slot and finishes,
whether the holder died before it started or while it waited; a live holder is waited for."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import pytest
from helpers.landing import make_landing

from faultline.launch import owner
from faultline.launch.local import RELEASE_EVERY_S

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# a stand-in for a faultline run in its analytics step: a started run owned by this process,
# holding the pool's only slot until it is killed
HOLDER = """
import time, uuid
import dagster as dg
from faultline.launch import owner
inst = dg.DagsterInstance.get()
run_id = str(uuid.uuid4())
inst.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id=run_id, status=dg.DagsterRunStatus.STARTED, tags=owner.tags()))
inst.event_log_storage.initialize_concurrency_limit_to_default(owner.POOL)
inst.event_log_storage.claim_concurrency_slot(owner.POOL, run_id, "out_analytics")
print(run_id, flush=True)
time.sleep(600)
"""


@pytest.fixture
def setup(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "FAULTLINE_"))}
    env["DAGSTER_HOME"] = str(home)
    return make_landing(tmp_path / "landing"), tmp_path / "wh", env


def _holder(env) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], env=env, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def _run(landing, warehouse, env) -> subprocess.Popen:
    cmd = [str(BIN / "faultline"), "run", "--landing", str(landing), "--warehouse", str(warehouse), "--workers", "1"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _state(env, run_id):
    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    try:
        with dg.DagsterInstance.get() as inst:
            info = inst.event_log_storage.get_concurrency_info(owner.POOL)
            return inst.get_run_by_id(run_id).status, info.claimed_slots
    finally:
        os.environ.pop("DAGSTER_HOME")


def test_a_run_killed_holding_the_writer_slot_is_released_by_the_next_run(setup):
    landing, warehouse, env = setup
    holder, run_id = _holder(env)
    pid = holder.pid
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    run = _run(landing, warehouse, env)
    try:
        out, err = run.communicate(timeout=300)
    finally:
        run.kill()
    assert (
        f"released run {run_id} (duckdb_writer slots freed): its faultline process (pid {pid}) is gone; marked failed"
        in err
    )
    assert "waiting for the duckdb_writer pool" not in err
    assert "total" in out and (warehouse / "faultline.duckdb").exists()
    assert _state(env, run_id) == (dg.DagsterRunStatus.FAILURE, [])


def test_a_run_waiting_for_a_holder_that_dies_meanwhile_goes_on(setup):
    landing, warehouse, env = setup
    holder, run_id = _holder(env)
    run = _run(landing, warehouse, env)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(run.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 240
    while not any("waiting for the duckdb_writer pool" in ln for ln in lines):
        assert run.poll() is None, "".join(lines)
        assert time.monotonic() < deadline, "".join(lines)
        time.sleep(0.2)
    assert f"held by run {run_id}" in "".join(lines)
    time.sleep(2 * RELEASE_EVERY_S)
    assert run.poll() is None  # a live holder is waited for
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    try:
        assert run.wait(timeout=120) == 0, "".join(lines)
    finally:
        run.kill()
    reader.join(10)
    assert (
        f"released run {run_id} (duckdb_writer slots freed): its faultline process (pid {holder.pid}) is gone"
        in "".join(lines)
    )
    assert _state(env, run_id) == (dg.DagsterRunStatus.FAILURE, [])


def test_the_owner_of_a_run_is_this_hosts_live_process_that_started_it():
    me = owner.tags()
    run = dg.DagsterRun(job_name="j", run_id="r", tags=me)
    assert owner.dead_owner(run) is None
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert owner.dead_owner(dg.DagsterRun(job_name="j", run_id="r", tags={**me, owner.PID: str(gone.pid)})) == (
        f"its faultline process (pid {gone.pid}) is gone"
    )
    # the pid is alive but another process (started at another time) has it now
    reused = {**me, owner.STARTED: str(int(me[owner.STARTED]) - 1)}
    assert owner.dead_owner(dg.DagsterRun(job_name="j", run_id="r", tags=reused)) == (
        f"its faultline process (pid {os.getpid()}) is gone"
    )
    # another host's run, or a run no faultline process tagged, is never judged from here
    other = {**me, owner.HOST: socket.gethostname() + "-other", owner.PID: str(gone.pid)}
    assert owner.dead_owner(dg.DagsterRun(job_name="j", run_id="r", tags=other)) is None
    assert owner.dead_owner(dg.DagsterRun(job_name="j", run_id="r", tags={})) is None
