"""Background lake writes and the frames remembered for the next step (``lake.writer``)."""

from __future__ import annotations

import os
import time

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from faultline.classify.ruleset import load_ruleset
from faultline.ingest.partition import core_events, ingest_partition
from faultline.lake import files as lake
from faultline.lake import writer as lake_writer

PART = ("northwind", "c1", "2026-11-24")
TABLES = {
    "raw_kernel_events": "kernel_events",
    "raw_job_events": "job_events",
    "raw_slurm_jobs": "jobs",
    "steps": "steps",
    "flight_recorder": "flight",
    "quarantine": "quarantine",
    "ingest_audit": "audit",
}


@pytest.fixture(autouse=True)
def _clean():
    lake_writer.forget()
    yield
    lake_writer.forget()


@pytest.fixture
def tables(landing):
    return ingest_partition(landing, *PART, rs=load_ruleset())


def test_a_remembered_frame_is_exactly_what_the_file_reads_back(tables, warehouse):
    wh = str(warehouse)
    with lake_writer.PartitionWriter(wh) as out:
        paths = out.write({table: getattr(tables, attr) for table, attr in TABLES.items()}, *PART)
    assert paths == {t: lake.partition_dir(wh, t, *PART) / lake.DATA_FILE for t in TABLES}
    for table in TABLES:
        hit = lake_writer.recent(lake.partition_dir(wh, table, *PART) / lake.DATA_FILE)
        assert hit is not None, table
        assert_frame_equal(hit, lake.read_partition(wh, table, *PART))
    ev = core_events(lake_writer.read(wh, "raw_kernel_events", *PART), lake_writer.read(wh, "raw_job_events", *PART))
    lake_writer.write_many(wh, {"events": ev}, *PART)
    assert ev.height == 8
    assert_frame_equal(lake_writer.read(wh, "events", *PART), lake.read_partition(wh, "events", *PART))


def test_a_file_replaced_by_another_writer_is_read_from_disk(tables, warehouse):
    wh = str(warehouse)
    lake_writer.write_many(wh, {"steps": tables.steps}, *PART)
    assert lake_writer.read(wh, "steps", *PART).height == tables.steps.height == 2
    lake.write_partition(wh, "steps", tables.steps.head(1), *PART)  # as another process would
    assert lake_writer.read(wh, "steps", *PART).height == 1
    (lake.partition_dir(wh, "steps", *PART) / lake.DATA_FILE).unlink()
    assert lake_writer.read(wh, "steps", *PART).height == 0


def test_a_partition_is_written_all_or_none(tables, warehouse):
    wh = str(warehouse)
    lake.write_partition(wh, "ingest_audit", tables.audit.head(3), *PART)
    before = (lake.partition_dir(wh, "ingest_audit", *PART) / lake.DATA_FILE).read_bytes()
    elsewhere = tables.steps.with_columns(cluster=pl.lit("c9"))  # rows of another partition
    with pytest.raises(ValueError, match="rows belong to another partition"):
        lake_writer.write_many(
            wh, {"ingest_audit": tables.audit, "flight_recorder": tables.flight, "steps": elsewhere}, *PART
        )
    assert (lake.partition_dir(wh, "ingest_audit", *PART) / lake.DATA_FILE).read_bytes() == before
    assert not (lake.partition_dir(wh, "flight_recorder", *PART) / lake.DATA_FILE).exists()
    assert not [p for p in warehouse.rglob("*") if p.is_file() and lake.TMP_MARK in p.name]


def test_after_a_failed_write_nothing_more_is_written_and_the_error_is_raised(tables, warehouse):
    wh = str(warehouse)
    elsewhere = tables.steps.with_columns(cluster=pl.lit("c9"))
    out = lake_writer.PartitionWriter(wh, threads=1)
    out.write({"steps": elsewhere}, *PART)
    with pytest.raises(ValueError, match="rows belong to another partition"):
        for day in ("2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30"):
            out.write({"ingest_audit": tables.audit.with_columns(date=pl.lit(None, pl.Date))}, *PART[:2], day)
            time.sleep(0.05)
    with pytest.raises(ValueError, match="rows belong to another partition"):
        out.close()
    written = (
        sorted(p.parent.name for p in (warehouse / "lake" / "ingest_audit").rglob(lake.DATA_FILE))
        if (warehouse / "lake" / "ingest_audit").exists()
        else []
    )
    assert len(written) <= 1  # at most the one queued before the failure was known
    assert not [p for p in warehouse.rglob("*") if p.is_file() and lake.TMP_MARK in p.name]


def test_the_step_error_wins_over_a_write_error(tables, warehouse):
    elsewhere = tables.steps.with_columns(cluster=pl.lit("c9"))
    with pytest.raises(KeyError, match="the step's own"):
        with lake_writer.PartitionWriter(str(warehouse)) as out:
            out.write({"steps": elsewhere}, *PART)
            raise KeyError("the step's own error")


def test_memory_is_bounded_oldest_frames_dropped_first(tables, warehouse, monkeypatch):
    wh = str(warehouse)
    size = int(lake.partition_frame("ingest_audit", tables.audit, *PART).estimated_size())
    monkeypatch.setattr(lake_writer, "RECENT_BYTES", 2 * size + size // 2)
    days = ["2026-11-24", "2026-11-25", "2026-11-26"]
    for day in days:
        audit = tables.audit.with_columns(date=pl.lit(None, pl.Date))
        lake_writer.write_many(wh, {"ingest_audit": audit}, *PART[:2], day)
    kept = [
        lake_writer.recent(lake.partition_dir(wh, "ingest_audit", *PART[:2], d) / lake.DATA_FILE) is not None
        for d in days
    ]
    assert kept == [False, True, True]
    assert os.path.isfile(lake.partition_dir(wh, "ingest_audit", *PART[:2], days[0]) / lake.DATA_FILE)
