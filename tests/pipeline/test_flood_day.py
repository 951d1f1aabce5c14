"""The flood day (bench/density_day.py --flood, scaled down): an Xid 95 flood from one GPU is
one incident with every line counted; the Xid 45 storm after one NVLink Xid 74 flags no lemon
and no rack; the lake stays a small share of the raw bytes; every line is accounted for."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import polars as pl
import pytest

from faultline.lake import files as lake
from faultline.launch.local import run_pipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import density_day  # noqa: E402

SCALE = 0.1  # 80,000 Xid 95 lines, 5,000 Xid 45 lines on each of three nodes


@pytest.fixture(scope="module")
def flood(tmp_path_factory):
    root = tmp_path_factory.mktemp("flood")
    density_day.flood_day(root / "landing", nodes=8, scale=SCALE)
    run_pipeline(root / "landing", root / "warehouse", workers=1)
    return root


def test_the_flood_is_one_incident_counting_every_line(flood):
    inc = pl.read_parquet(flood / "warehouse" / "analytics" / "incidents.parquet")
    x95 = inc.filter(pl.col("xids").list.contains(95))
    assert x95.height == 1
    row = x95.row(0, named=True)
    assert (row["node"], row["category"], row["n_events"]) == ("node-0000", "gpu_memory", int(800_000 * SCALE))
    assert dt.timedelta(minutes=19) < row["last_ts"] - row["first_ts"] <= dt.timedelta(minutes=20)


def test_the_storm_flags_no_lemon_and_no_rack(flood):
    wh = flood / "warehouse" / "analytics"
    assert pl.read_parquet(wh / "lemon_nodes.parquet").height == 0
    assert pl.read_parquet(wh / "rack_hotspots.parquet").height == 0
    inc = pl.read_parquet(wh / "incidents.parquet")
    nvlink = inc.filter(pl.col("category") == "nvlink")
    assert nvlink["node"].to_list() == ["node-0001"] and set(nvlink["xids"][0]) == {74, 45}


def test_every_line_is_accounted_for_and_the_lake_stays_small(flood):
    audit = lake.read_table(flood / "warehouse", "ingest_audit")
    assert (audit["lines_read"] == audit["event_lines"] + audit["benign"] + audit["quarantined"]).all()
    raw = sum(p.stat().st_size for p in (flood / "landing").rglob("*.log"))
    events = lake.read_table(flood / "warehouse", "events")
    assert int(events["repeats"].sum()) == int(audit["event_lines"].sum())
    assert events.height < 200
    parquet = sum(p.stat().st_size for p in (flood / "warehouse" / "lake").rglob("*.parquet"))
    assert parquet < 0.10 * raw
