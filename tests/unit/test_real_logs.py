"""Logs captured on a real H200 host (tests/fixtures/real): every line parsed, times agree."""

import datetime as dt
from pathlib import Path

import polars as pl

from faultline.ingest.lines import per_line_records
from faultline.ingest.parse import SourceContext, parse_file

REAL = Path(__file__).parents[1] / "fixtures" / "real"
DAY = dt.date(2026, 11, 30)


def _lines(name, kind="kernel", boots=None):
    res = parse_file(REAL / name, SourceContext(source=name, kind=kind, ref_date=DAY, boots=boots, full=True))
    assert res.balanced and res.quarantined == 0
    return res, per_line_records(res, name)


def test_the_same_ring_buffer_in_three_formats_gets_the_same_times():
    _, iso = _lines("dmesg_iso.log")
    _, ctime = _lines("dmesg_T.log")
    assert iso.height == ctime.height == 358
    assert set(iso["ts_source"]) == {"absolute"} and set(ctime["ts_source"]) == {"naive_utc"}
    t_iso = iso["ts"].str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ")
    t_ctime = ctime["ts"].str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ")
    assert ((t_iso - t_ctime).dt.total_seconds().abs() <= 1).all()
    # raw dmesg with the boot time taken from the first iso line lands on the iso times too
    first_raw = (REAL / "dmesg_raw.log").read_text().splitlines()[0]
    mono = float(first_raw.split("]")[0].split("[")[1])
    boot = t_iso[0].replace(tzinfo=dt.timezone.utc) - dt.timedelta(seconds=mono)
    _, raw = _lines("dmesg_raw.log", boots=[boot])
    assert set(raw["ts_source"]) == {"boot_offset"}
    t_raw = raw["ts"].str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ")
    assert ((t_iso - t_raw).dt.total_seconds().abs() <= 0.001).all()


def test_a_healthy_boot_is_all_benign():
    for name in ("dmesg_T.log", "dmesg_iso.log", "dmesg_raw.log"):
        res, _ = _lines(name)
        assert res.events.filter(pl.col("category") != "benign").height == 0, res.events.select("raw").head()


def test_real_pytorch_errors_are_the_users():
    oom, _ = _lines("torch_oom.log", kind="job")
    assert oom.events.select("category", "rule_id", "line_count").rows() == [("user_app", "cuda_out_of_memory", 4)]
    dsa, _ = _lines("torch_assert.log", kind="job")
    assert set(dsa.events["category"]) == {"user_app"}
    assert "cuda_device_side_assert" in set(dsa.events["rule_id"])


def test_real_nccl_info_is_benign_even_when_it_says_failed():
    res, lines = _lines("torch_nccl.log", kind="job")
    assert "Failed to initialize NET plugin IB" in (REAL / "torch_nccl.log").read_text()
    assert res.events.height == 0 and set(lines["category"]) == {"benign"}
