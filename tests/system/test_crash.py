"""``kill -9`` in the middle of a run never leaves a partial file where readers look, and a
clean rerun gives the same tables as a run that was never interrupted."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
from helpers.hashes import lake_hashes

from faultline.lake import files as lake
from faultline.lake.views import connect_readonly
from faultline.launch.local import run_pipeline
from faultline.schema import PARTITION, TABLES

SCRIPT = "import sys; from faultline.launch.local import run_pipeline; run_pipeline(sys.argv[1], sys.argv[2])"


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if lake.TMP_MARK in p.name] if root.exists() else []


def _assert_readers_see_whole_files(warehouse: Path) -> None:
    """Everything a reader can find is complete and schema-correct."""
    for path in (warehouse / "lake").rglob("*.parquet") if (warehouse / "lake").exists() else []:
        assert path.name == lake.DATA_FILE, path
        table = path.relative_to(warehouse / "lake").parts[0]
        with open(path, "rb") as f:
            df = pl.read_parquet(f)
        assert df.schema == pl.Schema({c: t for c, t in TABLES[table].items() if c not in PARTITION}), path
    if (warehouse / "faultline.duckdb").exists():
        con = connect_readonly(warehouse)
        for (view,) in con.execute("select view_name from duckdb_views() where not internal").fetchall():
            con.execute(f"select count(*) from {view}").fetchone()
        con.close()


def _kill_when_a_temp_file_appears(proc: subprocess.Popen, root: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if _temp_files(root / "lake") or any(lake.TMP_MARK in p.name for p in root.glob("*")):
            os.kill(proc.pid, signal.SIGKILL)
            return True
        time.sleep(0.001)
    return False


def test_kill_9_mid_run_then_clean_rerun(landing, tmp_path):
    clean = tmp_path / "clean"
    run_pipeline(landing, clean)
    want = lake_hashes(clean)

    crashed = tmp_path / "crashed"
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # Dagster's ephemeral scratch dies with the test
    rng = random.Random(20261124)
    killed_mid_run = 0
    for attempt in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(landing), str(crashed)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if attempt == 0:
            assert _kill_when_a_temp_file_appears(proc, crashed, timeout=30)
        else:
            time.sleep(rng.uniform(1.5, 4.0))
            proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, -signal.SIGKILL), err.decode()[-2000:]
        killed_mid_run += proc.returncode == -signal.SIGKILL
        _assert_readers_see_whole_files(crashed)
    assert killed_mid_run >= 2

    run_pipeline(landing, crashed)
    assert lake_hashes(crashed) == want
    assert _temp_files(crashed) == []
    _assert_readers_see_whole_files(crashed)
    a, b = connect_readonly(clean), connect_readonly(crashed)
    q = "select event_id, category from events order by event_id"
    assert a.execute(q).fetchall() == b.execute(q).fetchall()


def test_failed_write_leaves_the_old_file(warehouse, monkeypatch):
    df = pl.DataFrame({c: [] for c in TABLES["steps"]}, schema=TABLES["steps"])
    lake.write_partition(warehouse, "steps", df, "p", "c", "2026-11-24")
    before = lake_hashes(warehouse)

    def boom(self, *a, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", boom)
    try:
        lake.write_partition(warehouse, "steps", df, "p", "c", "2026-11-24")
    except OSError:
        pass
    assert lake_hashes(warehouse) == before and _temp_files(warehouse) == []


def test_concurrent_writers_of_one_partition_leave_one_whole_file(warehouse):
    """Two writers racing on a partition: the last replace wins, nothing is torn."""
    frames = [
        pl.DataFrame({"job_id": [str(i)] * n, "step": ["0"] * n})
        .with_columns([pl.lit(None, t).alias(c) for c, t in TABLES["steps"].items() if c not in ("job_id", "step")])
        .select(list(TABLES["steps"]))
        for i, n in ((1, 500), (2, 1500))
    ]
    errors = []

    def write(df):
        try:
            for _ in range(15):
                lake.write_partition(warehouse, "steps", df, "p", "c", "2026-11-24")
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f,)) for f in frames]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert lake.read_table(warehouse, "steps").height in (500, 1500)
    assert [p.name for p in lake.partition_dir(warehouse, "steps", "p", "c", "2026-11-24").iterdir()] == [
        "data.parquet"
    ]
