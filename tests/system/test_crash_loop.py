"""Kill -9 a run again and again, in each of its phases, and run out of disk mid-write:
readers only ever see whole files, and a clean rerun always gives the tables of a clean run.

The killed runs are subprocesses running ``run_pipeline``. A child marks when it enters the
phase it is to die in (parse, lake write, analytics write, warehouse refresh) and stretches
that phase a little so that the parent's kill, after a random delay, lands inside it; one
more kill comes at a random time since start.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from helpers.hashes import frame_hash, lake_hashes
from helpers.landing import make_landing

from faultline.lake import files as lake
from faultline.lake.views import connect_readonly, db_path
from faultline.launch.local import run_pipeline
from faultline.schema import PARTITION, TABLES

CHILD = r"""
import os, sys, time
landing, warehouse, phase, marker = sys.argv[1:5]
import polars as pl
from faultline.lake import files as lake, views as wh
from faultline.ingest import parse
from faultline.launch.local import run_pipeline

STRETCH = 0.05

def mark():
    if not os.path.exists(marker):
        with open(marker + ".part", "w") as f:
            f.write(phase)
        os.replace(marker + ".part", marker)

if phase == "parse":                      # files read, their lines not yet parsed
    parse_scans = parse.parse_scans
    def slow_parse_scans(*a, **k):
        mark(); time.sleep(STRETCH)
        return parse_scans(*a, **k)
    parse.parse_scans = slow_parse_scans
elif phase in ("write", "analytics"):     # a temporary file written, not yet renamed
    where = os.sep + ("lake" if phase == "write" else "analytics") + os.sep
    write_parquet = pl.DataFrame.write_parquet
    def slow_write_parquet(self, file, *a, **k):
        out = write_parquet(self, file, *a, **k)
        name = str(getattr(file, "name", file))
        if lake.TMP_MARK in name and where in name:
            mark(); time.sleep(STRETCH)
        return out
    pl.DataFrame.write_parquet = slow_write_parquet
elif phase == "refresh":                  # the view database being built aside
    tables_present = wh.tables_present
    def slow_tables_present(*a, **k):
        mark(); time.sleep(4 * STRETCH)
        return tables_present(*a, **k)
    wh.tables_present = slow_tables_present
run_pipeline(landing, warehouse)
"""


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if lake.TMP_MARK in p.name] if root.exists() else []


def _analytics_hashes(warehouse: Path) -> dict[str, str]:
    return {p.name: frame_hash(pl.read_parquet(p)) for p in sorted(lake.analytics_root(warehouse).glob("*.parquet"))}


def _check_whole_files(warehouse: Path) -> None:
    """Everything a reader can find is complete: data files parse with their table's schema,
    analytics files parse, the view database opens and every view answers."""
    for path in sorted(lake.lake_root(warehouse).rglob("*.parquet")):
        assert path.name == lake.DATA_FILE, path
        table = path.relative_to(lake.lake_root(warehouse)).parts[0]
        with open(path, "rb") as f:
            df = pl.read_parquet(f)
        assert df.schema == pl.Schema({c: t for c, t in TABLES[table].items() if c not in PARTITION}), path
    for path in sorted(lake.analytics_root(warehouse).glob("*.parquet")):
        with open(path, "rb") as f:
            pl.read_parquet(f)
    if db_path(warehouse).exists():
        con = connect_readonly(warehouse)
        try:
            for (view,) in con.execute("select view_name from duckdb_views() where not internal").fetchall():
                con.execute(f"select count(*) from {view}").fetchone()
        finally:
            con.close()


class Reader(threading.Thread):
    """Reads everything a reader can find, over and over, while runs come and die."""

    def __init__(self, warehouse: Path):
        super().__init__(daemon=True)
        self.warehouse, self.stop, self.errors, self.passes = warehouse, threading.Event(), [], 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                _check_whole_files(self.warehouse)
                self.passes += 1
            except FileNotFoundError:
                pass  # listed, then replaced or swept before it was opened
            except Exception as exc:  # noqa: BLE001
                self.errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.02)


def _kill_in(phase: str, landing: Path, warehouse: Path, tmp: Path, rng: random.Random, i: int) -> tuple[bool, str]:
    script = tmp / "child.py"
    script.write_text(CHILD)
    marker = tmp / f"marker-{i}"
    env = {**os.environ, "TMPDIR": str(tmp), "FAULTLINE_WORKERS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(landing), str(warehouse), phase, str(marker)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        if phase == "random":
            time.sleep(rng.uniform(1.0, 4.0))
        else:
            deadline = time.monotonic() + 60
            while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            assert marker.exists(), f"{phase}: the child never got there ({proc.poll()})"
            time.sleep(rng.uniform(0.0, 0.04))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, -signal.SIGKILL), err.decode()[-3000:]
    return proc.returncode == -signal.SIGKILL, err.decode()[-500:]


#: rounds of the five kills (CI: one); ``FAULTLINE_CRASH_ROUNDS=20 pytest tests/system/test_crash_loop.py``
#: for a long run
ROUNDS = int(os.environ.get("FAULTLINE_CRASH_ROUNDS", "1"))


def test_kill_9_in_every_phase_then_clean_rerun(tmp_path):
    landing = make_landing(tmp_path / "landing")
    clean = tmp_path / "clean"
    run_pipeline(landing, clean)
    want, want_analytics = lake_hashes(clean), _analytics_hashes(clean)

    crashed = tmp_path / "crashed"
    rng = random.Random(20261130)
    phases = []
    for _ in range(ROUNDS):
        block = ["parse", "write", "analytics", "refresh", "random"]
        rng.shuffle(block)
        phases += block
    reader = Reader(crashed)
    reader.start()
    kills = []
    try:
        for i, phase in enumerate(phases):
            killed, _ = _kill_in(phase, landing, crashed, tmp_path, rng, i)
            kills.append((phase, killed))
            _check_whole_files(crashed)
            run_pipeline(landing, crashed)  # the clean rerun
            assert lake_hashes(crashed) == want, phase
            assert _analytics_hashes(crashed) == want_analytics, phase
            assert _temp_files(crashed) == [], phase
            _check_whole_files(crashed)
    finally:
        reader.stop.set()
        reader.join(30)
    assert all(killed for phase, killed in kills if phase != "random"), kills
    assert sum(killed for _, killed in kills) >= 4 * ROUNDS, kills
    print(f"kills: {sum(k for _, k in kills)} of {len(kills)} runs; reader passes {reader.passes}, errors 0")
    assert reader.errors == [], reader.errors[:5]
    assert reader.passes > 10
    a, b = connect_readonly(clean), connect_readonly(crashed)
    q = "select event_id, category from events order by event_id"
    assert a.execute(q).fetchall() == b.execute(q).fetchall()


# --------------------------------------------------------------------------- disk full


@pytest.mark.parametrize("where", ["write", "replace"])
def test_disk_full_fails_the_run_cleanly_and_keeps_the_old_partition(tmp_path, monkeypatch, where):
    """ENOSPC while one partition's file is written (half a file on disk) or renamed: the run
    fails with that error, the partition's previous file is unchanged, nothing is left over."""
    landing, wh = make_landing(tmp_path / "landing"), tmp_path / "warehouse"
    run_pipeline(landing, wh)
    before = lake_hashes(wh)
    # a change the run would write if the disk let it
    node = landing / "northwind" / "c1" / "2026-11-24" / "kernel" / "node-a02.log"
    node.write_text(
        node.read_text() + "2026-11-24T06:00:00+0000 node-a02 kernel: NVRM: Xid (PCI:0000:3b:00): 79, "
        "pid=1, name=python3, GPU has fallen off the bus.\n"
    )
    target = lake.partition_dir(wh, "raw_kernel_events", "northwind", "c1", "2026-11-24")
    disk_full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    hits = []
    if where == "write":
        write_parquet = pl.DataFrame.write_parquet

        def full_disk_write(self, file, *a, **k):
            name = Path(str(getattr(file, "name", file)))
            if name.parent == target:
                hits.append(name)
                file.write(b"PAR1" + b"\0" * 4096)  # half a file, then the disk is full
                raise disk_full
            return write_parquet(self, file, *a, **k)

        monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk_write)
    else:
        replace = os.replace

        def full_disk_replace(src, dst, *a, **k):
            if Path(dst).parent == target:
                hits.append(Path(dst))
                raise disk_full
            return replace(src, dst, *a, **k)

        monkeypatch.setattr(os, "replace", full_disk_replace)

    with pytest.raises(OSError) as err:
        run_pipeline(landing, wh)
    assert hits, "the disk-full hook never fired"
    assert err.value.errno == errno.ENOSPC and "No space left on device" in str(err.value)
    assert lake_hashes(wh) == before  # the old file, untouched
    assert _temp_files(wh) == []  # the half-written temp file is gone
    _check_whole_files(wh)

    monkeypatch.undo()  # disk freed: the rerun writes the change
    run_pipeline(landing, wh)
    after = lake_hashes(wh)
    assert (
        after["raw_kernel_events/provider=northwind/cluster=c1/date=2026-11-24"]
        != before["raw_kernel_events/provider=northwind/cluster=c1/date=2026-11-24"]
    )
